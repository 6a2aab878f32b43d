#!/bin/bash
# bench/soak.sh: a long attach to a PyTorch CPU training loop whose DataLoader
# re-creates its 2 workers every epoch (persistent_workers=False, PyTorch's
# default), as a user profiling a whole run would do.  Records gpusample's
# resident memory and CPU time every 30 s, then its losses, output sizes and
# the report's DataLoader worker totals against the job's own count of the
# workers it started in the profiled window.
#
#   sudo bench/soak.sh            # 2 hours
#   sudo bench/soak.sh --quick    # 20 minutes
#   SOAK_SECONDS=N SOAK_EPOCH_STEPS=N SOAK_OUT=DIR GPUSAMPLE=bin bench/soak.sh
#
# Writes DIR (default bench/results/soak-<seconds>s): rss.csv (elapsed s,
# VmRSS kB, gpusample CPU s), summary.txt, the report (report.txt),
# gpusample's stderr (gs.err), the job's output and worker log.  Outputs
# are written to a scratch directory and only their sizes are kept.
set -u
cd "$(dirname "$0")/.." || exit 1
SECONDS_WANTED=${SOAK_SECONDS:-7200}
[ "${1:-}" = --quick ] && SECONDS_WANTED=${SOAK_SECONDS:-1200}
EPOCH_STEPS=${SOAK_EPOCH_STEPS:-20}
INTERVAL=${SOAK_INTERVAL:-30}
GS=${GPUSAMPLE:-build/gpusample}
OUT=${SOAK_OUT:-bench/results/soak-${SECONDS_WANTED}s}
PY=/usr/bin/python3

[ "$(id -u)" = 0 ] || { echo "soak.sh: run as root (eBPF)"; exit 1; }
[ -x "$GS" ] || { echo "soak.sh: $GS not built (make all)"; exit 1; }
$PY -c 'import torch' 2>/dev/null || { echo "soak.sh: python3-torch missing (make deps)"; exit 1; }
mkdir -p "$OUT" || exit 1
SCRATCH=$(mktemp -d /tmp/gs-soak.XXXXXX)
trap 'kill $job $gs 2>/dev/null; rm -rf "$SCRATCH"' EXIT
rm -f "$OUT/workers.log"

# The job outlives the window (gpusample ends on -d, not on the job's
# exit): the report counts what the window saw, the worker log says when
# each worker started.
$PY tests/workloads/train_torch.py --seconds $((SECONDS_WANTED + 20)) --workers 2 \
	--epoch-steps "$EPOCH_STEPS" --worker-log "$OUT/workers.log" > "$OUT/job.out" 2>&1 &
job=$!
sleep 5
"$GS" -p $job -d "$SECONDS_WANTED" --format pprof,speedscope,trace -o "$SCRATCH/soak" \
	> "$OUT/report.txt" 2> "$OUT/gs.err" &
gs=$!
tck=$(getconf CLK_TCK)
t0=$(date +%s)
# rss_kb: VmRSS; anon_kb: RssAnon (file pages of the libraries read for
# symbols are in VmRSS too, and the kernel can take them back)
echo "elapsed_s,rss_kb,cpu_s,anon_kb" > "$OUT/rss.csv"
while kill -0 $gs 2>/dev/null; do
	rss=$(awk '/^VmRSS/ { print $2 }' /proc/$gs/status 2>/dev/null)
	anon=$(awk '/^RssAnon/ { print $2 }' /proc/$gs/status 2>/dev/null)
	cpu=$(awk -v t="$tck" '{ printf "%.2f", ($14 + $15) / t }' /proc/$gs/stat 2>/dev/null)
	[ -n "$rss" ] && echo "$(($(date +%s) - t0)),$rss,$cpu,$anon" >> "$OUT/rss.csv"
	sleep "$INTERVAL"
done
wait $gs
rc=$?
wait $job

# The window on CLOCK_MONOTONIC, from the profile's comment; the job's
# workers that ran in it: started in it, or alive at its start (started at
# most one epoch before it).
win=$(zcat "$SCRATCH/soak.pb.gz" | grep -ao 'window: CLOCK_MONOTONIC [0-9.]* s + [0-9.]* s')
w0=$(echo "$win" | awk '{ print $3 }')
wd=$(echo "$win" | awk '{ print $6 }')
started=$(awk -v a="$w0" -v d="$wd" '$2 >= a && $2 <= a + d' "$OUT/workers.log" | wc -l)
line=$(grep -m1 'DataLoader workers' "$OUT/report.txt")
reported=$(echo "$line" | grep -o '[0-9,]* process' | head -1 | tr -d ', process')
{
	echo "soak: gpusample -p (train_torch.py --epoch-steps $EPOCH_STEPS --workers 2), ${SECONDS_WANTED} s, exit $rc"
	echo "date: $(date -u +%FT%TZ)  host: $(nproc) CPUs, $(uname -r)"
	echo "job: $(tail -1 "$OUT/job.out")"
	echo "window: CLOCK_MONOTONIC $w0 s + $wd s"
	echo "job's workers started in the window: $started (about $((started / 2)) epochs)"
	echo "report: $line"
	echo "report's worker processes: ${reported:-?}"
	echo "gpusample: $(grep -a 'CPU samples' "$OUT/gs.err" | tail -1 | sed 's/.*gpusample: //')"
	# "the end": the last row inside the window (the rows after it are the
	# outputs being written, the peak)
	awk -F, -v win="$SECONDS_WANTED" 'NR == 2 { a = $2 } NR > 1 { if ($1 >= 300 && !f) { f = 1; b = $2; tb = $1 } if ($1 <= win) { l = $2; tl = $1; an = $4 } c = $3; if ($2 > m) m = $2 }
		END { printf "anon at the end of the window: %.1f MiB\n", an / 1024;
		      printf "rss: %.1f MiB at start, %s at 5 min, %.1f MiB at the end of the window (%d s), peak %.1f MiB (writing)\n", a / 1024, f ? sprintf("%.1f MiB", b / 1024) : "-", l / 1024, tl, m / 1024;
		      if (f && tl > tb) printf "rss slope after 5 min: %.3f MiB/min\n", (l - b) / 1024 / ((tl - tb) / 60);
		      printf "gpusample CPU: %.1f s in all, writing included (%.2f%% of one CPU over the window)\n", c, 100 * c / win }' "$OUT/rss.csv"
	for f in "$SCRATCH"/soak.*; do
		[ -e "$f" ] && echo "output: $(basename "$f") $(stat -c %s "$f") bytes"
	done
	grep -a 'lost' "$OUT/report.txt" | head -1
} | tee "$OUT/summary.txt"
exit $rc
