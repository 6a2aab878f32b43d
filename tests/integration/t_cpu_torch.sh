#!/bin/bash
# Issue 2 #5 and #6: a real PyTorch CPU training loop (Debian python3-torch,
# DataLoader num_workers=2) launched under gpusample: samples from the main
# process and both workers, demangled libtorch frames, go tool pprof -top
# reads it, and speedscope (headless Chromium) imports the .pb.gz and the
# .speedscope.json.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
"$GS" -o "$T/torch" -q --format pprof,speedscope,folded -- \
	/usr/bin/python3 tests/workloads/train_torch.py --seconds 6 --workers 2 > "$T/train.out" ||
	fail "gpusample exited with $?"
cat "$T/train.out"
grep -q 'steps=' "$T/train.out" || fail "the training loop did not finish"
pprof -top "$T/torch.pb.gz" > "$T/top" || fail "go tool pprof -top failed: $(cat "$T/pprof.err")"
head -20 "$T/top"
pprof_stacks "$T/torch.pb.gz" > "$T/stacks" || fail "pprof -traces failed: $(cat "$T/pprof.err")"
main_pids=$(grep -o 'process_role=main' "$T/stacks" | wc -l)
[ "$main_pids" -gt 0 ] || fail "no samples labelled process_role=main"
workers=$(awk -F'\t' '$2 ~ /process_role=dataloader/ { if (match($2, /pid=[^,]*/)) print substr($2, RSTART, RLENGTH) }' "$T/stacks" | sort -u | wc -l)
echo "dataloader worker pids: $workers"
[ "$workers" -ge 2 ] || fail "expected samples from 2 DataLoader workers, got $workers"
grep -Eq '(at::|torch::|c10::)[A-Za-z_]' "$T/stacks" || fail "no demangled libtorch frames (at::, torch::, c10::)"
grep -Eq '_Z[NZ]' "$T/top" && fail "mangled names in pprof -top"
tests/tools/speedscope_import.sh "$T/torch.pb.gz" || fail "speedscope did not import the .pb.gz"
tests/tools/speedscope_import.sh "$T/torch.speedscope.json" || fail "speedscope did not import the .speedscope.json"
ok "torch profile: main + $workers workers, demangled libtorch, speedscope imports both files"
