#!/bin/bash
# Python walker, done-when (3): recursion through C re-entry (sorted key=,
# map(lambda), __getattr__).  40 deep: the sampled stack equals the stack
# CPython reports (traceback), <module> at the root, no placeholder frames.
# 200 deep: the walk stops at GS_MAX_PY_FRAMES (128) with an explicit
# truncation frame at the root, and the 128 frames are the innermost ones.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
spin=$(marker_line "$PYWL/py_recurse.py" SPIN_LINE)
# names (last component of the qualname) and lines, root first, leaf excluded
sampled() { tr ';' '\n' | sed -E 's/^(.*)@[^@]*:([0-9]+)$/\1 \2/; s/^[^ ]*\.([^. ]+) /\1 /' ; }
py_interpreters
for py in "${PYS[@]}"; do
	for depth in 40 200; do
		py_launch "$T/rec.txt" "$py" py_recurse.py 2 $depth "$T/exp"
		nexp=$(wc -l < "$T/exp")
		grep -F "spin@py_recurse.py:$spin" "$T/rec.txt" | cut -d'|' -f2 | sort | uniq -c | sort -rn > "$T/stacks"
		nin=$(awk '{s += $1} END {print s + 0}' "$T/stacks")
		[ "$nin" -ge 20 ] || { py_report "$T/rec.txt.pb.gz"; fail "$py depth $depth: only $nin samples in spin()"; }
		grep -q 'unknown python' "$T/stacks" && fail "$py depth $depth: placeholder frames"
		top=$(head -1 "$T/stacks" | awk '{print $1}')
		ratio_at_least "$top" "$nin" 0.95 || fail "$py depth $depth: stacks differ between samples"
		head -1 "$T/stacks" | sed -E 's/^ *[0-9]+ //' | sampled > "$T/got"
		ngot=$(wc -l < "$T/got")
		if [ "$depth" = 40 ]; then
			# got = expected frames + spin leaf
			head -n "$nexp" "$T/got" > "$T/got1"
			diff "$T/exp" "$T/got1" > "$T/diff" || { head "$T/diff"; fail "$py depth 40: stack differs from traceback"; }
			[ "$ngot" -eq $((nexp + 1)) ] || fail "$py depth 40: $ngot frames, expected $((nexp + 1))"
			head -1 "$T/got" | grep -q '^<module> ' || fail "$py depth 40: <module> not at the root"
		else
			head -1 "$T/got" | grep -q '^\[truncated python stack\]' || fail "$py depth 200: no truncation frame at the root"
			[ "$ngot" -eq 129 ] || fail "$py depth 200: $ngot frames, expected 128 + truncation"
			# innermost 127 (leaf spin excluded) = the last 127 of traceback
			tail -n 128 "$T/got" | head -n 127 > "$T/got1"
			tail -n 127 "$T/exp" > "$T/exp1"
			diff "$T/exp1" "$T/got1" > "$T/diff" || { head "$T/diff"; fail "$py depth 200: innermost frames differ"; }
		fi
		echo "$py depth $depth: $nin samples, $ngot frames ok"
	done
done
ok "recursion through C on ${#PYS[@]} interpreters"
