#!/bin/bash
# Python walker, done-when (2): three threads, two busy in C with the GIL
# released (hashlib, zlib), one in pure Python; every thread's samples carry
# its own Python stack (thread bootstrap at the root, the worker's call line
# at the leaf), on every CPython 3.8-3.13, Debian's python3 and the sid
# root's python3.14 and python3.15.
# Attach mode: `gpusample -p PID` on the running script, read back with
# go tool pprof -traces -lines.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
f=$PYWL/py_threads.py
py_interpreters
for py in "${PYS[@]}"; do
	py_attach "$T/thr.txt" "$py" py_threads.py 2
	total=$(wc -l < "$T/thr.txt")
	for w in hash_worker:HASH_LINE zlib_worker:ZLIB_LINE py_worker:PY_LINE; do
		fn=${w%%:*}; line=$(marker_line "$f" "${w##*:}")
		# leaf = the worker at its busy line, root = threading's bootstrap
		n=$(cut -d'|' -f2 "$T/thr.txt" | grep -E "^[A-Za-z._]*_bootstrap@threading.py:[0-9]+;.*;$fn@py_threads.py:$line\$" | wc -l)
		tids=$(grep -F "$fn@py_threads.py:$line" "$T/thr.txt" | awk '{print $2}' | sort -u | wc -l)
		echo "$py: $fn: $n samples at line $line, $tids thread(s)"
		[ "$n" -ge 8 ] || { sort -t'|' -k2 "$T/thr.txt" | cut -d'|' -f2 | uniq -c | sort -rn | head; fail "$py: $fn has $n samples with the right stack"; }
		[ "$tids" -eq 1 ] || fail "$py: $fn stacks seen on $tids threads"
	done
	empty=$(awk -F'|' '$2 == ""' "$T/thr.txt" | wc -l)
	ratio_at_least $((total - empty)) "$total" 0.9 || fail "$py: $empty of $total samples without Python frames"
done
ok "GIL-released and pure-Python threads on ${#PYS[@]} interpreters"
