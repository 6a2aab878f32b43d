# Shared helpers for integration tests (sourced).  Runs from the repo root.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
ROOT=$(pwd)
BUILD=${BUILD:-build}
GS=$ROOT/$BUILD/gpusample
WL=$ROOT/$BUILD/workloads
T=$(mktemp -d /tmp/gs-test.XXXXXX)
export HOME=${HOME:-/root}
export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOCACHE=${GOCACHE:-/tmp/gs-gocache}
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${GS_KEEP:-}" ] || rm -rf "$T"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
ok() { echo "ok: $*"; }
# pprof as a user would run it.
pprof() { go tool pprof "$@" 2>"$T/pprof.err"; }
# pprof_stacks PROFILE [pprof args]: one line per sample as read by the real
# viewer, "VALUE<TAB>LABELS<TAB>leaf;...;root" (tests/tools/pprof_stacks.py).
pprof_stacks() { "$ROOT/tests/tools/pprof_stacks.py" "$@" 2>"$T/pprof.err"; }
# Fraction check: ratio a/b >= min (floating point via awk).
# SIGKILL a process and all its descendants, deepest first seen last:
# a launcher's grandchildren (multiprocessing's forkserver and resource
# tracker, a rank's workers) outlive `pkill -P` and the test otherwise.
kill_tree() {
	local p kids
	kill -STOP "$1" 2>/dev/null
	kids=$(pgrep -P "$1")
	for p in $kids; do kill_tree "$p"; done
	kill -KILL "$1" 2>/dev/null
}
ratio_at_least() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{ if (b==0 || a/b < m) exit 1 }'; }
# Start gpusample in the background with stderr to $T/gs.err and wait until
# it samples (BPF verification can take a few seconds).  Sets $gs.
gs_start() {
	"$GS" "$@" 2>"$T/gs.err" &
	gs=$!
	for _ in $(seq 1 300); do
		grep -q '^gpusample: sampling' "$T/gs.err" 2>/dev/null && return 0
		kill -0 "$gs" 2>/dev/null || { cat "$T/gs.err"; fail "gpusample exited before sampling"; }
		sleep 0.1
	done
	fail "gpusample did not start sampling within 30 s: $(cat "$T/gs.err")"
}
# Wait for the background gpusample; fail on a non-zero exit.
gs_wait() { wait "$gs" || { cat "$T/gs.err"; fail "gpusample exited with $?"; }; }
