#!/bin/bash
# CUPTI API v21 (CUDA 12.3): 56-byte CUpti_PCSamplingPCData without
# correlationId.  The double rejects any other record size; the agent must
# pick the old layout at run time and still deliver every sample, and warn
# that this CUPTI predates CUDA 12.8 Update 1.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

export FAKE_CUPTI_VERSION=21
start_app 60 --rate 1000
driver -n 1 -t 1.2
wait_app
show
[ "$(stat bad_size)" = 0 ] || fail "agent used the wrong record layout for CUPTI v21"
gen=$(stat samples_delivered)
[ "${gen:-0}" -gt 1000 ] || fail "no samples delivered with the v21 layout"
[ "$(val samples)" = "$gen" ] || fail "host got $(val samples), double delivered $gen"
[ "$(val no_corr_flag)" = "$(val batches)" ] || fail "batches not flagged as without correlation ids"
[ "$(val bad_refs)" = 0 ] || fail "garbled records (wrong stride?)"
# CUPTI before CUDA 12.8 Update 1: PC sampling beside concurrent-kernel
# tracing is not compatible there; said once per session
[ "$(grep -c 'state=5 .*CUPTI API v21 (CUDA 12.8 or older).*concurrent-kernel' "$T/driver.out")" = 1 ] ||
	fail "no (or more than one) warning about concurrent-kernel tracing on CUPTI v21"
ok "v21 layout: $gen samples, the concurrent-tracing warning given once"
