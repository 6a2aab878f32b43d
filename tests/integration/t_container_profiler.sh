#!/bin/bash
# gs-test-timeout: 90
# gpusample itself in a privileged container with the host's pid namespace
# (docker run --privileged --pid=host, README "Containers"), the stand-in:
# its own mount namespace, the sid root bound read-only as /, a /proc of
# the host's pid namespace, sysfs (BTF), /dev, a tmpfs /tmp with gpusample
# as /tmp/gs/bin/gpusample and the outputs' folder as /tmp/out: nothing else
# of the host's file system.
#  - `gpusample check` passes there;
#  - `gpusample -p PID` on a Python job running on the host: the job's
#    frames are found (its files through /proc/PID/root, which the
#    container's / does not have);
#  - without --pid=host (unshare -p too): a clear refusal naming the flag,
#    not a profile of whatever the container's pid means.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
sid_need
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
C=$T/croot
mkdir -p "$C" "$T/out"
# in_container [unshare flags] -- CMD...: CMD in the stand-in container.
cat > "$T/in_container" <<'EOS'
#!/bin/sh
# $1 $2 $3 $4: root mount point, sid root, gpusample's build folder, /out
c=$1 sid=$2 b=$3 out=$4
shift 4
flags=""
while [ "$1" != -- ]; do flags="$flags $1"; shift; done
shift
exec unshare -m --propagation private $flags sh -c '
c=$1 sid=$2 b=$3 out=$4
shift 4
mount --bind "$sid" "$c" && mount -o remount,bind,ro "$c" || exit 1
mount -t proc proc "$c/proc" && mount -t sysfs sysfs "$c/sys" || exit 1
mount --rbind /dev "$c/dev" && mount -t tmpfs tmpfs "$c/tmp" || exit 1
mkdir -p "$c/tmp/gs/bin" "$c/tmp/out" && touch "$c/tmp/gs/bin/gpusample" || exit 1
mount --bind "$b/gpusample" "$c/tmp/gs/bin/gpusample" || exit 1
mount --bind "$out" "$c/tmp/out" || exit 1
exec chroot "$c" "$@"' sh "$c" "$sid" "$b" "$out" "$@"
EOS
chmod +x "$T/in_container"
inc() { "$T/in_container" "$C" "$SID_ROOT" "$ROOT/$BUILD" "$T/out" "$@"; }

inc -- /tmp/gs/bin/gpusample check > "$T/check" 2>&1 || fail "gpusample check in the container: $(cat "$T/check")"
grep -q '^ok: ' "$T/check" || fail "check said: $(cat "$T/check")"
ok "check in the container: $(grep '^ok: ' "$T/check")"

go=$T/go
GS_GO=$go GS_SECONDS=3 /usr/bin/python3 "$PYWL/py_chain.py" > "$T/job.out" 2>&1 &
pid=$!
[ ! -e "$SID_ROOT$PYWL/py_chain.py" ] || fail "the sid root has $PYWL: the test would not show files read through /proc/PID/root"
inc -- /tmp/gs/bin/gpusample -p "$pid" -d 60 -o /tmp/out/c -q --format pprof 2> "$T/gs.err" &
gs=$!
for _ in $(seq 300); do
	grep -q '^gpusample: sampling' "$T/gs.err" && break
	kill -0 "$gs" 2>/dev/null || fail "gpusample in the container exited: $(cat "$T/gs.err")"
	sleep 0.1
done
grep -q '^gpusample: sampling' "$T/gs.err" || fail "gpusample in the container did not start: $(cat "$T/gs.err")"
touch "$go"
wait "$pid" || fail "the job exited with $?"
wait "$gs" || fail "gpusample in the container exited with $?: $(cat "$T/gs.err")"
py_read "$T/out/c"
L_LOOP=$(marker_line "$PYWL/py_chain.py" LOOP_LINE)
n=$(grep -c "^$pid .*inner@py_chain.py:$L_LOOP" "$T/out/c")
[ "$n" -ge 20 ] || { py_report "$T/out/c.pb.gz"; fail "only $n samples of pid $pid in the job's loop"; }
ok "profiled host pid $pid from the container: $n samples in inner@py_chain.py:$L_LOOP"

# a container with a pid namespace of its own: pid means something else there
inc -p -f -- /tmp/gs/bin/gpusample -d 1 -o /tmp/out/n -q -- sh -c 'sleep 0.2' > "$T/nopid" 2>&1 &&
	fail "gpusample ran in a pid namespace of its own: $(cat "$T/nopid")"
grep -q 'pid namespace of its own.*--pid=host' "$T/nopid" || fail "no --pid=host hint: $(cat "$T/nopid")"
[ ! -e "$T/out/n.pb.gz" ] || fail "a profile was written in a private pid namespace"
ok "refused without --pid=host: $(cat "$T/nopid")"
