"""Two threads deadlocked on two locks (for `gpusample dump`).

Thread A takes lock_a then wants lock_b; thread B takes lock_b then wants
lock_a; each waits at a line the test looks for.  The main thread keeps a
timing loop: it writes the largest gap between two 10 ms ticks to the file
argv[1] at every tick, so a dump that stopped the process shows as a gap.
Every catchable signal but SIGTERM gets a handler that writes its number
to argv[1] + ".signals": a dump must leave that file absent.
"""
import os
import signal
import sys
import threading
import time


def note_signal(num, frame):
    with open(sys.argv[1] + ".signals", "a") as f:
        f.write("%d\n" % num)


for sig in signal.valid_signals():
    if sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
        continue
    try:
        signal.signal(sig, note_signal)
    except (OSError, ValueError, RuntimeError):
        pass

lock_a = threading.Lock()
lock_b = threading.Lock()
both_held = threading.Barrier(3)


def take_a_then_b():
    with lock_a:
        both_held.wait()
        with lock_b:  # DEADLOCK-A
            pass


def take_b_then_a():
    with lock_b:
        both_held.wait()
        with lock_a:  # DEADLOCK-B
            pass


def timing_loop(path):
    last = time.monotonic()
    worst = 0.0
    while True:
        time.sleep(0.01)
        now = time.monotonic()
        worst = max(worst, now - last)
        last = now
        with open(path + ".tmp", "w") as f:
            f.write("%.6f\n" % worst)
        os.replace(path + ".tmp", path)


def main():
    threading.Thread(target=take_a_then_b, name="taker_a", daemon=True).start()
    threading.Thread(target=take_b_then_a, name="taker_b", daemon=True).start()
    both_held.wait()
    print("deadlocked", flush=True)
    timing_loop(sys.argv[1])


if __name__ == "__main__":
    main()
