#!/bin/bash
# Issue 2 #4: a syscall-heavy workload shows kernel frames (and --no-kernel
# drops them).
source "$(dirname "$0")/lib.sh"
"$WL/cpu_syscalls" 120 & pid=$!
gs_start -p "$pid" -d 3 -o "$T/k" -q
gs_wait
gs_start -p "$pid" -d 2 -o "$T/nok" -q --no-kernel
gs_wait
kill "$pid"
pprof_stacks "$T/k.pb.gz" > "$T/stacks" || fail "pprof: $(cat "$T/pprof.err")"
total=$(awk -F'\t' '{n+=$1} END{print n+0}' "$T/stacks")
kern=$(awk -F'\t' '$3 ~ /(ksys_read|ksys_write|vfs_read|vfs_write|read_zero|entry_SYSCALL_64|do_syscall_64)/ {n+=$1} END{print n+0}' "$T/stacks")
echo "samples: $total, with syscall kernel frames: $kern"
ratio_at_least "$kern" "$total" 0.5 || fail "kernel frames in only $kern of $total samples"
grep -q 'syscall_loop' "$T/stacks" || fail "user frames missing under kernel frames"
awk -F'\t' '$3 ~ /do_syscall_64.*syscall_loop/' "$T/stacks" | grep -q . || fail "kernel and user frames not in one stack"
# --no-kernel: the same user stacks, none of the kernel frames above.
pprof_stacks "$T/nok.pb.gz" > "$T/nok" || fail "pprof: $(cat "$T/pprof.err")"
grep -q 'syscall_loop' "$T/nok" || fail "--no-kernel profile lacks the user frames"
grep -Eq 'do_syscall_64|entry_SYSCALL_64' "$T/nok" && fail "--no-kernel still has kernel frames"
ok "kernel frames in $kern/$total samples"
