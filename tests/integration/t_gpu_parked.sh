#!/bin/bash
# gs-test-timeout: 60
# Ranges CUPTI parks in the configured buffer (SAMPLING_DATA_BUFFER) are
# read.  Kernel-serialized mode with a slow GPU (every GetData 40 ms, the
# watcher holding the agent's lock meanwhile): some per-kernel flushes in
# the launch EXIT callback miss the lock (bounded wait), so the double parks
# that kernel's range in the configured buffer when the next kernel starts
# (cupti_pcsampling.h:529-534: serialized mode needs a flush "after every
# kernel ends").  The next drain reads it before calling GetData: the host
# gets every sample the double delivered (a parked range overwritten before
# it was read is taken back from the double's count and named).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
export FAKE_CUPTI_GETDATA_MS=40
attached_run 300 -t 2 -S -r 1000
[ "$(stat parked_ranges)" -gt 0 ] || fail "no range was parked: the path under test was not taken"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered) (parked ranges not read?)"
[ "$(val samples)" -gt 0 ] || fail "no samples"
ok "$(stat parked_ranges) parked ranges read, $(val samples) samples, $(stat parked_pcs_lost) parked PCs overwritten unread"
