#!/bin/bash
# gs-test-timeout: 330
# A PyTorch CPU loop whose DataLoader re-creates its 2 workers every epoch
# (persistent_workers=False, epochs of 5 steps: a new pair every second or
# so), profiled whole for 150 s: after the first minute gpusample's resident
# memory grows by less than 100 KB per new worker (what exited workers leave
# is retired, not kept until the end: the code before kept ~260 KB each),
# and the report counts every worker the job started.  The bound is per
# worker because the churn rate follows the machine's speed.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SECS=${GS_SOAK_SECONDS:-150}
WARMUP=60
MAX_KB_PER_WORKER=${GS_SOAK_MAX_KB_PER_WORKER:-100}
$PY -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make deps)"
"$GS" -o "$T/churn" --format pprof -- $PY tests/workloads/train_torch.py --seconds "$SECS" \
	--workers 2 --epoch-steps 5 > "$T/out" 2> "$T/gs.err" &
gs=$!
t0=$(date +%s)
: > "$T/rss"
while kill -0 "$gs" 2>/dev/null; do
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$gs/status" 2>/dev/null)
	[ -n "$rss" ] && echo "$(($(date +%s) - t0)) $rss" >> "$T/rss"
	sleep 5
done
wait "$gs" || { cat "$T/gs.err"; fail "gpusample exited with $?"; }
job=$(grep -o 'epochs=[0-9]* worker_processes=[0-9]*' "$T/out") ||
	fail "the training loop did not finish: $(tail -3 "$T/out")"
# The slope of RSS (least squares) after the warm-up, in kB per minute.
awk -v w=$WARMUP '$1 >= w { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
	END { if (n < 8) exit 1; printf "%.0f\n", 60 * (n * sxy - sx * sy) / (n * sxx - sx * sx) }' \
	"$T/rss" > "$T/slope" || fail "too few RSS samples after ${WARMUP} s: $(cat "$T/rss")"
slope=$(cat "$T/slope")
started=${job##*worker_processes=}
per_min=$((started * 60 / SECS))
per_worker=$((slope / (per_min > 0 ? per_min : 1)))
echo "gpusample RSS (s kB): $(tr '\n' ' ' < "$T/rss")"
echo "RSS slope after ${WARMUP} s: $slope kB/min at $per_min new workers a minute: $per_worker kB a worker (bound $MAX_KB_PER_WORKER)"
line=$(grep -m1 'DataLoader workers (' "$T/out") || fail "no DataLoader workers line in the report"
echo "job: $job"
echo "report: $line"
reported=$(echo "$line" | sed -n 's/.*DataLoader workers (\([0-9]*\) process.*/\1/p')
# A worker killed at the job's end before its first tick leaves no sample.
[ -n "$reported" ] && [ "$reported" -le "$started" ] && [ "$reported" -ge $((started - 2)) ] ||
	fail "the report counts ${reported:-no} worker processes, the job started $started"
epochs=${job%% *}
epochs=${epochs#epochs=}
gens=$(echo "$line" | sed -n 's/.* over \([0-9]*\) epochs, 2 at a time.*/\1/p')
[ -n "$gens" ] && [ "$gens" -ge $((epochs - 1)) ] && [ "$gens" -le "$epochs" ] ||
	fail "the report says ${gens:-no} epochs of 2 workers at a time, the job ran $epochs"
[ "$per_worker" -le "$MAX_KB_PER_WORKER" ] ||
	fail "gpusample's RSS grows $slope kB/min after warm-up, $per_worker kB per new worker (bound $MAX_KB_PER_WORKER)"
ok "$started workers over ${job%% *}, $reported counted; RSS +$per_worker kB a worker after ${WARMUP} s"
