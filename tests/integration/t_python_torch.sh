#!/bin/bash
# Python frames, done-when (5): the real PyTorch CPU training loop
# (tests/workloads/train_torch.py on Debian's python3 + python3-torch,
# DataLoader num_workers=2) under `gpusample -- python3 ...`, read back with
# go tool pprof -traces -lines:
#  - the main thread (pid == tid, process_role=main) shows the training
#    step's Python frames: train_step -> SmallNet.forward,
#    train_step -> Tensor.backward, train_step -> ... -> SGD.step;
#  - both DataLoader worker processes (their own pids) show
#    SyntheticImages.__getitem__.
# -F 499: the optimizer step is ~2% of the loop; at 99 Hz a 4 s run could
# miss it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
"$GS" -F 499 -o "$T/torch" -q --format pprof -- /usr/bin/python3 "$PYWL/train_torch.py" \
	--seconds 4 --workers 2 > "$T/train.out" 2> "$T/gs.err" || { cat "$T/gs.err"; fail "gpusample exited with $?"; }
cat "$T/train.out"
main=$(sed -n 's/.* pid=\([0-9]*\).*/\1/p' "$T/train.out")
[ -n "$main" ] || fail "the training loop did not finish"
py_stacks "$T/torch.pb.gz" > "$T/st"
awk -v m="$main" '$1 == m && $2 == m' "$T/st" | cut -d'|' -f2 > "$T/main"
f=train_torch.py
forward=$(grep -c "train_step@$f:[0-9]*;SmallNet.forward@$f:" "$T/main")
backward=$(grep -c "train_step@$f:[0-9]*;Tensor.backward@_tensor.py:" "$T/main")
step=$(grep -c "train_step@$f:[0-9]*;.*SGD.step@sgd.py:" "$T/main")
echo "main thread $main: $(wc -l < "$T/main") samples; train_step -> forward $forward, backward $backward, optimizer step $step"
[ "$forward" -ge 5 ] && [ "$backward" -ge 5 ] && [ "$step" -ge 1 ] || {
	sed 's/.*train_step/train_step/' "$T/main" | sort | uniq -c | sort -rn | head -15
	fail "the main thread lacks the training step's Python frames"
}
# DataLoader workers: their own pids, __getitem__ in their Python stacks.
grep -F "SyntheticImages.__getitem__@$f:" "$T/st" | awk -v m="$main" '$1 != m {print $1}' | sort | uniq -c > "$T/w"
echo "worker pids with SyntheticImages.__getitem__ samples:" $(awk '{print $2 ":" $1}' "$T/w")
nw=$(awk '$1 >= 3' "$T/w" | wc -l)
[ "$nw" -ge 2 ] || { cut -d'|' -f1 "$T/st" | sort | uniq -c; fail "expected 2 DataLoader workers with __getitem__, got $nw"; }
roles=$(grep -F 'SyntheticImages.__getitem__ ' "$T/torch.pb.gz.traces" | grep -c 'process_role=dataloader')
[ "$roles" -ge 1 ] || fail "worker samples not labelled process_role=dataloader"
ok "training step frames on the main thread, __getitem__ in $nw DataLoader workers"
