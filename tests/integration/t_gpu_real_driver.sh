#!/bin/bash
# The real CUDA driver library (Debian's non-free libcuda1, unpacked into the
# build folder by scripts/fetch-libcuda.sh, never installed) on this GPU-less
# host, with the real libcupti of the toolkit: cuInit loads the agent from
# CUDA_INJECTION64_PATH and calls its InitializeInjection (its watcher thread
# runs) before returning CUDA_ERROR_NO_DEVICE; under gpusample -- CMD the
# agent says "no CUDA device", the program exits 0 and the CPU profile is
# written.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (BPF, USDT)"
DRV=$ROOT/$BUILD/realdrv/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1
AGENT=$ROOT/$BUILD/libgpusample_agent.so
[ -e "$DRV" ] || fail "$DRV missing: run scripts/fetch-libcuda.sh (make test-deps does)"
[ -s "$AGENT" ] || fail "$AGENT missing: run make"
cat > "$T/probe.py" <<PY
import ctypes, glob, os, sys, time
cu = ctypes.CDLL("$DRV")
rc = cu.cuInit(0)
try:
    ctypes.CDLL("$AGENT", mode=os.RTLD_NOLOAD)
    loaded = 1
except OSError:
    loaded = 0
time.sleep(1.5)   # a CPU profile, and time for gpusample to meet the agent
threads = sorted(open(t).read().strip() for t in glob.glob("/proc/self/task/*/comm"))
print("cuInit", rc, "agent_loaded", loaded, "watcher", int("gs-agent" in threads), flush=True)
PY
# 1. the driver alone
CUDA_INJECTION64_PATH=$AGENT GS_AGENT_DEBUG=1 timeout 30 /usr/bin/python3 "$T/probe.py" > "$T/alone.out" 2> "$T/alone.err" ||
	{ cat "$T/alone.out" "$T/alone.err"; fail "the program failed with the real driver and the agent"; }
cat "$T/alone.out"; grep 'gpusample-agent' "$T/alone.err" | tail -3
grep -q '^cuInit 100 ' "$T/alone.out" || fail "cuInit did not return CUDA_ERROR_NO_DEVICE (100)"
grep -q 'agent_loaded 1' "$T/alone.out" || fail "the real driver did not load the agent from CUDA_INJECTION64_PATH"
grep -q 'watcher 1' "$T/alone.out" || fail "InitializeInjection did not run (no gs-agent thread)"
grep -q 'no CUDA device' "$T/alone.err" || fail "the agent did not say there is no CUDA device"
# 2. under gpusample
(cd "$T" && timeout 60 "$GS" -q -o "$T/g" --format pprof -- /usr/bin/python3 "$T/probe.py") > "$T/g.out" 2>&1 ||
	{ cat "$T/g.out"; fail "gpusample -- CMD with the real driver failed"; }
grep -q '^cuInit 100 agent_loaded 1 watcher 1' "$T/g.out" || { cat "$T/g.out"; fail "under gpusample: agent not injected by the real driver"; }
"$GS" report "$T/g.pb.gz" > "$T/g.report" 2>&1 || fail "gpusample report failed"
grep -q 'no CUDA device' "$T/g.report" || { cat "$T/g.report"; fail "the profile does not say there is no CUDA device"; }
grep -Eq '[1-9][0-9]* CPU samples' "$T/g.report" || fail "no CPU samples in the profile"
ok "real driver $(basename "$(readlink -f "$DRV")"): agent injected, InitializeInjection ran, cuInit = CUDA_ERROR_NO_DEVICE, reported, clean exit"
