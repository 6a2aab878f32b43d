#!/bin/bash
# Python frames, done-when (4): multiprocessing with fork, spawn and
# forkserver under `gpusample -- python py_mp.py METHOD`: both workers'
# Python stacks (mp_work at its busy line) appear under their own pids, on
# every CPython 3.8-3.13 and Debian's python3.  Spawn and forkserver
# workers are fresh execs of python (discovery after exec; forkserver
# children fork from a process that may not be discovered yet).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
line=$(marker_line "$PYWL/py_mp.py" WORK_LINE)
n=0
for py in $(py_versions); do
	for m in fork spawn forkserver; do
		n=$((n + 1))
		py_launch "$T/mp" "$py" py_mp.py 2 $m
		root=$(sed -n 's/^root=//p' "$T/mp.stdout")
		[ -n "$root" ] || fail "$py $m: the workload did not start"
		grep -F "mp_work@py_mp.py:$line" "$T/mp" | awk -v r="$root" '$1 != r {print $1}' | sort | uniq -c > "$T/w"
		nw=$(awk '$1 >= 5' "$T/w" | wc -l)
		echo "$py $m: root $root, mp_work samples per worker pid:" $(awk '{print $2 ":" $1}' "$T/w")
		[ "$nw" -ge 2 ] || {
			cat "$T/mp.err"; cut -d'|' -f1 "$T/mp" | sort | uniq -c
			fail "$py $m: $nw worker pids with >= 5 mp_work samples"
		}
	done
done
[ "$n" -ge 1 ] || skip "no CPython 3.8-3.13 found"
ok "multiprocessing workers under their own pids ($n runs)"
