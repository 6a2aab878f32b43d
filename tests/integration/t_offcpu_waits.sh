#!/bin/bash
# Off-CPU, issue 11 done-when (4): threads waiting in time.sleep, a
# threading.Lock acquire and select.select each show their own stack (the
# Python line of the call, the kernel wait below it: nanosleep, futex,
# select) and the time they waited, as the workload measured it with
# perf_counter around each call (offcpu within 5% or 30 ms; the measured
# time also holds the calls' own few ms on a CPU).  Launch mode, read back
# with go tool pprof -traces -lines.  On Debian's python3 (3.11) and the sid
# root's python3.14 (offcpu_lib.sh: OFF_STACKS).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/offcpu_lib.sh"
f=$PYWL/py_offcpu.py
for stack in "${OFF_STACKS[@]}"; do
	off_use "$stack"
	off_launch "$T/w.$OFF_TAG" waits 3
	python3 - "$T/w.$OFF_TAG.pb.gz" "$T/w.$OFF_TAG.json" \
		"sleeper:$(marker_line "$f" SLEEP_LINE):nanosleep" \
		"locker:$(marker_line "$f" LOCK_LINE):futex_wait" \
		"selector:$(marker_line "$f" SELECT_LINE):do_select" <<'EOF' || fail "$OFF_TAG: off-CPU stacks or durations wrong (above)"
import json, re, sys
sys.path.insert(0, "tests/tools")
from thread_times import load

prof, truth = sys.argv[1], json.load(open(sys.argv[2]))["waits"]
smp = load(prof, "-lines")
bad = 0
for spec in sys.argv[3:]:
    name, line, kframe = spec.split(":")
    w = truth[name]
    mine = [s for s in smp if s["tid"] == w["tid"] and s["offcpu_s"] > 0]
    # the leaf-most Python frame is the wait's call line
    at = []
    for s in mine:
        py = [fr for fr in s["frames"] if re.search(r"\.py:\d+$", fr)]
        if py and py[0].endswith("py_offcpu.py:" + line) and name in py[0].split()[0]:
            at.append(s)
    got = sum(s["offcpu_s"] for s in at)
    kern = sum(s["offcpu_s"] for s in at if any(kframe in fr for fr in s["frames"]))
    top = max(at, key=lambda s: s["offcpu_s"])["frames"] if at else []
    tol = max(0.05 * w["waited_s"], 0.03)
    ok = abs(got - w["waited_s"]) <= tol and got > 0 and kern >= 0.8 * got
    print("%-9s tid %d: waited %.3f s in %d calls; profile %.3f s at line %s (%.0f%% under %s)%s"
          % (name, w["tid"], w["waited_s"], w["calls"], got, line, 100 * kern / got if got else 0,
             kframe, "" if ok else "  <-- FAIL"))
    if not ok:
        bad += 1
        print("   top stack:", ";".join(top[:25]))
        print("   thread states:", sorted({(s["state"], round(s["offcpu_s"], 4)) for s in mine})[:10])
sys.exit(1 if bad else 0)
EOF
	ok "$OFF_TAG: sleep, lock and select waits: own stacks, durations as measured"
done
