#!/bin/bash
# The CFI walker vs `perf record --call-graph dwarf` (user-space DWARF
# unwinding by perf itself) on the same nofp_chain process at the same time:
# the sets of distinct call chains (main .. leaf, function names) must agree;
# with build/gpusample present, gpusample -p on the same process as well.
# Pass: every chain perf sees in >= 2% of its samples is one of ours and
# vice versa, and the overlap weighted by samples is >= 95% both ways.
source "$(dirname "$0")/lib.sh"
P=$ROOT/$BUILD/tests/cfi_probe
W=$WL/nofp_chain
[ -x "$P" ] && [ -x "$W" ] || fail "build first: make BUILD=$BUILD test-helpers"
command -v perf >/dev/null || fail "perf (linux-perf) not installed (make test-deps)"

"$W" 20 &
pid=$!
sleep 0.5
"$P" -d 6 -F 99 -p "$pid" > "$T/cfi.folded" 2> "$T/cfi.err" &
probe=$!
if [ -x "$GS" ]; then
	(cd "$T" && "$GS" -q -p "$pid" -d 6 -F 99 --no-kernel --no-gpu --format folded -o "$T/gs") > "$T/gs.log" 2>&1 &
	gsp=$!
fi
perf record -q -o "$T/perf.data" --call-graph dwarf,16384 -F 99 -p "$pid" -- sleep 6 2> "$T/perf.rec.err" ||
	fail "perf record: $(tail -3 "$T/perf.rec.err")"
wait "$probe" || fail "cfi_probe: $(tail -3 "$T/cfi.err")"
[ -n "${gsp:-}" ] && { wait "$gsp" || fail "gpusample -p: $(tail -3 "$T/gs.log")"; }
kill "$pid" 2>/dev/null

# perf script: a header line per sample, then "addr sym (dso)" lines leaf
# first; kernel frames dropped (the CFI walker covers user space only).
perf script -i "$T/perf.data" -F ip,sym,dso --no-inline 2>/dev/null | awk '
	/^[[:space:]]*$/ { if (s != "") c[s]++; s = ""; next }
	/\[kernel\.kallsyms\]/ { next }
	{ sym = $2; s = (s == "") ? sym : sym ";" s }
	END { if (s != "") c[s]++; for (k in c) print k, c[k] }' > "$T/perf.folded"

# keep main .. leaf: the part both unwinders name the same way
trim() { awk '{ n = $NF; $NF = ""; s = $0; sub(/ +$/, "", s); i = index(s, ";main;")
		if (substr(s, 1, 5) == "main;") i = 0; else if (i == 0) next; else i++
		t[substr(s, i + (i > 0 ? 0 : 1))] += n } END { for (k in t) print k, t[k] }' | sort; }
trim < "$T/perf.folded" > "$T/b"
echo "== perf --call-graph dwarf chains"; cat "$T/b"
compare() { # folded-trimmed A, B, name of A
	awk -v A="$1" -v B="$2" -v NAME="$3" 'BEGIN {
	while ((getline l < A) > 0) { n = l; sub(/.* /, "", n); k = l; sub(/ [0-9]+$/, "", k); a[k] = n + 0; ta += n }
	while ((getline l < B) > 0) { n = l; sub(/.* /, "", n); k = l; sub(/ [0-9]+$/, "", k); b[k] = n + 0; tb += n }
	for (k in a) { u[k] = 1; if (k in b) { both++; wa += a[k] } }
	for (k in b) { u[k] = 1; if (k in a) wb += b[k] }
	nu = 0; for (k in u) nu++
	bad = 0
	for (k in b) if (b[k] >= 0.02 * tb && !(k in a)) { print "missing from " NAME ": " k; bad = 1 }
	for (k in a) if (a[k] >= 0.02 * ta && !(k in b)) { print "missing from perf: " k; bad = 1 }
	printf "%s vs perf: distinct chains %d vs %d, common %d (jaccard %.2f); samples in common chains: %.1f%% vs %.1f%%\n",
		NAME, length(a), length(b), both, nu ? both / nu : 0, ta ? 100 * wa / ta : 0, tb ? 100 * wb / tb : 0
	if (ta < 50 || tb < 50 || wa < 0.95 * ta || wb < 0.95 * tb) bad = 1
	exit bad }'
}
trim < "$T/cfi.folded" > "$T/a"
echo "== CFI unwinder (cfi_probe) chains"; cat "$T/a"
compare "$T/a" "$T/b" cfi_probe || fail "call chains differ (see above)"
if [ -n "${gsp:-}" ]; then
	trim < "$T/gs.cpu.folded" > "$T/g"
	echo "== gpusample chains"; cat "$T/g"
	compare "$T/g" "$T/b" gpusample || fail "gpusample call chains differ from perf (see above)"
fi
ok "CFI chains agree with perf --call-graph dwarf"
