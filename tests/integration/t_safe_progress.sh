#!/bin/bash
# Issue 24, item 10: a job (run as nobody) names the large libraries it maps
# with terminal escape sequences (OSC title, SGR, a C1 CSI); the "building
# unwind tables ... now LIB" progress line on root's terminal, and the table
# builder's GS_DEBUG lines, show them escaped, never as raw control bytes.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
chmod 755 "$T"
mkdir "$T/u"
# 2*400000 rows each: the builder must still be busy when the first progress
# line is due (100 ms), however fast it gets (24 x 270k rows took 0.2 s), and
# however long the attach before that loop takes (40 objects: ~1.5 s of builds;
# 24 once finished while a loaded CI host was still attaching)
"$ROOT/tests/tools/make_cfi_bomb.sh" "$T/u/big.so" 400000 -Wl,--build-id=none ||
	fail "cannot build the test object"
evil=$'lib\e]0;owned\a\e[31mred\xc2\x9b2J'
for i in $(seq 0 39); do cp "$T/u/big.so" "$T/u/$evil$i.so"; done
chown -R nobody:nogroup "$T/u"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import ctypes, os, time
d = '$T/u'
for n in sorted(os.listdir(d)):
    if n != 'big.so': ctypes.CDLL(os.path.join(d, n))
open(os.path.join(d, 'ready'), 'w').close()
t = time.time()
while time.time() - t < 60: sum(i * i for i in range(1000))
" &
job=$!
for _ in $(seq 200); do [ -e "$T/u/ready" ] && break; sleep 0.1; done
[ -e "$T/u/ready" ] || fail "workload did not start"
# GS_DEBUG=1: the unwind-table builder's debug lines name the libraries too.
# A line names the object built or loaded at that moment: on a loaded host
# the one line of a run can fall on python3.11 or libc (1 of 48); up to
# three attaches, every line of each checked below.
: > "$T/gs.err"
for run in 1 2 3; do
	GS_DEBUG=1 "$GS" -p $job -d 1 -o "$T/out$run" 2>"$T/gs$run.err" >/dev/null ||
		fail "gpusample: $(tail -3 "$T/gs$run.err")"
	cat "$T/gs$run.err" >> "$T/gs.err"
	grep -aq 'building unwind tables.*now \(loading \)\?lib' "$T/gs$run.err" && break
	echo "run $run: no line named one of the job's libraries: $(grep -a 'building unwind tables' "$T/gs$run.err" | cat -v)"
done
kill $job
grep -a 'now \(loading \)\?lib' "$T/gs.err" | head -2 | cat -v
grep -aq 'building unwind tables.*now \(loading \)\?lib' "$T/gs.err" ||
	fail "no progress line naming a library (the test needs a longer build): $(cat -v "$T/gs.err")"
LC_ALL=C grep -aq $'[\x1b\x07]\|\xc2\x9b' "$T/gs.err" && fail "raw control bytes on the terminal: $(cat -v "$T/gs.err" | head -5)"
grep -aq 'now \(loading \)\?lib\\x1b\]0;owned\\x07' "$T/gs.err" || fail "not shown escaped: $(grep -a 'now \(loading \)\?lib' "$T/gs.err" | cat -v | head -2)"
grep -aq 'cfi: .*/lib\\x1b\]0;owned\\x07.*rows' "$T/gs.err" ||
	fail "no escaped debug line of the table builder: $(grep -a 'cfi: ' "$T/gs.err" | cat -v | head -2)"
ok "library names in the progress and debug lines escaped"
