#!/bin/bash
# gs-test-timeout: 120
# The timelines grow with what runs at a time, not with the epochs: a
# PyTorch loop whose DataLoader re-creates its 2 workers every epoch
# (epochs of 5 steps), launched for 20 s, starts dozens of workers; the
# speedscope file and the trace lay the exited ones in lanes by slot under
# their parent ("exited DataLoader workers of pid P, slot K, thread J (N
# processes)"), at most 4 slots (2 at a time; a new pair may start before
# the last has exited), and no exited worker keeps a lane of its own (the
# code before: a lane per worker thread, ~580 for this run).  The slots
# need each worker's timeline to start at its birth, not at the window's
# start.  Both files pass their readers' rules (speedscope's schema, the
# trace's nesting: workers laid one after another in a lane never overlap).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make deps)"
"$GS" -o "$T/tl" -q --format speedscope,trace -- $PY tests/workloads/train_torch.py --seconds 20 \
	--workers 2 --epoch-steps 5 --worker-log "$T/workers.log" > "$T/out" 2> "$T/gs.err" ||
	{ cat "$T/gs.err"; fail "gpusample -- train_torch.py failed"; }
grep -q 'worker_processes=' "$T/out" || fail "the training loop did not finish: $(tail -3 "$T/out")"
python3 - "$T/tl.speedscope.json" "$T/tl.trace.json" "$T/workers.log" <<'PY' || fail "lanes (above)"
import json, re, sys
ss = json.load(open(sys.argv[1]))
tr = json.load(open(sys.argv[2]))
workers = {int(l.split()[0]) for l in open(sys.argv[3]) if l.strip()}
names = [p["name"] for p in ss["profiles"] if p.get("type") == "sampled"]
lane = re.compile(r"exited DataLoader workers of pid \d+, slot (\d+), thread (\d+) \((\d+) process(?:es)?\)")
merged = [lane.match(n) for n in names if lane.match(n)]
slots = {int(m.group(1)) for m in merged}
in_lanes = sum(int(m.group(3)) for m in merged if m.group(2) == "0")
own = {int(m.group(1)) for n in names for m in [re.search(r" pid (\d+) tid", n)] if m} & workers
ev = tr["traceEvents"] if isinstance(tr, dict) else tr
tr_names = [e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"]
print("job: %d workers; speedscope: %d profiles, %d worker lanes in %d slots holding %d workers, "
      "%d workers with lanes of their own; trace: %d threads, %d worker lanes"
      % (len(workers), len(names), len(merged), len(slots), in_lanes, len(own), len(tr_names),
         sum(1 for n in tr_names if lane.match(n))))
bad = []
if len(workers) < 16:
    bad.append("the job started only %d workers" % len(workers))
if not slots or len(slots) > 4:
    bad.append("worker slots %s (2 workers at a time)" % sorted(slots))
if in_lanes < len(workers) - 4:
    bad.append("%d of %d workers in the merged lanes" % (in_lanes, len(workers)))
if len(own) > 2:
    bad.append("%d workers keep lanes of their own" % len(own))
if len(names) > 16 or len(tr_names) > 16:
    bad.append("%d speedscope profiles, %d trace threads" % (len(names), len(tr_names)))
if sorted(n for n in tr_names if lane.match(n)) != sorted(n for n in names if lane.match(n)):
    bad.append("the trace's worker lanes differ from speedscope's")
sys.exit("; ".join(bad) if bad else 0)
PY
node "$ROOT/tests/tools/validate_speedscope.js" "$T/tl.speedscope.json" > "$T/ss.check" ||
	{ head -5 "$T/ss.check"; fail "speedscope file invalid"; }
node "$ROOT/tests/tools/check_trace.js" "$T/tl.trace.json" > "$T/trace.check" ||
	{ head -5 "$T/trace.check"; fail "the trace breaks the nesting rules"; }
ok "exited workers share lanes by slot in speedscope and the trace"
