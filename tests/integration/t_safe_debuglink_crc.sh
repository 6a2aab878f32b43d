#!/bin/bash
# gs-test-timeout: 150
# A .gnu_debuglink's CRC reads the named file whole: bounded and
# interruptible.  A job run as nobody in its own root (a chroot it owns the
# debug directory of) maps libraries without a build-id whose debug links
# name files under its usr/lib/debug:
#  (1) libhuge: a 64 GiB sparse file with real ELF headers: root read it all
#      for the CRC (a -d 3 run took 101 s); now it is over the size cap (1 GiB)
#      and refused unread, and noted;
#  (2) libaa..libcc: 1000 MiB sparse ELF files, under the cap: SIGINT during
#      their CRCs ends the run promptly (it was ignored until every CRC
#      ended) and the profile is still written, noting the cut;
#  (3) libw: a real debug file in the job's root is found by its debug link
#      (names from it), and the same name under the host's /usr/lib/debug
#      is not looked at: that path is the job's, not the host's;
#  (4) the Ctrl-C that ends a run (the usual way) cuts no CRC;
#  (5) `dump`: SIGINT or SIGTERM during the same CRCs ends it promptly (it
#      killed the dump, which wrote nothing), and its profile is written,
#      noting the cut.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debug_lib.sh"
for t in objcopy strip gcc chroot; do command -v $t >/dev/null || fail "$t missing"; done
chmod 755 "$T"
R=$T/jobroot
mkdir -p "$R/opt/x" "$R/lib64" "$R/lib/x86_64-linux-gnu" "$R/usr/lib/debug/opt/x"
cp /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
cp /lib/x86_64-linux-gnu/libc.so.6 "$R/lib/x86_64-linux-gnu/"
libs="huge aa bb cc w"
main_c="#include <pthread.h>"
for l in $libs; do
	cat >"$T/lib$l.c" <<C
volatile unsigned long sink_$l;
static __attribute__((noinline)) void dbgonly_${l}_inner(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink_$l += i * i;
	__asm__ volatile("" ::: "memory");
}
void *${l}_spin(void *p) { for (;;) dbgonly_${l}_inner(10000000); return p; }
C
	gcc -g -O1 -shared -fPIC -Wl,--build-id=none -o "$T/lib$l.full.so" "$T/lib$l.c" || fail "cc $l"
	objcopy --only-keep-debug "$T/lib$l.full.so" "$T/lib$l.debug" || fail "keep-debug $l"
	strip --strip-debug --strip-unneeded -o "$R/opt/x/lib$l.so" "$T/lib$l.full.so" || fail "strip $l"
	(cd "$T" && objcopy --add-gnu-debuglink="lib$l.debug" "$R/opt/x/lib$l.so") || fail "debuglink $l"
	main_c="$main_c
void *${l}_spin(void *);"
done
cat >"$T/main.c" <<C
$main_c
int main(void)
{
	pthread_t t;
$(for l in $libs; do echo "	pthread_create(&t, 0, ${l}_spin, 0);"; done)
	pthread_join(t, 0);
	return 0;
}
C
gcc -O1 -o "$R/opt/x/main" "$T/main.c" -L"$R/opt/x" $(for l in $libs; do echo -l$l; done) \
	-Wl,-rpath,/opt/x -pthread || fail "cc main"
D=$R/usr/lib/debug/opt/x
# (1) and (2): real ELF headers (the file must be ELF), then a hole
cp "$T/libhuge.debug" "$D/libhuge.debug" && truncate -s 64G "$D/libhuge.debug"
# (3): the real one in the job's root; the host path holds it too
cp "$T/libw.debug" "$D/libw.debug"
host_w=/usr/lib/debug/opt/x/libw.debug
[ ! -e /usr/lib/debug/opt/x ] || fail "host already has /usr/lib/debug/opt/x"
trap 'rm -rf /usr/lib/debug/opt/x; rmdir /usr/lib/debug/opt 2>/dev/null; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${GS_KEEP:-}" ] || rm -rf "$T"' EXIT
# maps shows the chroot's files by our path ($R/opt/x/...): the debug
# directory is reached under that name in the job's root too, so a search
# there (the old one) meets the same files
mkdir -p "$R/usr/lib/debug$R/opt"
ln -s /usr/lib/debug/opt/x "$R/usr/lib/debug$R/opt/x"
chown -R nobody:nogroup "$R/usr/lib/debug" "$R/opt"

start_job() {
	chroot --userspec=nobody:nogroup "$R" /opt/x/main &
	job=$!
	sleep 1
	kill -0 $job 2>/dev/null || fail "job did not start"
}

# (1) + (3): the run ends in seconds; the huge file is refused unread.
start_job
start=$(date +%s)
timeout -k 5 40 "$GS" -q -p $job -d 2 -o "$T/one" 2>"$T/one.err"
rc=$?
took=$(($(date +%s) - start))
[ $rc -lt 124 ] || fail "gpusample read the 64 GiB file (killed after ${took}s)"
[ -s "$T/one.pb.gz" ] || fail "no profile (rc $rc): $(tail -3 "$T/one.err")"
"$GS" report "$T/one.pb.gz" >"$T/one.rep" 2>&1 || fail "report: $(tail -3 "$T/one.rep")"
grep -q '1 debug file(s) .*a .gnu_debuglink file over the size cap (1024 MiB).*libhuge.debug' "$T/one.rep" ||
	fail "no note of the size cap: $(grep -i debug "$T/one.rep")"
grep -q dbgonly_w_inner "$T/one.rep" ||
	fail "the debug link in the job's root was not followed: $(grep -i 'libw\|w_spin' "$T/one.rep")"
ok "64 GiB debug link refused unread (run ${took}s); the job's own debug file named"

# (3) the host's path: only there now
mv "$D/libw.debug" "$T/libw.moved"
mkdir -p /usr/lib/debug/opt/x && cp "$T/libw.debug" "$host_w" && chmod 644 "$host_w"
timeout -k 5 40 "$GS" -q -p $job -d 1 -o "$T/host" 2>"$T/host.err"
[ -s "$T/host.pb.gz" ] || fail "host: no profile: $(tail -3 "$T/host.err")"
! zcat "$T/host.pb.gz" | grep -aq dbgonly_w_inner ||
	fail "the job's debug link was looked up under the host's /usr/lib/debug"
ok "the job's debug link is not looked up in the host's /usr/lib/debug"

# (4) the Ctrl-C that ends a run does not cut the CRCs of its symbolization
mv "$T/libw.moved" "$D/libw.debug"
gs_start -q -p $job -o "$T/ctrlc"
sleep 1
kill -INT $gs
gs_wait
grep -q dbgonly_w_inner <("$GS" report "$T/ctrlc.pb.gz" 2>&1) ||
	fail "a run ended by Ctrl-C lost the debug link's names"
ok "a run ended by Ctrl-C still checks debug links"
kill $job
wait $job 2>/dev/null

# (2) SIGINT during the CRCs of 3 x 1000 MiB
for l in aa bb cc; do cp "$T/lib$l.debug" "$D/lib$l.debug" && truncate -s 1000M "$D/lib$l.debug"; done
chown nobody:nogroup "$D"/lib*.debug
start_job
gs_start -q -p $job -d 1 -o "$T/int"
sleep 2
stop_timed INT $gs "a run during the CRCs"
[ -s "$T/int.pb.gz" ] || fail "SIGINT: no profile: $(tail -3 "$T/gs.err")"
[ $ms -lt 3000 ] || fail "SIGINT took ${ms} ms to end the run"
"$GS" report "$T/int.pb.gz" >"$T/int.rep" 2>&1 || fail "report: $(tail -3 "$T/int.rep")"
grep -q 'CRC cut short' "$T/int.rep" || fail "no note of the cut CRC: $(grep -i debug "$T/int.rep")"
ok "SIGINT during debug-link CRCs: the run ended in ${ms} ms, profile written, noted"

# (5) the same CRCs in a dump, cut by SIGINT (as from a terminal: a
# background job of a script starts with SIGINT ignored) and by SIGTERM
dump_cut() { # signal
	env --default-signal=INT "$GS" dump -p $job -o "$T/dump$1" >"$T/dump$1.out" 2>"$T/dump$1.err" &
	dp=$!
	sleep 2
	kill -0 $dp 2>/dev/null || fail "dump ended before SIG$1 (no CRC under way): $(tail -3 "$T/dump$1.err")"
	stop_timed $1 $dp "dump during the CRCs"
	dump_cut_check $1 "$T/dump$1"
	grep -q 'CRC cut short' "$T/dump$1.rep" || fail "dump: no note of the cut CRC: $(grep -i debug "$T/dump$1.rep")"
	grep -q '_spin' "$T/dump$1.out" || fail "dump: no stacks printed: $(head -5 "$T/dump$1.out")"
	ok "SIG$1 during a dump's debug-link CRCs: ended in ${ms} ms (rc $rc), profile written, noted"
}
dump_cut INT
dump_cut TERM
