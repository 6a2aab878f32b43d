#!/bin/bash
# `make bench`: gpusample's overhead and throughput against no profiler and
# against peers (perf, profile-bpfcc, torch.profiler) on the same workloads in
# the same run.  Writes bench/results.md (printed at the end) and the raw
# numbers under bench/results/.  See bench/README.md.
#
# Environment (all optional):
#   GPUSAMPLE=path        gpusample binary (default build/gpusample)
#   BENCH_ROUNDS=5        rounds of the slowdown runs (configurations rotated in each)
#   BENCH_WINDOW=5        measured seconds per slowdown run (after BENCH_WARMUP=2)
#   BENCH_LONG=1          memory run of 600 s instead of 90 s (BENCH_LONG_SECONDS=N for any)
#   BENCH_LARGE_HZ=25000 BENCH_LARGE_SECONDS=55   the >= 1M-sample run
#   BENCH_PARTS=slowdown,bpf,large,long           which parts to run
#   BENCH_OUT=dir         where results.md and results/ go (default bench/)
#   BENCH_ONLY=ctxsw      only the context-switch benchmark (bench/ctxsw.py,
#                         results_ctxsw.md); by default it runs after bench.py
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "bench: needs root (perf, eBPF, kernel.bpf_stats_enabled): sudo make bench" >&2
	exit 1
fi
GPUSAMPLE=${GPUSAMPLE:-build/gpusample}
if [ ! -x "$GPUSAMPLE" ]; then
	echo "bench: $GPUSAMPLE not built; run make first" >&2
	exit 1
fi
missing=""
for t in perf bpftool profile-bpfcc go; do
	command -v "$t" >/dev/null || missing="$missing $t"
done
/usr/bin/python3 -c 'import torch' 2>/dev/null || missing="$missing python3-torch"
if [ -n "$missing" ]; then
	echo "bench: warning: missing:$missing (GS_BENCH_DEPS=1 scripts/install-deps.sh installs them);" \
	     "their rows are skipped" >&2
fi
export GPUSAMPLE
if [ "${BENCH_ONLY:-}" != ctxsw ]; then
	/usr/bin/python3 bench/bench.py "$@"
fi
exec /usr/bin/python3 bench/ctxsw.py
