#!/bin/bash
# Wall-clock input wait on the modern stack, issue 22 (3): the dataset-bound
# DataLoader loop of t_wall_input_dataset.sh (2 workers, a Dataset that
# sleeps 4 ms per item, a 4 ms on-CPU step), run by python3.14 with Debian
# sid's PyTorch 2.x in the sid root (python_lib.sh: sid_cmd; the job in its
# own mount namespace and chroot, gpusample outside), `gpusample -p PID -d 4`.
# The main thread's input wait is within 5 points of the share of the loop
# spent in next(loader), timed in-process, and the verdict says input-bound.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
sid_need
WALL_PY=$(sid_cmd python3.14)
"$WALL_PY" -c 'import torch, sys; assert torch.__version__ >= "2", torch.__version__' ||
	fail "the sid root's python3.14 cannot import PyTorch 2.x"
wall_attach ds dataset --workers 2 --item-ms 4
wall_check ds "input wait" "next(loader)"
grep -q "^Verdict: input wait .*input-bound" "$T/ds.report" || fail "the verdict does not say input-bound"
ok "python3.14 / PyTorch 2.x: input wait ${got}% vs ${truth}% in-process; verdict input-bound"
