#!/bin/bash
# Agent injected, nobody attached: the agent holds no CUPTI subscription
# (CUDA 13.0 allows one per process, and it is the user's: torch.profiler),
# so launches cause no CUPTI callback and no PC-sampling call at all.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

start_app 60 --rate 2000
sleep 1.5
wait_app
grep -q "launches=" "$T/app.out" || fail "app summary missing"
launches=$(stat launches)
[ "${launches:-0}" -ge 1000 ] || { show; fail "app launched only ${launches:-0} kernels"; }
[ "$(stat pcsampling_calls)" = 0 ] || { show; fail "PC sampling API called while dormant"; }
[ "$(stat launch_callbacks)" = 0 ] || { show; fail "launch callbacks delivered while dormant"; }
[ "$(stat call.cuptiSubscribe)" = 0 ] || { show; fail "a dormant agent subscribed to CUPTI"; }
[ "$(stat call.cuptiEnableCallback)" = 0 ] || { show; fail "a dormant agent enabled callbacks"; }
[ "$(stat resource_callbacks)" = 0 ] || { show; fail "resource callbacks delivered while dormant"; }
ok "dormant: $launches launches, no subscription, 0 callbacks, 0 PC sampling calls"
