// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: `gpusample report FILE` on a hostile file: the pprof
 * reader (gzip or plain profile.proto, gpusample's private meta field) and
 * the terminal report written from what it read (escaping, sums, tables);
 * then what `gpusample merge` does with it (merged into an empty profile,
 * encoded again).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpusample/profile.h"
#include "output/output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static FILE *devnull;
	static char path[64];
	struct gs_profile p;
	char err[512];

	if (fd < 0) {
		if ((fd = memfd_create("fuzz_pprof", 0)) < 0 ||
		    !(devnull = fopen("/dev/null", "w")))
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	gs_profile_init(&p);
	if (gs_read_pprof(path, &p, err, sizeof(err)) == 0) {
		struct gs_report_opts ro = { .top = 15, .color = size & 1 };

		struct gs_profile m;
		uint8_t *buf = NULL;
		size_t len;

		gs_write_report(&p, &ro, devnull);
		gs_profile_init(&m);
		if (gs_profile_merge(&m, &p, err, sizeof(err)) == 0 &&
		    gs_pprof_encode(&m, &buf, &len) == 0)
			free(buf);
		gs_profile_free(&m);
	}
	gs_profile_free(&p);
	return 0;
}
