#!/usr/bin/python3
"""Checks a train_steps.py run against the profile's step track
(PREFIX.trace.json): argv = trace.json, the script's output, tolerance ms.
Every step the script ran is one slice "step K"; each step's wall time (the
profile's: backward end to backward end) is within 10% or TOL ms of the
script's own time between two backward returns, and of its own step time (top of
the loop to after optimizer.step()) for at least 90% of the steps and for
every step over 250 ms (the stalls).  Prints a line per step that misses."""
import json
import sys

trace, out, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
steps = {}
for e in json.load(open(trace))["traceEvents"]:
    if e.get("cat") == "step":
        steps[e["args"]["step"]] = e["args"].get("wall_us")
mine = {}
for line in open(out):
    f = line.split()
    if line.startswith("step ") and len(f) == 5:
        mine[int(f[1])] = (float(f[2]), float(f[3]), float(f[4]))
if sorted(steps) != sorted(mine):
    sys.exit("profile steps %s, script steps %s" % (sorted(steps), sorted(mine)))
bad_probe, bad_own = [], []
for k in sorted(mine):
    if k == 1:
        if steps[k] is not None:
            sys.exit("step 1 has a wall time, but its start was not seen")
        continue
    prof = steps[k] / 1000.0
    bwd = (mine[k][2] - mine[k - 1][2]) * 1000.0
    own = (mine[k][1] - mine[k][0]) * 1000.0
    if abs(prof - bwd) > max(tol, 0.1 * bwd):
        bad_probe.append("step %d: profile %.1f ms, script backward end to backward end %.1f ms" % (k, prof, bwd))
    if abs(prof - own) > max(tol, 0.1 * own):
        bad_own.append((own, "step %d: profile %.1f ms, script's own step %.1f ms" % (k, prof, own)))
for b in bad_probe:
    print(b)
for _, b in bad_own:
    print(b)
if bad_probe:
    sys.exit("%d steps off the script's time between backward returns" % len(bad_probe))
if len(bad_own) > len(mine) // 10 or any(own > 250 for own, _ in bad_own):
    sys.exit("%d steps off the script's own step time" % len(bad_own))
print("%d steps match (%d within tolerance of the script's own step time)"
      % (len(mine), len(mine) - 1 - len(bad_own)))
