#!/bin/bash
# Training steps on PyTorch 2.x: the sid root's python3.14 and torch 2.14
# (its own libtorch_cpu, root-owned, found through /proc/PID/root and
# map_files while the job runs in its own mount namespace), with gradient
# accumulation: 3 backward calls per optimizer step, 16 steps, a 300 ms
# stall in slow_fetch every 8th.  The optimizer's region marks the steps
# (torch 2.x enters record_function_enter_new for "Optimizer.step#..."):
# 16 steps, not 48, "3 backward calls per step", each step timed as the
# script timed it, steps 8 and 16 named slowest with slow_fetch.
# gs-test-timeout: 120
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
sid_need
PY=$(sid_cmd python3.14)
"$GS" -o "$T/prof" --format pprof,trace -- "$PY" "$ROOT/tests/workloads/train_steps.py" --steps 16 \
	--accum 3 --stall-every 8 > "$T/prof.out" 2> "$T/prof.err" || { rc=$?; cat "$T/prof.err"; fail "gpusample exited with $rc"; }
grep -q '^steps=16' "$T/prof.out" || { cat "$T/prof.err"; fail "the training loop did not finish"; }
sed -n '/^Steps/,$p' "$T/prof.out" | head -12
tests/tools/steps_check.py "$T/prof.trace.json" "$T/prof.out" 20 || fail "step times differ from the script's"
grep -q "^  pid [0-9]*: 16 steps (boundary: start of the optimizer's step" "$T/prof.out" ||
	fail "the Steps section does not count 16 optimizer steps"
grep -q '^  gradient accumulation: 3 backward calls per step' "$T/prof.out" ||
	fail "gradient accumulation not told"

slow=$(sed -n '/^  slowest steps:/,/^  phase split/p' "$T/prof.out" | grep -o '^    step [0-9]*' | head -2 | awk '{print $2}' | sort -n | tr '\n' ' ')
[ "$slow" = "8 16 " ] || fail "the two slowest steps are '$slow', not the stalling 8 16"
[ "$(sed -n '/^  slowest steps:/,/^  phase split/p' "$T/prof.out" | head -3 | grep -c 'slow_fetch')" = 2 ] ||
	fail "the slowest steps do not name slow_fetch"
pprof -top -tagfocus=step=8 "$T/prof.pb.gz" | grep -q slow_fetch || fail "step 8 lacks its stall"
ok "torch 2.x on python3.14, 3 backwards per step: 16 optimizer steps timed as the script did, stalls 8 16 named slowest with slow_fetch"
