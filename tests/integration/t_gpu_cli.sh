#!/bin/bash
# Through the CLI: gpusample -- APP injects the agent (CUDA_INJECTION64_PATH),
# arms it, and the profile has GPU samples for the app's kernels; --no-gpu
# injects no agent.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
unset CUDA_INJECTION64_PATH # the CLI must set it itself

run_app() { # extra gpusample options...
	(cd "$T" && "$GS" "$@" -o "$T/p" -- python3 "$APP_PY" "$FAKES/libcuda.so.1" "$CUBINS" \
		--seconds 4 --rate 1000) > "$T/gs.out" 2>&1 || { cat "$T/gs.out"; fail "gpusample $* failed"; }
}

run_app
prof=$(ls "$T"/p*.pb.gz 2>/dev/null | head -1)
[ -n "$prof" ] || { cat "$T/gs.out"; fail "no pprof written"; }
pprof -sample_index=gpu_samples -top "$prof" > "$T/top.txt" || { cat "$T/pprof.err"; fail "pprof failed"; }
grep -q axpy "$T/top.txt" || { cat "$T/top.txt"; fail "no GPU samples for kernel axpy"; }
grep -q reduce_sum "$T/top.txt" || { cat "$T/top.txt"; fail "no GPU samples for reduce_sum"; }
[ "$(stat pcsampling_calls)" -gt 0 ] || fail "agent never armed"

rm -f "$T/cupti.stats"
run_app --no-gpu
# --no-gpu: the CLI does not inject the agent, so nothing loads the CUPTI
# double (which writes the stats file)
[ ! -e "$T/cupti.stats" ] || { show; fail "--no-gpu still injected the agent"; }
ok "gpusample -- app: GPU samples for axpy and reduce_sum; --no-gpu injects no agent"
