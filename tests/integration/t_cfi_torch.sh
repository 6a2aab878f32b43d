#!/bin/bash
# PyTorch CPU loop (Debian python3-torch: libtorch_cpu, BLAS, oneDNN; no
# frame pointers): samples whose leaf is in libtorch_cpu or a BLAS must
# unwind natively up to the interpreter (_PyEval_EvalFrameDefault, where the
# Python walker's frames are spliced in).  Tables are built lazily, as in a
# session.  Pass: >= 90% of those samples.  Prints table sizes and build time.
source "$(dirname "$0")/lib.sh"
P=$ROOT/$BUILD/tests/cfi_probe
[ -x "$P" ] || fail "build first: make BUILD=$BUILD test-helpers"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch not installed (make test-deps)"

# Sample only the training loop: wait for "ready" (import done), then attach.
/usr/bin/python3 -u "$ROOT/tests/cfi/torch_loop.py" 40 > "$T/torch.out" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q ready "$T/torch.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$T/torch.out" || fail "torch loop did not start: $(tail -3 "$T/torch.out")"
"$P" --lazy -v -m -w 6 -d 8 -F 199 -p "$pid" > "$T/torch.folded" 2> "$T/torch.err" || fail "cfi_probe: $(tail -3 "$T/torch.err")"
kill "$pid" 2>/dev/null
grep -v '^cfi:' "$T/torch.err"
grep -E '^cfi: .*(libtorch_cpu|libpython|python3\.11|blas|dnnl)' "$T/torch.err" | sed 's|/proc/[0-9]*/root||'
# -w 6: the first 6 s of samples are dropped while lazy tables are built
# (libtorch_cpu alone takes 1-4 s on a loaded 2-core machine).
read -r good total < <(awk '{ n = $NF; $NF = ""; s = $0; sub(/ +$/, "", s)
	k = split(s, f, ";"); leaf = f[k]
	if (leaf ~ /^(libtorch_cpu|libblas|libopenblas|libblis|libmkl|libdnnl)[^`]*`/) { t += n
		if (s ~ /`_PyEval_EvalFrameDefault;/ && s !~ /\[unwind_/) g += n } }
	END { printf "%d %d\n", g, t }' "$T/torch.folded")
echo "$good of $total samples with a libtorch_cpu/BLAS leaf reach _PyEval_EvalFrameDefault"
[ "$total" -ge 50 ] || fail "only $total samples in libtorch_cpu/BLAS"
ratio_at_least "$good" "$total" 0.90 || fail "only $good/$total reach the interpreter"
ok "libtorch/BLAS leaves reach the interpreter: $good/$total"
