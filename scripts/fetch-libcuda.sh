#!/bin/bash
# Unpack Debian's real CUDA driver library (non-free libcuda1) into DEST
# (default build/realdrv) for tests/integration/t_gpu_real_driver.sh.  Never
# installed system-wide: a private apt configuration (sources, lists, cache
# under DEST/.apt) adds bookworm non-free (from the mirror the
# machine's apt uses, scripts/debian-mirror.sh) for this one download only, then
# `apt-get download` + `dpkg -x`.  Idempotent; retries the network steps.
set -euo pipefail
DEST=${1:-$(cd "$(dirname "$0")/.." && pwd)/build/realdrv}
LIB=$DEST/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1
if [ -e "$LIB" ]; then
	echo "fetch-libcuda: $LIB already there"
	exit 0
fi
A=$DEST/.apt
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc"
# shellcheck source=scripts/debian-mirror.sh
source "$(dirname "$0")/debian-mirror.sh"
mirror=$(debian_mirror) || exit 1
echo "deb $mirror bookworm non-free" > "$A/etc/sources.list"
apt_() {
	apt-get -q -o Dir::Etc::sourcelist="$A/etc/sources.list" -o Dir::Etc::sourceparts=/dev/null \
		-o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o APT::Sandbox::User=root "$@"
}
retry() {
	for i in 1 2 3; do "$@" && return 0; echo "fetch-libcuda: retry $i: $*" >&2; sleep $((i * 5)); done
	return 1
}
retry apt_ update
(cd "$A" && rm -f libcuda1_*.deb && retry apt_ download libcuda1)
dpkg -x "$A"/libcuda1_*.deb "$DEST"
[ -e "$LIB" ] || { echo "fetch-libcuda: no libcuda.so.1 in the package" >&2; exit 1; }
echo "fetch-libcuda: $(readlink -f "$LIB")"
