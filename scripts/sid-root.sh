#!/bin/bash
# Build a Debian sid root filesystem with python3.14, python3.15 and
# python3-torch (2.x): the "modern stack" the Python and training tests also
# run on, inside their own mount namespace while gpusample stays outside (a
# container-like case, every file lookup through /proc/PID/root).
#
# Usage: scripts/sid-root.sh [ROOT]   (default ${GS_SID_ROOT:-/var/cache/gpusample/sid-root})
# Cached: a root that finished (stamp file present) is left alone, so a
# second run costs nothing.  About 2 GB and 4 minutes on first run.  Root only.
set -euo pipefail

ROOT="${1:-${GS_SID_ROOT:-/var/cache/gpusample/sid-root}}"
STAMP="$ROOT/.gpusample-sid-root"
PKGS="python3.14 python3.15 python3-torch python3-numpy"

if [ -f "$STAMP" ]; then
	exit 0
fi
# shellcheck source=scripts/debootstrap-root.sh
source "$(dirname "$0")/debootstrap-root.sh"
root_debootstrap sid-root "$ROOT" sid "$PKGS" || exit 1
# Docs and caches are not needed to run the jobs.
rm -rf "$tmp/var/cache/apt/archives/"*.deb "$tmp/usr/share/doc" "$tmp/usr/share/man"
# Each interpreter starts, and torch imports (with /proc, as the tests run
# it: without, torch's cpuinfo complains), in a private mount namespace.
unshare -m --propagation private sh -c '
	mount --rbind /proc "$0/proc" || exit 1
	for py in python3.14 python3.15; do
		chroot "$0" "$py" -c "import sys" || exit 1
	done
	chroot "$0" python3 -c "import torch"' "$tmp" >/dev/null || {
	echo "sid-root: python3.14 / python3.15 / torch do not start in $tmp" >&2
	exit 1
}
date -u +%FT%TZ >"$tmp/.gpusample-sid-root"
mv "$tmp" "$ROOT"
trap - EXIT
echo "sid-root: ready: $ROOT" >&2
