#!/bin/bash
# Run Criterion unit test binaries; print one closing "N passed, N failed" line.
# A binary that is missing (not built), or that ran no test at all (every
# test skipped or filtered away: Criterion's "Tested: 0"), counts as a failure.
pass=0; fail=0
for t in "$@"; do
	if [ ! -x "$t" ]; then
		fail=$((fail + 1)); echo "FAIL unit $(basename "$t"): $t not built"
	elif out=$("$t" --jobs 1 2>&1); then
		tested=$(echo "$out" | sed -n 's/.*Synthesis: Tested: \([0-9]*\).*/\1/p' | tail -1)
		if [ "${tested:-0}" -eq 0 ]; then
			fail=$((fail + 1)); echo "FAIL unit $(basename "$t"): ran no test"; echo "$out" | tail -5
		else
			pass=$((pass + 1)); echo "PASS unit $(basename "$t") ($tested tests)"
		fi
	else
		fail=$((fail + 1)); echo "FAIL unit $(basename "$t")"; echo "$out" | tail -30
	fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
