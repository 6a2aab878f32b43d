#!/bin/bash
# The outputs as real viewers read them: the Criterion tests of
# tests/viewers/ write speedscope JSON, pprof and trace files from fixed
# profiles and check them with node (speedscope's schema via ajv, the
# trace-event nesting rules), speedscope's importer in headless Chromium,
# and the HTML report driven in Chromium (tests/tools/html_check.js).  Integration tests, not units: they need node, npm's
# speedscope and Chromium (make test-deps installs them; missing ones fail).
# gs-test-timeout: 600
source "$(dirname "$0")/lib.sh"
B=${BUILD:-build}
for t in test_speedscope test_trace test_html; do
	[ -x "$B/tests/viewers/$t" ] || fail "$B/tests/viewers/$t not built (make $B/tests/viewers/$t)"
done
./tests/run_unit.sh "$B/tests/viewers/test_speedscope" "$B/tests/viewers/test_trace" \
	"$B/tests/viewers/test_html" ||
	fail "a viewer rejected an output (above)"
ok "speedscope, pprof, trace and HTML outputs pass their viewers"
