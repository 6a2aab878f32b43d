#!/bin/bash
# Native stacks of CPython without frame pointers (every pyenv CPython
# 3.8-3.13, shared libpython, and Debian's python3): the CFI walker must go
# from the leaf through libpython's eval loop to main.
# Pass per interpreter: >= 95% of samples reach main through
# _PyEval_EvalFrameDefault with no unwind error.  (pyenv's python main is
# a tail call to Py_BytesMain, so its root frame is __libc_start_call_main.)
source "$(dirname "$0")/lib.sh"
P=$ROOT/$BUILD/tests/cfi_probe
[ -x "$P" ] || fail "build first: make BUILD=$BUILD test-helpers"

pythons=()
for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
	for p in /root/.pyenv/versions/$v.*/bin/python$v; do [ -x "$p" ] && pythons+=("$p"); done
done
[ -x /usr/bin/python3 ] && pythons+=(/usr/bin/python3)
[ ${#pythons[@]} -gt 0 ] || fail "no CPython found (pyenv versions or /usr/bin/python3; make test-deps)"

bad=0
for py in "${pythons[@]}"; do
	"$P" -d 2 -F 199 -- "$py" "$ROOT/tests/cfi/spin.py" 20 > "$T/py.folded" 2> "$T/py.err" ||
		fail "cfi_probe $py: $(tail -3 "$T/py.err")"
	read -r good total < <(awk '{ n = $NF; $NF = ""; t += n
		if ($0 ~ /(^|;)(main|__libc_start_call_main);/ && $0 ~ /_PyEval_EvalFrameDefault/ && $0 !~ /\[unwind_/) g += n }
		END { printf "%d %d\n", g, t }' "$T/py.folded")
	errs=$(grep -E '^unwind_(no_table|read_fault|bad_rule|depth) ' "$T/py.err" | tr '\n' ' ')
	echo "$py: $good/$total samples from leaf through _PyEval_EvalFrameDefault to main; $errs"
	if [ "$total" -lt 50 ] || ! ratio_at_least "$good" "$total" 0.95; then
		bad=1
		sort -t' ' -k2 -nr "$T/py.folded" | grep -v '_PyEval_EvalFrameDefault.*' | head -5
	fi
done
[ $bad -eq 0 ] || fail "some interpreters' native stacks did not reach main"
ok "native stacks through libpython to main for ${#pythons[@]} interpreters"
