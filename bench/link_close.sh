#!/bin/bash
# How late a run ends, and what the record loop loses, because of uprobe
# link closes (each waits for an RCU grace period).  JOB=gpu (default): the
# GPU double's app (tests/fakes/gpu_app.py, with the agent: GPU memory
# probes on libcuda, 22 links, and the agent's USDT links) for 3 s.
# JOB=dataloader: tests/workloads/train_torch.py for 8 s with 4 DataLoader
# workers re-created every 6 steps (each maps libtorch and gets the step
# probes, closed at its exit).  Runs it ROUNDS times under
# `gpusample -- ...` and prints per run the job's own run time, gpusample's
# wall time, the profile's window and its lost CPU samples (the report's
# header).
#   sudo [JOB=dataloader] [BUILD=dir] bench/link_close.sh [ROUNDS] [gpusample options...]
# BUILD picks the gpusample binary (an older build to compare); the driver
# double and the agent are this checkout's build/: a libcuda under a
# world-writable directory (/tmp) is refused, not probed.
# Root: BPF, uprobes.  Needs `make` (build/fakes); dataloader: python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift || true
B=$(cd "${BUILD:-build}" && pwd)
FAKES=$PWD/build/fakes
CUPTI_REAL=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.* /usr/local/cuda/lib64/libcupti.so.* \
	2>/dev/null | head -1 || true)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
TIMED='import runpy, sys, time
t0 = time.monotonic()
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print("APP_S %.2f" % (time.monotonic() - t0), file=sys.stderr)'
if [ "${JOB:-gpu}" = dataloader ]; then
	cmd=(/usr/bin/python3 -c "$TIMED" tests/workloads/train_torch.py --seconds 8 --workers 4
		--epoch-steps 6)
else
	cmd=(env LD_LIBRARY_PATH="$FAKES" CUDA_INJECTION64_PATH="$PWD/build/libgpusample_agent.so"
		GS_CUPTI_PATH="$FAKES/libcupti.so.13" FAKE_CUPTI_REAL="$CUPTI_REAL"
		/usr/bin/python3 -c "$TIMED" tests/fakes/gpu_app.py "$FAKES/libcuda.so.1"
		tests/fakes/cubins --seconds 3 --rate 600)
fi
printf '%-5s %8s %8s %10s %8s\n' run app_s wall_s window lost
for i in $(seq "$ROUNDS"); do
	t0=$(date +%s.%N)
	"$B/gpusample" -q -o "$T/p$i" --format pprof "$@" -- "${cmd[@]}" > "$T/out" 2> "$T/err"
	t1=$(date +%s.%N)
	app=$(sed -n 's/^APP_S //p' "$T/err")
	head=$("$B/gpusample" report "$T/p$i.pb.gz" 2>/dev/null | grep '^  duration')
	win=$(sed -n 's/^  duration \([^,]*\),.*/\1/p' <<<"$head")
	lost=$(sed -n 's/.* \([0-9]*\) lost.*/\1/p' <<<"$head")
	printf '%-5s %8s %8.2f %10s %8s\n' "$i" "$app" "$(echo "$t1 - $t0" | bc)" "$win" "$lost"
done
