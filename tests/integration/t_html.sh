#!/bin/bash
# The HTML report of a real run: the demo's PyTorch training loop (the
# loop `make demo` profiles, 6 s, two DataLoader workers) launched under
# gpusample with the default formats writes PREFIX.html; in headless
# Chromium with the network off (tests/tools/html_check.js) it shows the
# verdict first and a flame graph with train_step, search, zoom and the
# thread filter work, and nothing is fetched (its open time is measured
# by bench/outputs.sh, not here).
# `gpusample report --html` writes the page of the saved profile, of two
# merged ones (twice the samples) and of a dump, which `gpusample dump -o
# PREFIX` (%p expanded) writes itself too; a Python function named
# '</script><img ...>' is text on its page; --format without html leaves
# it out.
# Screenshot: build/html-report-demo.png.
# gs-test-timeout: 150
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
command -v node >/dev/null || fail "node is not installed (make test-deps)"
"$GS" -o "$T/train" -q -- /usr/bin/python3 tests/workloads/train_torch.py --seconds 6 --workers 2 \
	> "$T/train.out" 2> "$T/gs.err" || { cat "$T/gs.err"; fail "gpusample exited with $?"; }
grep -q 'steps=' "$T/train.out" || fail "the training loop did not finish"
grep -q "wrote $T/train.html" "$T/gs.err" || fail "no 'wrote $T/train.html': $(cat "$T/gs.err")"
size=$(stat -c %s "$T/train.html")
echo "train.html: $size bytes"
[ "$size" -le 2000000 ] || fail "train.html is $size bytes (a 6 s run; the goal is 2 MB for 30 s)"
mkdir -p "$BUILD"
tests/tools/html_check.js "$T/train.html" --frame train_step \
	--screenshot "$BUILD/html-report-demo.png" > "$T/check" 2>&1
rc=$?
cat "$T/check"
[ $rc = 0 ] || fail "the page failed in Chromium (above)"
grep -q '^default filter: thread: python3' "$T/check" || fail "the graph did not open on the main thread"

# saved, merged and dumped profiles
"$GS" report --html "$T/saved.html" "$T/train.pb.gz" 2> "$T/r.err" || fail "report --html: $(cat "$T/r.err")"
cp "$T/train.pb.gz" "$T/copy.pb.gz"
"$GS" report --html "$T/merged.html" "$T/train.pb.gz" "$T/copy.pb.gz" 2> "$T/m.err" ||
	fail "report --html of two files: $(cat "$T/m.err")"
# the merged page counts both files' samples
n1=$(grep -o '[0-9]* CPU samples' "$T/saved.html" | head -1 | cut -d' ' -f1)
n2=$(grep -o '[0-9]* CPU samples' "$T/merged.html" | head -1 | cut -d' ' -f1)
[ -n "$n1" ] && [ "$n2" = $((2 * n1)) ] || fail "merged page: $n2 CPU samples, saved: $n1"
for f in saved merged; do
	tests/tools/html_check.js "$T/$f.html" --frame train_step > "$T/$f.check" 2>&1 ||
		{ cat "$T/$f.check"; fail "$f.html failed in Chromium"; }
done
# two threads, so the dump's page has a thread to filter on
/usr/bin/python3 -c 'import threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
time.sleep(60)' &
sleeper=$!
sleep 0.5
# dump -o expands %p as sampling does and writes the page itself (and no
# speedscope file: a dump has no time axis to lay out)
"$GS" dump -p $sleeper -o "$T/dump-%p" > /dev/null 2> "$T/d.err" || fail "dump: $(cat "$T/d.err")"
kill $sleeper
[ -s "$T/dump-$sleeper.pb.gz" ] && [ -s "$T/dump-$sleeper.html" ] ||
	fail "dump -o $T/dump-%p wrote: $(ls "$T" | grep dump)"
[ ! -e "$T/dump-$sleeper.speedscope.json" ] || fail "dump wrote a speedscope file"
"$GS" report --html "$T/dump.html" "$T/dump-$sleeper.pb.gz" 2> "$T/dr.err" ||
	fail "report --html of a dump: $(cat "$T/dr.err")"
for f in dump "dump-$sleeper"; do
	grep -q 'a dump: one stack per thread' "$T/$f.html" || fail "$f.html has no dump header"
	grep -q 'pysleep\|time_sleep\|&lt;module&gt; (&lt;string&gt;' "$T/$f.html" ||
		fail "$f.html has not the sleeper's stack"
	tests/tools/html_check.js "$T/$f.html" --dump --frame sleep > "$T/$f.check" 2>&1 ||
		{ cat "$T/$f.check"; fail "$f.html failed in Chromium"; }
done

# a real Python function named like markup: text on the page, no element
cat > "$T/hostile.py" <<'PY'
import threading, time
threading.Thread(target=time.sleep, args=(3,), daemon=True).start()  # a thread to filter on
def burn(t):
    end = time.time() + t
    while time.time() < end:
        pass
name = '</script><img src=x onerror=alert(1)>'
burn.__code__ = burn.__code__.replace(co_name=name, co_qualname=name)
burn(2)
PY
"$GS" -o "$T/hostile" -q --format html -- /usr/bin/python3 "$T/hostile.py" 2> "$T/h.err" ||
	fail "hostile run: $(cat "$T/h.err")"
tests/tools/html_check.js "$T/hostile.html" --frame onerror \
	--hostile '</script><img src=x onerror=alert(1)>' > "$T/hostile.check" 2>&1 ||
	{ cat "$T/hostile.check"; fail "the hostile page failed in Chromium"; }
grep 'hostile' "$T/hostile.check"

# --format without html: no page
"$GS" -o "$T/nohtml" -q --format pprof -- /bin/sleep 0.2 2> "$T/n.err" || fail "--format pprof: $(cat "$T/n.err")"
[ -s "$T/nohtml.pb.gz" ] && [ ! -e "$T/nohtml.html" ] || fail "--format pprof wrote: $(ls "$T" | grep nohtml)"
ok "train.html ($size bytes) shows the verdict and a working flame graph offline; report --html of saved, merged and dumped profiles"
