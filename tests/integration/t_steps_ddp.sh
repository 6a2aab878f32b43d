#!/bin/bash
# Training steps of several ranks: torch.distributed DDP with gloo, 2 ranks
# on the CPU under torchrun (Debian python3-torch 1.13), 24 steps, rank 1
# spinning 300 ms in slow_fetch before every 6th step (so rank 0 waits for
# it in that step's gradient all-reduce).  The report of the saved profile
# counts the steps of each rank (24 each, headed with the rank) and names
# rank 1 the straggler of steps 6, 12, 18 and 24, at least 3 of them with
# slow_fetch; any other straggler line (noise on a loaded machine: on 2 busy
# cores one rank's step is often 1.5x the other's) may not name slow_fetch.
# torchrun gets --redirects/--tee 2: 1.13's default "0" crashes on 3.11
# (see t_ranks_ddp).
# gs-test-timeout: 60
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
	fail "python3-torch with gloo is not installed (make test-deps)"
[ -x /usr/bin/torchrun ] || fail "torchrun missing (python3-torch)"

port=$((29500 + RANDOM % 400))
"$GS" -F 199 -o "$T/ddp" -q --format pprof -- /usr/bin/torchrun --nproc_per_node 2 --redirects 2 \
	--tee 2 --master_port "$port" tests/workloads/ddp_torch.py --steps 24 --workers 0 \
	--stall-rank 1 --stall-every 6 --stall-ms 300 > "$T/ddp.out" 2> "$T/ddp.err" ||
	{ rc=$?; tail -20 "$T/ddp.err"; fail "gpusample exited with $rc"; }
[ "$(grep -o 'rank=[01] pid=[0-9]* steps=24' "$T/ddp.out" | wc -l)" = 2 ] ||
	{ cat "$T/ddp.out"; fail "both ranks must run 24 steps"; }
"$GS" report "$T/ddp.pb.gz" > "$T/report" 2> "$T/report.err" || fail "gpusample report failed: $(cat "$T/report.err")"
sed -n '/^Steps$/,/^[A-Z]/p' "$T/report" | grep -v '^    step [0-9]*: [0-9.]* ms'
for r in 0 1; do
	pid=$(sed -n "s/.*rank=$r pid=\([0-9]*\) steps=24.*/\1/p" "$T/ddp.out")
	grep -q "^  pid $pid (rank $r): 24 steps" "$T/report" || fail "rank $r (pid $pid) does not have 24 steps"
done
grep -q '^  ranks: rank 0 24 steps, rank 1 24 steps$' "$T/report" || fail "no steps per rank line"
sed -n '/^  stragglers/,/^[^ ]/p' "$T/report" | grep '^    step ' > "$T/stragglers"
# every stall step names rank 1 (the list is capped at 10 lines, largest
# excess first); most of them name slow_fetch as what it did (under heavy
# CPU contention a stalled step's top stack can be the forward's, its time
# swollen by waits for a CPU)
named=0
for k in 6 12 18 24; do
	grep -q "^    step $k: rank 1 busy " "$T/stragglers" || fail "step $k: rank 1's 300 ms stall is not named its straggler"
	grep -q "^    step $k: rank 1 busy .*slow_fetch" "$T/stragglers" && named=$((named + 1))
done
[ "$named" -ge 3 ] || fail "only $named of the 4 stall steps name slow_fetch"
grep 'slow_fetch' "$T/stragglers" | grep -v '^    step \(6\|12\|18\|24\): rank 1 ' &&
	fail "a step without a stall names slow_fetch"
ok "2 gloo ranks: 24 steps each, rank 1 named the straggler of steps 6 12 18 24, $named with slow_fetch ($(wc -l < "$T/stragglers") straggler lines)"
