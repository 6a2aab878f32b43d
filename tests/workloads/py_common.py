# Shared by the py_*.py workloads: wait for the profiler before working.
import os
import time


def wait_for_go():
    """Block until the file named by GS_GO exists (the test creates it once
    the profiler is attached); return at once when GS_GO is unset."""
    path = os.environ.get("GS_GO")
    deadline = time.time() + 30
    while path and not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.02)


def seconds():
    return float(os.environ.get("GS_SECONDS", "3"))
