#!/usr/bin/python3
"""A DataLoader with pin_memory=True and num_workers=2, the threads and
processes of a real input pipeline: the main loop, two worker processes
(each with a multiprocessing queue feeder thread sending batches back), and
the main process's pin-memory thread (torch.utils.data._utils.pin_memory.
_pin_memory_loop) between them.

CPU-only torch has no pinned memory: DataLoader starts the pin-memory thread
only when CUDA (torch 2.x: an accelerator) is available, and
Tensor.pin_memory() needs a CUDA driver.  So here torch.cuda.is_available /
current_device / set_device (torch 2.x: torch.accelerator's is_available /
current_accelerator / current_device_index / set_device_index) answer as on a
GPU machine and the per-batch pin is a plain copy (clone); the thread itself
is DataLoader's own _pin_memory_loop, unchanged.  With CUDA nothing is
patched.

Prints "steps=N pid=PID" at the end.
"""
import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset
import torch.utils.data._utils.pin_memory as pm


class Images(Dataset):
    def __len__(self):
        return 10**6

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        img = torch.rand(3, 64, 64, generator=g)
        return torch.nn.functional.avg_pool2d(img.unsqueeze(0), 3, 1, 1)[0], index % 10


def copy_pin(data, device=None):
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, (list, tuple)):
        return type(data)(copy_pin(d) for d in data)
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        torch.cuda.is_available = lambda: True
        torch.cuda.current_device = lambda: 0
        torch.cuda.set_device = lambda device: None
        pm.pin_memory = copy_pin
        acc = getattr(torch, "accelerator", None)
        if acc is not None:  # torch >= 2.6 asks torch.accelerator instead
            acc.is_available = lambda: True
            acc.current_accelerator = lambda *a, **k: torch.device("cuda")
            acc.current_device_index = lambda: 0
            acc.set_device_index = lambda device: None
    torch.set_num_threads(1)
    loader = DataLoader(Images(), batch_size=64, num_workers=2, pin_memory=True)
    it = iter(loader)
    assert it._pin_memory and it._pin_memory_thread.is_alive(), "no pin-memory thread"
    steps, t0 = 0, time.monotonic()
    for x, y in it:
        w = x.mean() + y.float().mean()  # the "training step"
        steps += 1
        if time.monotonic() - t0 >= args.seconds:
            break
    print(f"steps={steps} pid={os.getpid()}", flush=True)


if __name__ == "__main__":
    main()
