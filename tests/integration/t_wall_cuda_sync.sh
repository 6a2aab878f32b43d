#!/bin/bash
# Wall-clock "where the time goes", issue 11 done-when (5): with the CUDA
# driver double (tests/fakes), the main thread loops over a 4 ms on-CPU step
# and cuStreamSynchronize, which "waits for the GPU" 12 ms per call, either
# blocked on a futex (FAKE_CUDA_SYNC=block) or spinning on the CPU
# (FAKE_CUDA_SYNC=spin).  Both are CUDA sync, not compute or other
# blocking: the report's CUDA sync share (its row plus the CPU starvation
# "while in: CUDA sync": a spinner on a loaded machine is often preempted)
# is within 5 points of the share of the profile's window the workload measured inside
# cuStreamSynchronize with perf_counter, its top stack shows
# cuStreamSynchronize, and the verdict names CUDA sync (or CPU starvation
# when the machine is that loaded), never other blocking.  `gpusample -p
# PID -d 4` on the running loop.  Fails (does not skip) without off-CPU
# data.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
lib=$ROOT/$BUILD/fakes/libcuda.so.1
[ -f "$lib" ] || fail "$lib missing (make)"
for how in block spin; do
	FAKE_CUDA_SYNC=$how FAKE_CUDA_SYNC_MS=12 wall_attach "$how" sync "$lib" --step-ms 4
	wall_check "$how" "CUDA sync" cuStreamSynchronize
	grep -q "^    CUDA sync .*cuStreamSynchronize" "$T/$how.report" || fail "$how: the CUDA sync top stack lacks cuStreamSynchronize"
	# the verdict names the largest category: CUDA sync, or CPU starvation
	# when the machine is that loaded (then most of it while in CUDA sync)
	grep -Eq "^Verdict: (CUDA sync .*GPU-sync-bound|CPU starvation .*CPU-starved)" "$T/$how.report" ||
		fail "$how: the verdict names neither CUDA sync nor CPU starvation"
	grep -q "^Verdict: .* blocked in other waits" "$T/$how.report" && fail "$how: the verdict calls it other blocking"
done
ok "blocking and spinning synchronize waits are CUDA sync, within 5 points of the in-process figure"
