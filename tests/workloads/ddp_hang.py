#!/usr/bin/python3
"""A 2-rank torch.distributed (gloo) job that hangs, for `gpusample dump`.

Every rank starts a DataLoader whose one worker process gets stuck in
Dataset.__getitem__ (line GETITEM-STUCK) while prefetching.  Then rank 0
enters an all_reduce (line ALLREDUCE) that never completes, because rank 1
sleeps outside any collective (line RANK1-SLEEP): the straggler a dump must
name.  Each rank prints "ready rank=R pid=PID" right before it blocks.
"""
import os
import threading
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Stuck(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, index):
        threading.Event().wait()  # GETITEM-STUCK
        return torch.zeros(4)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    batches = iter(DataLoader(Stuck(), batch_size=2, num_workers=1))  # worker prefetches now
    t = torch.ones(4)
    print(f"ready rank={rank} pid={os.getpid()}", flush=True)
    if rank == 1:
        time.sleep(3600)  # RANK1-SLEEP
    dist.all_reduce(t)  # ALLREDUCE
    print(next(batches))


if __name__ == "__main__":
    main()
