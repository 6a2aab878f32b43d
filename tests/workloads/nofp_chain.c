// SPDX-License-Identifier: MIT
/* Workload with a known native call chain, built -O2 -fomit-frame-pointer
 * (tests/workloads/workloads.mk) so only CFI unwinding can follow it:
 *   main -> run -> stage_a -> nofp_lib_entry (libnofp.so, through the PLT)
 *        -> lib_aligned (DRAP stack realignment) -> lib_recurse x5 -> { app_callback -> leaf_spin | lib_spin }
 * Usage: nofp_chain [SECONDS]   (default 30; spins on one thread). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double nofp_lib_entry(int depth, int n, double (*cb)(int));

__attribute__((noinline)) double leaf_spin(int n)
{
	volatile double x = 2.0;

	for (int i = 0; i < n; i++)
		x = x * 0.9999999 + 0.25;
	return x;
}

__attribute__((noinline)) double app_callback(int n)
{
	volatile long big[64]; /* a larger frame: a different CFA offset */
	double r;

	big[n & 63] = n;
	r = leaf_spin(n);
	return r + (double)big[n & 63];
}

__attribute__((noinline)) double stage_a(int i)
{
	volatile int k = i;
	double r = nofp_lib_entry(4, 200000 + (i & 1), app_callback);

	return r + k;
}

__attribute__((noinline)) double run(double secs)
{
	struct timespec t0, t;
	double acc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0;; i++) {
		acc += stage_a(i);
		if ((i & 63) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
				break;
		}
	}
	return acc;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 30;
	double r = run(secs);

	printf("%g\n", r > 0 ? 1.0 : 0.0);
	return 0;
}
