/* SPDX-License-Identifier: MIT */
/* The report's cross-rank table (output/report_ranks.c) on a synthetic
 * two-rank DDP profile: rank 1 sleeps before each step, rank 0 waits for it
 * in the all-reduce. */
#include <criterion/criterion.h>

#include "output/output.h"
#include "output_fixture.h"

struct ddp {
	struct gs_profile p;
	uint32_t l_main, l_step, l_coll, l_sleep, l_mm;
};

/* n samples of a main thread: on-CPU (cpu ns) or blocked (offcpu ns). */
static void add(struct gs_profile *p, uint32_t leaf, uint32_t l_main, uint32_t l_step, int64_t rank,
		uint32_t pid, bool blocked, int64_t ns, int n)
{
	uint32_t locs[] = { leaf, l_step, l_main };
	int64_t st = gs_profile_add_stack(p, locs, 3);

	for (int i = 0; i < n; i++) {
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = pid,
					     .tid = pid,
					     .cuda_device = -1,
					     .process_role = gs_profile_intern(p, "main"),
					     .thread_name = gs_profile_intern(p, "python3") };
		s_c.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(p, blocked ? "blocked"
										  : "running");
		s_c.num_labels[GS_NL_RANK] = rank;
		s_c.num_set = 1u << GS_NL_RANK;
		if (blocked) {
			s.values[GS_V_OFFCPU_NS] = ns;
		} else {
			s.values[GS_V_SAMPLES] = 1;
			s.values[GS_V_CPU_NS] = ns;
		}
		gs_profile_add_sample(p, &s, &s_c);
	}
}

static void build(struct ddp *d, bool offcpu)
{
	struct gs_profile *p = &d->p;
	uint32_t m = 0;

	gs_profile_init(p);
	p->period_ns = 10000000;
	m = fx_map(p, "/usr/lib/libtorch_cpu.so", "ab", 0x1000, 0x900000, false);
	d->l_main = fx_loc(p, m, 0x1100, GS_FRAME_NATIVE, fx_fn(p, "main", NULL, NULL, 0), 0);
	d->l_step = fx_loc(p, m, 0x1200, GS_FRAME_NATIVE, fx_fn(p, "train_step", NULL, NULL, 0), 0);
	d->l_coll = fx_loc(p, m, 0x1300, GS_FRAME_NATIVE,
			   fx_fn(p,
				 "c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<"
				 "long, std::ratio<1l, 1000l> >)",
				 NULL, NULL, 0),
			   0);
	d->l_sleep = fx_loc(p, m, 0x1400, GS_FRAME_NATIVE,
			    fx_fn(p, "clock_nanosleep", NULL, NULL, 0), 0);
	d->l_mm = fx_loc(p, m, 0x1500, GS_FRAME_NATIVE, fx_fn(p, "sgemm_", NULL, NULL, 0), 0);
	/* both compute 2 s; rank 0 waits 3 s in the all-reduce, rank 1 sleeps 3 s */
	add(p, d->l_mm, d->l_main, d->l_step, 0, 100, false, 10000000, 200);
	add(p, d->l_mm, d->l_main, d->l_step, 1, 200, false, 10000000, 200);
	if (offcpu) {
		add(p, d->l_coll, d->l_main, d->l_step, 0, 100, true, 30000000, 100);
		add(p, d->l_coll, d->l_main, d->l_step, 1, 200, true, 1000000, 100);
		add(p, d->l_sleep, d->l_main, d->l_step, 1, 200, true, 30000000, 100);
	}
}

static char *report(const struct gs_profile *p)
{
	char *r = fx_report(p);
	cr_assert_not_null(r, "gs_write_report failed");
	return r;
}

Test(report_ranks, straggler_named_with_numbers)
{
	struct ddp d;
	char *out;

	build(&d, true);
	out = report(&d.p);
	cr_assert(strstr(out, "Across ranks (main thread of each of 2 ranks)"), "%s", out);
	cr_assert(strstr(out, "  collective wait       0.10 s    1.55 s    3.00 s  rank 0"), "%s",
		  out);
	cr_assert(strstr(out, "  sleep                 0.00 s    1.50 s    3.00 s  rank 1"), "%s",
		  out);
	cr_assert(strstr(out,
			 "Straggler: rank 1 -- the other ranks wait 3.00 s (median) in collectives "
			 "for it, rank 1 only 0.10 s; it spends more than the others in sleep "
			 "(+3.00 s: 3.00 s, 59% of its wall time)."),
		  "%s", out);
	free(out);
	gs_profile_free(&d.p);
}

Test(report_ranks, even_ranks_and_no_offcpu)
{
	struct ddp d;
	char *out;

	build(&d, false);
	out = report(&d.p);
	cr_assert(strstr(out, "Across ranks"), "%s", out);
	cr_assert(strstr(out, "no straggler can be named"), "%s", out);
	cr_assert_null(strstr(out, "Straggler:"));
	free(out);
	/* even collective waits: no straggler */
	add(&d.p, d.l_coll, d.l_main, d.l_step, 0, 100, true, 10000000, 100);
	add(&d.p, d.l_coll, d.l_main, d.l_step, 1, 200, true, 10000000, 100);
	out = report(&d.p);
	cr_assert(strstr(out, "No straggler"), "%s", out);
	free(out);
	gs_profile_free(&d.p);
}

static void rank_zero(struct gs_sample_ctx *c, void *arg)
{
	c->num_labels[GS_NL_RANK] = 0;
}

Test(report_ranks, one_rank_prints_nothing)
{
	struct ddp d;
	char *out;

	build(&d, true);
	cr_assert_eq(gs_profile_edit_ctx(&d.p, NULL, rank_zero, NULL), 0);
	out = report(&d.p);
	cr_assert_null(strstr(out, "Across ranks"), "%s", out);
	free(out);
	gs_profile_free(&d.p);
}
