#!/bin/bash
# gs-test-timeout: 90
# The timelines show a waiting thread's state for its whole window: an
# input-bound main thread (tests/workloads/py_input_bound.py: per step a
# burst of 40 short sleeps, then a ~150 ms read on a pipe a feeder thread
# fills) has most of its waits without an off-CPU stack (the stack rate and
# the per-window cap skip them); their time, known exactly by stretch from
# the END records, must still be on the timeline.  Blank (no sample in
# speedscope, no state slice in the trace) at most 5% of the thread's span
# in both (it was ~80% when the unsampled waits' time was only spread over
# the sampled ones' scaled lengths).  The pprof still has the thread's
# time: cpu + offcpu over 3.5 s of the 4 s loop.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
PY=/usr/bin/python3
[ -x "$PY" ] || fail "$PY missing (make test-deps)"
"$GS" -o "$T/ib" -q --format speedscope,trace,pprof -- "$PY" "$PYWL/py_input_bound.py" 4 \
	> "$T/ib.json" 2> "$T/ib.err" || { cat "$T/ib.err"; fail "gpusample -- py_input_bound.py failed"; }
tid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tid"])' "$T/ib.json") ||
	fail "no tid from the workload: $(cat "$T/ib.json")"
out=$(python3 tests/tools/timeline_blank.py "$T/ib.speedscope.json" "$T/ib.trace.json" "$tid") ||
	fail "timeline_blank.py: $out"
echo "$out"
echo "$out" | awk '{ if ($3 <= 0 || $2 > 0.05 * $3) { print $1 ": blank " $2 " s of " $3 " s  <-- FAIL"; bad = 1 } }
	END { exit bad }' || fail "the main thread's timeline is blank where it waited (above)"
ok "input-bound main thread: its waits cover its timeline in speedscope and the trace"
python3 - "$T/ib.pb.gz" "$tid" <<'PY' || fail "the main thread's cpu + offcpu differs from the window (above)"
import sys
sys.path.insert(0, "tests/tools")
from thread_times import load
smp = [s for s in load(sys.argv[1]) if s["tid"] == int(sys.argv[2])]
tot = sum(s["cpu_s"] + s["offcpu_s"] for s in smp)
print("main thread: cpu + offcpu %.3f s" % tot)
sys.exit(0 if smp and tot > 3.5 else 1)
PY
ok "input-bound main thread: pprof sums whole"
