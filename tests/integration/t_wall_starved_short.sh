#!/bin/bash
# gs-test-timeout: 60
# CPU starvation by short-lived processes outside the job: nproc loops of
# CPU burners that live 0.3 s each (comm "gsburnshort", started and exited
# inside the window, so in neither /proc snapshot) hold the machine while
# the job runs one busy Python thread.  The "machine CPU" comment counts
# them ("short-lived processes", from /proc/stat less the processes alive
# at the end and the job's own exited ones): at least a quarter core per
# loop there, and half a core per loop outside the job in all.  Before, it missed them (0.86 cores for two loops on 2
# CPUs).  And the verdict never calls one busy thread oversubscription.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
cp /usr/bin/yes "$T/gsburnshort" || fail "cannot copy yes"
n=$(nproc)
loops=()
for _ in $(seq "$n"); do
	(while [ ! -e "$T/stop" ]; do timeout 0.3 "$T/gsburnshort" >/dev/null; done) &
	loops+=($!)
done
sleep 0.5
"$GS" -o "$T/out" -q --format pprof -- /usr/bin/python3 -c '
import time
t = time.time()
while time.time() - t < 4: sum(i * i for i in range(1000))
' 2>"$T/gs.err" || { touch "$T/stop"; fail "gpusample failed: $(cat "$T/gs.err")"; }
touch "$T/stop"
wait "${loops[@]}"
m=$(pprof -comments "$T/out.pb.gz" | grep '^machine CPU') || fail "no machine CPU comment"
echo "$m"
out=$(sed -n 's/.*outside the job \([0-9.]*\) cores.*/\1/p' <<<"$m")
awk -v o="$out" -v n="$n" 'BEGIN { exit !(o >= 0.5 * n) }' ||
	fail "outside the job $out cores: the short-lived burners ($n loops) are missing"
short=$(sed -n 's/.*short-lived processes \([0-9.]*\).*/\1/p' <<<"$m")
[ -n "$short" ] || fail "the short-lived processes are not named: $m"
awk -v o="$short" -v n="$n" 'BEGIN { exit !(o >= 0.25 * n) }' ||
	fail "short-lived processes $short cores: under a quarter core per loop ($n loops)"
ok "short-lived burners counted outside the job ($out cores, $n loops)"
v=$("$GS" report "$T/out.pb.gz" | grep '^Verdict') || fail "no verdict"
echo "$v"
[[ "$v" == *oversubscribes* ]] && fail "one busy thread called oversubscription: $v"
ok "no oversubscription verdict for one busy thread"
