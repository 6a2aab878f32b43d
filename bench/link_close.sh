#!/bin/bash
# How late a run ends because of uprobe link closes: the GPU double's app
# (tests/fakes/gpu_app.py, with the agent, GPU memory probes on libcuda)
# for 3 s under `gpusample -- ...`, ROUNDS times.  Prints per run the app's
# own run time, gpusample's wall time and the profile's window (pprof
# Duration).  Before the link reaper each probed process's exit stopped the
# record loop for its 22+ link closes (0.3-0.5 s each here).
#   sudo bench/link_close.sh [ROUNDS] [gpusample options...]
# Root: BPF, uprobes.  Needs `make` (build/fakes) and go (go tool pprof).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift || true
B=${BUILD:-build}
FAKES=$PWD/$B/fakes
CUPTI_REAL=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.* /usr/local/cuda/lib64/libcupti.so.* \
	2>/dev/null | head -1 || true)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '%-5s %8s %10s %10s\n' run app_s wall_s window_s
for i in $(seq "$ROUNDS"); do
	t0=$(date +%s.%N)
	"$B/gpusample" -q -o "$T/p$i" --format pprof "$@" -- env LD_LIBRARY_PATH="$FAKES" \
		CUDA_INJECTION64_PATH="$PWD/$B/libgpusample_agent.so" GS_CUPTI_PATH="$FAKES/libcupti.so.13" \
		FAKE_CUPTI_REAL="$CUPTI_REAL" /usr/bin/python3 -c '
import runpy, sys, time
t0 = time.monotonic()
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print("APP_S %.2f" % (time.monotonic() - t0), file=sys.stderr)
' tests/fakes/gpu_app.py "$FAKES/libcuda.so.1" tests/fakes/cubins --seconds 3 --rate 600 \
		> "$T/out" 2> "$T/err"
	t1=$(date +%s.%N)
	app=$(sed -n 's/^APP_S //p' "$T/err")
	win=$(go tool pprof -raw "$T/p$i.pb.gz" 2>/dev/null | sed -n 's/^Duration: //p')
	printf '%-5s %8s %10.2f %10s\n' "$i" "$app" "$(echo "$t1 - $t0" | bc)" "$win"
done
