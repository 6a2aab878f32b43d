// SPDX-License-Identifier: MIT
/* dlopen after attach: sleeps 1 s, then dlopens libnofp.so (next to this
 * binary) and spins in it through a callback, so the CFI tables for the
 * library must be added while sampling runs.  Built like nofp_chain.
 *   main -> run_dl -> nofp_lib_entry -> lib_aligned -> lib_recurse x5
 *        -> dl_callback -> dl_leaf | lib_spin
 * Usage: nofp_dlopen [SECONDS] */
#include <dlfcn.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef double (*entry_fn)(int, int, double (*)(int));

__attribute__((noinline)) double dl_leaf(int n)
{
	volatile double x = 3.0;

	for (int i = 0; i < n; i++)
		x = x * 0.9999999 + 0.125;
	return x;
}

__attribute__((noinline)) double dl_callback(int n)
{
	volatile long pad[16];
	double r;

	pad[n & 15] = n;
	r = dl_leaf(n);
	return r + (double)pad[n & 15];
}

__attribute__((noinline)) double run_dl(entry_fn entry, double secs)
{
	struct timespec t0, t;
	double acc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0;; i++) {
		acc += entry(4, 200000 + (i & 1), dl_callback);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
			break;
	}
	return acc;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 30;
	char exe[PATH_MAX], lib[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h;
	entry_fn entry;

	if (n <= 0)
		return 1;
	exe[n] = 0;
	snprintf(lib, sizeof(lib), "%s/libnofp.so", dirname(exe));
	sleep(1);
	h = dlopen(lib, RTLD_NOW);
	entry = h ? (entry_fn)dlsym(h, "nofp_lib_entry") : NULL;
	if (!entry) {
		fprintf(stderr, "nofp_dlopen: %s\n", dlerror());
		return 1;
	}
	printf("%g\n", run_dl(entry, secs) > 0 ? 1.0 : 0.0);
	return 0;
}
