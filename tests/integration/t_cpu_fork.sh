#!/bin/bash
# Issue 2 #2 and #3: children forked after attach are sampled under their own
# pid labels, a child that lives 300 ms is symbolized, and the target exiting
# before -d ends the run with a complete profile.
source "$(dirname "$0")/lib.sh"
"$WL/cpu_forker" 60 2.0 & pid=$!
gs_start -p "$pid" -d 120 -o "$T/fork" -q --format pprof,folded
sleep 0.5
kill -USR1 "$pid"   # fork now, after attach
start=$(date +%s)
gs_wait
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 20 ] || fail "run did not end when the target exited (${elapsed}s)"
grep -q "^gpusample: the profiled process exited; writing the profile" "$T/gs.err" ||
	fail "the run's end is not explained: $(cat "$T/gs.err")"
pprof_stacks "$T/fork.pb.gz" > "$T/stacks" || fail "pprof: $(cat "$T/pprof.err")"
pids=$(awk -F'\t' '{ if (match($2, /pid=[^,]*/)) print substr($2, RSTART, RLENGTH) }' "$T/stacks" | sort -u | wc -l)
echo "distinct pid labels: $pids"
[ "$pids" -ge 3 ] || fail "expected samples from parent and two children, got $pids pid labels"
grep -q 'child_long_work' "$T/stacks" || fail "child_long_work not symbolized"
grep -q 'child_short_work' "$T/stacks" || fail "300 ms child (child_short_work) not symbolized"
grep -q 'parent_work' "$T/stacks" || fail "parent_work missing"
# The short child's frames carry its own pid, not the parent's.
short_pid=$(awk -F'\t' '$3 ~ /child_short_work/ { if (match($2, /pid=[^,]*/)) print substr($2, RSTART, RLENGTH) }' "$T/stacks" | sort -u)
parent_pid=$(awk -F'\t' '$3 ~ /parent_work/ { if (match($2, /pid=[^,]*/)) print substr($2, RSTART, RLENGTH) }' "$T/stacks" | sort -u)
[ -n "$short_pid" ] && [ "$short_pid" != "$parent_pid" ] || fail "child samples not under their own pid ($short_pid vs $parent_pid)"
[ -s "$T/fork.cpu.folded" ] || fail "folded output missing"
ok "children sampled with their own pids; run ended at target exit after ${elapsed}s"
