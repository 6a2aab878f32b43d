// SPDX-License-Identifier: MIT
/*
 * speedscope JSON: schema validation with speedscope's own schema (ajv,
 * tests/tools/validate_speedscope.js), content of the profiles, JSON
 * escaping, and a headless Chromium import (tests/tools/speedscope_import.sh).
 */
#include <criterion/criterion.h>

#include "output/internal.h"
#include "output/output.h"
#include "viewer_fixture.h"

FX_TMPDIR_SUITE(speedscope, "ss");

static bool have_validator(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/node_modules/ajv/package.json", fx_root());
	return fx_have("node") && access(path, R_OK) == 0;
}

/* Validate path; returns the validator's output (--dump included). */
static char *validate(const char *path, int *st)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "node %s/tests/tools/validate_speedscope.js %s --dump 2>&1",
		 fx_root(), path);
	return fx_run(cmd, st);
}

static void write_fixture(struct fx *x, char *path, size_t len)
{
	fx_build(x);
	snprintf(path, len, "%s/fx.speedscope.json", tmpdir);
	char err[256];
	cr_assert_eq(gs_write_speedscope(&x->p, path, err, sizeof(err)), 0, "%s", err);
}

Test(speedscope, schema_valid_and_profiles)
{
	cr_assert(have_validator(), "node or tests/node_modules missing (cd tests && npm install "
				    "speedscope@1.25.0 ajv@8)");
	struct fx x;
	char path[128];
	write_fixture(&x, path, sizeof(path));
	int st;
	char *out = validate(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert_not_null(strstr(out, "VALID frames="), "%s", out);
	/* main process first; GPU profile last and active (GPU is the default) */
	cr_assert_not_null(strstr(out, "profiles=4 active=3"), "%s", out);
	/* every thread on the run's axis, 1 s; empty samples where unseen */
	cr_assert_not_null(strstr(out, "PROFILE 0\tpython3 pid 1200 tid 1200 "
				       "(main)\tnanoseconds\tsamples=7\ttotal=1000000000"),
			   "%s", out);
	cr_assert_not_null(strstr(out, "PROFILE 1\tpt_data_worker pid 1201 tid 1201 "
				       "(dataloader)\tnanoseconds\tsamples=9\ttotal=1000000000"),
			   "%s", out);
	cr_assert_not_null(strstr(out, "P0\t\t95000000\nP0\tmain;<module>"),
			   "the first tick at 100 ms covers 95-105 ms:\n%s", out);
	cr_assert_not_null(
	    strstr(out, "PROFILE 3\tGPU0 PC samples (stall reasons)\tnone\tsamples=3\ttotal=170"),
	    "%s", out);
	/* time order: addmm (t=100ms) < input wait (300ms) < sync (800ms); the
	 * 5 adjacent input-wait samples are one run of 50 ms, after a 170 ms gap */
	char *a = strstr(out, "P0\tmain;<module> (/home/u/train.py:10);train_step "
			      "(/home/u/train.py:20);at::native::addmm_out_cpu");
	char *b = strstr(out, "P0\t\t170000000\nP0\tmain;<module> "
			      "(/home/u/train.py:10);_BaseDataLoaderIter.__next__");
	cr_assert_not_null(
	    strstr(out, "Queue.get (multiprocessing/queues.py:103);poll;do_syscall_64\t50000000"),
	    "%s", out);
	char *c = strstr(out, "P0\tmain;<module> (/home/u/train.py:10);train_step "
			      "(/home/u/train.py:22);cudaStreamSynchronize\t20000000");
	cr_assert(a && b && c && a < b && b < c, "CPU samples not in time order: %s", out);
	/* GPU leaves: [GPU] kernel -> inlined device fn -> line -> [stall] */
	cr_assert_not_null(
	    strstr(out, "P3\tmain;<module> (/home/u/train.py:10);train_step (/home/u/train.py:21);"
			"cudaLaunchKernel;[GPU] matmul_kernel;load_tile;tile.cuh:42;[stall] "
			"long_scoreboard\t120"),
	    "%s", out);
	cr_assert_not_null(strstr(out, "P3\t[unknown launch];[GPU] "
				       "matmul_kernel;matmul.cu:43;[stall] long_scoreboard\t10"),
			   "%s", out);
	free(out);
	/* frames carry file and line where known */
	char *json = fx_read_file(path, NULL);
	cr_assert_not_null(
	    strstr(json, "{\"name\":\"tile.cuh:42\",\"file\":\"/home/u/tile.cuh\",\"line\":42}"),
	    "%s", json);
	cr_assert_not_null(
	    strstr(json, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""));
	free(json);
	gs_profile_free(&x.p);
}

/* Off-CPU stretches on the wall-clock axis: "[blocked] WAIT" and
 * "[runnable]" frames under their stack, ticks centred on their time,
 * jitter closed, an overlapped sample cut short, gaps as empty samples. */
Test(speedscope, wall_clock_timeline)
{
	cr_assert(have_validator(), "node or tests/node_modules missing (cd tests && npm install "
				    "speedscope@1.25.0 ajv@8)");
	struct gs_profile p;
	gs_profile_init(&p);
	p.period_ns = FX_PERIOD;
	p.duration_nanos = 300000000;
	uint32_t m_py = fx_map(&p, "[python]", NULL, 0, 0, true);
	uint32_t m_lib = fx_map(&p, "/lib/libc.so.6", NULL, 0x1000, 0x9000, false);
	uint32_t m_k = fx_map(&p, "[kernel.kallsyms]", NULL, 0, 0, false);
	uint32_t a = fx_loc(&p, m_py, 0, GS_FRAME_PYTHON,
			    fx_fn(&p, "step", NULL, "/home/u/t.py", 1), 3);
	uint32_t poll = fx_loc(&p, m_lib, 0x1100, GS_FRAME_NATIVE, fx_fn(&p, "poll", NULL, NULL, 0),
			       0);
	uint32_t fw = fx_loc(&p, m_k, 0x10, GS_FRAME_KERNEL, fx_fn(&p, "futex_wait", NULL, NULL, 0),
			     0);
	uint32_t sa[] = { a }, sb[] = { a, poll, fw };
	uint32_t ms = 1000000;
	fx_samples(&p, sa, 1, 2, 10, 10, "python3", "main", 5 * ms, 10 * ms); /* ticks 5, 15 */
	fx_samples(&p, sa, 1, 1, 10, 10, "python3", "main", 26 * ms, 0);      /* 1 ms late */
	uint32_t st_a = p.samples[0].stack;
	fx_samples(&p, sb, 3, 0, 10, 10, "python3", "main", 0, 0); /* adds stack b only */
	uint32_t st_b = st_a + 1;
	fx_offcpu(&p, st_b, 10, 10, "python3", "main", "blocked", 30 * ms, 50 * ms);
	fx_offcpu(&p, st_a, 10, 10, "python3", "main", "runnable", 80 * ms, 20 * ms);
	fx_samples(&p, sa, 1, 1, 10, 10, "python3", "main", 105 * ms, 0);
	fx_samples(&p, sa, 1, 1, 10, 10, "python3", "main", 203 * ms, 0);
	fx_offcpu(&p, st_b, 10, 11, "python3", "main", "blocked", 0, 300 * ms);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/wall.speedscope.json", tmpdir);
	cr_assert_eq(gs_write_speedscope(&p, path, err, sizeof(err)), 0, "%s", err);
	int st;
	char *out = validate(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	const char *want = "P0\tstep (/home/u/t.py:3)\t30000000\n"
			   "P0\tstep (/home/u/t.py:3);poll;futex_wait;[blocked] poll\t50000000\n"
			   "P0\tstep (/home/u/t.py:3);[runnable]\t20000000\n"
			   "P0\tstep (/home/u/t.py:3)\t10000000\n"
			   "P0\t\t88000000\n"
			   "P0\tstep (/home/u/t.py:3)\t10000000\n"
			   "P0\t\t92000000\n"
			   "P1\tstep (/home/u/t.py:3);poll;futex_wait;[blocked] poll\t300000000\n";
	cr_assert_not_null(strstr(out, want), "want:\n%s\ngot:\n%s", want, out);
	cr_assert_not_null(
	    strstr(
		out,
		"PROFILE 0\tpython3 pid 10 tid 10 (main)\tnanoseconds\tsamples=7\ttotal=300000000"),
	    "%s", out);
	cr_assert_not_null(
	    strstr(
		out,
		"PROFILE 1\tpython3 pid 10 tid 11 (main)\tnanoseconds\tsamples=1\ttotal=300000000"),
	    "%s", out);
	free(out);
	gs_profile_free(&p);
}

/* Sum of the weights of the dumped samples whose line starts with head. */
static uint64_t dump_sum(const char *out, const char *head)
{
	uint64_t sum = 0;
	size_t hl = strlen(head);
	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, head, hl))
			sum += strtoull(l + hl, NULL, 10);
	return sum;
}

/* A long run: 2000 alternating 10 ms samples of two stacks, a 1 s gap,
 * 100 samples of two stacks that print alike.  Uncapped, every change is a
 * sample and the look-alikes are one; under a byte budget samples merge
 * within time steps (named in the title) and every stack keeps its total;
 * with no room at all, one sample per stack and thread. */
static void long_run_profile(struct gs_profile *p)
{
	uint32_t ms = 1000000;
	gs_profile_init(p);
	p->period_ns = FX_PERIOD;
	p->duration_nanos = 22000ull * ms;
	uint32_t m_py = fx_map(p, "[python]", NULL, 0, 0, true);
	uint32_t m_lib = fx_map(p, "/lib/libm.so.6", NULL, 0x1000, 0x9000, false);
	uint32_t step = fx_loc(p, m_py, 0, GS_FRAME_PYTHON, fx_fn(p, "step", NULL, "/t.py", 1), 3);
	uint32_t fwd = fx_loc(p, m_py, 0, GS_FRAME_PYTHON, fx_fn(p, "fwd", NULL, "/t.py", 6), 7);
	uint32_t bwd = fx_loc(p, m_py, 0, GS_FRAME_PYTHON, fx_fn(p, "bwd", NULL, "/t.py", 8), 9);
	uint32_t mm = fx_fn(p, "matmul", NULL, NULL, 0);
	uint32_t mm1 = fx_loc(p, m_lib, 0x1100, GS_FRAME_NATIVE, mm, 0);
	uint32_t mm2 = fx_loc(p, m_lib, 0x1140, GS_FRAME_NATIVE, mm, 0);
	uint32_t a[] = { step, fwd }, b[] = { step, bwd }, c1[] = { step, mm1 },
		 c2[] = { step, mm2 };
	for (int i = 0; i < 2000; i++)
		fx_samples(p, i % 2 ? b : a, 2, 1, 10, 10, "python3", "main",
			   5ull * ms + i * 10ull * ms, 0);
	for (int i = 0; i < 100; i++)
		fx_samples(p, i % 2 ? c2 : c1, 2, 1, 10, 10, "python3", "main",
			   21005ull * ms + i * 10ull * ms, 0);
}

static char *write_long_run(struct gs_profile *p, size_t max_bytes, const char *name)
{
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/%s.speedscope.json", tmpdir, name);
	cr_assert_eq(gs_write_speedscope_capped(p, path, max_bytes, err, sizeof(err)), 0, "%s",
		     err);
	int st;
	char *out = validate(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	size_t len;
	char *doc = fx_read_file(path, &len);
	cr_assert_not_null(doc);
	const char *note = strstr(doc, "[long run: ");
	cr_assert(max_bytes == SIZE_MAX ? !note : note != NULL,
		  "title note wrong for budget %zu: %.300s", max_bytes, doc);
	if (max_bytes != SIZE_MAX && max_bytes > 1) /* the budget holds: frames table aside */
		cr_assert_lt(len, max_bytes + 2048, "%zu bytes for a budget of %zu", len,
			     max_bytes);
	free(doc);
	return out;
}

static void assert_totals(const char *out)
{
	uint64_t s = 1000000000ull;
	cr_assert_eq(dump_sum(out, "P0\tstep (/t.py:3);fwd (/t.py:7)\t"), 10 * s, "%s", out);
	cr_assert_eq(dump_sum(out, "P0\tstep (/t.py:3);bwd (/t.py:9)\t"), 10 * s, "%s", out);
	cr_assert_eq(dump_sum(out, "P0\tstep (/t.py:3);matmul\t"), s, "%s", out);
	cr_assert_eq(dump_sum(out, "P0\t\t"), s, "%s", out);
}

Test(speedscope, long_run_merges_within_steps)
{
	cr_assert(
	    have_validator(),
	    "node or tests/node_modules missing (cd tests && npm install speedscope@1.25.0 ajv@8)");
	struct gs_profile p;
	long_run_profile(&p);
	char *out = write_long_run(&p, SIZE_MAX, "exact");
	cr_assert_not_null(strstr(out, "\tsamples=2002\ttotal=22000000000"), "%s", out);
	assert_totals(out);
	free(out);

	out = write_long_run(&p, 20000, "stepped");
	const char *n = strstr(out, "\tsamples=");
	cr_assert(n && strtoul(n + 9, NULL, 10) < 1000, "%s", out);
	cr_assert_not_null(strstr(out, "\ttotal=22000000000"), "%s", out);
	assert_totals(out);
	free(out);

	out = write_long_run(&p, 1, "whole");
	cr_assert_not_null(strstr(out, "\tsamples=4\ttotal=22000000000"), "%s", out);
	assert_totals(out);
	free(out);
	gs_profile_free(&p);
}

Test(speedscope, empty_profile_is_valid)
{
	cr_assert(have_validator(), "node or tests/node_modules missing");
	struct gs_profile p;
	gs_profile_init(&p);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/empty.speedscope.json", tmpdir);
	cr_assert_eq(gs_write_speedscope(&p, path, err, sizeof(err)), 0, "%s", err);
	int st;
	char *out = validate(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	free(out);
	gs_profile_free(&p);
}

Test(speedscope, json_escape)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "plain ascii", "plain ascii" },
		{ "q\"b\\n\nt\tc\x01\x1f", "q\\\"b\\\\n\\nt\\tc\\u0001\\u001f" },
		/* valid UTF-8 passes through: é € 😀 */
		{ "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" },
		/* invalid: lone 0xff, overlong '/', surrogate, > U+10FFFF, truncated */
		{ "a\xff"
		  "b",
		  "a\\ufffdb" },
		{ "\xc0\xaf", "\\ufffd\\ufffd" },
		{ "\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd" },
		{ "\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd" },
		{ "x\xe2\x82", "x\\ufffd\\ufffd" },
	};
	char out[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gs_json_escape_buf(cases[i].in, out, sizeof(out));
		cr_assert_str_eq(out, cases[i].want, "case %zu", i);
	}
	/* truncation never splits an escape */
	char small[8];
	gs_json_escape_buf("ab\x01", small, sizeof(small));
	cr_assert_str_eq(small, "ab");
}

/* Names with control characters and broken UTF-8 end up as valid JSON
 * whose strings decode to the expected text. */
Test(speedscope, hostile_names_parse)
{
	cr_assert(have_validator(), "node or tests/node_modules missing");
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function f = { .name = gs_profile_intern(&p, "we\"ird\\\x01name\xff\n"),
				 .file = gs_profile_intern(&p, "/tmp/\xe2\x82\xac.py") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f), .line = 3 };
	uint32_t loc = gs_profile_add_location(&p, 0, 0, GS_FRAME_PYTHON, &l, 1);
	struct gs_sample s = { .stack = (uint32_t)gs_profile_add_stack(&p, &loc, 1) };
	struct gs_sample_ctx s_c = { .pid = 1,
				     .tid = 1,
				     .cuda_device = -1,
				     .thread_name = gs_profile_intern(&p, "t\x7f\x80") };
	s.values[GS_V_SAMPLES] = 1;
	s.values[GS_V_CPU_NS] = 5;
	gs_profile_add_sample(&p, &s, &s_c);
	char path[128], err[256], cmd[512];
	snprintf(path, sizeof(path), "%s/hostile.speedscope.json", tmpdir);
	cr_assert_eq(gs_write_speedscope(&p, path, err, sizeof(err)), 0, "%s", err);
	int st;
	char *out = validate(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	free(out);
	snprintf(
	    cmd, sizeof(cmd),
	    "node -e 'const d=JSON.parse(require(\"fs\").readFileSync(process.argv[1],\"utf8\"));"
	    "console.log(JSON.stringify(d.shared.frames[0]))' %s",
	    path);
	out = fx_run(cmd, &st);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert_str_eq(
	    out, "{\"name\":\"we\\\"ird\\\\\\u0001name\xef\xbf\xbd\\n (/tmp/\xe2\x82\xac.py:3)\","
		 "\"file\":\"/tmp/\xe2\x82\xac.py\",\"line\":3}\n");
	free(out);
	gs_profile_free(&p);
}

Test(speedscope, chromium_imports_json_and_pprof, .timeout = 240)
{
	char cmd[1024], path[128], pb[128], err[256];
	struct fx x;
	write_fixture(&x, path, sizeof(path));
	snprintf(pb, sizeof(pb), "%s/fx.pb.gz", tmpdir);
	cr_assert_eq(gs_write_pprof(&x.p, pb, err, sizeof(err)), 0, "%s", err);
	viewer_imports(path, "speedscope json file");
	viewer_imports(pb, "protobuf encoded pprof file");
	/* and the checker itself fails on junk */
	int st;
	snprintf(
	    cmd, sizeof(cmd),
	    "echo junk > %s/junk.json && %s/tests/tools/speedscope_import.sh %s/junk.json 2>&1",
	    tmpdir, fx_root(), tmpdir);
	char *out = fx_run(cmd, &st);
	cr_assert_eq(st, 1, "junk must fail: %s", out);
	free(out);
	gs_profile_free(&x.p);
}

/* The long-run form loads in the real speedscope (headless Chromium). */
Test(speedscope, chromium_imports_long_run, .timeout = 240)
{
	char path[256];
	struct gs_profile p;
	long_run_profile(&p);
	free(write_long_run(&p, 20000, "stepped"));
	snprintf(path, sizeof(path), "%s/stepped.speedscope.json", tmpdir);
	viewer_imports(path, "speedscope json file");
	gs_profile_free(&p);
}

Test(speedscope, display_names)
{
	char b[256];
	cr_assert_str_eq(
	    gs_short_cxx_name("void matmul_kernel<float, 128>(float*, float const*, int)", b,
			      sizeof(b)),
	    "matmul_kernel");
	cr_assert_str_eq(
	    gs_short_cxx_name("at::native::addmm_out_cpu(at::Tensor const&, at::Tensor const&)", b,
			      sizeof(b)),
	    "at::native::addmm_out_cpu");
	cr_assert_str_eq(gs_short_cxx_name("at::Tensor::item() const", b, sizeof(b)),
			 "at::Tensor::item");
	cr_assert_str_eq(gs_short_cxx_name(
			     "void at::native::(anonymous namespace)::vectorized_elementwise_kernel"
			     "<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >"
			     "(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
			     b, sizeof(b)),
			 "at::native::(anonymous namespace)::vectorized_elementwise_kernel");
	cr_assert_str_eq(
	    gs_short_cxx_name("std::vector<int>::operator[](unsigned long)", b, sizeof(b)),
	    "std::vector::operator[]");
	cr_assert_str_eq(gs_short_cxx_name("operator new(unsigned long)", b, sizeof(b)),
			 "operator new");
	cr_assert_str_eq(gs_short_cxx_name("main", b, sizeof(b)), "main");
	cr_assert_str_eq(gs_short_cxx_name("[unknown python]", b, sizeof(b)), "[unknown python]");
	cr_assert_str_eq(gs_short_cxx_name("some name with spaces", b, sizeof(b)),
			 "some name with spaces");
	cr_assert_str_eq(gs_short_cxx_name("<module>", b, sizeof(b)), "<module>");
	cr_assert_str_eq(gs_short_path("/usr/lib/python3/dist-packages/torch/nn/modules/module.py"),
			 "torch/nn/modules/module.py");
	cr_assert_str_eq(gs_short_path("/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py"),
			 "threading.py");
	cr_assert_str_eq(gs_short_path("/home/u/train.py"), "/home/u/train.py");
}
