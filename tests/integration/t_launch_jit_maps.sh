#!/bin/bash
# gs-test-timeout: 60
# The perf maps launch mode has oneDNN write (ONEDNN_JIT_PROFILE=2,
# /tmp/perf-PID.map) are removed on every exit path, not only when the
# command ends by itself (py_perfmap.py writes one in itself and in a
# forked child, as oneDNN does in a DataLoader's main process and workers):
#  - the command's end;
#  - Ctrl-C at a terminal (SIGINT to gpusample and the command's process
#    group): the loop stops before the exits are read, and the child dies
#    after its parent;
#  - SIGTERM to gpusample alone (passed on to the command).
# Before, the maps of the Ctrl-C and SIGTERM runs stayed behind.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || fail "python3 missing"
left() { # PIDS... -> the perf maps of those pids still there
	local p out=
	for p in "$@"; do [ -e "/tmp/perf-$p.map" ] && out="$out /tmp/perf-$p.map"; done
	echo "$out"
}
started() { # OUT: wait for the pids line
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	fail "py_perfmap.py printed no pids"
}
# -- its end
"$GS" -F 99 -o "$T/end" -q --format pprof -- python3 "$ROOT/tests/workloads/py_perfmap.py" 2 \
	> "$T/end.out" 2> "$T/end.err" || { cat "$T/end.err"; fail "gpusample -- py_perfmap.py failed"; }
read -r -a pids < "$T/end.out"
[ "${#pids[@]}" -eq 2 ] || fail "end: no pids from py_perfmap.py"
l=$(left "${pids[@]}"); rm -f $l
[ -z "$l" ] || fail "the command's end left$l"
# -- Ctrl-C: SIGINT to the whole process group
setsid "$GS" -F 99 -o "$T/int" -q --format pprof -- python3 "$ROOT/tests/workloads/py_perfmap.py" 30 \
	> "$T/int.out" 2> "$T/int.err" &
gpid=$!
started "$T/int.out"
sleep 1
kill -INT -- -"$gpid"
wait "$gpid" 2>/dev/null || true
read -r -a pids < "$T/int.out"
[ "${#pids[@]}" -eq 2 ] || fail "Ctrl-C: no pids from py_perfmap.py"
l=$(left "${pids[@]}"); rm -f $l
[ -z "$l" ] || fail "Ctrl-C left$l"
# -- SIGTERM to gpusample alone
"$GS" -F 99 -o "$T/term" -q --format pprof -- python3 "$ROOT/tests/workloads/py_perfmap.py" 30 --no-child \
	> "$T/term.out" 2> "$T/term.err" &
gpid=$!
started "$T/term.out"
sleep 1
kill -TERM "$gpid"
wait "$gpid" 2>/dev/null || true
read -r -a pids < "$T/term.out"
l=$(left "${pids[@]}"); rm -f $l
[ -z "$l" ] || fail "SIGTERM to gpusample left$l"
ok "perf maps removed at the command's end, on Ctrl-C and on SIGTERM"
