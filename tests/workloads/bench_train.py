#!/usr/bin/python3
"""The PyTorch CPU training loop of tests/workloads/train_torch.py (same
Dataset, model, DataLoader with worker processes and train step), measured
for bench/: steps per second over a window that starts after a warm-up, and
optionally run under torch.profiler.

  --torch-profiler off|cpu|cpu_stack
      cpu:       torch.profiler.profile(activities=[CPU]) around the whole loop
      cpu_stack: the same with with_stack=True
  The profiler is entered before the warm-up, so its steady-state cost is
  what the window sees; the trace is exported only with --trace FILE.

Prints one line:
  steps=N seconds=S steps_per_s=R t0=T0 t1=T1 pid=P
(T0/T1: CLOCK_MONOTONIC seconds of the window), also written to --result FILE.
"""
import argparse
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import bench_common  # noqa: E402
from train_torch import SmallNet, SyntheticImages, train_step  # noqa: E402


def profiler_ctx(kind):
    if kind == "off":
        return contextlib.nullcontext(None)
    from torch.profiler import ProfilerActivity, profile
    return profile(activities=[ProfilerActivity.CPU], with_stack=(kind == "cpu_stack"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="measurement window")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of training before the window")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--torch-profiler", default="off", choices=["off", "cpu", "cpu_stack"])
    ap.add_argument("--trace", default=None, help="export the torch.profiler trace here")
    ap.add_argument("--result", default=None, help="also write the result line to this file")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = SyntheticImages(10**7, args.size)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, shuffle=False,
                        persistent_workers=args.workers > 0)
    model = SmallNet(args.size)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    steps, t_start = 0, time.monotonic()
    t0 = t1 = None
    s0 = 0
    with profiler_ctx(args.torch_profiler) as prof:
        for images, labels in loader:
            loss = train_step(model, opt, loss_fn, images, labels)
            steps += 1
            if steps % 10 == 0:
                loss.item()  # a sync point, as in real logging code
            now = time.monotonic()
            if t0 is None and now - t_start >= args.warmup:
                t0, s0 = now, steps
            elif t0 is not None and now - t0 >= args.seconds:
                t1 = now
                break
        t_exit = time.monotonic()
    if prof is not None:
        print(f"torch_profiler_exit_s={time.monotonic() - t_exit:.3f}", file=sys.stderr)
        if args.trace:
            te = time.monotonic()
            prof.export_chrome_trace(args.trace)
            print(f"torch_profiler_export_s={time.monotonic() - te:.3f}", file=sys.stderr)
    bench_common.report("steps", steps - s0, t0, t1, args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
