#!/bin/bash
# Through the CLI, the two other ways a job meets the agent:
#   1. gpusample -p PID on a running job that already has the agent (put in
#      its environment ahead of time): attach arms it, GPU samples are joined
#      to the Python launch sites, detach leaves the job running and healthy;
#   2. gpusample -- bash -c "...; python3 app" (a wrapper that forks the
#      real program): the child inherits the injection and gets sampled.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"

# 1. -p PID
start_app 60 --rate 600
"$GS" -p "$APP" -d 3 -q -o "$T/p" --format pprof > "$T/p.out" 2>&1 || { cat "$T/p.out"; fail "gpusample -p failed"; }
kill -0 "$APP" 2>/dev/null || { cat "$T/app.out"; fail "the job died during the attach"; }
wait_app
tests/tools/pprof_stacks.py "$T/p.pb.gz" -sample_index=gpu_samples > "$T/p.stacks" || fail "pprof -traces failed"
n=$(awk -F'\t' '{s += $1} END {print s+0}' "$T/p.stacks")
fwd=$(awk -F'\t' '$3 ~ /^axpy;/ && $3 ~ /;forward;/ {s += $1} END {print s+0}' "$T/p.stacks")
ax=$(awk -F'\t' '$3 ~ /^axpy;/ {s += $1} END {print s+0}' "$T/p.stacks")
echo "-p: $n GPU samples, axpy $fwd/$ax under forward"
[ "$n" -gt 0 ] || { cat "$T/p.out"; fail "-p PID: no GPU samples"; }
ratio_at_least "$fwd" "$ax" 0.8 || fail "-p PID: axpy samples not under forward"

# 2. a wrapper that forks the program (the builtins around python keep bash
#    from exec'ing it; `exit $?` keeps its exit status)
(cd "$T" && "$GS" -q -o "$T/w" --format pprof -- bash -c \
	"true; python3 '$APP_PY' '$FAKES/libcuda.so.1' '$CUBINS' --seconds 2 --rate 600; exit \$?") \
	> "$T/w.out" 2>&1 || { cat "$T/w.out"; fail "gpusample -- bash -c failed"; }
pprof -sample_index=gpu_samples -top "$T/w.pb.gz" > "$T/w.top" || fail "pprof failed: $(cat "$T/pprof.err")"
grep -q reduce_sum "$T/w.top" || { cat "$T/w.top"; fail "bash -c wrapper: no GPU samples from the forked python"; }
ok "gpusample -p PID ($n GPU samples, axpy under forward) and -- bash -c wrapper both get GPU samples"
