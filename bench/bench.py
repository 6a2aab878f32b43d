#!/usr/bin/python3
"""gpusample benchmarks: overhead against no profiler and against peers on the
same workloads in the same run, cost per sample in BPF, time and memory from
stop to written profile, memory over a long run, data volume.

Run by bench/run.sh (`make bench`); see bench/README.md for what each number
means.  Python standard library only.  Needs root.

Writes (under --out, default bench/):
  results.md                 the markdown table (also printed)
  results/runs.csv           one row per slowdown run (all rounds, all configs)
  results/summary.json       every figure of the table, with its raw inputs
  results/*.txt              bpftool JSON, stderr of the large runs, etc.
"""
import argparse
import csv
import datetime
import glob
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
PYBURN = os.path.join(ROOT, "tests/workloads/bench_pyburn.py")
TRAIN = os.path.join(ROOT, "tests/workloads/bench_train.py")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


STARTED = []  # every process the bench started, killed (with its tree) on exit


def spawn(*args, **kw):
    p = subprocess.Popen(*args, **kw)
    STARTED.append(p)
    return p


def cleanup():
    """Kill what is still running of what we started (Ctrl-C, errors)."""
    for p in STARTED:
        if p.poll() is None:
            kill_tree(p.pid)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- /proc helpers ----------------------------------------------------------

def proc_cpu_s(pid):
    """CPU seconds of the process itself (its live threads, not children).
    From the scheduler's run time (/proc/PID/task/TID/schedstat, ns), not
    utime/stime: those are tick-sampled (CONFIG_TICK_CPU_ACCOUNTING) and were
    seen to under-count by 2-4x on a loaded 2-CPU VM."""
    total, ok = 0, False
    for p in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(p) as f:
                total += int(f.read().split()[0])
            ok = True
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9 if ok else None


def proc_mem_kb(pid):
    """(VmRSS, VmHWM) in KiB, or (None, None) once the process is gone."""
    rss = hwm = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def ppid_map():
    """{pid: ppid} of every process (no CONFIG_PROC_CHILDREN on every kernel)."""
    m = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    m[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return m


def descendants(pid, exclude=()):
    """pid and all its descendants, skipping the subtrees of `exclude`."""
    kids = {}
    for p, pp in ppid_map().items():
        kids.setdefault(pp, []).append(p)
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        if p in exclude:
            continue
        seen.append(p)
        todo += kids.get(p, [])
    return seen


def task_cpu_ns(pid):
    """{tid: scheduler run time ns} of pid's live threads."""
    out = {}
    for p in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(p) as f:
                out[int(p.split("/")[4])] = int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return out


class TreeCPU:
    """CPU seconds of a process tree (scheduler run time of every thread
    seen so far; a thread that is gone keeps its last value, so the sum never
    goes backwards).  The job's tree is steady during the window."""

    def __init__(self, root, skip_root=False):
        self.root, self.skip_root = root, skip_root
        self.samples = []  # (monotonic s, cpu s)
        self.last_poll = 0.0
        self.pids = set()
        self.tids = {}

    def poll(self, every=0.5):
        now = time.monotonic()
        if now - self.last_poll < every:
            return
        self.last_poll = now
        pids = descendants(self.root)
        if self.skip_root:
            pids = pids[1:]
        self.pids.update(pids)
        for p in list(self.pids):
            for tid, ns in task_cpu_ns(p).items():
                self.tids[(p, tid)] = max(ns, self.tids.get((p, tid), 0))
        self.samples.append((time.monotonic(), sum(self.tids.values()) / 1e9))

    def cpu_between(self, t0, t1):
        return interp_between([(t, c, 0, 0) for t, c in self.samples], t0, t1)


def interp_between(s, t0, t1):
    def at(t):
        if not s or t < s[0][0] - 0.6 or t > s[-1][0] + 0.6:
            return None
        if t <= s[0][0]:
            return s[0][1]
        for (ta, ca, _, _), (tb, cb, _, _) in zip(s, s[1:]):
            if ta <= t <= tb:
                return ca + (cb - ca) * (t - ta) / max(tb - ta, 1e-9)
        return s[-1][1]
    a, b = at(t0), at(t1)
    return None if a is None or b is None else b - a


class Watch:
    """Samples one process's CPU time and memory while we wait for it."""

    def __init__(self, pid):
        self.pid = pid
        self.samples = []  # (monotonic s, cpu s, rss KiB, hwm KiB)

    def poll(self):
        cpu = proc_cpu_s(self.pid)
        rss, hwm = proc_mem_kb(self.pid)
        if cpu is not None and rss is not None:
            self.samples.append((time.monotonic(), cpu, rss, hwm))

    def cpu_between(self, t0, t1):
        """Profiler CPU seconds spent in [t0, t1], linear between samples."""
        return interp_between(self.samples, t0, t1)

    def last_cpu(self):
        return self.samples[-1][1] if self.samples else None

    def peak_kb(self):
        return max((h for _, _, _, h in self.samples if h is not None), default=None)


def wait_watching(proc, watch, timeout, poll_s=0.2, tree=None):
    """Wait for a Popen, sampling `watch` and `tree` (if any); returns (rc, rusage)."""
    deadline = time.monotonic() + timeout
    while True:
        if watch:
            watch.poll()
        if tree:
            tree.poll()
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = -9
            return -9, ru
        time.sleep(poll_s)


def parse_kv(line):
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}


def read_result(path):
    try:
        with open(path) as f:
            return parse_kv(f.read())
    except OSError:
        return {}


def dir_bytes(prefix):
    return sum(os.path.getsize(p) for p in glob.glob(prefix + "*") if os.path.isfile(p))


# ---- gpusample output parsing ---------------------------------------------------

def gs_samples_from(prefix, stderr_text):
    """CPU samples (and lost, ring-buffer bytes when printed) of a gpusample run.
    Sources, best first: a summary line on stderr, the profile's comments
    (`go tool pprof -comments`), the folded file."""
    out = {}
    m = re.search(r"(\d+) cpu samples", stderr_text) or re.search(r"cpu samples[:= ]+(\d+)", stderr_text)
    if m:
        out["samples"] = int(m.group(1))
    m = re.search(r"lost[:= ]+(\d+)", stderr_text)
    if m:
        out["lost"] = int(m.group(1))
    m = re.search(r"ring ?buffer[^\n]*?(\d+) bytes", stderr_text)
    if m:
        out["ringbuf_bytes"] = int(m.group(1))
    m = re.search(r"ring ?buffer[^\n]*?(\d+) records", stderr_text)
    if m:
        out["ringbuf_records"] = int(m.group(1))
    if "samples" not in out and os.path.exists(prefix + ".pb.gz") and shutil.which("go"):
        try:
            txt = subprocess.run(["go", "tool", "pprof", "-comments", prefix + ".pb.gz"],
                                 capture_output=True, text=True, timeout=120).stdout
            m = re.search(r"cpu samples: (\d+), lost: (\d+)", txt)
            if m:
                out["samples"], out["lost"] = int(m.group(1)), int(m.group(2))
            m = re.search(r"ring buffer: (\d+) records, (\d+) bytes", txt)
            if m:
                out["ringbuf_records"], out["ringbuf_bytes"] = int(m.group(1)), int(m.group(2))
        except (OSError, subprocess.TimeoutExpired):
            pass
    if "samples" not in out and os.path.exists(prefix + ".cpu.folded"):
        n = 0
        with open(prefix + ".cpu.folded") as f:
            for line in f:
                n += int(line.rsplit(" ", 1)[1])
        out["samples"] = n
    return out


# ---- BPF program statistics -------------------------------------------------------

def prog_ids_of(pid):
    """IDs of the BPF programs whose fds pid holds (/proc/PID/fdinfo prog_id),
    so a concurrent gpusample or BCC tool elsewhere on the machine is not
    counted (Debian's bpftool does not report owning pids)."""
    ids = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            if "bpf-prog" not in os.readlink(fd):
                continue
            with open(f"/proc/{pid}/fdinfo/{os.path.basename(fd)}") as f:
                m = re.search(r"prog_id:\s+(\d+)", f.read())
            if m:
                ids.add(int(m.group(1)))
        except OSError:
            pass
    return ids


def bpftool_progs(pid):
    """bpftool prog show --json, restricted to the programs pid holds."""
    ids = prog_ids_of(pid)
    try:
        txt = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True,
                             text=True, timeout=30).stdout
        progs = json.loads(txt)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []
    return [p for p in progs if p.get("id") in ids]


def ringbuf_bytes(pid):
    """Bytes BPF has written so far into each BPF ring buffer that pid holds:
    the ring's producer position, read from its second mmap page through a
    copy of the map fd (pidfd_getfd).  Each record counts with its 8-byte
    ring-buffer header, rounded up to 8 bytes, as the kernel stores it.
    Returns {map name: bytes}; {} where the kernel or permissions refuse."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    SYS_pidfd_open, SYS_pidfd_getfd = 434, 438  # x86_64
    out = {}
    pidfd = libc.syscall(SYS_pidfd_open, pid, 0)
    if pidfd < 0:
        return out
    try:
        for fdp in glob.glob(f"/proc/{pid}/fdinfo/*"):
            try:
                with open(fdp) as f:
                    info = f.read()
            except OSError:
                continue
            if not re.search(r"map_type:\s+27\b", info):  # BPF_MAP_TYPE_RINGBUF
                continue
            mid = re.search(r"map_id:\s+(\d+)", info)
            fd = libc.syscall(SYS_pidfd_getfd, pidfd, int(os.path.basename(fdp)), 0)
            if fd < 0:
                continue
            try:
                page = mmap.PAGESIZE
                m = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
                out[mid.group(1) if mid else fdp] = int.from_bytes(m[:8], "little")
                m.close()
            except (OSError, ValueError):
                pass
            finally:
                os.close(fd)
    finally:
        os.close(pidfd)
    return out


def kill_tree(pid, sig=signal.SIGKILL):
    """Signal pid and all its descendants (our own workload trees only)."""
    for p in reversed(descendants(pid)):
        try:
            os.kill(p, sig)
        except OSError:
            pass


def set_bpf_stats(on):
    path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(path) as f:
        old = f.read().strip()
    with open(path, "w") as f:
        f.write("1" if on else "0")
    return old


# ---- the slowdown runs ------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.a = args
        self.gs = args.gpusample
        self.tmp = tempfile.mkdtemp(prefix="gs-bench-")
        os.chmod(self.tmp, 0o777)  # gpusample's launch mode runs CMD as SUDO_USER
        self.res_dir = os.path.join(args.out, "results")
        os.makedirs(self.res_dir, exist_ok=True)
        self.rows = []
        self.summary = {"notes": []}
        self.bcc_env = self.bcc_setup()

    def note(self, msg):
        log(msg)
        self.summary["notes"].append(msg)

    # profile-bpfcc compiles C at start-up and needs kernel headers; this
    # kernel ships none (no /lib/modules/$(uname -r)/build, no
    # CONFIG_IKHEADERS), so point BCC at Debian's linux-headers tree.
    def bcc_setup(self):
        self.bcc = shutil.which("profile-bpfcc")
        if not self.bcc:
            self.note("profile-bpfcc not installed (apt-get install bpfcc-tools); bcc rows skipped")
            return None
        env = dict(os.environ)
        if os.path.isdir(f"/lib/modules/{os.uname().release}/build"):
            return env
        common = sorted(glob.glob("/usr/src/linux-headers-*-common"))
        arch = [d for d in sorted(glob.glob("/usr/src/linux-headers-*-amd64"))
                if "-rt-" not in d and "cloud" not in d]
        if not common or not arch:
            self.note("profile-bpfcc: no kernel headers for this kernel "
                      f"({os.uname().release}: no /lib/modules/.../build, no kheaders) and no "
                      "Debian linux-headers-amd64 to fall back on; bcc rows skipped")
            self.bcc = None
            return None
        merged = os.path.join(self.tmp, "bcc-kernel-headers")
        subprocess.run(["cp", "-as", common[-1] + "/.", merged + "/"], check=True)
        subprocess.run(["cp", "-asf", arch[-1] + "/.", merged + "/"], check=True)
        env["BCC_KERNEL_SOURCE"] = merged
        self.note(f"profile-bpfcc: kernel {os.uname().release} has no headers package; BCC "
                  f"compiles against {os.path.basename(arch[-1])} (BCC_KERNEL_SOURCE, merged with "
                  "-common). Its profile program uses only UAPI types (bpf_perf_event_data, "
                  "pt_regs), so the version mismatch does not change what it does.")
        return env

    def workload_cmd(self, wl, result, extra=()):
        a = self.a
        if wl == "pyburn":
            return [PY, PYBURN, "--seconds", str(a.window), "--warmup", str(a.warmup),
                    "--threads", "2", "--procs", "2", "--result", result, *extra]
        return [PY, TRAIN, "--seconds", str(a.window), "--warmup", str(a.warmup),
                "--workers", "2", "--threads", "1", "--result", result, *extra]

    def configs(self, wl):
        c = ["none"]
        if self.gs:
            c.append("gpusample")
        if shutil.which("perf"):
            c += ["perf_fp", "perf_dwarf"]
        if self.bcc:
            c.append("bcc")
        if wl == "train":
            c += ["torch_cpu", "torch_stack"]
        return c

    def start_bcc(self, out_path, hz):
        """profile-bpfcc, system-wide (it filters -p by tgid only, so it
        cannot follow a process tree); returns (Popen, file) once attached."""
        f = open(out_path, "w")
        p = spawn([self.bcc, "-F", str(hz), "-f", "--stack-storage-size", "65536"],
                             stdout=f, stderr=subprocess.STDOUT, env=self.bcc_env)
        deadline = time.monotonic() + 90
        ncpu = os.cpu_count()
        while time.monotonic() < deadline and p.poll() is None:
            links = []
            for fd in glob.glob(f"/proc/{p.pid}/fd/*"):
                try:
                    links.append(os.readlink(fd))
                except OSError:
                    pass
            if sum("perf_event" in x for x in links) >= ncpu and any("bpf-prog" in x for x in links):
                time.sleep(0.3)
                return p, f
            time.sleep(0.2)
        f.close()
        raise RuntimeError(f"profile-bpfcc did not attach (rc={p.poll()}); see {out_path}")

    def one_run(self, wl, cfg, rnd):
        tag = f"{wl}-{cfg}-r{rnd}"
        result = os.path.join(self.tmp, tag + ".result")
        prefix = os.path.join(self.tmp, tag)
        extra = ()
        if cfg == "torch_cpu":
            extra = ("--torch-profiler", "cpu")
        elif cfg == "torch_stack":
            extra = ("--torch-profiler", "cpu_stack")
        wcmd = self.workload_cmd(wl, result, extra)
        hz = str(self.a.hz)
        bcc = bcc_file = None
        if cfg == "gpusample":
            cmd = [self.gs, "-F", hz, "-q", "-o", prefix, "--", *wcmd]
        elif cfg == "perf_fp":
            cmd = ["perf", "record", "-q", "-F", hz, "-g", "-o", prefix + ".perf.data", "--", *wcmd]
        elif cfg == "perf_dwarf":
            cmd = ["perf", "record", "-q", "-F", hz, "--call-graph", "dwarf", "-o",
                   prefix + ".perf.data", "--", *wcmd]
        else:
            cmd = wcmd
        if cfg == "bcc":
            bcc, bcc_file = self.start_bcc(prefix + ".bcc.folded", self.a.hz)
        load = loadavg()
        t_start = time.monotonic()
        err_path = prefix + ".stderr"
        with open(err_path, "w") as err:
            p = spawn(cmd, stdout=subprocess.DEVNULL, stderr=err)
            prof_pid = bcc.pid if bcc else (p.pid if cmd is not wcmd else None)
            watch = Watch(prof_pid) if prof_pid else None
            # the job: the workload's tree (under perf/gpusample: the launcher's children)
            tree = TreeCPU(p.pid, skip_root=(cmd is not wcmd))
            rc, _ = wait_watching(p, watch, timeout=self.a.window + self.a.warmup + 180, tree=tree)
        wall = time.monotonic() - t_start
        t_exit = None
        if bcc:
            bcc.send_signal(signal.SIGINT)
            t_int = time.monotonic()
            wait_watching(bcc, watch, timeout=120)
            t_exit = time.monotonic() - t_int
            bcc_file.close()
        r = read_result(result)
        row = {"workload": wl, "config": cfg, "round": rnd, "rc": rc, "wall_s": round(wall, 3),
               "loadavg_1m": load}
        if not r:
            with open(err_path) as f:
                tail = f.read()[-2000:]
            self.note(f"{tag}: no result (rc={rc}); stderr tail: {tail.strip()}")
            row["throughput"] = None
        else:
            row["throughput"] = float(r.get("ops_per_s") or r.get("steps_per_s"))
            row["window_s"] = float(r["seconds"])
            work = float(r.get("ops") or r.get("steps"))
            jc = tree.cpu_between(float(r["t0"]), float(r["t1"]))
            if jc is not None:
                row["job_cpu_window_s"] = round(jc, 3)
            if watch and watch.samples:
                t0, t1 = float(r["t0"]), float(r["t1"])
                cw = watch.cpu_between(t0, t1)
                row["profiler_cpu_window_s"] = round(cw, 3) if cw is not None else None
                row["profiler_cpu_pct_of_one_cpu"] = round(100 * cw / (t1 - t0), 2) if cw is not None else None
                row["profiler_cpu_total_s"] = watch.last_cpu()
                row["profiler_peak_rss_kb"] = watch.peak_kb()
            # CPU cost per unit of work, job + profiler process: less sensitive
            # to other load on the machine than throughput
            if jc is not None and work:
                pc = row.get("profiler_cpu_window_s") or 0.0
                row["cpu_s_per_kwork"] = round(1000 * (jc + pc) / work, 6)
        if t_exit is not None:
            row["bcc_stop_to_exit_s"] = round(t_exit, 3)
        if cfg.startswith("torch"):
            with open(err_path) as f:
                m = re.search(r"torch_profiler_exit_s=([\d.]+)", f.read())
            row["torch_profiler_exit_s"] = float(m.group(1)) if m else None
        row["output_bytes"] = dir_bytes(prefix + ".") if cfg not in ("none", "torch_cpu", "torch_stack") else 0
        # keep disk use small: outputs of the slowdown runs are not kept
        for pth in glob.glob(prefix + ".*"):
            if not pth.endswith((".stderr", ".result")):
                os.remove(pth)
        log(f"{tag}: throughput={row['throughput']} wall={wall:.1f}s "
            f"prof_cpu%={row.get('profiler_cpu_pct_of_one_cpu')} load={load}")
        return row

    def slowdown(self):
        wls = [w for w in ("pyburn", "train") if w in self.a.workloads]
        for rnd in range(self.a.rounds):
            for wl in wls:
                cfgs = self.configs(wl)
                k = rnd % len(cfgs)  # rotate the order each round
                for cfg in cfgs[k:] + cfgs[:k]:
                    self.rows.append(self.one_run(wl, cfg, rnd))
            self.write_runs()

    def write_runs(self):
        keys = []
        for r in self.rows:
            keys += [k for k in r if k not in keys]
        with open(os.path.join(self.res_dir, "runs.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(self.rows)

    def slowdown_summary(self):
        out = {}
        for wl in {r["workload"] for r in self.rows}:
            rounds = sorted({r["round"] for r in self.rows if r["workload"] == wl})
            base = {r["round"]: r["throughput"] for r in self.rows
                    if r["workload"] == wl and r["config"] == "none" and r["throughput"]}
            for cfg in self.configs(wl):
                rs = [r for r in self.rows if r["workload"] == wl and r["config"] == cfg]
                thr = [r["throughput"] for r in rs if r["throughput"]]
                # paired: this config's throughput over no-profiler's in the same round
                ratios = [base[r["round"]] / r["throughput"] for r in rs
                          if r["throughput"] and r["round"] in base]
                cbase = {r["round"]: r["cpu_s_per_kwork"] for r in self.rows
                         if r["workload"] == wl and r["config"] == "none" and r.get("cpu_s_per_kwork")}
                cratios = [r["cpu_s_per_kwork"] / cbase[r["round"]] for r in rs
                           if r.get("cpu_s_per_kwork") and r["round"] in cbase]
                cpu = [r["profiler_cpu_pct_of_one_cpu"] for r in rs
                       if r.get("profiler_cpu_pct_of_one_cpu") is not None]
                rss = [r["profiler_peak_rss_kb"] for r in rs if r.get("profiler_peak_rss_kb")]
                out[f"{wl}/{cfg}"] = {
                    "n": len(thr), "rounds": len(rounds),
                    "throughput_median": med(thr), "throughput_min": mn(thr), "throughput_max": mx(thr),
                    "slowdown_median": med(ratios), "slowdown_min": mn(ratios), "slowdown_max": mx(ratios),
                    "profiler_cpu_pct_median": med(cpu), "profiler_cpu_pct_min": mn(cpu),
                    "profiler_cpu_pct_max": mx(cpu),
                    "profiler_peak_rss_kb_median": med(rss),
                    "profiler_cpu_total_s_median": med([r["profiler_cpu_total_s"] for r in rs
                                                        if r.get("profiler_cpu_total_s") is not None]),
                    "cpu_per_work_ratio_median": med(cratios), "cpu_per_work_ratio_min": mn(cratios),
                    "cpu_per_work_ratio_max": mx(cratios),
                }
        self.summary["slowdown"] = out

    # ---- (2) BPF cost, (4) memory over time, (5) data volume -------------------

    def profiled(self, tool, hz, wcmd, prefix, err_path):
        """Start `tool` (gpusample or perf) on the workload command wcmd.
        Default: launch mode (`gpusample -- CMD`, `perf record -- CMD`), which
        follows the whole tree for both.  BENCH_GS_ATTACH=1: start the
        workload, then `gpusample -p PID` / `perf record -p PIDS`.
        Returns (profiler Popen, workload root pid or None, stderr file)."""
        err = open(err_path, "w")
        wl = None
        if self.a.attach:
            wl = spawn(wcmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(4)  # imports done, workers started
            target = ["-p", str(wl.pid)] if tool == "gpusample" else \
                ["-p", ",".join(str(p) for p in descendants(wl.pid))]
            tail = []
        else:
            target, tail = [], ["--", *wcmd]
        if tool == "gpusample":
            cmd = [self.gs, *target, "-F", str(hz), "-q", "-o", prefix, *tail]
        else:
            cmd = ["perf", "record", "-F", str(hz), "-g", *target, "-o", prefix + ".perf.data", *tail]
        g = spawn(cmd, stdout=subprocess.DEVNULL, stderr=err)
        return g, (wl.pid if wl else None), err

    def stop_profiled(self, g, wl_pid, watch=None):
        """SIGINT to the profiler; the workload is killed at the same moment
        (so gpusample's launch mode does not wait for it).  Returns
        (rc, rusage, seconds from SIGINT to the profiler's exit)."""
        victims = descendants(wl_pid) if wl_pid else descendants(g.pid)[1:]
        g.send_signal(signal.SIGINT)
        t_int = time.monotonic()
        for p in reversed(victims):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        # VmHWM sampled every 10 ms: in launch mode wait4's ru_maxrss would
        # include the workload (the profiler's child)
        rc, ru = wait_watching(g, watch, timeout=900, poll_s=0.01)
        stop_s = time.monotonic() - t_int
        if wl_pid:
            try:
                os.waitpid(wl_pid, 0)
            except ChildProcessError:
                pass
        return rc, ru, stop_s

    def long_run(self):
        """gpusample on the training loop at the default 99 Hz for
        --long-seconds, with kernel.bpf_stats_enabled=1: RSS every second,
        bpftool's run_time_ns/run_cnt per program just before the stop, then
        SIGINT and the written profile's size."""
        d = self.a.long_seconds
        wcmd = [PY, TRAIN, "--seconds", str(d + 120), "--warmup", "1", "--workers", "2",
                "--result", os.path.join(self.tmp, "long.result")]
        prefix = os.path.join(self.tmp, "long")
        err_path = os.path.join(self.res_dir, "long_gpusample.stderr.txt")
        old = set_bpf_stats(True)
        try:
            g, wl_pid, err = self.profiled("gpusample", self.a.hz, wcmd, prefix, err_path)
            w = Watch(g.pid)
            t0 = time.monotonic()
            series = []
            while time.monotonic() - t0 < d and g.poll() is None:
                w.poll()
                if w.samples:
                    series.append((round(w.samples[-1][0] - t0, 1), w.samples[-1][2],
                                   round(w.samples[-1][1], 3)))
                time.sleep(1.0)
            progs = bpftool_progs(g.pid)
            rb = ringbuf_bytes(g.pid)
            cpu_run = proc_cpu_s(g.pid)
            rc, ru, stop_s = self.stop_profiled(g, wl_pid, w)
            err.close()
        finally:
            set_bpf_stats(old == "1")
        with open(err_path) as f:
            err_text = f.read()
        with open(os.path.join(self.res_dir, "long_bpftool.json"), "w") as f:
            json.dump(progs, f, indent=1)
        info = gs_samples_from(prefix, err_text)
        if rb and "ringbuf_bytes" not in info:
            info["ringbuf_bytes"] = sum(rb.values())
        files = {os.path.basename(p)[len("long"):]: os.path.getsize(p)
                 for p in glob.glob(prefix + ".*")}
        n = len(series)
        # gpusample's CPU in the second half: its steady state, after start-up
        # (unwind tables for the target's libraries, Python runtime discovery)
        steady = None
        if n >= 4:
            (ta, _, ca), (tb, _, cb) = series[n // 2], series[-1]
            steady = round(100 * (cb - ca) / max(tb - ta, 1e-9), 2)
        mem = {
            "seconds": d, "rc": rc, "series_kb": series,
            "rss_start_kb": series[min(2, n - 1)][1] if n else None,
            "rss_mid_kb": series[n // 2][1] if n else None,
            "rss_end_kb": series[-1][1] if n else None,
            "peak_rss_kb_incl_writing": w.peak_kb(),
            "stop_to_exit_s": round(stop_s, 3),
            "cpu_s_while_sampling": cpu_run,
            "cpu_pct_steady_second_half": steady,
            "samples": info.get("samples"), "lost": info.get("lost"),
            "files": files,
        }
        self.summary["memory"] = mem
        self.summary["bpf_gpusample"] = self.bpf_cost(progs, info.get("samples"))
        self.summary["volume_99hz"] = self.volume(info, files)
        for p in glob.glob(prefix + ".*"):
            os.remove(p)
        log(f"long run: {mem['samples']} samples, rss start/mid/end "
            f"{mem['rss_start_kb']}/{mem['rss_mid_kb']}/{mem['rss_end_kb']} KiB")

    def bpf_cost(self, progs, samples):
        out = []
        for p in progs:
            rt, rc = p.get("run_time_ns", 0), p.get("run_cnt", 0)
            e = {"name": p.get("name"), "type": p.get("type"), "run_cnt": rc, "run_time_ns": rt,
                 "ns_per_run": round(rt / rc) if rc else None,
                 "bytes_jited": p.get("bytes_jited"), "bytes_xlated": p.get("bytes_xlated")}
            if samples and p.get("type") == "perf_event":
                e["ns_per_recorded_sample"] = round(rt / samples)
            out.append(e)
        return out

    def volume(self, info, files):
        n = info.get("samples")
        v = {"samples": n}
        if info.get("ringbuf_bytes") and n:
            # producer position read just before SIGINT over the samples in the
            # profile: includes the 8-byte ring-buffer header of each record and
            # the (few) process events
            v["ringbuf_bytes"] = info["ringbuf_bytes"]
            v["ringbuf_bytes_per_sample"] = round(info["ringbuf_bytes"] / n, 1)
        if n:
            for name, size in files.items():
                v[f"bytes_per_100k_samples{name}"] = round(size * 100000 / n)
        return v

    def bcc_cost(self):
        """profile-bpfcc's per-sample BPF cost on the same training loop."""
        if not self.bcc:
            return
        old = set_bpf_stats(True)
        result = os.path.join(self.tmp, "bccc.result")
        try:
            bcc, f = self.start_bcc(os.path.join(self.tmp, "bcc-cost.folded"), self.a.hz)
            wl = spawn(self.workload_cmd("train", result), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            wl.wait()
            progs = bpftool_progs(bcc.pid)
            bcc.send_signal(signal.SIGINT)
            bcc.wait(timeout=120)
            f.close()
        finally:
            set_bpf_stats(old == "1")
        with open(os.path.join(self.res_dir, "bcc_bpftool.json"), "w") as fo:
            json.dump(progs, fo, indent=1)
        self.summary["bpf_bcc"] = self.bpf_cost(progs, None)

    # ---- (3) stop -> written profile on a large run ------------------------------

    def large(self):
        """>= 1M samples: the pure-Python burner (2 threads + 2 worker
        processes) for --large-seconds at --large-hz under gpusample and under
        perf record -g (the same tree); then SIGINT and time to exit, and
        perf report / perf script on the perf.data."""
        a = self.a
        out = {"hz": a.large_hz, "seconds": a.large_seconds}
        rate = int(open("/proc/sys/kernel/perf_event_max_sample_rate").read())
        out["perf_event_max_sample_rate_before"] = rate
        for tool in (["gpusample"] if self.gs else []) + (["perf"] if shutil.which("perf") else []):
            wcmd = [PY, PYBURN, "--seconds", str(a.large_seconds + 120), "--warmup", "0.5",
                    "--threads", "2", "--procs", "2"]
            prefix = os.path.join(self.tmp, f"large-{tool}")
            err_path = os.path.join(self.res_dir, f"large_{tool}.stderr.txt")
            g, wl_pid, err = self.profiled(tool, a.large_hz, wcmd, prefix, err_path)
            t0 = time.monotonic()
            while time.monotonic() - t0 < a.large_seconds and g.poll() is None:
                time.sleep(0.5)
            rss_before = proc_mem_kb(g.pid)[0]
            rb = ringbuf_bytes(g.pid) if tool == "gpusample" else {}
            cpu_run = proc_cpu_s(g.pid)
            # launch mode: ru_maxrss would include the workload's; sample VmHWM
            w = Watch(g.pid)
            w.poll()
            rc, ru, stop_s = self.stop_profiled(g, wl_pid, w)
            err.close()
            with open(err_path) as f:
                err_text = f.read()
            e = {"rc": rc, "stop_to_exit_s": round(stop_s, 3),
                 "peak_rss_kb": w.peak_kb(),
                 "rss_before_stop_kb": rss_before, "cpu_s_while_sampling": cpu_run,
                 "cpu_s_total_incl_children": round(ru.ru_utime + ru.ru_stime, 3)}
            if tool == "gpusample":
                info = gs_samples_from(prefix, err_text)
                if rb and "ringbuf_bytes" not in info:
                    info["ringbuf_bytes"] = sum(rb.values())
                e.update(info)
                e["files"] = {os.path.basename(p)[len(f"large-{tool}"):]: os.path.getsize(p)
                              for p in glob.glob(prefix + ".*")}
                out["volume"] = self.volume(info, e["files"])
            else:
                data = prefix + ".perf.data"
                e["perf_data_bytes"] = os.path.getsize(data) if os.path.exists(data) else None
                e["samples"] = perf_samples(data)
                for sub, pcmd in (("report", ["perf", "report", "--stdio", "-i", data]),
                                  ("script", ["perf", "script", "-i", data])):
                    t = time.monotonic()
                    p = spawn(pcmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    prc, pru = wait_watching(p, None, timeout=900, poll_s=0.01)
                    e[f"perf_{sub}_s"] = round(time.monotonic() - t, 3)
                    e[f"perf_{sub}_peak_rss_kb"] = pru.ru_maxrss
                    e[f"perf_{sub}_rc"] = prc
            out[tool] = e
            for p in glob.glob(prefix + ".*"):
                os.remove(p)
            log(f"large {tool}: {e.get('samples')} samples, stop->exit {e['stop_to_exit_s']} s, "
                f"peak {e['peak_rss_kb']} KiB")
        rate_after = int(open("/proc/sys/kernel/perf_event_max_sample_rate").read())
        out["perf_event_max_sample_rate_after"] = rate_after
        if rate_after != rate:
            # the kernel lowers it when perf interrupts run long; put it back
            with open("/proc/sys/kernel/perf_event_max_sample_rate", "w") as f:
                f.write(str(rate))
            self.note(f"the kernel lowered perf_event_max_sample_rate {rate} -> {rate_after} during "
                      "the large run; restored")
        self.summary["large"] = out


def perf_samples(data):
    try:
        txt = subprocess.run(["perf", "report", "--stdio", "-i", data, "--header-only", "-I"],
                             capture_output=True, text=True, timeout=120).stdout
        txt += subprocess.run(["perf", "report", "--stdio", "-i", data, "--no-children", "--sort", "comm",
                               "-g", "none", "-n"], capture_output=True, text=True, timeout=600).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"# Samples: (\d+)([KMG]?)", txt)
    # the exact count: sum of the per-comm sample column
    n = 0
    for line in txt.splitlines():
        mm = re.match(r"\s+[\d.]+%\s+(\d+)\s+\S.*$", line)
        if mm:
            n += int(mm.group(1))
    if n:
        return n
    if m:
        return int(m.group(1)) * {"": 1, "K": 1000, "M": 10**6, "G": 10**9}[m.group(2)]
    return None


def med(x):
    return round(statistics.median(x), 4) if x else None


def mn(x):
    return round(min(x), 4) if x else None


def mx(x):
    return round(max(x), 4) if x else None


# ---- the report ---------------------------------------------------------------------

LABEL = {
    "none": "no profiler",
    "gpusample": "gpusample -F 99 (whole tree)",
    "perf_fp": "perf record -F 99 -g",
    "perf_dwarf": "perf record -F 99 --call-graph dwarf",
    "bcc": "profile-bpfcc -F 99 (system-wide)",
    "torch_cpu": "torch.profiler (CPU)",
    "torch_stack": "torch.profiler (CPU, with_stack=True)",
}
WL_LABEL = {"pyburn": "pure-Python CPU burner (ops/s)", "train": "PyTorch CPU training loop (steps/s)"}


def fmt(x, nd=3):
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def pct(r):
    return "n/a" if r is None else f"{(r - 1) * 100:+.1f}%"


def kb(x):
    return "n/a" if x is None else f"{x / 1024:.1f} MiB"


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // 1024
    osr = "?"
    try:
        with open("/etc/os-release") as f:
            osr = re.search(r'PRETTY_NAME="([^"]+)"', f.read()).group(1)
    except (OSError, AttributeError):
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "mem_mib": mem, "kernel": platform.release(),
            "os": osr, "python": platform.python_version()}


def tool_versions(gs):
    v = {}
    for name, cmd in (("gpusample", [gs, "--version"] if gs else None), ("perf", ["perf", "--version"]),
                      ("bcc", ["dpkg-query", "-W", "-f", "${Version}", "bpfcc-tools"]),
                      ("torch", [PY, "-c", "import torch; print(torch.__version__)"])):
        if not cmd:
            continue
        try:
            v[name] = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError:
            v[name] = "n/a"
    return v


def render(s, a):
    L = []
    m = s["machine"]
    L.append("# gpusample benchmark results\n")
    L.append(f"Run {s['date']} on {m['cpus']} CPUs ({m['cpu']}), {m['mem_mib']} MiB, "
             f"{m['os']}, kernel {m['kernel']}. Versions: "
             + ", ".join(f"{k} {v}" for k, v in s["versions"].items()) + ".")
    L.append(f"Settings: {a.rounds} rounds, configurations rotated within each round; "
             f"{a.warmup} s warm-up + {a.window} s measured window per run; {a.hz} Hz. "
             f"1-minute load average at run starts: median {fmt(s.get('load_median'), 2)}, "
             f"max {fmt(s.get('load_max'), 2)} (background load on the machine makes every figure noisier). "
             f"Total bench time {s.get('elapsed_min', 0):.1f} min. See bench/README.md for the method.\n")

    sd = s.get("slowdown", {})
    if sd:
        L.append("## 1. Slowdown of the profiled job\n")
        L.append("Slowdown = no-profiler throughput / profiled throughput, paired per round "
                 "(1.000 = no slowdown; median, min–max over rounds). Profiler CPU: the "
                 "profiler process's own user+system CPU during the measured window, in % of one CPU "
                 "(on 2 CPUs it competes with the job; sampling work done in the job's context, "
                 "BPF programs and perf's in-kernel unwinding, shows up in the job's slowdown). "
                 "CPU per work: (job's CPU time + profiler process's CPU time) per op or step, "
                 "over no profiler's in the same round: the cost in CPU, less sensitive than "
                 "throughput to other load on the machine. Profiler CPU s, whole run: the profiler "
                 "process's CPU from start to its last poll before exit (start-up, sampling and "
                 "most of the writing; bcc: also its compile).\n")
        L.append("| workload | profiler | slowdown (median) | overhead | min–max | throughput median (min–max) | CPU per work (median, min–max) | profiler CPU % in window | profiler CPU s, whole run | runs |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for wl in ("pyburn", "train"):
            for cfg in LABEL:
                e = sd.get(f"{wl}/{cfg}")
                if not e:
                    continue
                L.append(f"| {WL_LABEL[wl]} | {LABEL[cfg]} | {fmt(e['slowdown_median'])} | "
                         f"{pct(e['slowdown_median'])} | {fmt(e['slowdown_min'])}–{fmt(e['slowdown_max'])} | "
                         f"{fmt(e['throughput_median'], 1)} ({fmt(e['throughput_min'], 1)}–"
                         f"{fmt(e['throughput_max'], 1)}) | "
                         f"{fmt(e['cpu_per_work_ratio_median'])} ({fmt(e['cpu_per_work_ratio_min'])}–"
                         f"{fmt(e['cpu_per_work_ratio_max'])}) | "
                         f"{fmt(e['profiler_cpu_pct_median'], 2)} | {fmt(e['profiler_cpu_total_s_median'], 2)} | {e['n']} |")
        L.append("")
    if s.get("targets"):
        L.append("### Targets\n")
        for t in s.get("targets", []):
            L.append(f"- {t}")
        L.append("")

    bg, bb = s.get("bpf_gpusample"), s.get("bpf_bcc")
    if bg or bb:
        L.append("## 2. Cost per sample in BPF\n")
        L.append("kernel.bpf_stats_enabled=1 (only during these runs); `bpftool prog show --json` "
                 "run_time_ns / run_cnt for each program of the profiler's process, read just before "
                 "it stops. A perf_event program runs on every tick of every CPU (run_cnt) and "
                 "returns early for tasks outside the target set; 'per recorded sample' divides its "
                 "total time by the samples the profile holds.\n")
        L.append("| profiler | program | type | runs | ns per run | ns per recorded sample | JITed bytes |")
        L.append("|---|---|---|---|---|---|---|")
        for who, progs in (("gpusample (training loop, 99 Hz)", bg or []),
                           ("profile-bpfcc (training loop, 99 Hz)", bb or [])):
            for p in progs:
                L.append(f"| {who} | {p['name']} | {p['type']} | {p['run_cnt']} | {fmt(p['ns_per_run'])} | "
                         f"{fmt(p.get('ns_per_recorded_sample'))} | {fmt(p.get('bytes_jited'))} |")
        if bg is not None and not bg:
            L.append("| gpusample | (no programs found for its pid) | | | | | |")
        L.append("")

    lg = s.get("large")
    if lg:
        L.append("## 3. From stop to written profile, large run\n")
        L.append(f"The pure-Python burner (2 threads + 2 worker processes) sampled at {lg['hz']} Hz per CPU "
                 f"for {lg['seconds']} s; SIGINT, then time until the profiler exits (gpusample: symbolize "
                 "and write pprof + speedscope; perf record: finish perf.data, build-ids) and its peak RSS "
                 "(VmHWM, sampled every 10 ms until exit). The workload is killed at the SIGINT so the "
                 "profiler does not wait for it. perf's profile needs a second step: `perf report --stdio` and "
                 "`perf script` on the same perf.data, timed the same way.\n")
        L.append("| step | samples | seconds | peak RSS | output |")
        L.append("|---|---|---|---|---|")
        g = lg.get("gpusample")
        if g:
            out = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(g.get("files", {}).items()))
            L.append(f"| gpusample: SIGINT → profile written | {fmt(g.get('samples'))} | "
                     f"{fmt(g['stop_to_exit_s'], 2)} | {kb(g['peak_rss_kb'])} | {out} |")
        p = lg.get("perf")
        if p:
            L.append(f"| perf record -g: SIGINT → exit | {fmt(p.get('samples'))} | {fmt(p['stop_to_exit_s'], 2)} | "
                     f"{kb(p['peak_rss_kb'])} | perf.data {fmt((p.get('perf_data_bytes') or 0) / 1e6, 1)} MB |")
            L.append(f"| perf report --stdio | | {fmt(p.get('perf_report_s'), 2)} | {kb(p.get('perf_report_peak_rss_kb'))} | |")
            L.append(f"| perf script | | {fmt(p.get('perf_script_s'), 2)} | {kb(p.get('perf_script_peak_rss_kb'))} | |")
            if p.get("stop_to_exit_s") is not None and p.get("perf_report_s") is not None:
                L.append(f"| perf: stop → report (record exit + report) | | "
                         f"{p['stop_to_exit_s'] + p['perf_report_s']:.2f} | | |")
        L.append("")

    mem = s.get("memory")
    if mem:
        L.append("## 4. gpusample memory over a long run\n")
        L.append(f"gpusample {'-p' if a.attach else '-- CMD'} on the training loop at {a.hz} Hz for {mem['seconds']} s "
                 f"({'BENCH_LONG=1' if a.long_seconds >= 600 else 'default shortened run; BENCH_LONG=1 runs 600 s'}); "
                 "VmRSS sampled every second.\n")
        L.append("| RSS at 2 s | RSS at middle | RSS at end | peak incl. writing | samples | stop → written | CPU while sampling (all) | CPU, second half |")
        L.append("|---|---|---|---|---|---|---|---|")
        L.append(f"| {kb(mem['rss_start_kb'])} | {kb(mem['rss_mid_kb'])} | {kb(mem['rss_end_kb'])} | "
                 f"{kb(mem['peak_rss_kb_incl_writing'])} | {fmt(mem.get('samples'))} | "
                 f"{fmt(mem['stop_to_exit_s'], 2)} s | {fmt(mem.get('cpu_s_while_sampling'), 2)} s "
                 f"({fmt(100 * (mem.get('cpu_s_while_sampling') or 0) / mem['seconds'], 2)}% of one CPU) | "
                 f"{fmt(mem.get('cpu_pct_steady_second_half'), 2)}% of one CPU |")
        L.append("")

    L.append("## 5. Data volume\n")
    L.append("Ring-buffer bytes: the BPF ring buffer's producer position (read through a copy of "
             "gpusample's map fd just before the stop) over the samples in the profile; it counts "
             "each record's 8-byte ring-buffer header and the few process events. Output: file size "
             "scaled to 100k samples.\n")
    L.append("| run | samples | ring-buffer bytes per sample | output bytes per 100k samples |")
    L.append("|---|---|---|---|")
    for name, v in (("training loop, 99 Hz", s.get("volume_99hz")),
                    (f"pure-Python burner, {a.large_hz} Hz", (s.get("large") or {}).get("volume"))):
        if not v:
            continue
        outs = ", ".join(f"{k.replace('bytes_per_100k_samples', '')}: {val / 1e6:.2f} MB"
                         for k, val in sorted(v.items()) if k.startswith("bytes_per_100k"))
        L.append(f"| {name} | {fmt(v.get('samples'))} | {fmt(v.get('ringbuf_bytes_per_sample'), 1)} | {outs} |")
    L.append("")
    if s["notes"]:
        L.append("## Notes\n")
        for n in s["notes"]:
            L.append(f"- {n}")
        L.append("")
    return "\n".join(L)


def targets(s):
    out = []
    sd = s.get("slowdown", {})
    peers = ("perf_fp", "perf_dwarf", "bcc", "torch_cpu", "torch_stack")
    for wl in ("pyburn", "train") if sd else ():
        g = sd.get(f"{wl}/gpusample")
        if not g or g["slowdown_median"] is None:
            out.append(f"{WL_LABEL[wl]}: gpusample not measured")
            continue
        met = g["slowdown_median"] <= 1.01
        spread = (g["slowdown_max"] - g["slowdown_min"]) / 2
        caveat = (f" — but the rounds spread ±{spread * 100:.0f}%, wider than the 1% target: this run "
                  "cannot resolve 1%; see CPU per work below and BENCH_ROUNDS" if spread > 0.01 else "")
        out.append(f"{WL_LABEL[wl]}: gpusample slowdown at 99 Hz {pct(g['slowdown_median'])} "
                   f"(median; min–max {pct(g['slowdown_min'])} to {pct(g['slowdown_max'])}): "
                   f"target ≤ +1% **{'met' if met else 'not met'}** on the median{caveat}")
        worse = [LABEL[c] for c in peers if sd.get(f"{wl}/{c}") and sd[f"{wl}/{c}"]["slowdown_median"] is not None
                 and sd[f"{wl}/{c}"]["slowdown_median"] <= g["slowdown_median"]]
        out.append(f"{WL_LABEL[wl]}: gpusample below every peer (medians): **{'met' if not worse else 'not met'}**"
                   + (f" (peers at or below it: {', '.join(worse)})" if worse else ""))
        if g.get("cpu_per_work_ratio_median") is not None:
            out.append(f"{WL_LABEL[wl]}: gpusample CPU per work {pct(g['cpu_per_work_ratio_median'])} "
                       f"(min–max {pct(g['cpu_per_work_ratio_min'])} to {pct(g['cpu_per_work_ratio_max'])}), "
                       f"its own process {fmt(g['profiler_cpu_pct_median'], 2)}% of one CPU in the window")
    # A model of the steady-state cost that does not depend on throughput noise:
    # BPF time per second of sampling plus gpusample's own CPU in the second
    # half of the long run, as a share of the machine's CPUs.
    # Every program counts (gs_off_switch runs on every context switch and
    # costs more than the timer samples): their summed run time per sample
    # recorded in the same run.
    mem, bg = s.get("memory") or {}, s.get("bpf_gpusample") or []
    samp = [p for p in bg if p.get("name") == "gs_sample" and p.get("ns_per_recorded_sample")]
    ncpu = os.cpu_count()
    if mem.get("samples") and samp and mem.get("cpu_pct_steady_second_half") is not None:
        recorded = samp[0]["run_time_ns"] / samp[0]["ns_per_recorded_sample"]
        all_ns = sum(p.get("run_time_ns") or 0 for p in bg) / recorded
        bpf_share = all_ns * mem["samples"] / (mem["seconds"] * 1e9 * ncpu)
        user_share = mem["cpu_pct_steady_second_half"] / 100 / ncpu
        out.append(f"PyTorch CPU training loop, derived steady-state cost of gpusample at 99 Hz: "
                   f"BPF {bpf_share * 100:.2f}% + its process {user_share * 100:.2f}% = "
                   f"{(bpf_share + user_share) * 100:.2f}% of the {ncpu} CPUs (from sections 2 and 4: "
                   f"all programs' run time per recorded sample × samples/s, and CPU in the second half of the long run): "
                   f"target ≤ 1% **{'met' if bpf_share + user_share <= 0.01 else 'not met'}**")
    for c in ("torch_cpu", "torch_stack"):
        t = sd.get(f"train/{c}")
        if t:
            out.append(f"{LABEL[c]} on the same training loop: slowdown {pct(t['slowdown_median'])} "
                       f"(min–max {pct(t['slowdown_min'])} to {pct(t['slowdown_max'])}), CPU per work "
                       f"{pct(t['cpu_per_work_ratio_median'])} (min–max {pct(t['cpu_per_work_ratio_min'])} to "
                       f"{pct(t['cpu_per_work_ratio_max'])})")
    return out


def main():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusample", default=env("GPUSAMPLE", os.path.join(ROOT, "build/gpusample")))
    ap.add_argument("--rounds", type=int, default=int(env("BENCH_ROUNDS", "5")))
    ap.add_argument("--window", type=float, default=float(env("BENCH_WINDOW", "5")))
    ap.add_argument("--warmup", type=float, default=float(env("BENCH_WARMUP", "2")))
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--large-hz", type=int, default=int(env("BENCH_LARGE_HZ", "25000")))
    ap.add_argument("--large-seconds", type=float, default=float(env("BENCH_LARGE_SECONDS", "55")))
    ap.add_argument("--long-seconds", type=float,
                    default=float(env("BENCH_LONG_SECONDS", "600" if env("BENCH_LONG") == "1" else "90")))
    ap.add_argument("--attach", action="store_true", default=env("BENCH_GS_ATTACH") == "1",
                    help="large and long runs attach with -p instead of launching")
    ap.add_argument("--workloads", default=env("BENCH_WORKLOADS", "pyburn,train"))
    ap.add_argument("--parts", default=env("BENCH_PARTS", "slowdown,bpf,large,long"),
                    help="any of slowdown,bpf,large,long")
    ap.add_argument("--out", default=env("BENCH_OUT", os.path.join(ROOT, "bench")))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: run as root (sudo make bench): perf, BPF and bpf_stats need it")
    if not (a.gpusample and os.access(a.gpusample, os.X_OK)):
        log(f"{a.gpusample} not found: gpusample rows are skipped (run `make` first)")
        a.gpusample = None
    t_begin = time.monotonic()
    b = Bench(a)
    parts = a.parts.split(",")
    s = b.summary
    s["date"] = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    s["machine"] = machine()
    s["versions"] = tool_versions(a.gpusample)
    s["settings"] = vars(a)
    try:
        if "slowdown" in parts:
            b.slowdown()
            b.slowdown_summary()
            loads = [r["loadavg_1m"] for r in b.rows]
            s["load_median"], s["load_max"] = med(loads), mx(loads)
        if "bpf" in parts:
            b.bcc_cost()
        if "long" in parts and a.gpusample:
            b.long_run()
        if "large" in parts:
            b.large()
        s["targets"] = targets(s)
    finally:
        cleanup()
        s["elapsed_min"] = (time.monotonic() - t_begin) / 60
        with open(os.path.join(b.res_dir, "summary.json"), "w") as f:
            json.dump(s, f, indent=1, default=str)
        md = render(s, a)
        with open(os.path.join(a.out, "results.md"), "w") as f:
            f.write(md + "\n")
        shutil.rmtree(b.tmp, ignore_errors=True)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
