// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: cubins from the agent channel through the walled
 * libcupti path (gpu/cuda.c).  A mutated cubin made the toolkit's
 * libcupti loop allocating in root's gpusample; every
 * cuptiGetSassToSourceCorrelation now runs in a child under RLIMIT_AS and
 * RLIMIT_CPU, killed at its deadline.  The input is the cubin; its kernel
 * functions (our own ELF reader, fuzzed too) get locations at three
 * pcOffsets, resolved through the wall in one batch.  gpusample's side must
 * neither crash, leak, nor wait past the wall's deadline, whatever libcupti
 * does in the child.  The real offline-capable libcupti is required (the
 * toolkit's, found as gpusample finds it): without it the harness aborts
 * rather than fuzz nothing.  Seeds: nvcc-built cubins (tests/fakes/cubins).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpusample/profile.h"
#include "gpu/gpu.h"

#define WALL_MS  2000
#define WALL_MEM (256ull << 20)

struct fns {
	char name[4][256];
	int n;
};

static int add_fn(void *ctx, const char *name, uint64_t fsize)
{
	struct fns *f = ctx;

	(void)fsize;
	snprintf(f->name[f->n], sizeof(f->name[0]), "%s", name);
	return ++f->n == 4; /* non-zero stops the listing */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t pcs[] = { 0, 0x10, 0x80 };
	struct gs_profile p;
	struct fns f = { .n = 0 };
	uint64_t crc = 0;

	if (!size)
		return 0;
	gs_profile_init(&p);
	struct gs_cuda *c = gs_cuda_new(&p);
	if (!c || gs_cuda_set_cupti_limits(c, WALL_MS, WALL_MEM))
		abort();
	if (gs_cuda_load_cupti(c)) {
		fprintf(stderr, "fuzz_cupti_wall: no libcupti: %s\n", gs_cuda_cupti_info(c));
		abort();
	}
	gs_cuda_defer_lines(c, true);
	if (!gs_cuda_add_cubin_borrowed(c, 0, data, size, 1, "fuzz", &crc)) {
		gs_cuda_cubin_functions(data, size, add_fn, &f);
		if (!f.n)
			snprintf(f.name[f.n++], sizeof(f.name[0]), "%s", "_Z6kernelPf");
		for (int i = 0; i < f.n; i++)
			for (size_t k = 0; k < sizeof(pcs) / sizeof(pcs[0]); k++)
				gs_cuda_location_pid(c, 1, crc, f.name[i], pcs[k]);
		gs_cuda_resolve_lines(c);
	}
	gs_cuda_free(c);
	gs_profile_free(&p);
	return 0;
}
