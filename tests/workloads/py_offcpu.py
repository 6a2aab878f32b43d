# Off-CPU workloads for tests/integration/t_offcpu_*.sh.  Each mode measures
# its own ground truth and prints it as JSON on stdout (one object, tids are
# native thread ids):
#   waits    threads in time.sleep, a threading.Lock wait and select.select,
#            each timing its waits with perf_counter:
#            {"waits": {name: {"tid", "waited_s", "calls"}}}
#   starved  nproc + 1 processes spinning: each reads its own
#            /proc/thread-self/schedstat around the spin:
#            {"spinners": [{"tid", "wall_s", "run_delay_s", "exec_s"}]}
#   mixed    busy/sleep threads born and ended inside the window, and a pair
#            that ping-pongs over pipes (many short blocks), each giving its
#            lifetime from its start time in /proc/thread-self/stat (clock
#            ticks since boot) to its last line (CLOCK_BOOTTIME):
#            {"threads": [{"tid", "name", "life_s"}], "napper_tid"}: the
#            napper sleeps GS_SECONDS from the start, before GS_GO
# GS_SECONDS (default 3) is the length of the measured part; GS_GO as in
# py_common.wait_for_go.
import json
import os
import select
import sys
import threading
import time

from py_common import seconds, wait_for_go

pc = time.perf_counter


def waits(secs):
    out = {}
    lock = threading.Lock()
    r, _w = os.pipe()
    end = pc() + secs

    def record(name, waited, calls):
        out[name] = {"tid": threading.get_native_id(), "waited_s": waited, "calls": calls}

    def sleeper():
        waited, calls = 0.0, 0
        while pc() < end:
            t = pc()
            time.sleep(0.05)  # SLEEP_LINE
            waited += pc() - t
            calls += 1
        record("sleeper", waited, calls)

    def holder():
        while pc() < end:
            with lock:
                time.sleep(0.1)
            time.sleep(0.005)

    def locker():
        waited, calls = 0.0, 0
        time.sleep(0.01)
        while pc() < end:
            t = pc()
            lock.acquire()  # LOCK_LINE
            waited += pc() - t
            calls += 1
            lock.release()
            time.sleep(0.02)
        record("locker", waited, calls)

    def selector():
        waited, calls = 0.0, 0
        while pc() < end:
            t = pc()
            select.select([r], [], [], 0.05)  # SELECT_LINE
            waited += pc() - t
            calls += 1
        record("selector", waited, calls)

    ts = [threading.Thread(target=f, name=f.__name__) for f in (sleeper, holder, locker, selector)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"waits": out}


def schedstat():
    with open("/proc/thread-self/schedstat") as f:
        exec_ns, delay_ns, _ = f.read().split()
    return int(exec_ns), int(delay_ns)


def spin(secs, wfd):
    e0, d0 = schedstat()
    t0 = pc()
    x = 0
    while pc() - t0 < secs:
        x += 1
    e1, d1 = schedstat()
    wall = pc() - t0
    os.write(wfd, (json.dumps({"tid": threading.get_native_id(), "wall_s": wall,
                               "run_delay_s": (d1 - d0) / 1e9, "exec_s": (e1 - e0) / 1e9})
                   + "\n").encode())


def starved(secs):
    r, w = os.pipe()
    kids = []
    for _ in range((os.cpu_count() or 1) + 1):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            spin(secs, w)
            os._exit(0)
        kids.append(pid)
    os.close(w)
    for pid in kids:
        os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        return {"spinners": [json.loads(line) for line in f if line.strip()]}


def mixed(secs):
    out = []
    lock = threading.Lock()

    def lifetime(name, body):
        # From the kernel's start time of this thread (it can wait for the
        # GIL a long while before its first line runs) to its last line.
        def run():
            with open("/proc/thread-self/stat") as f:
                born = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
            body()
            with lock:
                out.append({"tid": threading.get_native_id(), "name": name,
                            "life_s": time.clock_gettime(time.CLOCK_BOOTTIME) - born})
        return threading.Thread(target=run, name=name)

    def busy_sleep(busy, nap, span):
        def body():
            end = pc() + span
            while pc() < end:
                t = pc()
                while pc() - t < busy:
                    pass
                time.sleep(nap)
        return body

    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    span = secs * 0.8

    def ping():
        end = pc() + span
        while pc() < end:
            os.write(a_w, b"x")
            os.read(b_r, 1)
        os.write(a_w, b"q")

    def pong():
        while os.read(a_r, 1) != b"q":
            os.write(b_w, b"x")

    ts = [lifetime("busy20_nap30", busy_sleep(0.02, 0.03, span)),
          lifetime("busy5_nap1", busy_sleep(0.005, 0.001, span)),
          lifetime("busy1_nap20", busy_sleep(0.001, 0.02, span)),
          lifetime("ping", ping), lifetime("pong", pong)]
    time.sleep(secs * 0.1)  # born inside the window
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"threads": out}


def main():
    mode = sys.argv[1]
    napper = None
    if mode == "mixed":
        # asleep before a profiler attaches (and through its window when
        # that is shorter than GS_SECONDS): the "since before the window" case
        napper = threading.Thread(target=time.sleep, args=(seconds(),), daemon=True)
        napper.start()
    wait_for_go()
    res = {"waits": waits, "starved": starved, "mixed": mixed}[mode](seconds())
    if napper:
        res["napper_tid"] = napper.native_id
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
