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
expect_error 'frequency|-F' "$GS" -F 0 -p 1 -d 1
expect_error 'offcpu-rate' "$GS" --offcpu-rate 0 -p 1 -d 1
expect_error 'offcpu-rate' "$GS" --offcpu-rate 2.5 -p 1 -d 1
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
expect_error 'perf_event_max_sample_rate' "$GS" -F $((max + 1)) -p $$ -d 1
expect_error 'cannot write' "$GS" -p $$ -d 1 -o /proc/no-such-dir/x
expect_error 'nothing to profile' "$GS"
expect_error 'not both' "$GS" -p 1 -- true
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
"$GS" --version | grep -q '^gpusample ' || fail "--version"
"$GS" --help | grep -q -- '--no-children' || fail "--help"
ok "errors are clear"
