# Recursion through C re-entry: sorted(key=...), map(lambda ...) and
# __getattr__ alternate down to DEPTH (argv[1]), then spin() burns CPU.
# spin() first writes the stack CPython itself reports (traceback), leaf
# last, as "name line" lines to the file named by argv[2], for the test.
import os
import sys
import time
import traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_common import wait_for_go, seconds  # noqa: E402

sys.setrecursionlimit(10000)


def spin():
    with open(sys.argv[2], "w") as f:
        for fr in traceback.extract_stack()[:-1]:
            f.write("%s %d\n" % (fr.name, fr.lineno))
    deadline = time.time() + seconds()
    x = 0
    while time.time() < deadline:
        for i in range(20000): x += i  # SPIN_LINE
    return x


class Lazy:
    def __init__(self, n):
        self.n = n

    def __getattr__(self, name):
        return rec(self.n - 1)


def rec(n):
    if n == 0:
        return spin()
    k = n % 3
    if k == 0:
        return sorted([1], key=lambda x: rec(n - 1))[0]
    if k == 1:
        return list(map(lambda x: rec(n - 1), [0]))[0]
    return Lazy(n).value


def main():
    wait_for_go()
    rec(int(sys.argv[1]))


main()
