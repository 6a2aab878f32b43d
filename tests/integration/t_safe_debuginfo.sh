#!/bin/bash
# Issue 24, item 1: debug files come only from /usr/lib/debug (the target's
# root and the host's), never from next to the library.  A job run as
# nobody maps a stripped library whose .gnu_debuglink names LIB.debug and
# plants, next to it, a FIFO (LIB.debug: libdwfl's default search opened it
# as root and blocked in open(2) for good) and, in .debug/, a link to a
# root-only debug file (root would read it: its source file name, a secret,
# would show in the profile).  gpusample must finish and write a profile
# without the secret.
source "$(dirname "$0")/lib.sh"
command -v objcopy >/dev/null || fail "objcopy missing (binutils)"
chmod 755 "$T"
U=$T/u
mkdir -p "$U/.debug" "$T/rootonly"
chmod 700 "$T/rootonly"
cat > "$T/rootonly/secret_root_only_src.c" <<'C'
volatile unsigned long sink;
void spin(double secs) { for (unsigned long i = 0; i < (unsigned long)(secs * 4e8); i++) sink += i * i; }
C
# The root-only debug file: the same library with DWARF from a file whose
# name must never reach the profile.
gcc -g -O0 -shared -fPIC -Wl,--build-id=none -o "$T/rootonly/libv.debug" \
	"$T/rootonly/secret_root_only_src.c" || fail "cc"
objcopy --strip-debug --strip-unneeded "$T/rootonly/libv.debug" "$U/libv.so" || fail "strip"
# Its debuglink matches the secret file (name and CRC), so only where it is
# looked for decides whether it is read.
(cd "$T/rootonly" && objcopy --add-gnu-debuglink=libv.debug "$U/libv.so") || fail "debuglink"
mkfifo "$U/libv.debug"
ln -s "$T/rootonly/libv.debug" "$U/.debug/libv.debug"
chown -R nobody:nogroup "$U"
chown -h nobody:nogroup "$U/.debug/libv.debug"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import ctypes
ctypes.CDLL('$U/libv.so').spin(ctypes.c_double(30))
" &
job=$!
sleep 1
kill -0 $job 2>/dev/null || fail "job did not start"
start=$(date +%s)
timeout -k 5 40 "$GS" -q -p $job -d 3 -o "$T/out" 2>"$T/gs.err"
rc=$?
took=$(($(date +%s) - start))
kill $job 2>/dev/null
[ $rc -lt 124 ] || fail "gpusample hung (killed after ${took}s, rc $rc): $(tail -3 "$T/gs.err")"
[ -s "$T/out.pb.gz" ] || fail "no profile (rc $rc): $(tail -3 "$T/gs.err")"
"$GS" report "$T/out.pb.gz" >"$T/rep" 2>&1 || fail "report: $(tail -3 "$T/rep")"
grep -q 'spin' "$T/rep" || fail "the library's frames are gone: $(head -20 "$T/rep")"
! zcat "$T/out.pb.gz" | grep -aq secret_root_only_src || fail "root-only debug file read through the target's link"
ok "FIFO and link next to the library ignored; profile in ${took}s"
