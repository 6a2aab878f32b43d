#!/bin/bash
# gs-test-timeout: 60
# Detach disables sampling from the application's threads: each armed
# context gets its last drain and cuptiPCSamplingDisable in its next launch
# EXIT callback, where CUPTI has it idle (peers stop sampling from an
# application thread, never from a foreign one); the agent's thread does it
# only for a context that launches nothing more, after 300 ms.
#  1. busy job, a CUPTI that refuses GetData and Disable while a kernel of
#     the context runs (the double's inflight; kernels of 2 ms at 300/s):
#     Disable from a launch callback, none refused, every sample delivered;
#  2. a job gone quiet (launches nothing after the attach): still disarmed,
#     by the watcher, within the host's wait.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

FAKE_CUPTI_FAIL=inflight FAKE_CUPTI_KERNEL_MS=2 attached_run 300 -t 1.5
[ "$(stat disable_app_thread)" -ge 1 ] || fail "Disable never ran on an application thread"
[ "$(stat disable_refused)" = 0 ] || fail "$(stat disable_refused) Disable calls refused in flight"
[ "$(val disarmed_status)" = 1 ] || fail "no DISARMED status"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"
on_app=$(stat disable_app_thread)

# 2: primary contexts (found at arm without a launch), nothing launched
touch "$T/idle"
GS_AGENT_DEBUG=1 start_app 60 --rate 300 --primary --idle-file "$T/idle"
t0=$(date +%s%N)
driver -n 1 -t 0.5
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait_app
grep -q 'state=1 .*context 1 on GPU 0 armed' "$T/driver.out" || { show; fail "quiet job: context not armed"; }
[ "$(val disarmed_status)" = 1 ] || { show; fail "quiet job: no DISARMED status"; }
[ "$(val unacked)" = 0 ] || { show; fail "quiet job: detach not acknowledged"; }
[ "$(stat call.cuptiPCSamplingDisable)" -ge 1 ] || { show; fail "quiet job: never disabled"; }
grep -q 'launched nothing since the detach: disabled by the agent.s thread' "$T/app.out" || { cat "$T/app.out"; fail "quiet job: not disabled by the watcher's fallback"; }
ok "busy job disabled from launch callbacks ($on_app Disable on app threads, 0 refused); quiet job disarmed by the watcher (driver run, attach to detach ack, $ms ms)"
