#!/bin/bash
# Issue 12: output files.  gpusample runs as root and writes where other users
# can: it never writes through, over, or chowns anything it did not create;
# paths it cannot use are refused before sampling; the launched command does
# not inherit gpusample's SIGPIPE ignore.
source "$(dirname "$0")/lib.sh"
U=gs-test-user
if ! id -u "$U" >/dev/null 2>&1; then
	useradd -M -s /usr/sbin/nologin "$U" || fail "cannot create test user $U"
	trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; userdel "$U"' EXIT
fi
uid=$(id -u "$U"); gid=$(id -g "$U")
chmod 755 "$T"
D=$T/shared; mkdir "$D"; chown "$U:$U" "$D"; chmod 1777 "$D"
as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }

# refused_early PATTERN ARGS...: exits non-zero, says PATTERN, never samples.
refused_early() {
	local pat=$1; shift
	local t0=$(date +%s%N)
	env ${CALLER:-SUDO_UID=$uid SUDO_GID=$gid} "$GS" -q -p $$ -d 5 "$@" >"$T/out" 2>&1 && fail "'$*' succeeded"
	grep -q 'sampling' "$T/out" && fail "'$*' started sampling before refusing: $(cat "$T/out")"
	grep -Eqi "$pat" "$T/out" || fail "'$*' said: $(cat "$T/out") (expected /$pat/)"
	local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ "$ms" -lt 4000 ] || fail "'$*' refused only after $ms ms"
	echo "ok: refused in $ms ms: $(head -1 "$T/out")"
}

# Another user's file at the output path (root runs gpusample, the target's
# user planted the file): refused, unchanged.
as_user sh -c "echo theirs > '$D/foreign.pb.gz'"
CALLER=USER=root refused_early 'another user' -o "$D/foreign"
[ "$(cat "$D/foreign.pb.gz")" = theirs ] || fail "foreign file changed"
[ "$(stat -c %u "$D/foreign.pb.gz")" = "$uid" ] || fail "foreign file owner changed"
# Root's file there (the caller is the sudo user): refused too.
echo rootfile > "$D/rootf.pb.gz"
refused_early 'another user' -o "$D/rootf"
[ "$(cat "$D/rootf.pb.gz")" = rootfile ] || fail "root's file changed"
# FIFO, directory, "-o dir/", an uncreatable path.
mkfifo "$D/fifo.pb.gz"
refused_early 'FIFO' -o "$D/fifo"
mkdir "$D/dir.pb.gz"
refused_early 'directory' -o "$D/dir"
refused_early 'is a directory.*file prefix' -o "$D/"
[ ! -e "$D/.pb.gz" ] || fail "-o dir/ wrote a hidden .pb.gz"
refused_early 'cannot write' -o /proc/no-such-dir/x
refused_early 'cannot (write|create)' -o /proc/self/x

# A busy target for the runs that must collect samples.
(while :; do :; done) &
busy=$!

# The chown race: while gpusample samples, the caller keeps planting symlinks
# to a root-only file at the output path.  That file never changes owner or
# content; our profile, when it lands, belongs to the caller.
echo secret > "$T/victim"; chmod 600 "$T/victim"
SUDO_UID=$uid SUDO_GID=$gid gs_start -q -p $busy -d 2 -o "$D/race"
setsid setpriv --reuid="$uid" --regid="$gid" --clear-groups sh -c "while :; do ln -sfn '$T/victim' '$D/race.pb.gz' 2>/dev/null; rm -f '$D/race.pb.gz'; done" &
racer=$!
wait "$gs"; rc=$?
kill -- -"$racer"; wait "$racer" 2>/dev/null
[ "$(stat -c %u:%a "$T/victim")" = "0:600" ] || fail "victim changed: $(stat -c %u:%a "$T/victim")"
[ "$(cat "$T/victim")" = secret ] || fail "victim content changed"
# (The caller owns the directory and may delete our profile right after it
# lands: that is theirs to do.  What may never happen is a root-owned file.)
if [ "$rc" = 0 ]; then
	grep -q 'wrote .*race.pb.gz' "$T/gs.err" || fail "exit 0 without writing: $(cat "$T/gs.err")"
	for f in "$D"/race.*; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		[ "$(stat -c %u "$f")" = "$uid" ] || fail "$f not given to the caller"
	done
	echo "ok: race: profile written and given to $U"
else
	grep -q 'someone else\|cannot' "$T/gs.err" || fail "race: exit $rc without a reason: $(cat "$T/gs.err")"
	echo "ok: race: refused to publish: $(grep cannot "$T/gs.err" | head -1)"
fi
ls -a "$D" | grep -q '^\.race' && fail "temporary file left behind: $(ls -a "$D")"

# A normal run under sudo: a fresh file owned by the caller; a second run
# replaces the caller's own earlier profile.
for i in 1 2; do
	SUDO_UID=$uid SUDO_GID=$gid "$GS" -q -p $busy -d 1 -o "$D/mine" 2>"$T/gs.err" ||
		fail "run $i: $(cat "$T/gs.err")"
	[ "$(stat -c %u:%g "$D/mine.pb.gz")" = "$uid:$gid" ] || fail "run $i: owner $(stat -c %u:%g "$D/mine.pb.gz")"
done
ok "own profile replaced, owned by the caller"

# The launched command gets SIGPIPE's default disposition back (bit 13 of
# SigIgn clear), whatever gpusample ignores itself.
ign=$("$GS" -q -o "$T/sig" -- grep SigIgn /proc/self/status 2>/dev/null | awk '/SigIgn/{print $2}')
[ -n "$ign" ] || fail "no SigIgn line from the command"
(( (16#$ign & 0x1000) == 0 )) || fail "command inherited SIGPIPE ignored (SigIgn $ign)"
ok "command starts with SIGPIPE default (SigIgn $ign)"
