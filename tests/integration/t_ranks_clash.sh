#!/bin/bash
# -o templates, issue 14 done-when (3), second half: a clash never
# overwrites another run's file.  `srun gpusample -o prof-%h ...` with two
# tasks on one node expands to one path twice; the run that comes second
# must leave the first one's profile as it was (same user, same directory:
# the realistic case).  The file creation itself is the output layer's
# (output/common.c gs_output_open, session/outputs.c); a name made from a
# template is checked before the run starts (session/ranks.c): the second run
# is refused with a message saying what to do.
source "$(dirname "$0")/lib.sh"
[ -x "$GS" ] || fail "$GS missing"

# The first run writes its profile; the second expands to the same path.
"$GS" -o "$T/clash-%h" -q --format pprof -- /bin/sleep 0.3 2> "$T/first.err" || { cat "$T/first.err"; fail "first run failed"; }
[ -s "$T/clash-$(hostname).pb.gz" ] || fail "first run wrote no clash-$(hostname).pb.gz"
cp "$T/clash-$(hostname).pb.gz" "$T/precious"
"$GS" -o "$T/clash-%h" -q --format pprof -- /bin/sleep 0.5 > "$T/c.out" 2> "$T/c.err"
echo "gpusample on a clash: exit $?; $(grep -v '^gpusample: sampling' "$T/c.err" | tail -2 | tr '\n' ' ')"
cmp -s "$T/precious" "$T/clash-$(hostname).pb.gz" || fail "a clash overwrote another run's file"
grep -q "clash-$(hostname).pb.gz exists: -o .*clash-%h names one run's files.*not overwriting it (remove it, or add %p or %r to -o)" "$T/c.err" ||
	fail "no clear message on the clash"
ok "a clash did not overwrite the existing file, and said so"
# The default -o (gpusample-%p) clashes only with an earlier run on the same
# PID: the hint must not ask for the %p it already has.
sleep 30 & job=$!
(cd "$T" && "$GS" -p $job -d 0.3 -q --format pprof 2> "$T/d1.err") || { cat "$T/d1.err"; fail "first default-name run failed"; }
(cd "$T" && "$GS" -p $job -d 0.3 -q --format pprof 2> "$T/d2.err") && fail "a second default-name run overwrote gpusample-$job.pb.gz"
kill $job
grep -q "gpusample-$job.pb.gz exists: .*an earlier run on this PID: remove or rename it, or give -o another name" "$T/d2.err" ||
	fail "the default-name clash's hint: $(cat "$T/d2.err")"
grep -q 'add %p' "$T/d2.err" && fail "the hint asks to add the %p the default name has: $(cat "$T/d2.err")"
ok "a rerun on the same PID is refused with a hint that fits it"
# A plain -o (no template) is one user's name for one profile: a rerun
# replaces that user's own earlier profile, as before.
"$GS" -o "$T/plain" -q --format pprof -- /bin/sleep 0.2 2> /dev/null || fail "first plain run failed"
"$GS" -o "$T/plain" -q --format pprof -- /bin/sleep 0.2 2> "$T/p.err" || { cat "$T/p.err"; fail "a plain -o rerun failed"; }
ok "a plain -o rerun still replaces its own profile"
