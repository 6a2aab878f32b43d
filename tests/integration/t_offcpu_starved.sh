#!/bin/bash
# Off-CPU, issue 11 done-when (3): more spinning processes than CPUs (nproc
# + 1, one thread each), on Debian's python3 (3.11) and the sid root's
# python3.14 (offcpu_lib.sh: OFF_STACKS).  Each spinner's runnable share in the profile
# (runnable / (cpu + offcpu) of its thread) is within 5 points of the share
# it measured itself from /proc/thread-self/schedstat (run delay, field 2,
# over its spin), and the waiting is runnable, not blocked (< 5 points).
# The spinners must really be starved (>= 10% runnable) or the test proves
# nothing.  Launch mode; the spinners are fork children (followed).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/offcpu_lib.sh"
for stack in "${OFF_STACKS[@]}"; do
	off_use "$stack"
	off_launch "$T/s.$OFF_TAG" starved 4
	python3 - "$T/s.$OFF_TAG.pb.gz" "$T/s.$OFF_TAG.json" <<'EOF' || fail "$OFF_TAG: runnable shares differ from schedstat (above)"
import collections, json, sys
sys.path.insert(0, "tests/tools")
from thread_times import load

prof, truth = sys.argv[1], json.load(open(sys.argv[2]))["spinners"]
per = collections.defaultdict(lambda: collections.Counter())
for s in load(prof):
    per[s["tid"]][s["state"]] += s["cpu_s"] + s["offcpu_s"]
bad = 0
for w in truth:
    c = per.get(w["tid"])
    wall = sum(c.values()) if c else 0
    if not wall:
        print("spinner tid %d: not in the profile  <-- FAIL" % w["tid"])
        bad += 1
        continue
    run, blk = c["runnable"] / wall, c["blocked"] / wall
    want = w["run_delay_s"] / w["wall_s"]
    ok = abs(run - want) <= 0.05 and blk < 0.05 and want >= 0.10
    print("spinner tid %d: schedstat runnable %.1f%% of %.2f s; profile runnable %.1f%%, "
          "blocked %.1f%%, running %.1f%% of %.2f s%s"
          % (w["tid"], 100 * want, w["wall_s"], 100 * run, 100 * blk, 100 * c["running"] / wall,
             wall, "" if ok else "  <-- FAIL"))
    bad += not ok
sys.exit(1 if bad else 0)
EOF
	ok "$OFF_TAG: starved spinners: runnable share matches schedstat"
done
