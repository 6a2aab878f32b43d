#!/bin/bash
# GPU PC samples joined to their launch stacks, end to end: CUDA/CUPTI
# doubles + the real agent + gpusample (continuous mode), read back with
# go tool pprof as a user would (-sample_index=gpu_samples -lines -top,
# -tags, -tagfocus=cuda_stall_reason=..., -traces).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
gpu_run cont
P=$T/cont.pb.gz

pprof -sample_index=gpu_samples -lines -top "$P" > "$T/lines" || fail "pprof -lines -top: $(cat "$T/pprof.err")"
head -25 "$T/lines"
total=$(sed -n 's/.* of \([0-9.]*\) total.*/\1/p' "$T/lines" | head -1)
[ "${total%.*}" -gt 0 ] 2>/dev/null || fail "no gpu_samples in the profile"
grep -q 'Type: gpu_samples' "$T/lines" || fail "gpu_samples is not the sample type shown"
grep -q 'axpy' "$T/lines" || fail "kernel axpy missing from -top"
grep -Eq 'reduce_sum\(' "$T/lines" || fail "reduce_sum not demangled (or missing) in -top"
if [ -n "$CUPTI_REAL" ]; then
	read -r lo hi < <(axpy_lines)
	hit=$(grep -o 'kernels\.cu:[0-9]*' "$T/lines" | cut -d: -f2 | awk -v lo="$lo" -v hi="$hi" '$1>=lo && $1<=hi' | head -1)
	[ -n "$hit" ] || fail "no axpy line in kernels.cu:$lo..$hi (cubin built with -lineinfo)"
	echo "axpy resolved to kernels.cu:$hit"
else
	echo "note: no real libcupti here; source lines not checked"
fi

pprof -sample_index=gpu_samples -tags "$P" > "$T/tags" || fail "pprof -tags: $(cat "$T/pprof.err")"
cat "$T/tags"
grep -q 'cuda_stall_reason' "$T/tags" || fail "no cuda_stall_reason label"
grep -q 'gpu_attribution' "$T/tags" || fail "no gpu_attribution label"
grep -q 'proportional' "$T/tags" || fail "continuous mode should give gpu_attribution=proportional"
grep -Eq 'smsp__|_not_issued' "$T/tags" && fail "stall reasons not shortened"
reason=$(awk '/cuda_stall_reason/ {f=1; next} f && NF>=3 {print $NF; exit}' "$T/tags")
[ -n "$reason" ] || fail "could not read a stall reason from -tags"
pprof -sample_index=gpu_samples -tagfocus=cuda_stall_reason="$reason" -top "$P" > "$T/focus" ||
	fail "pprof -tagfocus: $(cat "$T/pprof.err")"
kept=$(accounted < "$T/focus")
echo "tagfocus cuda_stall_reason=$reason keeps $kept of $total"
awk -v k="$kept" -v t="$total" 'BEGIN{exit !(k > 0 && k < t)}' ||
	fail "-tagfocus=cuda_stall_reason=$reason kept $kept of $total"

tests/tools/pprof_stacks.py "$P" -sample_index=gpu_samples > "$T/stacks" || fail "pprof -traces failed"
read -r fwd axpy_all < <(under '^axpy' 'forward' "$T/stacks")
read -r bwd axpy_b < <(under '^axpy' 'backward' "$T/stacks")
read -r rs_b rs_all < <(under '^reduce_sum' 'backward' "$T/stacks")
echo "axpy: $fwd/$axpy_all under forward, $bwd under backward; reduce_sum: $rs_b/$rs_all under backward"
[ "$axpy_all" -gt 0 ] && [ "$rs_all" -gt 0 ] || fail "kernels missing from -traces"
ratio_at_least "$fwd" "$axpy_all" 0.8 || fail "axpy samples not under train_step -> forward"
[ "$bwd" -eq 0 ] || fail "axpy samples under backward ($bwd): join mixed up launch sites"
ratio_at_least "$rs_b" "$rs_all" 0.8 || fail "reduce_sum samples not under backward"
unknown=$(awk -F'\t' '$3 ~ /\[unknown launch\]/ {n += $1} END {print n+0}' "$T/stacks")
echo "[unknown launch]: $unknown of $total"
ok "GPU samples joined: axpy under forward ($fwd/$axpy_all), reduce_sum under backward, lines, tags, tagfocus"
