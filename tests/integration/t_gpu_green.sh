#!/bin/bash
# gs-test-timeout: 60
# A green context "can be current to only one thread at a time" (cuda.h,
# cuGreenCtxCreate); the driver double refuses one made current on a second
# thread while the job's thread has it.  The agent tells green contexts by
# their SM count (cuCtxGetDevResource below cuDeviceGetDevResource) and
# never pushes one on its watcher: armed, drained and disabled from the
# job's own launch callbacks.
#  1. a busy job on a green context: sampled, every sample delivered,
#     disabled on the job's thread, no refusal;
#  2. the job goes quiet before the detach: the detach completes with the
#     context left sampling (said in the DISARMED status), and it is
#     disabled at the job's first launch after.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

start_app 60 --rate 300 --green
driver -n 1 -t 1.5
wait_app
show
[ "$(stat green_current_refused)" = 0 ] || fail "the green context was made current on a second thread $(stat green_current_refused) times"
grep -q 'green_refused=0$' "$T/app.out" || { cat "$T/app.out"; fail "the job saw a refusal"; }
grep -q 'state=1 .*context 1 on GPU 0 armed' "$T/driver.out" || fail "green context not armed"
[ "$(val samples)" -gt 0 ] || fail "no samples"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"
[ "$(stat disable_app_thread)" -ge 1 ] || fail "Disable never ran on the job's thread"
grep -q 'concurrent-kernel' "$T/driver.out" && fail "CUPTI 130001 warned about concurrent-kernel tracing"
busy="$(val samples) samples"

# 2: quiet 0.3 s after the context was armed, in a 2 s attach; launching
# again after the detach
rm -f "$T/idle"
GS_AGENT_DEBUG=1 start_app 60 --rate 300 --green --idle-file "$T/idle"
(for _ in $(seq 200); do grep -q 'context 1 armed from a launch callback' "$T/app.out" && break; sleep 0.05; done
 sleep 0.3; touch "$T/idle") &
quiet=$!
driver -n 1 -t 2
wait $quiet
rm -f "$T/idle"
for _ in $(seq 40); do grep -q 'disabled at its first launch after the detach' "$T/app.out" && break; sleep 0.05; done
wait_app
show
[ "$(stat green_current_refused)" = 0 ] || fail "quiet job: the green context was made current on a second thread"
[ "$(val unacked)" = 0 ] || fail "quiet job: detach not acknowledged"
grep -q '1 green contexts left sampling until their next launch' "$T/driver.out" || fail "quiet job: the DISARMED status does not say the context was left sampling"
grep -q 'green context 1 disabled at its first launch after the detach' "$T/app.out" || { cat "$T/app.out"; fail "quiet job: not disabled at its next launch"; }
ok "busy green context: $busy, disabled on the job's thread; quiet one left sampling at the detach, disabled at its next launch; never current on two threads"
