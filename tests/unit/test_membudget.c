// SPDX-License-Identifier: MIT
/* util/membudget: one budget shared by every store a target can grow. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpusample/profile.h"
#include "gpu/gpu.h"
#include "native/sym_internal.h"
#include "util/membudget.h"

Test(membudget, charges_add_up_across_kinds)
{
	struct gs_mem_stats a, b;

	gs_mem_stats(&a);
	uint64_t old = gs_mem_set_budget(a.used + 3000);
	cr_assert_eq(gs_mem_charge(GS_MEM_PERF_MAPS, 1000), 0);
	cr_assert_eq(gs_mem_charge(GS_MEM_CFI_TABLES, 1500), 0);
	cr_assert_eq(gs_mem_charge(GS_MEM_GPU_STORES, 600), -ENOSPC, "the kinds share one budget");
	cr_assert_eq(gs_mem_charge(GS_MEM_GPU_STORES, 500), 0);
	cr_assert_eq(gs_mem_left(), 0);
	gs_mem_stats(&b);
	cr_assert_eq(b.refused[GS_MEM_GPU_STORES] - a.refused[GS_MEM_GPU_STORES], 1);
	cr_assert_eq(b.used - a.used, 3000);
	cr_assert_geq(b.peak, b.used);
	gs_mem_release(GS_MEM_CFI_TABLES, 1500);
	cr_assert_eq(gs_mem_left(), 1500);
	gs_mem_release(GS_MEM_PERF_MAPS, 1000);
	gs_mem_release(GS_MEM_GPU_STORES, 500);
	gs_mem_release(GS_MEM_GPU_STORES, 500); /* more than it holds: clamped */
	gs_mem_stats(&b);
	cr_assert_eq(b.used, a.used);
	gs_mem_set_budget(old);
}

/* A perf map is cut by what the shared budget has left, and not read once
 * another store has taken it all; both counted as the perf maps' losses
 * and as refused charges. */
Test(membudget, perf_maps_yield_to_the_shared_budget)
{
	char path[64];
	struct gs_perfmap pm, pm2;
	struct gs_perfmap_stats p0, p1;
	struct gs_mem_stats a, b;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/gs_test_membudget.%d", getpid());
	cr_assert_not_null(f = fopen(path, "w"));
	for (int i = 0; i < 20000; i++)
		fprintf(f, "%x 10 region_%d\n", 0x100000 + i * 0x10, i);
	fclose(f);
	gs_mem_stats(&a);
	gs_perfmap_stats(&p0);
	uint64_t old = gs_mem_set_budget(a.used + 64 * 1024);
	cr_assert_eq(gs_perfmap_read(path, getuid(), &pm), 0);
	cr_assert(pm.n > 0 && pm.n < 20000, "cut by the shared budget: %zu", pm.n);
	gs_mem_stats(&b);
	cr_assert_leq(b.used - a.used, 64 * 1024);
	cr_assert_gt(b.used_by[GS_MEM_PERF_MAPS], a.used_by[GS_MEM_PERF_MAPS]);
	gs_perfmap_free(&pm);
	gs_mem_stats(&b);
	cr_assert_eq(b.used, a.used, "freed with its last reader");
	/* the GPU stores took everything: the map is not read */
	uint64_t rest = gs_mem_left();
	cr_assert_eq(gs_mem_charge(GS_MEM_GPU_STORES, rest), 0);
	cr_assert_eq(gs_perfmap_read(path, getuid(), &pm2), 0);
	cr_assert_eq(pm2.n, 0);
	gs_perfmap_stats(&p1);
	cr_assert_eq(p1.cut - p0.cut, 1);
	cr_assert_eq(p1.refused - p0.refused, 1);
	gs_mem_release(GS_MEM_GPU_STORES, rest);
	gs_mem_set_budget(old);
	unlink(path);
}

/* GPU kernel names and locations stop at the shared budget: the records
 * land under the [other kernels] location, counted as cap losses, and the
 * charge is given back with the store. */
Test(membudget, gpu_stores_yield_to_the_shared_budget)
{
	struct gs_profile p;
	struct gs_mem_stats a, b;
	struct gs_cuda_cap_losses l;
	char name[64];
	uint32_t first_other = 0;

	gs_profile_init(&p);
	struct gs_cuda *c = gs_cuda_new(&p);
	cr_assert_not_null(c);
	gs_mem_stats(&a);
	uint64_t old = gs_mem_set_budget(a.used + 100 * (GS_CUDA_LOCATION_BYTES + 256 + 64));
	int kept = 0;
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "_Z7kernel%dPf", i);
		uint32_t id = gs_cuda_location(c, 0x1234, name, 0x10);
		cr_assert_neq(id, 0);
		gs_cuda_cap_losses(c, &l);
		if (l.kernels && !first_other)
			first_other = id;
		else if (!l.kernels)
			kept++;
	}
	gs_cuda_cap_losses(c, &l);
	cr_assert(kept > 50 && kept < 1000, "kept %d kernels", kept);
	cr_assert_eq(l.kernels, (uint64_t)(1000 - kept));
	gs_mem_stats(&b);
	cr_assert_gt(b.refused[GS_MEM_GPU_STORES], a.refused[GS_MEM_GPU_STORES]);
	gs_cuda_free(c);
	gs_mem_stats(&b);
	cr_assert_eq(b.used, a.used, "given back with the store");
	gs_mem_set_budget(old);
	gs_profile_free(&p);
}
