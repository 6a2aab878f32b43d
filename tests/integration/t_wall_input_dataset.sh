#!/bin/bash
# Wall-clock "where the time goes", issue 11 done-when (1): a DataLoader
# with 2 workers over a Dataset that sleeps 4 ms per item (batches of 8),
# a 4 ms on-CPU step; `gpusample -p PID -d 4` on the running loop.  The
# report's input wait for the main thread is within 5 points of the share
# of the loop spent in next(loader), timed in-process with perf_counter,
# and the verdict says input-bound.  Fails (does not skip) when the
# profile has no off-CPU data.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
wall_attach ds dataset --workers 2 --item-ms 4
wall_check ds "input wait" "next(loader)"
grep -q "^Verdict: input wait .*input-bound" "$T/ds.report" || fail "the verdict does not say input-bound"
ok "input wait ${got}% vs ${truth}% in-process; verdict input-bound"
