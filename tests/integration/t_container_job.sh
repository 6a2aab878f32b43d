#!/bin/bash
# gs-test-timeout: 90
# A job in a container, profiled from the host: python3.14 of the sid root
# runs as pid 1 of its own pid namespace, in its own mount namespace (the
# root bound read-only, its own /proc), the docker/podman stand-in.
# `gpusample -p HOSTPID` from the host (the pid the host's ps shows):
#  - Python frames of the script come out (files found through
#    /proc/PID/root, not the host's paths);
#  - the report names the container's view of the pid: "(pid 1 in its
#    namespace)" on the job's row (NStgid's last field), kept through the
#    pprof file (gpusample report reads it back).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
sid_need
C=$T/croot
mkdir -p "$C"
go=$T/go
# unshare -p -f: the forked child is pid 1 in the new namespace; it mounts
# the root read-only (the sid root is shared: never written), that
# namespace's /proc, /dev, a tmpfs /tmp holding the test's $T as /tmp/t
# and the workloads as /tmp/wl (paths the host does not have), then execs
# chroot -> python3.14 (pid 1 stays the job).
GS_GO=/tmp/t/go GS_SECONDS=3 unshare -p -f -m --propagation private sh -c '
c=$0 sid=$1 wl=$2 t=$3
mount --bind "$sid" "$c" && mount -o remount,bind,ro "$c" || exit 1
mount -t proc proc "$c/proc" && mount --rbind /dev "$c/dev" || exit 1
mount -t tmpfs tmpfs "$c/tmp" && mkdir "$c/tmp/t" "$c/tmp/wl" || exit 1
mount --bind "$t" "$c/tmp/t" && mount --bind "$wl" "$c/tmp/wl" || exit 1
exec chroot "$c" python3.14 /tmp/wl/py_chain.py' \
	"$C" "$SID_ROOT" "$PYWL" "$T" > "$T/job.out" 2>&1 &
ush=$!
# the job's host pid: unshare's child, once it runs python
pid=""
for _ in $(seq 100); do
	pid=$(pgrep -P "$ush" | head -1)
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = python3.14 ] && break
	pid=""
	sleep 0.1
done
[ -n "$pid" ] || fail "the containerised job did not start: $(cat "$T/job.out")"
ns=$(awk '/^NStgid:/ {print $NF}' "/proc/$pid/status")
[ "$ns" = 1 ] && [ "$pid" != 1 ] || fail "the job is not pid 1 of its own namespace (host $pid, NStgid $ns)"
[ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || fail "the job shares our mount namespace"
ok "job: host pid $pid, pid $ns in its namespace, its own mount namespace"

gs_start -p "$pid" -d 60 -o "$T/c" -q --format pprof
touch "$go"
wait "$ush" || fail "the job exited with $?: $(cat "$T/job.out")"
gs_wait
py_read "$T/c"
L_LOOP=$(marker_line "$PYWL/py_chain.py" LOOP_LINE)
n=$(grep -c "inner@py_chain.py:$L_LOOP" "$T/c")
[ "$n" -ge 20 ] || { py_report "$T/c.pb.gz"; fail "only $n samples in the job's loop"; }
grep "inner@py_chain.py:$L_LOOP" "$T/c" | head -1 | grep -q "^$pid " ||
	fail "samples not under the host pid $pid: $(head -2 "$T/c")"
ok "$n samples in inner@py_chain.py:$L_LOOP, under host pid $pid"

"$GS" report "$T/c.pb.gz" > "$T/report" 2>"$T/report.err" || fail "report: $(cat "$T/report.err")"
row=$(sed -n '/^Processes/,/^$/p' "$T/report" | awk -v p="$pid" '$1 == p')
echo "$row" | grep -q "python3.14.*(pid 1 in its namespace)$" ||
	fail "the job's row does not name its namespace pid: '$row'$(sed -n '/^Processes/,/^$/p' "$T/report")"
ok "report: $row"
