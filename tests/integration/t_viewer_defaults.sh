#!/bin/bash
# Issue 25 item 3: the viewers open on what the report talks about.  A
# Python job whose forked child burns a CPU while the main thread mostly
# sleeps (the busiest thread is not the main one):
#  - pprof (go tool pprof): default sample type wall, "File:" the profiled
#    program (python3.x), not ld.so or libc; the graph view renders (dot);
#  - speedscope in headless Chromium opens on the main process's main thread;
#  - the trace follows the trace-event nesting rules with ends computed as
#    the readers compute them (tests/tools/check_trace.js, no tolerance).
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
command -v go >/dev/null || fail "go missing (make test-deps)"
command -v dot >/dev/null || fail "graphviz (dot) missing (make test-deps)"
command -v node >/dev/null || fail "node missing (make test-deps)"
cat > "$T/job.py" <<'PY'
import multiprocessing as mp, time
def burn():
    t = time.time()
    while time.time() - t < 2.5: sum(i * i for i in range(1000))
if __name__ == "__main__":
    mp.set_start_method("fork")
    p = mp.Process(target=burn); p.start()
    t = time.time()
    while time.time() - t < 2.5:
        sum(i for i in range(3000)); time.sleep(0.02)
    p.join()
PY
"$GS" -q --format pprof,speedscope,trace -o "$T/out" -- /usr/bin/python3 "$T/job.py" >/dev/null 2>"$T/gs.err" ||
	fail "gpusample failed: $(cat "$T/gs.err")"
pprof -top "$T/out.pb.gz" > "$T/top" || fail "pprof cannot read it: $(cat "$T/pprof.err")"
grep -E '^(File|Type):' "$T/top"
grep -q '^Type: wall$' "$T/top" || fail "pprof's default sample type is not wall: $(grep '^Type' "$T/top")"
grep -q '^File: python3' "$T/top" || fail "pprof's main binary is not the program: $(grep '^File' "$T/top")"
pprof -svg -output "$T/out.svg" "$T/out.pb.gz" || fail "pprof graph view: $(cat "$T/pprof.err")"
grep -q '<svg' "$T/out.svg" || fail "no SVG from pprof -svg"
ok "pprof: Type wall, File python3, graph rendered"

# The main thread: the launched python3 (pid in the profile's processes).
main=$("$GS" report "$T/out.pb.gz" | awk '$3 == "main" && $2 == "python3" { print $1; exit }')
[ -n "$main" ] || fail "no main process in the report"
shown=$("$ROOT/tests/tools/speedscope_opens.sh" "$T/out.speedscope.json"); rc=$?
echo "speedscope opens on: $shown"
[ "$rc" = 0 ] || fail "speedscope showed nothing: $shown"
[[ "$shown" == *"pid $main tid $main "* ]] || fail "speedscope opens on \"$shown\", not the main thread of pid $main"
ok "speedscope opens on the main thread of pid $main"

node "$ROOT/tests/tools/check_trace.js" "$T/out.trace.json" > "$T/trace.check" || { head -5 "$T/trace.check"; fail "trace breaks the nesting rules"; }
head -1 "$T/trace.check"
ok "trace nests exactly"
