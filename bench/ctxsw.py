#!/usr/bin/python3
"""Context-switch benchmark: the cost of gpusample's off-CPU recording
(tp_btf/sched_switch) on a target that switches ~50k times a second, and
the slowdown of a switch-heavy job under gpusample and its peers, side by
side in the same run.  See bench/README.md, "6. Context switches".

Workload: tests/workloads/ctxsw_pingpong (two threads ping-pong a byte over
two pipes: every round trip blocks each thread once in read(2)).

1. Cost at ~50k switches/s (paced, `ctxsw_pingpong SECS 25000`), with
   kernel.bpf_stats_enabled=1 (restored afterwards):
     target run      `gpusample -p WORKLOAD`: BPF run time of every program
                     gpusample holds + gpusample's own CPU (schedstat of its
                     threads), over a window inside the run, in % of one CPU;
     non-target run  `gpusample -p <an idle sleep>` while the same workload
                     runs unprofiled: gs_off_switch ns per run is the cost of
                     a switch outside the target set (one map lookup);
   per target switch-out = (target-run gs_off_switch time - non-target ns x
   its other runs) / the workload's switch-outs (its threads' ctxt switches).
2. Slowdown (unpaced, as fast as it goes, both threads pinned to CPU 0):
   round trips/s with no profiler,
   gpusample (`-p PID`, default options), `perf record -e sched:sched_switch
   -g -p PID` (Debian 12's perf 6.1 has no --off-cpu: it is built without
   BUILD_BPF_SKEL, see the note the bench records), and offcputime-bpfcc
   -p PID where the kernel can run it (it kprobes finish_task_switch: needs
   CONFIG_KPROBES).  Rounds rotate the order; slowdown = none / profiled,
   paired within a round, median and min-max.  Every profiler attaches
   before the workload is released (GS_GO), so attach cost is outside.

Writes bench/results/ctxsw.json and bench/results_ctxsw.md (printed).
The cost table has the waker handler too (tp_btf/sched_waking, gs_off_waking): runs/s, its
share of a CPU, ns per run with an idle target and with the ping-pong profiled.
Knobs: BENCH_ROUNDS (5), BENCH_WINDOW (5 s), GPUSAMPLE, BENCH_OUT, BENCH_PARTS
(cost,slowdown).
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402  (helpers: schedstat CPU, prog ids, bpf_stats)

ROOT = B.ROOT
PINGPONG = os.path.join(ROOT, "build/workloads/ctxsw_pingpong")
PACED_RATE = 25000  # round trips/s: two voluntary switch-outs each


def kernel_config(opt):
    try:
        out = subprocess.run(["zcat", "/proc/config.gz"], capture_output=True, text=True).stdout
    except OSError:
        return None
    for line in out.splitlines():
        if line.startswith(opt + "="):
            return line.split("=", 1)[1]
        if line == f"# {opt} is not set":
            return "n"
    return None


def ctxt_switches(pid):
    """Context switches (voluntary + involuntary) of pid's live threads."""
    n = 0
    for p in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(p) as f:
                for line in f:
                    if "ctxt_switches" in line:
                        n += int(line.split()[1])
        except OSError:
            pass
    return n


def prog_stats(pid):
    """{name: (run_time_ns, run_cnt)} of the BPF programs pid holds."""
    return {p.get("name", "?"): (p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in B.bpftool_progs(pid)}


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def gs_sampling(err_path):
    def ok():
        try:
            with open(err_path) as f:
                return "gpusample: sampling" in f.read()
        except OSError:
            return False
    return ok


class Ctxsw:
    def __init__(self, gs, out, rounds, window):
        self.gs, self.out, self.rounds, self.window = gs, out, rounds, window
        self.tmp = tempfile.mkdtemp(prefix="gs-ctxsw-")
        self.res = {"notes": [], "window_s": window, "rounds": rounds}

    def note(self, msg):
        B.log(msg)
        self.res["notes"].append(msg)

    def start_gs(self, pid, tag, secs):
        err = os.path.join(self.tmp, tag + ".err")
        p = B.spawn([self.gs, "-p", str(pid), "-d", str(secs), "-q", "-o",
                     os.path.join(self.tmp, tag)], stderr=open(err, "w"))
        wait_for(gs_sampling(err), 60, "gpusample to start sampling")
        return p

    # ---- 1. cost at ~50k switches/s --------------------------------------------

    def measure_window(self, gs_pid, wl_pid, secs):
        a = (time.monotonic(), prog_stats(gs_pid), B.proc_cpu_s(gs_pid), ctxt_switches(wl_pid))
        time.sleep(secs)
        b = (time.monotonic(), prog_stats(gs_pid), B.proc_cpu_s(gs_pid), ctxt_switches(wl_pid))
        dt = b[0] - a[0]
        progs = {n: (b[1][n][0] - a[1].get(n, (0, 0))[0], b[1][n][1] - a[1].get(n, (0, 0))[1])
                 for n in b[1]}
        bpf_ns = sum(v[0] for v in progs.values())
        return {"seconds": dt, "progs": progs, "bpf_ns": bpf_ns, "gs_cpu_s": b[2] - a[2],
                "target_switches": b[3] - a[3], "switches_per_s": (b[3] - a[3]) / dt,
                "bpf_pct_cpu": 100 * bpf_ns / 1e9 / dt,
                "gs_pct_cpu": 100 * (b[2] - a[2]) / dt,
                "total_pct_cpu": 100 * (bpf_ns / 1e9 + b[2] - a[2]) / dt}

    def cost_run(self, target):
        secs = self.window + 4
        wl = B.spawn([PINGPONG, str(secs + 2), str(PACED_RATE)], stdout=subprocess.DEVNULL)
        idle = None
        if target:
            gs = self.start_gs(wl.pid, "cost-target", secs)
        else:
            idle = B.spawn(["sleep", str(secs + 30)])
            gs = self.start_gs(idle.pid, "cost-nontarget", secs)
        time.sleep(1)
        m = self.measure_window(gs.pid, wl.pid, self.window)
        gs.send_signal(signal.SIGINT)
        gs.wait(timeout=120)
        wl.wait(timeout=60)
        if idle:
            idle.kill()
            idle.wait()
        return m

    def cost(self):
        old = B.set_bpf_stats(True)
        try:
            nt = self.cost_run(False)
            tg = self.cost_run(True)
        finally:
            B.set_bpf_stats(old == "1")
        sw = "gs_off_switch"
        nt_ns, nt_cnt = nt["progs"].get(sw, (0, 0))
        tg_ns, tg_cnt = tg["progs"].get(sw, (0, 0))
        per_nt = nt_ns / nt_cnt if nt_cnt else None
        outs = tg["target_switches"]
        per_tg = ((tg_ns - per_nt * (tg_cnt - outs)) / outs) if outs and per_nt is not None else None
        # sched_waking runs for every wakeup on every CPU (not one per
        # switch-out: a wakeup of a thread still on its CPU is none), so the
        # target run's figure is per run, target and other wakeups together
        wk = "gs_off_waking"
        nw_ns, nw_cnt = nt["progs"].get(wk, (0, 0))
        tw_ns, tw_cnt = tg["progs"].get(wk, (0, 0))
        per_nw = nw_ns / nw_cnt if nw_cnt else None
        per_tw = tw_ns / tw_cnt if tw_cnt else None
        self.res["cost"] = {"nontarget_run": nt, "target_run": tg,
                            "ns_per_nontarget_switch": per_nt, "ns_per_target_switch_out": per_tg,
                            "ns_per_nontarget_wakeup": per_nw, "ns_per_wakeup_target_run": per_tw}

    # ---- 2. slowdown -------------------------------------------------------------

    def configs(self):
        c = ["none", "gpusample", "perf_sched_switch"]
        if self.offcputime_ok():
            c.append("offcputime")
        return c

    def offcputime_ok(self):
        if not shutil.which("offcputime-bpfcc"):
            self.note("offcputime-bpfcc not installed (apt-get install bpfcc-tools): row skipped")
            return False
        if kernel_config("CONFIG_KPROBES") == "n":
            self.note("offcputime-bpfcc cannot run on this kernel: it attaches a kprobe to "
                      "finish_task_switch and /proc/config.gz says '# CONFIG_KPROBES is not set' "
                      f"({os.uname().release}); row skipped")
            return False
        self.bcc_env = B.Bench.bcc_setup(self)  # kernel headers for BCC (bench.py)
        return self.bcc_env is not None

    def start_peer(self, cfg, pid, tag):
        out = os.path.join(self.tmp, tag)
        err = open(out + ".err", "w")
        if cfg == "gpusample":
            return self.start_gs(pid, tag, self.window + 30)
        if cfg == "perf_sched_switch":
            p = B.spawn(["perf", "record", "-q", "-e", "sched:sched_switch", "-g", "-p", str(pid),
                         "-o", out + ".data"], stdout=err, stderr=err)
        else:
            env = getattr(self, "bcc_env", None) or dict(os.environ)
            p = B.spawn(["offcputime-bpfcc", "-p", str(pid), "-f"], stdout=err, stderr=err, env=env)
        time.sleep(3)  # perf attaches in well under a second; BCC compiles first
        return p

    def one_run(self, cfg, rnd):
        tag = f"slow-{cfg}-r{rnd}"
        go = os.path.join(self.tmp, tag + ".go")
        res = os.path.join(self.tmp, tag + ".out")
        # both threads on CPU 0: every round trip is two switches on one run
        # queue, so throughput does not swing with where the threads land
        wl = B.spawn([PINGPONG, str(self.window)], stdout=open(res, "w"), env=dict(os.environ, GS_GO=go),
                     preexec_fn=lambda: os.sched_setaffinity(0, {0}))
        prof = None if cfg == "none" else self.start_peer(cfg, wl.pid, tag)
        c0 = B.proc_cpu_s(prof.pid) if prof else None
        open(go, "w").close()
        wl.wait(timeout=self.window + 60)
        c1 = B.proc_cpu_s(prof.pid) if prof else None
        if prof and prof.poll() is None:
            prof.send_signal(signal.SIGINT)
            prof.wait(timeout=120)
        with open(res) as f:
            kv = dict(x.split("=", 1) for x in f.read().split())
        return {"cfg": cfg, "round": rnd, "per_s": float(kv["per_s"]),
                "profiler_cpu_s": (c1 - c0) if c0 is not None and c1 is not None else None,
                "loadavg": B.loadavg()}

    def slowdown(self):
        cfgs = self.configs()
        rows = []
        for rnd in range(self.rounds):
            order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
            for cfg in order:
                B.log(f"ctxsw slowdown round {rnd + 1}/{self.rounds}: {cfg}")
                rows.append(self.one_run(cfg, rnd))
        summ = {}
        for cfg in cfgs:
            ratios = []
            for rnd in range(self.rounds):
                base = [r for r in rows if r["cfg"] == "none" and r["round"] == rnd][0]["per_s"]
                mine = [r for r in rows if r["cfg"] == cfg and r["round"] == rnd][0]["per_s"]
                ratios.append(base / mine)
            cpu = [r["profiler_cpu_s"] for r in rows if r["cfg"] == cfg and r["profiler_cpu_s"] is not None]
            summ[cfg] = {"slowdown_median": B.med(ratios), "slowdown_min": B.mn(ratios),
                         "slowdown_max": B.mx(ratios),
                         "per_s_median": B.med([r["per_s"] for r in rows if r["cfg"] == cfg]),
                         "profiler_cpu_pct": 100 * B.med(cpu) / self.window if cpu else None}
        self.res["slowdown_runs"] = rows
        self.res["slowdown"] = summ

    # ---- output --------------------------------------------------------------------

    def render(self):
        r, L = self.res, []
        L.append("## Context switches (bench/ctxsw.py)")
        L.append("")
        L.append(f"{r['date']}, {B.machine()}; window {r['window_s']} s, {r['rounds']} rounds.")
        c = r.get("cost")
        if c:
            t, n = c["target_run"], c["nontarget_run"]
            L.append("")
            L.append("| cost at ~50k switches/s (paced ping-pong, `gpusample -p`) | value |")
            L.append("|---|---|")
            L.append(f"| target switches/s (workload's ctxt switches) | {t['switches_per_s']:.0f} |")
            L.append(f"| BPF run time, all gpusample programs | {t['bpf_pct_cpu']:.3f}% of one CPU |")
            L.append(f"| gpusample process CPU | {t['gs_pct_cpu']:.3f}% of one CPU |")
            L.append(f"| **total** (budget 1%) | **{t['total_pct_cpu']:.3f}% of one CPU** |")
            sw = t["progs"].get("gs_off_switch", (0, 0))
            L.append(f"| gs_off_switch runs/s (every switch on every CPU) | {sw[1] / t['seconds']:.0f} |")
            L.append(f"| ns per non-target switch (gpusample on an idle process) | "
                     f"{B.fmt(c['ns_per_nontarget_switch'], 1)} |")
            L.append(f"| ns per target switch-out (stack walks included) | "
                     f"{B.fmt(c['ns_per_target_switch_out'], 1)} |")
            wk = t["progs"].get("gs_off_waking", (0, 0))
            L.append(f"| gs_off_waking runs/s (every wakeup on every CPU) | {wk[1] / t['seconds']:.0f} |")
            L.append(f"| gs_off_waking run time | {100 * wk[0] / 1e9 / t['seconds']:.3f}% of one CPU |")
            L.append(f"| ns per non-target wakeup (gpusample on an idle process) | "
                     f"{B.fmt(c.get('ns_per_nontarget_wakeup'), 1)} |")
            L.append(f"| ns per gs_off_waking run in the target run (waker walks included) | "
                     f"{B.fmt(c.get('ns_per_wakeup_target_run'), 1)} |")
            L.append(f"| non-target run: total cost | {n['total_pct_cpu']:.3f}% of one CPU |")
        s = r.get("slowdown")
        if s:
            L.append("")
            L.append("| unpaced ping-pong, pinned to CPU 0 | round trips/s (median) | slowdown median (min-max) | profiler process CPU |")
            L.append("|---|---|---|---|")
            names = {"none": "no profiler", "gpusample": "gpusample -p (off-CPU on)",
                     "perf_sched_switch": "perf record -e sched:sched_switch -g -p",
                     "offcputime": "offcputime-bpfcc -p -f"}
            for cfg, v in s.items():
                cpu = "" if v["profiler_cpu_pct"] is None else f"{v['profiler_cpu_pct']:.2f}%"
                L.append(f"| {names[cfg]} | {v['per_s_median']:.0f} | {v['slowdown_median']:.3f} "
                         f"({v['slowdown_min']:.3f}-{v['slowdown_max']:.3f}) | {cpu} |")
        for n in r["notes"]:
            L.append("")
            L.append("- " + n)
        return "\n".join(L)


def main():
    env = os.environ.get
    if os.geteuid() != 0:
        sys.exit("ctxsw bench: needs root (eBPF, perf, bpf_stats): sudo BENCH_ONLY=ctxsw make bench")
    gs = env("GPUSAMPLE", os.path.join(ROOT, "build/gpusample"))
    if not os.access(PINGPONG, os.X_OK) or not os.access(gs, os.X_OK):
        sys.exit(f"ctxsw bench: build first (make all test-helpers): {gs}, {PINGPONG}")
    out = env("BENCH_OUT", os.path.join(ROOT, "bench"))
    x = Ctxsw(gs, out, int(env("BENCH_ROUNDS", "5")), float(env("BENCH_WINDOW", "5")))
    x.res["date"] = time.strftime("%Y-%m-%d %H:%M")
    perf_help = subprocess.run(["perf", "record", "--off-cpu", "-h"], capture_output=True, text=True)
    if "ignored" in perf_help.stderr + perf_help.stdout:
        first = (perf_help.stderr + perf_help.stdout).strip().splitlines()[0].strip()
        x.note(f"perf record --off-cpu is not available in this perf: `{first}`; the perf row "
               "uses its nearest, a sched:sched_switch tracepoint with call graphs")
    parts = env("BENCH_PARTS", "cost,slowdown").split(",")
    try:
        if "cost" in parts:
            x.cost()
        if "slowdown" in parts:
            x.slowdown()
    finally:
        B.cleanup()
        os.makedirs(os.path.join(out, "results"), exist_ok=True)
        with open(os.path.join(out, "results", "ctxsw.json"), "w") as f:
            json.dump(x.res, f, indent=1, default=str)
        shutil.rmtree(x.tmp, ignore_errors=True)
    md = x.render()
    with open(os.path.join(out, "results_ctxsw.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
