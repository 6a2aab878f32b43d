// SPDX-License-Identifier: MIT
/* Shared library half of nofp_chain (built -O2 -fomit-frame-pointer):
 * nofp_lib_entry -> lib_aligned -> lib_recurse x (depth+1) -> callback into
 * the executable, or lib_spin here.  lib_aligned realigns its stack with a
 * DRAP register (alloca + 32-byte aligned locals), so its CFA is the
 * expression DW_OP_breg6 off; DW_OP_deref.  Volatile locals used after each call keep GCC from
 * turning the recursion into a loop or the calls into tail calls. */
#include <stdint.h>
#include <string.h>

typedef double (*nofp_cb)(int);

__attribute__((noinline)) double lib_spin(int n)
{
	volatile double x = 1.0;

	for (int i = 0; i < n; i++)
		x = x * 1.0000001 + 0.5;
	return x;
}

__attribute__((noinline)) static double lib_recurse(int depth, int n, nofp_cb cb)
{
	volatile char pad[48];
	double r;

	pad[depth & 31] = (char)depth;
	if (depth > 0)
		r = lib_recurse(depth - 1, n, cb);
	else
		r = (n & 1) ? cb(n) : lib_spin(n);
	return r + pad[depth & 31];
}

typedef double v4 __attribute__((vector_size(32)));

__attribute__((noinline)) static double lib_aligned(int depth, int n, nofp_cb cb)
{
	char *scratch = __builtin_alloca((n & 63) + 8);
	v4 __attribute__((aligned(32))) a[4];
	double r;

	memset(scratch, 1, (n & 63) + 8);
	for (int i = 0; i < 4; i++)
		a[i] = (v4){ n, i, scratch[i], 1 };
	r = lib_recurse(depth, n, cb);
	return r + a[n & 3][1];
}

__attribute__((noinline)) double nofp_lib_entry(int depth, int n, nofp_cb cb)
{
	volatile int guard = depth;
	double r = lib_aligned(depth, n, cb);

	return r + guard;
}
