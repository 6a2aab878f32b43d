// SPDX-License-Identifier: MIT
/* Terminal report: sections, numbers, the where-the-time-goes heuristics,
 * and the same report from a pprof file read back. */
#include <criterion/criterion.h>

#include "output/output.h"
#include "output_fixture.h"

static char *report(const struct gs_profile *p, unsigned top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct gs_report_opts o = {.top = top};
	cr_assert_eq(gs_write_report(p, &o, f), 0);
	fclose(f);
	return buf;
}

#define HAS(s, needle) cr_assert_not_null(strstr((s), (needle)), "missing \"%s\" in:\n%s", (needle), (s))

Test(report, sections_and_numbers)
{
	struct fx x;
	fx_build(&x);
	char *r = report(&x.p, 15);
	HAS(r, "duration 1.00 s, 100 Hz, 15 CPU samples, 7 lost, 170 GPU PC samples, 2 processes");
	HAS(r, "Top functions by self CPU");
	HAS(r, "        5  33.3%       5  33.3%  do_syscall_64 [kernel]");
	HAS(r, "        3  20.0%       3  20.0%  python3.11+0x4321");
	HAS(r, "Top functions by total CPU");
	HAS(r, "        0   0.0%      14  93.3%  main");
	HAS(r, "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:626)");
	HAS(r, "at::native::addmm_out_cpu\n");
	HAS(r, "     1200 python3          main              10  66.7%  CPython 3.11.2   agent armed, PC sampling on GPU0");
	HAS(r, "     1201 pt_data_worker   dataloader         4  26.7%  CPython 3.11.2   - (exited)");
	HAS(r, "     1200    1200 python3          main              10  66.7%");
	HAS(r, "  - python: 1 frame could not be read (test note)");
	HAS(r, "GPU: 170 PC samples (110 not issued)");
	HAS(r, "stall reasons: long_scoreboard 76.5%, selected 23.5%");
	HAS(r, "       170 100.0%  matmul_kernel\n");
	HAS(r, "stalls: long_scoreboard 76%, selected 24%");
	HAS(r, "hottest lines: tile.cuh:42 71%, matmul.cu:43 29%");
	HAS(r, "launched from:  94%  train_step (/home/u/train.py:21) <- <module> (/home/u/train.py:10)");
	HAS(r, " 6%  no Python frame (native caller)");
	HAS(r, "main thread (python3 pid 1200): 100.0 ms sampled of 1.00 s");
	HAS(r, "CPU compute                  3.0%");
	HAS(r, "input wait (DataLoader)      5.0%");
	HAS(r, "GPU sync                     2.0%");
	HAS(r, "off-CPU, not sampled        90.0%");
	HAS(r, "DataLoader workers (1 process): 40.0 ms on-CPU, 4% busy on average");
	HAS(r, "GPU compute: 170 PC samples; top kernel matmul_kernel; top stall long_scoreboard (76%)");
	HAS(r, "Verdict: The main thread is mostly off-CPU (blocked), and its on-CPU samples point at the input pipeline");
	free(r);
	gs_profile_free(&x.p);
}

Test(report, top_limits_rows)
{
	struct fx x;
	fx_build(&x);
	char *r = report(&x.p, 2);
	cr_assert_null(strstr(r, "default_idle"), "only 2 rows per table:\n%s", r);
	HAS(r, "... 1 more threads");
	free(r);
	gs_profile_free(&x.p);
}

Test(report, verdict_input_when_fully_sampled)
{
	struct fx x;
	fx_build(&x);
	x.p.duration_nanos = 0; /* unknown wall time: shares of what was sampled */
	char *r = report(&x.p, 15);
	HAS(r, "CPU compute                 30.0%");
	HAS(r, "input wait (DataLoader)     50.0%");
	HAS(r, "GPU sync                    20.0%");
	HAS(r, "Verdict: The main thread mostly waits for input batches");
	free(r);
	gs_profile_free(&x.p);
}

/* .item() (native at::Tensor::item) under a training step is sync, even
 * with a DataLoader frame further up; __next__ outside torch.utils.data is
 * not input. */
Test(report, markers_leaf_most_wins)
{
	struct gs_profile p;
	gs_profile_init(&p);
	p.frequency_hz = 100;
	p.period_ns = FX_PERIOD;
	struct gs_mapping m = {.file = gs_profile_intern(&p, "[python]")};
	uint32_t mid = gs_profile_add_mapping(&p, &m);
	uint32_t f_next = fx_fn(&p, "_BaseDataLoaderIter.__next__", NULL,
				"/x/site-packages/torch/utils/data/dataloader.py", 1);
	uint32_t f_item = fx_fn(&p, "at::Tensor::item() const", NULL, NULL, 0);
	uint32_t f_mynext = fx_fn(&p, "MyIter.__next__", NULL, "/home/u/it.py", 1);
	uint32_t l_next = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_next, 5);
	uint32_t l_item = fx_loc(&p, 0, 0x10, GS_FRAME_NATIVE, f_item, 0);
	uint32_t l_mynext = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_mynext, 3);
	uint32_t a[] = {l_next, l_item};
	fx_samples(&p, a, 2, 7, 50, 50, "python3", "main", 0, 1);
	uint32_t b[] = {l_mynext};
	fx_samples(&p, b, 1, 3, 50, 50, "python3", "main", 0, 1);
	struct gs_process pr = {.pid = 50, .comm = gs_profile_intern(&p, "python3"),
				.role = gs_profile_intern(&p, "main")};
	gs_profile_add_process(&p, &pr);
	char *r = report(&p, 15);
	HAS(r, "CPU compute                 30.0%");
	HAS(r, "input wait (DataLoader)      0.0%");
	HAS(r, "GPU sync                    70.0%");
	HAS(r, "Verdict: The main thread mostly waits for the GPU");
	cr_assert_null(strstr(r, "GPU: "), "no GPU section without GPU samples");
	free(r);
	gs_profile_free(&p);
}

Test(report, same_report_from_pprof_file)
{
	struct fx x;
	fx_build(&x);
	char dir[] = "/tmp/gs-report-XXXXXX", path[128], err[256];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.pb.gz", dir);
	cr_assert_eq(gs_write_pprof(&x.p, path, err, sizeof(err)), 0, "%s", err);
	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	char *a = report(&x.p, 15), *b = report(&r, 15);
	cr_assert_str_eq(a, b);
	free(a);
	free(b);
	gs_profile_free(&r);
	gs_profile_free(&x.p);
	unlink(path);
	rmdir(dir);
}

Test(report, empty_profile)
{
	struct gs_profile p;
	gs_profile_init(&p);
	char *r = report(&p, 15);
	HAS(r, "0 CPU samples");
	HAS(r, "No CPU samples from the main thread");
	free(r);
	gs_profile_free(&p);
}

/* torch does not rename DataLoader workers: a process running
 * torch.utils.data's _worker_loop is a worker whatever its role label. */
Test(report, workers_found_by_stack)
{
	struct gs_profile p;
	gs_profile_init(&p);
	p.period_ns = FX_PERIOD;
	p.duration_nanos = 1000000000ULL;
	struct gs_mapping m = {.file = gs_profile_intern(&p, "[python]")};
	uint32_t mid = gs_profile_add_mapping(&p, &m);
	uint32_t f_loop = fx_fn(&p, "_worker_loop", NULL, "/x/dist-packages/torch/utils/data/_utils/worker.py", 200);
	uint32_t f_main = fx_fn(&p, "<module>", NULL, "/home/u/train.py", 1);
	uint32_t l_loop = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_loop, 250);
	uint32_t l_main = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_main, 3);
	uint32_t a[] = {l_main, l_loop};
	fx_samples(&p, a, 2, 20, 61, 61, "python3", "other", 0, 1);
	fx_samples(&p, a, 2, 30, 62, 62, "python3", "other", 0, 1);
	uint32_t b[] = {l_main};
	fx_samples(&p, b, 1, 10, 60, 60, "python3", "main", 0, 1);
	fx_samples(&p, b, 1, 5, 63, 63, "python3", "other", 0, 1); /* not a worker */
	char *r = report(&p, 15);
	HAS(r, "DataLoader workers (2 processes): 500.0 ms on-CPU, 25% busy on average");
	free(r);
	gs_profile_free(&p);
}
