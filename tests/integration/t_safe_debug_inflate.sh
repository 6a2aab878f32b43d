#!/bin/bash
# gs-test-timeout: 150
# Compressed debug sections are checked before libdw inflates them.  A job
# run as nobody maps small libraries whose .debug_* sections are real zlib
# streams of zeros, each section inflating whole when libdw opens the file's
# DWARF: libbomb (3 x 256 MiB: over the per-file cap of 512 MiB) and libbig
# (1 x 160 MiB: under the cap, over a 100 MiB memory budget); and libmini,
# without .symtab but with a .gnu_debugdata section of 90 KB of xz that
# libdwfl inflates to 600 MiB (into a buffer it doubles).  Before the check
# they took root's gpusample past 2 GB resident, in sampling and in dump.
# Now each is refused (libdw never sees it; names from its .dynsym), named
# in a note by cause, and both runs stay small.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debug_lib.sh"
[ -x /usr/bin/time ] || fail "/usr/bin/time missing (package time)"
chmod 755 "$T"
cat >"$T/lib.c" <<'C'
volatile unsigned long sink;
void NAME(double secs) { for (;;) for (unsigned long i = 0; i < 100000000ul; i++) sink += i * i; }
C
for l in bomb big mini; do
	sed "s/NAME/${l}_spin/" "$T/lib.c" >"$T/lib$l.c"
	gcc -O1 -shared -fPIC -o "$T/lib$l.full.so" "$T/lib$l.c" || fail "cc $l"
	strip --strip-debug -o "$T/lib$l.stripped.so" "$T/lib$l.full.so" || fail "strip $l"
done
debug_bomb "$T/libbomb.stripped.so" "$T/libbomb.so" 256 3
debug_bomb "$T/libbig.stripped.so" "$T/libbig.so" 160 1
sed "s/NAME/mini_spin/" "$T/lib.c" >"$T/libmini.c"
gcc -O1 -shared -fPIC -o "$T/libmini.full.so" "$T/libmini.c" || fail "cc mini"
strip --strip-all -o "$T/libmini.stripped.so" "$T/libmini.full.so" || fail "strip mini"
head -c 600M /dev/zero | xz -0 -T1 >"$T/mini.xz" || fail "xz"
objcopy --add-section .gnu_debugdata="$T/mini.xz" "$T/libmini.stripped.so" "$T/libmini.so" ||
	fail "add .gnu_debugdata"
[ "$(stat -c %s "$T/libbomb.so")" -lt 4000000 ] || fail "the bomb is not small"
chown nobody:nogroup "$T"/lib*.so
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import ctypes, threading
a, b, c = (ctypes.CDLL('$T/lib%s.so' % l) for l in ('bomb', 'big', 'mini'))
threading.Thread(target=lambda: b.big_spin(ctypes.c_double(0)), daemon=True).start()
threading.Thread(target=lambda: c.mini_spin(ctypes.c_double(0)), daemon=True).start()
a.bomb_spin(ctypes.c_double(0))
" &
job=$!
sleep 1
kill -0 $job 2>/dev/null || fail "job did not start"

# max_kb LABEL CMD...: run CMD (a gpusample run) and check its peak RSS.
max_kb() {
	local label=$1
	shift
	GS_MEM_BUDGET_MB=100 /usr/bin/time -f '%M' -o "$T/$label.rss" timeout -k 5 50 "$@" \
		>"$T/$label.out" 2>"$T/$label.err"
	local rc=$? kb
	kb=$(tail -1 "$T/$label.rss")
	[ $rc -lt 124 ] || fail "$label: gpusample hung (rc $rc): $(tail -3 "$T/$label.err")"
	[ "$kb" -lt 400000 ] || fail "$label: peak RSS ${kb} KiB: the claimed sections were inflated"
	echo "$label: peak RSS $kb KiB"
}
max_kb run "$GS" -q -p $job -d 2 -o "$T/out"
[ -s "$T/out.pb.gz" ] || fail "no profile: $(tail -3 "$T/run.err")"
"$GS" report "$T/out.pb.gz" >"$T/rep" 2>&1 || fail "report: $(tail -3 "$T/rep")"
for l in bomb big mini; do
	grep -q "${l}_spin" "$T/rep" || fail "lib$l.so's .dynsym name is gone: $(head -30 "$T/rep")"
done
grep -q '2 debug file(s) .*claim more inflated than the cap per file (512 MiB).*first: .*lib\(bomb\|mini\).so' "$T/rep" ||
	fail "no note of the cap: $(grep -i debug "$T/rep")"
grep -q "did not fit the run's memory budget.*first: .*libbig.so" "$T/rep" ||
	fail "no note of the budget: $(grep -i debug "$T/rep")"
zcat "$T/out.pb.gz" | grep -aq 'refused: .*debug sections [1-9]' ||
	fail "the budget's comment does not count the refusal"
ok "sampling: libraries refused by cap and budget, noted, $(cat "$T/run.rss" | tail -1) KiB peak"

max_kb dump "$GS" dump -p $job
# a thread on a CPU shows its kernel stack only: with 3 spinning threads on
# 2 CPUs, at least one is walked through its library
grep -Eq '(bomb|big|mini)_spin' "$T/dump.out" || fail "dump: no frame in the libraries: $(head -20 "$T/dump.out")"
ok "dump: $(tail -1 "$T/dump.rss") KiB peak"
kill $job
