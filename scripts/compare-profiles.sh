#!/bin/bash
# Do two trees make the same profiles from the same inputs?  The unit tests
# that build whole profiles from fixed inputs (join, cubins, thread roles,
# dump, runtimes notes) write them when GS_KEEP_PROFILES is set
# (tests/unit/keep_profile.h); this builds those tests at BASE (a commit
# with that hook) in a temporary worktree and in this tree, runs both, and
# compares every profile byte for byte.  For refactors: outputs must not move.
#   scripts/compare-profiles.sh BASE        exit 0 when all are identical
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: scripts/compare-profiles.sh BASE-COMMIT}
TESTS="test_join test_cuda test_thread_roles test_join_pprof test_dump test_runtimes"
W=$(mktemp -d /tmp/gs-cmp.XXXXXX)
trap '[ -n "${GS_CMP_KEEP:-}" ] && echo "kept $W" && exit; git worktree remove --force "$W/base" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
git worktree add -q --detach "$W/base" "$BASE"
keep() { # tree outdir
	mkdir -p "$2"
	make -s -C "$1" -j2 $(for t in $TESTS; do echo build/tests/$t; done) >/dev/null
	for t in $TESTS; do
		(cd "$1" && GS_KEEP_PROFILES="$2" build/tests/$t >/dev/null 2>&1) ||
			{ echo "compare-profiles: $t failed in $1" >&2; exit 1; }
	done
}
# The cubin fixtures carry the absolute path of the .cu they were built from
# (nvcc -lineinfo): both trees read this tree's, so only the code differs.
make -s -j2 build/tests/test_cuda >/dev/null
keep "$PWD" "$W/b"
make -s -C "$W/base" -j2 build/tests/test_cuda >/dev/null
cp build/cuda/*.cubin "$W/base/build/cuda/" && touch "$W/base/build/cuda/"*.cubin
keep "$W/base" "$W/a"
(cd "$W/a" && ls) > "$W/la"; (cd "$W/b" && ls) > "$W/lb"
bad=0
# a test added since BASE brings a profile BASE cannot have: listed, not
# compared; one BASE made that this tree no longer makes is a failure
new=$(comm -13 "$W/la" "$W/lb")
gone=$(comm -23 "$W/la" "$W/lb")
[ -z "$new" ] || echo "new here (tests added since $BASE, not compared):" $new
[ -z "$gone" ] || { echo "made at $BASE only:" $gone; bad=1; }
n=0
for f in $(cat "$W/la"); do
	[ -f "$W/b/$f" ] || continue
	n=$((n + 1))
	cmp -s "$W/a/$f" "$W/b/$f" || { echo "differs: $f"; bad=1; }
done
echo "compare-profiles: $n profiles compared with $BASE, $([ $bad = 0 ] && echo identical || echo 'NOT identical')"
exit $bad
