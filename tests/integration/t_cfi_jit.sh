#!/bin/bash
# gs-test-timeout: 60
# Whole stacks through JIT kernels that use RBP as a general register
# (jit_chain: a kernel in anonymous executable memory, called from a frame
# whose CFA rule is RBP-based, as oneDNN's callers in libdnnl are).  The
# stack scan finds the caller's return address; its RBP must come from the
# kernel's saved registers: right below the return address (oneDNN 3.x's
# preamble pushes RBP first: PyTorch 2.x) or two words below (RBX first).
# Launch mode, whole profiler: >= 99% of the samples reach _start, through
# jit_call, jit_run and main.  Without the first slot, every sample of the
# "new" kernel stopped at jit_call ("bad rule").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
[ -x "$WL/jit_chain" ] || fail "build first: make BUILD=$BUILD test-helpers"
for order in new old; do
	"$GS" -F 499 -o "$T/$order" -q --format pprof -- "$WL/jit_chain" "$order" 4 \
		> "$T/$order.out" 2> "$T/$order.err" || { cat "$T/$order.err"; fail "gpusample -- jit_chain $order failed"; }
	pprof_stacks "$T/$order.pb.gz" > "$T/$order.full" || fail "pprof failed: $(cat "$T/pprof.err")"
	read -r good tot why < <(awk -F'\t' '$2 ~ /process_role=main/ { n = split($3, fr, ";"); r = fr[n]
		sub(/ .*/, "", r); tot += $1
		if (r == "_start" && $3 ~ /(^|;)jit_run;main;/) good += $1; else bad[r] += $1 }
		END { printf "%d %d", good, tot; for (b in bad) printf " |%d:%s", bad[b], b; printf "\n" }' "$T/$order.full")
	stops=$(pprof -comments "$T/$order.pb.gz" 2>/dev/null | grep '^native unwind stops' || true)
	echo "$order: $good of $tot samples reach _start through jit_run and main ${why:-}; ${stops:-no unwind stops}"
	[ "$tot" -ge 100 ] || fail "$order: only $tot samples (machine too busy?)"
	ratio_at_least "$good" "$tot" 0.99 || fail "$order: $good of $tot samples reach _start"
	jit=$(grep -c ';jit_call;jit_run;main;' "$T/$order.full" || true)
	[ "$jit" -ge 1 ] || fail "$order: no sample in the JIT kernel under jit_call"
done
ok "stacks through RBP-clobbering JIT kernels reach _start (both preamble orders)"
