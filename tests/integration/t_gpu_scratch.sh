#!/bin/bash
# CUPTI scratch buffer (issue 15 item 3).  The CUPTI double holds ~5,500 PCs
# per MB of scratch buffer, as CUPTI documents, and fails GetData with
# CUPTI_ERROR_OUT_OF_MEMORY (hardwareBufferFull 0) once a drain's PCs do not
# fit.  Kernels spread over 8,000 distinct PCs each:
#   1. --gpu-scratch 1: the agent recovers (Disable + Enable, twice the
#      buffer) instead of turning GPU sampling off; the loss is reported and
#      sampling goes on;
#      the same on a GPU kept busy (a restart deferred to the next launch);
#   2. default: a 16 MiB scratch buffer, no overflow, every sample delivered.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
export FAKE_CUPTI_PC_SPREAD=8000 FAKE_CUPTI_SAMPLES=200
# GPU samples in a profile, read by gpusample itself (go tool pprof takes
# ~20 s on 24,000 GPU locations)
gpu_total() { "$GS" report "$1" | sed -n 's/.* \([0-9]*\) GPU PC samples.*/\1/p' | head -1; }

gpu_run small --gpu-scratch 1
grep -v '^call\.' "$T/small.cupti" | grep -E 'scratch|samples_'
[ "$(cupti_stat small scratch_full)" -ge 1 ] || fail "--gpu-scratch 1: the scratch buffer never overflowed (test load too light)"
[ "$(cupti_stat small scratch_bytes)" -gt $((1 << 20)) ] || fail "scratch buffer not enlarged after the overflow"
"$GS" report "$T/small.pb.gz" > "$T/small.report" 2>&1 || fail "gpusample report failed"
grep -q 'scratch buffer overflowed' "$T/small.report" || { cat "$T/small.report"; fail "scratch overflow not reported"; }
grep -qi 'GPU sampling off' "$T/small.report" && fail "GPU sampling turned off after a scratch overflow"
n=$(gpu_total "$T/small.pb.gz")
d=$(cupti_stat small samples_delivered)
echo "--gpu-scratch 1: $(cupti_stat small scratch_full) overflow(s), $(cupti_stat small scratch_lost) samples lost there, $d delivered, $n in the profile"
[ "${n%.*}" -gt 0 ] 2>/dev/null || fail "no GPU samples after recovery"

# The same with kernels that keep the GPU busy (3 ms each): the watcher's
# restart is refused (Start wants a GPU idle for the calling thread) and
# sampling restarts at the next launch; the overflow is still reported.
FAKE_CUPTI_KERNEL_MS=3 FAKE_CUPTI_SAMPLES=1000 gpu_run busy --gpu-scratch 1
[ "$(cupti_stat busy scratch_full)" -ge 1 ] || fail "busy GPU: the scratch buffer never overflowed"
"$GS" report "$T/busy.pb.gz" > "$T/busy.report" 2>&1 || fail "gpusample report failed (busy)"
grep -q 'scratch buffer overflowed' "$T/busy.report" || { cat "$T/busy.report"; fail "busy GPU: scratch overflow not reported"; }
grep -qi 'GPU sampling off' "$T/busy.report" && fail "busy GPU: GPU sampling turned off after a scratch overflow"

gpu_run dflt
[ "$(cupti_stat dflt scratch_bytes)" = $((16 << 20)) ] || fail "default scratch buffer is $(cupti_stat dflt scratch_bytes), not 16 MiB"
[ "$(cupti_stat dflt scratch_full)" = 0 ] || fail "16 MiB scratch buffer overflowed"
n=$(gpu_total "$T/dflt.pb.gz")
d=$(cupti_stat dflt samples_delivered)
echo "default: $d delivered, $n in the profile"
# Every delivered sample is in the profile, unless the ring buffer
# overflowed on a loaded machine: then the loss must be counted and said.
if [ "$n" != "$d" ]; then
	"$GS" report "$T/dflt.pb.gz" > "$T/dflt.report" 2>&1
	grep -q 'GPU records .* were lost' "$T/dflt.report" ||
		fail "profile has $n GPU samples, the double delivered $d, and no loss is reported"
	echo "note: ring buffer overflowed on this machine; the loss is reported"
fi
ok "scratch overflow recovered and reported; 16 MiB default holds the load ($n samples)"
