#!/usr/bin/python3
"""Data-parallel training with torch.distributed on the CPU (gloo), as
torchrun starts it: every rank is its own process (RANK, LOCAL_RANK,
WORLD_SIZE in its environment), trains a small model under
DistributedDataParallel (gradient all-reduce in backward) and feeds it from
a DataLoader with worker processes.

--sleep-rank R --sleep-ms MS: rank R sleeps MS before each step (a
straggler); the other ranks then wait for it in the gradient all-reduce.

--steps N: stop after N steps instead of --seconds.
--stall-rank R --stall-every K --stall-ms MS: rank R spins on the CPU for MS
in slow_fetch on every Kth step (steps K, 2K, ...): the other ranks wait
for it in that step's gradient all-reduce only.

Each rank prints "rank=R pid=PID steps=N seconds=S" at the end.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


def slow_fetch(ms):
    end = time.monotonic() + ms / 1000.0
    while time.monotonic() < end:
        pass


class Batches(Dataset):
    def __len__(self):
        return 10**6

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        x = torch.rand(64, generator=g)
        return torch.tanh(x * 2.0), index % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--sleep-rank", type=int, default=-1)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--stall-rank", type=int, default=-1)
    ap.add_argument("--stall-every", type=int, default=0)
    ap.add_argument("--stall-ms", type=float, default=0.0)
    args = ap.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(Batches(), batch_size=64, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    steps, t0 = 0, time.monotonic()
    for x, y in loader:
        if rank == args.sleep_rank:
            time.sleep(args.sleep_ms / 1000.0)
        if rank == args.stall_rank and args.stall_every and (steps + 1) % args.stall_every == 0:
            slow_fetch(args.stall_ms)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()  # DDP all-reduces the gradients here
        opt.step()
        steps += 1
        # Every rank runs the same number of steps (rank 0 decides when to stop).
        over = steps >= args.steps if args.steps else time.monotonic() - t0 >= args.seconds
        done = torch.tensor([1 if (rank == 0 and over) else 0])
        dist.all_reduce(done)
        if done.item():
            break
    # one write(2) of the whole line: the ranks share the launcher's stdout,
    # and a print of the text and its newline apart can interleave them
    sys.stdout.flush()
    os.write(1, f"rank={rank} pid={os.getpid()} steps={steps} seconds={time.monotonic() - t0:.3f}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
