#!/bin/bash
# Run Criterion test binaries; print one closing "N passed, N failed" line.
# A binary that is missing (not built), or that ran no test at all (every
# test skipped or filtered away: Criterion's "Tested: 0"), counts as a failure.
# Each binary runs in a session of its own, its output in a file: whatever a
# failed test left behind (a Criterion worker, a workload it started) is
# killed with the session when the binary ends, so it can neither hold the
# runner's pipe open nor outlive the run.  GS_UNIT_TIMEOUT (s, default 900)
# bounds one binary.
pass=0; fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$@"; do
	if [ ! -x "$t" ]; then
		fail=$((fail + 1)); echo "FAIL unit $(basename "$t"): $t not built"
		continue
	fi
	# not a group leader, setsid execs in place: $! is the session's id
	setsid timeout -k 10 "${GS_UNIT_TIMEOUT:-900}" "$t" --jobs 1 >"$log" 2>&1 &
	sid=$!
	wait $sid
	rc=$?
	pkill -KILL -s "$sid" 2>/dev/null
	out=$(cat "$log")
	if [ $rc -eq 0 ]; then
		tested=$(echo "$out" | sed -n 's/.*Synthesis: Tested: \([0-9]*\).*/\1/p' | tail -1)
		if [ "${tested:-0}" -eq 0 ]; then
			fail=$((fail + 1)); echo "FAIL unit $(basename "$t"): ran no test"; echo "$out" | tail -5
		else
			pass=$((pass + 1)); echo "PASS unit $(basename "$t") ($tested tests)"
		fi
	else
		fail=$((fail + 1)); echo "FAIL unit $(basename "$t") (rc=$rc)"; echo "$out" | tail -30
	fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
