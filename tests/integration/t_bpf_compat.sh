#!/bin/bash
# The compat programs (for kernels before bpf_loop, bpf/unwind.bpf.h) give
# the same stacks as the others: the CFI chain, Python chain and off-CPU
# tests again with GS_BPF_COMPAT=1, on this kernel.  (The kernel matrix,
# scripts/kernel-matrix.sh, runs them where they are the only choice: 5.10.)
source "$(dirname "$0")/lib.sh"
export GS_BPF_COMPAT=1
case $("$GS" check 2>&1) in
*"program gs_sample_compat "*) ;;
*) fail "GS_BPF_COMPAT=1 did not load gs_sample_compat: $("$GS" check 2>&1 | tail -3)" ;;
esac
for t in t_cfi_chain t_python_chain t_offcpu_waits; do
	bash "$ROOT/tests/integration/$t.sh" > "$T/$t.log" 2>&1 || {
		tail -20 "$T/$t.log"
		fail "$t failed with the compat programs"
	}
	echo "$t: $(tail -1 "$T/$t.log")"
done
ok "the compat programs pass the chain, Python and off-CPU tests"
