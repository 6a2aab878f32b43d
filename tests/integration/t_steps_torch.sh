#!/bin/bash
# Training steps with no code in the job: a real PyTorch 1.13 loop (Debian
# python3-torch, CPython 3.11) launched under gpusample.  The uprobe on
# torch::autograd::Engine::execute gives one step per backward: the step
# count and each step's wall time match the script's own clock; the loop
# stalls in slow_fetch every 10th step and the report's Steps section names
# exactly those steps slowest, with slow_fetch; pprof's step label selects
# one step alone (go tool pprof -tagfocus=step=20) and phases are labelled;
# the trace has a step track, phases nested in each step; `gpusample report
# FILE.pb.gz` prints the same Steps section as the live report.
# A loop whose forward turns slower at step 13 is reported as growing, with
# forward the phase that grew.  An inference loop (no backward) has no
# steps and says so; a loop calling
# backward thousands of times per second gets no step labels and a note.
# gs-test-timeout: 150
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
W=tests/workloads/train_steps.py

# 1. training: 30 steps, a 300 ms stall in slow_fetch at steps 10, 20, 30
"$GS" -o "$T/train" --format pprof,trace -- /usr/bin/python3 $W --steps 30 --stall-every 10 \
	> "$T/train.out" 2> "$T/train.err" || { rc=$?; cat "$T/train.err"; fail "gpusample exited with $rc"; }
grep -q '^steps=30' "$T/train.out" || fail "the training loop did not finish"
sed -n '/^Steps/,$p' "$T/train.out"
tests/tools/steps_check.py "$T/train.trace.json" "$T/train.out" 20 || fail "step times differ from the script's"
node "$ROOT/tests/tools/check_trace.js" "$T/train.trace.json" --dump > "$T/trace.dump" ||
	{ head -5 "$T/trace.dump"; fail "the trace with its step track breaks the nesting rules"; }
# the step track (tid 0x50000000): 30 step slices at depth 0, phases at depth 1
[ "$(grep -c '^F [0-9]* 1342177280 0 step ' "$T/trace.dump")" = 30 ] || fail "not 30 step slices in the trace"
grep -q '^F [0-9]* 1342177280 1 forward ' "$T/trace.dump" && grep -q '^F [0-9]* 1342177280 1 backward ' "$T/trace.dump" ||
	fail "no forward and backward phases nested in the trace's steps"
grep -q '^  pid [0-9]*: 30 steps' "$T/train.out" || fail "the Steps section does not count 30 steps"
slow=$(sed -n '/^  slowest steps:/,/^  phase split/p' "$T/train.out" | grep -o '^    step [0-9]*' | awk '{print $2}' | sort -n | tr '\n' ' ')
[ "$slow" = "10 20 30 " ] || fail "slowest steps are '$slow', not the stalling 10 20 30"
[ "$(sed -n '/^  slowest steps:/,/^  phase split/p' "$T/train.out" | grep -c 'slow_fetch')" = 3 ] ||
	fail "the slowest steps do not name slow_fetch"
# the saved profile's report prints the same Steps section (the steps ride
# in gpusample's meta message of the pprof)
steps_section() { awk '/^Steps$/{s=1; print; next} s && !/^  /{exit} s' "$1"; }
"$GS" report "$T/train.pb.gz" > "$T/saved.out" 2> "$T/saved.err" || fail "gpusample report FILE.pb.gz failed: $(cat "$T/saved.err")"
steps_section "$T/train.out" > "$T/steps.live"
steps_section "$T/saved.out" > "$T/steps.saved"
diff "$T/steps.live" "$T/steps.saved" || fail "the saved profile's Steps section differs from the live one's"
grep -q '^  pid [0-9]*: 30 steps' "$T/steps.saved" && grep -q '^  step time: p50 ' "$T/steps.saved" ||
	fail "the saved profile's report has no 30 steps and p50"
pprof -tags -tagfocus=step=20 "$T/train.pb.gz" > "$T/tags20" || fail "pprof -tagfocus failed: $(cat "$T/pprof.err")"
awk '/^ step:/{s=1; next} s && /^ *$/{exit} s' "$T/tags20" > "$T/steps20"
cat "$T/steps20"
[ "$(grep -c ': *[0-9]*$' "$T/steps20")" = 1 ] && grep -q '): 20$' "$T/steps20" ||
	fail "-tagfocus=step=20 does not show step 20 alone"
pprof -top -tagfocus=step=20 "$T/train.pb.gz" | grep -q slow_fetch || fail "step 20 lacks its stall"
pprof -top -tagfocus=step=19 "$T/train.pb.gz" | grep -q slow_fetch && fail "step 19 holds step 20's stall"
pprof -tags "$T/train.pb.gz" > "$T/tags"
for ph in data forward backward; do # optimizer: SGD on this model takes under 1 ms a step
	awk '/^ phase:/{s=1; next} s && /^ *$/{exit} s' "$T/tags" | grep -q ": $ph\$" || fail "no samples in phase $ph"
done

# 2. a forward that turns 80 ms slower at step 13: the trend grows, forward grew most
"$GS" -o "$T/slow" --format pprof -- /usr/bin/python3 $W --steps 24 --slow-after 13 --slow-ms 80 \
	> "$T/slow.out" 2> "$T/slow.err" || { rc=$?; cat "$T/slow.err"; fail "gpusample exited with $rc"; }
grep '^  trend' "$T/slow.out"
grep -q '^  trend .*: step time grew; forward grew most' "$T/slow.out" ||
	fail "a forward 80 ms slower from step 13 on is not reported as forward growing"

# 3. inference: no backward, no steps, said
"$GS" -o "$T/infer" --format pprof -- /usr/bin/python3 $W --mode infer --steps 20 \
	> "$T/infer.out" 2> "$T/infer.err" || { rc=$?; cat "$T/infer.err"; fail "gpusample exited with $rc"; }
grep -q '^Steps' "$T/infer.out" && fail "an inference loop has a Steps section"
pprof -raw "$T/infer.pb.gz" | grep -q 'steps: none (no backward seen: an inference loop' ||
	fail "the inference profile does not say why it has no steps"
pprof -tags "$T/infer.pb.gz" | grep -q '^ step:' && fail "an inference loop has step labels"

# 4. backward in a tight inner loop: capped, no step labels, a note
"$GS" -o "$T/inner" --format pprof -- /usr/bin/python3 $W --mode inner --seconds 2 \
	> "$T/inner.out" 2> "$T/inner.err" || { rc=$?; cat "$T/inner.err"; fail "gpusample exited with $rc"; }
grep 'backwards=' "$T/inner.out"
grep -q 'an inner loop, not training steps' "$T/inner.out" || fail "no note on the inner loop"
pprof -tags "$T/inner.pb.gz" | grep -q '^ step:' && fail "an inner loop has step labels"
ok "30 steps timed as the script did, the same Steps section from the .pb.gz, stalls 10 20 30 named slowest with slow_fetch, -tagfocus=step=20 alone, a slower forward named as the growth, inference and inner loops unlabelled"
