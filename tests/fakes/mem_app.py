#!/usr/bin/env python3
"""CUDA driver memory calls the way PyTorch's caching allocator makes them,
through the driver double (or any libcuda.so.1), from named functions so the
allocation stacks have Python frames.  No cuInit, no agent: the calls go
straight to the allocation entry points.

usage: mem_app.py LIBCUDA [--wait S]
Prints "mem_app peak=BYTES oom_rc=RC live_at_oom=BYTES" at exit.
"""
import ctypes
import sys
import time

MiB = 1 << 20
cu = ctypes.CDLL(sys.argv[1])
wait = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--wait" else 1.0
u64 = ctypes.c_ulonglong
live = {}


def alloc(n):
    p = u64()
    rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
    if rc == 0:
        live[p.value] = n
    return rc


def free(addr):
    assert cu.cuMemFree_v2(u64(addr)) == 0
    del live[addr]


def small_segments():
    for _ in range(4):  # the small pool's 2 MiB segments
        assert alloc(2 * MiB) == 0


def large_segments():
    for _ in range(3):  # large blocks rounded up to 20 MiB segments
        assert alloc(20 * MiB) == 0


def expandable():
    # expandable_segments: physical memory created and mapped
    h = u64()
    assert cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(8 * MiB), None, u64(0)) == 0
    assert cu.cuMemMap(u64(0x7e0000000000), ctypes.c_size_t(8 * MiB), ctypes.c_size_t(0), h, u64(0)) == 0
    return h


def empty_cache():
    free(max(a for a, n in live.items() if n == 20 * MiB))


def forward():
    return alloc(2 << 30)  # past the device: CUDA_ERROR_OUT_OF_MEMORY


def pinned_and_pitch():
    hp = ctypes.c_void_p()
    assert cu.cuMemAllocHost_v2(ctypes.byref(hp), ctypes.c_size_t(4 * MiB)) == 0
    assert cu.cuMemFreeHost(hp) == 0
    p, pitch = u64(), ctypes.c_size_t()
    assert cu.cuMemAllocPitch_v2(ctypes.byref(p), ctypes.byref(pitch), ctypes.c_size_t(1000),
                                 ctypes.c_size_t(16), ctypes.c_uint(4)) == 0
    assert cu.cuMemFree_v2(p) == 0


T0 = time.monotonic()


def main():
    time.sleep(wait)  # a profiler attaching meets libcuda mapped
    small_segments()
    large_segments()
    h = expandable()
    peak = sum(live.values()) + 8 * MiB
    empty_cache()
    rc = forward()
    at_oom = sum(live.values()) + 8 * MiB
    pinned_and_pitch()
    assert cu.cuMemUnmap(u64(0x7e0000000000), ctypes.c_size_t(8 * MiB)) == 0
    assert cu.cuMemRelease(h) == 0
    time.sleep(1.5)  # the profiler reads the code objects of the stacks while we live
    print(f"mem_app peak={peak} oom_rc={rc} live_at_oom={at_oom} seconds={time.monotonic() - T0:.2f}",
          flush=True)


main()
