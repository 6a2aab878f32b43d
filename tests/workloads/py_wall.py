#!/usr/bin/python3
"""Wall-clock workloads for the "where the time goes" tests, each measuring
its own ground truth in-process with time.perf_counter (CLOCK_MONOTONIC,
the same in every process): the JSON also holds "spans", every timed call
as [start, end] in perf_counter seconds (starve: [time, run delay s]
points), so a test can take the figure over the profile's window.

  py_wall.py dataset OUT.json --workers N [--item-ms MS]
      a DataLoader over a Dataset whose __getitem__ sleeps MS per item
  py_wall.py collate OUT.json --workers N [--collate-ms MS]
      a DataLoader whose collate_fn sleeps MS per batch
    Both: the training loop times next(loader) and runs a short on-CPU
    step; it writes READY (OUT.json + ".ready") once the workers are up and
    loops until OUT.json + ".stop" exists (at most 60 s), then writes
    {"pid", "loop_s", "next_s", "next_frac", "steps"}.
  py_wall.py sync OUT.json LIBCUDA
      the main thread calls the CUDA driver double's cuStreamSynchronize
      (its wait set by FAKE_CUDA_SYNC_MS / FAKE_CUDA_SYNC) in a loop with a
      short on-CPU step; READY / stop as above; writes {"pid", "loop_s",
      "sync_s", "sync_frac", "steps"}.
  py_wall.py collective OUT.json
      two gloo ranks (torch.multiprocessing.spawn) all_reduce a tensor in a
      loop, rank 1 sleeping 30 ms before each step (a straggler), rank 0
      computing 10 ms; rank 0
      writes READY (holding its pid) / stops as above and {"pid" (rank 0's), "loop_s",
      "allreduce_s", "allreduce_frac"}, timing all_reduce with perf_counter.
  py_wall.py starve OUT.json
      the main thread spins on the CPU beside nproc + 1 spinning child
      processes; READY / stop as above; writes {"pid", "loop_s",
      "run_delay_frac"}: the main thread's run-queue wait over the loop from
      /proc/thread-self/schedstat (field 2, ns).
"""
import argparse
import ctypes
import json
import os
import sys
import time


def busy(ms):
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def loader(args):
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data._utils.collate import default_collate

    class SleepyItems(Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            if args.item_ms:
                time.sleep(args.item_ms / 1000.0)
            return torch.zeros(16)

    def slow_collate(batch):
        time.sleep(args.collate_ms / 1000.0)
        return default_collate(batch)

    # fork, as on Linux before Python 3.14 (whose default, forkserver,
    # would have to pickle these local classes); the same workers everywhere
    ctx = "fork" if args.workers else None
    return DataLoader(SleepyItems(), batch_size=args.batch, num_workers=args.workers,
                      collate_fn=slow_collate if args.mode == "collate" else None,
                      multiprocessing_context=ctx)


def train(args):
    it = iter(loader(args))
    next(it)  # the workers are up
    open(args.out + ".ready", "w").close()
    stop = args.out + ".stop"
    t0 = time.perf_counter()
    waited, steps = 0.0, 0
    spans = []
    while not os.path.exists(stop) and time.perf_counter() - t0 < 60:
        a = time.perf_counter()
        next(it)
        b = time.perf_counter()
        waited += b - a
        spans.append((a, b))
        busy(args.step_ms)
        steps += 1
    loop = time.perf_counter() - t0
    json.dump({"pid": os.getpid(), "loop_s": loop, "next_s": waited, "next_frac": waited / loop,
               "steps": steps, "spans": spans}, open(args.out, "w"))
    os._exit(0)  # no DataLoader teardown


def sync(args):
    cu = ctypes.CDLL(args.libcuda)
    ctx = ctypes.c_void_p()
    assert cu.cuInit(0) == 0 and cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0
    open(args.out + ".ready", "w").close()
    stop = args.out + ".stop"
    t0 = time.perf_counter()
    waited, steps = 0.0, 0
    spans = []
    while not os.path.exists(stop) and time.perf_counter() - t0 < 60:
        busy(args.step_ms)
        a = time.perf_counter()
        assert cu.cuStreamSynchronize(None) == 0
        b = time.perf_counter()
        waited += b - a
        spans.append((a, b))
        steps += 1
    loop = time.perf_counter() - t0
    json.dump({"pid": os.getpid(), "loop_s": loop, "sync_s": waited, "sync_frac": waited / loop,
               "steps": steps, "spans": spans}, open(args.out, "w"))


def collective_rank(rank, args, port):
    import torch
    import torch.distributed as dist
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    t = torch.ones(1024)
    for _ in range(5):
        dist.all_reduce(t)
    stop = args.out + ".stop"
    if rank == 0:
        with open(args.out + ".ready", "w") as f:
            f.write(str(os.getpid()))
    t0 = time.perf_counter()
    waited, flag, spans = 0.0, torch.zeros(1), []
    while time.perf_counter() - t0 < 60:
        if rank == 1:
            time.sleep(0.03)
        else:
            busy(10)
        flag[0] = 1.0 if rank == 0 and os.path.exists(stop) else 0.0
        a = time.perf_counter()
        dist.all_reduce(t)
        dist.all_reduce(flag)  # both ranks leave the loop together
        b = time.perf_counter()
        waited += b - a
        spans.append((a, b))
        if flag[0] > 0:
            break
    loop = time.perf_counter() - t0
    if rank == 0:
        json.dump({"pid": os.getpid(), "loop_s": loop, "allreduce_s": waited,
                   "allreduce_frac": waited / loop, "spans": spans}, open(args.out, "w"))
    dist.destroy_process_group()


def collective(args):
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(collective_rank, args=(args, port), nprocs=2)


def run_delay_ns():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1])


def starve(args):
    import subprocess
    kids = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * os.cpu_count())]
    time.sleep(0.5)
    open(args.out + ".ready", "w").close()
    stop = args.out + ".stop"
    t0, d0 = time.perf_counter(), run_delay_ns()
    spans = [(t0, d0 / 1e9)]
    while not os.path.exists(stop) and time.perf_counter() - t0 < 60:
        busy(20)
        spans.append((time.perf_counter(), run_delay_ns() / 1e9))
    loop, delay = time.perf_counter() - t0, run_delay_ns() - d0
    for k in kids:
        k.kill()
    json.dump({"pid": os.getpid(), "loop_s": loop, "run_delay_frac": delay / 1e9 / loop, "spans": spans},
              open(args.out, "w"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["dataset", "collate", "sync", "collective", "starve"])
    p.add_argument("out")
    p.add_argument("libcuda", nargs="?")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--item-ms", type=float, default=4.0)
    p.add_argument("--collate-ms", type=float, default=20.0)
    p.add_argument("--step-ms", type=float, default=4.0)
    args = p.parse_args()
    if args.mode == "collate":
        args.item_ms = 0
    if args.mode == "sync":
        sync(args)
    elif args.mode == "collective":
        collective(args)
    elif args.mode == "starve":
        starve(args)
    else:
        train(args)


if __name__ == "__main__":
    sys.exit(main())
