#!/bin/bash
# gs-test-timeout: 120
# gpusample -p PID --inject against a hostile job owner (jobs run as nobody
# or with changed ids, CPython 3.14 of the sid root, chrooted):
#   1. a ctypes.py planted in the job's working directory (first on its
#      sys.path, the job never imported ctypes) is never run: the injected
#      script imports only built-in modules, and the agent still loads;
#   2. a process its user could not ptrace is refused: ids changed (real
#      uid nobody, effective uid root), or not dumpable;
#   3. a job whose /tmp, /var/tmp and /dev/shm are binds of the host's /etc
#      is refused: nothing is made in /etc;
#   4. gpusample killed (SIGKILL) while the request is pending: the request
#      is withdrawn, the staged files and the lock file removed, and the
#      job never loads the agent; killed together with its watchdog: the
#      script finds no gpusample holding its lock and loads nothing.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/python_lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
source "$ROOT/tests/integration/inject_lib.sh"
[ -x "$SID_ROOT/usr/bin/setpriv" ] || fail "setpriv missing in the sid root $SID_ROOT"
chmod 755 "$T"
NOBODY="--reuid=65534 --regid=65534 --clear-groups"

# job NAME SETPRIV_ARGS [MOUNTS]: $T/NAME runs python3.14 in the sid root
# through setpriv SETPRIV_ARGS (sid_wrap), MOUNTS after the usual binds.
job() { sid_wrap "$T/$1" "setpriv $2 python3.14" "${3:-}"; }

# start NAME ARGS...: the wrapper NAME in the background, until it prints
# "started"; sets APP.
start() {
	local name=$1; shift
	"$T/$name" "$@" > "$T/$name.job" 2>&1 &
	APP=$!
	for _ in $(seq 200); do grep -q started "$T/$name.job" && break; sleep 0.05; done
	grep -q started "$T/$name.job" || { cat "$T/$name.job"; fail "$name: the job did not start"; }
}

# A CUDA job (libcuda mapped) computing for $1 s, then saying whether the
# agent is mapped; ctypes only when $2 says so.
loop_job() {
	cat <<EOF
import sys, time
if "$2" == "ctypes":
    import ctypes
    ctypes.CDLL(sys.argv[1])
    ${3:-}
else:
    import _ctypes
    _ctypes.dlopen(sys.argv[1], 2 | 256)
print("started", flush=True)
t = time.time()
while time.time() - t < $1:
    sum(range(1000))
print("agent mapped" if "libgpusample_agent" in open("/proc/self/maps").read() else "no agent", flush=True)
EOF
}

# 1. A planted ctypes.py in the job's working directory (python -c: '' first
#    on sys.path, the directory searched at each import).
mkdir "$T/job"
cat > "$T/job/ctypes.py" <<EOF
import os
open("$T/job/PLANTED_RAN", "w").write("uid %d euid %d\n" % (os.getuid(), os.geteuid()))
EOF
chown -R nobody:nogroup "$T/job"
job planted "$NOBODY"
start planted -c "import os; os.chdir('$T/job')
$(loop_job 3 plain)" "$FAKES/libcuda.so.1"
inject planted -d 1.5
wait "$APP" || { cat "$T/planted.job"; fail "the planted job exited with $?"; }
[ ! -e "$T/job/PLANTED_RAN" ] || fail "the job's ctypes.py ran in the injected script: $(cat "$T/job/PLANTED_RAN")"
grep -q -- "--inject: the interpreter ran gpusample's script and the GPU agent was loaded" "$T/planted.report" ||
	{ cat "$T/planted.out"; fail "planted ctypes.py: the agent was not loaded"; }
grep -qx "agent mapped" "$T/planted.job" || { cat "$T/planted.job"; fail "planted ctypes.py: agent not mapped"; }

# 2. Processes their user could not ptrace.
# refused NAME SETPRIV_ARGS WHY [LINE]: a CUDA job through setpriv (LINE
# run after its libcuda is mapped) is refused with WHY, and gets no agent.
refused() {
	job "$1" "$2"
	start "$1" -c "$(loop_job 3 ctypes "${4:-}")" "$FAKES/libcuda.so.1"
	inject "$1" -d 1.5
	wait "$APP"
	grep -q "$3" "$T/$1.report" || { cat "$T/$1.out"; fail "$1: not refused"; }
	grep -qx "no agent" "$T/$1.job" || fail "$1: the agent was loaded"
}
refused setuid "--ruid=65534 --euid=0 --rgid=65534 --egid=0 --clear-groups" \
	"changed its Uids (real 65534, effective 0, saved 0, fs 0): its user could not ptrace it"
refused nodump "$NOBODY" "is not dumpable .*its user could not ptrace it" \
	'ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)'

# 3. The host's /etc bound at the job's /tmp, /var/tmp and /dev/shm.
etc_before=$(ls -a /etc | md5sum)
job etc "$NOBODY" 'for d in tmp var/tmp dev/shm; do mount --bind /etc "$r/$d" || exit 1; done'
start etc -c "$(loop_job 3 ctypes)" "$FAKES/libcuda.so.1"
inject etc -d 1.5
wait "$APP"
grep -q "no safe directory in the job's root for the agent.*(last: is a bind mount of a directory that is not a temporary one)" "$T/etc.report" ||
	{ cat "$T/etc.out"; fail "/etc bound at /tmp: not refused"; }
[ "$(ls -a /etc | md5sum)" = "$etc_before" ] || fail "/etc changed: $(find /etc -maxdepth 1 -name '.gpusample*')"

# 4. SIGKILL while the request is pending (the main thread blocked in C).
blocked='
import ctypes, sys, time
ctypes.CDLL(sys.argv[1])
print("started", flush=True)
ctypes.CDLL(None).sleep(4)
t = time.time()
while time.time() - t < 1:
    sum(range(1000))
print("agent mapped" if "libgpusample_agent" in open("/proc/self/maps").read() else "no agent", flush=True)
'
job blocked "$NOBODY"
for how in gpusample both; do
	start blocked -c "$blocked" "$FAKES/libcuda.so.1"
	"$GS" -p "$APP" --inject=30 -d 20 -o "$T/k$how" --format pprof > "$T/k$how.gs" 2>&1 &
	gs=$!
	for _ in $(seq 200); do grep -q "asked the interpreter" "$T/k$how.gs" && break; sleep 0.05; done
	grep -q "asked the interpreter" "$T/k$how.gs" || { kill "$gs"; cat "$T/k$how.gs"; fail "$how: no request made"; }
	[ -n "$(staged)" ] && [ -e "/run/gpusample/inject.$APP" ] || fail "$how: nothing staged or locked while pending"
	if [ "$how" = both ]; then
		wd=$(pgrep -P "$gs" -x gs-inject-wd) || fail "no watchdog process"
		kill -9 "$wd"
	fi
	kill -9 "$gs"
	wait "$gs" 2>/dev/null
	if [ "$how" = gpusample ]; then
		for _ in $(seq 60); do [ -z "$(staged)" ] && break; sleep 0.05; done
		[ -z "$(staged)" ] || fail "killed gpusample: staged files left: $(staged)"
		[ ! -e "/run/gpusample/inject.$APP" ] || fail "killed gpusample: lock file left"
	fi
	wait "$APP" || { cat "$T/blocked.job"; fail "$how: the job exited with $?"; }
	grep -qx "no agent" "$T/blocked.job" || { cat "$T/blocked.job"; fail "killed $how: the job loaded the agent later"; }
	rm -rf /tmp/.gpusample-inject-* "/run/gpusample/inject.$APP"
done

ok "--inject: planted ctypes.py never run, ids changed and non-dumpable refused, /etc bound at /tmp refused, SIGKILL while pending withdrawn and cleaned (and the script refuses with no gpusample)"
