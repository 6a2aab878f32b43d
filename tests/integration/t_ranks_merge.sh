#!/bin/bash
# Many hosts, issue 14 done-when (2): two "hosts" (UTS namespaces named
# node-a and node-b, each its own `gpusample -o prof-%h -- python ...` as
# srun would start one per node, ranks 0 and 1 from RANK) write one profile
# each; `gpusample merge` makes one of them:
#  - every column's total in the merged file is exactly the sum of the two
#    (go tool pprof -raw, all six sample types);
#  - `go tool pprof -tagfocus=rank=1` on the merged file gives exactly
#    node-b's totals, and host labels are kept;
#  - `gpusample report A B` reads several files (one merged view);
#  - profiles of different gpusample versions are refused with a message
#    naming both, and nothing is written.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
command -v unshare >/dev/null || fail "unshare (util-linux) missing"

for h in a b; do
	r=$([ $h = a ] && echo 0 || echo 1)
	unshare --uts bash -c "hostname node-$h && RANK=$r WORLD_SIZE=2 GS_SECONDS=2 exec \"$GS\" -o \"$T/prof-%h\" -q --format pprof -- /usr/bin/python3 \"$PYWL/py_chain.py\"" \
		> "$T/$h.out" 2>&1 || { cat "$T/$h.out"; fail "gpusample on node-$h failed"; }
	[ -s "$T/prof-node-$h.pb.gz" ] || { ls "$T"; fail "-o prof-%h did not write prof-node-$h.pb.gz"; }
done
ok "-o prof-%h wrote prof-node-a.pb.gz and prof-node-b.pb.gz"

"$GS" merge "$T/all.pb.gz" "$T/prof-node-a.pb.gz" "$T/prof-node-b.pb.gz" 2> "$T/merge.err" ||
	{ cat "$T/merge.err"; fail "gpusample merge failed"; }
cat "$T/merge.err"

# totals FILE [pprof filter args]: the six column sums, space-separated, of
# what pprof keeps (filtered through -proto, then -raw: -raw ignores filters).
totals() {
	local f=$1
	shift
	if [ $# -gt 0 ]; then
		pprof -proto "$@" "$f" > "$f.filtered.pb.gz" || fail "pprof -proto $*: $(cat "$T/pprof.err")"
		f=$f.filtered.pb.gz
	fi
	pprof -raw "$f" | awk '
		/^Samples:/ { on = 1; getline; next }
		/^Locations/ { on = 0 }
		on && /^ +[0-9]/ { sub(/:.*/, ""); for (i = 1; i <= NF; i++) s[i] += $i; n = NF }
		END { for (i = 1; i <= n; i++) printf "%.0f ", s[i]; print "" }'
}
ta=$(totals "$T/prof-node-a.pb.gz")
tb=$(totals "$T/prof-node-b.pb.gz")
tm=$(totals "$T/all.pb.gz")
sum=$(paste -d' ' <(echo $ta | tr ' ' '\n') <(echo $tb | tr ' ' '\n') | awk '{printf "%.0f ", $1 + $2} END {print ""}')
echo "totals (samples cpu offcpu gpu gpu_ni wall): node-a $ta| node-b $tb| merged $tm"
[ "$(echo $ta | cut -d' ' -f1)" -gt 20 ] || fail "too few samples on node-a: $ta"
[ "$tm" = "$sum" ] || fail "merged totals $tm != node-a + node-b $sum"
# its summary line counts CPU samples (the samples column), not sample records
grep -q "merged 2 profiles ($(echo $tm | cut -d' ' -f1) CPU samples) into" "$T/merge.err" ||
	fail "the merge's summary does not count the merged CPU samples ($(echo $tm | cut -d' ' -f1)): $(cat "$T/merge.err")"
ok "merged totals add up exactly"

t1=$(totals "$T/all.pb.gz" -tagfocus=rank=1)
[ "$t1" = "$tb" ] || fail "-tagfocus=rank=1 gives $t1, node-b (rank 1) has $tb"
hosts=$(pprof -tags -tagfocus=rank=1 "$T/all.pb.gz" | awk '/^ host:/ {on=1; next} /^ [a-z_]+:/ {on=0} on && NF' | sed 's/.*: //' | sort -u | tr '\n' ' ')
[ "$hosts" = "node-b " ] || fail "rank 1 samples should all be host=node-b, got '$hosts'"
ok "go tool pprof -tagfocus=rank=1 on the merged file: exactly node-b's totals, host=node-b"

"$GS" report "$T/prof-node-a.pb.gz" "$T/prof-node-b.pb.gz" > "$T/report" || fail "gpusample report A B failed"
procs=$(sed -n '/^Processes/,/^$/p' "$T/report" | grep -c python)
[ "$procs" -ge 2 ] || { cat "$T/report"; fail "report of two files should list both python processes"; }
ok "gpusample report of two files lists both hosts' processes"

# Another version: the version comment rewritten in place (same length).
/usr/bin/python3 - "$T/prof-node-b.pb.gz" "$T/other.pb.gz" <<'PY'
import gzip, sys
b = gzip.open(sys.argv[1]).read()
i = b.index(b"gpusample 0.1.0") + len(b"gpusample ")
gzip.open(sys.argv[2], "wb").write(b[:i] + b"9.9.9" + b[i + 5:])
PY
if "$GS" merge "$T/mixed.pb.gz" "$T/prof-node-a.pb.gz" "$T/other.pb.gz" 2> "$T/mixed.err"; then
	fail "merging two versions succeeded"
fi
cat "$T/mixed.err"
grep -q "other.pb.gz: written by gpusample 9.9.9, the others by 0.1.0: merge profiles of one version" "$T/mixed.err" ||
	fail "no clear version message"
[ ! -e "$T/mixed.pb.gz" ] || fail "a refused merge wrote its output"
ok "mismatched versions refused with a clear message"

# OUT comes first: `merge prof-*.pb.gz` (OUT forgotten) must not replace the
# first profile with the merge of the others.
cp "$T/prof-node-a.pb.gz" "$T/keep.pb.gz"
if "$GS" merge "$T/prof-node-a.pb.gz" "$T/prof-node-b.pb.gz" "$T/all.pb.gz" 2> "$T/over.err"; then
	fail "merge overwrote an existing OUT"
fi
cat "$T/over.err"
grep -q "prof-node-a.pb.gz exists: merge writes a new file (usage: gpusample merge OUT IN...)" "$T/over.err" ||
	fail "no clear message for an existing OUT"
cmp -s "$T/prof-node-a.pb.gz" "$T/keep.pb.gz" || fail "the existing OUT was changed"
# a dump (one stack per thread) is no run to merge
"$GS" dump -p $$ -o "$T/dump" > /dev/null 2>&1 || fail "gpusample dump of this shell failed"
if "$GS" merge "$T/with-dump.pb.gz" "$T/prof-node-a.pb.gz" "$T/dump.pb.gz" 2> "$T/dump.err"; then
	fail "merging a dump succeeded"
fi
grep -q "dump.pb.gz: a dump (one stack per thread at one moment), not a sampled profile" "$T/dump.err" ||
	fail "no clear message for a dump: $(cat "$T/dump.err")"
ok "an existing OUT is refused and kept; a dump is refused by name"
# one file given twice would count its samples twice
if "$GS" merge "$T/twice.pb.gz" "$T/prof-node-a.pb.gz" "$T/prof-node-a.pb.gz" 2> "$T/twice.err"; then
	fail "merging a file with itself succeeded"
fi
grep -q "prof-node-a.pb.gz and .*prof-node-a.pb.gz are the same file" "$T/twice.err" ||
	fail "no clear message for a file given twice: $(cat "$T/twice.err")"
ok "a file given twice is refused"
