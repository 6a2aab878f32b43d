#!/usr/bin/python3
"""Per-thread time in a gpusample profile, read through `go tool pprof`
(pprof_stacks.py) as a user would: one line per (tid, thread_state):
TID<TAB>THREAD_NAME<TAB>STATE<TAB>CPU_S<TAB>OFFCPU_S<TAB>TOP_STACK
(TOP_STACK: leaf;...;root of the stack with the most time in that state).
Used by the off-CPU integration tests."""
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pprof_stacks import parse_traces, value_of  # noqa: E402


def samples(path, index, *args):
    out = subprocess.run(["go", "tool", "pprof", "-traces", "-sample_index=" + index] +
                         list(args) + [path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        sys.exit(1)
    return parse_traces(out.stdout)


def load(path, *args):
    """Every sample with a nonzero cpu or offcpu value, as a dict: tid,
    state, name, cpu_s, offcpu_s, frames (leaf first); args go to pprof
    (e.g. -lines)."""
    res = []
    for index in ("cpu", "offcpu"):
        for s in samples(path, index, *args):
            v = value_of(s["value"])
            if not v:
                continue
            lab = s["labels"]
            res.append({"tid": int(lab.get("tid", "0")), "state": lab.get("thread_state", "?"),
                        "name": lab.get("thread_name", ""), "frames": s["frames"],
                        "cpu_s": v if index == "cpu" else 0.0,
                        "offcpu_s": v if index == "offcpu" else 0.0})
    return res


def main():
    if len(sys.argv) != 2:
        print("usage: thread_times.py FILE", file=sys.stderr)
        return 2
    tot = collections.defaultdict(lambda: [0.0, 0.0])
    top = collections.defaultdict(collections.Counter)
    names = {}
    for col, index in ((0, "cpu"), (1, "offcpu")):
        for s in samples(sys.argv[1], index):
            lab = s["labels"]
            key = (lab.get("tid", "?"), lab.get("thread_state", "?"))
            v = value_of(s["value"])
            tot[key][col] += v
            names[key[0]] = lab.get("thread_name", "")
            top[key][";".join(s["frames"])] += v
    for key in sorted(tot):
        stack = top[key].most_common(1)[0][0] if top[key] else ""
        print("%s\t%s\t%s\t%.6f\t%.6f\t%s" % (key[0], names.get(key[0], ""), key[1],
                                              tot[key][0], tot[key][1], stack))
    return 0


if __name__ == "__main__":
    sys.exit(main())
