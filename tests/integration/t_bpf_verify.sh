#!/bin/bash
# Verifier budget: every program of both sets (bpf/unwind.bpf.h: the
# bpf_loop programs and the compat ones for kernels before 5.17, forced here
# with GS_BPF_COMPAT=1) verifies in under 200k processed instructions on this
# kernel, a fifth of the verifier's 1M limit, so that a stricter kernel
# release or one more feature cannot push a program over it (6.18.44 and 7.2
# multiplied one program's count by 13 over 6.18.0).  Counts come from
# `gpusample check` (BPF_LOG_STATS, every kernel).  Kernel 6.18.44, clang 14:
# gs_sample 96k, gs_off_switch 93k, gs_gpu_launch 81k; compat 50k, 55k, 36k.
# scripts/kernel-matrix.sh checks the same on other kernels.  The task
# iterator of `gpusample dump` (gs_task_regs, its compat twin) is checked too.
source "$(dirname "$0")/lib.sh"
LIMIT=200000

check_set() { # $1: label, $2...: the programs that must be there
	local label=$1 out name insns seen=0
	shift
	out=$("$GS" check 2>&1) || fail "$label: gpusample check failed: $out"
	echo "$out"
	for want in "$@"; do
		insns=$(awk -v p="$want" '$1 == "program" && $2 == p {print $3}' <<< "$out")
		[ -n "$insns" ] || fail "$label: program $want not loaded"
		[ "$insns" -gt 0 ] || fail "$label: no verifier count for $want"
		[ "$insns" -lt $LIMIT ] || fail "$label: $want: $insns verified instructions (allowed: $LIMIT)"
		seen=$((seen + 1))
	done
	# the other set must not be loaded beside it
	name=$(awk '$1 == "program" {print $2}' <<< "$out" | tr '\n' ' ')
	echo "$label: $seen programs checked; loaded: $name"
}
check_set "bpf_loop set" gs_sample gs_off_switch gs_off_waking gs_gpu_launch gs_task_regs
case $("$GS" check) in *gs_sample_compat*|*gs_task_regs_compat*) fail "the compat set was loaded beside the bpf_loop set";; esac
GS_BPF_COMPAT=1 check_set "compat set" gs_sample_compat gs_off_switch_compat gs_off_waking_compat gs_gpu_launch_compat gs_task_regs_compat
ok "every program of both sets verifies under $LIMIT instructions"
