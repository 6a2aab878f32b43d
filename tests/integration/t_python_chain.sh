#!/bin/bash
# Python frames, done-when (1), through the real CLI (`gpusample -- python
# py_chain.py`) and the real viewer (go tool pprof -traces -lines), on every
# CPython 3.8-3.13, Debian's python3 and python3.14 / python3.15 of the sid
# root (python_lib.sh: sid_cmd, the job in a chroot, gpusample outside):
#  - >= 95% of the samples inside the busy loop carry exactly
#    <module> -> main -> Worker.run -> inner, leaf line = the loop's line
#    (3.8-3.10 have no co_qualname: `run`, a documented deviation);
#  - the merge with the native (CFI) stack is right: no
#    _PyEval_EvalFrameDefault is left (each was replaced by its Python
#    frames), and in >= 95% of the samples whose native walk reached the
#    root (_start / main), the Python frames sit between the native leaf part
#    and the interpreter's entry (<module> above PyEval_EvalCode ... main).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
f=$PYWL/py_chain.py
L_LOOP=$(marker_line "$f" LOOP_LINE); L_INNER=$(marker_line "$f" CALL_INNER)
L_RUN=$(marker_line "$f" CALL_RUN); L_MAIN=$(marker_line "$f" CALL_MAIN)
py_interpreters
for py in "${PYS[@]}"; do
	ver=$(py_minor "$py")
	run=Worker.run
	case $ver in 3.8|3.9|3.10) run=run;; esac # co_qualname exists from 3.11
	want="<module>@py_chain.py:$L_MAIN;main@py_chain.py:$L_RUN;$run@py_chain.py:$L_INNER;inner@py_chain.py:$L_LOOP"
	py_launch "$T/chain" "$py" py_chain.py 2
	in_loop=$(grep -c 'inner@py_chain.py' "$T/chain")
	exact=$(cut -d'|' -f2 "$T/chain" | grep -cxF "$want")
	echo "$py ($ver): $exact of $in_loop in-loop samples exact"
	[ "$in_loop" -ge 20 ] || { cat "$T/chain.err"; py_report "$T/chain.pb.gz"; fail "$py: only $in_loop samples in the loop"; }
	ratio_at_least "$exact" "$in_loop" 0.95 || {
		cut -d'|' -f2 "$T/chain" | sort | uniq -c | sort -rn | head -5
		fail "$py: expected >= 95% '$want'"
	}
	# Merged native + Python stacks (.full is leaf;...;root).  Every
	# _PyEval_EvalFrameDefault must be replaced; where the native walk
	# reached the process root (most samples: the first ones of a run may
	# lack libpython's CFI table, then Python frames sit above the native
	# leaf part), <module> must sit above PyEval_EvalCode.
	read -r loops noeval rooted good < <(awk -F'\t' -v inner="^inner .*py_chain.py:$L_LOOP\$" '
		{ n = split($3, fr, ";"); hit = 0
		  for (i = 1; i <= n; i++) if (fr[i] ~ inner) hit = i
		  if (!hit) next
		  tot += $1; ev = 0
		  for (i = 1; i <= n; i++) if (fr[i] ~ /^_PyEval_EvalFrameDefault/) ev = 1
		  if (!ev) noeval += $1
		  if (fr[n] !~ /^(_start|__libc_start_call_main|__libc_start_main[_a-z]*|main)( |$)/) next
		  rooted += $1; entry = 0; mod = 0
		  for (i = hit; i <= n; i++) if (fr[i] ~ /^PyEval_EvalCode( |$)/) entry = i
		  for (i = hit; i <= n; i++) if (fr[i] ~ /^<module> /) mod = i
		  if (entry && mod && mod < entry && !ev) good += $1 }
		END { printf "%d %d %d %d\n", tot, noeval, rooted, good }' "$T/chain.full")
	echo "$py ($ver): of $loops loop samples: $noeval without eval frames left, $rooted with native frames to the root, $good of those merged right"
	[ "$noeval" -eq "$loops" ] || fail "$py: _PyEval_EvalFrameDefault left in merged stacks"
	ratio_at_least "$rooted" "$loops" 0.5 || fail "$py: native stacks rarely reach the root ($rooted of $loops)"
	ratio_at_least "$good" "$rooted" 0.95 || {
		grep "inner .*py_chain.py:$L_LOOP" "$T/chain.full" | head -3 | tr ';' '\n' | head -60
		fail "$py: merged stacks wrong (<module> not above PyEval_EvalCode)"
	}
done
ok "call chain exact and merged with native frames on ${#PYS[@]} interpreters"
