#!/bin/bash
# Sampling: threads asleep since before `gpusample -p` starts get their
# whole stack at the window's start (the dump engine, dump/dump.h), not the
# "[off-CPU since before the window: user stack not sampled]" placeholder
# with kernel functions only (still used for a thread that ran between the
# walk and the window's start): the two deadlocked threads of py_deadlock.py,
# which never run during the window, show in the profile at their lock
# lines (Python frames), on Debian's python3 (3.11) and the sid root's
# python3.14.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
f=$PYWL/py_deadlock.py
la=$(marker_line "$f" "# DEADLOCK-A")
lb=$(marker_line "$f" "# DEADLOCK-B")
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
sid_need
for py in /usr/bin/python3 "$(sid_cmd python3.14)"; do
	"$py" "$f" "$T/gap" > "$T/wl.out" 2>&1 &
	pid=$!
	for _ in $(seq 300); do grep -q deadlocked "$T/wl.out" && break; sleep 0.1; done
	grep -q deadlocked "$T/wl.out" || fail "$py: workload did not deadlock: $(cat "$T/wl.out")"
	gs_start -p "$pid" -d 1 -o "$T/w" -q --format pprof
	gs_wait
	kill -KILL "$pid"; wait "$pid" 2>/dev/null
	# wall time (their samples are off-CPU ones), as go tool pprof reads it
	pprof_stacks "$T/w.pb.gz" -lines -sample_index=wall > "$T/w.txt" ||
		fail "$py: go tool pprof: $(cat "$T/pprof.err")"
	for w in "take_a_then_b .*py_deadlock.py:$la" "take_b_then_a .*py_deadlock.py:$lb"; do
		grep -q "thread_state=blocked.*	.*futex.*;$w;" "$T/w.txt" ||
			{ cut -f3 "$T/w.txt" | cut -c1-300; fail "$py: $w not in a blocked stack of the profile"; }
	done
	# their waits (a thread that ran between the walk and the window's
	# start, the main thread's timing loop, rightly falls back to it)
	for tid in $(grep "take_[ab]_then_[ab] " "$T/w.txt" | grep -o "tid=[0-9]*" | sort -u); do
		grep "$tid	" "$T/w.txt" | grep -q "off-CPU since before the window" &&
			{ grep "$tid	" "$T/w.txt"; fail "$py: the placeholder is still on $tid"; }
	done
	echo "$py: both deadlocked threads at their lines, $(grep -c "take_[ab]_then_[ab] " "$T/w.txt") stacks"
done
ok "threads asleep before the window have their Python stacks"
