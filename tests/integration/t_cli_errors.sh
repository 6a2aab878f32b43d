#!/bin/bash
# Issue 2: clear errors for bad input; symlinked output never followed; launch
# mode runs the command as the sudo user.
source "$(dirname "$0")/lib.sh"
expect_error() { # expect_error PATTERN CMD...
	local pat=$1; shift
	"$@" > "$T/out" 2>&1 && fail "'$*' succeeded, expected an error matching '$pat'"
	grep -Eqi "$pat" "$T/out" || fail "'$*' said: $(cat "$T/out") (expected /$pat/)"
	echo "ok: $* -> $(head -1 "$T/out")"
}
expect_error 'sudo' setpriv --reuid=65534 --regid=65534 --clear-groups "$GS" -p 1 -d 1
expect_error 'no such process' "$GS" -p 999999 -d 1
expect_error 'kernel thread' "$GS" -p 2 -d 1
# a thread id (ps -L, top -H) is not a process: the error names the process
/usr/bin/python3 -c 'import threading, time; threading.Thread(target=time.sleep, args=(20,)).start(); time.sleep(20)' &
job=$!
for _ in $(seq 50); do [ "$(ls /proc/$job/task 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.1; done
tid=$(ls /proc/$job/task | grep -vx "$job" | head -1)
[ -n "$tid" ] || fail "the threaded job did not start a thread"
expect_error "$tid is a thread .* of process $job: profile the process, -p $job" "$GS" -p "$tid" -d 1
expect_error "$tid is a thread .* of process $job" "$GS" dump -p "$tid"
kill $job
expect_error "bad -F '0' \\(a whole number of Hz, 1\\.\\.1000000000\\)" "$GS" -F 0 -p 1 -d 1
[ "$(wc -l < "$T/out")" = 1 ] || fail "-F 0 said more than one line: $(cat "$T/out")"
expect_error "bad --gpu-period '2.5' \\(a whole number of log2 cycles" "$GS" --gpu-period 2.5 -p 1 -d 1
expect_error 'offcpu-rate' "$GS" --offcpu-rate 0 -p 1 -d 1
expect_error "empty format '' in 'pprof,,trace'" "$GS" --format pprof,,trace -p 1 -d 1
expect_error "usage: gpusample report \\[--html OUT.html\\] FILE.pb.gz" "$GS" report -q x.pb.gz
expect_error "usage: gpusample report \\[--html OUT.html\\] FILE.pb.gz" "$GS" report --html x.pb.gz
expect_error "usage: gpusample report \\[--html OUT.html\\] FILE.pb.gz" "$GS" report --html -q x.pb.gz
expect_error "dump takes one stack per thread now: -d is for sampling" "$GS" dump -p 1 -d 3
# options dump would ignore are refused, not dropped
expect_error "dump takes one stack per thread now: --format is for sampling.*dump takes -p, -o" \
	"$GS" dump -p 1 --format html -o "$T/dumpfmt"
[ ! -e "$T/dumpfmt.pb.gz" ] || fail "dump --format html wrote $T/dumpfmt.pb.gz"
expect_error "dump takes one stack per thread now: -q is for sampling" "$GS" dump -p 1 -q
# getopt's own messages say gpusample, not the binary's path
expect_error "^gpusample: unrecognized option '--bogus'" "$GS" --bogus
expect_error 'offcpu-rate' "$GS" --offcpu-rate 2.5 -p 1 -d 1
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
expect_error 'perf_event_max_sample_rate' "$GS" -F $((max + 1)) -p $$ -d 1
expect_error 'cannot write' "$GS" -p $$ -d 1 -o /proc/no-such-dir/x
expect_error 'nothing to profile' "$GS"
expect_error 'not both' "$GS" -p 1 -- true
# `-p $(pgrep -f train.py)` that found several processes
expect_error "unexpected argument.*'2 3'.*-p A,B" "$GS" -p 1 2 3
# a mistyped subcommand is not launched (nothing starts sampling)
expect_error "reprot: not found on PATH.*own commands are report" "$GS" reprot x.pb.gz
grep -q 'sampling' "$T/out" && fail "a mistyped subcommand started sampling: $(cat "$T/out")"
# after --, a command not on PATH gets no hint about gpusample's own commands
expect_error "no_such_cmd_x: not found on PATH \\(give its path, or check its name\\)$" "$GS" -d 1 -- no_such_cmd_x
# A symlink at the output path is refused and its target is left alone.
echo keep > "$T/victim"
ln -s "$T/victim" "$T/link.pb.gz"
expect_error 'symlink' "$GS" -p $$ -d 1 -o "$T/link"
[ "$(cat "$T/victim")" = keep ] || fail "symlink target was modified"
# Launch mode under sudo runs the command as the invoking user.
uid=$(SUDO_UID=65534 SUDO_GID=65534 "$GS" -q -o "$T/launch" -- id -u 2>/dev/null | tail -1)
[ "$uid" = 65534 ] || fail "command ran as uid '$uid', expected the sudo user 65534"
uid=$(SUDO_UID=65534 SUDO_GID=65534 "$GS" -q --as-root -o "$T/launch2" -- id -u 2>/dev/null | tail -1)
[ "$uid" = 0 ] || fail "--as-root ran as uid '$uid'"
expect_error 'cannot run the command' "$GS" -q -o "$T/launch3" -- /no/such/program
expect_error "takes seconds .-d 30., or a number with s, m or h" "$GS" -d 5x -p 1
# -d with a unit, -o naming the pprof file itself (not a prefix)
"$GS" -q -d 0.005m --format pprof,speedscope -o "$T/sfx.pb.gz" -- sleep 2 2>"$T/sfx.err" ||
	{ cat "$T/sfx.err"; fail "-d 0.005m -o sfx.pb.gz"; }
[ -s "$T/sfx.pb.gz" ] && [ -s "$T/sfx.speedscope.json" ] && [ ! -e "$T/sfx.pb.gz.pb.gz" ] ||
	fail "-o sfx.pb.gz wrote: $(ls "$T" | grep sfx | tr '\n' ' ')"
grep -q 'duration reached' "$T/sfx.err" || fail "-d 0.005m (0.3 s) did not end the run: $(cat "$T/sfx.err")"
"$GS" --version | grep -q '^gpusample ' || fail "--version"
"$GS" --help | grep -q -- '--no-children' || fail "--help"
ok "errors are clear"
