#!/bin/bash
# Two contexts on one GPU: CUPTI samples one context per GPU, so the agent
# samples the first, turns the second off with reason SECOND_CONTEXT, and
# says so once per session (not on every watcher tick while it waits for
# the GPU to be free).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

export FAKE_CUDA_DEVICES=1
start_app 60 --rate 1000 --contexts 2
driver -n 1 -t 1.5
wait_app
show
grep -q "contexts=2" "$T/app.out" || fail "gpu_app did not create two contexts"
n=$(grep -c '^status .*state=3 reason=7 ' "$T/driver.out")
[ "$n" = 1 ] || fail "expected one SECOND_CONTEXT status in 1.5 s, got $n"
[ "$(grep -c '^stall_table ' "$T/driver.out")" = 1 ] || fail "expected one sampled context"
[ "$(val samples)" -gt 0 ] || fail "the sampled context got no samples"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "sample totals differ from the double's"
ok "second context on one GPU: reported once, the first context sampled"
