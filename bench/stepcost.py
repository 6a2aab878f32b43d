#!/usr/bin/python3
"""Cost of the training-step probe (a uprobe on autograd's backward,
bpf/steps.bpf.h), on its worst case: a loop that does nothing but call
backward on a 4-element tensor (tests/workloads/train_steps.py --mode
inner, about 50 us per call), so every call pays the uprobe.

  sudo bench/stepcost.py [--rounds N] [--seconds S] [--gpusample BINARY]

Per round, in alternating order: the loop alone, and the loop launched
under `gpusample -q --format folded` (99 Hz sampling and off-CPU
accounting on, the defaults).  The loop prints how many backward calls it
made in S seconds; the difference in us per call is the probe's cost plus
the sampler's share of that thread (an upper bound for the probe).  With
kernel.bpf_stats_enabled=1, bpftool's run time of gs_step_mark over its run
count gives the BPF program's own ns per call (the uprobe's trap and
single-step are not in it).  Results: bench/results_stepcost.md.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = os.path.join(ROOT, "tests", "workloads", "train_steps.py")


def calls(text):
    m = re.search(r"backwards=(\d+)", text)
    return int(m.group(1)) if m else None


def plain(seconds):
    out = subprocess.run([bench.PY, LOOP, "--mode", "inner", "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=600).stdout
    return calls(out)


def profiled(binary, seconds, tmp):
    prefix = os.path.join(tmp, "p")
    with open(prefix + ".out", "w") as out, open(prefix + ".err", "w") as err:
        g = bench.spawn([binary, "-q", "--format", "folded", "-o", prefix, "--", bench.PY, LOOP,
                         "--mode", "inner", "--seconds", str(seconds)], stdout=out, stderr=err)
        step = None
        while g.poll() is None:
            for p in bench.bpftool_progs(g.pid):
                if p.get("name") == "gs_step_mark":
                    step = p
            time.sleep(0.5)
    with open(prefix + ".out") as f:
        n = calls(f.read())
    rt, rc = (step or {}).get("run_time_ns", 0), (step or {}).get("run_cnt", 0)
    return n, (rt / rc if rc else None), rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--gpusample", default=os.path.join(ROOT, "build", "gpusample"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("stepcost: run as root (bpf_stats, BPF)")
    us_plain, us_prof, bpf_ns = [], [], []
    old = bench.set_bpf_stats(True)
    try:
        with tempfile.TemporaryDirectory(prefix="stepcost.") as tmp:
            for rnd in range(a.rounds):
                order = ["plain", "profiled"] if rnd % 2 == 0 else ["profiled", "plain"]
                for what in order:
                    load = os.getloadavg()[0]
                    if what == "plain":
                        n = plain(a.seconds)
                        us_plain.append(a.seconds * 1e6 / n)
                        r = {"calls": n}
                    else:
                        n, ns, runs = profiled(a.gpusample, a.seconds, tmp)
                        us_prof.append(a.seconds * 1e6 / n)
                        if ns:
                            bpf_ns.append(ns)
                        r = {"calls": n, "bpf_ns_per_run": ns and round(ns), "bpf_runs": runs}
                    r["load1"] = round(load, 2)
                    print(f"round {rnd} {what}: {json.dumps(r)}", flush=True)
    finally:
        bench.set_bpf_stats(old == "1")
    p, q = statistics.median(us_plain), statistics.median(us_prof)
    print(f"\nmedians: {p:.2f} us per backward alone, {q:.2f} us under gpusample "
          f"(+{q - p:.2f} us per call), gs_step_mark "
          f"{statistics.median(bpf_ns) if bpf_ns else float('nan'):.0f} ns per run")


if __name__ == "__main__":
    main()
