# Known call chain: <module> -> main -> Worker.run -> inner -> busy loop.
# Marker comments name the lines the test expects (t_python_chain.sh greps
# them), so editing this file cannot silently break the expectations.
import os
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_common import wait_for_go, seconds  # noqa: E402


def inner(deadline):
    x = 0
    while time.time() < deadline:
        for i in range(20000): x += i * i  # LOOP_LINE
    return x


class Worker:
    def run(self, secs):
        return inner(time.time() + secs)  # CALL_INNER


def main():
    wait_for_go()
    Worker().run(seconds())  # CALL_RUN


main()  # CALL_MAIN
