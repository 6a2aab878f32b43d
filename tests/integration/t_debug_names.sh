#!/bin/bash
# Issue 22, item 4: a stripped library's functions get their names from a
# separate debug file, (1) installed by build-id under /usr/lib/debug inside
# the job's own root (a tiny chroot built here), and (2) served by a real
# debuginfod on loopback (DEBUGINFOD_URLS), fetched into gpusample's root
# cache and named in a note.  The named function is static: only the debug
# file's .symtab knows it, and a control run without either file must not.
# A missing tool fails (make test-deps installs them).
source "$(dirname "$0")/lib.sh"
for t in objcopy strip debuginfod gcc curl chroot; do
	command -v $t >/dev/null || fail "$t missing (make test-deps)"
done
[ -e /usr/lib/x86_64-linux-gnu/libdebuginfod.so.1 ] || fail "libdebuginfod.so.1 missing (libdebuginfod1)"
chmod 755 "$T"
# A token in the code makes the build-id new on every run: the server, not
# gpusample's cache from a previous run, must answer.
tok="$$_$RANDOM$RANDOM"
cat >"$T/libdn.c" <<C
volatile unsigned long sink;
const char *dn_token = "$tok";
static __attribute__((noinline)) void dbgonly_spin_inner(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
	__asm__ volatile("" ::: "memory");
}
void dn_spin(double secs)
{
	for (;;)
		dbgonly_spin_inner((unsigned long)(secs * 1e7));
}
C
cat >"$T/main.c" <<'C'
void dn_spin(double);
int main(void) { dn_spin(1); return 0; }
C
gcc -g -O1 -shared -fPIC -Wl,--build-id=sha1 -o "$T/libdn.full.so" "$T/libdn.c" || fail "cc lib"
objcopy --only-keep-debug "$T/libdn.full.so" "$T/libdn.debug" || fail "only-keep-debug"
strip --strip-debug --strip-unneeded -o "$T/libdn.so" "$T/libdn.full.so" || fail "strip"
! nm "$T/libdn.so" 2>/dev/null | grep -q dbgonly_spin_inner || fail "strip kept the static symbol"
bid=$(readelf -n "$T/libdn.so" | awk '/Build ID/{print $3}')
[ ${#bid} -eq 40 ] || fail "no build-id in the stripped library"
[ ! -e "/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug" ] || fail "host already has the debug file"
gcc -O1 -o "$T/main" "$T/main.c" -L"$T" -ldn -Wl,-rpath,/opt/dn || fail "cc main"

# The tiny root: the loader, libc, the job and the stripped library.
R=$T/jobroot
mkdir -p "$R/opt/dn" "$R/lib64" "$R/lib/x86_64-linux-gnu" "$R/usr/lib/debug/.build-id/${bid:0:2}"
cp /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
cp /lib/x86_64-linux-gnu/libc.so.6 "$R/lib/x86_64-linux-gnu/"
cp "$T/main" "$R/opt/dn/main"
cp "$T/libdn.so" "$R/opt/dn/libdn.so"

# run_job OUT [env...]: profile the chrooted job for 2 s.
run_job() {
	local out=$1
	shift
	# the job spins until killed: `timeout` (outside the chroot, followed as
	# its parent) ends it after the 2 s window, so no run leaves it behind
	env "$@" timeout -k 5 60 "$GS" -q -d 2 -o "$T/$out" -- timeout -s KILL 4 chroot "$R" /opt/dn/main 2>"$T/$out.err"
	[ -s "$T/$out.pb.gz" ] || fail "$out: no profile: $(tail -3 "$T/$out.err")"
	"$GS" report "$T/$out.pb.gz" >"$T/$out.rep" 2>&1 || fail "$out: report: $(tail -3 "$T/$out.rep")"
	grep -q 'dn_spin' "$T/$out.rep" || fail "$out: no frame in libdn.so: $(head -30 "$T/$out.rep")"
}

# Control: no debug file anywhere, no server: the static function is an offset.
run_job ctl -u DEBUGINFOD_URLS
! grep -q dbgonly_spin_inner "$T/ctl.rep" || fail "control: named without a debug file"
grep -q 'libdn.so+0x' "$T/ctl.rep" || fail "control: no offset in libdn.so: $(head -20 "$T/ctl.rep")"

# (1) The debug file under /usr/lib/debug/.build-id inside the job's root.
cp "$T/libdn.debug" "$R/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug"
run_job root -u DEBUGINFOD_URLS
grep -q dbgonly_spin_inner "$T/root.rep" || fail "root debug file: not named: $(head -30 "$T/root.rep")"
rm -r "$R/usr/lib/debug"
ok "named from /usr/lib/debug/.build-id in the job's root"

# (2) A loopback debuginfod serving only the debug file.
mkdir -p "$T/srv"
cp "$T/libdn.debug" "$T/srv/"
for _ in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 20000))
	debuginfod -d "$T/dbg.sqlite" -p $port -F "$T/srv" -t 1 >"$T/dbgd.log" 2>&1 &
	srv=$!
	for _ in $(seq 1 100); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/buildid/$bid/debuginfo" && break 2
		kill -0 $srv 2>/dev/null || break
		sleep 0.2
	done
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
done
curl -sf -o /dev/null "http://127.0.0.1:$port/buildid/$bid/debuginfo" ||
	fail "debuginfod did not serve the debug file: $(tail -5 "$T/dbgd.log")"
cache=/var/cache/gpusample/debuginfod
trap 'rm -rf "$cache/$bid"; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${GS_KEEP:-}" ] || rm -rf "$T"' EXIT
run_job dind DEBUGINFOD_URLS="http://127.0.0.1:$port"
grep -q dbgonly_spin_inner "$T/dind.rep" || fail "debuginfod: not named: $(grep -i debuginfod "$T/dind.rep"; head -30 "$T/dind.rep")"
grep -q "debuginfod: 1 debug file(s) fetched.*libdn.so" "$T/dind.rep" ||
	fail "no note of the fetch: $(grep -i debuginfod "$T/dind.rep")"
[ -s "$cache/$bid/debuginfo" ] || fail "not in gpusample's cache $cache"
[ "$(stat -c '%u %a' "$cache")" = "0 700" ] || fail "cache not root's 0700: $(stat -c '%u %a' "$cache")"
ok "named through a loopback debuginfod (port $port), noted, cached in $cache"

# (3) A server that accepts and never answers: the run's time budget (10 s,
# all queries together) ends the wait, later modules are not asked, a note
# says so, and the profile is written.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' >"$T/mute.port" &
for _ in $(seq 1 50); do [ -s "$T/mute.port" ] && break; sleep 0.1; done
mport=$(cat "$T/mute.port")
[ -n "$mport" ] || fail "mute server did not start"
rm -rf "${cache:?}/$bid"
start=$(date +%s)
run_job mute DEBUGINFOD_URLS="http://127.0.0.1:$mport"
took=$(($(date +%s) - start))
[ $took -lt 40 ] || fail "budget not kept: the run took ${took}s"
grep -q "budget spent" "$T/mute.rep" || fail "no budget note: $(grep -i debuginfod "$T/mute.rep")"
ok "a mute server costs one budget (run ${took}s), noted"
