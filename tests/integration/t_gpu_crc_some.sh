#!/bin/bash
# gs-test-timeout: 60
# The agent registers its own cubin hash with cuptiRegisterComputeCrcCallback
# so that PC records carry the key its cubin records carry; whether real
# CUPTI honours the callback for every module is untested on a GPU.  The
# double's crc_some honours it for every second module only, keying the
# other's PC records with CUPTI's own CRC.  The agent announces each module
# under its hash and, in an alias record, under CUPTI's CRC: every PC record
# names a cubin the host has bytes for, read once per module (cubins_read),
# and every sample is delivered.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

GS_AGENT_OPTS=subscribe=init FAKE_CUPTI_FAIL=crc_some attached_run 300 -t 1.5
[ "$(stat crc_not_honoured)" -ge 1 ] || fail "every module honoured the callback: the path under test was not taken"
[ "$(val cubins)" -ge 2 ] || fail "only $(val cubins) cubin records"
[ "$(val pcs)" -gt 0 ] || fail "no PC records"
[ "$(val pcs_no_cubin)" = 0 ] || fail "$(val pcs_no_cubin) of $(val pcs) PC records keyed by a CRC the host has no cubin for"
[ "$(val cubin_aliases)" -ge 1 ] || fail "no alias record"
[ "$(val cubins_read)" = $(($(val cubins) - $(val cubin_aliases))) ] ||
	fail "host keeps $(val cubins_read) cubin copies for $(($(val cubins) - $(val cubin_aliases))) modules announced"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"
ok "$(stat crc_not_honoured) module(s) keyed by CUPTI's CRC, $(val cubins) cubin records ($(val cubin_aliases) aliases, $(val cubins_read) copies), all $(val pcs) PC records name a known cubin, $(val samples) samples"
