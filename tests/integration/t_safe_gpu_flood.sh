#!/bin/bash
# Issue 24, items 5 and 6: a job run as nobody loads a library that speaks
# the GPU agent's USDT protocol (tests/fakes/flood_agent.c) and, once
# gpusample arms it, floods for 10 s: launch events with a new kernel hash
# every other one and a new correlation id each, and PC batches whose PCs
# carry unique kernel names.  Without caps gpusample kept one join entry
# per kernel hash, every correlation id and a kernel, location and two
# strings per name (main: 405-560 MB for launches alone, 640 MB for PCs
# alone, still growing).  Now its peak RSS stays under GS_FLOOD_MAX_MIB
# (default 300), and the loss is counted by cause and named.  First with
# BPF's per-process rate limits (most of the flood never leaves the kernel),
# then with them raised, so the host's caps are what holds.
# gs-test-timeout: 120
source "$(dirname "$0")/lib.sh"
MAX_MIB=${GS_FLOOD_MAX_MIB:-300}
chmod 755 "$T"
mkdir "$T/u"
gcc -O1 -g -shared -fPIC -Wall -Wextra -Iinclude -I. -o "$T/u/libflood.so" \
	tests/fakes/flood_agent.c -lpthread || fail "cc flood_agent.c"
chown -R nobody:nogroup "$T/u"

# flood NAME [ENV...]: one 6 s flood under gpusample -p; $T/NAME.*
flood() {
	local name=$1 job
	shift
	setpriv --reuid=nobody --regid=nogroup --clear-groups env LD_PRELOAD="$T/u/libflood.so" \
		GS_FLOOD=both GS_FLOOD_SECONDS=6 GS_FLOOD_OUT="$T/u/$name.flood" sleep 60 &
	job=$!
	sleep 0.5
	env "$@" /usr/bin/time -o "$T/$name.rss" -f %M "$GS" -p $job -d 8 -o "$T/$name" \
		>"$T/$name.report" 2>"$T/$name.err" || fail "gpusample: $(tail -3 "$T/$name.err")"
	kill $job
	grep -q armed "$T/u/$name.flood" 2>/dev/null ||
		fail "the flood agent was never armed: $(cat "$T/$name.err" "$T/$name.report")"
	rss_mib=$(($(cat "$T/$name.rss") / 1024))
	echo "$name: $(grep sent "$T/u/$name.flood"); gpusample peak RSS $rss_mib MiB"
	grep dropped: "$T/$name.report"
	[ "$rss_mib" -lt "$MAX_MIB" ] || fail "$name: peak RSS $rss_mib MiB under the flood (limit $MAX_MIB MiB)"
	"$GS" report "$T/$name.pb.gz" >"$T/$name.report2" 2>&1 ||
		fail "gpusample report: $(tail -3 "$T/$name.report2")"
}

# The BPF side passes at most GS_GPU_LAUNCH_RATE_MAX launch events and
# GS_GPU_RECORD_RATE_MAX records per second and process; the rest is
# counted, not read.
flood rated
for r in rated.report rated.report2; do # the run's report, and the saved profile's
	grep -q "dropped:.*gpu_rate_limited [1-9]" "$T/$r" ||
		fail "gpu_rate_limited not counted in $r: $(grep dropped: "$T/$r")"
done

# Past the rates (many processes, each under its rate, add up): the host's
# own caps hold the memory.
flood capped GS_GPU_RATE_MAX=10000000,10000000
for c in gpu_kernels_capped gpu_corrs_capped; do
	grep -q "dropped:.*$c [1-9]" "$T/capped.report" "$T/capped.report2" ||
		fail "$c not counted: $(grep dropped: "$T/capped.report")"
done
grep -q "GPU records past gpusample's memory caps" "$T/capped.report2" || fail "the caps are not named in the profile"
grep -q '\[other kernels\]' "$T/capped.report2" ||
	fail "no [other kernels] in the profile: $(grep -i kernel "$T/capped.report2" | head -3)"
ok "under the flood: BPF's rate limit counted, and past it the host's caps hold peak RSS < $MAX_MIB MiB, counted and named"
