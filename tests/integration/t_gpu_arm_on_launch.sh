#!/bin/bash
# gs-test-timeout: 60
# Arming from the watcher thread is allowed by no document.  The agent arms
# a context from its next launch; only a context that launches nothing for
# 300 ms is tried on the watcher.  The CUPTI double, with
# FAKE_CUPTI_FAIL=enable_offthread, refuses cuptiPCSamplingEnable from any
# thread that neither created the context nor launched on it.  A job quiet
# at the attach (its primary context found without a launch) is tried on
# the watcher, refused, and armed from the launch callback of its first
# kernel once it launches again: sampling is on, every sample is
# delivered, GPU sampling never off.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
export FAKE_CUPTI_FAIL=enable_offthread
touch "$T/idle"
GS_AGENT_DEBUG=1 start_app 60 --rate 1000 --primary --idle-file "$T/idle"
# quiet until 0.8 s after the arm found its context
(for _ in $(seq 200); do grep -q 'found at arm' "$T/app.out" && break; sleep 0.05; done
 sleep 0.8; rm -f "$T/idle") &
WAKE=$!
driver -n 1 -t 3
wait "$WAKE"
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
