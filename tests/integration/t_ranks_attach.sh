#!/bin/bash
# Ranks when attaching (issue 14): a launcher (bash here, as torchrun or
# mpirun would be) starts two Python ranks with RANK/WORLD_SIZE in their
# environment.
#  - `gpusample -p LAUNCHER` follows all ranks: both are process_role=main
#    with rank=0 / rank=1, the launcher is "other" and has no rank label;
#  - `gpusample -p RANK1_PID` profiles that rank alone: only its samples,
#    main, rank=1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
GS_SECONDS=40 bash -c "RANK=0 WORLD_SIZE=2 /usr/bin/python3 '$PYWL/py_chain.py' & RANK=1 WORLD_SIZE=2 /usr/bin/python3 '$PYWL/py_chain.py' & wait" &
launcher=$!
for _ in $(seq 100); do [ "$(pgrep -P $launcher | wc -l)" -eq 2 ] && break; sleep 0.1; done
ranks=$(pgrep -P $launcher | sort -n)
[ "$(echo "$ranks" | wc -l)" -eq 2 ] || fail "the launcher did not start 2 ranks"
r0=$(echo "$ranks" | head -1)
r1=$(echo "$ranks" | tail -1)
tr '\0' '\n' < /proc/$r1/environ | grep -q '^RANK=1$' || { r0=$r1; r1=$(echo "$ranks" | head -1); }

# labels_of PROFILE PID: the distinct label sets of PID's samples.
labels_of() { awk -F'\t' -v p="$2" '$2 ~ "(^|,)pid=" p "(,|$)" {print $2}' "$1" | sed 's/,tid=[0-9]*//; s/,thread_[a-z]*=[^,]*//g' | sort -u; }

gs_start -p "$launcher" -d 3 -o "$T/all" -q --format pprof
gs_wait
pprof_stacks "$T/all.pb.gz" > "$T/all" || fail "pprof: $(cat "$T/pprof.err")"
for r in 0 1; do
	pid=$([ $r = 0 ] && echo $r0 || echo $r1)
	l=$(labels_of "$T/all" $pid)
	[ -n "$l" ] || fail "-p launcher: no samples of rank $r (pid $pid)"
	[ "$(echo "$l" | wc -l)" -eq 1 ] && echo "$l" | grep -q "process_role=main" && echo "$l" | grep -q "rank=$r," &&
		echo "$l" | grep -q "world_size=2" || { echo "$l"; fail "-p launcher: rank $r (pid $pid) labels"; }
done
"$GS" report "$T/all.pb.gz" | sed -n '/^Processes/,/^$/p' > "$T/procs"
cat "$T/procs"
awk -v p=$launcher '$1 == p && $3 != "other" {exit 1}' "$T/procs" || fail "the launcher is not role other"
awk -F'\t' -v p="$launcher" '$2 ~ "(^|,)pid=" p "(,|$)" && $2 ~ /(^|,)rank=/' "$T/all" | grep -q . && fail "the launcher has a rank label"
ok "-p launcher: ranks 0 and 1 both main (pids $r0 $r1), launcher $launcher other and unlabelled"

gs_start -p "$r1" -d 2 -o "$T/one" -q --format pprof
gs_wait
pprof_stacks "$T/one.pb.gz" > "$T/one" || fail "pprof: $(cat "$T/pprof.err")"
pids=$(awk -F'\t' '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] ~ /^pid=/) print substr(a[i], 5) }' "$T/one" | sort -u | tr '\n' ' ')
[ "$pids" = "$r1 " ] || fail "-p rank 1: samples of pids '$pids', expected only $r1"
l=$(labels_of "$T/one" $r1)
echo "$l" | grep -q "process_role=main" && echo "$l" | grep -q "rank=1," || { echo "$l"; fail "-p rank 1: labels"; }
ok "-p rank 1 ($r1): only its samples, main, rank=1"
kill "$r0" "$r1" "$launcher" 2>/dev/null
