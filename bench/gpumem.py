#!/usr/bin/env python3
"""Cost of the CUDA driver memory uprobes (on by default): the driver double's
cuMemAlloc_v2 + cuMemFree_v2 from a Python loop, alone and under gpusample
(launch mode, defaults), in two regimes:

  paced  a caching-allocator-like rate (500 pairs a second): every call is
         recorded with its stack; the cost is the uprobe trap, the BPF stack
         walk and the user-space pairing.
  storm  as fast as the loop goes: past 2,000 recorded calls a second per
         process BPF counts and drops (no stack walk); the cost left is the
         trap and the rate check.

The loop's own CPU time per pair (user + system: the uprobe traps are charged
to it; median of ROUNDS runs) and, from kernel.bpf_stats_enabled,
the BPF programs' own ns per run.  usage: sudo bench/gpumem.py [ROUNDS]
Writes bench/results_gpumem.md.  Root: BPF and bpf_stats.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GS = os.environ.get("GPUSAMPLE", os.path.join(ROOT, "build/gpusample"))
LIB = os.path.join(ROOT, "build/fakes/libcuda.so.1")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3

LOOP = r'''
import ctypes, sys, time
cu = ctypes.CDLL(sys.argv[1]); n = int(sys.argv[2]); rate = float(sys.argv[3])
time.sleep(1.0)   # the profiler finds libcuda mapped
p = ctypes.c_ulonglong(); ref = ctypes.byref(p); sz = ctypes.c_size_t(1 << 20)
alloc, free = cu.cuMemAlloc_v2, cu.cuMemFree_v2
t0 = time.perf_counter(); nxt = t0; c0 = time.process_time()
for i in range(n):
    alloc(ref, sz); free(p)
    if rate:
        nxt += 1.0 / rate
        d = nxt - time.perf_counter()
        if d > 0: time.sleep(d)
t = time.process_time() - c0   # the traps are the process's system time
print("LOOP", n, t, flush=True)
open(sys.argv[4], "w").close()   # the bench reads bpf_stats now
time.sleep(1.5)
'''


def bpf_stats():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return {p.get("name", ""): (p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in json.loads(out or "[]") if p.get("name", "").startswith("gs_mem")}


def run(under, n, rate, tmp):
    loop = os.path.join(tmp, "loop.py")
    mark = os.path.join(tmp, "mark")
    with open(loop, "w") as f:
        f.write(LOOP)
    if os.path.exists(mark):
        os.unlink(mark)
    cmd = ["/usr/bin/python3", loop, LIB, str(n), str(rate), mark]
    if under:
        cmd = [GS, "-q", "-o", os.path.join(tmp, "p"), "--format", "pprof", "--"] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stats = {}
    while proc.poll() is None:
        if under and not stats and os.path.exists(mark):
            stats = bpf_stats()
        time.sleep(0.05)
    for line in proc.stdout.read().splitlines():
        if line.startswith("LOOP"):
            _, k, t = line.split()
            return float(t) / int(k) * 1e9, stats
    raise SystemExit("loop failed: " + " ".join(cmd))


def main():
    if os.geteuid():
        raise SystemExit("run as root (BPF, bpf_stats)")
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, n, rate in (("paced", 1500, 500.0), ("storm", 20000, 0.0)):
            alone, under, st = [], [], {}
            for _ in range(ROUNDS):
                alone.append(run(False, n, rate, tmp)[0])
                t, st = run(True, n, rate, tmp)
                under.append(t)
            a, u = statistics.median(alone), statistics.median(under)
            per = {k: (v[0] / v[1] if v[1] else 0, v[1]) for k, v in st.items()}
            rows.append((name, n, rate, a, u, per))
    out = ["# CUDA driver memory uprobes: cost per call", "",
           f"`sudo bench/gpumem.py {ROUNDS}` on {os.uname().nodename} ({os.cpu_count()} CPUs), "
           f"kernel {os.uname().release}; driver double, cuMemAlloc_v2 + cuMemFree_v2 pairs "
           "from a ctypes loop; medians of the rounds.", "",
           "| regime | pairs | alone CPU ns/pair | under gpusample CPU ns/pair | added ns/pair | "
           "BPF ns/run (runs): enter, return, free |", "|---|---|---|---|---|---|"]
    for name, n, rate, a, u, per in rows:
        b = ", ".join(f"{per.get(k, (0, 0))[0]:.0f} ({per.get(k, (0, 0))[1]})"
                      for k in ("gs_mem_enter", "gs_mem_return", "gs_mem_free"))
        out.append(f"| {name} ({'%g/s' % rate if rate else 'unpaced'}) | {n} | {a:.0f} | "
                   f"{u:.0f} | {u - a:.0f} | {b} |")
    text = "\n".join(out) + "\n"
    with open(os.path.join(ROOT, "bench/results_gpumem.md"), "w") as f:
        f.write(text)
    print(text)


main()
