#!/bin/bash
# Build gpusample and the GPU agent against Debian 11's glibc 2.31 (make
# compat; make deb packages this build): the binaries then start on hosts
# and load into jobs whose glibc is 2.31 or newer (Debian 11, Ubuntu 20.04,
# RHEL 9, Amazon Linux 2023).
#
# The BPF objects and skeletons, and the HTML assets, are made on this host
# (clang, bpftool: their output does not depend on glibc) into BUILD; the C
# code is compiled in the Debian 11 root (scripts/bullseye-root.sh, with
# libbpf 1.x built from source in its /usr/local) by its gcc, linking
# libbpf, libdw, libelf and the compressors statically as the host build
# does.  The checkout and CUDA's headers are bound into the root in a
# private mount namespace; the root itself is not written.
#
# Usage: scripts/build-compat.sh BUILD   (root only)
# Writes BUILD/compat/gpusample and BUILD/compat/libgpusample_agent.so, then
# checks them with scripts/glibc-floor.sh (no symbol newer than 2.31).
set -euo pipefail
BUILD=${1:?usage: build-compat.sh BUILD}
SRC=$(cd "$(dirname "$0")/.." && pwd)
ROOT_FS=${GS_BULLSEYE_ROOT:-/var/cache/gpusample/bullseye-root}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
if [ "$(id -u)" -ne 0 ]; then
	echo "build-compat: run as root (sudo make compat): it builds in a chroot" >&2
	exit 1
fi
[ -f "$CUDA_INC/cupti.h" ] || {
	echo "build-compat: CUDA's headers missing ($CUDA_INC/cupti.h; set CUDA_INC=DIR)" >&2
	exit 1
}
"$SRC/scripts/bullseye-root.sh" "$ROOT_FS"
case $BUILD in /*) ;; *) BUILD=$SRC/$BUILD ;; esac
case $BUILD in
"$SRC"/*) ;;
*)
	echo "build-compat: BUILD ($BUILD) must lie inside the checkout ($SRC)" >&2
	exit 1
	;;
esac
rel=${BUILD#"$SRC"/}

# The host's generated inputs: skeletons, vmlinux.h, HTML assets.
skels=$(cd "$SRC" && ls bpf/*.bpf.c | sed "s|bpf/\(.*\)\.bpf\.c|$rel/\1.skel.h|")
# shellcheck disable=SC2086
make -s -C "$SRC" BUILD="$rel" $skels "$rel/html_assets.h"
mkdir -p "$BUILD/compat"
for f in $skels "$rel/html_assets.h"; do
	cmp -s "$SRC/$f" "$BUILD/compat/${f##*/}" || cp "$SRC/$f" "$BUILD/compat/"
done

# In the root: the checkout at /src, CUDA's headers at /cuda-include, and
# that root's gcc; BPFTOOL/CLANG false: nothing BPF is made there.
unshare -m --propagation private sh -c '
r=$0 src=$1 cuda=$2 rel=$3
mount --bind "$src" "$r/src" && mount --bind -o ro "$cuda" "$r/cuda-include" || exit 1
mount -t proc proc "$r/proc" || exit 1
exec chroot "$r" make -s -C /src BUILD="$rel/compat" CC=gcc BPFTOOL=false CLANG=false WERROR= \
	CUDA_INC=/cuda-include -j"$(nproc)" "$rel/compat/gpusample" "$rel/compat/libgpusample_agent.so"' \
	"$ROOT_FS" "$SRC" "$CUDA_INC" "$rel"
"$SRC/scripts/glibc-floor.sh" 2.31 "$BUILD/compat/gpusample" "$BUILD/compat/libgpusample_agent.so"
