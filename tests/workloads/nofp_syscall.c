// SPDX-License-Identifier: MIT
/* Samples that interrupt the kernel: the leaf reads 1 MiB blocks from
 * /dev/zero, so most CPU time is in the kernel (clear_user) and the user
 * stack must be unwound from the registers saved at syscall entry.
 * Built -O2 -fomit-frame-pointer like nofp_chain:
 *   main -> sys_run -> nofp_lib_entry (libnofp.so) -> lib_aligned
 *        -> lib_recurse x5 -> sys_callback -> read (libc)
 * (lib_spin is also reached on even iterations, as in nofp_chain.)
 * Usage: nofp_syscall [SECONDS] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

double nofp_lib_entry(int depth, int n, double (*cb)(int));

static int zero_fd = -1;
static char buf[1 << 20];

__attribute__((noinline)) double sys_callback(int n)
{
	volatile long pad[8];
	ssize_t got = 0;

	pad[n & 7] = n;
	for (int i = 0; i < 8; i++)
		got += read(zero_fd, buf, sizeof(buf));
	return (double)got + (double)pad[n & 7];
}

__attribute__((noinline)) double sys_run(double secs)
{
	struct timespec t0, t;
	double acc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		acc += nofp_lib_entry(4, 1, sys_callback); /* odd n: the callback */
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
			break;
	}
	return acc;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 30;

	zero_fd = open("/dev/zero", O_RDONLY);
	if (zero_fd < 0)
		return 1;
	printf("%g\n", sys_run(secs) > 0 ? 1.0 : 0.0);
	return 0;
}
