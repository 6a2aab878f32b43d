#!/bin/bash
# Attach twice: the agent (dormant: not subscribed) subscribes and arms
# within 200 ms each time, finds the contexts created before the attach,
# PC batches and launch events reach the host with the counts the CUPTI
# double produced, launch stacks carry Python frames, and the agent disarms
# on detach (drain handshake), unsubscribes and arms again.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

start_app 60 --rate 1000
driver -n 2 -t 1.5 -g 0.7 -P 18
wait_app
show

[ "$(val armed_status)" = 2 ] || fail "expected 2 armed sessions"
[ "$(val disarmed_status)" -ge 2 ] || fail "expected 2 disarm acknowledgements"
[ "$(val unacked)" = 0 ] || fail "an agent did not acknowledge the detach"
for ms in $(awk '$1 == "arm_ms" { print $2 }' "$T/driver.out"); do
	[ "$ms" -lt 200 ] || fail "armed $ms ms after attach (limit 200)"
done
gen=$(stat samples_delivered); got=$(val samples)
[ "${gen:-0}" -gt 1000 ] || fail "double delivered only ${gen:-0} samples"
[ "$got" = "$gen" ] || fail "host got $got warp samples, CUPTI delivered $gen"
[ "$(val bad_refs)" = 0 ] || fail "stall indices or name hashes that do not match"
# CUPTI hands a function's name pointer out again in the second session:
# the agent must not have freed it at the first disarm.
[ "$(stat names_freed_early)" = 0 ] || fail "agent freed CUPTI's function names before exit ($(stat names_freed_early) reads of freed names)"
[ "$(val not_issued)" -gt 0 ] || fail "no _not_issued samples kept apart"
for k in axpy _Z5scaleIfEvPT_S0_i _Z10reduce_sumPKfPfi; do
	n=$(awk -v k="$k" '$1 == "kernel" && $2 == k { print $3 }' "$T/driver.out")
	[ "${n:-0}" -gt 0 ] || fail "no samples for kernel $k"
done
# The job loaded its 2 modules while the agent was dormant (not subscribed):
# never announced, their kernels are still named by CUPTI (checked above).
[ "$(val cubins_read)" = 0 ] || fail "host read $(val cubins_read) cubins of modules loaded while dormant"
[ "$(stat subscribe_ok.CUPTI_for_gpusample)" = 2 ] || fail "agent did not subscribe once per session"
[ $(( $(stat call.cuptiUnsubscribe) + $(stat call.cuptiFinalize) )) = 2 ] || fail "agent did not unsubscribe or finalize CUPTI at each disarm"
ev=$(val launches); cb=$(stat launch_callbacks); w=$(val launch_weight)
[ "$ev" -gt 50 ] || fail "only $ev launch events"
# launches seen while armed (with callbacks on); 1-in-N events stand for N each
armed_launches=$cb
ratio_at_least "$w" "$armed_launches" 0.7 || fail "launch weight $w far below $armed_launches launches"
ratio_at_least "$armed_launches" "$w" 0.7 || fail "launch weight $w far above $armed_launches launches"
[ "$(val launch_py)" = "$ev" ] || fail "launch events without Python frames"
[ "$(val launch_py_max)" -ge 3 ] || fail "launch stacks lack train_step/forward frames"
[ "$(val launch_stack)" = "$ev" ] || fail "launch events without a native stack"
[ "$(stat order_errors)" = 0 ] || fail "agent broke CUPTI call order"
[ "$(stat bad_size)" = 0 ] || fail "agent passed wrong struct sizes"
ok "2 sessions, $got samples (= double), $ev launch events for $armed_launches launches"
