#!/bin/bash
# Install what gpusample needs on Debian 12.  Idempotent; run as root (sudo).
#
# Usage: scripts/install-deps.sh [build|demo|test]
#   build (default; make deps): the packages that build gpusample and the
#         Debian package (make deb, which builds in a Debian 11 root made
#         with debootstrap); gpusample itself needs only libc to run.
#   demo  (make demo): build + python3-torch for the bundled training loop.
#   test  (make test-deps, used by make test and .ci/run): demo + the tests'
#         packages, npm's speedscope and ajv, the real CUDA driver library,
#         Debian's kernels for the QEMU matrix, the Debian sid root and the
#         Debian 11 root (make deb's compat build, t_deb_bullseye).
# GS_BENCH_DEPS=1 adds the benchmarks' packages (make bench).
set -euo pipefail

set_=${1:-build}
case $set_ in
build | demo | test) ;;
*)
	echo "install-deps: unknown set '$set_' (build, demo or test)" >&2
	exit 2
	;;
esac
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: run as root (sudo make deps, or make deps as root)" >&2
	exit 1
fi

BUILD_PKGS="clang llvm gcc g++ make pkg-config bpftool libbpf-dev libelf-dev libdw-dev
 zlib1g-dev libzstd-dev liblzma-dev libbz2-dev libiberty-dev systemtap-sdt-dev dpkg-dev
 debootstrap debian-archive-keyring"
DEMO_PKGS="python3-torch"
TEST_PKGS="libcriterion-dev golang-go protobuf-compiler chromium
 linux-perf bpftrace jq procps file qemu-system-x86 busybox-static cpio graphviz debuginfod libdebuginfod1 curl time lintian man-db bash-completion"
BENCH_PKGS="bpfcc-tools linux-headers-amd64"

need=""
want=$BUILD_PKGS
[ "$set_" = build ] || want="$want $DEMO_PKGS"
[ "$set_" != test ] || want="$want $TEST_PKGS"
for p in $want ${GS_BENCH_DEPS:+$BENCH_PKGS}; do
	dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $need
fi

if [ "$set_" != test ]; then
	echo "install-deps: ok ($set_)"
	exit 0
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
# The Debian 11 root (glibc 2.31, Python 3.9, libbpf 1.x built there): make
# deb compiles in it and t_deb_bullseye installs the package in it (cached:
# about 4 minutes and 500 MB once).
"$(dirname "$0")/bullseye-root.sh"
echo "install-deps: ok (test)"
