# N processes (this one and N-1 children), each with M anonymous mappings
# (one region, every other page made read-only: no two neighbours merge),
# blocked until the stop file appears.
import ctypes, os, sys, time
n, m, ready, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
def mappings():
    base = libc.mmap(None, m * 4096, 3, 0x22, -1, 0)
    for i in range(0, m, 2):
        libc.mprotect(base + i * 4096, 4096, 1)
kids = []
for _ in range(n - 1):
    pid = os.fork()
    if pid == 0:
        mappings()
        open("%s.%d" % (ready, os.getpid()), "w").close()
        while not os.path.exists(stop):
            time.sleep(0.1)
        os._exit(0)
    kids.append(pid)
mappings()
open("%s.%d" % (ready, os.getpid()), "w").close()
while not os.path.exists(stop):
    time.sleep(0.1)
for k in kids:
    os.waitpid(k, 0)
