#!/bin/bash
# Arming from the watcher thread is allowed by no document (issue 15 item
# 6).  The CUPTI double, with FAKE_CUPTI_FAIL=enable_offthread, refuses
# cuptiPCSamplingEnable from any thread that neither created the context
# nor launched on it.  The agent keeps the watcher path, and when Enable
# fails there it arms from the next launch callback on the application's
# thread: sampling is on, every sample is delivered, GPU sampling never off.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
export FAKE_CUPTI_FAIL=enable_offthread
start_app 60 --rate 1000
driver -n 1 -t 1.5
wait_app
show
[ "$(stat enable_offthread_refused)" -ge 1 ] || fail "the watcher never tried to arm (double not exercised)"
[ "$(val armed_status)" = 1 ] || fail "agent did not arm"
grep -q 'state=5 .*from its next kernel launch' "$T/driver.out" || fail "no warning status saying it arms from a launch"
grep -q 'ctx=1 state=1 .*armed' "$T/driver.out" || fail "context 1 never armed"
gen=$(stat samples_delivered); got=$(val samples)
[ "${gen:-0}" -gt 500 ] || fail "double delivered only ${gen:-0} samples: not armed from the launch thread"
[ "$got" = "$gen" ] || fail "host got $got samples, CUPTI delivered $gen"
grep -qi 'sampling off' "$T/driver.out" && fail "GPU sampling went off"
ok "Enable refused on the watcher ($(stat enable_offthread_refused)x), armed from a launch callback: $gen samples"
