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
# The exact Python call site, line included: scale<float> is launched from
# forward (3 steps in 4) and optimizer_step (the 4th), each at its own line.
tests/tools/pprof_stacks.py "$P" -sample_index=gpu_samples -tagfocus=gpu_attribution=exact -lines > "$T/lstacks" ||
	fail "pprof -traces -lines failed"
l1=$(app_line "call site 1 of scale"); l2=$(app_line "call site 2 of scale")
read -r sc_1 sc_all < <(under 'scale<float>' "^forward .*gpu_app\\.py:$l1\$" "$T/lstacks")
read -r sc_2 _ < <(under 'scale<float>' "^optimizer_step .*gpu_app\\.py:$l2\$" "$T/lstacks")
echo "exact scale<float>: $sc_1 under forward:$l1, $sc_2 under optimizer_step:$l2, of $sc_all"
[ "$sc_all" -gt 0 ] && [ "$sc_1" -gt 0 ] && [ "$sc_2" -gt 0 ] || fail "exact scale samples missing at one of its call sites"
[ $((sc_1 + sc_2)) = "$sc_all" ] || fail "exact scale samples outside its two call-site lines"
awk -v f="$sc_1" -v o="$sc_2" 'BEGIN{ r = f / (f + o); exit !(r > 0.6 && r < 0.9) }' ||
	fail "exact scale split $sc_1:$sc_2, launched 3:1"
ok "kernel-serialized join: $exact exact samples, all under their launch sites (scale $sc_1:$sc_2 at lines $l1/$l2)"
