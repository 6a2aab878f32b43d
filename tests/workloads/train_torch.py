#!/usr/bin/python3
"""A small but real PyTorch CPU training loop, the shape of a real job:
a Dataset whose __getitem__ does CPU work (decode + augment), a DataLoader
with worker processes, forward / backward / optimizer step, and a periodic
.item() sync.  Used by `make demo`, the integration tests and bench/.

Prints one line "steps=N seconds=S steps_per_s=R" at the end.  With
--epoch-steps N the loop runs epochs of N steps on a DataLoader that
re-creates its workers each epoch (persistent_workers=False, PyTorch's
default) and the line adds "epochs=E worker_processes=W": the workers it
started, for checking a profiler's worker totals against the job's own.
--worker-log PATH appends "pid CLOCK_MONOTONIC-seconds" per worker at its
start, to count the workers of a profiler's window.
"""
import argparse
import functools
import math
import os
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, Subset


class SyntheticImages(Dataset):
    """Images made on the fly; __getitem__ is deliberately CPU-heavy, like
    JPEG decoding and augmentation in a real input pipeline."""

    def __init__(self, n, size):
        self.n = n
        self.size = size

    def __len__(self):
        return self.n

    def decode(self, index):
        g = torch.Generator().manual_seed(index)
        img = torch.rand(3, self.size, self.size, generator=g)
        return img

    def augment(self, img):
        # flips, a blur and a normalisation: real tensor work on the CPU
        img = torch.flip(img, dims=[2])
        k = torch.ones(3, 1, 3, 3) / 9.0
        img = torch.nn.functional.conv2d(img.unsqueeze(0), k, padding=1, groups=3)[0]
        return (img - img.mean()) / (img.std() + 1e-5)

    def __getitem__(self, index):
        img = self.augment(self.decode(index))
        label = index % 10
        return img, label


class SmallNet(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32 * (size // 4) * (size // 4), 10)

    def forward(self, x):
        x = self.features(x)
        return self.head(torch.flatten(x, 1))


def train_step(model, opt, loss_fn, images, labels):
    opt.zero_grad(set_to_none=True)
    out = model.forward(images)
    loss = loss_fn(out, labels)
    loss.backward()
    opt.step()
    return loss


def log_worker(path, _worker_id):
    with open(path, "a") as f:  # one short append per worker: whole lines
        f.write(f"{os.getpid()} {time.monotonic():.6f}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0 = use --seconds)")
    ap.add_argument("--seconds", type=float, default=10.0, help="stop after S seconds")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--start-method", default=None, help="fork, spawn or forkserver")
    ap.add_argument("--epoch-steps", type=int, default=0,
                    help="epochs of N steps, workers re-created each epoch (0 = one endless epoch)")
    ap.add_argument("--worker-log", default=None, help="append 'pid start-time' per worker")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = SyntheticImages(10**6, args.size)
    churn = args.epoch_steps > 0
    if churn:
        data = Subset(data, range(args.epoch_steps * args.batch))
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                        shuffle=False, persistent_workers=args.workers > 0 and not churn,
                        multiprocessing_context=args.start_method if args.workers else None,
                        worker_init_fn=functools.partial(log_worker, args.worker_log) if args.worker_log else None)
    model = SmallNet(args.size)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    steps, epochs, t0, loss_sum, done = 0, 0, time.monotonic(), 0.0, False
    while not done:
        epochs += 1
        for images, labels in loader:
            loss = train_step(model, opt, loss_fn, images, labels)
            steps += 1
            if steps % 10 == 0:
                loss_sum += loss.item()  # a sync point, as in real logging code
            elapsed = time.monotonic() - t0
            if (args.steps and steps >= args.steps) or (not args.steps and elapsed >= args.seconds):
                done = True
                break
        done = done or not churn
    elapsed = time.monotonic() - t0
    assert math.isfinite(loss_sum)
    line = f"steps={steps} seconds={elapsed:.3f} steps_per_s={steps / elapsed:.3f} pid={os.getpid()}"
    if churn:
        line += f" epochs={epochs} worker_processes={epochs * args.workers}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
