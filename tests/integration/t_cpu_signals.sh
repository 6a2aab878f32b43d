#!/bin/bash
# Issue 2 #3: SIGINT and SIGTERM to gpusample mid-run leave a complete profile.
source "$(dirname "$0")/lib.sh"
for sig in INT TERM; do
	"$WL/cpu_chain" 120 & pid=$!
	gs_start -p "$pid" -o "$T/sig$sig" -q --format pprof,speedscope
	sleep 3
	kill -"$sig" "$gs"
	gs_wait
	kill "$pid"
	[ -s "$T/sig$sig.pb.gz" ] || fail "no profile after SIG$sig"
	[ -s "$T/sig$sig.speedscope.json" ] || fail "no speedscope after SIG$sig"
	pprof -top "$T/sig$sig.pb.gz" > "$T/top" || fail "pprof rejects the SIG$sig profile: $(cat "$T/pprof.err")"
	pprof_stacks "$T/sig$sig.pb.gz" > "$T/stacks" || fail "pprof -traces, SIG$sig: $(cat "$T/pprof.err")"
	n=$(awk -F'\t' '{n+=$1} END{print n+0}' "$T/stacks")
	# The machine may be loaded (2 cores): require a real profile, not a rate.
	[ "$n" -ge 30 ] || fail "only $n samples after 3 s at 99 Hz (SIG$sig)"
	grep -q "c;b;a;main" "$T/stacks" || fail "SIG$sig profile lacks the c;b;a;main chain"
	ok "SIG$sig: complete profile with $n samples"
done
