#!/bin/bash
# Wall-clock "where the time goes", issue 11 done-when (2): a collate_fn
# that sleeps 20 ms per batch, with num_workers=0 (the main thread makes
# every batch itself) and num_workers=2; `gpusample -p PID -d 4` on the
# running loop.  For both, the report's input wait for the main thread (its
# row plus the CPU starvation "while in: input wait") is within 5 points of the share of the profile's window spent in next(loader), timed
# in-process, and the verdict says input-bound with the workers it saw.  Fails (does not skip)
# when the profile has no off-CPU data.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
for w in 0 2; do
	wall_attach "c$w" collate --workers "$w" --collate-ms 20
	wall_check "c$w" "input wait" "next(loader), num_workers=$w,"
	grep -q "^Verdict: input wait .*input-bound" "$T/c$w.report" || fail "num_workers=$w: the verdict does not say input-bound"
	seen="its 2 DataLoader worker processes: "
	[ "$w" = 0 ] && seen="no DataLoader worker process seen"
	grep -q "^Verdict: .*$seen" "$T/c$w.report" || fail "num_workers=$w: the verdict does not say \"$seen\""
done
ok "collate_fn sleeping 20 ms: input wait within 5 points of the in-process figure with 0 and 2 workers"
