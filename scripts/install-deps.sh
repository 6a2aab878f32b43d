#!/bin/bash
# Install what gpusample needs to build, test and benchmark on Debian 12.
# Idempotent; run as root (sudo).  Used by `make deps` and .ci/run.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: run as root (sudo make deps, or make deps as root)" >&2
	exit 1
fi

BUILD_PKGS="clang llvm gcc g++ make pkg-config bpftool libbpf-dev libelf-dev libdw-dev
 zlib1g-dev libzstd-dev liblzma-dev libbz2-dev libiberty-dev systemtap-sdt-dev dpkg-dev"
TEST_PKGS="libcriterion-dev golang-go protobuf-compiler python3-torch chromium
 linux-perf bpftrace jq procps file qemu-system-x86 busybox-static cpio debian-archive-keyring
 debootstrap graphviz debuginfod libdebuginfod1 curl time lintian man-db bash-completion"
BENCH_PKGS="bpfcc-tools linux-headers-amd64"

need=""
for p in $BUILD_PKGS $TEST_PKGS ${GS_BENCH_DEPS:+$BENCH_PKGS}; do
	dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $need
fi

# npm tools used by the tests: speedscope (importer + schema) and ajv.
NPM_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/node_modules"
if [ ! -d "$NPM_DIR/speedscope" ] || [ ! -d "$NPM_DIR/ajv" ]; then
	if command -v npm >/dev/null; then
		(cd "$(dirname "$NPM_DIR")" && npm install --no-audit --no-fund --silent \
			speedscope@1.25.0 ajv@8 >/dev/null)
	else
		apt-get install -y -q nodejs npm
		(cd "$(dirname "$NPM_DIR")" && npm install --no-audit --no-fund --silent \
			speedscope@1.25.0 ajv@8 >/dev/null)
	fi
fi
# The real CUDA driver library (no GPU needed) for t_gpu_real_driver.sh,
# unpacked into the build folder, never installed.
"$(dirname "$0")/fetch-libcuda.sh" "$(cd "$(dirname "$0")/.." && pwd)/${BUILD:-build}/realdrv"
# Debian's cloud kernels for t_kernel_matrix.sh (scripts/kernel-matrix.sh),
# into its own cache (GS_KERNEL_CACHE); downloads only what is missing.
"$(dirname "$0")/kernel-matrix.sh" --fetch
# The Debian sid root (python3.14, python3.15, PyTorch 2.x) the Python tests
# also run in, as a container would (cached: a no-op once built).
"$(dirname "$0")/sid-root.sh"
echo "install-deps: ok"
