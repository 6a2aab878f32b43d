#!/bin/bash
# One agent, one owner (issue 12 item 8): a second gpusample -p on a job
# whose agent another gpusample has armed is refused for the GPU, says so at
# once and in its profile, keeps its CPU profile, and leaves the first
# session alone: the first stays armed through the second's run and detach
# (CUPTI enabled once, disabled once), acknowledges its own detach and gets
# every sample the CUPTI double delivered.  After the first has gone, a new
# gpusample owns the agent again.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
total() { go tool pprof -sample_index=gpu_samples -top "$1" 2>/dev/null |
	sed -n 's/.* of \([0-9.]*\) total.*/\1/p' | head -1; }

start_app 60 --rate 600
# The first attaches before it reports "sampling"; its -d leaves the
# second (BPF load included) ample time inside its session.
gs_start -p "$APP" -d 10 -q -o "$T/a" --format pprof
a=$gs
"$GS" -p "$APP" -d 1.5 -q -o "$T/b" --format pprof > "$T/b.out" 2>&1 || { cat "$T/b.out"; fail "second gpusample failed"; }
grep -q "pid $APP: GPU agent already in use by gpusample pid $a" "$T/b.out" ||
	{ cat "$T/b.out"; fail "second gpusample did not say the agent is in use"; }
kill -0 "$a" 2>/dev/null || fail "first gpusample ended before the second finished (raise its -d)"
gs_wait
grep -q 'did not acknowledge' "$T/gs.err" && { cat "$T/gs.err"; fail "first gpusample lost its agent: detach not acknowledged"; }
"$GS" -p "$APP" -d 1 -q -o "$T/c" --format pprof > "$T/c.out" 2>&1 || { cat "$T/c.out"; fail "third gpusample failed"; }
grep -q 'already in use' "$T/c.out" && { cat "$T/c.out"; fail "agent still owned after its owner detached"; }
wait_app
show
[ "$(stat call.cuptiPCSamplingEnable)" = 2 ] ||
	fail "CUPTI enabled $(stat call.cuptiPCSamplingEnable) times; expected 2 (first owner, then the third run)"
gen=$(stat samples_delivered) ta=$(total "$T/a.pb.gz") tb=$(total "$T/b.pb.gz") tc=$(total "$T/c.pb.gz")
echo "delivered $gen; first gpusample ${ta:-0}, second ${tb:-0}, third ${tc:-0}"
[ "${ta%.*}" -gt 0 ] 2>/dev/null || fail "first gpusample has no GPU samples"
[ -z "$tb" ] || [ "${tb%.*}" = 0 ] || fail "the refused gpusample has GPU samples ($tb)"
[ "${tc%.*}" -gt 0 ] 2>/dev/null || fail "third gpusample (after the owner left) has no GPU samples"
[ "$(( ${ta%.*} + ${tc%.*} ))" = "$gen" ] || fail "first + third = $ta + $tc GPU samples, the double delivered $gen"
"$GS" report "$T/b.pb.gz" > "$T/b.report" 2>&1 || fail "gpusample report failed"
grep -q 'already in use by gpusample' "$T/b.report" || { cat "$T/b.report"; fail "refusal not in the second profile's report"; }
ok "second gpusample refused and said so; first kept its session ($ta samples, detach acknowledged); third took over ($tc); $gen delivered"
