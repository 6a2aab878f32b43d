#!/bin/bash
# gs-test-timeout: 90
# Launch mode's -d: when the duration ends the launched command is stopped
# with SIGTERM, as perf record and timeout(1) stop theirs (--on-duration=stop,
# the default; the profile is written and gpusample exits 0), or left running
# (--on-duration=keep).  A command that handles SIGTERM gets to finish.
source "$(dirname "$0")/lib.sh"
[ -x "$GS" ] || fail "$GS missing (make)"
busy='echo $$ > "$0"; while :; do :; done'
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# default: stop
start=$(date +%s)
"$GS" -q -d 1 --format pprof -o "$T/stop" -- sh -c "$busy" "$T/stop.pid" 2>"$T/stop.err" ||
	fail "default run exited $?: $(cat "$T/stop.err")"
pid=$(cat "$T/stop.pid")
alive "$pid" && { kill -KILL "$pid"; fail "the command (pid $pid) still runs after -d ended: $(cat "$T/stop.err")"; }
grep -q "duration reached; stopping sh (pid $pid) with SIGTERM" "$T/stop.err" || fail "no word of the stop: $(cat "$T/stop.err")"
[ -s "$T/stop.pb.gz" ] || fail "no profile written"
[ $(($(date +%s) - start)) -lt 20 ] || fail "the stop took $(($(date +%s) - start)) s"
ok "default: SIGTERM at -d, profile written, exit 0"

# keep: the command outlives gpusample
"$GS" -q -d 1 --on-duration=keep --format pprof -o "$T/keep" -- sh -c "$busy" "$T/keep.pid" 2>"$T/keep.err" ||
	fail "keep run exited $?: $(cat "$T/keep.err")"
pid=$(cat "$T/keep.pid")
alive "$pid" || fail "--on-duration=keep: the command is gone: $(cat "$T/keep.err")"
kill -KILL "$pid"
grep -q "keeps running (--on-duration=keep)" "$T/keep.err" || fail "keep said: $(cat "$T/keep.err")"
ok "keep: left running"

# a command that saves on SIGTERM finishes its save; its own exit status is passed on
save='trap "echo saved > \"$0.saved\"; exit 3" TERM; while :; do :; done'
"$GS" -q -d 1 --format pprof -o "$T/save" -- sh -c "$save" "$T/save" 2>"$T/save.err"
rc=$?
[ "$rc" = 3 ] || fail "exit status $rc, expected the command's 3: $(cat "$T/save.err")"
[ "$(cat "$T/save.saved" 2>/dev/null)" = saved ] || fail "the SIGTERM handler did not run"
ok "SIGTERM handler ran, its exit status 3 passed on"

# bad input
"$GS" --on-duration=pause -d 1 -- true 2>"$T/err" && fail "--on-duration=pause accepted"
grep -q "bad --on-duration 'pause': stop .* or keep" "$T/err" || fail "said: $(cat "$T/err")"
"$GS" --on-duration=keep -p $$ -d 1 2>"$T/err" && fail "--on-duration with -p accepted"
grep -q "on-duration is for launch mode" "$T/err" || fail "said: $(cat "$T/err")"
ok "bad input refused"
