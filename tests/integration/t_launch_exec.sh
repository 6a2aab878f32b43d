#!/bin/bash
# Launch mode profiles the command from its exec: the forked process runs
# gpusample's own code until then (environment, user switch), and those
# samples carried gpusample's name (3.5 ms of 6 ms at 20 kHz for `true`;
# once the report's Threads table named a torch job's main thread
# "gpusample"; off-CPU, the command's wait to be let go was its first
# blocked stack).  The Threads table names a thread by its last name: a shell
# that execs python is python.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
for i in 1 2 3 4 5 6; do
	"$GS" -F 20000 -q -o "$T/t$i" --format pprof -- true 2>"$T/t$i.err" || { cat "$T/t$i.err"; fail "gpusample -- true"; }
	pprof_stacks "$T/t$i.pb.gz" > "$T/t$i.full" || fail "pprof failed: $(cat "$T/pprof.err")"
	[ -s "$T/t$i.full" ] || fail "no samples of true"
	grep -q "note: at -F 20000 the sampling takes a large share of every CPU" "$T/t$i.err" ||
		fail "no note on the cost of -F 20000: $(cat "$T/t$i.err")"
	grep -q 'thread_name=gpusample' "$T/t$i.full" && fail "run $i: samples named gpusample: $(grep -c 'thread_name=gpusample' "$T/t$i.full")"
	# its wait to be let go (a pipe read in gpusample's code, asleep when
	# the window opens) is no off-CPU stack of the command's: true reads none
	grep -q 'pipe_read' "$T/t$i.full" && fail "run $i: gpusample's wait before exec in the profile: $(grep -m1 pipe_read "$T/t$i.full")"
done
"$GS" -F 999 -o "$T/sh" --format pprof -- /bin/sh -c \
	'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec /usr/bin/python3 -c "sum(range(3 * 10**7))"' \
	>"$T/sh.report" 2>"$T/sh.err" || { cat "$T/sh.err"; fail "gpusample -- sh -c ... exec python3"; }
pprof_stacks "$T/sh.pb.gz" > "$T/sh.full" || fail "pprof failed: $(cat "$T/pprof.err")"
grep -q 'thread_name=sh' "$T/sh.full" || fail "no samples of the shell before its exec"
line=$(awk '/^Threads/ { on = 1; next } on && /^[^ ]/ { on = 0 } on && $1 == $2' "$T/sh.report" | head -1)
echo "main thread: $line"
[ "$(echo "$line" | awk '{ print $3 }')" = python3 ] || fail "the Threads table names the exec'd main thread: '$line'"
ok "no pre-exec samples; the Threads table shows the name after exec"
