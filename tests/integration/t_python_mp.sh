#!/bin/bash
# Python frames, done-when (4): multiprocessing with fork, spawn and
# forkserver under `gpusample -- python py_mp.py METHOD`: both workers'
# Python stacks (mp_work at its busy line) appear under their own pids, on
# every CPython 3.8-3.13, Debian's python3 and the sid root's python3.14 and
# python3.15 (workers exec'd inside the chroot).  Spawn and forkserver
# workers are fresh execs of python (discovery after exec; forkserver
# children fork from a process that may not be discovered yet).
# attach-spawn: `gpusample -p ROOT` on a tree whose spawn workers already
# run: each must be discovered on its own (same interpreter, other
# addresses), not given its parent's configuration.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
line=$(marker_line "$PYWL/py_mp.py" WORK_LINE)
py_interpreters
n=0
for py in "${PYS[@]}"; do
	for m in fork spawn forkserver attach-spawn; do
		n=$((n + 1))
		case $m in
		attach-*) py_attach_tree "$T/mp" "$py" py_mp.py 2 ${m#attach-};;
		*) py_launch "$T/mp" "$py" py_mp.py 2 $m;;
		esac
		root=$(sed -n 's/^root=//p' "$T/mp.stdout")
		[ -n "$root" ] || fail "$py $m: the workload did not start"
		# per worker pid: samples, samples in mp_work at its busy line
		awk -v r="$root" -v want="mp_work@py_mp.py:$line" '$1 != r {
			n[$1]++; if (index($0, want)) w[$1]++ }
			END { for (p in n) print p, n[p], w[p] + 0 }' "$T/mp" > "$T/w"
		echo "$py $m: root $root; worker pid samples mp_work:" $(tr ' ' ':' < "$T/w")
		# >= 3 samples and most of them in mp_work: robust to CPU
		# starvation on a loaded machine, fails when frames are missing.
		nw=$(awk '$3 >= 3 && $3 >= 0.6 * $2' "$T/w" | wc -l)
		[ "$nw" -ge 2 ] || {
			cat "$T/mp.err"; py_report "$T/mp.pb.gz"
			cut -d'|' -f1,2 "$T/mp" | cut -c1-300 | sort | uniq -c | sort -rn | head
			fail "$py $m: $nw worker pids with their mp_work stacks"
		}
	done
done
ok "multiprocessing workers under their own pids ($n runs)"
