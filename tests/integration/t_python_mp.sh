#!/bin/bash
# Python walker, done-when (4): multiprocessing with fork, spawn and
# forkserver: both workers' Python stacks (mp_work at its busy line) appear
# under their own pids.  Every interpreter for fork; spawn and forkserver on
# 3.8, 3.12 and Debian's python3 to bound the run time.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
build_py_driver
line=$(marker_line "$PYWL/py_mp.py" WORK_LINE)
n=0
for py in $(py_versions); do
	methods=fork
	case $py in *3.8*|*3.12*|/usr/bin/python3) methods="fork spawn forkserver";; esac
	for m in $methods; do
		n=$((n + 1))
		py_profile "$T/mp.txt" "$py" py_mp.py 2 $m
		root=$(head -1 "$T/mp.txt.err" | sed -nE 's/^# pid ([0-9]+):.*/\1/p')
		grep -F "mp_work@py_mp.py:$line" "$T/mp.txt" | awk -v r="$root" '$1 != r {print $1}' | sort | uniq -c > "$T/w"
		cat "$T/w"
		nw=$(awk '$1 >= 5' "$T/w" | wc -l)
		[ "$nw" -ge 2 ] || { cat "$T/mp.txt.err"; fail "$py $m: $nw worker pids with >= 5 mp_work samples"; }
		echo "$py $m: ok"
	done
done
[ "$n" -ge 1 ] || skip "no CPython 3.8-3.13 found"
ok "multiprocessing workers under their own pids ($n runs)"
