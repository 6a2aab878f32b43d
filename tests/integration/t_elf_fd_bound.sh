#!/bin/bash
# proc/'s one ELF cache keeps at most RLIMIT_NOFILE's soft limit less 256
# fds and never raises the limit: under `ulimit -n 300` (a bound of 44) a
# PyTorch process mapping more libraries than that is still profiled, the
# profile says how many libraries went without and what to do, and the
# libraries that were kept are symbolized.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null || fail "needs Debian python3-torch (make test-deps)"
cat > "$T/w.py" <<'PY'
import time, torch
def busy_loop():
    x = torch.ones(64, 64)
    end = time.time() + 3
    while time.time() < end:
        x = (x @ x).clamp(max=1.0)
busy_loop()
PY
( ulimit -n 300 && exec "$GS" -d 30 -o "$T/b" -q --format pprof -- /usr/bin/python3 "$T/w.py" ) 2>"$T/gs.err" ||
	{ cat "$T/gs.err"; fail "gpusample failed under ulimit -n 300"; }
[ -s "$T/b.pb.gz" ] || fail "no profile: $(cat "$T/gs.err")"
"$GS" report "$T/b.pb.gz" > "$T/raw" 2>&1 || fail "report: $(cat "$T/raw")"
note=$(grep -o '[0-9]* of [0-9]* libraries not kept open (at most 44 file descriptors[^;]*' "$T/raw" | head -1)
[ -n "$note" ] || fail "no note on libraries left without an fd: $(grep -i 'librar' "$T/raw" | head -3)"
echo "$note"
refused=${note%% of *}
[ "$refused" -gt 0 ] || fail "note counts no library: $note"
grep -q 'ulimit -n' "$T/raw" || fail "the note does not say how to fix it"
pprof_stacks "$T/b.pb.gz" > "$T/stacks" || fail "pprof: $(cat "$T/pprof.err")"
grep -q 'busy_loop' "$T/stacks" || fail "the Python frames are gone (python itself must stay open)"
ok "$note; Python frames still there"
