#!/bin/bash
# Kernel-serialized mode on request: PC records carry the correlation ids of
# the launches that produced them; sampled launch events carry the same ids.
# Continuous mode: correlation ids are "only valid for serialized mode ...
# For continous mode of collection the correlationId will be set to 0"
# (CUpti_PCSamplingPCData, https://docs.nvidia.com/cupti/api/
# structCUpti__PCSamplingPCData.html): a CUPTI that leaves ids there anyway
# (the double's continuous_corr) must not get them into the agent's records.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

start_app 60 --rate 300
driver -n 1 -t 1.2 -S -r 1000
wait_app
show
[ "$(val serialized_flag)" = "$(val batches)" ] || fail "batches not marked serialized"
nz=$(val corr_nonzero); m=$(val corr_matched)
[ "$nz" -gt 0 ] || fail "no correlation ids in serialized mode"
# at 300 launches/s every launch is an event: every PC record joins exactly
ratio_at_least "$m" "$nz" 0.95 || fail "only $m of $nz PC records match a launch event"
grep -q "armed: .*kernel-serialized" "$T/driver.out" || fail "agent did not switch to serialized mode"
# A range per kernel: "after every kernel ends" the client must flush
# (cupti_pcsampling.h:529-534), or the double parks the range in the
# configured buffer, where the next kernel's overwrites it (two flushes in a
# row that miss the agent's lock lose one range: at most 2% here).
lost=$(stat parked_pcs_lost)
[ "$lost" -le $(( $(val pcs) / 50 )) ] || fail "$lost PC records of unflushed kernels overwritten in the configured buffer ($(val pcs) reached the host)"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"

FAKE_CUPTI_FAIL=continuous_corr start_app 60 --rate 300
driver -n 1 -t 1.2 -r 1000
wait_app
[ "$(val batches)" -gt 0 ] || { show; fail "no batches in continuous mode"; }
[ "$(val serialized_flag)" = 0 ] || { show; fail "continuous batches marked serialized"; }
[ "$(val corr_nonzero)" = 0 ] || { show; fail "$(val corr_nonzero) PC records carry correlation ids in continuous mode"; }
[ "$(stat samples_delivered)" -gt 0 ] || fail "the double delivered no samples"
ok "serialized: $m of $nz PC records joined to launch events by correlation id; continuous: none trusted"
