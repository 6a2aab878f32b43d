#!/bin/bash
# Training steps on PyTorch 2.x: the sid root's python3.14 and torch 2.14
# (its own libtorch_cpu, root-owned, found through /proc/PID/root and
# map_files while the job runs in its own mount namespace).  20 steps with a
# 300 ms stall in slow_fetch every 10th: 20 steps, each timed as the script
# timed it, steps 10 and 20 named slowest with slow_fetch.
# gs-test-timeout: 120
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
sid_need
PY=$(sid_cmd python3.14)
"$GS" -o "$T/prof" --format pprof,trace -- "$PY" "$ROOT/tests/workloads/train_steps.py" --steps 20 \
	--stall-every 10 > "$T/prof.out" 2> "$T/prof.err" || { rc=$?; cat "$T/prof.err"; fail "gpusample exited with $rc"; }
grep -q '^steps=20' "$T/prof.out" || { cat "$T/prof.err"; fail "the training loop did not finish"; }
sed -n '/^Steps/,$p' "$T/prof.out" | head -12
tests/tools/steps_check.py "$T/prof.trace.json" "$T/prof.out" 20 || fail "step times differ from the script's"
grep -q '^  pid [0-9]*: 20 steps' "$T/prof.out" || fail "the Steps section does not count 20 steps"
slow=$(sed -n '/^  slowest steps:/,/^  phase split/p' "$T/prof.out" | grep -o '^    step [0-9]*' | head -2 | awk '{print $2}' | sort -n | tr '\n' ' ')
[ "$slow" = "10 20 " ] || fail "the two slowest steps are '$slow', not the stalling 10 20"
[ "$(sed -n '/^  slowest steps:/,/^  phase split/p' "$T/prof.out" | head -3 | grep -c 'slow_fetch')" = 2 ] ||
	fail "the slowest steps do not name slow_fetch"
pprof -top -tagfocus=step=10 "$T/prof.pb.gz" | grep -q slow_fetch || fail "step 10 lacks its stall"
ok "torch 2.x on python3.14: 20 steps timed as the script did, stalls 10 20 named slowest with slow_fetch"
