#!/usr/bin/python3
"""Start the ranks of a torch.distributed script on this host as torchrun
does (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
MASTER_PORT in each rank's environment), without importing torch.

Debian sid's PyTorch 2.14 torchrun cannot start a job: its agent's
TCPStore asks for libuv, which that build lacks, whatever USE_LIBUV says
(the static and c10d rendezvous both construct it with the default).  The
ranks' own env:// rendezvous honours USE_LIBUV=0, which this sets.

usage: ddp_launch.py --nproc N --port PORT SCRIPT [ARGS...]
Exit status: the first failing rank's, else 0.
"""
import argparse
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    ranks = []
    for r in range(a.nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc),
                   LOCAL_WORLD_SIZE=str(a.nproc), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(a.port), USE_LIBUV="0")
        ranks.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
    rc = 0
    for p in ranks:
        p.wait()
        rc = rc or p.returncode
    sys.exit(rc)


if __name__ == "__main__":
    main()
