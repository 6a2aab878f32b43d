// SPDX-License-Identifier: MIT
/* Training steps on a profile (output/steps.c): phases from frames, each
 * sample's step by the rule (data, forward and backward before the
 * backward's return, the optimizer after it), the step table, and an inner
 * loop of backward calls left unlabelled with a note. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "output/output.h"
#include "output_fixture.h"

#define MS     1000000ull
#define TORCH  "/usr/lib/python3/dist-packages/torch/"
#define PID    7
#define WORKER 8 /* another thread of the process */
#define STACK(...)                                       \
	add_stack(&f, (const uint32_t[]){ __VA_ARGS__ }, \
		  sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))

#define STACKP(...)                                     \
	add_stack(f, (const uint32_t[]){ __VA_ARGS__ }, \
		  sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))

struct st_fx {
	struct gs_profile p;
	uint32_t m_py, m_nat;
};

/* An empty profile at FX_PERIOD with a Python and a libtorch mapping. */
static void fx_init(struct st_fx *f)
{
	gs_profile_init(&f->p);
	f->p.period_ns = FX_PERIOD;
	f->m_py = fx_map(&f->p, "[python]", NULL, 0, 0, true);
	f->m_nat = fx_map(&f->p, "/usr/lib/libtorch_cpu.so", NULL, 0x1000, 0x100000, false);
}

static uint32_t py(struct st_fx *f, const char *name, const char *file)
{
	return fx_loc(&f->p, f->m_py, 0, GS_FRAME_PYTHON, fx_fn(&f->p, name, NULL, file, 1), 2);
}

static uint32_t nat(struct st_fx *f, const char *name)
{
	static uint64_t addr = 0x2000;
	return fx_loc(&f->p, f->m_nat, addr += 16, GS_FRAME_NATIVE,
		      fx_fn(&f->p, name, NULL, NULL, 0), 0);
}

/* root-first locations -> stack index */
static uint32_t add_stack(struct st_fx *f, const uint32_t *root_first, uint32_t n)
{
	uint32_t leaf_first[16];
	for (uint32_t i = 0; i < n; i++)
		leaf_first[i] = root_first[n - 1 - i];
	return (uint32_t)gs_profile_add_stack(&f->p, leaf_first, n);
}

static void sample(struct st_fx *f, uint32_t tid, uint32_t stack, uint64_t t)
{
	struct gs_sample s = { .stack = stack, .time_ns = t, .values = { [GS_V_SAMPLES] = 1 } };
	struct gs_sample_ctx c = { .pid = PID, .tid = tid, .cuda_device = -1 };
	cr_assert_eq(gs_profile_add_sample(&f->p, &s, &c), 0);
}

static const char *phase_of(struct st_fx *f, size_t i)
{
	return gs_profile_str(&f->p,
			      gs_profile_ctx(&f->p, &f->p.samples[i])->str_labels[GS_SL_PHASE]);
}

static int64_t step_of(struct st_fx *f, size_t i)
{
	const struct gs_sample_ctx *c = gs_profile_ctx(&f->p, &f->p.samples[i]);
	return c->num_set & (1u << GS_NL_STEP) ? c->num_labels[GS_NL_STEP] : 0;
}

Test(steps, phases_and_step_of_each_sample)
{
	struct st_fx f;
	fx_init(&f);
	uint32_t mod = py(&f, "<module>", "/home/u/train.py");
	uint32_t next = py(&f, "_BaseDataLoaderIter.__next__", TORCH "utils/data/dataloader.py");
	uint32_t call = py(&f, "Module._call_impl", TORCH "nn/modules/module.py");
	uint32_t fwd = py(&f, "Net.forward", "/home/u/train.py");
	uint32_t bwd = py(&f, "Tensor.backward", TORCH "_tensor.py");
	uint32_t eng =
	    nat(&f, "torch::autograd::Engine::thread_main(std::shared_ptr<GraphTask> const&)");
	uint32_t opt = py(&f, "SGD.step", TORCH "optim/sgd.py");
	uint32_t log = py(&f, "log", "/home/u/train.py");
	uint32_t s_data = STACK(mod, next), s_fwd = STACK(mod, call, fwd), s_bwd = STACK(mod, bwd),
		 s_opt = STACK(mod, opt), s_other = STACK(mod, log), s_eng = STACK(eng);

	cr_expect_eq(gs_stack_phase(&f.p, s_data), GS_PHASE_DATA);
	cr_expect_eq(gs_stack_phase(&f.p, s_fwd), GS_PHASE_FORWARD);
	cr_expect_eq(gs_stack_phase(&f.p, s_bwd), GS_PHASE_BACKWARD);
	cr_expect_eq(gs_stack_phase(&f.p, s_eng), GS_PHASE_BACKWARD);
	cr_expect_eq(gs_stack_phase(&f.p, s_opt), GS_PHASE_OPTIMIZER);
	cr_expect_eq(gs_stack_phase(&f.p, s_other), GS_PHASE_OTHER);

	/* three steps of 100 ms; backward returns at 150, 250, 350 ms; the
	 * optimizer runs after each return, the next data after that */
	static const uint64_t marks[] = { 150 * MS, 250 * MS, 350 * MS };
	struct {
		uint32_t tid, stack;
		uint64_t t;
		const char *phase;
		int64_t step;
	} want[] = {
		{ PID, s_other, 40 * MS, "other", 0 },   /* before step 1 (one median step long) */
		{ PID, s_data, 70 * MS, "data", 1 },     /* step 1 = 100 ms before its mark */
		{ PID, s_fwd, 100 * MS, "forward", 1 },  /* */
		{ PID, s_bwd, 140 * MS, "backward", 1 }, /* */
		{ WORKER, s_eng, 145 * MS, "backward", 1 }, /* another thread, same numbering */
		{ PID, s_opt, 155 * MS, "optimizer", 1 },   /* after the mark: still step 1 */
		{ PID, s_data, 160 * MS, "data", 2 },       /* the next batch */
		{ PID, s_bwd, 240 * MS, "backward", 2 },    /* */
		{ PID, s_data, 255 * MS, "data", 3 },       /* no optimizer sampled: step 3 */
		{ PID, s_opt, 352 * MS, "optimizer", 3 },   /* */
		{ PID, s_other, 400 * MS, "other", 0 },     /* after the last step */
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		sample(&f, want[i].tid, want[i].stack, want[i].t);
	struct gs_sample_ctx other = { .pid = PID + 1, .tid = PID + 1, .cuda_device = -1 };
	struct gs_sample os = { .stack = s_data,
				.time_ns = 200 * MS,
				.values = { [GS_V_SAMPLES] = 1 } };
	cr_assert_eq(gs_profile_add_sample(&f.p, &os, &other), 0); /* a process without marks */

	cr_assert_eq(gs_profile_label_steps(&f.p, PID, PID, marks, 3, false, marks, 3), 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		cr_expect_str_eq(phase_of(&f, i), want[i].phase, "sample %zu", i);
		cr_expect_eq(step_of(&f, i), want[i].step, "sample %zu: step %lld, want %lld", i,
			     (long long)step_of(&f, i), (long long)want[i].step);
	}
	size_t last = f.p.n_samples - 1;
	cr_expect_eq(step_of(&f, last), 0, "a process without marks got a step");
	cr_expect_eq(gs_profile_ctx(&f.p, &f.p.samples[last])->str_labels[GS_SL_PHASE], 0);

	cr_assert_eq(f.p.n_steps, 3);
	cr_expect_eq(f.p.steps[0].wall_ns, 0, "step 1's start was not seen");
	cr_expect_eq(f.p.steps[1].wall_ns, 100 * MS);
	cr_expect_eq(f.p.steps[2].number, 3);
	cr_expect_eq(f.p.steps[0].start_ns, 50 * MS);
	cr_expect_gt(f.p.steps[0].end_ns, 155 * MS);
	cr_expect_leq(f.p.steps[0].end_ns, 160 * MS);
	cr_expect_eq(f.p.steps[1].end_ns, 250 * MS);
	gs_profile_free(&f.p);
}

Test(steps, an_inner_loop_gets_a_note_not_labels)
{
	struct st_fx f;
	gs_profile_init(&f.p);
	f.m_py = fx_map(&f.p, "[python]", NULL, 0, 0, true);
	uint32_t bwd = py(&f, "Tensor.backward", TORCH "_tensor.py");
	uint32_t s = STACK(bwd);
	uint64_t marks[1000];
	for (size_t i = 0; i < 1000; i++)
		marks[i] = i * 1000000ull; /* 1000 a second */
	sample(&f, PID, s, 500 * MS);
	cr_assert_eq(gs_profile_label_steps(&f.p, PID, PID, marks, 1000, false, marks, 1000), 0);
	cr_expect_eq(f.p.n_steps, 0);
	cr_expect_eq(step_of(&f, 0), 0);
	cr_assert_eq(f.p.n_notes, 1);
	cr_expect_not_null(strstr(gs_profile_str(&f.p, f.p.notes[0]), "inner loop"));
	gs_profile_free(&f.p);
}

Test(steps, optimizer_marks_count_the_backwards_of_each_step)
{
	struct st_fx f;
	gs_profile_init(&f.p);
	f.m_py = fx_map(&f.p, "[python]", NULL, 0, 0, true);
	uint32_t opt = py(&f, "SGD.step", TORCH "optim/sgd.py");
	sample(&f, PID, STACK(opt), 305 * MS);
	/* gradient accumulation: 3 backwards, then the optimizer, per step */
	static const uint64_t opts[] = { 100 * MS, 200 * MS, 300 * MS };
	static const uint64_t bwd[] = { 30 * MS,  60 * MS,  90 * MS,  130 * MS, 160 * MS,
					190 * MS, 230 * MS, 260 * MS, 290 * MS };
	cr_assert_eq(gs_profile_label_steps(&f.p, PID, PID, opts, 3, true, bwd, 9), 0);
	cr_assert_eq(f.p.n_steps, 3);
	for (size_t k = 0; k < 3; k++) {
		cr_expect(f.p.steps[k].by_optimizer);
		cr_expect_eq(f.p.steps[k].backwards, 3, "step %zu: %u backwards", k + 1,
			     f.p.steps[k].backwards);
	}
	cr_expect_eq(f.p.steps[2].wall_ns, 100 * MS);
	cr_expect_eq(step_of(&f, 0), 3, "the optimizer after the last mark is step 3's");
	gs_profile_free(&f.p);
}

static char *steps_section(const struct gs_profile *p)
{
	char *buf = NULL, *s;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct gs_report_opts o = { .top = 5 };

	cr_assert_eq(gs_write_report(p, &o, f), 0);
	fclose(f);
	if (!(s = strstr(buf, "\nSteps\n"))) {
		free(buf);
		return NULL;
	}
	/* the section: its title and the indented lines under it */
	char *e = s + 7;
	while (*e == ' ')
		e = strchr(e, '\n') ? strchr(e, '\n') + 1 : e + strlen(e);
	char *out = strndup(s, (size_t)(e - s));
	free(buf);
	return out;
}

/* 12 steps of 100 ms on the main thread (data, forward, backward, then
 * the optimizer after the mark), step 6 with a 200 ms stall in a data
 * fetch. */
static void twelve_steps(struct st_fx *f)
{
	gs_profile_init(&f->p);
	f->p.period_ns = FX_PERIOD;
	f->p.duration_nanos = 2000 * MS;
	cr_assert_eq(gs_profile_add_comment(&f->p, "gpusample 0.0-test"), 0);
	f->m_py = fx_map(&f->p, "[python]", NULL, 0, 0, true);
	uint32_t mod = py(f, "<module>", "/home/u/train.py");
	uint32_t next = py(f, "_BaseDataLoaderIter.__next__", TORCH "utils/data/dataloader.py");
	uint32_t fetch = py(f, "slow_fetch", "/home/u/train.py");
	uint32_t call = py(f, "Module._call_impl", TORCH "nn/modules/module.py");
	uint32_t bwd = py(f, "Tensor.backward", TORCH "_tensor.py");
	uint32_t opt = py(f, "SGD.step", TORCH "optim/sgd.py");
	uint32_t s_data = STACKP(mod, next), s_fetch = STACKP(mod, next, fetch),
		 s_fwd = STACKP(mod, call), s_bwd = STACKP(mod, bwd), s_opt = STACKP(mod, opt);
	uint64_t marks[12], t = 100 * MS;

	for (int k = 0; k < 12; k++) {
		uint64_t d = k == 5 ? 300 : 100; /* step 6 stalls */

		for (uint64_t u = 0; u + 10 <= d - 80; u += 10)
			sample(f, PID, k == 5 && u >= 10 ? s_fetch : s_data, t + u * MS);
		for (uint64_t u = d - 80; u < d - 40; u += 10)
			sample(f, PID, s_fwd, t + u * MS);
		for (uint64_t u = d - 40; u < d; u += 10)
			sample(f, PID, s_bwd, t + u * MS);
		marks[k] = t + d * MS;
		sample(f, PID, s_opt, marks[k] + 1 * MS);
		t = marks[k] + 10 * MS;
	}
	cr_assert_eq(gs_profile_label_steps(&f->p, PID, PID, marks, 12, false, marks, 12), 0);
	cr_assert_eq(f->p.n_steps, 12);
}

Test(steps, a_saved_profile_prints_the_same_steps_section)
{
	struct st_fx f;
	struct gs_profile r, m;
	char path[] = "/tmp/gs-steps-XXXXXX", err[256];

	twelve_steps(&f);
	char *live = steps_section(&f.p);
	cr_assert_not_null(live, "no Steps section in the live report");
	cr_expect_not_null(strstr(live, "step 6: 310.0 ms"), "%s", live);
	cr_expect_not_null(strstr(live, "slow_fetch"), "%s", live);
	close(mkstemp(path));
	cr_assert_eq(gs_write_pprof(&f.p, path, err, sizeof(err)), 0, "%s", err);
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	char *saved = steps_section(&r);
	cr_assert_not_null(saved, "no Steps section from the saved profile");
	cr_expect_str_eq(saved, live);

	/* a merge of two runs: each run's process keeps its steps */
	gs_profile_init(&m);
	cr_assert_eq(gs_profile_merge(&m, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_profile_merge(&m, &f.p, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(m.n_steps, 24);
	char *merged = steps_section(&m);
	cr_assert_not_null(merged);
	const char *second = strstr(merged, "  pid 7: 12 steps");
	cr_expect(second && strstr(second + 1, "  pid 7: 12 steps"), "%s", merged);
	unlink(path);
	free(live);
	free(saved);
	free(merged);
	gs_profile_free(&m);
	gs_profile_free(&r);
	gs_profile_free(&f.p);
}

Test(steps, steps_out_of_order_in_a_file_are_left_out_with_a_note)
{
	struct st_fx f;
	struct gs_profile r;
	char path[] = "/tmp/gs-steps-XXXXXX", err[256];

	twelve_steps(&f);
	f.p.steps[0].number = 2; /* 2, 2, 3, ...: the first is not step 1 */
	close(mkstemp(path));
	cr_assert_eq(gs_write_pprof(&f.p, path, err, sizeof(err)), 0, "%s", err);
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	/* the first is dropped; "2" then follows nothing of pid 7 either, so
	 * the rest of the run is dropped, not renumbered */
	cr_expect_eq(r.n_steps, 0);
	bool noted = false;
	for (uint32_t i = 0; i < r.n_notes; i++)
		noted |= strstr(gs_profile_str(&r, r.notes[i]),
				"12 of the file's training steps") != NULL;
	cr_expect(noted, "no note for the dropped steps");
	unlink(path);
	gs_profile_free(&r);
	gs_profile_free(&f.p);
}

static void ranked_sample(struct st_fx *f, uint32_t pid, int64_t rank, uint32_t stack, uint64_t t)
{
	struct gs_sample s = { .stack = stack, .time_ns = t, .values = { [GS_V_SAMPLES] = 1 } };
	struct gs_sample_ctx c = { .pid = pid, .tid = pid, .cuda_device = -1 };

	c.num_labels[GS_NL_RANK] = rank;
	c.num_set = 1u << GS_NL_RANK;
	cr_assert_eq(gs_profile_add_sample(&f->p, &s, &c), 0);
}

Test(steps, the_straggler_of_a_step_is_the_rank_the_others_waited_for)
{
	struct st_fx f;

	fx_init(&f);
	uint32_t mod = py(&f, "<module>", "/home/u/train.py");
	uint32_t call = py(&f, "Module._call_impl", TORCH "nn/modules/module.py");
	uint32_t fetch = py(&f, "slow_fetch", "/home/u/train.py");
	uint32_t bwd = py(&f, "Tensor.backward", TORCH "_tensor.py");
	uint32_t red = nat(&f, "c10d::Reducer::finalize_backward()");
	uint32_t s_fwd = STACK(mod, call), s_fetch = STACK(mod, fetch),
		 s_wait = STACK(mod, bwd, red);
	uint64_t marks[8];

	/* 8 steps of 100 ms on both ranks; in step 4 rank 1 spins 300 ms in
	 * slow_fetch while rank 0 waits for it in the all-reduce */
	for (int r = 0; r < 2; r++) {
		uint32_t pid = PID + 2 * (uint32_t)r;
		uint64_t t = 100 * MS;

		for (int k = 0; k < 8; k++) {
			for (uint64_t u = 0; u < 100; u += 10)
				ranked_sample(&f, pid, r, s_fwd, t + u * MS);
			if (k == 3)
				for (uint64_t u = 100; u < 400; u += 10)
					ranked_sample(&f, pid, r, r ? s_fetch : s_wait, t + u * MS);
			t += (k == 3 ? 400 : 100) * MS;
			marks[k] = t - 5 * MS;
		}
		cr_assert_eq(gs_profile_label_steps(&f.p, pid, pid, marks, 8, false, marks, 8), 0);
	}
	char *sec = steps_section(&f.p);
	cr_assert_not_null(sec);
	cr_expect_not_null(strstr(sec, "  pid 7 (rank 0): 8 steps"), "%s", sec);
	cr_expect_not_null(strstr(sec, "  pid 9 (rank 1): 8 steps"), "%s", sec);
	cr_expect_not_null(strstr(sec, "  ranks: rank 0 8 steps, rank 1 8 steps\n"), "%s", sec);
	const char *line = strstr(sec, "    step 4: rank 1 busy 4");
	cr_expect(line && strstr(line, "slow_fetch"), "%s", sec);
	const char *st = strstr(sec, "  stragglers");
	size_t lines = 0;
	for (const char *q = st; q && (q = strstr(q, "\n    step ")); q++)
		lines++;
	cr_expect_eq(lines, 1, "one straggler step, not %zu:\n%s", lines, sec);
	free(sec);
	gs_profile_free(&f.p);
}

Test(steps, zero_grad_at_the_top_of_an_iteration_does_not_end_the_step_before)
{
	struct st_fx f;

	fx_init(&f);
	uint32_t mod = py(&f, "<module>", "/home/u/train.py");
	uint32_t fetch = py(&f, "slow_fetch", "/home/u/train.py");
	uint32_t zg = py(&f, "Optimizer.zero_grad", TORCH "optim/optimizer.py");
	uint32_t sgd = py(&f, "SGD.step", TORCH "optim/sgd.py");
	uint32_t bwd = py(&f, "Tensor.backward", TORCH "_tensor.py");
	uint32_t s_fetch = STACK(mod, fetch), s_zg = STACK(mod, zg), s_opt = STACK(mod, sgd),
		 s_bwd = STACK(mod, bwd);
	static const uint64_t marks[] = { 100 * MS, 300 * MS };

	/* step 2: a stall in slow_fetch, then zero_grad, then backward */
	sample(&f, PID, s_bwd, 90 * MS);
	sample(&f, PID, s_opt, 102 * MS);   /* step 1's optimizer step */
	sample(&f, PID, s_fetch, 150 * MS); /* step 2's stall */
	sample(&f, PID, s_zg, 250 * MS);    /* step 2's zero_grad */
	sample(&f, PID, s_bwd, 290 * MS);
	cr_assert_eq(gs_profile_label_steps(&f.p, PID, PID, marks, 2, false, marks, 2), 0);
	cr_expect_eq(step_of(&f, 1), 1);
	cr_expect_eq(step_of(&f, 2), 2, "the stall before zero_grad went to step %lld",
		     (long long)step_of(&f, 2));
	cr_expect_eq(step_of(&f, 3), 2);
	cr_expect_str_eq(phase_of(&f, 3), "optimizer");
	gs_profile_free(&f.p);
}
