# Python workload for the CFI tests: pure-Python loops (leaf in libpython's
# eval loop and object code).  Usage: python spin.py SECONDS
import sys, time

def inner(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def outer(secs):
    t = time.time()
    while time.time() - t < secs:
        inner(10000)

outer(float(sys.argv[1]))
