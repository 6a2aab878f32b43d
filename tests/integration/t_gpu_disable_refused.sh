#!/bin/bash
# gs-test-timeout: 40
# cuptiPCSamplingDisable can fail (cupti_pcsampling.h:623-629); until one
# succeeds the configured buffer is CUPTI's, which "copies PC records in the
# buffer provided during the PC sampling configuration" at teardown
# (:617-621).  The double's `disable` rule refuses every Disable and keeps
# sampling: the agent says so in a WARNING status, keeps the buffer, and
# the job is not hurt (its exit tears the context down into that buffer).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

FAKE_CUPTI_FAIL=disable attached_run 300 -t 1
[ "$(stat disable_refused)" -ge 1 ] || fail "no Disable was refused: the path under test was not taken"
grep -q 'state=5 .*cuptiPCSamplingDisable on context 1: .*its PC buffer is kept' "$T/driver.out" ||
	fail "no WARNING status for the refused Disable"
[ "$(val disarmed_status)" = 1 ] || fail "no DISARMED status"
[ "$(val samples)" -gt 0 ] || fail "no samples"
ok "$(stat disable_refused) Disable refused, said in a WARNING status, buffer kept, job exited 0"
