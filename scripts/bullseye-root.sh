#!/bin/bash
# Build a Debian 11 (bullseye) root filesystem: glibc 2.31 and Python 3.9,
# the oldest baseline gpusample supports.  Two uses:
#   - the compat build (scripts/build-compat.sh, make compat / make deb)
#     compiles gpusample and the agent here, so they ask for no glibc
#     symbol newer than 2.31;
#   - t_deb_bullseye.sh installs the package here and profiles a job.
# Bullseye's libbpf (0.3) is too old for gpusample, so libbpf 1.x is built
# from the Debian source package of the host's mirror (apt-get source with
# its own lists: apt checks the signed Sources' checksums) into /usr/local
# of the root, static only.
#
# Usage: scripts/bullseye-root.sh [ROOT]
#        (default ${GS_BULLSEYE_ROOT:-/var/cache/gpusample/bullseye-root})
# Cached: a root that finished (stamp file present) is left alone.  About
# 500 MB and 3 minutes on first run.  Root only.
set -euo pipefail

ROOT="${1:-${GS_BULLSEYE_ROOT:-/var/cache/gpusample/bullseye-root}}"
STAMP="$ROOT/.gpusample-bullseye-root"
PKGS="gcc libc6-dev make pkg-config libelf-dev libdw-dev zlib1g-dev libzstd-dev liblzma-dev
 libbz2-dev libiberty-dev systemtap-sdt-dev dpkg-dev python3"
# libbpf's source: Debian 12's package (upstream 1.1.2, what the host builds with).
LIBBPF_SRC=${GS_LIBBPF_SRC:-libbpf/bookworm}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

if [ -f "$STAMP" ]; then
	exit 0
fi
for c in apt-get dpkg-source; do
	command -v "$c" >/dev/null || {
		echo "bullseye-root: $c missing (apt, dpkg-dev: sudo make deps installs them)" >&2
		exit 1
	}
done
# shellcheck source=scripts/debootstrap-root.sh
source "$(dirname "$0")/debootstrap-root.sh"
root_debootstrap bullseye-root "$ROOT" bullseye "$PKGS" || exit 1

# libbpf's Debian source through apt, with lists of its own (the host's apt
# state is not touched); dpkg-source unpacks it with Debian's patches.
src=$tmp.src
mkdir -p "$src/lists/partial" "$src/cache/archives/partial"
echo "deb-src [signed-by=$KEYRING] $mirror ${LIBBPF_SRC#*/} main" >"$src/sources.list"
aptc=(-o "Dir::Etc::SourceList=$src/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	-o "Dir::State::Lists=$src/lists" -o "Dir::Cache=$src/cache" -o APT::Sandbox::User=root -q)
(cd "$src" && apt-get "${aptc[@]}" update && apt-get "${aptc[@]}" source --download-only "$LIBBPF_SRC") \
	>"$src/apt.log" 2>&1 || {
	tail -20 "$src/apt.log" >&2
	echo "bullseye-root: apt-get source $LIBBPF_SRC failed from $mirror (a deb-src of that suite is needed)" >&2
	exit 1
}
dsc=$(ls "$src"/libbpf_*.dsc)
dpkg-source --no-check -x "$dsc" "$tmp/usr/src/libbpf" >"$src/apt.log" 2>&1 || {
	cat "$src/apt.log" >&2
	exit 1
}
ver=$(sed -n 's/^Version: //p' "$dsc")
case $ver in
*:0.* | 0.*)
	echo "bullseye-root: $LIBBPF_SRC is libbpf $ver; 1.x is needed (GS_LIBBPF_SRC=libbpf/SUITE)" >&2
	exit 1
	;;
esac
chroot "$tmp" make -s -C /usr/src/libbpf/src BUILD_STATIC_ONLY=1 PREFIX=/usr/local \
	LIBSUBDIR=lib OBJDIR=/tmp/libbpf-obj install install_uapi_headers >"$src/make.log" 2>&1 || {
	tail -20 "$src/make.log" >&2
	echo "bullseye-root: building libbpf $ver failed" >&2
	exit 1
}
rm -rf "$tmp/tmp/libbpf-obj"
# mount points of the compat build (scripts/build-compat.sh)
mkdir -p "$tmp/src" "$tmp/cuda-include"
echo "$ver" >"$tmp/usr/local/lib/libbpf.version"
rm -rf "$tmp/var/cache/apt/archives/"*.deb "$tmp/usr/share/doc" "$tmp/usr/share/man"
chroot "$tmp" python3 -c "import sys; assert sys.version_info[:2] == (3, 9)" || {
	echo "bullseye-root: python3 in $tmp is not 3.9" >&2
	exit 1
}
date -u +%FT%TZ >"$tmp/.gpusample-bullseye-root"
mv "$tmp" "$ROOT"
echo "bullseye-root: ready: $ROOT (libbpf $ver in /usr/local)" >&2
