# multiprocessing with the start method argv[1] (fork, spawn, forkserver):
# two workers burn CPU in mp_work for GS_SECONDS.
# GS_READY=PREFIX (attach tests): the workers start first, each creates
# PREFIX.<pid> and then waits for GS_GO, so that the profiler can attach to
# a tree whose workers already run.
import multiprocessing as mp
import os
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_common import wait_for_go, seconds  # noqa: E402


def mp_work(secs):
    ready = os.environ.get("GS_READY")
    if ready:
        open("%s.%d" % (ready, os.getpid()), "w").close()
        wait_for_go()
    deadline = time.time() + secs
    x = 0
    while time.time() < deadline:
        for i in range(20000): x += i  # WORK_LINE
    return x


def main():
    print("root=%d" % os.getpid(), flush=True)
    if not os.environ.get("GS_READY"):
        wait_for_go()
    ctx = mp.get_context(sys.argv[1])
    ps = [ctx.Process(target=mp_work, args=(seconds(),)) for _ in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()


if __name__ == "__main__":
    main()
