#!/bin/bash
# gs-test-timeout: 60
# A CUPTI that refuses Enable, GetData and Disable while a kernel of the
# context is running (the double's "inflight": CUPTI_ERROR_UNKNOWN, what a
# tool draining from a worker thread got; every kernel runs 2 ms at 300
# launches/s, so the watcher's calls mostly land in flight), then one that
# refuses them from any thread but the context's creator and launcher
# ("offthread").  The agent must not turn the context off: it arms and
# drains from the launch callbacks of the application's threads instead
# (where NVIDIA's sample drains), says so, disables there at detach, and
# the host gets every sample the double delivered.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
export FAKE_CUPTI_FAIL=inflight FAKE_CUPTI_KERNEL_MS=2
attached_run 300 -t 2
[ "$(stat inflight_refused)" -gt 0 ] || fail "no GetData was refused in flight: the path under test was not taken"
[ "$(val ctx_off)" = 0 ] || fail "the context was turned off"
grep -q "drained from its kernel launches" "$T/driver.out" || fail "fallback not said"
[ "$(val samples)" -gt 0 ] || fail "no samples"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"
inflight="$(stat inflight_refused) in-flight calls refused, $(val samples) samples"

FAKE_CUPTI_FAIL=offthread attached_run 300 -t 2
[ "$(stat offthread_refused)" -gt 0 ] || fail "offthread: no GetData refused: the path under test was not taken"
[ "$(val ctx_off)" = 0 ] || fail "offthread: the context was turned off"
[ "$(val samples)" -gt 0 ] || fail "offthread: no samples"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "offthread: host got $(val samples) samples, the double delivered $(stat samples_delivered)"
[ "$(stat disable_refused)" = 0 ] || fail "offthread: Disable refused"
ok "$inflight; off-thread: $(stat offthread_refused) GetData and $(stat enable_offthread_refused) Enable refused, $(val samples) samples, all from launch callbacks"
