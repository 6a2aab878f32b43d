#!/bin/bash
# GPU PC samples joined to their launch stacks, end to end: CUDA/CUPTI
# doubles + the real agent + gpusample -- CMD (continuous mode, launched
# through `env`, so the target execs twice), read back with go tool pprof as
# a user would (-sample_index=gpu_samples -lines -top, -tags,
# -tagfocus=cuda_stall_reason=..., -traces).  Counts are checked against
# what the CUPTI double says it delivered.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
gpu_run cont
P=$T/cont.pb.gz

delivered=$(cupti_stat cont samples_delivered)
[ "${delivered:-0}" -gt 0 ] || fail "the CUPTI double delivered no samples (agent never armed)"
[ "$(cupti_stat cont samples_dropped)" = 0 ] || fail "the double dropped samples: counts cannot match"

pprof -sample_index=gpu_samples -lines -top "$P" > "$T/lines" || fail "pprof -lines -top: $(cat "$T/pprof.err")"
head -25 "$T/lines"
total=$(top_total < "$T/lines")
[ "${total%.*}" -gt 0 ] 2>/dev/null || fail "no gpu_samples in the profile"
grep -q 'Type: gpu_samples' "$T/lines" || fail "gpu_samples is not the sample type shown"
[ "$total" = "$delivered" ] || fail "profile has $total gpu_samples, the double delivered $delivered"
grep -q 'axpy' "$T/lines" || fail "kernel axpy missing from -top"
grep -Eq 'reduce_sum\(' "$T/lines" || fail "reduce_sum not demangled (or missing) in -top"
# reduce_sum's cubin has no line info: kernel-level entries, no source line
grep -E 'reduce_sum\(' "$T/lines" | grep -q 'kernels\.cu' && fail "reduce_sum got a source line from a cubin without -lineinfo"
pprof -sample_index=gpu_samples -top "$P" > "$T/top" || fail "pprof -top: $(cat "$T/pprof.err")"
axpy_flat=$(awk '$NF == "axpy" {print $1; exit}' "$T/top")
axpy_lines=$(awk '$(NF-1) == "axpy" && $NF ~ /kernels\.cu:/ {s += $1} END {print s+0}' "$T/lines")
echo "axpy: $axpy_flat samples, $axpy_lines on kernels.cu lines"
if [ -n "$CUPTI_REAL" ]; then
	[ "$axpy_lines" = "$axpy_flat" ] || fail "axpy lines add up to $axpy_lines, not its $axpy_flat samples"
	read -r lo hi < <(axpy_lines)
	bad=$(grep -o 'axpy .*kernels\.cu:[0-9]*' "$T/lines" | sed 's/.*://' | awk -v lo="$lo" -v hi="$hi" '$1<lo || $1>hi')
	[ -z "$bad" ] || fail "axpy lines outside its body kernels.cu:$lo..$hi: $bad"
else
	echo "note: no real libcupti here; source lines not checked"
fi

pprof -sample_index=gpu_samples -tags "$P" > "$T/tags" || fail "pprof -tags: $(cat "$T/pprof.err")"
cat "$T/tags"
grep -q 'cuda_stall_reason' "$T/tags" || fail "no cuda_stall_reason label"
stall_total=$(awk '/^ *cuda_stall_reason: Total/ {print $NF; exit}' "$T/tags")
[ "${stall_total%.0}" = "$total" ] || fail "-tags stall breakdown totals $stall_total, -top $total"
grep -q 'gpu_attribution' "$T/tags" || fail "no gpu_attribution label"
grep -q 'proportional' "$T/tags" || fail "continuous mode should give gpu_attribution=proportional"
grep -Eq 'smsp__|_not_issued' "$T/tags" && fail "stall reasons not shortened"
ls_tag=$(awk '/cuda_stall_reason/ {f=1; next} f && /^ *[a-z_]+:/ {f=0} f && $NF == "long_scoreboard" {print $1; exit}' "$T/tags")
[ -n "$ls_tag" ] || fail "no long_scoreboard stall reason in -tags"
pprof -sample_index=gpu_samples -tagfocus=cuda_stall_reason=long_scoreboard -top "$P" > "$T/focus" ||
	fail "pprof -tagfocus: $(cat "$T/pprof.err")"
kept=$(accounted < "$T/focus")
echo "tagfocus cuda_stall_reason=long_scoreboard keeps $kept of $total (-tags: $ls_tag)"
[ "$kept" = "${ls_tag%.0}" ] || fail "-tagfocus=cuda_stall_reason=long_scoreboard kept $kept, -tags says $ls_tag"
awk -v k="$kept" -v t="$total" 'BEGIN{exit !(k > 0 && k < t)}' || fail "tagfocus kept $kept of $total"

tests/tools/pprof_stacks.py "$P" -sample_index=gpu_samples > "$T/stacks" || fail "pprof -traces failed"
read -r fwd axpy_all < <(under '^axpy' 'forward' "$T/stacks")
read -r bwd axpy_b < <(under '^axpy' 'backward' "$T/stacks")
read -r rs_b rs_all < <(under '^reduce_sum' 'backward' "$T/stacks")
echo "axpy: $fwd/$axpy_all under forward, $bwd under backward; reduce_sum: $rs_b/$rs_all under backward"
[ "$axpy_all" -gt 0 ] && [ "$rs_all" -gt 0 ] || fail "kernels missing from -traces"
ratio_at_least "$fwd" "$axpy_all" 0.8 || fail "axpy samples not under train_step -> forward"
[ "$bwd" -eq 0 ] || fail "axpy samples under backward ($bwd): join mixed up launch sites"
ratio_at_least "$rs_b" "$rs_all" 0.8 || fail "reduce_sum samples not under backward"
# scale<float> is launched from two call sites, 3:1 (forward, optimizer_step)
read -r sc_f sc_all < <(under 'scale<float>' '^forward$' "$T/stacks")
read -r sc_o _ < <(under 'scale<float>' '^optimizer_step$' "$T/stacks")
echo "scale<float>: $sc_f under forward, $sc_o under optimizer_step, of $sc_all"
ratio_at_least $((sc_f + sc_o)) "$sc_all" 0.8 || fail "scale samples not under its two call sites"
awk -v f="$sc_f" -v o="$sc_o" 'BEGIN{ r = f / (f + o); exit !(r > 0.62 && r < 0.88) }' ||
	fail "scale split $sc_f:$sc_o between its call sites, launched 3:1"
grep -q 'gs_emit_launch' "$T/stacks" && echo "note: some launch stacks still start in the agent (native walk ended inside it)"
unknown=$(awk -F'\t' '$3 ~ /\[unknown launch\]/ {n += $1} END {print n+0}' "$T/stacks")
echo "[unknown launch]: $unknown of $total"
ok "GPU samples joined ($total = the double's count): axpy under forward ($fwd/$axpy_all), reduce_sum under backward, scale split $sc_f:$sc_o (3:1), lines, tags, tagfocus"
