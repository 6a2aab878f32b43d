"""Shared by the bench_*.py workloads: the one result line bench/bench.py
parses, "UNIT=N seconds=S UNIT_per_s=R t0=T0 t1=T1 pid=P", where T0/T1 are
the time.monotonic() seconds of the measurement window."""
import os


def report(unit, n, t0, t1, result=None, rate_digits=3):
    """Print the result line (and write it to the file result, if given)."""
    line = (f"{unit}={n} seconds={t1 - t0:.3f} {unit}_per_s={n / (t1 - t0):.{rate_digits}f} "
            f"t0={t0:.6f} t1={t1:.6f} pid={os.getpid()}")
    print(line, flush=True)
    if result:
        with open(result, "w") as f:
            f.write(line + "\n")
