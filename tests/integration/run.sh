#!/bin/bash
# Integration tests: every tests/integration/t_*.sh, as root, real eBPF.
# Each test exits 0 (pass), 77 (skipped, with a reason on stdout) or other (fail).
# GS_TESTS="t_foo t_bar" runs a subset.  Each test gets 300 s, or what its
# own "# gs-test-timeout: SECONDS" line (in its first lines) asks for; a
# GS_TEST_TIMEOUT in the environment overrides both.
cd "$(dirname "$0")/../.." || exit 1
if [ "$(id -u)" -ne 0 ]; then echo "integration tests need root (sudo make test)"; exit 1; fi
pass=0; fail=0; skip=0; failed=""
LOGS=${BUILD:-build}/test-logs
mkdir -p "$LOGS"
for t in tests/integration/t_*.sh; do
	name=$(basename "$t" .sh)
	if [ -n "${GS_TESTS:-}" ] && ! [[ " $GS_TESTS " == *" $name "* ]]; then continue; fi
	start=$(date +%s)
	tmo=$(sed -n '1,10s/^# gs-test-timeout: *\([0-9][0-9]*\).*/\1/p' "$t" | head -1)
	timeout -k 10 "${GS_TEST_TIMEOUT:-${tmo:-300}}" bash "$t" > "$LOGS/$name.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	case $rc in
	0) pass=$((pass + 1)); echo "PASS $name (${secs}s)";;
	77) skip=$((skip + 1)); echo "SKIP $name: $(tail -1 "$LOGS/$name.log")";;
	*) fail=$((fail + 1)); failed="$failed $name"; echo "FAIL $name (rc=$rc, ${secs}s)"; tail -40 "$LOGS/$name.log" | sed 's/^/    /';;
	esac
done
# A GS_TESTS name with no test behind it is a failure, not a silent no-op.
for name in ${GS_TESTS:-}; do
	[ -f "tests/integration/$name.sh" ] || { fail=$((fail + 1)); failed="$failed $name"; echo "FAIL $name: no tests/integration/$name.sh"; }
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ -z "$failed" ] || echo "failed:$failed"
[ "$fail" -eq 0 ]
