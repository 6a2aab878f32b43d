#!/bin/bash
# Kernel-serialized mode: PC records carry correlation ids, so samples of
# sampled launches join exactly (gpu_attribution=exact), the rest fall back
# to the proportional split; launch sites stay right either way.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
gpu_run ser --gpu-serialized
P=$T/ser.pb.gz
pprof -sample_index=gpu_samples -tags "$P" > "$T/tags" || fail "pprof -tags: $(cat "$T/pprof.err")"
cat "$T/tags"
grep -q 'exact' "$T/tags" || fail "no gpu_attribution=exact in kernel-serialized mode"
pprof -sample_index=gpu_samples -tagfocus=gpu_attribution=exact -top "$P" > "$T/exact" ||
	fail "pprof -tagfocus=gpu_attribution=exact: $(cat "$T/pprof.err")"
exact=$(accounted < "$T/exact")
echo "exact: $exact"
awk -v e="$exact" 'BEGIN{exit !(e > 0)}' || fail "no exactly joined samples"
tests/tools/pprof_stacks.py "$P" -sample_index=gpu_samples -tagfocus=gpu_attribution=exact > "$T/stacks" ||
	fail "pprof -traces failed"
read -r fwd axpy_all < <(under '^axpy' 'forward' "$T/stacks")
read -r rs_b rs_all < <(under '^reduce_sum' 'backward' "$T/stacks")
echo "exact axpy: $fwd/$axpy_all under forward; exact reduce_sum: $rs_b/$rs_all under backward"
[ "$axpy_all" -gt 0 ] || fail "no exact axpy samples"
[ "$fwd" = "$axpy_all" ] || fail "exact axpy samples outside forward"
[ "$rs_b" = "$rs_all" ] || fail "exact reduce_sum samples outside backward"
ok "kernel-serialized join: $exact exact samples, all under their launch sites"
