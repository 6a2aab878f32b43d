#!/usr/bin/python3
"""gpusample against another build of itself: the same workload, the same
rate and window, rounds alternating which build goes first.  For changes
that must not cost CPU or memory (refactors): the profiler's own CPU time
(user + sys of the gpusample process and the children it waited for, from
wait4) and its peak RSS (ru_maxrss), median per build and the ratio
new/base.  Attach mode (-p), so the job's memory is never counted.

  sudo bench/ab.py --base /path/to/old/gpusample [--new build/gpusample]
        [--rounds 4] [--seconds 15] [--hz 999] [--workload train|pyburn]

Prints one line per run and a markdown table; exits 0 (it measures, it
does not judge).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {
    "train": ["/usr/bin/python3", "tests/workloads/train_torch.py", "--workers", "2"],
    "pyburn": ["/usr/bin/python3", "tests/workloads/bench_pyburn.py"],
}


def run_profiler(binary, pid, seconds, hz, out):
    cmd = [binary, "-p", str(pid), "-d", str(seconds), "-F", str(hz), "-q", "-o", out]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"ab: {binary} failed: {err[-2000:]}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def one_round(a, order, tmp, rnd):
    total = (a.seconds + 3) * 2 + 8
    wl = WORKLOADS[a.workload] + ["--seconds", str(total)]
    job = subprocess.Popen(wl, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(6)  # imports, workers started
    rows = []
    try:
        for name in order:
            cpu, rss = run_profiler(getattr(a, name), job.pid, a.seconds, a.hz,
                                    os.path.join(tmp, f"{name}-{rnd}"))
            rows.append((name, cpu, rss))
            print(f"round {rnd} {name}: own CPU {cpu:.2f} s, peak RSS {rss / 1024:.1f} MiB",
                  flush=True)
            time.sleep(2)
    finally:
        job.kill()
        job.wait()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", default=os.path.join(ROOT, "build/gpusample"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--hz", type=int, default=999)
    ap.add_argument("--workload", default="train", choices=sorted(WORKLOADS))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("ab: run as root (BPF)")
    res = {"base": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="gs-ab.") as tmp:
        for r in range(a.rounds):
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for name, cpu, rss in one_round(a, order, tmp, r):
                res[name].append((cpu, rss))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(m for _, m in v))
           for k, v in res.items()}
    print(f"\n{a.workload}, {a.hz} Hz, {a.seconds} s windows, {a.rounds} rounds (medians)\n")
    print("| build | own CPU s | peak RSS MiB |\n|---|---|---|")
    for k in ("base", "new"):
        print(f"| {k} | {med[k][0]:.2f} | {med[k][1] / 1024:.1f} |")
    print(f"| new/base | {med['new'][0] / med['base'][0]:.3f} | "
          f"{med['new'][1] / med['base'][1]:.3f} |")


if __name__ == "__main__":
    main()
