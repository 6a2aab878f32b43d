#!/bin/bash
# Build the Debian package gpusample_VERSION_ARCH.deb from a finished build
# (make deb): gpusample, the GPU agent, the man page and bash completion,
# laid out as Debian policy asks, with dpkg-shlibdeps' libc dependency and
# dpkg-deb (root-owned files, no fakeroot needed).
#
# Usage: scripts/build-deb.sh BUILD VERSION [BIN]
#   BIN: the folder with gpusample and libgpusample_agent.so (default BUILD;
#   make deb gives BUILD/compat, the glibc 2.31 build of make compat).
# Environment: GS_SHLIBDEPS_ROOT (a root to run dpkg-shlibdeps in, below),
# DEB_MAINTAINER (default: the last commit's author),
# SOURCE_DATE_EPOCH (file dates; default: the last commit's time).
# Writes BUILD/gpusample_VERSION_ARCH.deb; prints its path.
set -euo pipefail
BUILD=${1:?usage: build-deb.sh BUILD VERSION}
VERSION=${2:?usage: build-deb.sh BUILD VERSION [BIN]}
BIN=${3:-$BUILD}
SRC=$(cd "$(dirname "$0")/.." && pwd)
for f in "$BIN/gpusample" "$BIN/libgpusample_agent.so" "$BUILD/gpusample.1"; do
	[ -s "$f" ] || { echo "build-deb: $f missing (make compat $BUILD/gpusample.1)" >&2; exit 1; }
done
for c in dpkg-deb dpkg-shlibdeps dpkg-architecture strip gzip; do
	command -v "$c" >/dev/null || { echo "build-deb: $c missing (apt install dpkg-dev binutils)" >&2; exit 1; }
done
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
MAINT=${DEB_MAINTAINER:-$(git -C "$SRC" log -1 --format='%an <%ae>' 2>/dev/null || true)}
[ -n "$MAINT" ] || { echo "build-deb: set DEB_MAINTAINER='Name <email>'" >&2; exit 1; }
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$SRC" log -1 --format=%ct 2>/dev/null || date +%s)}

W=$(cd "$BUILD" && pwd)/deb
R=$W/root
rm -rf "$W"
install -d -m 0755 "$R/DEBIAN" "$R/usr/bin" "$R/usr/lib/gpusample" "$R/usr/share/man/man1" \
	"$R/usr/share/bash-completion/completions" "$R/usr/share/doc/gpusample" \
	"$R/usr/share/lintian/overrides"
# The agent is found next to gpusample as ../lib/gpusample/ (gpu/gpu_host.c).
install -m 0755 "$BIN/gpusample" "$R/usr/bin/gpusample"
install -m 0644 "$BIN/libgpusample_agent.so" "$R/usr/lib/gpusample/libgpusample_agent.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
	"$R/usr/bin/gpusample" "$R/usr/lib/gpusample/libgpusample_agent.so"
gzip -9n < "$BUILD/gpusample.1" > "$R/usr/share/man/man1/gpusample.1.gz"
install -m 0644 "$SRC/packaging/gpusample.bash-completion" \
	"$R/usr/share/bash-completion/completions/gpusample"
install -m 0644 "$SRC/packaging/copyright" "$R/usr/share/doc/gpusample/copyright"
# lintian's findings that are choices, each with its reason.
install -m 0644 "$SRC/packaging/lintian-overrides" "$R/usr/share/lintian/overrides/gpusample"
# A native package's changelog (Debian's format): this version's entry.
{
	echo "gpusample ($VERSION) unstable; urgency=medium"
	echo
	echo "  * Release $VERSION (see README.md)."
	echo
	echo " -- $MAINT  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$R/usr/share/doc/gpusample/changelog.gz"

# Depends from the binaries' own needs (libc6 (>= the newest symbol version)),
# read from the symbols files of the glibc they were built against: with
# GS_SHLIBDEPS_ROOT (make deb: the Debian 11 root of the compat build)
# dpkg-shlibdeps runs there, since this host's libc6 symbols file dates
# some old symbols by later changes (sysconf@GLIBC_2.2.5: 2.34).
mkdir -p "$W/debian"
printf 'Source: gpusample\n\nPackage: gpusample\nArchitecture: any\n' > "$W/debian/control"
shlibdeps() {
	if [ -n "${GS_SHLIBDEPS_ROOT:-}" ]; then
		unshare -m --propagation private sh -c 'mount --bind "$1" "$0/src" &&
			exec chroot "$0" sh -c "cd /src && exec dpkg-shlibdeps -O -e root/usr/bin/gpusample \
				-e root/usr/lib/gpusample/libgpusample_agent.so"' "$GS_SHLIBDEPS_ROOT" "$W"
	else
		(cd "$W" && dpkg-shlibdeps -O -e root/usr/bin/gpusample \
			-e root/usr/lib/gpusample/libgpusample_agent.so)
	fi
}
deps=$(shlibdeps 2>"$W/shlibdeps.err" | sed -n 's/^shlibs:Depends=//p') ||
	{ cat "$W/shlibdeps.err" >&2; exit 1; }
[ -n "$deps" ] || { echo "build-deb: dpkg-shlibdeps found no dependency" >&2; cat "$W/shlibdeps.err" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$R" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@DEPENDS@/$deps/" \
	-e "s/@SIZE@/$size/" -e "s|@MAINTAINER@|$MAINT|" "$SRC/packaging/control" > "$R/DEBIAN/control"
(cd "$R" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$R/DEBIAN/md5sums"
chmod 0644 "$R/DEBIAN/control" "$R/DEBIAN/md5sums"
find "$R" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0 touch -h -d "@$SOURCE_DATE_EPOCH"
out=$BUILD/gpusample_${VERSION}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$R" "$out" >/dev/null
echo "$out"
