#!/bin/bash
# gs-test-timeout: 60
# Sampling starts on an idle GPU, from the application's own thread: the
# agent configures start/stop control and, in the ENTER callback of the
# context's next launch, waits for its queued kernels (cuCtxSynchronize) and
# calls cuptiPCSamplingStart, as parcagpu and Proton do ("CUPTI requires the
# GPU to be idle before starting PC sampling"); it stops the range before
# Disable at detach.  The double refuses a Start on a GPU not idle for the
# calling thread, and (its "idle" rule) sampling started by the
# configuration alone on such a GPU: an agent that enables and configures
# on its own thread while the job launches kernels gets its context refused.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

FAKE_CUPTI_FAIL=idle FAKE_CUPTI_KERNEL_MS=1 attached_run 300 -t 1.5
[ "$(val ctx_off)" = 0 ] || fail "the context was turned off"
[ "$(stat call.cuptiPCSamplingStart)" -ge 1 ] || fail "cuptiPCSamplingStart never called"
[ "$(stat start_app_thread)" -ge 1 ] || fail "no Start on an application thread"
[ "$(stat call.cuptiPCSamplingStop)" -ge 1 ] || fail "the range was never stopped"
[ "$(stat order_errors)" = 0 ] || fail "$(stat order_errors) calls out of order"
[ "$(val samples)" -gt 0 ] || fail "no samples"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"
ok "Start on an application thread ($(stat start_app_thread) of $(stat call.cuptiPCSamplingStart)), $(stat start_busy_refused) refused busy, Stop $(stat call.cuptiPCSamplingStop), $(val samples) samples, all delivered"
