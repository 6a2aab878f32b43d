#!/bin/bash
# Off-CPU, issue 11 accounting: for every thread, cpu + offcpu in the
# profile equals its wall time within 2%.
#  1. launch mode, threads born and ended inside the window (busy/sleep mixes
#     and a pipe ping-pong pair that switches thousands of times a second,
#     so their stacks are sampled with p < 1): their lifetime as the workload
#     measured it (from the thread's start time in /proc/thread-self/stat, in
#     10 ms clock ticks, to its last line), within 2% + 10 ms;
#  2. attach mode (-p, -d 2) on the same workload: every thread that lives
#     through the whole window (the main thread: a wait loop, then join; the
#     "napper", asleep from before the window to after it) has cpu + offcpu =
#     the profile's duration, and the napper's wait, begun before gpusample
#     attached, has its whole stack from the start: kernel (nanosleep),
#     native and Python (threading's Thread.run), not the "since before
#     the window" marker of the /proc fallback.
# Parts 1 and 2 run on Debian's python3 (3.11) and on the sid root's
# python3.14 (offcpu_lib.sh: OFF_STACKS).
# Also: the ping-pong pair really had its stacks sampled (the comment says
# switch-outs went without a stack) and --no-offcpu records no offcpu.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/offcpu_lib.sh"
f=$PYWL/py_offcpu.py
for stack in "${OFF_STACKS[@]}"; do
	off_use "$stack"
	off_launch "$T/m.$OFF_TAG" mixed 3
	python3 - "$T/m.$OFF_TAG.pb.gz" "$T/m.$OFF_TAG.json" <<'EOF' || fail "$OFF_TAG: per-thread cpu + offcpu differs from the lifetime (above)"
import collections, json, sys
sys.path.insert(0, "tests/tools")
from thread_times import load

prof, truth = sys.argv[1], json.load(open(sys.argv[2]))["threads"]
tot = collections.Counter()
cpu = collections.Counter()
for s in load(prof):
    tot[s["tid"]] += s["cpu_s"] + s["offcpu_s"]
    cpu[s["tid"]] += s["cpu_s"]
bad = 0
for w in truth:
    got, life = tot[w["tid"]], w["life_s"]
    ok = abs(got - life) <= 0.02 * life + 0.01
    print("%-13s tid %d: lifetime %.4f s, profile cpu %.4f + offcpu %.4f = %.4f s (%+.2f%%)%s"
          % (w["name"], w["tid"], life, cpu[w["tid"]], got - cpu[w["tid"]], got,
             100 * (got - life) / life, "" if ok else "  <-- FAIL"))
    bad += not ok
sys.exit(1 if bad else 0)
EOF
	go tool pprof -raw "$T/m.$OFF_TAG.pb.gz" 2>/dev/null | grep -q 'switch-outs/s per thread.* [1-9][0-9]* switch-outs without a stack' ||
		fail "$OFF_TAG: the ping-pong pair's stacks were not sampled (p < 1 path untested): $(go tool pprof -raw "$T/m.$OFF_TAG.pb.gz" 2>&1 | grep -i 'off-CPU')"

	# 2. attach: threads there for the whole window; 6 s: attach (BPF load,
	# unwind tables, the start-of-window stacks) and the 2 s window fit in
	# the napper's sleep on a loaded machine too
	GS_GO=$T/go.$OFF_TAG GS_SECONDS=6 "$OFF_PY" "$OFF_WL" mixed > "$T/a.$OFF_TAG.json" &
	py_pid=$!
	# attach once the napper sleeps (the sid root's python starts slower
	# than gpusample attaches)
	for _ in $(seq 1 200); do
		[ "$(ls "/proc/$py_pid/task" 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.05
	done
	gs_start -p "$py_pid" -d 2 -o "$T/a.$OFF_TAG" -q --format pprof
	touch "$T/go.$OFF_TAG"
	gs_wait
	wait "$py_pid" || fail "$OFF_TAG: py_offcpu.py mixed (attached) exited with $?"
	python3 - "$T/a.$OFF_TAG.pb.gz" "$py_pid" "$T/a.$OFF_TAG.json" <<'EOF' || fail "$OFF_TAG: threads alive through the window: cpu + offcpu != duration (above)"
import collections, json, re, subprocess, sys
sys.path.insert(0, "tests/tools")
from thread_times import load

prof, main_tid = sys.argv[1], int(sys.argv[2])
nap_tid = json.load(open(sys.argv[3]))["napper_tid"]
raw = subprocess.run(["go", "tool", "pprof", "-raw", prof], capture_output=True, text=True).stdout
dur = float(re.search(r"duration: ([\d.]+) s", raw).group(1))
tot = collections.Counter()
for s in load(prof):
    tot[s["tid"]] += s["cpu_s"] + s["offcpu_s"]
got = tot[main_tid]
ok = abs(got - dur) <= 0.02 * dur
nap = [s for s in load(prof) if s["tid"] == nap_tid]
nap_tot = sum(s["cpu_s"] + s["offcpu_s"] for s in nap)
# the stack the window's start took of it (dump/ through the task iterator)
seed = sum(s["offcpu_s"] for s in nap if any("nanosleep" in f for f in s["frames"])
           and any(f.startswith("Thread.run") for f in s["frames"])
           and not any(f.startswith("[off-CPU since before the window") for f in s["frames"]))
print("napper: cpu + offcpu %.4f s, of which %.4f s on its wait with kernel and Python frames"
      % (nap_tot, seed))
if seed < 0.98 * dur:
    print("napper stacks:", [s["frames"] for s in nap])
ok = ok and abs(nap_tot - dur) <= 0.02 * dur and seed >= 0.98 * dur
print("main tid %d (alive all window): cpu + offcpu %.4f s, duration %.4f s%s"
      % (main_tid, got, dur, "" if ok else "  <-- FAIL"))
others = {t: v for t, v in tot.items() if t not in (main_tid, nap_tid)}
print("other threads:", ", ".join("%d: %.3f s" % kv for kv in sorted(others.items())))
sys.exit(0 if ok and all(v <= dur * 1.02 for v in others.values()) else 1)
EOF
done

# --no-offcpu: no offcpu anywhere (on Debian's python3)
off_use "${OFF_STACKS[0]}"
off_launch "$T/n" waits 1 --no-offcpu
n=$(python3 -c 'import sys; sys.path.insert(0, "tests/tools")
from thread_times import load
print(int(sum(s["offcpu_s"] for s in load(sys.argv[1])) * 1e9))' "$T/n.pb.gz")
[ "$n" = "0" ] || fail "--no-offcpu profile has $n s offcpu"
ok "cpu + offcpu = wall per thread (lifetimes, whole window); --no-offcpu off"
