#!/bin/bash
# gpusample dump of a hung distributed job: 2 gloo ranks under torchrun
# (tests/workloads/ddp_hang.py), rank 0 in an all_reduce that never ends,
# rank 1 asleep outside any collective, each rank's DataLoader worker
# stuck in Dataset.__getitem__.  `gpusample dump -p LAUNCHER` (children
# followed) must:
#  - say in its cross-rank summary that rank 1 is not in the collective
#    (and that rank 0 is, in all_reduce of distributed_c10d.py), naming
#    rank 1's line;
#  - show both workers as "dataloader" processes with their rank, stuck at
#    the __getitem__ line;
#  - print its time (bounded here) and write a pprof that go tool pprof
#    reads, with rank and thread-state labels.
# Debian's python3-torch (1.13, Python 3.11) and the sid root's torchrun
# (PyTorch 2.x, Python 3.14, its ranks started by a shell).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
[ -x /usr/bin/torchrun ] || fail "torchrun missing (python3-torch)"
sid_need
f=$PYWL/ddp_hang.py
l_sleep=$(marker_line "$f" "# RANK1-SLEEP")
l_get=$(marker_line "$f" "# GETITEM-STUCK")

dump_job() { # LABEL LAUNCHER [ARGS]: the launcher starts both ranks
	local label=$1 out=$T/job.$RANDOM
	shift
	"$@" > "$out.stdout" 2> "$out.err" &
	local pid=$!
	for _ in $(seq 1200); do
		[ "$(grep -c '^ready' "$out.stdout")" -ge 2 ] && break
		kill -0 "$pid" 2>/dev/null || { tail -20 "$out.err"; fail "$label: torchrun exited"; }
		sleep 0.1
	done
	if [ "$(grep -c '^ready' "$out.stdout")" -lt 2 ]; then
		# where the ranks are after 120 s (13-17 s is usual): the dump says
		cat "$out.stdout"; tail -20 "$out.err"
		"$GS" dump -p "$pid" 2>&1 | sed -n '1,/^process/p' | head -40
		fail "$label: ranks not ready in 120 s"
	fi
	sleep 2 # rank 0 into its all_reduce, the workers into __getitem__
	"$GS" dump -p "$pid" -o "$out" > "$out.dump" 2> "$out.dump.err" ||
		{ cat "$out.dump.err"; fail "$label: gpusample dump failed"; }
	kill_tree "$pid"; wait "$pid" 2>/dev/null
	echo "--- $label"; sed -n '1,/^process/p' "$out.dump" | sed '$d'
	grep -E "^process|^  thread|^  [0-9]+ threads" "$out.dump"
	grep -q "not in the collective the others wait in: rank 1$" "$out.dump" ||
		{ cat "$out.dump"; fail "$label: the summary does not name rank 1"; }
	grep -Eq "rank 0: in collective all_reduce \(.*distributed_c10d.py:[0-9]+\)" "$out.dump" ||
		{ cat "$out.dump"; fail "$label: rank 0 not shown in all_reduce"; }
	grep -Eq "rank 1: NOT in a collective, in .*ddp_hang.py:$l_sleep\)" "$out.dump" ||
		{ cat "$out.dump"; fail "$label: rank 1's sleep at ddp_hang.py:$l_sleep not named"; }
	[ "$(grep -Ec '^process [0-9]+ ".*" dataloader, rank [01]' "$out.dump")" -eq 2 ] ||
		{ cat "$out.dump"; fail "$label: two DataLoader worker processes with their rank expected"; }
	[ "$(grep -Ec "Stuck.__getitem__ \(.*ddp_hang.py:$l_get\)" "$out.dump")" -ge 2 ] ||
		{ cat "$out.dump"; fail "$label: the workers' __getitem__ at ddp_hang.py:$l_get not shown"; }
	secs=$(sed -n 's/.* threads in \([0-9.]*\) s .*/\1/p' "$out.dump")
	awk -v s="$secs" 'BEGIN { exit !(s != "" && s < 10.0) }' || fail "$label: the dump took '$secs' s"
	pprof -traces "$out.pb.gz" > "$out.traces" || fail "$label: go tool pprof: $(cat "$T/pprof.err")"
	grep -q "rank:  1" "$out.traces" && grep -q "thread_state:  blocked" "$out.traces" &&
		grep -q "Stuck.__getitem__" "$out.traces" ||
		{ head -40 "$out.traces"; fail "$label: the pprof lacks rank / state labels or frames"; }
	# `gpusample report` of the dump says what it is, with no time or verdict
	"$GS" report "$out.pb.gz" > "$out.report" 2>&1 || fail "$label: gpusample report: $(cat "$out.report")"
	nthr=$(sed -n 's/^gpusample dump: [0-9]* processes, \([0-9]*\) threads.*/\1/p' "$out.dump")
	grep -Eq "^  a dump: one stack per thread at one moment, $nthr threads in [0-9]+ processes$" "$out.report" ||
		{ head -5 "$out.report"; fail "$label: the report of the dump does not say it is one ($nthr threads)"; }
	grep -Eq "CPU samples|Verdict|Where the time goes" "$out.report" &&
		{ cat "$out.report"; fail "$label: the report of a dump speaks of CPU samples or time"; }
	grep -q "^Top functions by threads stopped in them" "$out.report" || fail "$label: no top functions by threads"
}

port=$((29500 + RANDOM % 400))
# torchrun of torch 1.13 on 3.11 crashes on its default --redirects 0 (see
# t_ranks_ddp.sh); "2" works.
dump_job "torch 1.13 / python 3.11" /usr/bin/torchrun --nproc_per_node 2 --master_port "$port" \
	--redirects 2 --tee 2 "$f"
# The sid root's torchrun insists on a libuv TCPStore its torch lacks, so a
# shell starts the two ranks as torchrun would (env:// rendezvous).
dump_job "sid torch 2.x / python 3.14" "$(sid_cmd sh)" -c "
	export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 1)) WORLD_SIZE=2 USE_LIBUV=0
	RANK=0 LOCAL_RANK=0 python3.14 $f & RANK=1 LOCAL_RANK=1 python3.14 $f & wait"
ok "hung 2-rank job: rank 1 named outside the collective, stuck DataLoader workers shown"
