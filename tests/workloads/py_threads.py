# Three threads: two busy in C with the GIL released (hashlib, zlib on large
# buffers), one in pure Python.  Marker comments name the expected leaf lines.
import hashlib
import os
import sys
import threading
import time
import zlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_common import wait_for_go, seconds  # noqa: E402

BUF = os.urandom(8 << 20)


def hash_worker(deadline):
    while time.time() < deadline:
        hashlib.sha256(BUF).digest()  # HASH_LINE


def zlib_worker(deadline):
    while time.time() < deadline:
        zlib.compress(BUF, 6)  # ZLIB_LINE


def py_worker(deadline):
    x = 0
    while time.time() < deadline:
        for i in range(20000): x += i  # PY_LINE


def main():
    wait_for_go()
    deadline = time.time() + seconds()
    ts = [threading.Thread(target=f, args=(deadline,)) for f in (hash_worker, zlib_worker, py_worker)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


main()
