"""An input-bound loop for the timeline tests: per step the main thread
makes a burst of short waits (40 sleeps of 0.1 ms: more switch-outs than
off-CPU stacks are taken in one window), then waits about 150 ms on a pipe
that a feeder thread fills, the way a training loop waits on its
DataLoader.  argv[1]: seconds to run.  Prints JSON: the main thread's tid
and how long it waited on the pipe."""
import json
import os
import sys
import threading
import time

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
r, w = os.pipe()


def feeder():
    while True:
        time.sleep(0.15)
        os.write(w, b"x")


threading.Thread(target=feeder, name="feeder", daemon=True).start()
end = time.monotonic() + secs
waited, steps = 0.0, 0
while time.monotonic() < end:
    for _ in range(40):
        time.sleep(0.0001)
    t = time.perf_counter()
    os.read(r, 1)
    waited += time.perf_counter() - t
    steps += 1
print(json.dumps({"tid": threading.get_native_id(), "waited_s": waited, "steps": steps}))
