// SPDX-License-Identifier: MIT
/*
 * One CFI table build (native/cfi_rows.c, gs_cfi_table_build) of the ELF file
 * argv[1], timed in a fresh process as the builder thread meets a new
 * object: prints "rows N wall_ms W cpu_ms C minflt F".  bench/cfi_build.sh
 * links it against this tree's builder and a baseline's and compares.
 */
#include <stdio.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

#include "gpusample/records.h"
#include "native/native.h"

static double ms(struct timeval t)
{
	return t.tv_sec * 1e3 + t.tv_usec / 1e3;
}

int main(int argc, char **argv)
{
	struct gs_cfi_table t;
	struct timespec a, b;
	struct rusage r0, r1;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s ELF-FILE\n", argv[0]);
		return 2;
	}
	getrusage(RUSAGE_SELF, &r0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	rc = gs_cfi_table_build(argv[1], -1, &t);
	clock_gettime(CLOCK_MONOTONIC, &b);
	getrusage(RUSAGE_SELF, &r1);
	if (rc) {
		fprintf(stderr, "%s: build failed: %d\n", argv[1], rc);
		return 1;
	}
	printf("rows %u wall_ms %.1f cpu_ms %.1f minflt %ld\n", t.n_rows,
	       (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6,
	       ms(r1.ru_utime) + ms(r1.ru_stime) - ms(r0.ru_utime) - ms(r0.ru_stime),
	       r1.ru_minflt - r0.ru_minflt);
	gs_cfi_table_free(&t);
	return 0;
}
