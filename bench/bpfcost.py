#!/usr/bin/python3
"""BPF cost per recorded sample, A/B: several gpusample binaries run in
alternation on the PyTorch training loop (tests/workloads/bench_train.py) at
99 Hz, kernel.bpf_stats_enabled=1 (restored afterwards).

  sudo bench/bpfcost.py [--rounds N] [--seconds S] LABEL=BINARY [LABEL=BINARY...]

Per run: `BINARY -F 99 -q --format folded -o PREFIX -- python3 bench_train.py`,
S seconds, then `bpftool prog show` for the programs the profiler holds (read
just before SIGINT, as bench/bench.py does), then SIGINT.  Prints, per run
and as medians per binary: gs_sample run time / CPU samples in the profile
(ns per recorded sample), the frames per sample (folded file), and
gs_off_switch's ns per run.  Rounds rotate the order of the binaries so slow
drift of a shared machine favours none.  Results: bench/results_bpfcost.md
(written by hand from this output) and --json FILE.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def folded_stats(path):
    """(samples, mean frames per sample) of a folded file."""
    n = frames = 0
    try:
        with open(path) as f:
            for line in f:
                stack, _, c = line.rstrip("\n").rpartition(" ")
                if not c.isdigit():
                    continue
                n += int(c)
                frames += int(c) * (stack.count(";") + 1)
    except OSError:
        pass
    return n, (frames / n if n else 0.0)


def one_run(binary, seconds, tmp, tag, extra=()):
    prefix = os.path.join(tmp, tag)
    wcmd = [bench.PY, bench.TRAIN, "--seconds", str(seconds + 60), "--warmup", "1",
            "--workers", "2", "--result", prefix + ".result"]
    err_path = prefix + ".err"
    with open(err_path, "w") as err:
        g = bench.spawn([binary, "-F", "99", "-q", "--format", "folded", "-o", prefix, *extra, "--", *wcmd],
                        stdout=subprocess.DEVNULL, stderr=err)
        time.sleep(seconds)
        progs = bench.bpftool_progs(g.pid)
        victims = bench.descendants(g.pid)[1:]
        g.send_signal(signal.SIGINT)
        for p in reversed(victims):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        g.wait(timeout=300)
    with open(err_path) as f:
        text = f.read()
    m = re.search(r"(\d+) CPU samples", text)
    samples = int(m.group(1)) if m else None
    _, fps = folded_stats(prefix + ".cpu.folded")
    r = {"samples": samples, "frames_per_sample": round(fps, 1), "rc": g.returncode}
    for p in progs:
        rt, rc = p.get("run_time_ns", 0), p.get("run_cnt", 0)
        name = p.get("name")
        # the compat twins: bpftool shows the BTF name or the kernel's, cut
        # to 15 characters
        if name in ("gs_sample", "gs_sample_compat", "gs_sample_compat"[:15]):
            r["sample_runs"] = rc
            r["sample_ns_per_run"] = round(rt / rc) if rc else None
            r["ns_per_recorded_sample"] = round(rt / samples) if samples else None
        elif name in ("gs_off_switch", "gs_off_switch_compat", "gs_off_switch_compat"[:15]):
            r["off_runs"] = rc
            r["off_ns_per_run"] = round(rt / rc) if rc else None
    for f in os.listdir(tmp):
        if f.startswith(tag + "."):
            os.remove(os.path.join(tmp, f))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--gs-args", default="", help="extra gpusample options (one string)")
    ap.add_argument("bins", nargs="+", metavar="LABEL=BINARY")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bpfcost: run as root (bpf_stats, BPF)")
    bins = [b.split("=", 1) for b in a.bins]
    for label, path in bins:
        if not os.access(path, os.X_OK):
            sys.exit(f"bpfcost: {label}: {path} is not an executable")
    runs = {label: [] for label, _ in bins}
    old = bench.set_bpf_stats(True)
    try:
        with tempfile.TemporaryDirectory(prefix="bpfcost.") as tmp:
            for rnd in range(a.rounds):
                k = rnd % len(bins)
                for label, path in bins[k:] + bins[:k]:
                    load = os.getloadavg()[0]
                    r = one_run(path, a.seconds, tmp, f"{label}{rnd}", a.gs_args.split())
                    r["load1"] = round(load, 2)
                    runs[label].append(r)
                    print(f"round {rnd} {label}: {json.dumps(r)}", flush=True)
    finally:
        bench.set_bpf_stats(old == "1")
    print("\nmedians:")
    for label, rs in runs.items():
        def med(key):
            v = [r[key] for r in rs if r.get(key) is not None]
            return statistics.median(v) if v else None
        vals = [r["ns_per_recorded_sample"] for r in rs if r.get("ns_per_recorded_sample")]
        print(f"  {label}: ns/recorded sample {med('ns_per_recorded_sample')} "
              f"(min-max {min(vals, default=None)}-{max(vals, default=None)}), "
              f"ns/run {med('sample_ns_per_run')}, frames/sample {med('frames_per_sample')}, "
              f"samples {med('samples')}, gs_off_switch ns/run {med('off_ns_per_run')}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
