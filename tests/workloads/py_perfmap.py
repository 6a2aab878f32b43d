"""Writes /tmp/perf-PID.map as oneDNN does when ONEDNN_JIT_PROFILE=2 is set,
in itself and in a forked child (a DataLoader worker's place), prints both
pids ("PARENT CHILD") and spins until SECONDS (argv[1]) have passed or a
signal ends it.  --no-child: no child."""
import os
import sys
import time


def write_map():
    if os.environ.get("ONEDNN_JIT_PROFILE") == "2":
        with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:
            f.write("7f0000000000 100 jit_fake_kernel\n")


parent = os.getpid()
child = 0 if "--no-child" in sys.argv else os.fork()
write_map()
if child:
    print(parent, child, flush=True)
elif "--no-child" in sys.argv:
    print(parent, flush=True)
end = time.monotonic() + float(sys.argv[1])
try:
    while time.monotonic() < end:
        sum(range(10000))
except KeyboardInterrupt:
    pass
