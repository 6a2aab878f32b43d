// SPDX-License-Identifier: MIT
/* Profile model: interning, dedupe, growth, scale. */
#include <criterion/criterion.h>
#include <time.h>

#include "output/internal.h"
#include "output_fixture.h"

Test(profile, init_has_empty_string)
{
	struct gs_profile p;
	gs_profile_init(&p);
	cr_assert_eq(p.n_strings, 1);
	cr_assert_str_eq(gs_profile_str(&p, 0), "");
	cr_assert_eq(gs_profile_intern(&p, ""), 0);
	cr_assert_eq(gs_profile_intern(&p, NULL), 0);
	cr_assert_eq(p.default_sample_type, GS_V_CPU_NS);
	gs_profile_free(&p);
}

Test(profile, value_types_fixed)
{
	const char *t[] = { "samples",
			    "cpu",
			    "offcpu",
			    "gpu_samples",
			    "gpu_samples_not_issued",
			    "wall",
			    "gpu_alloc_space",
			    "gpu_inuse_space" };
	const char *u[] = { "count", "nanoseconds", "nanoseconds", "count",
			    "count", "nanoseconds", "bytes",       "bytes" };
	cr_assert_eq(GS_NVALUES, sizeof(t) / sizeof(t[0]));
	for (int i = 0; i < GS_NVALUES; i++) {
		cr_assert_str_eq(gs_value_type[i], t[i]);
		cr_assert_str_eq(gs_value_unit[i], u[i]);
	}
}

Test(profile, intern_dedupes_and_copies)
{
	struct gs_profile p;
	gs_profile_init(&p);
	char buf[32] = "hello";
	gs_str a = gs_profile_intern(&p, buf);
	strcpy(buf, "world");
	gs_str b = gs_profile_intern(&p, buf);
	cr_assert_neq(a, b);
	cr_assert_eq(gs_profile_intern(&p, "hello"), a);
	cr_assert_str_eq(gs_profile_str(&p, a), "hello");
	cr_assert_eq(gs_profile_find_str(&p, "world"), b);
	cr_assert_eq(gs_profile_find_str(&p, "absent"), -1);
	/* growth across many rehashes keeps every index stable */
	char name[32];
	for (int i = 0; i < 200000; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		gs_str s = gs_profile_intern(&p, name);
		cr_assert_eq(s, (gs_str)(3 + i));
	}
	for (int i = 0; i < 200000; i += 997) {
		snprintf(name, sizeof(name), "s%d", i);
		cr_assert_eq(gs_profile_intern(&p, name), (gs_str)(3 + i));
	}
	cr_assert_eq(p.n_strings, 200003);
	gs_profile_free(&p);
}

Test(profile, functions_dedupe_on_all_four_fields)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function f = { .name = gs_profile_intern(&p, "f"),
				 .file = gs_profile_intern(&p, "a.c"),
				 .start_line = 10 };
	uint32_t a = gs_profile_add_function(&p, &f);
	cr_assert_eq(a, 1, "ids are 1-based");
	cr_assert_eq(gs_profile_add_function(&p, &f), a);
	struct gs_function g = f;
	g.start_line = 11;
	cr_assert_neq(gs_profile_add_function(&p, &g), a);
	g = f;
	g.system_name = gs_profile_intern(&p, "_Z1fv");
	cr_assert_neq(gs_profile_add_function(&p, &g), a);
	g = f;
	g.file = gs_profile_intern(&p, "b.c");
	cr_assert_neq(gs_profile_add_function(&p, &g), a);
	cr_assert_eq(p.n_functions, 4);
	for (int i = 0; i < 50000; i++) {
		struct gs_function h = { .name = gs_profile_intern(&p, "g"), .start_line = i };
		cr_assert_eq(gs_profile_add_function(&p, &h), (uint32_t)(5 + i));
	}
	struct gs_function h = { .name = gs_profile_intern(&p, "g"), .start_line = 777 };
	cr_assert_eq(gs_profile_add_function(&p, &h), 5 + 777);
	gs_profile_free(&p);
}

Test(profile, locations_copy_lines)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_line l[3] = { { 1, 10 }, { 2, 20 }, { 3, 30 } };
	uint32_t a = gs_profile_add_location(&p, 0, 0x10, GS_FRAME_NATIVE, l, 3);
	l[0].line = 99;
	uint32_t b = gs_profile_add_location(&p, 0, 0x20, GS_FRAME_PYTHON, NULL, 0);
	cr_assert_eq(a, 1);
	cr_assert_eq(b, 2);
	const struct gs_location *la = gs_profile_location(&p, a);
	cr_assert_eq(la->n_lines, 3);
	cr_assert_eq(p.lines[la->first_line].line, 10);
	cr_assert_eq(p.lines[la->first_line + 2].function, 3);
	cr_assert_eq(gs_profile_location(&p, b)->kind, GS_FRAME_PYTHON);
	cr_assert_eq(gs_profile_location(&p, b)->n_lines, 0);
	gs_profile_free(&p);
}

Test(profile, stacks_dedupe)
{
	struct gs_profile p;
	gs_profile_init(&p);
	uint32_t s1[] = { 3, 2, 1 }, s2[] = { 3, 2 }, s3[] = { 1, 2, 3 };
	cr_assert_eq(gs_profile_add_stack(&p, s1, 3), 0, "stack indexes are 0-based");
	cr_assert_eq(gs_profile_add_stack(&p, s2, 2), 1);
	cr_assert_eq(gs_profile_add_stack(&p, s3, 3), 2, "order matters");
	cr_assert_eq(gs_profile_add_stack(&p, s1, 3), 0);
	cr_assert_eq(gs_profile_add_stack(&p, NULL, 0), 3, "empty stack is a stack");
	cr_assert_eq(gs_profile_add_stack(&p, NULL, 0), 3);
	uint32_t locs[8];
	for (uint32_t i = 0; i < 100000; i++) {
		for (int d = 0; d < 8; d++)
			locs[d] = i * 8 + (uint32_t)d + 1;
		cr_assert_eq(gs_profile_add_stack(&p, locs, 8), 4 + i);
	}
	for (uint32_t i = 0; i < 100000; i += 101) {
		for (int d = 0; d < 8; d++)
			locs[d] = i * 8 + (uint32_t)d + 1;
		cr_assert_eq(gs_profile_add_stack(&p, locs, 8), 4 + i);
	}
	const struct gs_stack *st = &p.stacks[0];
	cr_assert_eq(p.stack_locs[st->first], 3);
	cr_assert_eq(p.stack_locs[st->first + 2], 1);
	gs_profile_free(&p);
}

Test(profile, samples_comments_notes_processes)
{
	struct gs_profile p;
	gs_profile_init(&p);
	for (int i = 0; i < 1000000; i++) {
		struct gs_sample s = { .stack = 0 };
		struct gs_sample_ctx s_c = { .tid = (uint32_t)i, .cuda_device = -1 };
		cr_assert_eq(gs_profile_add_sample(&p, &s, &s_c), 0);
	}
	cr_assert_eq(p.n_samples, 1000000);
	cr_assert_eq(gs_profile_ctx(&p, &p.samples[999999])->tid, 999999);
	cr_assert_eq(gs_profile_add_comment(&p, "period %d ns", 10101010), 0);
	cr_assert_eq(gs_profile_add_note(&p, "lost %s", "3"), 0);
	cr_assert_str_eq(gs_profile_str(&p, p.comments[0]), "period 10101010 ns");
	cr_assert_str_eq(gs_profile_str(&p, p.notes[0]), "lost 3");
	struct gs_process pr = { .pid = 7, .comm = gs_profile_intern(&p, "x") };
	cr_assert_eq(gs_profile_add_process(&p, &pr), 0);
	cr_assert_eq(p.n_processes, 1);
	gs_profile_free(&p);
	cr_assert_eq(p.n_samples, 0);
}

/* The symbolizer's load: ~100k locations, deduped functions, 1M samples. */
Test(profile, scale_is_fast, .timeout = 60)
{
	struct timespec a, b;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	struct gs_profile p;
	gs_profile_init(&p);
	char name[64];
	for (uint32_t i = 0; i < 100000; i++) {
		snprintf(name, sizeof(name), "function_%u", i % 30000);
		struct gs_function f = { .name = gs_profile_intern(&p, name),
					 .file = gs_profile_intern(&p, "/src/file.c") };
		struct gs_line l = { .function = gs_profile_add_function(&p, &f), .line = i };
		gs_profile_add_location(&p, 0, i, GS_FRAME_NATIVE, &l, 1);
	}
	uint32_t locs[32];
	uint64_t r = 1;
	for (int i = 0; i < 1000000; i++) {
		r = r * 6364136223846793005ULL + 1;
		uint32_t pick = (uint32_t)(r >> 40) % 20000; /* 20k distinct stacks */
		for (int d = 0; d < 32; d++)
			locs[d] = 1 + (pick * 31 + (uint32_t)d * 977) % 100000;
		int64_t st = gs_profile_add_stack(&p, locs, 32);
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .cuda_device = -1 };
		gs_profile_add_sample(&p, &s, &s_c);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	double t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	fprintf(stderr, "profile: 100k locations + 1M samples (stack dedupe each) in %.3f s CPU\n",
		t);
	cr_assert_eq(p.n_functions, 30000);
	cr_assert_leq(p.n_stacks, 20000);
	cr_assert_lt(t, 3.0);
	gs_profile_free(&p);
}

/* Contexts are interned field by field; an absent numeric label's value
 * does not make a new one. */
Test(profile, ctxs_dedupe)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_sample_ctx a = { .pid = 7, .tid = 8, .cuda_device = -1 };
	struct gs_sample_ctx b = a;

	b.num_labels[GS_NL_RANK] = 3; /* bit not set: absent */
	cr_assert_eq(gs_profile_add_ctx(&p, &a), 0);
	cr_assert_eq(gs_profile_add_ctx(&p, &b), 0);
	b.num_set = 1u << GS_NL_RANK;
	cr_assert_eq(gs_profile_add_ctx(&p, &b), 1);
	b.num_labels[GS_NL_RANK] = 0; /* rank 0 is a value */
	cr_assert_eq(gs_profile_add_ctx(&p, &b), 2);
	a.str_labels[GS_SL_HOST] = gs_profile_intern(&p, "h");
	cr_assert_eq(gs_profile_add_ctx(&p, &a), 3);
	a.tid = 9;
	cr_assert_eq(gs_profile_add_ctx(&p, &a), 4);
	cr_assert_eq(p.n_ctxs, 5);
	cr_assert_eq(p.ctxs[1].num_labels[GS_NL_RANK], 3);
	struct gs_sample s = { .ctx = 5 };
	cr_assert_eq(gs_profile_add_sample(&p, &s, NULL), -EINVAL, "ctx out of range");
	s.ctx = 4;
	cr_assert_eq(gs_profile_add_sample(&p, &s, NULL), 0);
	cr_assert_eq(gs_profile_ctx(&p, &p.samples[0])->tid, 9);
	gs_profile_free(&p);
}

static bool odd_tid(const struct gs_sample *s, const struct gs_sample_ctx *c, void *arg)
{
	return c->tid & 1;
}

static void mark(struct gs_sample_ctx *c, void *arg)
{
	(*(int *)arg)++;
	c->str_labels[GS_SL_THREAD_STATE] = 1;
}

/* edit runs once per distinct context, only picked samples change, and
 * two contexts that become equal become one. */
Test(profile, edit_ctx_once_per_ctx)
{
	struct gs_profile p;
	gs_profile_init(&p);
	cr_assert_eq(gs_profile_intern(&p, "running"), 1);
	for (int i = 0; i < 1000; i++) {
		struct gs_sample s = { .stack = 0 };
		struct gs_sample_ctx c = { .pid = 1,
					   .tid = 1 + (uint32_t)(i % 4),
					   .cuda_device = -1 };

		cr_assert_eq(gs_profile_add_sample(&p, &s, &c), 0);
	}
	cr_assert_eq(p.n_ctxs, 4);
	int calls = 0;
	cr_assert_eq(gs_profile_edit_ctx(&p, odd_tid, mark, &calls), 0);
	cr_assert_eq(calls, 2, "tids 1 and 3, once each");
	for (size_t i = 0; i < p.n_samples; i++) {
		const struct gs_sample_ctx *c = gs_profile_ctx(&p, &p.samples[i]);

		cr_assert_eq(c->tid, 1 + i % 4);
		cr_assert_eq(c->str_labels[GS_SL_THREAD_STATE], c->tid & 1 ? 1u : 0u);
	}
	/* marking all: tids 1 and 3 are already marked (their new contexts) */
	calls = 0;
	cr_assert_eq(gs_profile_edit_ctx(&p, NULL, mark, &calls), 0);
	cr_assert_eq(calls, 4);
	cr_assert_eq(p.n_ctxs, 8, "4 old, 2 marked, and 2 more for tids 2 and 4");
	gs_profile_free(&p);
}
