#!/bin/bash
# Issue 24, items 5 and 6: a job run as nobody loads a library that speaks
# the GPU agent's USDT protocol (tests/fakes/flood_agent.c) and, once
# gpusample arms it, floods for 10 s: launch events with a new kernel hash
# every other one and a new correlation id each, and PC batches whose PCs
# carry unique kernel names.  Without caps gpusample kept one join entry
# per kernel hash, every correlation id and a kernel, location and two
# strings per name (main: 405-560 MB for launches alone, 640 MB for PCs
# alone, still growing).  Now its peak RSS stays under GS_FLOOD_MAX_MIB
# (default 300), and the loss is counted by cause and named.
# gs-test-timeout: 120
source "$(dirname "$0")/lib.sh"
MAX_MIB=${GS_FLOOD_MAX_MIB:-300}
chmod 755 "$T"
mkdir "$T/u"
gcc -O1 -g -shared -fPIC -Wall -Wextra -Iinclude -I. -o "$T/u/libflood.so" \
	tests/fakes/flood_agent.c -lpthread || fail "cc flood_agent.c"
chown -R nobody:nogroup "$T/u"

setpriv --reuid=nobody --regid=nogroup --clear-groups env LD_PRELOAD="$T/u/libflood.so" \
	GS_FLOOD=both GS_FLOOD_SECONDS=10 GS_FLOOD_OUT="$T/u/flood.out" sleep 60 &
job=$!
sleep 0.5
/usr/bin/time -o "$T/rss" -f %M "$GS" -p $job -d 12 -o "$T/out" >"$T/report" 2>"$T/gs.err" ||
	fail "gpusample: $(tail -3 "$T/gs.err")"
kill $job
grep -q armed "$T/u/flood.out" 2>/dev/null || fail "the flood agent was never armed: $(cat "$T/gs.err" "$T/report")"
sent=$(grep sent "$T/u/flood.out")
rss_mib=$(($(cat "$T/rss") / 1024))
echo "flood: $sent; gpusample peak RSS $rss_mib MiB"
grep dropped: "$T/report"
[ "$rss_mib" -lt "$MAX_MIB" ] || fail "peak RSS $rss_mib MiB under the flood (limit $MAX_MIB MiB)"
"$GS" report "$T/out.pb.gz" >"$T/report2" 2>&1 || fail "gpusample report: $(tail -3 "$T/report2")"
for c in gpu_kernels_capped gpu_corrs_capped; do
	grep -q "dropped:.*$c [1-9]" "$T/report" "$T/report2" || fail "$c not counted: $(grep dropped: "$T/report")"
done
grep -q "GPU records past gpusample's memory caps" "$T/report2" || fail "the caps are not named in the profile"
grep -q '\[other kernels\]' "$T/report2" || fail "no [other kernels] in the profile: $(grep -i kernel "$T/report2" | head -3)"
ok "peak RSS $rss_mib MiB < $MAX_MIB MiB under the flood; the loss is counted and named"
