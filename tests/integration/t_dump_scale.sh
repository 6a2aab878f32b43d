#!/bin/bash
# gpusample dump in bounded time: 8 ranks (RANK in their environment) of 40
# threads each, every process with PyTorch imported (Debian's python3-torch:
# libtorch's unwind tables and symbols to read), all threads blocked.  The
# dump must see all 8 x 40 threads + the launcher, fold each rank's 39
# identical waiters into one entry at their line, and take under 2 s (its
# own figure, the best of three; the command's wall time under 4 s,
# start-up and text included).  Timing on a shared machine: rerun alone before concluding.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch missing"
f=$PYWL/py_many_threads.py
line=$(marker_line "$f" "# THREAD-WAIT")
/usr/bin/python3 "$f" --torch --procs 8 --threads 40 > "$T/wl.out" 2>&1 &
pid=$!
for _ in $(seq 1200); do grep -q '^ready 8' "$T/wl.out" && break; sleep 0.1; done
grep -q '^ready 8' "$T/wl.out" || fail "the 8 processes did not start: $(cat "$T/wl.out")"
# Three dumps, the best one counts: the first pays the page cache's cold
# reads of libtorch, and the machine is shared.
best_ms=999999 secs=999
for run in 1 2 3; do
	t0=$(date +%s%N)
	"$GS" dump -p "$pid" > "$T/dump.txt" 2> "$T/dump.err" || { cat "$T/dump.err"; fail "gpusample dump failed"; }
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
	s=$(sed -n 's/.* threads in \([0-9.]*\) s .*/\1/p' "$T/dump.txt")
	echo "run $run: $(head -1 "$T/dump.txt"); command wall time $ms ms"
	[ "$ms" -lt "$best_ms" ] && best_ms=$ms
	awk -v a="$s" -v b="$secs" 'BEGIN { exit !(a < b) }' && secs=$s
done
kill_tree "$pid"; wait "$pid" 2>/dev/null
grep -q "^gpusample dump: 9 processes, 321 threads in" "$T/dump.txt" || fail "expected 9 processes, 321 threads: $(head -1 "$T/dump.txt")"
for r in 0 1 2 3 4 5 6 7; do
	grep -q "^process [0-9]* \"python3\" main, rank $r$" "$T/dump.txt" || fail "rank $r missing"
done
[ "$(grep -c '^  39 threads "python3" other, blocked in futex' "$T/dump.txt")" -eq 8 ] ||
	{ grep -E "^process|^  [0-9]+ threads|^  thread" "$T/dump.txt"; fail "each rank's 39 waiters must fold into one entry"; }
[ "$(grep -c "^      [^ ]*<lambda> (.*py_many_threads.py:$line)" "$T/dump.txt")" -eq 8 ] ||
	{ grep -n "py_many_threads.py:$line" "$T/dump.txt"; fail "the waiters' line $line not shown per rank"; }
awk -v s="$secs" 'BEGIN { exit !(s < 2.0) }' || fail "the best dump took $secs s (bound: 2 s)"
[ "$best_ms" -lt 4000 ] || fail "gpusample dump ran $best_ms ms at best (bound: 4 s)"
ok "8 ranks x 40 threads dumped in $secs s"
