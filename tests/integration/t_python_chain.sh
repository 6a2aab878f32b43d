#!/bin/bash
# Python walker, done-when (1): a known call chain on every CPython 3.8-3.13
# and Debian's python3: >= 95% of the samples inside the busy loop carry
# exactly <module> -> main -> Worker.run -> inner, leaf line = the loop line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
build_py_driver
f=$PYWL/py_chain.py
L_LOOP=$(marker_line "$f" LOOP_LINE); L_INNER=$(marker_line "$f" CALL_INNER)
L_RUN=$(marker_line "$f" CALL_RUN); L_MAIN=$(marker_line "$f" CALL_MAIN)
n_py=0
for py in $(py_versions); do
	n_py=$((n_py + 1))
	ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	run=Worker.run
	case $ver in 3.8|3.9|3.10) run=run;; esac # co_qualname exists from 3.11
	want="<module>@py_chain.py:$L_MAIN;main@py_chain.py:$L_RUN;$run@py_chain.py:$L_INNER;inner@py_chain.py:$L_LOOP"
	py_profile "$T/chain.txt" "$py" py_chain.py 3
	cat "$T/chain.txt.err"
	in_loop=$(grep -c 'inner@py_chain.py' "$T/chain.txt")
	exact=$(cut -d'|' -f2 "$T/chain.txt" | grep -cxF "$want")
	echo "$py ($ver): $exact of $in_loop in-loop samples exact"
	[ "$in_loop" -ge 20 ] || fail "$py: only $in_loop samples in the loop"
	ratio_at_least "$exact" "$in_loop" 0.95 || {
		cut -d'|' -f2 "$T/chain.txt" | sort | uniq -c | sort -rn | head -5
		fail "$py: expected >= 95% '$want'"
	}
done
[ "$n_py" -ge 1 ] || skip "no CPython 3.8-3.13 found"
ok "call chain exact on $n_py interpreters"
