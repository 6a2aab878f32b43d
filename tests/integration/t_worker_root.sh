#!/bin/bash
# `gpusample -p $(pgrep -of ...)` can name a DataLoader worker instead of
# the training process (the workers run the same command line): the
# profile then shows the worker's own time and calls the worker's thread
# the main thread.  gpusample says whose job it is: a note names the worker
# and its parent (the pid to profile).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
/usr/bin/python3 "$PYWL/dataloader_pin.py" --seconds 40 > "$T/out" 2>&1 &
job=$!
workers=""
for _ in $(seq 300); do
	workers=$(pgrep -P $job -f dataloader_pin | tr '\n' ' ')
	[ "$(echo $workers | wc -w)" -ge 2 ] && break
	sleep 0.1
done
[ "$(echo $workers | wc -w)" -ge 2 ] || { kill $job; fail "no DataLoader workers within 30 s: $(cat "$T/out")"; }
w=${workers%% *}
"$GS" -p "$w" -d 3 -o "$T/w" --format pprof > "$T/report" 2> "$T/gs.err" || { kill $job; cat "$T/gs.err"; fail "gpusample -p worker"; }
"$GS" -p "$job" -d 2 -o "$T/m" --format pprof > "$T/mreport" 2> "$T/m.err" || { kill $job; cat "$T/m.err"; fail "gpusample -p job"; }
kill $job; wait $job 2>/dev/null
grep -A3 "pid $w is a DataLoader worker" "$T/report" | head -3
grep -q "pid $w is a DataLoader worker of pid $job: .*profile pid $job" "$T/report" ||
	fail "no note naming the worker's parent: $(grep -i -A2 'notes' "$T/report" | head -5)"
grep -q "is a DataLoader worker" "$T/mreport" && fail "the training process's own profile says it is a worker"
ok "profiling a worker says so and names the job's pid"
