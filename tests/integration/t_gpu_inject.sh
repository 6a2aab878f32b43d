#!/bin/bash
# gpusample -p PID --inject on jobs started with nothing of gpusample in
# their environment, on CPython 3.14 and 3.15 of the sid root (the job
# chrooted in its own mount namespace, gpusample outside):
#   - the interpreter runs gpusample's script (PEP 768), the agent loads and
#     arms, the profile has GPU samples of the job's kernels and says
#     --inject was used; after detach the job runs on, CUPTI released, and
#     no staged file is left; a second gpusample finds the agent loaded and
#     arms it as it is;
#   - another CUPTI subscriber holds CUPTI: the injected agent says who;
#   - a job run as nobody gets the agent, and is refused when its user
#     cannot read the staged files.
# Refusals: t_gpu_inject_refusals.sh.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/python_lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
source "$ROOT/tests/integration/inject_lib.sh"

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
	[ $(( $(stat call.cuptiUnsubscribe) + $(stat call.cuptiFinalize) )) = "$subs" ] || { show; fail "$v: CUPTI not released (unsubscribed or finalized) at each detach"; }
	[ "$(stat launches)" -gt "$(stat launch_callbacks)" ] || { show; fail "$v: launches stopped with the detach"; }
	echo "$v: $(grep -c . "$T/i$v.pb.gz.gputop") GPU top lines, $(stat launches) launches, $(stat launch_callbacks) seen armed"
done

# 2. Another CUPTI subscriber (a torch.profiler stand-in) holds CUPTI: the
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

# 3. A job run as nobody: the staged files are checked readable as its user.
#    Its own /tmp (a tmpfs, mode 1770: root's, sticky) passes as a place to
#    stage but nobody cannot enter it: refused, nothing left there; with the
#    host's /tmp it gets the agent.
# as_nobody TMP: a wrapper like sid_cmd's running python3.14 as 65534 in
# the sid root, with the host's /tmp (TMP=host) or a 1770 tmpfs (TMP=closed)
# shellcheck disable=SC2016 # $r: expanded by the wrapper's sh, not here
as_nobody() {
	local mnt='mount --rbind /tmp "$r/tmp"'
	[ "$1" = closed ] && mnt='mount -t tmpfs -o mode=1770 tmpfs "$r/tmp"'
	cat > "$T/nobody-$1" <<EOS
#!/bin/sh
exec unshare -m --propagation private sh -c '
r=\$0
for d in /proc /dev /sys "$ROOT"; do
	mkdir -p "\$r\$d" && mount --rbind "\$d" "\$r\$d" || exit 1
done
$mnt || exit 1
exec chroot --userspec=65534:65534 "\$r" python3.14 "\$@"' "$SID_ROOT" "\$@"
EOS
	chmod +x "$T/nobody-$1"
}
for tmp in host closed; do
	as_nobody "$tmp"
	"$T/nobody-$tmp" -c '
import ctypes, sys, time
ctypes.CDLL(sys.argv[1])
print("started", flush=True)
t = time.time()
while time.time() - t < 5:
    sum(range(1000))
' "$FAKES/libcuda.so.1" > "$T/nobody.out" 2>&1 &
	APP=$!
	for _ in $(seq 200); do grep -q started "$T/nobody.out" && break; sleep 0.05; done
	grep -q started "$T/nobody.out" || { cat "$T/nobody.out"; fail "the job as nobody did not start"; }
	inject "nobody-$tmp" -d 1.5
	if [ "$tmp" = host ]; then
		grep -q -- "--inject: the interpreter ran gpusample's script and the GPU agent was loaded" \
			"$T/nobody-$tmp.report" || { cat "$T/nobody-$tmp.out"; fail "a job run as nobody: agent not injected"; }
	else
		grep -q "the job's user (uid 65534) cannot read /tmp/.gpusample-inject-[0-9a-f]*/libgpusample_agent.so" \
			"$T/nobody-$tmp.report" || { cat "$T/nobody-$tmp.out"; fail "unreadable staging: no refusal"; }
		[ -z "$(ls -A "/proc/$APP/root/tmp")" ] || fail "staged files left in the job's /tmp: $(ls -A "/proc/$APP/root/tmp")"
	fi
	wait "$APP" || { cat "$T/nobody.out"; fail "the job as nobody exited with $?"; }
done

ok "--inject: 3.14 and 3.15 jobs (as root and as nobody) got the agent and GPU samples, CUPTI released at detach; CUPTI held by another subscriber and unreadable staged files said"
