#!/bin/bash
# `make devkit` (issue 15 item 1): the kit builds here, is self-contained
# (copied elsewhere it still runs; gpusample needs only libc and libm), and
# its check passes a dry run on the CUDA/CUPTI doubles: diagnostic facts
# first, then CUPTI PC sampling alone, step times dormant and armed (the
# timed loop waited for armed), the profile read back with `gpusample
# report` (stall reasons, GPU samples, dropped, top kernels with source
# lines, [unknown launch] share), step times with no agent, dormant, armed
# (subscribe=init and =arm) and after the disarm, each with the versions
# it ran on, the agent's read-back period and hardware buffer, and an armed
# workload exiting under MALLOC_CHECK_=3; at most 8 output files.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (BPF, USDT)"
make -s BUILD="$BUILD" devkit > "$T/make.out" 2>&1 || { cat "$T/make.out"; fail "make devkit failed"; }
cp -a "$ROOT/$BUILD/devkit" "$T/kit"
extra=$(ldd "$T/kit/gpusample" | grep -vE 'linux-vdso|libc\.so|libm\.so|ld-linux' || true)
[ -z "$extra" ] || fail "gpusample needs more than libc on the GPU host: $extra"
for f in gpusample libgpusample_agent.so pcsamp_probe workload.py check.sh cubins/kernels_lineinfo.sm_90.cubin; do
	[ -e "$T/kit/$f" ] || fail "kit lacks $f"
done
# The probe lays PC records out with the running CUPTI's stride: 56 bytes
# before API v22 (CUDA 12.4 added correlationId, cupti_pcsampling.h:159-163),
# 64 from it.  The double writes with its own stride and refuses records
# whose size is not it (a cu118/cu121 torch brings CUPTI v18/v20).
for vs in 18:56 21:56 22:64 130001:64; do
	v=${vs%:*} want=${vs#*:}
	FAKE_CUPTI_VERSION=$v FAKE_CUPTI_STATS=$T/probe.stats LD_LIBRARY_PATH=$T/kit/double timeout 40 \
		"$T/kit/pcsamp_probe" "$T/kit/double/libcuda.so.1" "$T/kit/double/libcupti.so.13" \
		"$T/kit/cubins/kernels_lineinfo.sm_90.cubin" 50 > "$T/probe.out" 2>&1 ||
		{ cat "$T/probe.out"; fail "pcsamp_probe failed on CUPTI API $v"; }
	grep -q "^probe: PC record stride $want bytes (CUPTI API $v)" "$T/probe.out" ||
		{ cat "$T/probe.out"; fail "probe did not pick the $want-byte stride for CUPTI API $v"; }
	grep -q '^probe: ok: .* [1-9][0-9]* stall-reason samples' "$T/probe.out" || { cat "$T/probe.out"; fail "no samples on CUPTI API $v"; }
	[ "$(awk '$1 == "bad_size" { print $2 }' "$T/probe.stats")" = 0 ] || fail "probe's records refused on CUPTI API $v"
	grep -q "^probe: CRC keying (callback registered): [1-9][0-9]* PC records keyed by the callback's value, 0 by cuptiGetCubinCrc's, 0 by neither" "$T/probe.out" ||
		{ cat "$T/probe.out"; fail "no CRC keying line on CUPTI API $v"; }
	grep -q '^probe: 20 drains: 1 distinct functionName pointers' "$T/probe.out" || { cat "$T/probe.out"; fail "no 20-drain name-pointer count on CUPTI API $v"; }
	grep -q '^probe: Enable from a second thread while 50 kernels were queued: CUPTI_SUCCESS' "$T/probe.out" ||
		{ cat "$T/probe.out"; fail "no second-thread Enable result on CUPTI API $v"; }
	# the double parks a closed range in the configured buffer
	grep -q '^probe: module unloaded and loaded again: [1-9][0-9]* PCs parked in the configured buffer' "$T/probe.out" &&
		grep -q '^probe: 2 kernel-serialized kernels, no flush between: [1-9][0-9]* PCs parked' "$T/probe.out" ||
		{ cat "$T/probe.out"; fail "no parked-range totals after a module reload and serialized kernels on CUPTI API $v"; }
done
# the counts tell the cases apart: a CUPTI allocating names per GetData,
# one refusing an Enable from a thread that neither created nor launched
FAKE_CUPTI_FAIL=names_per_getdata,enable_offthread LD_LIBRARY_PATH=$T/kit/double timeout 40 \
	"$T/kit/pcsamp_probe" "$T/kit/double/libcuda.so.1" "$T/kit/double/libcupti.so.13" \
	"$T/kit/cubins/kernels_lineinfo.sm_90.cubin" 50 > "$T/probe.out" 2>&1 || { cat "$T/probe.out"; fail "pcsamp_probe failed"; }
grep -q '^probe: 20 drains: 20 distinct functionName pointers' "$T/probe.out" || { cat "$T/probe.out"; fail "per-GetData names not counted"; }
grep -q '^probe: Enable from a second thread .*: CUPTI_ERROR_INVALID_OPERATION' "$T/probe.out" || { cat "$T/probe.out"; fail "refused off-thread Enable not reported"; }
start=$(date +%s)
timeout 300 "$T/kit/check.sh" --double "$T/out" > "$T/check.out" 2>&1 || { cat "$T/check.out"; fail "the kit's check failed its dry run"; }
secs=$(( $(date +%s) - start ))
S=$T/out/summary.txt
sed -n '1,12p' "$S"
order=$(grep -n -E '^== (facts|CUPTI PC sampling alone|workload, no agent|workload, agent injected and dormant|workload under gpusample|profile, read by gpusample report|subscribe=arm|armed workload exiting|step time)' "$S" | cut -d: -f1 | tr '\n' ' ')
[ "$(echo $order | wc -w)" = 9 ] || fail "summary sections missing: $order"
[ "$(echo $order | tr ' ' '\n' | sort -n | tr '\n' ' ')" = "$order" ] || fail "sections out of order"
grep -q 'profiling permission:' "$S" && grep -q '^BTF:' "$S" && grep -q '^perf events:' "$S" || fail "facts incomplete"
grep -q '^probe: ok:' "$S" || fail "pcsamp_probe did not sample"
grep -q '^  stall reasons:' "$S" || fail "no stall-reason table"
grep -q '^GPU samples: [1-9]' "$S" || fail "no GPU samples"
grep -q '^dropped:' "$S" || fail "no dropped samples line"
grep -q 'hottest lines: kernels.cu:[0-9]' "$S" || fail "no top kernels with source lines"
grep -q '^\[unknown launch\]:' "$S" || fail "no [unknown launch] share"
grep -q '^step-time ratio armed/dormant: [0-9]' "$S" || fail "no step-time ratio"
# Every number with the card, driver, CUPTI and torch it
# was measured on; subscribe=arm beside subscribe=init, timed after the
# disarm; read-back period and buffer; free memory; an armed exit under
# MALLOC_CHECK_=3
on='\[card CUDA double, driver double, CUPTI API 130001, torch none (driver API workload)\]'
grep -q "^versions: $on" "$S" || fail "no versions line"
for what in "no agent" dormant "armed (subscribe=init)" "armed (subscribe=arm)" "after disarm"; do
	grep -q "^step time $what: [0-9.]* ms $on" "$S" || fail "no step time '$what' with its versions"
done
grep -q "^read back by the agent: period 2^[0-9]*, hardware buffer [0-9]* MiB $on" "$S" || fail "no read-back period and hardware buffer"
grep -q '^free device memory before the attach: ' "$S" && grep -q '^free device memory while armed: ' "$S" || fail "no free-memory lines"
grep -q "^agent.s sizing: [0-9]* MiB free of [0-9]* on GPU 0: hardware buffer [0-9]* MiB $on" "$S" || fail "no free memory the agent sized the buffer from"
grep -q "^exit while sampling under MALLOC_CHECK_=3: exit 0 $on" "$S" || fail "the armed exit under MALLOC_CHECK_=3 failed"
w=$(sed -n 's/^armed: .*armed_wait_s \([0-9.]*\).*/\1/p' "$S")
[ -n "$w" ] || fail "the armed loop did not report waiting for armed"
n=$(ls "$T/out" | wc -l)
[ "$n" -le 8 ] || fail "$n output files (at most 8): $(ls "$T/out")"
grep -q '^device check: OK' "$S" || fail "check did not end OK"
ok "devkit dry run: $secs s, $n files, waited ${w} s for armed, $(grep '^step-time ratio' "$S")"
