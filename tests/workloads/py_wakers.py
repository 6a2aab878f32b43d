#!/usr/bin/python3
"""Waits with a known waker, for the waker-stack tests (t_offcpu_wakers):

  py_wakers.py producer SECS   the main thread takes items from a
      queue.Queue that a producer thread fills, each item made on-CPU by
      make_item (~20 ms): the main thread's wait is woken by the producer
      after make_item.
  py_wakers.py sleep SECS      the main thread sleeps 10 ms at a time: a
      timer ends every wait, no thread does.
  py_wakers.py loader SECS [--pin] a DataLoader (2 persistent workers)
      whose items are made on-CPU by decode_slowly (~60 ms); the main
      thread's wait in next(loader) is woken by a worker's queue feeder
      thread after the worker's main thread ran decode_slowly.

Prints one JSON line: {"pid", "main_tid", "mode", "items", "tids": {"producer": TID}}.
"""
import json
import os
import queue
import sys
import threading
import time

from py_wall import busy  # on-CPU for ms milliseconds


def make_item(i):
    busy(20)
    return i


tids = {}  # thread name -> native id, for the JSON line


def producer(secs):
    q = queue.Queue(maxsize=1)
    stop = time.perf_counter() + secs

    def fill():
        tids["producer"] = threading.get_native_id()
        i = 0
        while time.perf_counter() < stop:
            q.put(make_item(i))
            i += 1
        q.put(None)

    threading.Thread(target=fill, name="producer").start()
    n = 0
    while q.get() is not None:
        n += 1
    return n


def sleeper(secs):
    stop = time.perf_counter() + secs
    n = 0
    while time.perf_counter() < stop:
        time.sleep(0.01)
        n += 1
    return n


def decode_slowly(i):
    busy(60)
    return i


def loader(secs, pin):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            return decode_slowly(i)

    # batch_size=None: no collate, the workers only decode (and pickle the int)
    dl = DataLoader(Items(), batch_size=None, num_workers=2, persistent_workers=True,
                    pin_memory=pin)
    it = iter(dl)
    next(it)  # the workers are up
    n = take_batches(it, time.perf_counter() + secs)
    del it
    return n


def take_batches(it, stop):
    """The steady loop, apart from the first batch (the workers' start)."""
    n = 0
    while time.perf_counter() < stop:
        next(it)
        n += 1
    return n


def main():
    mode, secs = sys.argv[1], float(sys.argv[2])
    if mode == "producer":
        n = producer(secs)
    elif mode == "sleep":
        n = sleeper(secs)
    elif mode == "loader":
        n = loader(secs, "--pin" in sys.argv[3:])
    else:
        sys.exit("unknown mode " + mode)
    print(json.dumps({"pid": os.getpid(), "main_tid": threading.get_native_id(), "mode": mode,
                      "items": n, "tids": tids}))


if __name__ == "__main__":
    main()
