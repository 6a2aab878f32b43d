#!/bin/bash
# gpusample -p PID --inject refusals, each with its message while the CPU
# profile goes on: Python 3.11, remote debugging disabled (-X
# disable-remote-debug, PYTHON_DISABLE_REMOTE_DEBUG), a main thread blocked
# in C past the bound (the request is withdrawn: the script never runs
# later), a second injection while one is pending, a job without CUDA, and
# a job that exits while its request is pending (nothing left behind).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/python_lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
source "$ROOT/tests/integration/inject_lib.sh"

# 0. --inject is for -p PID with GPU sampling and Python on.
for args in "--inject -- true" "--inject --no-gpu -p $$" "--inject --no-python -p $$"; do
	# shellcheck disable=SC2086 # the arguments, split
	if "$GS" $args > "$T/cli.out" 2>&1; then fail "gpusample $args: accepted"; fi
	grep -q -- "--inject is for -p PID with GPU sampling and Python on" "$T/cli.out" ||
		{ cat "$T/cli.out"; fail "gpusample $args: no message"; }
done

# 1. Python 3.11 (the host's): refused, the CPU profile goes on.
start_plain python3
inject old -d 1
grep -q "CPython 3.11 has no remote debugging protocol (PEP 768 needs 3.14" "$T/old.report" ||
	{ cat "$T/old.out"; fail "3.11: no refusal note"; }
wait_app

# 2. Remote debugging disabled, both ways.
py=$(sid_cmd python3.14)
start_plain "$py" -X disable-remote-debug
inject off1 -d 1
wait_app
py=$(sid_cmd python3.15)
PYTHON_DISABLE_REMOTE_DEBUG=1 start_plain "$py"
inject off2 -d 1
wait_app
for f in off1 off2; do
	grep -q "the process disabled remote debugging" "$T/$f.report" ||
		{ cat "$T/$f.out"; fail "$f: no refusal note"; }
done
[ -z "$(staged)" ] || fail "staged files left by a refusal: $(staged)"

# 3. A main thread blocked in C (libc sleep through ctypes) past the bound:
#    withdrawn, so the script does not run when the thread comes back; and
#    a second gpusample while that request is pending is refused.
py=$(sid_cmd python3.14)
rm -f "$T/blocked.started"
"$py" -c '
import ctypes, sys, time
ctypes.CDLL(sys.argv[2])  # a CUDA job: libcuda mapped
open(sys.argv[1], "w").close()
ctypes.CDLL(None).sleep(12)
t = time.time()
while time.time() - t < 1.5:
    sum(range(1000))
print("agent mapped" if "libgpusample_agent" in open("/proc/self/maps").read() else "no agent")
' "$T/blocked.started" "$FAKES/libcuda.so.1" > "$T/blocked.out" 2>&1 &
APP=$!
for _ in $(seq 200); do [ -e "$T/blocked.started" ] && break; sleep 0.05; done
"$GS" -p "$APP" --inject=5 -d 6 -o "$T/blocked" --format pprof > "$T/blocked.gs" 2>&1 &
gs1=$!
for _ in $(seq 200); do grep -q "asked the interpreter" "$T/blocked.gs" && break; sleep 0.05; done
grep -q "asked the interpreter" "$T/blocked.gs" || { kill "$gs1"; cat "$T/blocked.gs"; fail "first gpusample never made its request"; }
inject second -d 1
grep -q "another gpusample is injecting the agent into this process" "$T/second.report" ||
	{ cat "$T/second.out"; fail "second injection: no refusal"; }
wait "$gs1" || { cat "$T/blocked.gs"; fail "gpusample (blocked job) failed"; }
"$GS" report "$T/blocked.pb.gz" > "$T/blocked.report" 2>&1
grep -q "did not reach a safe point within 5000 ms.*the request was withdrawn" "$T/blocked.report" ||
	{ cat "$T/blocked.gs"; fail "blocked main thread: no timeout note"; }
[ -z "$(staged)" ] || fail "staged files left after a withdrawn request: $(staged)"
wait "$APP" || { cat "$T/blocked.out"; fail "the blocked job exited with $?"; }
grep -qx "no agent" "$T/blocked.out" || { cat "$T/blocked.out"; fail "the withdrawn script ran later"; }
! grep -q "debugger script" "$T/blocked.out" || { cat "$T/blocked.out"; fail "the job tried to run a withdrawn script"; }
# 4. A Python job that never maps libcuda gets nothing.
"$(sid_cmd python3.14)" -c 'import time; time.sleep(4)' &
APP=$!
sleep 0.3
inject nocuda -d 1.5
grep -q -- "--inject: GPU agent not loaded: the job never mapped libcuda.so during the run" "$T/nocuda.out" ||
	{ cat "$T/nocuda.out"; fail "a job without CUDA: not said"; }
! grep -q libgpusample_agent "/proc/$APP/maps" || fail "a job without CUDA got the agent"
kill "$APP"; wait "$APP" 2>/dev/null

# 5. The job exits while the request is pending: nothing is left behind.
rm -f "$T/blocked.started"
"$(sid_cmd python3.14)" -c '
import ctypes, sys
ctypes.CDLL(sys.argv[2])
open(sys.argv[1], "w").close()
ctypes.CDLL(None).sleep(30)
' "$T/blocked.started" "$FAKES/libcuda.so.1" > "$T/exit.out" 2>&1 &
APP=$!
for _ in $(seq 200); do [ -e "$T/blocked.started" ] && break; sleep 0.05; done
"$GS" -p "$APP" --inject -d 20 -o "$T/exit" --format pprof > "$T/exit.gs" 2>&1 &
gs1=$!
for _ in $(seq 200); do grep -q "asked the interpreter" "$T/exit.gs" && break; sleep 0.05; done
[ -n "$(staged)" ] || { kill "$gs1"; cat "$T/exit.gs"; fail "nothing staged while the request is pending"; }
kill -9 "$APP"
wait "$gs1" 2>/dev/null
grep -q "the process exited or exec'd before its interpreter ran the script" "$T/exit.gs" ||
	{ cat "$T/exit.gs"; fail "job gone while pending: not said"; }
[ -z "$(staged)" ] || fail "staged files left after the job exited: $(staged)"
[ ! -e /run/gpusample/inject."$APP" ] || fail "lock file left behind"

ok "--inject refusals: 3.11, remote debugging disabled (-X and environment), blocked main thread (withdrawn), second injection, no CUDA, job gone while pending"
