#!/usr/bin/python3
"""CPU-bound pure-Python benchmark workload: threads in the main process and
worker processes, all running the same call chain of pure-Python functions.

Throughput is counted over a measurement window that starts after a
warm-up, so start-up costs (imports, a profiler attaching, forking) are
excluded from the steady-state figure; bench/ also records the wall time of
the whole command.

Prints one line:
  ops=N seconds=S ops_per_s=R t0=T0 t1=T1 pid=P
where T0/T1 are CLOCK_MONOTONIC seconds (time.monotonic()) of the window, so
the harness can relate the window to a profiler's CPU time samples.
With --result FILE the same line is also written to FILE.
"""
import argparse
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

import bench_common

CHUNK = 2000  # loop iterations between counter updates (about 1 ms)


def leaf(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def middle(n):
    return leaf(n) + 1


def outer(n):
    return middle(n)


def burn(counter, stop):
    """Run the chain until stop is set; counter[0] counts chunks done."""
    while not stop.is_set():
        outer(CHUNK)
        counter[0] += 1


def worker_main(shared, stop, parent):
    """A worker process: one thread burning, counting into shared memory.
    Stops with the parent too (killed parents leave no burning orphans)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    local = [0]
    t = threading.Thread(target=burn, args=(local, stop), name="burn-w")
    t.start()
    while not stop.is_set():
        shared.value = local[0]
        stop.wait(0.02)
        if os.getppid() != parent:
            stop.set()
    t.join()
    shared.value = local[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="measurement window")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds before the window")
    ap.add_argument("--threads", type=int, default=2, help="burning threads in the main process")
    ap.add_argument("--procs", type=int, default=2, help="burning worker processes")
    ap.add_argument("--result", default=None, help="also write the result line to this file")
    args = ap.parse_args()

    ctx = mp.get_context("fork")
    stop_procs = ctx.Event()
    shared = [ctx.Value("q", 0, lock=False) for _ in range(args.procs)]
    procs = [ctx.Process(target=worker_main, args=(shared[i], stop_procs, os.getpid()), name=f"burn-p{i}")
             for i in range(args.procs)]
    for p in procs:
        p.start()

    stop = threading.Event()
    counters = [[0] for _ in range(args.threads)]
    threads = [threading.Thread(target=burn, args=(counters[i], stop), name=f"burn-t{i}")
               for i in range(args.threads)]
    for t in threads:
        t.start()

    def total():
        return sum(c[0] for c in counters) + sum(s.value for s in shared)

    time.sleep(args.warmup)
    c0, t0 = total(), time.monotonic()
    time.sleep(args.seconds)
    c1, t1 = total(), time.monotonic()

    stop.set()
    stop_procs.set()
    for t in threads:
        t.join()
    for p in procs:
        p.join()
    bench_common.report("ops", (c1 - c0) * CHUNK, t0, t1, args.result, rate_digits=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
