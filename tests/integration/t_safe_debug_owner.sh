#!/bin/bash
# gs-test-timeout: 60
# A build-id is only a claim: a job run as nobody maps a stripped library
# that claims the build-id of a 0600 root-only debug file under the host's
# /usr/lib/debug/.build-id.  Its function and source names reached the
# job's profile; now a debug file is read only when the job's user could
# read it (world-readable, or by its uid or groups), and the profile says
# one was refused.  Control: the same file made 0644 names the function.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debug_lib.sh"
chmod 755 "$T"
bid=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
dbg=/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug
[ ! -e "$dbg" ] || fail "$dbg exists"
mkdir -p "$T/src"
cat >"$T/src/secret_root_only_src.c" <<'C'
volatile unsigned long sink;
static __attribute__((noinline)) void secret_static_fn(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
	__asm__ volatile("" ::: "memory");
}
void own_spin(void) { for (;;) secret_static_fn(10000000); }
C
gcc -g -O1 -shared -fPIC -Wl,--build-id=0x$bid -o "$T/full.so" "$T/src/secret_root_only_src.c" || fail "cc"
strip --strip-debug --strip-unneeded -o "$T/libown.so" "$T/full.so" || fail "strip"
! nm "$T/libown.so" 2>/dev/null | grep -q secret || fail "strip kept the name"
mkdir -p "$(dirname "$dbg")"
trap 'rm -f "$dbg"; rmdir "$(dirname "$dbg")" 2>/dev/null; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${GS_KEEP:-}" ] || rm -rf "$T"' EXIT
install -m 0600 -o root -g root "$T/full.so" "$dbg"
chown nobody:nogroup "$T/libown.so"
nobody_py "$T/libown.so" own_spin

# run NAME: profile the job for 1 s
run() {
	timeout -k 5 40 "$GS" -q -p $job -d 1 -o "$T/$1" 2>"$T/$1.err"
	[ -s "$T/$1.pb.gz" ] || fail "$1: no profile: $(tail -3 "$T/$1.err")"
	"$GS" report "$T/$1.pb.gz" >"$T/$1.rep" 2>&1 || fail "$1: report: $(tail -3 "$T/$1.rep")"
	zcat "$T/$1.pb.gz" | grep -aq 'libown.so' || fail "$1: no frame in libown.so"
}
run private
! zcat "$T/private.pb.gz" | grep -aq secret || fail "names from the root-only debug file in the job's profile"
grep -q "the job's user could not read them.*${bid:2}.debug" "$T/private.rep" ||
	fail "no note of the refusal: $(grep -i debug "$T/private.rep")"
ok "a 0600 root-only debug file claimed by build-id is not read"

chmod 0644 "$dbg"
run public
zcat "$T/public.pb.gz" | grep -aq secret_static_fn || fail "control: the world-readable debug file was not used"
ok "control: the same file world-readable names the function"
kill $job
