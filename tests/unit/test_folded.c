// SPDX-License-Identifier: MIT
/*
 * Folded stacks: escaping, exact content for the fixture, the format rules
 * flamegraph.pl / inferno / speedscope rely on (reference §4.1: one
 * "frame;...;frame COUNT" line per stack, integer counts, no empty frames),
 * and a speedscope import of gpu.folded.
 */
#include <criterion/criterion.h>
#include <regex.h>

#include "output/output.h"
#include "output_fixture.h"

FX_TMPDIR_SUITE(folded, "folded");

Test(folded, escape)
{
	char out[64];
	gs_folded_escape("a;b;c", out, sizeof(out));
	cr_assert_str_eq(out, "a:b:c");
	gs_folded_escape("line\nbreak\r\ttab", out, sizeof(out));
	cr_assert_str_eq(out, "line break  tab");
	gs_folded_escape("keeps spaces 123", out, sizeof(out));
	cr_assert_str_eq(out, "keeps spaces 123");
	gs_folded_escape("", out, sizeof(out));
	cr_assert_str_eq(out, "[unknown]");
	gs_folded_escape(NULL, out, sizeof(out));
	cr_assert_str_eq(out, "[unknown]");
	char small[4];
	gs_folded_escape("abcdef", small, sizeof(small));
	cr_assert_str_eq(small, "abc");
}

static char *write_kind(struct fx *x, enum gs_folded_kind k, const char *name)
{
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	cr_assert_eq(gs_write_folded(&x->p, k, path, err, sizeof(err)), 0, "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_not_null(s);
	return s;
}

/* Each line "frames COUNT" as speedscope's importer parses it; returns the
 * sum of the counts. */
static long check_format(const char *text)
{
	regex_t re;
	cr_assert_eq(regcomp(&re, "^(.*) ([0-9]+)$", REG_EXTENDED), 0);
	long sum = 0;
	char *copy = strdup(text), *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		regmatch_t m[3];
		cr_assert_eq(regexec(&re, line, 3, m, 0), 0, "bad line: %s", line);
		cr_assert_null(strstr(line, ";;"), "empty frame: %s", line);
		cr_assert_neq(line[0], ';', "empty root frame: %s", line);
		sum += atol(line + m[2].rm_so);
	}
	free(copy);
	regfree(&re);
	return sum;
}

/* Write the fixture as folded stacks of kind k; check the format, that the
 * counts add up to sum, and the exact text. */
static void expect_folded(enum gs_folded_kind k, long sum, const char *want)
{
	struct fx x;
	fx_build(&x);
	char *s = write_kind(&x, k, k == GS_FOLDED_CPU ? "cpu.folded" : "gpu.folded");
	cr_assert_eq(check_format(s), sum);
	cr_assert_str_eq(s, want);
	free(s);
	gs_profile_free(&x.p);
}

/* Counts are CPU samples, not ns; GPU samples stay out of cpu.folded. */
Test(folded, cpu_content)
{
	expect_folded(
	    GS_FOLDED_CPU, FX_SAMPLES,
	    "python3-1200;main;<module> (/home/u/train.py:10);train_step "
	    "(/home/u/train.py:22);cudaStreamSynchronize 2\n"
	    "python3-1200;main;<module> (/home/u/train.py:10);train_step (/home/u/train.py:20);"
	    "at::native::addmm_out_cpu(at::Tensor const&, at::Tensor const&);python3.11+0x4321 3\n"
	    "python3-1200;main;<module> (/home/u/train.py:10);_BaseDataLoaderIter.__next__ "
	    "(torch/utils/data/dataloader.py:630);"
	    "_MultiProcessingDataLoaderIter._next_data (torch/utils/data/dataloader.py:1320);"
	    "Queue.get (multiprocessing/queues.py:103);poll;do_syscall_64_[k] 5\n"
	    "pt_data_worker-1201;main;_worker_loop (torch/utils/data/_utils/worker.py:250);"
	    "MyDataset.__getitem__ (/home/u/data:set.py:33) 4\n"
	    "swapper/0-0;default_idle_[k] 1\n");
}

/* Counts are the base stall family only, never + gpu_samples_not_issued. */
Test(folded, gpu_content)
{
	expect_folded(
	    GS_FOLDED_GPU, FX_GPU,
	    "main;<module> (/home/u/train.py:10);train_step (/home/u/train.py:21);cudaLaunchKernel;"
	    "[GPU] matmul_kernel;load_tile;tile.cuh:42;[stall] long_scoreboard 120\n"
	    "main;<module> (/home/u/train.py:10);train_step (/home/u/train.py:21);cudaLaunchKernel;"
	    "[GPU] matmul_kernel;matmul.cu:43;[stall] selected 40\n"
	    "[unknown launch];[GPU] matmul_kernel;matmul.cu:43;[stall] long_scoreboard 10\n");
}

Test(folded, same_stack_aggregates_per_process)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function f = { .name = gs_profile_intern(&p, "work") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f) };
	uint32_t loc = gs_profile_add_location(&p, 0, 1, GS_FRAME_NATIVE, &l, 1);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	for (int i = 0; i < 6; i++) {
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = 10 + (i % 2),
					     .tid = 100 + i,
					     .thread_name = gs_profile_intern(&p, "w"),
					     .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = 1;
		gs_profile_add_sample(&p, &s, &s_c);
	}
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/agg.folded", tmpdir);
	cr_assert_eq(gs_write_folded(&p, GS_FOLDED_CPU, path, err, sizeof(err)), 0, "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_str_eq(s, "w-10;work 3\nw-11;work 3\n");
	free(s);
	gs_profile_free(&p);
}

/* wake.folded: blocked time whose waker was recorded, in microseconds,
 * "comm-pid;wakee root..leaf;--;waker leaf..root;role", one line per
 * (process, stack, waker); waits without a waker stay out. */
Test(folded, wake_content)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function f = { .name = gs_profile_intern(&p, "poll") },
			   g = { .name = gs_profile_intern(&p, "next") };
	struct gs_line l[2] = { { .function = gs_profile_add_function(&p, &f) },
				{ .function = gs_profile_add_function(&p, &g) } };
	uint32_t locs[2] = { gs_profile_add_location(&p, 0, 1, GS_FRAME_NATIVE, &l[0], 1),
			     gs_profile_add_location(&p, 0, 2, GS_FRAME_NATIVE, &l[1], 1) };
	int64_t st = gs_profile_add_stack(&p, locs, 2);
	const char *text[] = { "loop (w.py:1);decode (w.py:9)", "loop (w.py:1);decode (w.py:9)",
			       "hrtimer_wakeup", NULL };
	const char *role[] = { "dataloader_worker", "dataloader_worker", "timer", NULL };
	for (int i = 0; i < 4; i++) {
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = 10,
					     .tid = 10,
					     .thread_name = gs_profile_intern(&p, "py"),
					     .cuda_device = -1 };
		s_c.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(&p, "blocked");
		s_c.str_labels[GS_SL_WAKER] = gs_profile_intern(&p, text[i]);
		s_c.str_labels[GS_SL_WAKER_ROLE] = gs_profile_intern(&p, role[i]);
		s.values[GS_V_OFFCPU_NS] = 2000000 + i * 1000;
		gs_profile_add_sample(&p, &s, &s_c);
	}
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/wake.folded", tmpdir);
	cr_assert_eq(gs_write_folded(&p, GS_FOLDED_WAKE, path, err, sizeof(err)), 0, "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_str_eq(s,
			 "py-10;next;poll;--;decode (w.py:9);loop (w.py:1);dataloader_worker 4001\n"
			 "py-10;next;poll;--;hrtimer_wakeup;timer 2002\n");
	cr_assert_eq(check_format(s), 6003);
	free(s);
	gs_profile_free(&p);
}

/* One function and line at two return addresses are two model stacks that
 * print the same: one folded line with the summed count. */
Test(folded, printed_duplicates_merge)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function f = { .name = gs_profile_intern(&p, "work") };
	struct gs_function m = { .name = gs_profile_intern(&p, "main") };
	struct gs_line lf = { .function = gs_profile_add_function(&p, &f), .line = 7 };
	struct gs_line lm = { .function = gs_profile_add_function(&p, &m), .line = 3 };
	uint32_t root = gs_profile_add_location(&p, 0, 0x100, GS_FRAME_NATIVE, &lm, 1);
	for (int i = 0; i < 4; i++) {
		uint32_t leaf = gs_profile_add_location(&p, 0, 0x200 + (uint64_t)i, GS_FRAME_NATIVE,
							&lf, 1);
		uint32_t locs[2] = { leaf, root };
		int64_t st = gs_profile_add_stack(&p, locs, 2);
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = 10,
					     .tid = 10,
					     .thread_name = gs_profile_intern(&p, "w"),
					     .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = i + 1;
		gs_profile_add_sample(&p, &s, &s_c);
	}
	cr_assert_eq(p.n_stacks, 4);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/printed.folded", tmpdir);
	cr_assert_eq(gs_write_folded(&p, GS_FOLDED_CPU, path, err, sizeof(err)), 0, "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_str_eq(s, "w-10;main;work 10\n");
	free(s);
	gs_profile_free(&p);
}

Test(folded, speedscope_imports_it, .timeout = 120)
{
	struct fx x;
	fx_build(&x);
	free(write_kind(&x, GS_FOLDED_GPU, "gpu.folded"));
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s/tests/tools/speedscope_import.sh %s/gpu.folded 2>&1",
		 fx_root(), tmpdir);
	int st;
	char *out = fx_run(cmd, &st);
	if (st == 77)
		cr_skip_test("%s", out);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert_not_null(strstr(out, "Importing as collapsed stack format"), "%s", out);
	free(out);
	gs_profile_free(&x.p);
}
