#!/bin/bash
# fuzz/run.sh SECONDS BIN...: run each libFuzzer harness (build-fuzz/fuzz/
# fuzz_<name>) for SECONDS on its seed corpus fuzz/corpus/<name>/ plus the
# inputs it found before (build-fuzz/corpus/<name>/, where new ones go).
# Crashes, leaks, timeouts (an input over 120 s: generous, as a loaded CI
# machine can stall a process for tens of seconds) land in
# build-fuzz/crashes/<name>/; any finding
# fails the run.  One summary line per harness: execs, execs/s, corpus.
set -u
secs=$1; shift
cd "$(dirname "$0")/.." || exit 1
rc=0
for bin in "$@"; do
	name=$(basename "$bin"); name=${name#fuzz_}
	seeds=fuzz/corpus/$name work=build-fuzz/corpus/$name crashes=build-fuzz/crashes/$name
	mkdir -p "$seeds" "$work" "$crashes"
	log=build-fuzz/fuzz-$name.log
	"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=120 -report_slow_units=120 -rss_limit_mb=2560 \
		-max_len=1048576 -artifact_prefix="$crashes/" "$work" "$seeds" >"$log" 2>&1
	r=$?
	execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
	eps=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
	corpus=$(ls "$work" | wc -l)
	found=$(ls "$crashes" | grep -Ec '^(crash|leak|timeout|oom)-')
	echo "fuzz $name: ${secs}s, ${execs:-?} execs, ${eps:-?} execs/s, corpus $corpus new + $(ls "$seeds" | wc -l) seeds, findings $found (exit $r)"
	if [ "$r" != 0 ] || [ "$found" != 0 ]; then
		grep -m5 -E 'ERROR|SUMMARY|runtime error' "$log"
		echo "fuzz $name: FAILED, inputs in $crashes/, log $log"
		rc=1
	fi
done
exit $rc
