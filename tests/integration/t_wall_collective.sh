#!/bin/bash
# Wall-clock "where the time goes", the collective-wait category (issue
# 14): two real torch.distributed gloo ranks all_reduce in a loop; rank 0
# computes 10 ms and rank 1 sleeps 30 ms before each step, so rank 0 waits
# for it about 2/3 of the time.  `gpusample -p
# RANK0 -d 4`: rank 0's collective wait (its row plus the CPU starvation
# "while in: collective wait") is within 5 points of the share of the profile's window
# spent in all_reduce, timed in-process, its top stack goes through
# torch.distributed, and the verdict says collective-bound.  Fails (does not
# skip) without off-CPU data.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
wall_attach ar collective
wall_check ar "collective wait" "all_reduce (rank 0)"
grep -q "^    collective wait .*all_reduce (distributed_c10d.py:" "$T/ar.report" || fail "the top stack lacks torch.distributed's all_reduce"
grep -q "^Verdict: collective wait .*collective-bound" "$T/ar.report" || fail "the verdict does not say collective-bound"
ok "gloo all_reduce waiting for a straggler: collective wait ${got}% vs ${truth}% in-process"
