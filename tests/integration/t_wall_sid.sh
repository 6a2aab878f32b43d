#!/bin/bash
# Wall-clock split on the modern stack, issue 22 (3): py_wall.py's DataLoader
# loop (2 workers), run by python3.14 with Debian sid's PyTorch 2.x in the
# sid root (python_lib.sh: sid_cmd; the job in its own mount namespace and
# chroot, gpusample outside), `gpusample -p PID -d 4`:
#  - input-bound (a Dataset that sleeps 4 ms per item, a 4 ms on-CPU step,
#    as t_wall_input_dataset.sh): the main thread's input wait is within 5
#    points of the share of the loop spent in next(loader), timed
#    in-process, and the verdict says input-bound;
#  - compute-bound (items free, a 20 ms on-CPU step): its compute (with
#    the starvation while computing) is within 5 points of the share spent
#    outside next(loader), and the verdict says CPU-bound, or CPU-starved
#    where the machine's other load keeps the thread waiting for a CPU
#    (seen: 49% runnable on a shared 2-core host, which is then the right
#    verdict).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
sid_need
WALL_PY=$(sid_cmd python3.14)
"$WALL_PY" -c 'import torch; assert torch.__version__ >= "2", torch.__version__' ||
	fail "the sid root's python3.14 cannot import PyTorch 2.x"
wall_attach ds dataset --workers 2 --item-ms 4
wall_check ds "input wait" "next(loader)"
grep -q "^Verdict: input wait .*input-bound" "$T/ds.report" || fail "the verdict does not say input-bound"
input="input wait ${got}% vs ${truth}%"

wall_attach cpu dataset --workers 2 --item-ms 0 --step-ms 20
inside=$(window_pct cpu) || fail "cpu: no in-process figure for the profile's window"
truth=$(awk -v a="$inside" 'BEGIN { printf "%.1f", 100 - a }')
got=$(wall_in cpu compute)
echo "cpu: in-process outside next(loader) ${truth}% of the profile's window; report: compute ${got}% with the starvation while in it"
within "$got" "$truth" 5 || fail "cpu: compute ${got}% is not within 5 points of ${truth}%"
grep -qE "^Verdict: (compute .*CPU-bound|CPU starvation .*CPU-starved)" "$T/cpu.report" ||
	fail "the verdict says neither CPU-bound nor CPU-starved"
ok "python3.14 / PyTorch 2.x: $input, compute ${got}% vs ${truth}% in-process; verdict: $(sed -n 's/^Verdict: \([a-zA-Z ]*\) [0-9].*/\1/p' "$T/cpu.report")"
