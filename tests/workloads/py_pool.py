# multiprocessing spawn Pool with maxtasksperchild=1: every task runs in a
# fresh, short-lived worker (exec of python, imports, one task, exit).
# argv: [TASKS] (default 12).  Each worker burns CPU at import time
# (import_burn, while the worker imports this file as __mp_main__) and in
# its task (pool_task).  Prints one "task PID" line per task.
import multiprocessing as mp
import os
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_common import wait_for_go  # noqa: E402


def burn(secs):
    # CPU seconds, not wall: a loaded machine still gets ~secs of samples
    x, deadline = 0, time.process_time() + secs
    while time.process_time() < deadline:
        for i in range(5000): x += i  # BURN_LINE
    return x


def import_burn():
    return burn(0.05)  # IMPORT_BURN


def pool_task(i):
    burn(0.2)  # TASK_BURN
    return os.getpid()


if __name__ == "__mp_main__":
    import_burn()  # AT_IMPORT


def main():
    wait_for_go()
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for pid in pool.map(pool_task, range(tasks), chunksize=1):
            print("task", pid, flush=True)


if __name__ == "__main__":
    main()
