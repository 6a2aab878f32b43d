#!/bin/bash
# Hardware buffer overflow: GetData returns OUT_OF_MEMORY with
# hardwareBufferFull and stays wedged until Disable + Enable.  The agent
# recovers, counts the dropped samples and keeps sampling.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

export FAKE_CUPTI_FAIL=hwfull FAKE_CUPTI_HWFULL_AFTER=300
start_app 60 --rate 1500
driver -n 1 -t 1.8
wait_app
show
[ "$(stat hw_buffer_full)" -ge 1 ] || fail "double never overflowed"
[ "$(val recovered_status)" -ge 1 ] || fail "no RECOVERED status"
grep -q "state=4 reason=9 .*hardware buffer full" "$T/driver.out" || fail "recovery not explained"
[ "$(stat enables)" -ge 2 ] || fail "agent did not re-enable PC sampling"
[ "$(val status_dropped)" -gt 0 ] || fail "dropped samples not reported"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "samples after recovery lost"
[ "$(val samples)" -gt 0 ] || fail "no samples after recovery"
ok "recovered from a full hardware buffer, $(val status_dropped) dropped samples reported"
