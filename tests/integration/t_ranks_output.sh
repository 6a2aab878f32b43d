#!/bin/bash
# -o templates, issue 14 done-when (3):
#  - `-o DIR/prof-%h-%p` writes DIR/prof-<hostname>-<pid of the launched
#    command>.pb.gz; `-o DIR/r%r` with RANK=3 in the environment writes
#    DIR/r3.pb.gz; %r without any rank variable, and an unknown %x, are
#    refused before anything runs.
# (A clash at the expanded path: t_ranks_clash.sh.)
source "$(dirname "$0")/lib.sh"
[ -x "$GS" ] || fail "$GS missing"
go version >/dev/null 2>&1 || fail "go (golang-go) is needed for go tool pprof"

"$GS" -o "$T/prof-%h-%p" -q --format pprof -- /bin/sh -c 'echo $$ > "$0"; exec /bin/sleep 1' "$T/pid" \
	2> "$T/a.err" || { cat "$T/a.err"; fail "gpusample -o prof-%h-%p failed"; }
want="$T/prof-$(hostname)-$(cat "$T/pid").pb.gz"
[ -s "$want" ] || { ls "$T"; cat "$T/a.err"; fail "expected $want"; }
grep -qF "wrote $want" "$T/a.err" || fail "gpusample did not say it wrote $want"
pprof -raw "$want" > /dev/null || fail "$want is not a valid profile"
ok "-o prof-%h-%p wrote $(basename "$want")"

RANK=3 "$GS" -o "$T/r%r" -q --format pprof -- /bin/sleep 0.5 2> "$T/r.err" || { cat "$T/r.err"; fail "-o r%r failed"; }
[ -s "$T/r3.pb.gz" ] || { ls "$T"; fail "RANK=3 -o r%r did not write r3.pb.gz"; }
SLURM_PROCID=5 "$GS" -o "$T/s%r" -q --format pprof -- /bin/sleep 0.5 2> "$T/s.err" || { cat "$T/s.err"; fail "-o s%r failed"; }
[ -s "$T/s5.pb.gz" ] || { ls "$T"; fail "SLURM_PROCID=5 -o s%r did not write s5.pb.gz"; }
ok "%r from RANK and SLURM_PROCID"

if env -u RANK -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK -u PMI_RANK "$GS" -o "$T/x%r" -q -- /bin/touch "$T/ran" 2> "$T/x.err"; then
	fail "%r without a rank was accepted"
fi
grep -q "%r needs the rank" "$T/x.err" || { cat "$T/x.err"; fail "no clear message for %r without a rank"; }
[ ! -e "$T/ran" ] || fail "the command ran although -o was refused"
"$GS" -o "$T/y%x" -q -- /bin/true 2> "$T/y.err" && fail "-o with %x was accepted"
grep -q "unknown %x" "$T/y.err" || { cat "$T/y.err"; fail "no clear message for %x"; }
ok "%r without a rank and %x refused before anything runs"
