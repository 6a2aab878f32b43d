#!/bin/bash
# gpusample dump: a Python job whose two threads are deadlocked on two
# locks.  The dump names both waits with their file:line (Python frames),
# merged with the native frames (the lock acquire in libpython) and the
# kernel's futex wait, with the thread state; it runs without stopping or
# signalling the target: a poller sees no thread in the stopped/traced
# state while the dump runs, the job's every-signal handlers see nothing,
# and its own 10 ms timing loop sees no gap of a stop's size.  The dump's
# time is printed and bounded.  Debian's python3 (3.11) and the sid root's
# python3.14; the /proc fallback (no task iterator) on python3 too.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
f=$PYWL/py_deadlock.py
la=$(marker_line "$f" DEADLOCK-A)
lb=$(marker_line "$f" DEADLOCK-B)
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
sid_need
PYS=(/usr/bin/python3 "$(sid_cmd python3.14)")

# poll_states PID OUT: every thread's state letter, about every 2 ms, until killed
poll_states() {
	/usr/bin/python3 - "$1" "$2" <<'EOS' &
import os, sys, time
pid, out = sys.argv[1], sys.argv[2]
seen = set()
while True:
    try:
        for tid in os.listdir("/proc/%s/task" % pid):
            with open("/proc/%s/task/%s/stat" % (pid, tid)) as f:
                seen.add(f.read().rsplit(")", 1)[1].split()[0])
    except OSError:
        pass
    with open(out + ".tmp", "w") as f:
        f.write("".join(sorted(seen)) + "\n")
    os.replace(out + ".tmp", out)
    time.sleep(0.002)
EOS
	poller=$!
}

run_one() { # PY LABEL [env]
	local py=$1 label=$2 gap=$T/gap.$RANDOM
	shift 2
	"$py" "$f" "$gap" > "$T/wl.out" 2>&1 &
	local pid=$!
	for _ in $(seq 300); do grep -q deadlocked "$T/wl.out" && [ -s "$gap" ] && break; sleep 0.1; done
	grep -q deadlocked "$T/wl.out" || fail "$label: workload did not deadlock: $(cat "$T/wl.out")"
	sleep 0.3
	rm -f "$T/states"
	poll_states "$pid" "$T/states"
	for _ in $(seq 100); do [ -s "$T/states" ] && break; sleep 0.05; done
	local before
	before=$(cat "$gap")
	env "$@" "$GS" dump -p "$pid" > "$T/dump.txt" 2> "$T/dump.err" ||
		{ cat "$T/dump.err"; fail "$label: gpusample dump failed"; }
	sleep 0.2
	kill "$poller"; wait "$poller" 2>/dev/null
	local after
	after=$(cat "$gap")
	kill -KILL "$pid"; wait "$pid" 2>/dev/null
	echo "--- $label"; head -1 "$T/dump.txt"
	if [ -z "${PROC_ONLY:-}" ]; then
		grep -Eq "take_a_then_b \(.*py_deadlock.py:$la\)" "$T/dump.txt" ||
			{ cat "$T/dump.txt"; fail "$label: thread A's wait at py_deadlock.py:$la not in the dump"; }
		grep -Eq "take_b_then_a \(.*py_deadlock.py:$lb\)" "$T/dump.txt" ||
			{ cat "$T/dump.txt"; fail "$label: thread B's wait at py_deadlock.py:$lb not in the dump"; }
	fi
	[ "$(grep -c '"[^"]*" [a-z_]*, blocked in futex' "$T/dump.txt")" -ge 2 ] ||
		{ cat "$T/dump.txt"; fail "$label: the two lock waits are not shown blocked in a futex wait"; }
	# native frames between the kernel's and the Python ones: the
	# interpreter's lock wait (3.11: a semaphore; 3.13+: its parking lot)
	grep -Eq "PyThread_acquire_lock|_PySemaphore_Wait" "$T/dump.txt" ||
		{ cat "$T/dump.txt"; fail "$label: no native frames of the lock acquire"; }
	if [ -z "${PROC_ONLY:-}" ]; then
		grep -q "timing_loop (.*py_deadlock.py" "$T/dump.txt" ||
			{ cat "$T/dump.txt"; fail "$label: the main thread's Python stack is missing"; }
	else
		# the two deadlocked threads' walks reach their thread's start
		[ "$(grep -c "clone3 (" "$T/dump.txt")" -ge 2 ] ||
			{ cat "$T/dump.txt"; fail "$label: native walk from /proc stopped short"; }
	fi
	# never stopped, never signalled, no gap of a stop's size
	grep -q '[tT]' "$T/states" && fail "$label: a thread was seen stopped/traced ($(cat "$T/states"))"
	[ -s "$T/states" ] || fail "$label: the state poller saw nothing"
	[ -e "$gap.signals" ] && fail "$label: the target got signals: $(tr '\n' ' ' < "$gap.signals")"
	echo "$label: thread states seen during the dump: $(cat "$T/states"); worst tick gap ${before}s before, ${after}s after"
	awk -v a="$after" 'BEGIN { exit !(a < 1.0) }' || fail "$label: the job's timing loop saw a ${after}s gap"
	secs=$(sed -n 's/.* threads\? in \([0-9.]*\) s .*/\1/p' "$T/dump.txt" | head -1)
	[ -n "$secs" ] || fail "$label: no time in the header: $(head -1 "$T/dump.txt")"
	awk -v s="$secs" 'BEGIN { exit !(s < 5.0) }' || fail "$label: the dump took $secs s"
}

run_one /usr/bin/python3 "python3 (task iterator)"
grep -q "BPF task iterator" "$T/dump.txt" || fail "the task iterator was not used: $(head -1 "$T/dump.txt")"
run_one "${PYS[1]}" "sid python3.14"
# the iterator that reads the registers at the top of the kernel stack
# (kernels before bpf_task_pt_regs, 5.10-5.14)
run_one /usr/bin/python3 "python3 (compat iterator)" GS_BPF_COMPAT=1
# The /proc fallback (a kernel without the task iterator): states, kernel
# function names, the native stack from the system call's sp and pc; no
# Python frames there (no fsbase), so the native and kernel parts only.
PROC_ONLY=1 run_one /usr/bin/python3 "python3 (/proc fallback)" GS_DUMP_PROC=1
grep -q "from the /proc/" "$T/dump.txt" || fail "the fallback was not used: $(head -1 "$T/dump.txt")"
# A wrapper (timeout) is not the job: the Python process it runs is
# "main", the wrapper "other"; the glance lines name each deadlocked
# thread's lock wait at its line.
timeout 120 /usr/bin/python3 "$f" "$T/gap.w" > "$T/wl.out" 2>&1 &
w=$!
for _ in $(seq 300); do grep -q deadlocked "$T/wl.out" && break; sleep 0.1; done
"$GS" dump -p "$w" -o "$T/hang" > "$T/dump.txt" 2> "$T/dump.err" || { cat "$T/dump.err"; fail "gpusample dump of timeout failed"; }
kill "$w"; wait "$w" 2>/dev/null
echo "--- wrapper"; grep -E '^process|^  [0-9]' "$T/dump.txt"
grep -q "^process $w \"timeout\" other" "$T/dump.txt" || { cat "$T/dump.txt"; fail "the timeout wrapper is not 'other'"; }
grep -Eq '^process [0-9]+ "python3[^"]*" main' "$T/dump.txt" || { cat "$T/dump.txt"; fail "the Python process under timeout is not 'main'"; }
for fn_line in "take_a_then_b .*py_deadlock.py:$la" "take_b_then_a .*py_deadlock.py:$lb"; do
	grep -Eq "^  [0-9]+ +[0-9]+ +[^ ]+ +[a-z_]+ +blocked +lock +${fn_line%% *} \(${fn_line#* }\)" "$T/dump.txt" ||
		{ cat "$T/dump.txt"; fail "no glance line: blocked on a lock in ${fn_line%% *}"; }
done
# the report of the dump names the threads' places in the job's own code
"$GS" report "$T/hang.pb.gz" > "$T/report.txt" 2>&1 || { cat "$T/report.txt"; fail "report of the dump failed"; }
sed -n '/^Threads by their innermost frame/,/^$/p' "$T/report.txt"
for fn_line in "take_a_then_b py_deadlock.py:$la" "take_b_then_a py_deadlock.py:$lb"; do
	sed -n '/^Threads by their innermost frame/,/^$/p' "$T/report.txt" |
		grep -Eq "^ +1 +[0-9.]+%  ${fn_line%% *} \(.*${fn_line#* }\)" ||
		{ cat "$T/report.txt"; fail "report of the dump: no row for ${fn_line%% *}"; }
done
ok "deadlocked threads dumped with their lines on ${#PYS[@]} interpreters, target never stopped or signalled"
