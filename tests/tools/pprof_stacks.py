#!/usr/bin/python3
"""Read a pprof profile through `go tool pprof -traces` (the real viewer) and
print one line per sample: VALUE<TAB>LABELS<TAB>leaf;...;root

LABELS is "key=value,key=value" as pprof printed them.  Extra arguments go
to pprof (e.g. -sample_index=gpu_samples; -lines prints each frame as
"function file:line", which the Python tests use for qualname and line).
The synthetic root frame "[process ROLE]" that gpusample puts on CPU
samples so that viewers show each process role as its own tree is dropped
(its information is in the process_role and rank labels), so that the
frames are the thread's own; GS_KEEP_PROCESS_FRAME=1 keeps it.  Used by the integration tests so
that assertions are made on what a user would see."""
import os
import re
import subprocess
import sys


def parse_traces(text):
    samples = []
    cur = None
    for line in text.splitlines():
        if line.startswith("-----------+"):
            if cur and cur["frames"]:
                samples.append(cur)
            cur = {"labels": {}, "value": None, "frames": []}
            continue
        if cur is None or not line.strip():
            continue
        if cur["value"] is None:
            m = re.match(r"^\s*([A-Za-z_][\w.:-]*):\s+(.*)$", line)
            if m and len(line) - len(line.lstrip()) < 12 and not line[:11].strip().replace(".", "").isdigit():
                cur["labels"][m.group(1)] = m.group(2).strip()
                continue
            m = re.match(r"^\s*(\S+)\s{3}(.*)$", line)
            if m:
                cur["value"] = m.group(1)
                cur["frames"].append(m.group(2).strip())
                continue
        else:
            cur["frames"].append(line.strip())
    if cur and cur["frames"]:
        samples.append(cur)
    return samples


PROCESS_FRAME = re.compile(r"^\[process [^\]]*\]$")
KEEP_PROCESS_FRAME = os.environ.get("GS_KEEP_PROCESS_FRAME") == "1"


def value_of(v):
    m = re.match(r"^([\d.]+)([a-zµ]*)$", v or "0")
    if not m:
        return 0.0
    num, unit = float(m.group(1)), m.group(2)
    scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "": 1, "mins": 60, "hrs": 3600}
    return num * scale.get(unit, 1)


def main():
    if len(sys.argv) < 2:
        print("usage: pprof_stacks.py FILE [pprof args]", file=sys.stderr)
        return 2
    args = ["go", "tool", "pprof", "-traces", "-sample_index=samples"] + sys.argv[2:] + [sys.argv[1]]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        return 1
    for s in parse_traces(out.stdout):
        labels = ",".join(f"{k}={v}" for k, v in sorted(s["labels"].items()))
        frames = [re.sub(r"\s+\(inline\)$", "", f) for f in s["frames"]]
        if frames and PROCESS_FRAME.match(frames[-1]) and not KEEP_PROCESS_FRAME:
            frames.pop()
        print(f"{value_of(s['value']):g}\t{labels}\t{';'.join(frames)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
