#!/bin/sh
# SPDX-License-Identifier: MIT
# CFI table build time (native/cfi_rows.c) of one big object, this tree's
# builder against a baseline revision's, in the same run: bench/cfi_build.c
# linked against each builder, one build per fresh process (as the builder
# thread meets a new object), rounds alternating.  Prints each side's median
# wall and CPU time and page faults, and the ratios.
#
#   bench/cfi_build.sh [ELF-FILE]   default: the sid root's libtorch_cpu.so
#   BENCH_CFI_BASE=REV (default 34550da: before the FDE-order sort)
#   BENCH_CFI_ROUNDS=N (default 7)
# Needs make (build/libgpusample_core.a).
set -eu
cd "$(dirname "$0")/.."
LIB=${1:-$(ls /var/cache/gpusample/sid-root/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.* 2>/dev/null | head -1)}
BASE=${BENCH_CFI_BASE:-34550da}
ROUNDS=${BENCH_CFI_ROUNDS:-7}
[ -f "$LIB" ] || { echo "cfi_build.sh: no ELF file (give one, or build the sid root: scripts/sid-root.sh)" >&2; exit 1; }
[ -f build/libgpusample_core.a ] || { echo "cfi_build.sh: run make first" >&2; exit 1; }
W=$(mktemp -d /tmp/gs-cfibench.XXXXXX)
trap 'rm -rf "$W"' EXIT
git show "$BASE:native/cfi_rows.c" | sed "s@\"native/cfi_int.h\"@\"native/cfi_int.h\"@; s@\"bpf/cfi.h\"@\"native/native.h\"@" > "$W/cfi_rows_base.c"
LIBS="build/libgpusample_core.a -Wl,-Bstatic -lbpf -ldw -lelf -lz -llzma -lbz2 -lzstd -liberty -Wl,-Bdynamic -lpthread -ldl -lm"
CC="cc -O2 -std=gnu11 -D_GNU_SOURCE -Iinclude -I. -Ibuild"
# the builder's own file first: its symbols win over the archive's copy
$CC -o "$W/new" bench/cfi_build.c native/cfi_rows.c $LIBS
$CC -o "$W/base" bench/cfi_build.c "$W/cfi_rows_base.c" $LIBS
for i in $(seq 1 "$ROUNDS"); do
	for side in base new; do
		echo "$side $("$W/$side" "$LIB")" >> "$W/runs"
	done
done
echo "object: $LIB ($(wc -c < "$LIB") bytes); $ROUNDS builds each, alternating; baseline $BASE"
awk '
function med(side, f,   n, i, j, t, v) {
	n = 0
	for (i = 1; i <= NR; i++) if (s[i] == side) v[++n] = x[i, f]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ s[NR] = $1; rows[$1] = $3; x[NR, "wall"] = $5; x[NR, "cpu"] = $7; x[NR, "flt"] = $9 }
END {
	printf "| builder | rows | wall ms (median) | CPU ms (median) | page faults |\n|---|---|---|---|---|\n"
	for (k = 0; k < 2; k++) {
		side = k ? "new" : "base"
		printf "| %s | %d | %.0f | %.0f | %.0f |\n", side, rows[side], med(side, "wall"), med(side, "cpu"), med(side, "flt")
	}
	printf "ratio base/new: wall %.2fx, CPU %.2fx, page faults %.2fx\n", med("base", "wall") / med("new", "wall"), med("base", "cpu") / med("new", "cpu"), med("base", "flt") / med("new", "flt")
}' "$W/runs"
