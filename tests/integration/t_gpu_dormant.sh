#!/bin/bash
# Agent injected, nobody attached: launches cause zero PC-sampling calls and
# no launch callbacks; only resource callbacks are enabled.
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
[ "$(stat call.cuptiSubscribe)" = 1 ] || { show; fail "agent did not subscribe exactly once"; }
[ "$(stat call.cuptiEnableCallback)" = 4 ] || { show; fail "expected the 4 resource callbacks only"; }
[ "$(stat resource_callbacks)" -ge 2 ] || { show; fail "resource callbacks not delivered"; }
ok "dormant: $launches launches, 0 PC sampling calls, 0 launch callbacks"
