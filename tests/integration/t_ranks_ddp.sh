#!/bin/bash
# gs-test-timeout: 480 (two torch start-ups per run, the sid part 30 s of imports on 2 idle cores: 38-77 s alone, past 300 s on a machine running other tests)
# Distributed training, issue 14 done-when (1): real torch.distributed DDP
# (Debian python3-torch, gloo on the CPU), 2 ranks under torchrun, profiled
# with `gpusample -- torchrun ...`:
#  - both ranks' training processes are "main", their samples labelled
#    rank=0 / rank=1 (from RANK in their environment), local_rank,
#    world_size=2 and host; torchrun itself is not a rank;
#  - each rank gets its own "where the time goes" and verdict;
#  - with rank 1 sleeping 300 ms before each step (a clear straggler also
#    on a loaded machine, where steps are slow), rank 0's collective wait
#    (the gradient all-reduce waiting for rank 1) rises against a run
#    without the sleep (share of its wall time: at least 1.5x and 3 points
#    more, and at least twice rank 1's), and the cross-rank table names
#    rank 1 the straggler, sleeping, with numbers.
# Needs the off-CPU samples (gs/offcpu) and the wall-clock split
# (gs/walltime): waiting in an all-reduce is off-CPU time, so without them
# the straggler cannot show and this test fails.
# torchrun of Debian's torch 1.13 on Python 3.11 crashes on its default
# --redirects/--tee "0" (enum.IntFlag iteration changed in 3.11), so the test
# passes "2" (stderr to a log, teed to the console), which it parses fine.
# Then the same on the sid root's python3.14 + PyTorch 2.14 (gloo;
# DataLoader in-process: 3.14's forkserver would import torch once more per
# rank), straggler run only (its imports take ~30 s on 2 cores): launched by
# tests/workloads/ddp_launch.py, since that build's torchrun cannot start
# (its agent's TCPStore wants libuv, which the build lacks); rank 0 waits in
# collectives at least twice as long as rank 1, the straggler line names
# rank 1, and the launcher carries no rank.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
[ -x /usr/bin/torchrun ] || fail "torchrun missing (python3-torch)"
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
	fail "python3-torch without gloo"

# ddp_run OUT [workload args]: gpusample -- the launcher ($LAUNCH: torchrun
# or ddp_launch.py, with a free port) -- ddp_torch.py; report in OUT.report.
ddp_run() {
	local out=$1 port=$((29500 + RANDOM % 400))
	shift
	"$GS" -F 199 -o "$out" -q --format pprof -- "${LAUNCH[@]}" "$port" "$PYWL/ddp_torch.py" "$@" \
		> "$out.stdout" 2> "$out.err" || { tail -30 "$out.err"; fail "gpusample -- ${LAUNCH[0]} failed"; }
	grep -o 'rank=[0-9]* pid=[0-9]* steps=[0-9]*' "$out.stdout" > "$out.ranks"
	[ "$(wc -l < "$out.ranks")" -eq 2 ] || { cat "$out.stdout"; tail -20 "$out.err"; fail "both ranks must finish"; }
	"$GS" report "$out.pb.gz" > "$out.report" || fail "gpusample report $out.pb.gz failed"
}

# collective_pct REPORT RANK: % of that rank's main-thread wall time in
# collective wait, from its "where the time goes" split.
collective_pct() {
	awk -v r="rank $2 main thread" '
		index($0, "  " r) == 1 { on = 1; next }
		on && /^  [^ ]/ { on = 0 }
		on && $1 == "collective" && $2 == "wait" { sub(/%/, "", $5); print $5 + 0; found = 1; exit }
		END { if (!found) print 0 }' "$1"
}

# ranks_check TAG OUT LAUNCHER-COMM: ranks, roles and labels of run OUT, as
# go tool pprof reads them; the launcher (comm LAUNCHER-COMM, not a rank)
# carries no rank label.
ranks_check() {
	local tag=$1 out=$2 r pid labs l mains launcher
	pprof_stacks "$out.pb.gz" > "$out.st" || fail "$tag: pprof: $(cat "$T/pprof.err")"
	for r in 0 1; do
		pid=$(awk -v r=$r '$1 == "rank=" r { sub(/pid=/, "", $2); print $2 }' "$out.ranks")
		labs=$(awk -F'\t' -v p="$pid" '$2 ~ "(^|,)pid=" p "(,|$)" && $2 ~ "(^|,)tid=" p "(,|$)" {print $2}' "$out.st" | sort -u)
		[ -n "$labs" ] || fail "$tag: no main-thread samples of rank $r (pid $pid)"
		echo "$labs" | grep -qv "process_role=main" && { echo "$labs"; fail "$tag: rank $r pid $pid is not process_role=main on every sample"; }
		for l in "rank=$r" "local_rank=$r" "world_size=2" "host=$(hostname)" "thread_role=main"; do
			echo "$labs" | grep -qv "\(^\|,\)$l\(,\|$\)" && { echo "$labs" | head -3; fail "$tag: rank $r main thread: samples without $l"; }
		done
		grep -q "^  rank $r main thread (.* pid $pid)" "$out.report" || { cat "$out.report"; fail "$tag: no where-the-time-goes for rank $r"; }
		grep -q "^Verdict (rank $r main thread" "$out.report" || fail "$tag: no verdict for rank $r"
		ok "$tag: rank $r: pid $pid, process_role=main, rank/local_rank/world_size/host labels, own split and verdict"
	done
	mains=$(sed -n '/^Processes/,/^$/p' "$out.report" | awk '$3 == "main"' | wc -l)
	[ "$mains" -eq 2 ] || { sed -n '/^Processes/,/^$/p' "$out.report"; fail "$tag: expected 2 main processes, got $mains"; }
	launcher=$(sed -n '/^Processes/,/^$/p' "$out.report" | awk -v c="$3" '$2 == c && $3 != "main" {print $1}' | head -1)
	[ -n "$launcher" ] || fail "$tag: the launcher ($3) is not in the process table"
	awk -F'\t' -v p="$launcher" '$2 ~ "(^|,)pid=" p "(,|$)"' "$out.st" | grep -q 'rank=' && fail "$tag: the launcher $3 (pid $launcher) carries a rank label"
	ok "$tag: 2 main processes, launcher $3 unlabelled"
}

# straggler_named TAG OUT: the cross-rank table names rank 1, sleeping.
straggler_named() {
	sed -n '/^Across ranks/,$p' "$2.report"
	grep -q '^  collective wait .* rank 0$' "$2.report" || fail "$1: cross-rank table: collective wait max is not at rank 0"
	grep -q '^  Straggler: rank 1 -- the other ranks wait [0-9.]* s (median) in collectives for it, rank 1 only [0-9.]* s; it spends more than the others in .*sleep (+[0-9.]* s' "$2.report" ||
		fail "$1: the report does not name rank 1 the straggler (sleeping)"
}

LAUNCH=(/usr/bin/torchrun --nproc_per_node 2 --redirects 2 --tee 2 --master_port)
ddp_run "$T/base" --seconds 2
# Long enough that the per-step waits outweigh the start: on a loaded machine
# one rank can wait seconds in init_process_group's barrier for the other's
# imports, which is collective wait too (CI once saw 1.6 s of it at 3 s).
ddp_run "$T/slow" --seconds 6 --sleep-rank 1 --sleep-ms 300
cat "$T/slow.ranks"
ranks_check debian "$T/slow" torchrun

# The straggler: rank 0's collective wait rises, the table names rank 1.
b0=$(collective_pct "$T/base.report" 0)
s0=$(collective_pct "$T/slow.report" 0)
s1=$(collective_pct "$T/slow.report" 1)
echo "collective wait of rank 0: ${b0}% without the sleep, ${s0}% with rank 1 sleeping (rank 1: ${s1}%)"
# (Margins for a loaded machine: the baseline's waits are not zero when the
# ranks compete for few cores.)
awk -v b="$b0" -v s="$s0" -v o="$s1" 'BEGIN { exit !(s >= 1.5 * b && s - b >= 3 && s >= 2 * o) }' || {
	sed -n '/^Where the time goes/,$p' "$T/slow.report"
	fail "rank 0's collective wait did not rise clearly (${b0}% -> ${s0}%, rank 1 ${s1}%)"
}
straggler_named debian "$T/slow"
ok "debian: straggler rank 1 named with numbers; rank 0 collective wait ${b0}% -> ${s0}%"

# python3.14 + PyTorch 2.x in the sid root
sid_need
LAUNCH=("$(sid_cmd python3.14)" "$PYWL/ddp_launch.py" --nproc 2 --port)
"${LAUNCH[0]}" -c 'import torch, torch.distributed as d; assert torch.__version__ >= "2" and d.is_gloo_available()' ||
	fail "the sid root's python3.14 has no PyTorch 2.x with gloo"
ddp_run "$T/py314" --seconds 6 --sleep-rank 1 --sleep-ms 300 --workers 0
cat "$T/py314.ranks"
ranks_check sid "$T/py314" python3.14
s0=$(collective_pct "$T/py314.report" 0)
s1=$(collective_pct "$T/py314.report" 1)
echo "sid: collective wait of rank 0 ${s0}%, of the sleeping rank 1 ${s1}%"
awk -v s="$s0" -v o="$s1" 'BEGIN { exit !(s >= 3 && s >= 2 * o) }' || {
	sed -n '/^Where the time goes/,$p' "$T/py314.report"
	fail "sid: rank 0's collective wait ${s0}% is not clearly above rank 1's ${s1}%"
}
straggler_named sid "$T/py314"
ok "sid: straggler rank 1 named with numbers; collective wait rank 0 ${s0}%, rank 1 ${s1}%"
