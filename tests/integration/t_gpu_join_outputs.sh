#!/bin/bash
# The GPU profile through every writer, read by the real consumers: the
# terminal report's GPU section (top kernels with their stall mix, hottest
# source lines, launching Python lines; kernel-level attribution and a note
# for a cubin without line info), speedscope (one GPU profile per device,
# imported by speedscope itself in headless Chromium) and gpu.folded
# (flamegraph.pl's "frame;frame;... count" lines, leaf "[stall] reason").
# Two devices of the CUDA double, continuous mode, launched through `env`.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
export FAKE_CUDA_DEVICES=2
GPU_APP_ARGS="--devices 2" gpu_run out --format pprof,speedscope,folded
P=$T/out.pb.gz
for f in out.speedscope.json out.gpu.folded out.cpu.folded; do
	[ -s "$T/$f" ] || fail "$f not written"
done
pprof -sample_index=gpu_samples -top "$P" > "$T/top" || fail "pprof -top: $(cat "$T/pprof.err")"
total=$(top_total < "$T/top")
[ "${total%.*}" -gt 0 ] 2>/dev/null || fail "no gpu_samples in the profile"

# --- report (gpusample's stdout, after the app's own line)
R=$T/out.out
sed -n '/^GPU: /,/^Where the time goes/p' "$R"
grep -q "^GPU: $total PC samples" "$R" || fail "report GPU total is not $total"
grep -q 'Top kernels by GPU samples' "$R" || fail "no top-kernels table in the report"
kern() { awk -v k="$1" '$3 == k {f=1; print; next} f && /^      / {print; next} f {exit}' "$R"; }
kern axpy > "$T/r.axpy"; kern reduce_sum > "$T/r.rs"; kern scale > "$T/r.scale"
for k in axpy rs scale; do
	[ -s "$T/r.$k" ] || fail "kernel $k missing from the report"
	grep -Eq 'stalls: [a-z_]+ [0-9]+%' "$T/r.$k" || fail "no stall mix for $k: $(cat "$T/r.$k")"
done
if [ -n "$CUPTI_REAL" ]; then
	grep -Eq 'hottest lines: kernels\.cu:[0-9]+ [0-9]+%' "$T/r.axpy" || fail "no hottest lines for axpy"
fi
grep -q 'hottest lines: none (cubin built without -lineinfo' "$T/r.rs" ||
	fail "no-lineinfo kernel reduce_sum not explained: $(cat "$T/r.rs")"
grep -Eq 'launched from: +[0-9]+%  launch \(.*gpu_app\.py:[0-9]+\) <- forward \(.*gpu_app\.py:[0-9]+\)' "$T/r.axpy" ||
	fail "axpy's launching Python lines missing: $(cat "$T/r.axpy")"
grep -q '<- backward' "$T/r.rs" || fail "reduce_sum not launched from backward in the report"
grep -q '<- forward' "$T/r.scale" && grep -q '<- optimizer_step' "$T/r.scale" ||
	fail "scale's two launch sites not both in the report: $(cat "$T/r.scale")"
"$GS" report "$P" > "$T/rereport" 2>&1 || fail "gpusample report failed: $(tail -3 "$T/rereport")"
grep -q 'hottest lines: none (cubin built without -lineinfo' "$T/rereport" ||
	fail "gpusample report of the saved profile lost the GPU section"

# --- speedscope: one GPU profile per device, and speedscope imports it
gpu_profiles=$(python3 - "$T/out.speedscope.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sum(1 for p in d["profiles"] if p["name"].startswith("GPU")))
PY
)
echo "speedscope: $gpu_profiles GPU profiles"
[ "$gpu_profiles" = 2 ] || fail "speedscope has $gpu_profiles GPU profiles for 2 devices"
tests/tools/speedscope_import.sh "$T/out.speedscope.json" > "$T/ss.log" 2>&1; rc=$?
cat "$T/ss.log"
[ $rc = 77 ] && echo "note: speedscope import not checked (no chromium or npm speedscope)"
[ $rc = 0 ] || [ $rc = 77 ] || fail "speedscope did not import the GPU profile"

# --- gpu.folded: flamegraph.pl input
F=$T/out.gpu.folded
bad=$(grep -Ecv '^[^;]+(;[^;]+)* [0-9]+$' "$F")
[ "$bad" = 0 ] || fail "$bad gpu.folded lines are not 'frame;...;frame count': $(grep -Ev '^[^;]+(;[^;]+)* [0-9]+$' "$F" | head -2)"
nostall=$(grep -cv ';\[stall\] [a-z_]* [0-9]*$' "$F")
[ "$nostall" = 0 ] || fail "$nostall gpu.folded lines without a '[stall] reason' leaf"
grep -q ';\[GPU\] axpy;kernels\.cu:[0-9]*;\[stall\]' "$F" || [ -z "$CUPTI_REAL" ] ||
	fail "gpu.folded lacks '[GPU] axpy;kernels.cu:N;[stall] ...'"
grep -q ';forward[^;]*;launch[^;]*;.*\[GPU\] axpy;' "$F" || fail "gpu.folded: axpy not under forward -> launch"
sum=$(awk '{s += $NF} END {print s}' "$F")
[ "$sum" = "$total" ] || fail "gpu.folded counts add up to $sum, the profile has $total"
ok "report GPU section, speedscope ($gpu_profiles GPU profiles, imported), gpu.folded ($sum samples) agree on $total GPU samples"
