#!/bin/bash
# Issue 10: counters are defined once (include/gpusample/counters.h) and
# every one of them reaches the profile: the comment "counters: name=N ..."
# read back by `go tool pprof -comments` names each row of the header's
# tables exactly once.  A real loss (Python walks cut at the frame limit:
# 200-deep recursion, py_recurse.py) shows a non-zero py_truncated there,
# and `gpusample report` prints it on its "dropped:" line with the same
# value, while the lost line keeps its old shape.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
# the rows of the X-macro tables: X(name, GS_CK_..., "...")
names=$(grep -oE '^[[:space:]]*X\([a-z_]+, GS_CK_' include/gpusample/counters.h |
	sed -E 's/^[[:space:]]*X\(([a-z_]+),.*/\1/')
nnames=$(echo "$names" | wc -l)
[ "$nnames" -ge 19 ] || fail "only $nnames counter rows parsed from counters.h: $names"

py_launch "$T/rec" /usr/bin/python3 py_recurse.py 2 200 "$T/exp"
pprof -comments "$T/rec.pb.gz" > "$T/comments" || fail "pprof -comments: $(cat "$T/pprof.err")"
[ "$(grep -c '^counters:' "$T/comments")" -eq 1 ] || fail "not one counters comment: $(cat "$T/comments")"
line=$(grep '^counters:' "$T/comments")
missing=""
for n in $names; do
	c=$(echo "$line" | tr ' ' '\n' | grep -cE "^$n=[0-9]+$")
	[ "$c" -eq 1 ] || missing="$missing $n($c)"
done
[ -z "$missing" ] || fail "counters missing or repeated in the profile comment:$missing; comment: $line"
val() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
samples=$(val samples); trunc=$(val py_truncated)
echo "$nnames counters in the comment; samples=$samples py_truncated=$trunc"
[ "$samples" -ge 20 ] || fail "samples=$samples: the BPF sample counter did not arrive"
[ "$trunc" -ge 20 ] || fail "py_truncated=$trunc under a 200-deep recursion (limit 128)"

"$GS" report "$T/rec.pb.gz" > "$T/report" 2> "$T/report.err" || fail "report: $(cat "$T/report.err")"
grep -qE '^  duration .*, [0-9]+ CPU samples, [0-9]+ lost' "$T/report" || fail "lost line changed: $(head -3 "$T/report")"
drop=$(grep '^  dropped: ' "$T/report") || fail "no dropped line: $(head -5 "$T/report")"
echo "report: $drop"
echo "$drop" | grep -qE "(: |, )py_truncated $trunc(,|$)" || fail "dropped line lacks py_truncated $trunc: $drop"
echo "$drop" | grep -qE '(: |, )(samples|proc_events|lost) ' && fail "dropped line lists a non-loss counter or lost: $drop"
ok "every counter in the profile comment; py_truncated=$trunc reported as dropped"
