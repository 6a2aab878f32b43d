// SPDX-License-Identifier: MIT
/* The CPU <-> GPU join (gpu/join.c): exact by correlation id,
 * proportional over launch stacks, unknown launches, windows. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "gpusample/profile.h"
#include "gpu/gpu.h"
#include "keep_profile.h"

static struct gs_profile P;

static void setup(void)
{
	gs_profile_init(&P);
}
static void teardown(void)
{
	gs_test_keep_profile(&P);
	gs_profile_free(&P);
}
TestSuite(join, .init = setup, .fini = teardown);

/* A one-frame CPU stack whose function is called name; returns its index. */
static uint32_t cpu_stack(const char *name)
{
	struct gs_function f = { .name = gs_profile_intern(&P, name) };
	struct gs_line l = { .function = gs_profile_add_function(&P, &f) };
	uint32_t loc = gs_profile_add_location(&P, 0, 0x1000 + P.n_locations, GS_FRAME_NATIVE, &l,
					       1);
	int64_t st = gs_profile_add_stack(&P, &loc, 1);
	cr_assert(st >= 0);
	return (uint32_t)st;
}

/* A GPU PC location (address = pc) of a kernel named fn. */
static uint32_t gpu_loc(const char *fn, uint64_t pc)
{
	struct gs_function f = { .name = gs_profile_intern(&P, fn) };
	struct gs_line l = { .function = gs_profile_add_function(&P, &f) };
	return gs_profile_add_location(&P, 0, pc, GS_FRAME_GPU_PC, &l, 1);
}

static const char *fn_name_of_loc(uint32_t loc)
{
	const struct gs_location *l = gs_profile_location(&P, loc);
	return gs_profile_str(&P, gs_profile_function(&P, P.lines[l->first_line].function)->name);
}

/* Root (last) frame's function name of a sample's stack. */
static const char *root_of(const struct gs_sample *s)
{
	const struct gs_stack *st = &P.stacks[s->stack];
	return fn_name_of_loc(P.stack_locs[st->first + st->n - 1]);
}

struct sums {
	int64_t s, ni;
	size_t n;
};

/* Sum GPU values of samples whose root frame is root (NULL = all) and whose
 * gpu_attribution is attr (NULL = any). */
static struct sums sum_where(const char *root, const char *attr)
{
	struct sums r = { 0 };
	for (size_t i = 0; i < P.n_samples; i++) {
		const struct gs_sample *s = &P.samples[i];
		if (root && strcmp(root_of(s), root))
			continue;
		if (attr &&
		    strcmp(gs_profile_str(&P, gs_profile_ctx(&P, s)->gpu_attribution), attr))
			continue;
		r.s += s->values[GS_V_GPU_SAMPLES];
		r.ni += s->values[GS_V_GPU_NOT_ISSUED];
		r.n++;
	}
	return r;
}

#define launch(...) launch_(j, __VA_ARGS__)
static void launch_(struct gs_join *j, uint32_t stack, uint32_t tid, uint64_t fn, uint64_t t,
		    uint32_t corr)
{
	struct gs_join_launch l = {
		.pid = 100,
		.tid = tid,
		.correlation_id = corr,
		.function = fn,
		.time_ns = t,
		.stack = stack,
		.weight = 1,
		.thread_name = gs_profile_intern(&P, "python3"),
	};
	cr_assert_eq(gs_join_add_launch(j, &l), 0);
}

Test(join, name_hash_is_fnv1a_64)
{
	/* FNV-1a 64 test vectors (Fowler/Noll/Vo reference: "" and "a"). */
	cr_assert_eq(gs_kernel_name_hash(""), 0xcbf29ce484222325ull);
	cr_assert_eq(gs_kernel_name_hash("a"), 0xaf63dc4c8601ec8cull);
	cr_assert_eq(gs_kernel_name_hash("foobar"), 0x85944171f73967e8ull);
}

Test(join, continuous_three_to_one_split_preserves_totals)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("site_a"), b = cpu_stack("site_b");
	uint64_t fn = gs_kernel_name_hash("_Z6kernelPf");
	/* site_a launches the kernel three times, site_b once, inside the window. */
	launch(a, 11, fn, 10, 0);
	launch(b, 12, fn, 20, 0);
	launch(a, 11, fn, 30, 0);
	launch(a, 11, fn, 40, 0);

	/* One hot PC (400 + 100 not issued) and 40 one-sample PCs. */
	struct gs_join_pc pcs[41];
	gs_str reason = gs_profile_intern(&P, "long_scoreboard");
	pcs[0] = (struct gs_join_pc){ .location = gpu_loc("kernel", 0),
				      .function = fn,
				      .stall_reason = reason,
				      .samples = 400,
				      .not_issued = 100 };
	for (int i = 1; i < 41; i++)
		pcs[i] = (struct gs_join_pc){ .location = gpu_loc("kernel", 16 * i),
					      .function = fn,
					      .stall_reason = reason,
					      .samples = 1 };
	struct gs_join_batch bt = { .pid = 100, .device = 0, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, pcs, 41), 0);
	struct gs_join_stats st;
	cr_assert_eq(gs_join_emit(j, &st), 0);

	struct sums sa = sum_where("site_a", "proportional"),
		    sb = sum_where("site_b", "proportional");
	cr_expect_eq(sa.s + sb.s, 440, "totals preserved: %ld", (long)(sa.s + sb.s));
	cr_expect_eq(sa.ni + sb.ni, 100);
	cr_expect_eq(sa.s, 330, "site_a got %ld of 440", (long)sa.s);
	cr_expect_eq(sb.s, 110, "site_b got %ld of 440", (long)sb.s);
	cr_expect_eq(sa.ni, 75);
	cr_expect_eq(sb.ni, 25);
	cr_expect_eq(st.samples[GS_JOIN_PROPORTIONAL], 440);
	cr_expect_eq(P.default_sample_type, GS_V_GPU_SAMPLES);
	/* Each GPU sample's leaf is its PC, its root the launch site; labels set. */
	for (size_t i = 0; i < P.n_samples; i++) {
		const struct gs_sample *s = &P.samples[i];
		const struct gs_stack *k = &P.stacks[s->stack];
		cr_assert_eq(k->n, 2);
		cr_expect_eq(gs_profile_location(&P, P.stack_locs[k->first])->kind,
			     GS_FRAME_GPU_PC);
		cr_expect_str_eq(gs_profile_str(&P, gs_profile_ctx(&P, s)->cuda_stall_reason),
				 "long_scoreboard");
		cr_expect_eq(gs_profile_ctx(&P, s)->pid, 100);
		cr_expect_eq(gs_profile_ctx(&P, s)->tid, strcmp(root_of(s), "site_a") ? 12u : 11u);
		cr_expect_eq(gs_profile_ctx(&P, s)->cuda_device, 0);
	}
	gs_join_free(j);
}

Test(join, uneven_totals_are_kept_exactly)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t st[3] = { cpu_stack("s0"), cpu_stack("s1"), cpu_stack("s2") };
	uint64_t fn = gs_kernel_name_hash("k");
	/* weights 5 : 3 : 1 */
	for (int i = 0; i < 9; i++)
		launch(st[i < 5 ? 0 : i < 8 ? 1 : 2], 1, fn, 5 + i, 0);
	uint64_t total = 0;
	struct gs_join_pc pcs[50];
	for (int i = 0; i < 50; i++) {
		pcs[i] = (struct gs_join_pc){ .location = gpu_loc("k", 16 * i),
					      .function = fn,
					      .stall_reason = gs_profile_intern(&P, "wait"),
					      .samples = (uint64_t)(i * 7 % 13) };
		total += pcs[i].samples;
	}
	struct gs_join_batch bt = { .pid = 100, .end_ns = 1000 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, pcs, 50), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	struct sums all = sum_where(NULL, NULL);
	cr_expect_eq((uint64_t)all.s, total);
	const double w[3] = { 5, 3, 1 };
	const char *names[3] = { "s0", "s1", "s2" };
	for (int i = 0; i < 3; i++) {
		double ideal = total * w[i] / 9.0;
		int64_t got = sum_where(names[i], NULL).s;
		cr_expect(got >= ideal - 1.0 && got <= ideal + 1.0, "%s: %ld vs ideal %.2f",
			  names[i], (long)got, ideal);
	}
	gs_join_free(j);
}

Test(join, serialized_exact_by_correlation_id)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("site_a"), b = cpu_stack("site_b");
	uint64_t fn = gs_kernel_name_hash("_Z4gemmv");
	launch(a, 21, fn, 10, 7);
	launch(b, 22, fn, 20, 8);
	uint32_t loc = gpu_loc("gemm", 0x40);
	gs_str r = gs_profile_intern(&P, "barrier");
	struct gs_join_pc pcs[] = {
		{ .location = loc,
		  .function = fn,
		  .correlation_id = 7,
		  .stall_reason = r,
		  .samples = 50,
		  .not_issued = 5 },
		{ .location = loc,
		  .function = fn,
		  .correlation_id = 8,
		  .stall_reason = r,
		  .samples = 20 },
	};
	struct gs_join_batch bt = { .pid = 100, .device = 1, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, pcs, 2), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	struct sums sa = sum_where("site_a", "exact"), sb = sum_where("site_b", "exact");
	cr_expect_eq(sa.s, 50);
	cr_expect_eq(sa.ni, 5);
	cr_expect_eq(sb.s, 20);
	cr_expect_eq(sum_where(NULL, "proportional").n, 0);
	for (size_t i = 0; i < P.n_samples; i++)
		cr_expect_eq(gs_profile_ctx(&P, &P.samples[i])->cuda_device, 1);
	gs_join_free(j);
}

Test(join, unmatched_correlation_id_falls_back_to_proportional)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("site_a");
	uint64_t fn = gs_kernel_name_hash("k");
	launch(a, 21, fn, 10, 7); /* 1-in-N launch sampling: id 9 was never seen */
	struct gs_join_pc pc = { .location = gpu_loc("k", 0),
				 .function = fn,
				 .correlation_id = 9,
				 .stall_reason = gs_profile_intern(&P, "wait"),
				 .samples = 12 };
	struct gs_join_batch bt = { .pid = 100, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, &pc, 1), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(sum_where("site_a", "proportional").s, 12);
	gs_join_free(j);
}

Test(join, unknown_launch)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("site_a");
	launch(a, 21, gs_kernel_name_hash("seen"), 10, 1);
	/* a kernel never launched while we watched, and one from another pid */
	struct gs_join_pc pcs[] = {
		{ .location = gpu_loc("unseen", 0),
		  .function = gs_kernel_name_hash("unseen"),
		  .stall_reason = gs_profile_intern(&P, "selected"),
		  .samples = 9,
		  .not_issued = 0 },
		{ .location = gpu_loc("unseen", 16),
		  .function = gs_kernel_name_hash("unseen"),
		  .correlation_id = 5,
		  .stall_reason = gs_profile_intern(&P, "selected"),
		  .samples = 0,
		  .not_issued = 4 },
	};
	struct gs_join_batch bt = { .pid = 100, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, pcs, 2), 0);
	struct gs_join_pc other = { .location = gpu_loc("seen", 0),
				    .function = gs_kernel_name_hash("seen"),
				    .correlation_id = 1,
				    .stall_reason = gs_profile_intern(&P, "selected"),
				    .samples = 3 };
	struct gs_join_batch bt2 = { .pid = 200, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt2, &other, 1), 0);
	struct gs_join_stats st;
	cr_assert_eq(gs_join_emit(j, &st), 0);
	struct sums u = sum_where("[unknown launch]", "unknown");
	cr_expect_eq(u.s, 12);
	cr_expect_eq(u.ni, 4);
	cr_expect_eq(st.samples[GS_JOIN_UNKNOWN], 12);
	cr_expect_eq(sum_where("site_a", NULL).n, 0);
	for (size_t i = 0; i < P.n_samples; i++) {
		const struct gs_stack *k = &P.stacks[P.samples[i].stack];
		cr_expect_eq(k->n, 2);
		cr_expect_eq(gs_profile_location(&P, P.stack_locs[k->first + 1])->kind,
			     GS_FRAME_SPECIAL);
		cr_expect_eq(gs_profile_ctx(&P, &P.samples[i])->tid, 0);
	}
	gs_join_free(j);
}

Test(join, windows_follow_drains)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("early"), b = cpu_stack("late");
	uint64_t fn = gs_kernel_name_hash("k");
	gs_str r = gs_profile_intern(&P, "wait");
	launch(a, 1, fn, 50, 0);
	launch(b, 1, fn, 150, 0);
	struct gs_join_pc pc = {
		.location = gpu_loc("k", 0), .function = fn, .stall_reason = r, .samples = 10
	};
	/* drain 1 at t=100: only "early" launched in (0, 100] */
	struct gs_join_batch b1 = { .pid = 100, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &b1, &pc, 1), 0);
	/* drain 2 at t=200, in two pages of one GetData call: window (100, 200] */
	struct gs_join_batch b2 = { .pid = 100, .end_ns = 200 };
	struct gs_join_batch b2b = { .pid = 100, .end_ns = 201, .same_drain = true };
	cr_assert_eq(gs_join_add_pc_batch(j, &b2, &pc, 1), 0);
	cr_assert_eq(gs_join_add_pc_batch(j, &b2b, &pc, 1), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(sum_where("early", NULL).s, 10);
	cr_expect_eq(sum_where("late", NULL).s, 20);
	/* drain 3 at t=300: no launch in (201, 300] -> whole-run history 1:1 */
	struct gs_join_pc pc2 = pc;
	pc2.samples = 100;
	struct gs_join_batch b3 = { .pid = 100, .end_ns = 300 };
	cr_assert_eq(gs_join_add_pc_batch(j, &b3, &pc2, 1), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(sum_where("early", NULL).s, 10 + 50);
	cr_expect_eq(sum_where("late", NULL).s, 20 + 50);
	gs_join_free(j);
}

Test(join, launch_weight_counts_sampled_launches)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("a"), b = cpu_stack("b");
	uint64_t fn = gs_kernel_name_hash("k");
	struct gs_join_launch la = {
		.pid = 100, .tid = 1, .function = fn, .time_ns = 10, .stack = a, .weight = 4
	};
	struct gs_join_launch lb = la;
	lb.stack = b;
	lb.weight = 1;
	cr_assert_eq(gs_join_add_launch(j, &la), 0);
	cr_assert_eq(gs_join_add_launch(j, &lb), 0);
	struct gs_join_pc pc = { .location = gpu_loc("k", 0),
				 .function = fn,
				 .stall_reason = gs_profile_intern(&P, "wait"),
				 .samples = 100 };
	struct gs_join_batch bt = { .pid = 100, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, &pc, 1), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(sum_where("a", NULL).s, 80);
	cr_expect_eq(sum_where("b", NULL).s, 20);
	gs_join_free(j);
}

Test(join, bad_stack_index_is_rejected)
{
	struct gs_join *j = gs_join_new(&P, 0);
	struct gs_join_launch l = { .pid = 1, .stack = 12345 };
	cr_expect_eq(gs_join_add_launch(j, &l), -EINVAL);
	gs_join_free(j);
}

Test(join, repeated_batches_aggregate_into_one_sample)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("a");
	uint64_t fn = gs_kernel_name_hash("k");
	launch(a, 1, fn, 10, 0);
	struct gs_join_pc pc = { .location = gpu_loc("k", 0),
				 .function = fn,
				 .stall_reason = gs_profile_intern(&P, "wait"),
				 .samples = 3 };
	for (int i = 1; i <= 100; i++) {
		struct gs_join_batch bt = { .pid = 100, .end_ns = 100ull * i };
		cr_assert_eq(gs_join_add_pc_batch(j, &bt, &pc, 1), 0);
	}
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(P.n_samples, 1);
	cr_expect_eq(sum_where("a", NULL).s, 300);
	gs_join_free(j);
}

/* CUDA graphs: cuGraphLaunch has no kernel name and the graph's kernels
 * get no launch callbacks; their PCs hang under the graph launch sites
 * (gpu_attribution=graph), split by how often each launched a graph, not
 * under [unknown launch].  A kernel launched directly keeps its own sites. */
Test(join, graph_launch_kernels_under_the_graph_launch)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t g1 = cpu_stack("replay_a"), g2 = cpu_stack("replay_b"), d = cpu_stack("direct");
	uint64_t direct = gs_kernel_name_hash("direct_kernel");
	struct gs_join_launch gl = {
		.pid = 100, .tid = 7, .time_ns = 10, .stack = g1, .weight = 1, .graph = true
	};
	cr_assert_eq(gs_join_add_launch(j, &gl), 0);
	gl.time_ns = 20;
	cr_assert_eq(gs_join_add_launch(j, &gl), 0);
	gl.stack = g2;
	gl.time_ns = 30;
	cr_assert_eq(gs_join_add_launch(j, &gl), 0);
	launch(d, 8, direct, 40, 0);
	gs_str r = gs_profile_intern(&P, "wait");
	struct gs_join_pc pcs[2] = {
		{ .location = gpu_loc("in_graph", 0),
		  .function = gs_kernel_name_hash("in_graph"),
		  .stall_reason = r,
		  .samples = 300 },
		{ .location = gpu_loc("direct_kernel", 0),
		  .function = direct,
		  .stall_reason = r,
		  .samples = 50 },
	};
	struct gs_join_batch bt = { .pid = 100, .device = 0, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, pcs, 2), 0);
	struct gs_join_stats st;
	cr_assert_eq(gs_join_emit(j, &st), 0);
	cr_expect_eq(sum_where("replay_a", "graph").s, 200);
	cr_expect_eq(sum_where("replay_b", "graph").s, 100);
	cr_expect_eq(sum_where("direct", "proportional").s, 50);
	cr_expect_eq(sum_where(NULL, "unknown").s, 0);
	cr_expect_eq(st.samples[GS_JOIN_GRAPH], 300);
	gs_join_free(j);
}

/* The launch record's CBID says whether it is a graph launch. */
Test(join, graph_launch_record)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t g = cpu_stack("replay");
	struct gs_gpu_launch rec = {
		.hdr = { .type = GS_REC_GPU_LAUNCH, .version = GS_RECORDS_VERSION, .ktime_ns = 5 },
		.gpu = { .tgid = 100, .tid = 7 },
		.name_hash = 0,
		.cbid = GS_CBID_GRAPH_LAUNCH,
		.sample_every = 1,
	};
	cr_assert_eq(gs_join_launch_record(j, &rec, g, 0, 0), 0);
	gs_str r = gs_profile_intern(&P, "wait");
	struct gs_join_pc pc = { .location = gpu_loc("k", 0),
				 .function = gs_kernel_name_hash("k"),
				 .stall_reason = r,
				 .samples = 9 };
	struct gs_join_batch bt = { .pid = 100, .device = 0, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, &pc, 1), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(sum_where("replay", "graph").s, 9);
	gs_join_free(j);
}

/* Issue 24, item 5: launches with a new kernel hash each stop making
 * kernels at the per-process cap (dropped whole, counted), and launches
 * that keep to known kernels stay joinable. */
Test(join, new_kernels_past_the_cap_are_dropped_and_counted)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("site_a");
	uint64_t n = GS_JOIN_KERNELS_PER_PID + 100;
	for (uint64_t i = 0; i < n; i++)
		launch(a, 11, 1000 + i, 10 + i, 0);
	cr_expect(!gs_join_launch_admit(j, 100, 5, false));
	cr_expect(gs_join_launch_admit(j, 100, 1000, false)); /* a known kernel */
	cr_expect(gs_join_launch_admit(j, 101, 5, false));    /* another process */
	struct gs_join_stats st;
	gs_join_stats(j, &st);
	cr_expect_eq(st.kernels_capped, 101);
	cr_expect_eq(st.launches, GS_JOIN_KERNELS_PER_PID);
	gs_join_free(j);
}

/* Correlation ids are aged by the newest launch (no PC batch needed) and
 * capped per process, oldest first, counted; recent ones still join. */
Test(join, correlations_aged_and_capped_without_batches)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t a = cpu_stack("site_a");
	uint64_t fn = gs_kernel_name_hash("_Z4gemmv");
	uint64_t sec = 1000000000ull;
	launch(a, 11, fn, 1 * sec, 1); /* aged out later */
	uint32_t n = GS_JOIN_CORRS_PER_PID * 2;
	for (uint32_t i = 0; i < n; i++)
		launch(a, 11, fn, 100 * sec + i, 2 + i);
	struct gs_join_stats st;
	gs_join_stats(j, &st);
	cr_expect_gt(st.corrs_capped, 0);
	cr_expect_lt(st.corrs_capped, n);
	/* the newest still joins exactly */
	uint32_t loc = gpu_loc("gemm", 0x40);
	struct gs_join_pc pc = { .location = loc,
				 .function = fn,
				 .correlation_id = n + 1,
				 .stall_reason = gs_profile_intern(&P, "barrier"),
				 .samples = 9 };
	struct gs_join_batch bt = { .pid = 100, .device = 0, .end_ns = 101 * sec + n };
	cr_assert_eq(gs_join_add_pc_batch(j, &bt, &pc, 1), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(sum_where("site_a", "exact").s, 9);
	gs_join_free(j);
}
