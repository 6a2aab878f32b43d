#!/bin/bash
# Wall-clock "where the time goes", issue 11 done-when (3), the report's
# side: the main thread spins beside nproc + 1 spinning processes, so it
# waits for a CPU.  Its CPU starvation share in the report is within 5
# points of the run-queue wait it measured from /proc/thread-self/schedstat
# over the profile's window, and the verdict says CPU-starved, never blocked.
# `gpusample -p PID -d 4` on the running loop.  Fails (does not skip)
# without off-CPU data.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/wall_lib.sh"
py_need_gs
wall_attach st starve
truth=$(window_pct st) || fail "no in-process figure for the profile's window"
got=$(wall_pct st "CPU starvation")
echo "schedstat run delay ${truth}% of the profile's window; report: CPU starvation ${got}%"
awk -v t="$truth" 'BEGIN { exit !(t >= 10) }' || fail "the main thread was not starved (${truth}%): the test proves nothing"
within "$got" "$truth" 5 || fail "CPU starvation ${got}% is not within 5 points of ${truth}%"
grep -q "^Verdict: CPU starvation .*CPU-starved" "$T/st.report" || fail "the verdict does not say CPU-starved"
grep "^Verdict:" "$T/st.report" | grep -Eq "is blocked|mostly blocked|other blocking" && fail "the verdict calls starvation blocked"
# Its own children hold the cores: the job oversubscribes them, and only
# then is the fewer-threads advice given (issue 25).
grep -q "^Verdict: CPU starvation .*the job oversubscribes its cores: .*use fewer threads" "$T/st.report" ||
	fail "the verdict does not say the job oversubscribes its cores: $(grep '^Verdict' "$T/st.report")"
ok "starved main thread: ${got}% vs schedstat ${truth}%, verdict CPU-starved"
