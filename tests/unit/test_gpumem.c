/* SPDX-License-Identifier: MIT */
/* gpu/gpumem: the live set of CUDA driver allocations, its peak, the
 * stacks live at the peak, out-of-memory answers, and random operations
 * checked against a plain model. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpumem.h"

#define MiB (1ull << 20)

static const struct gs_gpumem_proc *proc0(struct gs_gpumem *m)
{
	cr_assert_eq(gs_gpumem_nprocs(m), 1);
	return gs_gpumem_proc_at(m, 0);
}

/* A caching-allocator-like pattern: segments grow, one is freed, more
 * grow; the peak's stacks are the ones live when the peak was reached, not
 * at the end. */
Test(gpumem, peak_keeps_the_stacks_live_then)
{
	struct gs_gpumem *m = gs_gpumem_new();
	const struct gs_gpumem_stack_bytes *sb;
	size_t n;

	cr_assert_eq(gs_gpumem_alloc(m, 7, GS_GPUMEM_DEVICE, 0x1000, 20 * MiB, 1, 10), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 7, GS_GPUMEM_DEVICE, 0x2000, 2 * MiB, 2, 20), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 7, GS_GPUMEM_DEVICE, 0x3000, 20 * MiB, 1, 30), 0);
	cr_assert_eq(gs_gpumem_release(m, 7, GS_GPUMEM_DEVICE, 0x3000, 40), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 7, GS_GPUMEM_DEVICE, 0x4000, 8 * MiB, 3, 50), 0);
	const struct gs_gpumem_proc *p = proc0(m);
	cr_assert_eq(p->peak_device, 42 * MiB);
	cr_assert_eq(p->peak_ns, 30);
	cr_assert_eq(p->live[GS_GPUMEM_DEVICE], 30 * MiB);
	cr_assert_eq(gs_gpumem_by_stack(m, 0, GS_GPUMEM_AT_PEAK, &sb, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(sb[0].stack, 1);
	cr_assert_eq(sb[0].bytes, 40 * MiB);
	cr_assert_eq(sb[0].count, 2);
	cr_assert_eq(sb[1].stack, 2);
	cr_assert_eq(gs_gpumem_by_stack(m, 0, GS_GPUMEM_LIVE, &sb, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(sb[0].stack, 1);
	cr_assert_eq(sb[0].bytes, 20 * MiB);
	cr_assert_eq(sb[1].stack, 3);
	cr_assert_eq(gs_gpumem_by_stack(m, 0, GS_GPUMEM_ALLOCATED, &sb, &n), 0);
	cr_assert_eq(sb[0].bytes, 40 * MiB);
	cr_assert_eq(sb[0].count, 2);
	/* a new, higher peak replaces the old one */
	cr_assert_eq(gs_gpumem_alloc(m, 7, GS_GPUMEM_DEVICE, 0x5000, 30 * MiB, 4, 60), 0);
	cr_assert_eq(gs_gpumem_by_stack(m, 0, GS_GPUMEM_AT_PEAK, &sb, &n), 0);
	cr_assert_eq(sb[0].stack, 4);
	cr_assert_eq(p->peak_device, 60 * MiB);
	gs_gpumem_free(m);
}

Test(gpumem, oom_keeps_size_stack_and_live_bytes)
{
	struct gs_gpumem *m = gs_gpumem_new();

	cr_assert_eq(gs_gpumem_alloc(m, 9, GS_GPUMEM_DEVICE, 0x1000, 6 * MiB, 1, 1), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 9, GS_GPUMEM_PHYS, 0x77, 2 * MiB, 5, 2), 0);
	cr_assert_eq(gs_gpumem_oom(m, 9, GS_MEMFN_ALLOC, 1ull << 31, 3, 3), 0);
	const struct gs_gpumem_proc *p = proc0(m);
	cr_assert_eq(p->ooms, 1);
	cr_assert_eq(p->oom[0].size, 1ull << 31);
	cr_assert_eq(p->oom[0].live, 8 * MiB);
	cr_assert_eq(p->oom[0].stack, 3);
	for (int i = 0; i < 20; i++)
		gs_gpumem_oom(m, 9, GS_MEMFN_ALLOC, 1, 3, 4);
	cr_assert_eq(p->ooms, 21); /* all counted, the first few kept */
	gs_gpumem_free(m);
}

/* Forged input: frees of unknown addresses, sizes that lie, an address
 * allocated twice, pinned memory apart from device memory. */
Test(gpumem, lies_are_counted_not_believed)
{
	struct gs_gpumem *m = gs_gpumem_new();
	const struct gs_gpumem_stack_bytes *sb;
	size_t n;

	cr_assert_eq(gs_gpumem_release(m, 3, GS_GPUMEM_DEVICE, 0xdead, 1), -ENOENT);
	cr_assert_eq(gs_gpumem_alloc(m, 3, GS_GPUMEM_DEVICE, 0x1000, 0, 1, 1), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 3, GS_GPUMEM_DEVICE, 0x1000, UINT64_MAX, 1, 1), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 3, GS_GPUMEM_DEVICE, 0x1000, MiB, 1, 2), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 3, GS_GPUMEM_DEVICE, 0x1000, 2 * MiB, 2, 3), 0);
	cr_assert_eq(gs_gpumem_alloc(m, 3, GS_GPUMEM_PINNED, 0x1000, 5 * MiB, 2, 3), 0);
	const struct gs_gpumem_proc *p = proc0(m);
	cr_assert_eq(p->lost.unknown_frees, 1);
	cr_assert_eq(p->lost.bad_size, 2);
	cr_assert_eq(p->lost.reused, 1);
	cr_assert_eq(p->live[GS_GPUMEM_DEVICE], 2 * MiB);
	cr_assert_eq(p->live[GS_GPUMEM_PINNED], 5 * MiB);
	cr_assert_eq(p->peak_device, 2 * MiB);
	cr_assert_eq(gs_gpumem_by_stack(m, 0, GS_GPUMEM_LIVE, &sb, &n), 0);
	cr_assert_eq(n, 1); /* pinned memory is not device memory */
	cr_assert_eq(sb[0].stack, 2);
	cr_assert_eq(gs_gpumem_release(m, 3, GS_GPUMEM_PINNED, 0x1000, 4), 0);
	cr_assert_eq(p->live[GS_GPUMEM_PINNED], 0);
	cr_assert_eq(p->peak[GS_GPUMEM_PINNED], 5 * MiB);
	gs_gpumem_free(m);
}

Test(gpumem, sizes_from_arguments)
{
	uint64_t a[4] = { 0x10, 4096, 100, 7 };

	cr_assert_eq(gs_gpumem_call_size(GS_MEMFN_ALLOC, a, 0), 4096);
	cr_assert_eq(gs_gpumem_call_size(GS_MEMFN_ALLOC_PITCH, a, 512), 512 * 7);
	cr_assert_eq(gs_gpumem_call_size(GS_MEMFN_ALLOC_PITCH, a, UINT64_MAX / 2), 0);
	a[1] = GS_GPUMEM_SIZE_MAX + 1;
	cr_assert_eq(gs_gpumem_call_size(GS_MEMFN_ALLOC, a, 0), 0);
	cr_assert_str_eq(gs_gpumem_fn_info(GS_MEMFN_CREATE)->name, "cuMemCreate");
	cr_assert_null(gs_gpumem_fn_info(GS_MEMFN_NR));
}

/* Past GS_GPUMEM_STACKS_MAX stacks, allocations go under one shared stack:
 * bytes are never lost, memory stays bounded. */
Test(gpumem, stacks_are_capped)
{
	struct gs_gpumem *m = gs_gpumem_new();
	const struct gs_gpumem_stack_bytes *sb;
	size_t n;

	for (uint32_t i = 0; i < GS_GPUMEM_STACKS_MAX + 100; i++)
		cr_assert_eq(gs_gpumem_alloc(m, 1, GS_GPUMEM_DEVICE, 0x1000 + i, 1, i, i), 0);
	cr_assert_eq(gs_gpumem_by_stack(m, 0, GS_GPUMEM_LIVE, &sb, &n), 0);
	cr_assert_eq(n, GS_GPUMEM_STACKS_MAX + 1);
	cr_assert_eq(sb[0].stack, GS_GPUMEM_STACK_OTHER);
	cr_assert_eq(sb[0].bytes, 100);
	size_t np;
	gs_gpumem_series(m, 0, &np);
	cr_assert_leq(np, GS_GPUMEM_SERIES_MAX);
	gs_gpumem_free(m);
}

/* Random allocations and frees in three processes against a model: live
 * bytes, peaks, the stacks at the peak and the series' maximum agree. */
#define NADDR 64
Test(gpumem, random_ops_match_model)
{
	struct gs_gpumem *m = gs_gpumem_new();
	uint64_t size[3][NADDR] = { { 0 } }, live[3] = { 0 }, peak[3] = { 0 };
	uint32_t stk[3][NADDR];
	uint64_t at_peak[3][8] = { { 0 } }, now[3][8] = { { 0 } };

	srand(11);
	for (int op = 0; op < 100000; op++) {
		int p = rand() % 3, a = rand() % NADDR;
		uint32_t tgid = 100 + p;

		if (rand() % 2) {
			uint64_t sz = 1 + (uint64_t)(rand() % 1000);
			uint32_t st = rand() % 8;

			cr_assert_eq(gs_gpumem_alloc(m, tgid, GS_GPUMEM_DEVICE, a, sz, st, op), 0);
			if (size[p][a]) { /* reused: the old one is freed */
				live[p] -= size[p][a];
				now[p][stk[p][a]] -= size[p][a];
			}
			size[p][a] = sz;
			stk[p][a] = st;
			live[p] += sz;
			now[p][st] += sz;
			if (live[p] > peak[p]) {
				peak[p] = live[p];
				memcpy(at_peak[p], now[p], sizeof(now[p]));
			}
		} else {
			int rc = gs_gpumem_release(m, tgid, GS_GPUMEM_DEVICE, a, op);

			cr_assert_eq(rc, size[p][a] ? 0 : -ENOENT);
			if (size[p][a]) {
				live[p] -= size[p][a];
				now[p][stk[p][a]] -= size[p][a];
				size[p][a] = 0;
			}
		}
	}
	for (size_t i = 0; i < gs_gpumem_nprocs(m); i++) {
		const struct gs_gpumem_proc *pr = gs_gpumem_proc_at(m, i);
		const struct gs_gpumem_stack_bytes *sb;
		const struct gs_gpumem_point *pts;
		size_t n, np;
		uint64_t max = 0, sum = 0;
		int p = pr->tgid - 100;

		cr_assert_eq(pr->live[GS_GPUMEM_DEVICE], live[p]);
		cr_assert_eq(pr->peak_device, peak[p]);
		cr_assert_eq(gs_gpumem_by_stack(m, i, GS_GPUMEM_AT_PEAK, &sb, &n), 0);
		for (size_t k = 0; k < n; k++) {
			cr_assert_eq(sb[k].bytes, at_peak[p][sb[k].stack]);
			sum += sb[k].bytes;
		}
		cr_assert_eq(sum, peak[p]);
		pts = gs_gpumem_series(m, i, &np);
		for (size_t k = 0; k < np; k++)
			max = pts[k].bytes > max ? pts[k].bytes : max;
		cr_assert_eq(max, peak[p], "the series keeps the peak");
	}
	gs_gpumem_free(m);
}

/* Calls paired with their returns by thread and entry time: the pitch read
 * at return makes the size, an OOM answer is kept with the call's stack,
 * a return without its call and a success without an address are counted,
 * a thread's call whose return never came gives way to its next. */
Test(gpumem, calls_pair_with_returns)
{
	struct gs_gpumem *m = gs_gpumem_new();
	uint64_t pitch_args[4] = { 0x10, 0x20, 1000, 16 }, alloc_args[4] = { 0x10, 4 * MiB, 0, 0 };
	struct gs_gpumem_ret r = { .tid = 5,
				   .call_ns = 100,
				   .t_ns = 1,
				   .out = 0xa000,
				   .aux = 1024,
				   .out_ok = true,
				   .aux_ok = true };

	cr_assert_eq(gs_gpumem_call(m, 4, 5, 100, GS_MEMFN_ALLOC_PITCH, pitch_args, 7), 0);
	cr_assert_eq(gs_gpumem_return(m, 4, &r), 0);
	const struct gs_gpumem_proc *p = proc0(m);
	cr_assert_eq(p->live[GS_GPUMEM_DEVICE], 1024 * 16);
	/* a return nobody called */
	cr_assert_eq(gs_gpumem_return(m, 4, &r), -ENOENT);
	cr_assert_eq(p->lost.unmatched, 1);
	/* the OOM answer keeps the call's stack and size */
	cr_assert_eq(gs_gpumem_call(m, 4, 5, 200, GS_MEMFN_ALLOC, alloc_args, 9), 0);
	r.call_ns = 200;
	r.result = GS_CUDA_ERROR_OUT_OF_MEMORY;
	cr_assert_eq(gs_gpumem_return(m, 4, &r), 0);
	cr_assert_eq(p->ooms, 1);
	cr_assert_eq(p->oom[0].stack, 9);
	cr_assert_eq(p->oom[0].size, 4 * MiB);
	cr_assert_eq(p->oom[0].live, 1024 * 16);
	/* a lost return: the thread's next call takes its place */
	cr_assert_eq(gs_gpumem_call(m, 4, 5, 300, GS_MEMFN_ALLOC, alloc_args, 9), 0);
	cr_assert_eq(gs_gpumem_call(m, 4, 5, 400, GS_MEMFN_ALLOC, alloc_args, 9), 0);
	cr_assert_eq(p->lost.unmatched, 2);
	r.call_ns = 400;
	r.result = 0;
	r.out_ok = false; /* succeeded, address unreadable */
	cr_assert_eq(gs_gpumem_return(m, 4, &r), 0);
	cr_assert_eq(p->lost.unmatched, 3);
	/* frees: NULL frees nothing, map/unmap are counted, an allocation entry
	 * point is no free */
	uint64_t fargs[2] = { 0, 0 };
	cr_assert_eq(gs_gpumem_free_call(m, 4, GS_MEMFN_FREE, fargs, 5), 0);
	cr_assert_eq(p->lost.unknown_frees, 0);
	cr_assert_eq(gs_gpumem_free_call(m, 4, GS_MEMFN_MAP, fargs, 5), 0);
	cr_assert_eq(p->maps, 1);
	cr_assert_eq(gs_gpumem_free_call(m, 4, GS_MEMFN_ALLOC, fargs, 5), -EINVAL);
	fargs[0] = 0xa000;
	cr_assert_eq(gs_gpumem_free_call(m, 4, GS_MEMFN_FREE_ASYNC, fargs, 6), 0);
	cr_assert_eq(p->live[GS_GPUMEM_DEVICE], 0);
	gs_gpumem_free(m);
}

/* More threads in flight than GS_GPUMEM_INFLIGHT_MAX: the oldest calls give
 * way (counted), the newest still pair. */
Test(gpumem, calls_in_flight_are_capped)
{
	struct gs_gpumem *m = gs_gpumem_new();
	uint64_t args[4] = { 0x10, MiB, 0, 0 };
	uint32_t n = GS_GPUMEM_INFLIGHT_MAX + 10;

	for (uint32_t t = 0; t < n; t++)
		cr_assert_eq(gs_gpumem_call(m, 1, 1000 + t, 10 + t, GS_MEMFN_ALLOC, args, t), 0);
	for (uint32_t t = 0; t < n; t++) {
		struct gs_gpumem_ret r = {
			.tid = 1000 + t, .call_ns = 10 + t, .out = 0x1000 * (t + 1), .out_ok = true
		};

		cr_assert_eq(gs_gpumem_return(m, 1, &r), t < 10 ? -ENOENT : 0);
	}
	const struct gs_gpumem_proc *p = proc0(m);
	cr_assert_eq(p->lost.unmatched, 20); /* 10 evicted, their 10 returns */
	cr_assert_eq(p->live[GS_GPUMEM_DEVICE], GS_GPUMEM_INFLIGHT_MAX * MiB);
	gs_gpumem_free(m);
}
