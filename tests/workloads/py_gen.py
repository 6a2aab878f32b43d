# Generator-heavy loop: sum() over a generator expression over a generator,
# so every sample has Python frames in three C-level eval activations
# (<module>..consume; <genexpr> resumed by sum(); gen resumed by <genexpr>).
# Marker comments name the lines t_python_gen.sh expects.
import os
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_common import wait_for_go, seconds  # noqa: E402


def gen(n):
    for i in range(n):
        yield i * i % 7  # GEN_LINE


def consume(deadline):
    # CPU seconds (process_time), not wall: a loaded machine still yields
    # the same number of samples
    x = 0
    while time.process_time() < deadline:
        x += sum(v + 1 for v in gen(5000))  # SUM_LINE
    return x


def main():
    wait_for_go()
    consume(time.process_time() + seconds())  # CALL_CONSUME


main()  # CALL_MAIN
