#!/bin/bash
# Python frames spliced by address into their own eval-loop activation,
# issue 13 done-when (2): a generator / sum(genexpr) loop (py_gen.py) on
# every CPython 3.8-3.13, Debian's python3 (stripped binary: the merge
# finds the eval loop by address, not by name) and the sid root's python3.14
# and python3.15 (stripped too, most of the loop in an unnamed .cold part).  Attach mode, so that the
# unwind tables exist before the first sample.
# A sample in the loop (it has `consume`) is exact when, read root to leaf:
#  - the Python frames are a prefix of <module> main consume <genexpr> gen;
#  - none sits above (root-side of) PyEval_EvalCode;
#  - no _PyEval_EvalFrameDefault is left root-side of the leaf Python frame
#    (each activation got its frames; a leaf-most activation that has not
#    pushed its frame yet stays native);
#  - the native frames between two Python frames are what the interpreter
#    does there, per version (Y: some, N: none, ?: either):
#    <module>>main, main>consume, consume>genexpr (sum(): always C),
#    genexpr>gen (3.12+ may run the generator inline: FOR_ITER_GEN);
#  - except at a generator's creation: on 3.11+ calling gen(5000) or making
#    the genexpr runs its first instruction (RETURN_GENERATOR) inline in
#    consume's activation, so a leaf <genexpr>, or a leaf gen off its yield
#    line, right under consume with no C between is exact there (counted
#    as "created").
# Done when: >= 99.5% of the loop samples are exact.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
# The native frames between two Python frames are checked here: keep the
# interpreter's own frames that the merge folds by default.
PY_GS_ARGS=--interpreter-frames
py_need_gs
py_interpreters
gen_line=$(grep -n 'GEN_LINE' "$PYWL/py_gen.py" | cut -d: -f1)
check() { # FULL GAPS INLINE_CREATE -> "good total reasons..."
	awk -F'\t' -v gaps="$2" -v inline_create="$3" -v gen_line="$gen_line" '
	BEGIN { split("<module> main consume <genexpr> gen", want, " ") }
	{
		n = split($3, fr, ";"); np = 0; why = ""; entry = 0; ev = 0; nat = 0; cons = 0
		npy = 0; prev = ""
		for (i = 1; i <= n; i++)
			npy += match(fr[i], /^[^ ]+ [^ ]*py_gen\.py:[0-9]+$/) > 0
		for (i = n; i >= 1; i--) {
			f = fr[i]
			if (f ~ /^_PyEval_EvalFrameDefault/) { ev = 1; continue }
			if (f ~ /^PyEval_EvalCode( |$)/) { entry = 1; nat++; continue }
			if (!match(f, /^[^ ]+ [^ ]*py_gen\.py:[0-9]+$/)) { nat++; continue }
			name = substr(f, 1, index(f, " ") - 1); sub(/^consume\.<locals>\./, "", name)
			np++
			if (name == "consume") cons = 1
			if (!entry) why = why " python-above-PyEval_EvalCode"
			if (ev) why = why " eval-frame-left"
			if (inline_create && np == npy && prev == "consume" && !nat &&
			    (name == "<genexpr>" || (name == "gen" && f !~ ":" gen_line "$"))) {
				created += $1; ev = 0; continue
			}
			if (want[np] != name) why = why " order:" np "=" name
			g = np > 1 ? substr(gaps, np - 1, 1) : "?"
			if (g == "Y" && !nat) why = why " no-C-between:" want[np - 1] ">" name
			if (g == "N" && nat) why = why " C-between:" want[np - 1] ">" name
			ev = 0; nat = 0; prev = name
		}
		if (!cons) next
		tot += $1
		if (why == "") good += $1; else bad[why] += $1
	}
	END {
		printf "%d %d created=%d", good, tot, created
		for (w in bad) printf " |%d:%s", bad[w], w
		printf "\n"
	}' "$1"
}
for py in "${PYS[@]}"; do
	ver=$(py_minor "$py")
	create=1
	case $ver in
	3.8|3.9|3.10) gaps=YYYY create=;; # every call is a C-level eval call
	3.11) gaps=NNYY;;                 # calls inline; generators resumed from C
	*) gaps=NNY?;;                    # 3.12+: FOR_ITER_GEN resumes inline
	esac
	py_attach "$T/gen" "$py" py_gen.py 3
	read -r good tot reasons < <(check "$T/gen.full" "$gaps" "$create")
	echo "$py ($ver): $good of $tot loop samples exact ${reasons:-}"
	[ "$tot" -ge 100 ] || { cat "$T/gen.err"; py_report "$T/gen.pb.gz"; fail "$py: only $tot samples in the loop"; }
	ratio_at_least "$good" "$tot" 0.995 || {
		grep py_gen "$T/gen.full" | head -2 | cut -f3 | tr ';' '\n' | head -60
		fail "$py: expected >= 99.5% exact mixed stacks, got $good of $tot ${reasons:-}"
	}
done
ok "generator stacks spliced into their own eval activations on ${#PYS[@]} interpreters"
