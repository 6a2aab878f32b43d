#!/bin/bash
# GPU device check for a real NVIDIA GPU + PyTorch (CUDA) host, run as root.
# Never part of CI.  Builds what it needs, then:
#   1. baseline: a short PyTorch training loop, step time without gpusample
#   2. agent path: the same loop with the agent injected, gs_gpu_driver
#      attached (BPF + bpf/gpu_host.c): prints the stall-reason table(s),
#      GPU sample counts, top kernels, the agent's status lines
#   3. full path: the loop under `gpusample --` (if build/gpusample is wired
#      for GPU): report, and the step-time ratio with and without gpusample
#   4. the joined profile in the real viewers (issue 6): go tool pprof
#      -sample_index=gpu_samples -lines -top (hottest kernel lines), -tags
#      (stall reasons), -tagfocus on the top stall reason, the Python launch
#      sites above the hottest kernels (-traces), the [unknown launch] share,
#      gpu.folded's shape and the speedscope import (if chromium + npm
#      speedscope are installed)
# Exit: 0 done (numbers printed), 77 no GPU/PyTorch CUDA here, 1 a step broke.
#
# Knobs: STEPS (default 400), PERIOD (CUPTI exponent, default 18), BUILD
# (default build), PYTHON (default python3), GS_DC_SERIALIZED=1 to add a
# kernel-serialized run.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
STEPS=${STEPS:-400}
PERIOD=${PERIOD:-18}
OUT=${OUT:-$(mktemp -d /tmp/gs-device.XXXXXX)}
AGENT=$ROOT/$BUILD/libgpusample_agent.so
DRIVER=$ROOT/$BUILD/fakes/gs_gpu_driver
say() { printf '\n== %s\n' "$*"; }

command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "no nvidia-smi: not a GPU host"; exit 77; }
$PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
	{ echo "PyTorch with CUDA not importable by $PY"; exit 77; }
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
grep -H . /proc/driver/nvidia/params 2>/dev/null | grep -i RmProfilingAdminOnly

say "build"
make BUILD="$BUILD" "$AGENT" "$DRIVER" -j"$(nproc)" >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; echo "build failed"; exit 1; }
make BUILD="$BUILD" "$BUILD/gpusample" -j"$(nproc)" >>"$OUT/build.log" 2>&1 ||
	echo "(gpusample CLI did not build; step 3 skipped)"

cat > "$OUT/train.py" <<'EOF'
import os, sys, time, torch, torch.nn as nn
steps = int(sys.argv[1]); out = sys.argv[2]
torch.manual_seed(0)
dev = "cuda"
model = nn.Sequential(
    nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
    nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
    nn.Conv2d(128, 256, 3, padding=1, stride=2), nn.BatchNorm2d(256), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 1000)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(128, 3, 64, 64, device=dev); y = torch.randint(0, 1000, (128,), device=dev)
loss_fn = nn.CrossEntropyLoss()
def train_step():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss
for _ in range(30):  # warm-up: cuDNN autotune, lazy module loading
    train_step()
torch.cuda.synchronize()
open(out + ".started", "w").close()
t0 = time.perf_counter()
for _ in range(steps):
    train_step()
torch.cuda.synchronize()
dt = (time.perf_counter() - t0) / steps
with open(out, "w") as f:
    f.write(f"{dt}\n")
print(f"step_ms {dt * 1e3:.3f}")
EOF

run_train() { # NAME [env...]: runs the loop, prints the step time
	local name=$1; shift
	env "$@" $PY "$OUT/train.py" "$STEPS" "$OUT/$name.step" >"$OUT/$name.log" 2>&1
	local rc=$?
	[ $rc -eq 0 ] || { tail -20 "$OUT/$name.log"; echo "$name: training exited $rc"; return 1; }
	cat "$OUT/$name.step"
}

say "1. baseline (no agent)"
base=$(run_train base) || exit 1
echo "step time: $(awk -v s="$base" 'BEGIN{printf "%.3f ms", s*1e3}')"

say "1b. agent injected, dormant (nobody attached)"
dormant=$(run_train dormant CUDA_INJECTION64_PATH="$AGENT") || exit 1
echo "step time: $(awk -v s="$dormant" -v b="$base" 'BEGIN{printf "%.3f ms, ratio %.3f", s*1e3, s/b}')"

say "2. agent armed by gs_gpu_driver (continuous, period 2^$PERIOD)"
rm -f "$OUT/armed.step.started"
CUDA_INJECTION64_PATH="$AGENT" GS_AGENT_DEBUG=1 $PY "$OUT/train.py" "$STEPS" "$OUT/armed.step" \
	>"$OUT/armed.log" 2>&1 &
app=$!
for _ in $(seq 600); do [ -e "$OUT/armed.step.started" ] && break; sleep 0.1; done
# attach for as long as the timed loop runs (the driver stops when it exits)
"$DRIVER" -p "$app" -n 1 -t 600 -P "$PERIOD" -v >"$OUT/driver.out" 2>"$OUT/driver.err"
wait $app; rc=$?
grep -E '^(status|summary|arm_ms|batches|samples|not_issued|total|dropped|nonuser|launches|launch_weight|launch_py|cubins|cubins_read|bad_refs|unacked) ' "$OUT/driver.out"
say "stall-reason table(s)"
sed -n '/^stall_table ctx=.*sm_count/,$p' "$OUT/driver.out" | grep -E '^(stall_table|  reason)'
say "top kernels (warp samples)"
grep '^kernel ' "$OUT/driver.out" | head -15
grep 'gpusample-agent' "$OUT/armed.log" | head -20
[ $rc -eq 0 ] || { tail -20 "$OUT/armed.log"; echo "training under the agent exited $rc"; exit 1; }
armed=$(cat "$OUT/armed.step")
echo "step time armed: $(awk -v s="$armed" -v b="$base" 'BEGIN{printf "%.3f ms, ratio %.3f", s*1e3, s/b}')"

if [ "${GS_DC_SERIALIZED:-0}" = 1 ]; then
	say "2b. kernel-serialized"
	rm -f "$OUT/ser.step.started"
	CUDA_INJECTION64_PATH="$AGENT" $PY "$OUT/train.py" "$STEPS" "$OUT/ser.step" >"$OUT/ser.log" 2>&1 &
	app=$!
	for _ in $(seq 600); do [ -e "$OUT/ser.step.started" ] && break; sleep 0.1; done
	"$DRIVER" -p "$app" -n 1 -t 600 -P "$PERIOD" -S >"$OUT/driver_ser.out" 2>&1
	wait $app
	grep -E '^(status|samples|corr_nonzero|corr_matched|launches) ' "$OUT/driver_ser.out"
	echo "step time serialized: $(awk -v s="$(cat "$OUT/ser.step")" -v b="$base" 'BEGIN{printf "%.3f ms, ratio %.3f", s*1e3, s/b}')"
fi

say "3. under gpusample --"
if [ -x "$ROOT/$BUILD/gpusample" ]; then
	(cd "$OUT" && "$ROOT/$BUILD/gpusample" --gpu-period "$PERIOD" -o "$OUT/prof" \
		--format pprof,speedscope,folded -- \
		$PY "$OUT/train.py" "$STEPS" "$OUT/full.step") >"$OUT/full.log" 2>&1
	rc=$?
	tail -60 "$OUT/full.log"
	if [ $rc -eq 0 ] && [ -s "$OUT/full.step" ]; then
		full=$(cat "$OUT/full.step")
		echo "step time under gpusample: $(awk -v s="$full" -v b="$base" 'BEGIN{printf "%.3f ms, ratio %.3f", s*1e3, s/b}')"
	else
		echo "gpusample run failed (rc $rc)"
	fi
else
	echo "no $BUILD/gpusample: skipped"
fi

say "4. the GPU profile in go tool pprof, speedscope, gpu.folded"
P=$OUT/prof.pb.gz
if [ ! -s "$P" ]; then
	echo "no $P: skipped"
elif ! command -v go >/dev/null; then
	echo "go (golang-go) not installed: skipped"
else
	pp() { GOFLAGS=-mod=mod GOTOOLCHAIN=local go tool pprof "$@" 2>"$OUT/pprof.err"; }
	pp -sample_index=gpu_samples -lines -top -nodecount=25 "$P" >"$OUT/gpu_lines.txt" ||
		{ cat "$OUT/pprof.err"; echo "pprof could not read $P"; exit 1; }
	total=$(sed -n 's/.* of \([0-9.]*\) total.*/\1/p' "$OUT/gpu_lines.txt" | head -1)
	echo "GPU samples in the profile: ${total:-0}"
	awk -v t="${total:-0}" 'BEGIN{exit !(t > 0)}' || { echo "no GPU samples in the profile"; exit 1; }
	echo "-- hottest kernel lines (-lines -top); a kernel without file:line comes from a cubin without -lineinfo"
	awk '/flat  flat%/ {f=1; print; next} f && $1 + 0 > 0' "$OUT/gpu_lines.txt" | head -26
	pp -sample_index=gpu_samples -tags "$P" >"$OUT/gpu_tags.txt"
	echo "-- stall reasons and attribution (-tags)"
	awk '/cuda_stall_reason:|gpu_attribution:|cuda_device:/ {f=1} /^ *(pid|tid|thread_name|process_role):/ {f=0} f' \
		"$OUT/gpu_tags.txt" | head -40
	top_reason=$(awk '/cuda_stall_reason:/ {f=1; next} f && NF >= 3 {print $NF; exit}' "$OUT/gpu_tags.txt")
	if [ -n "$top_reason" ]; then
		echo "-- hottest lines stalled on $top_reason (-tagfocus=cuda_stall_reason=$top_reason)"
		pp -sample_index=gpu_samples -lines -top -nodecount=10 -tagfocus=cuda_stall_reason="$top_reason" "$P" |
			awk '/flat  flat%/ {f=1; print; next} f && $1 + 0 > 0'
	fi
	echo "-- Python launch sites of the hottest kernels (-traces; innermost Python frames)"
	"$ROOT/tests/tools/pprof_stacks.py" "$P" -sample_index=gpu_samples -lines >"$OUT/gpu_stacks.txt" 2>/dev/null &&
		awk -F'\t' '$1 > 0 { n = split($3, f, ";"); k = f[1]; site = "";
			for (i = 2; i <= n && site == ""; i++) if (f[i] ~ /\.py:[0-9]+$/) site = f[i]
			key = substr(k, 1, 60) "  <-  " (site == "" ? "(no Python frame)" : site); s[key] += $1 }
			END { for (x in s) printf "%10d  %s\n", s[x], x }' "$OUT/gpu_stacks.txt" | sort -nr | head -15
	unknown=$(awk -F'\t' '$3 ~ /\[unknown launch\]/ {n += $1} END {print n+0}' "$OUT/gpu_stacks.txt" 2>/dev/null)
	under=$(awk -F'\t' '$3 ~ /;train_step( [^;]*)?(;|$)/ {n += $1} END {print n+0}' "$OUT/gpu_stacks.txt" 2>/dev/null)
	echo "GPU samples under train_step: $under of $total; under [unknown launch]: $unknown"
	if [ -s "$OUT/prof.gpu.folded" ]; then
		bad=$(grep -Ecv '^[^;]+(;[^;]+)* [0-9]+$' "$OUT/prof.gpu.folded")
		stall=$(grep -c ';\[stall\] [a-z_]* [0-9]*$' "$OUT/prof.gpu.folded")
		echo "gpu.folded: $(wc -l <"$OUT/prof.gpu.folded") lines, $bad malformed, $stall with a [stall] leaf," \
			"$(awk '{s += $NF} END {print s}' "$OUT/prof.gpu.folded") samples"
	fi
	if [ -s "$OUT/prof.speedscope.json" ]; then
		$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print("speedscope GPU profiles:", [p["name"] for p in d["profiles"] if p["name"].startswith("GPU")])' \
			"$OUT/prof.speedscope.json"
		"$ROOT/tests/tools/speedscope_import.sh" "$OUT/prof.speedscope.json" || echo "(speedscope import: see above)"
	fi
fi
say "summary"
awk -v b="$base" -v d="$dormant" -v a="$armed" 'BEGIN{printf "baseline %.3f ms  dormant x%.3f  armed x%.3f\n", b*1e3, d/b, a/b}'
echo "logs in $OUT"
