#!/bin/bash
# make demo: profile the bundled training-like workload (a real PyTorch CPU
# training loop with two DataLoader workers) for ~12 s and print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: gpusample needs root for eBPF: run 'sudo make demo'" >&2
	exit 1
fi
mkdir -p build/demo
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { echo "demo: python3-torch missing: run 'sudo make demo' (it installs it)" >&2; exit 1; }
echo "demo: gpusample -o build/demo/train -- $PY tests/workloads/train_torch.py --seconds 12 --workers 2"
./build/gpusample -o build/demo/train --format html,pprof,speedscope,folded -- \
	$PY tests/workloads/train_torch.py --seconds 12 --workers 2
echo
echo "demo: outputs in build/demo/: train.html, train.pb.gz, train.speedscope.json, train.cpu.folded"
echo "demo: open build/demo/train.html in a browser (one file, works offline);"
echo "demo: or: go tool pprof -http=: build/demo/train.pb.gz"
