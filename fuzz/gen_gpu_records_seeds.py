#!/usr/bin/env python3
"""Seed corpus for fuzz/fuzz_gpu_records.c: well-formed GPU record streams
(layouts of include/gpusample/records.h, GS_RECORDS_VERSION 3) that walk
every parser: stall table -> cubin -> launch -> PC batch, in both modes.

usage: fuzz/gen_gpu_records_seeds.py fuzz/corpus/gpu_records
"""
import os
import struct
import sys

V = 3  # GS_RECORDS_VERSION: the codec drops other versions, as the sampler does
CPU_SAMPLE, PC_BATCH, STALL_TABLE, CUBIN, LAUNCH, STATUS = 1, 3, 4, 5, 6, 7
ORIGIN_LAUNCH = 3  # enum gs_cpu_origin: a launch's stack says launch


def fnv(name):
    h = 0xcbf29ce484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def rec(typ, body, tgid=100, ctx=1, dev=0):
    body = struct.pack("<IIII", tgid, tgid, ctx, dev) + body
    size = 16 + len(body)
    pad = (-size) % 8
    return struct.pack("<HHIQ", typ, V, size + pad, 1000) + body + b"\0" * pad


def stall_table(period=18, mode=1):
    names = [(14, 0, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
             (15, 1, "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"),
             (3, 0, "smsp__pcsamp_warps_issue_stalled_wait"),
             (0, 2, "smsp__pcsamp_sample_count")]
    body = struct.pack("<IIIIII", len(names), period, mode, 132, 1980000, 0)
    for idx, fl, n in names:
        body += struct.pack("<II", idx, fl) + n.encode().ljust(128, b"\0")
    return rec(STALL_TABLE, body)


def cubin(crc, addr=0, size=0):
    return rec(CUBIN, struct.pack("<QQQII", crc, addr, size, 7, 0))


def cpu_sample(user, py, tgid=100):
    """struct gs_cpu_sample as BPF appends it to a launch: no kernel frames,
    user ips, then Python frames (code, lasti, check, flags)."""
    frames = b"".join(struct.pack("<Q", ip) for ip in user)
    frames += b"".join(struct.pack("<QIHH", code, lasti, 0, 0) for code, lasti in py)
    head = struct.pack("<IIIHBBHHHH", tgid, tgid, 0, 0, 0, len(user), len(py), 0,
                       ORIGIN_LAUNCH, 0) + b"python3".ljust(16, b"\0")
    return struct.pack("<HHIQ", CPU_SAMPLE, V, 16 + len(head) + len(frames), 1000) + head + frames


def launch(name, corr):
    fixed = rec(LAUNCH, struct.pack("<QIIIIQ", fnv(name), corr, 307, 1, corr, corr))
    stack = cpu_sample([0x401000 + corr, 0x402000], [(0x7f0000001000, 8)])
    size = len(fixed) + len(stack)
    return fixed[:4] + struct.pack("<I", size) + fixed[8:] + stack


def batch(crc, pcs, serialized):
    names = b""
    offs = {}
    for _, n, _, _ in pcs:
        if n not in offs:
            offs[n] = len(names)
            names += n.encode() + b"\0"
    counts = b""
    pcb = b""
    k = 0
    for off, n, corr, cnts in pcs:
        pcb += struct.pack("<QQQIIIHH", crc, off, fnv(n), 0, corr, offs[n], k, len(cnts))
        for idx, s in cnts:
            counts += struct.pack("<II", idx, s)
            k += 1
    flags = (1 if serialized else 0) | 4 | 8
    body = struct.pack("<QQQQIIIIII", 1, 500, 2, 9, len(pcs), k, len(names), flags, 0, 18)
    return rec(PC_BATCH, body + pcb + counts + names)


def status(state, msg):
    body = struct.pack("<IIiIIIII", state, 0, 0, 24, 1, 1, 1, 1) + struct.pack("<QQQQQQQ", *[1] * 7)
    return rec(STATUS, body + msg.encode().ljust(256, b"\0"), ctx=0, dev=0xFFFFFFFF)


def main(out):
    os.makedirs(out, exist_ok=True)
    pcs = [(0x80, "axpy", 42, [(14, 5), (15, 2), (0, 7)]),
           (0x90, "_Z10reduce_sumPKfPfi", 43, [(3, 4)]),
           (0x0, "_Z5scaleIfEvPT_S0_i", 0, [(99, 1)])]
    seeds = {
        "continuous": status(1, "armed") + stall_table() + cubin(0x77) + launch("axpy", 42) +
        batch(0x77, pcs, False) + status(2, "disarmed"),
        "serialized": stall_table(mode=2) + launch("axpy", 42) + launch("_Z10reduce_sumPKfPfi", 43) +
        batch(0x77, pcs, True),
        "cubin_unreadable": cubin(0x1234, addr=0x1000, size=4096) + batch(0x1234, pcs[:1], False),
        "status_only": status(3, "GPU sampling off: insufficient privileges"),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


main(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/gpu_records")
