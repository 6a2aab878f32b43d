#!/bin/bash
# gpusample -p PID --inject on a job started with nothing of gpusample in
# its environment (no CUDA_INJECTION64_PATH, no GS_*), on CPython 3.14 and
# 3.15 of the sid root (the job chrooted in its own mount namespace,
# gpusample outside), with the CUDA/CUPTI doubles found by the loader's
# path as a cluster's CUDA libraries are:
#   - the interpreter runs gpusample's script (PEP 768), the agent loads and
#     arms, the profile has GPU samples of the job's kernels and says
#     --inject was used; after detach the job runs on, CUPTI released, and
#     no staged file is left; a second gpusample finds the agent loaded and
#     arms it as it is;
#   - refusals, each with its message while the CPU profile goes on: Python
#     3.11, remote debugging disabled (-X disable-remote-debug,
#     PYTHON_DISABLE_REMOTE_DEBUG), a main thread blocked in C past the
#     bound (the request is withdrawn: the script never runs later), and a
#     second injection while one is pending; another CUPTI subscriber holds
#     CUPTI (the agent, injected, says who); the job exits while the request
#     is pending (nothing left behind).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/python_lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
unset CUDA_INJECTION64_PATH GS_CUPTI_PATH GS_AGENT_OPTS
sid_need

staged() { ls -d /tmp/.gpusample-inject-* 2>/dev/null; }
[ -z "$(staged)" ] || fail "staged directories left by an earlier run: $(staged)"

# start_plain PYTHON [PYTHON ARGS]: gpu_app (more arguments in APP_ARGS) with
# the doubles on the loader's path and nothing of gpusample; sets APP.
start_plain() {
	local py=$1; shift
	rm -f "$T/app.started" "$T/app.stop" "$T/cupti.stats"
	# shellcheck disable=SC2046,SC2086 # one -u per GS_ variable; APP_ARGS split
	env $(compgen -e | grep '^GS_' | sed 's/^/-u /') LD_LIBRARY_PATH="$FAKES" \
		"$py" "$@" "$APP_PY" "$FAKES/libcuda.so.1" "$CUBINS" --seconds 60 \
		--rate 600 --primary --start-file "$T/app.started" --stop-file "$T/app.stop" ${APP_ARGS:-} \
		< /dev/null > "$T/app.out" 2>&1 &
	APP=$!
	for _ in $(seq 200); do [ -e "$T/app.started" ] && break; sleep 0.05; done
	[ -e "$T/app.started" ] || { cat "$T/app.out"; fail "gpu_app ($py) did not start"; }
	! tr '\0' '\n' < "/proc/$APP/environ" | grep -q '^CUDA_INJECTION64_PATH=\|^GS_' ||
		fail "the job has a gpusample variable"
}

# inject NAME ARGS...: gpusample -p $APP --inject ARGS; profile $T/NAME.pb.gz,
# stderr and report $T/NAME.out
inject() {
	local name=$1; shift
	"$GS" -p "$APP" --inject "$@" -o "$T/$name" --format pprof > "$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out"; fail "gpusample -p --inject ($name) failed"; }
	"$GS" report "$T/$name.pb.gz" > "$T/$name.report" 2>&1 || fail "gpusample report $name failed"
	# the CPU side goes on: the main thread's wall time (on- and off-CPU)
	awk '/s of wall time/ { for (i = 1; i < NF; i++) if ($(i + 1) == "s" && $i + 0 > 0) ok = 1 }
		END { exit !ok }' "$T/$name.report" || { cat "$T/$name.report"; fail "$name: no wall time in the profile"; }
}

gpu_kernels() {
	pprof -sample_index=gpu_samples -top "$1" > "$1.gputop" || fail "pprof failed: $(cat "$T/pprof.err")"
	for k in axpy reduce_sum; do
		grep -q "$k" "$1.gputop" || { cat "$1.gputop"; fail "$1: no GPU samples of $k"; }
	done
}

# 1. The happy path on 3.14 and 3.15.
for v in 3.14 3.15; do
	py=$(sid_cmd "python$v")
	start_plain "$py"
	inject "i$v" -d 2
	grep -q -- "--inject: the interpreter ran gpusample's script and the GPU agent was loaded" \
		"$T/i$v.report" || { cat "$T/i$v.out"; fail "$v: the profile does not say the agent was injected"; }
	gpu_kernels "$T/i$v.pb.gz"
	kill -0 "$APP" 2>/dev/null || { cat "$T/app.out"; fail "$v: the job died during the attach"; }
	[ -z "$(staged)" ] || fail "$v: staged files left after detach: $(staged)"
	grep -q 'gpusample-inject.*libgpusample_agent.so (deleted)' "/proc/$APP/maps" ||
		fail "$v: the agent is not mapped in the job after detach"
	if [ "$v" = 3.14 ]; then
		# A second gpusample: the agent is loaded (its file removed): armed as it is.
		inject "again" -d 2
		grep -q -- "--inject: the GPU agent is already loaded: armed as it is" "$T/again.report" ||
			{ cat "$T/again.out"; fail "second run: not told the agent was loaded"; }
		gpu_kernels "$T/again.pb.gz"
	fi
	sleep 0.5 # the job runs on after detach
	wait_app
	subs=$([ "$v" = 3.14 ] && echo 2 || echo 1)
	[ "$(stat subscribe_ok.CUPTI_for_gpusample)" = "$subs" ] || { show; fail "$v: agent subscribed $(stat subscribe_ok.CUPTI_for_gpusample) times, expected $subs"; }
	[ "$(stat call.cuptiUnsubscribe)" = "$subs" ] || { show; fail "$v: CUPTI not released at each detach"; }
	[ "$(stat launches)" -gt "$(stat launch_callbacks)" ] || { show; fail "$v: launches stopped with the detach"; }
	echo "$v: $(grep -c . "$T/i$v.pb.gz.gputop") GPU top lines, $(stat launches) launches, $(stat launch_callbacks) seen armed"
done

# 2. Python 3.11 (the host's): refused, the CPU profile goes on.
start_plain python3
inject old -d 1
grep -q "CPython 3.11 has no remote debugging protocol (PEP 768 needs 3.14" "$T/old.report" ||
	{ cat "$T/old.out"; fail "3.11: no refusal note"; }
wait_app

# 3. Remote debugging disabled, both ways.
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

# 4. A main thread blocked in C (libc sleep through ctypes) past the bound:
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
# 4b. A Python job that never maps libcuda gets nothing.
"$(sid_cmd python3.14)" -c 'import time; time.sleep(4)' &
APP=$!
sleep 0.3
inject nocuda -d 1.5
grep -q -- "--inject: GPU agent not loaded: the job never mapped libcuda.so during the run" "$T/nocuda.out" ||
	{ cat "$T/nocuda.out"; fail "a job without CUDA: not said"; }
! grep -q libgpusample_agent "/proc/$APP/maps" || fail "a job without CUDA got the agent"
kill "$APP"; wait "$APP" 2>/dev/null

# 5. Another CUPTI subscriber (a torch.profiler stand-in) holds CUPTI: the
#    agent is injected and says who holds it; the CPU profile goes on.
K=$T/kineto
mkdir -p "$K"
APP_ARGS="--kineto-dir $K" start_plain "$(sid_cmd python3.15)"
echo > "$K/sub"
for _ in $(seq 200); do [ -s "$K/log" ] && break; sleep 0.05; done
grep -q "^sub rc=0 " "$K/log" 2>/dev/null || { cat "$T/app.out"; fail "the Kineto stand-in did not subscribe"; }
inject held -d 2
grep -q 'GPU sampling off: another CUPTI subscriber holds CUPTI: "CUPTI for Kineto"' "$T/held.report" ||
	{ cat "$T/held.out"; fail "CUPTI held: the report does not name the subscriber"; }
grep -q -- "--inject: the interpreter ran gpusample's script" "$T/held.report" ||
	fail "CUPTI held: the agent was not injected"
wait_app

# 6. The job exits while the request is pending: nothing is left behind.
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

ok "--inject: 3.14 and 3.15 jobs got the agent and GPU samples, CUPTI released at detach; 3.11, disabled remote debug, blocked main thread and a second injection refused"
