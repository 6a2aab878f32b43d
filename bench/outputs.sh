#!/bin/sh
# SPDX-License-Identifier: MIT
# Output writers at scale: build/bench/outputs (bench/outputs.c) builds a
# synthetic long-run profile and times one writer per process; this runs
# every writer and prints a markdown table (bench/results_outputs.md has
# the figures and how they were taken).  The HTML page is also opened in
# headless Chromium (node tests/tools/html_check.js): its open time is the
# row's note.
#
#   bench/outputs.sh                      this tree's writers
#   BENCH_OUT_SAMPLES=5000000 (default)   samples in the model
#   BENCH_OUT_ARGS="-r 1.2 -b 0.3"        more model options (bench/outputs.c)
#   BENCH_OUT_WRITERS="html report"       some writers only (default: all)
#   BENCH_OUT_BASE=PATH                   also run a baseline binary: the
#                                         same bench/outputs.c linked against
#                                         another tree's core archive, e.g.
#     git worktree add /tmp/gs-base main && make -C /tmp/gs-base build/libgpusample_core.a
#     cc -O2 -std=gnu11 -D_GNU_SOURCE -DGS_VERSION='"base"' -Iinclude -I. -Ibuild \
#        -o /tmp/outputs-base bench/outputs.c /tmp/gs-base/build/libgpusample_core.a \
#        -Wl,-Bstatic -lbpf -ldw -lelf -lz -llzma -lbz2 -lzstd -liberty -Wl,-Bdynamic -lpthread -ldl -lm
#
# Each run writes into a temporary directory, removed at the end.  Needs
# ~0.5 GB of memory per run at 5M samples (the model is 64 bytes a sample).
set -eu
cd "$(dirname "$0")/.."
BIN=${BENCH_OUT_BIN:-build/bench/outputs}
N=${BENCH_OUT_SAMPLES:-5000000}
ARGS=${BENCH_OUT_ARGS:-}
[ -x "$BIN" ] || { echo "outputs.sh: $BIN missing: run make bench-tools" >&2; exit 1; }
if [ -n "${BENCH_OUT_BASE:-}" ] && [ ! -x "$BENCH_OUT_BASE" ]; then
	echo "outputs.sh: BENCH_OUT_BASE=$BENCH_OUT_BASE is not an executable" >&2
	exit 1
fi
T=$(mktemp -d /tmp/gs-bench-outputs.XXXXXX)
trap 'rm -rf "$T"' EXIT

# One writer: "| build | writer | MB | s | model MB | peak MB | +MB |".
row() { # label binary writer
	line=$("$2" -n "$N" $ARGS -w "$3" -o "$T/out.$3") || { echo "outputs.sh: $2 -w $3 failed" >&2; exit 1; }
	echo "$line" | awk -v label="$1" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "| %s | %s | %.1f | %.2f | %d | %d | %d |", label, v["writer"], v["bytes"] / 1e6,
		       v["write_s"], v["model_rss_mb"], v["peak_rss_mb"], v["peak_rss_mb"] - v["model_rss_mb"]
	}'
	# the speedscope title says when the long-run policy merged samples
	note=$(head -c 4096 "$T/out.$3" | grep -o '\[long run: [^]]*\]' || true)
	# the HTML page: how long Chromium takes to show it (navigation start
	# to the flame graph drawn, tests/tools/html_check.js)
	[ "$3" = html ] && note="opens in $(node tests/tools/html_check.js "$T/out.html" |
		sed -n 's/^open_ms //p') ms in headless Chromium"
	echo " ${note:-} |"
	rm -f "$T/out.$3"
}

echo "model: $("$BIN" -n "$N" $ARGS -w none -o "$T/none" | sed 's/ build_s.*//; s/^writer=none //')"
echo
echo "| build | writer | file MB | write s | model RSS MB | peak RSS MB | writer's RSS MB | note |"
echo "|---|---|---|---|---|---|---|---|"
# (a baseline built before the report writer existed in bench/outputs.c
# has no report row)
for w in ${BENCH_OUT_WRITERS:-pprof speedscope folded trace report html}; do
	if [ -n "${BENCH_OUT_BASE:-}" ] &&
	   "$BENCH_OUT_BASE" -n 10 -w "$w" -o "$T/probe" >/dev/null 2>&1; then
		row base "$BENCH_OUT_BASE" "$w"
	fi
	row this "$BIN" "$w"
done
