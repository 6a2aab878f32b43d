#!/bin/bash
# Issue 25 item 1: CPU starvation caused by the neighbours.  3 x nproc CPU
# burners outside the job (not its children, comm "gsburner") hold the
# machine; the job is one busy Python thread.  The report names the outside
# process (with the pid of its busiest copy and its command line) and how
# many cores it took, and gives no fewer-threads advice
# (the job runs 1 busy thread).  t_wall_starved is the other side: a job
# whose own children oversubscribe the cores keeps that advice.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
cp /usr/bin/yes "$T/gsburner" || fail "cannot copy yes"
burners=()
for _ in $(seq $((3 * $(nproc)))); do "$T/gsburner" >/dev/null & burners+=($!); done
sleep 0.5
"$GS" -o "$T/out" -- /usr/bin/python3 -c '
import time
t = time.time()
while time.time() - t < 3: sum(i * i for i in range(1000))
' >"$T/report" 2>"$T/gs.err" || fail "gpusample failed: $(cat "$T/gs.err")"
kill "${burners[@]}"
"$GS" report "$T/out.pb.gz" > "$T/report2" || fail "report from the file failed"
cmp -s <(grep -v '^  duration' "$T/report") <(grep -v '^  duration' "$T/report2") || true
pprof -comments "$T/out.pb.gz" | grep '^machine CPU' || fail "no machine CPU comment"
v=$(grep '^Verdict' "$T/report2")
echo "$v"
[[ "$v" == "Verdict: CPU starvation"* ]] || fail "starvation is not the verdict (the test proves nothing): $v"
[[ "$v" == *"CPU-starved by other processes on this machine"*"gsburner"* ]] ||
	fail "the verdict does not blame the outside process: $v"
[[ "$v" == *"ran 1 busy thread;"* ]] || fail "the job's busy-thread count is not 1: $v"
echo "$v" | grep -Eq "use fewer threads|num_workers" && fail "fewer-threads advice given: $v"
# named with a pid and the command line: another gpusample, or one of many
# pythons, is found at once
most=$(sed -n 's/.*gsburner [0-9.]* ([0-9]* processes; most pid \([0-9]*\): \([^)]*\)).*/\1 \2/p' <<< "$v")
read -r mpid mcmd <<< "$most"
[ -n "$mpid" ] || fail "the verdict names no pid of the burners: $v"
[[ " ${burners[*]} " == *" $mpid "* ]] || fail "pid $mpid named is no burner (${burners[*]})"
[ "$mcmd" = "$T/gsburner" ] || fail "the burner's command is not named ($mcmd): $v"
ok "starvation attributed to gsburner, no fewer-threads advice"
