#!/bin/bash
# Run Criterion unit test binaries; print one closing "N passed, N failed" line.
# A binary that is missing (not built) counts as a failure.
pass=0; fail=0
for t in "$@"; do
	if [ ! -x "$t" ]; then
		fail=$((fail + 1)); echo "FAIL unit $(basename "$t"): $t not built"
	elif out=$("$t" --jobs 1 2>&1); then
		pass=$((pass + 1)); echo "PASS unit $(basename "$t")"
	else
		fail=$((fail + 1)); echo "FAIL unit $(basename "$t")"; echo "$out" | tail -30
	fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
