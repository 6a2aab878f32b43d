"""N processes (RANK 0..N-1 in their environment, as a launcher sets it)
of T threads each, every thread blocked in its own Event.wait at line
THREAD-WAIT, the main threads in time.sleep: the size of job a dump must
handle in bounded time.  --torch imports torch in every process first
(its libraries make the native tables and symbols to read).  The parent
prints "ready N" once every process has its threads running."""
import argparse
import os
import sys
import threading
import time


def child(rank, nthreads, torch, ready_w):
    if torch:
        import torch  # noqa: F401
    ev = threading.Event()
    for i in range(nthreads - 1):
        threading.Thread(target=lambda: ev.wait(), name="waiter%d" % i, daemon=True).start()  # THREAD-WAIT
    os.write(ready_w, b"x")
    time.sleep(3600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=40)
    ap.add_argument("--torch", action="store_true")
    a = ap.parse_args()
    r, w = os.pipe()
    os.set_inheritable(w, True)
    for rank in range(a.procs):
        if os.fork() == 0:
            os.environ["RANK"] = str(rank)
            os.environ["WORLD_SIZE"] = str(a.procs)
            os.execv(sys.executable, [sys.executable, __file__, "--child", str(rank),
                                      str(a.threads), str(int(a.torch)), str(w)])
    got = 0
    while got < a.procs:
        got += len(os.read(r, 64))
    print("ready", a.procs, flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5]))
    else:
        main()
