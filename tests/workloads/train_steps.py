#!/usr/bin/python3
"""A PyTorch CPU loop that times its own steps, for checking a profiler's
step boundaries against the job's own clock.

Modes:
  train  batch from a DataLoader (num_workers=0), forward, loss.backward(),
         optimizer.step(); every --stall-every-th step's batch spends
         --stall-ms in slow_fetch (the input pipeline stalls).
  infer  the same forward under torch.no_grad(): no backward at all.
  inner  backward called in a tight inner loop (thousands per second).

With --slow-after K, the model's forward spends --slow-ms more (on-CPU)
from step K on.  With --accum A, each step runs A batches' forward and backward before one
optimizer.step() (gradient accumulation).

Prints "step K START END MARK" per step (time.monotonic() seconds: the top
of the loop, after optimizer.step(), right before optimizer.step(), which is
right after the last loss.backward()), then "steps=N".
"""
import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def slow_fetch(ms):
    """The input pipeline's stall: on-CPU (a decode, a cache miss), so
    timer samples see it whatever the off-CPU sampling rate."""
    end = time.monotonic() + ms / 1000.0
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


class Slow(nn.Module):
    """A layer that turns slow (on-CPU) once `slow_ms` is set: a model whose
    forward grows after step K."""

    def __init__(self):
        super().__init__()
        self.slow_ms = 0

    def forward(self, x):
        if self.slow_ms:
            end = time.monotonic() + self.slow_ms / 1000.0
            while time.monotonic() < end:
                pass
        return x


class Batches(Dataset):
    def __init__(self, n, stall_every, stall_ms, accum):
        self.n, self.stall_every, self.stall_ms, self.accum = n, stall_every, stall_ms, accum

    def __len__(self):
        return self.n * self.accum

    def __getitem__(self, i):
        step = i // self.accum + 1
        if self.stall_every and step % self.stall_every == 0 and i % self.accum == 0:
            slow_fetch(self.stall_ms)
        g = torch.Generator().manual_seed(i)
        return torch.rand(64, 256, generator=g), torch.rand(64, 1, generator=g)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="train", choices=["train", "infer", "inner"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--stall-every", type=int, default=0)
    ap.add_argument("--stall-ms", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=1.5, help="inner mode's length")
    ap.add_argument("--accum", type=int, default=1, help="backward calls per optimizer step")
    ap.add_argument("--slow-after", type=int, default=0, help="forward slower from this step on")
    ap.add_argument("--slow-ms", type=int, default=40)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    slow = Slow()
    model = nn.Sequential(slow, nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    if a.mode == "inner":
        w = torch.ones(4, requires_grad=True)
        n, end = 0, time.monotonic() + a.seconds
        while time.monotonic() < end:
            (w * 2).sum().backward()
            n += 1
        print("backwards=%d" % n, flush=True)
        return
    loader = DataLoader(Batches(a.steps, a.stall_every, a.stall_ms, a.accum), batch_size=None,
                        num_workers=0)
    it = iter(loader)
    for k in range(1, a.steps + 1):
        if a.slow_after and k == a.slow_after:
            slow.slow_ms = a.slow_ms
        t0 = time.monotonic()
        tb = 0.0
        if a.mode == "infer":
            x, y = next(it)
            with torch.no_grad():
                model(x)
        else:
            opt.zero_grad()
            for _ in range(a.accum):
                x, y = next(it)
                loss = nn.functional.mse_loss(model(x), y) / a.accum
                loss.backward()
            tb = time.monotonic()
            opt.step()
        print("step %d %.6f %.6f %.6f" % (k, t0, time.monotonic(), tb), flush=True)
    print("steps=%d" % a.steps, flush=True)


if __name__ == "__main__":
    main()
