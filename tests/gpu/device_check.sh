#!/bin/bash
# The GPU device check lives in the device kit now: build it here with
# `make devkit` (build/devkit: gpusample, the agent, pcsamp_probe, the
# workload, check.sh), copy the folder to the GPU host and run
#   sudo build/devkit/check.sh [OUT_DIR]
# there (needs only a driver, Python and PyTorch).  On a development
# machine this script does both steps; --double runs the check on the
# CUDA/CUPTI doubles.
set -eu
cd "$(dirname "$0")/../.."
make -s BUILD="${BUILD:-build}" devkit
exec "${BUILD:-build}/devkit/check.sh" "$@"
