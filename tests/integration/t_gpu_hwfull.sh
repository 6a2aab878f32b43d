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
# "When hardware buffer is full, user will get pc data as 0"
# (cupti_pcsampling.h:236-239): the double's Disable hands the pending
# records back zeroed; they name no PC and must not reach the host.
[ "$(stat zero_pcs)" -gt 0 ] || fail "the double handed out no all-zero records: the path under test was not taken"
[ "$(val zero_pcs)" = 0 ] || fail "$(val zero_pcs) all-zero PC records reached the host"
first_dropped=$(val status_dropped)

# Overflowing again: the header's remedies 2 and 3 (cupti_pcsampling.h:236-239),
# CUPTI's worker threads woken more often (sleep span below its 100 ms) and
# a longer period than the one CUPTI chose (13 on the double).
FAKE_CUPTI_HWFULL_TIMES=3 start_app 60 --rate 1500
driver -n 1 -t 2.5
wait_app
[ "$(stat hw_buffer_full)" -ge 2 ] || { show; fail "double overflowed $(stat hw_buffer_full) times, needs 2+"; }
sl=$(stat sleep_span_ms) pe=$(stat period_set)
[ "$sl" -gt 0 ] && [ "$sl" -lt 100 ] || { show; fail "worker sleep span $sl ms after repeated overflows"; }
[ "$pe" -gt 13 ] || { show; fail "period $pe after repeated overflows (CUPTI's was 13)"; }
grep -q "CUPTI draining more often" "$T/driver.out" || { show; fail "remedy not said"; }
ok "recovered from a full hardware buffer, $first_dropped dropped samples reported; after $(stat hw_buffer_full) overflows sleep span $sl ms, period 2^$pe"
