#!/bin/bash
# make_cfi_bomb.sh OUT.so [PAIRS] [LDFLAGS]: a shared object whose one function has an
# FDE of 2*PAIRS rows (push/pop, each with its CFA adjustment; default
# 135000 pairs = ~800 KB of .eh_frame).  Built the way a hostile job could
# ship it; the quadratic libdw path took 71 s on such a file (issue 12).
set -eu
out=$1 pairs=${2:-135000} ldflags=${3:-}
s=$(mktemp /tmp/gs-bomb.XXXXXX.s)
trap 'rm -f "$s"' EXIT
{
	echo '.text'
	echo '.globl gs_bomb'
	echo '.type gs_bomb,@function'
	echo 'gs_bomb:'
	echo '.cfi_startproc'
	awk -v n="$pairs" 'BEGIN { for (i = 0; i < n; i++)
		print "push %rax\n.cfi_adjust_cfa_offset 8\npop %rax\n.cfi_adjust_cfa_offset -8" }'
	echo 'ret'
	echo '.cfi_endproc'
	echo '.size gs_bomb, .-gs_bomb'
} > "$s"
cc -shared -nostdlib $ldflags -o "$out" "$s"
