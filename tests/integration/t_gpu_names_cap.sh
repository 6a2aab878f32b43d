#!/bin/bash
# gs-test-timeout: 60
# functionName strings are CUPTI's, "might be shared across all the
# records", and the client frees them once done with every record
# (cupti_pcsampling.h:144-148): the agent keeps each pointer it saw, to free
# at exit.  A CUPTI that allocates them per GetData (the double's
# names_per_getdata) hands out new pointers without end: in kernel-serialized
# mode every launch's flush is a GetData, 1,000 a second.  The agent keeps
# at most GS_AGENT_MAX_NAMES (1,024), hashes the rest each time, counts
# them in its DISARMED status, and every sample still names its kernel.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

FAKE_CUPTI_FAIL=names_per_getdata attached_run 1000 -S -t 2.5
fresh=$(stat names_per_getdata)
[ "${fresh:-0}" -gt 1100 ] || fail "the double handed only ${fresh:-0} name strings: the cap was not reached"
past=$(sed -n 's/.*state=2 .* \([0-9]*\) function-name pointers past the cap.*/\1/p' "$T/driver.out" | head -1)
[ -n "$past" ] || fail "the DISARMED status does not count names past the cap"
[ "$past" -gt 0 ] || fail "no name pointer past the cap: the agent kept all $fresh"
[ "$past" -le "$fresh" ] || fail "$past past the cap of $fresh handed out"
[ "$(val bad_refs)" = 0 ] || fail "name hashes that do not match"
for k in axpy _Z5scaleIfEvPT_S0_i _Z10reduce_sumPKfPfi; do
	n=$(awk -v k="$k" '$1 == "kernel" && $2 == k { print $3 }' "$T/driver.out")
	[ "${n:-0}" -gt 0 ] || fail "no samples for kernel $k"
done
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "host got $(val samples) samples, the double delivered $(stat samples_delivered)"
ok "$fresh name strings handed out, $past past the agent's cap of 1,024 (hashed, not kept), $(val samples) samples, all delivered"
