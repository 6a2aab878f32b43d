// SPDX-License-Identifier: MIT
/*
 * Chrome trace-event JSON (output/trace.c): the format rules its readers
 * rely on (tests/tools/check_trace.js), state slices with their stacks
 * nested on the wall-clock axis, names, GPU batches, the event cap, and a
 * headless Chromium import through speedscope's trace importer.
 */
#include <criterion/criterion.h>

#include "output/output.h"
#include "viewer_fixture.h"

FX_TMPDIR_SUITE(trace, "tr");

static char *check(const char *path, int *st)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "node %s/tests/tools/check_trace.js %s --dump 2>&1", fx_root(),
		 path);
	return fx_run(cmd, st);
}

/* Write p as tmpdir/NAME, check it, return the dump (the check passed). */
static char *write_checked(const struct gs_profile *p, const char *name)
{
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	cr_assert_eq(gs_write_trace(p, path, err, sizeof(err)), 0, "%s", err);
	int st;
	char *out = check(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	return out;
}

static void write_fx(struct fx *x, char *path, size_t len, size_t cap)
{
	fx_build(x);
	fx_add_offcpu(x);
	snprintf(path, len, "%s/fx.trace.json", tmpdir);
	char err[256];
	cr_assert_eq(gs_write_trace_capped(&x->p, path, cap, err, sizeof(err)), 0, "%s", err);
}

/* The fixture (with off-CPU data) as a trace capped at cap events, checked
 * (the check must pass); returns the dump. */
static char *fx_checked(struct fx *x, size_t cap)
{
	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	char path[128];
	write_fx(x, path, sizeof(path), cap);
	int st;
	char *out = check(path, &st);
	cr_assert_eq(st, 0, "%s", out);
	return out;
}

#define HAS(s, needle) \
	cr_assert_not_null(strstr((s), (needle)), "missing \"%s\" in:\n%s", (needle), (s))

Test(trace, states_stacks_names_gpu)
{
	struct fx x;
	char path[128];
	char *out = fx_checked(&x, GS_TRACE_MAX_EVENTS);
	snprintf(path, sizeof(path), "%s/fx.trace.json", tmpdir);
	HAS(out, "dropped=0");
	/* names: main process first */
	HAS(out, "M 1200 0 process_name python3 (main)\nM 1200 0 process_sort_index 0\n");
	HAS(out, "M 1201 0 process_name pt_data_worker (dataloader)");
	HAS(out, "M 1200 1200 thread_name python3");
	HAS(out, "M 1200 1073741824 thread_name GPU0 PC samples");
	/* the thread tiles its wall time: starved, compute (three ticks are one
	 * slice, centred on 100-120 ms, its stack nested, root outermost),
	 * blocked under the DataLoader waiting in poll, ... */
	HAS(out, "S 1200 1200 runnable 0 95000 CPU starvation\n");
	HAS(out, "S 1200 1200 running 95000 30000 compute\n"
		 "F 1200 1200 1 <module> (/home/u/train.py:10) 95000 30000\n"
		 "F 1200 1200 2 train_step (/home/u/train.py:20) 95000 30000\n"
		 "F 1200 1200 3 at::native::addmm_out_cpu(at::Tensor const&, at::Tensor const&) "
		 "95000 30000\n"
		 "F 1200 1200 4 python3.11+0x4321 95000 30000\n");
	HAS(out, "S 1200 1200 blocked 125000 150000 input wait poll\n");
	HAS(out, "S 1200 1200 running 295000 50000 input wait\n");
	HAS(out, "S 1200 1200 blocked 345000 450000 input wait poll\n");
	HAS(out, "S 1200 1200 running 795000 20000 CUDA sync\n");
	HAS(out, "S 1200 1200 blocked 900000 100000 CUDA sync cudaStreamSynchronize\n"
		 "F 1200 1200 1 <module> (/home/u/train.py:10) 900000 100000\n");
	HAS(out, "S 1201 1201 runnable 285000 10000 CPU starvation\n");
	/* GPU batches as instants */
	HAS(out, "I 1200 1073741824 [GPU] matmul_kernel 900000 120\n");
	free(out);
	char *json = fx_read_file(path, NULL);
	HAS(json, "\"launch_site\":\"train_step (/home/u/train.py:21)\"");
	HAS(json, "\"displayTimeUnit\":\"ms\"");
	free(json);
	gs_profile_free(&x.p);
}

Test(trace, cap_drops_and_says_so)
{
	struct fx x;
	char *out = fx_checked(&x, 12);
	HAS(out, "VALID events=12 ");
	cr_assert_null(strstr(out, "dropped=0"), "%s", out);
	HAS(out, "NOTE event cap reached");
	free(out);
	gs_profile_free(&x.p);
}

/* Over the cap, stacks are cut to the deepest depth that fits first. */
Test(trace, cap_cuts_stack_depth_first)
{
	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	struct fx x;
	char path[128];
	char *out = fx_checked(&x, GS_TRACE_MAX_EVENTS);
	unsigned full = 0, cut = 0;
	cr_assert_eq(sscanf(strstr(out, "VALID events="), "VALID events=%u", &full), 1, "%s", out);
	free(out);
	gs_profile_free(&x.p);
	out = fx_checked(&x, full - 1);
	snprintf(path, sizeof(path), "%s/fx.trace.json", tmpdir);
	HAS(out, "dropped=0");
	HAS(out, "NOTE event cap: stacks cut to stack_depth frames");
	cr_assert_eq(sscanf(strstr(out, "VALID events="), "VALID events=%u", &cut), 1);
	cr_assert_lt(cut, full);
	cr_assert_null(strstr(out, "F 1200 1200 5 "), "depth 4 at most:\n%s", out);
	HAS(out, "F 1200 1200 4 ");
	free(out);
	char *json = fx_read_file(path, NULL), cap[64];
	HAS(json, "\"stack_depth\":4");
	snprintf(cap, sizeof(cap), "\"max_events\":%u,", full - 1);
	HAS(json, cap); /* the cap in force is in the file */
	free(json);
	gs_profile_free(&x.p);
}

/* Counter points become "C" events on the process's track, in microseconds
 * on the slices' grid, counted against the cap like any event. */
Test(trace, counter_tracks)
{
	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	struct fx x;
	fx_build(&x);
	unsigned with = 0, without = 0;
	char *out = write_checked(&x.p, "nocounter.trace.json");
	cr_assert_eq(sscanf(strstr(out, "VALID events="), "VALID events=%u", &without), 1, "%s",
		     out);
	free(out);
	cr_assert_eq(gs_profile_add_counter(&x.p, 1200, "GPU memory", 100000030, 2097152), 0);
	cr_assert_eq(gs_profile_add_counter(&x.p, 1200, "GPU memory", 150000000, 23068672), 0);
	cr_assert_eq(gs_profile_add_counter(&x.p, 1200, "GPU memory", 180000000, 0), 0);
	out = write_checked(&x.p, "counter.trace.json");
	HAS(out, "dropped=0");
	HAS(out, "C 1200 GPU memory 100000 bytes=2097152\n"
		 "C 1200 GPU memory 150000 bytes=23068672\n"
		 "C 1200 GPU memory 180000 bytes=0\n");
	cr_assert_eq(sscanf(strstr(out, "VALID events="), "VALID events=%u", &with), 1, "%s", out);
	cr_assert_eq(with, without + 3, "%s", out);
	free(out);
	gs_profile_free(&x.p);
}

Test(trace, empty_profile_is_valid)
{
	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	struct gs_profile p;
	gs_profile_init(&p);
	char *out = write_checked(&p, "empty.trace.json");
	HAS(out, "VALID events=0 threads=0 dropped=0");
	free(out);
	gs_profile_free(&p);
}

/* Names with quotes, control bytes and invalid UTF-8 stay valid JSON. */
Test(trace, hostile_names_parse)
{
	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	struct gs_profile p;
	gs_profile_init(&p);
	p.period_ns = FX_PERIOD;
	uint32_t m = fx_map(&p, "[python]", NULL, 0, 0, true);
	uint32_t l = fx_loc(&p, m, 0, GS_FRAME_PYTHON,
			    fx_fn(&p, "we\"ird\\\x01\xff", NULL, "/t/\n.py", 1), 3);
	fx_samples(&p, &l, 1, 2, 5, 5, "c\"o\x02mm", "main", 0, FX_PERIOD);
	char *out = write_checked(&p, "hostile.trace.json");
	HAS(out, "M 5 5 thread_name c\"o\x02mm");
	free(out);
	gs_profile_free(&p);
}

/* speedscope's Chrome-trace importer in headless Chromium, and the
 * wall-clock speedscope file of the same profile. */
Test(trace, chromium_imports_trace_and_wall_speedscope, .timeout = 240)
{
	char path[128], ss[128], err[256];
	struct fx x;
	write_fx(&x, path, sizeof(path), GS_TRACE_MAX_EVENTS);
	snprintf(ss, sizeof(ss), "%s/fx.speedscope.json", tmpdir);
	cr_assert_eq(gs_write_speedscope(&x.p, ss, err, sizeof(err)), 0, "%s", err);
	viewer_imports(path, "Trace Event Format profile");
	viewer_imports(ss, "speedscope json file");
	gs_profile_free(&x.p);
}
