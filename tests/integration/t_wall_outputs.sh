#!/bin/bash
# Wall-clock outputs of a real profile, issue 11 done-when (6): the
# DataLoader workload of t_wall_input_dataset under `gpusample -p PID -d 2
# --format pprof,speedscope,trace`:
#  - PREFIX.trace.json follows the Trace Event Format rules its readers rely
#    on (tests/tools/check_trace.js): process and thread names, the main
#    thread's blocked slices under the DataLoader marked input wait,
#    stacks nested inside state slices, no event dropped;
#  - PREFIX.speedscope.json is schema-valid, every thread on one axis (the
#    same endValue), off-CPU stretches as "[blocked] ..." frames;
#  - both import in headless Chromium: the trace through speedscope's
#    Trace Event Format importer, the speedscope file as speedscope JSON.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
command -v node >/dev/null || fail "node is needed (apt-get install nodejs)"
WALL_SECONDS=2 WALL_GS_ARGS="--format pprof,speedscope,trace" wall_attach out dataset --workers 2 --item-ms 4
pid=$(json_field out pid)
node "$ROOT/tests/tools/check_trace.js" "$T/out.trace.json" --dump > "$T/trace.dump" || { head -20 "$T/trace.dump"; fail "trace JSON invalid"; }
head -1 "$T/trace.dump"
grep -q "dropped=0" "$T/trace.dump" || fail "events dropped"
grep -q "^M $pid 0 process_name python3 (main)" "$T/trace.dump" || fail "no process_name for the main process $pid"
grep -q "^M $pid $pid thread_name python3" "$T/trace.dump" || fail "no thread_name for the main thread"
blocked=$(grep -c "^S $pid $pid blocked .* input wait" "$T/trace.dump")
frames=$(grep -c "^F $pid $pid " "$T/trace.dump")
workers=$(grep "^S " "$T/trace.dump" | awk -v p="$pid" '$2 != p { print $2 }' | sort -u | wc -l)
echo "trace: $blocked blocked input-wait slices and $frames stack slices on the main thread; $workers other processes"
[ "$blocked" -ge 10 ] && [ "$frames" -ge "$blocked" ] && [ "$workers" -ge 2 ] || fail "trace lacks the main thread's input waits or the workers"
node "$ROOT/tests/tools/validate_speedscope.js" "$T/out.speedscope.json" --dump > "$T/ss.dump" || { head "$T/ss.dump"; fail "speedscope file invalid"; }
ends=$(node -e 'const d=require(process.argv[1]); const e=new Set(d.profiles.filter(p=>p.unit==="nanoseconds").map(p=>p.endValue)); console.log(e.size, [...e][0])' "$T/out.speedscope.json")
echo "speedscope: $(head -1 "$T/ss.dump"); thread profiles end at: $ends"
[ "${ends%% *}" = 1 ] || fail "thread profiles are not on one axis (endValues: $ends)"
grep -q ";\[blocked\] " "$T/ss.dump" || fail "no [blocked] frames in the speedscope file"
"$ROOT/tests/tools/speedscope_import.sh" "$T/out.trace.json" "Trace Event Format profile" || fail "Chromium: speedscope did not import the trace"
"$ROOT/tests/tools/speedscope_import.sh" "$T/out.speedscope.json" || fail "Chromium: speedscope did not import the speedscope file"
ok "trace JSON and wall-clock speedscope of a real run: valid, one axis, imported in Chromium"
