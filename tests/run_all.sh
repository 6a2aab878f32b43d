#!/bin/bash
# make test: unit tests, then integration tests; the last line sums both
# ("tests: N passed, N failed, N skipped") for CI and humans.
cd "$(dirname "$0")/.." || exit 1
out=$(mktemp)
./tests/run_unit.sh "$@" | tee "$out"
./tests/integration/run.sh | tee -a "$out"
awk '/^(unit|integration): [0-9]+ passed, [0-9]+ failed/ {
	runners++; pass += $2; fail += $4; if ($6 != "") skip += $6 }
     END {
	if (runners != 2) { print "tests: a runner did not finish"; exit 1 }
	printf "tests: %d passed, %d failed, %d skipped\n", pass, fail, skip
	exit fail != 0 }' "$out"
rc=$?
rm -f "$out"
exit $rc
