// SPDX-License-Identifier: MIT
/* Terminal report: sections, numbers, "where the time goes" (wall-clock
 * splits per main thread and rank, workers, verdicts), and the same report
 * from a pprof file read back. */
#include <criterion/criterion.h>

#include "output/output.h"
#include "output_fixture.h"

static char *report(const struct gs_profile *p, unsigned top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct gs_report_opts o = { .top = top };
	cr_assert_eq(gs_write_report(p, &o, f), 0);
	fclose(f);
	return buf;
}

/* An empty profile at FX_PERIOD with a [python] mapping (its id). */
static uint32_t py_profile(struct gs_profile *p, uint64_t duration_ns)
{
	gs_profile_init(p);
	p->period_ns = FX_PERIOD;
	p->duration_nanos = duration_ns;
	struct gs_mapping m = { .file = gs_profile_intern(p, "[python]") };
	return gs_profile_add_mapping(p, &m);
}

#define HAS(s, needle) \
	cr_assert_not_null(strstr((s), (needle)), "missing \"%s\" in:\n%s", (needle), (s))

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
	/* the interpreter's start-up frame (python3.11's main, root-ward of
	 * every Python frame) is no row, nor is the script's module (plumbing);
	 * a Python function is named at its hottest line, with that line's
	 * share when other lines have some */
	cr_assert_null(strstr(r, "%  main\n"), "start-up frame listed:\n%s", r);
	cr_assert(strstr(r, "<module>") > strstr(r, "\nProcesses"), "<module> listed:\n%s", r);
	HAS(r, "        0   0.0%       5  33.3%  train_step (/home/u/train.py:20, 60%)\n");
	HAS(r, "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:630)\n");
	HAS(r, "at::native::addmm_out_cpu\n");
	HAS(r, "     1200 python3          main              10  66.7%  CPython 3.11.2   agent "
	       "armed, PC sampling on GPU0");
	HAS(r,
	    "     1201 pt_data_worker   dataloader         4  26.7%  CPython 3.11.2   - (exited) "
	    "(pid 7 in its namespace)\n");
	HAS(r, "     1200    1200 python3          main              10  66.7%");
	HAS(r, "  - python: 1 frame could not be read (test note)");
	HAS(r, "GPU: 170 PC samples (110 not issued)");
	HAS(r, "stall reasons: long_scoreboard 76.5%, selected 23.5%");
	HAS(r, "       170 100.0%  matmul_kernel\n");
	HAS(r, "stalls: long_scoreboard 76%, selected 24%");
	HAS(r, "hottest lines: tile.cuh:42 71%, matmul.cu:43 29%");
	HAS(r, "launched from:  94%  train_step (/home/u/train.py:21) <- <module> "
	       "(/home/u/train.py:10)");
	HAS(r, " 6%  no Python frame (native caller)");
	/* no off-CPU samples: an on-CPU-only split that says so */
	HAS(r, "main thread (python3 pid 1200): 0.10 s on-CPU of 1.00 s; on-CPU only: this profile "
	       "has no "
	       "off-CPU data (--no-offcpu or an older gpusample), so waits do not show");
	HAS(r, "    compute             0.03 s  30.0%  <module> (train.py:10) > train_step "
	       "(train.py:20) > "
	       "python3.11+0x4321\n");
	HAS(r, "    input wait          0.05 s  50.0%  _BaseDataLoaderIter.__next__ "
	       "(dataloader.py:630) > "
	       "_MultiProcessingDataLoaderIter._next_data (dataloader.py:1320) > Queue.get "
	       "(queues.py:103) > "
	       "poll\n");
	HAS(r, "    CUDA sync           0.02 s  20.0%  <module> (train.py:10) > train_step "
	       "(train.py:22) > "
	       "cudaStreamSynchronize\n");
	HAS(r, "DataLoader workers (1 process): 0.04 s on-CPU, 4% busy on average (on-CPU only)");
	HAS(r, "GPU compute: 170 PC samples; top kernel matmul_kernel; top stall long_scoreboard "
	       "(76%)");
	HAS(r, "Verdict: on-CPU only (no off-CPU data, waits do not show; run without --no-offcpu "
	       "for a "
	       "wall-clock verdict): of its on-CPU time 50% (0.05 s) is input wait.");
	cr_assert_null(strstr(r, "not sampled"), "the old misleading row is gone:\n%s", r);
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

/* With off-CPU data the split is wall-clock and sums to 100%; the verdict
 * names the dominant category with its number and the remedy. */
Test(report, wall_clock_split_and_verdict)
{
	struct fx x;
	fx_build(&x);
	fx_add_offcpu(&x);
	char *r = report(&x.p, 15);
	HAS(r, "main thread (python3 pid 1200): 1.00 s of wall time (profile 1.00 s)\n");
	HAS(r, "    compute             0.03 s   3.0%  <module> (train.py:10) > train_step "
	       "(train.py:20)");
	HAS(r, "    input wait          0.65 s  65.0%  _BaseDataLoaderIter.__next__ "
	       "(dataloader.py:630) > ");
	HAS(r, "    CUDA sync           0.12 s  12.0%  <module> (train.py:10) > train_step "
	       "(train.py:22) > "
	       "cudaStreamSynchronize\n");
	HAS(r, "    CPU starvation      0.20 s  20.0%  <module> (train.py:10) > train_step "
	       "(train.py:20)");
	HAS(r, " > python3.11+0x4321\n      while in: compute 20.0%\n");
	HAS(r, "DataLoader workers (1 process): busy 40.0% (0.04 s on-CPU), blocked 50.0%, starved "
	       "10.0% "
	       "(runnable, waiting for a CPU)");
	/* from the evidence: the workers mostly blocked, their hot code named;
	 * a CUDA job (GPU samples): pin_memory; created once: no
	 * persistent_workers */
	HAS(r, "Verdict: input wait 65% of the main thread's wall time (0.65 s): input-bound: it "
	       "waits for DataLoader batches; its 1 DataLoader worker process: busy 40%, blocked "
	       "50%, starved 10% (waiting for a CPU); their CPU goes to MyDataset.__getitem__ "
	       "(data;set.py:33) (100%); they are mostly blocked (reading files, queues): more "
	       "workers overlap that wait: raise num_workers; make MyDataset.__getitem__ cheaper; "
	       "set pin_memory=True.\n");
	cr_assert_null(strstr(r, "persistent_workers"), "%s", r);
	HAS(r, "  Next: CPU starvation 20%.");
	cr_assert_null(strstr(r, "on-CPU only"), "%s", r);
	free(r);
	/* a category under 5 ms is no row: "0.00 s" says nothing */
	fx_offcpu(&x.p, FX_ST_CPU(&x.p), 1200, 1200, "python3", "main", "blocked", 0, 3000000);
	r = report(&x.p, 15);
	HAS(r, "    input wait          0.65 s  64.8%");
	cr_assert_null(strstr(r, " 0.00 s "), "a 0.00 s row:\n%s", r);
	free(r);
	gs_profile_free(&x.p);
}

/* `report a b` of two runs an hour apart: the duration is the time they
 * ran (1 s + 2 s), not the gap from the first start to the last end; runs
 * that overlap (the ranks of one job) keep their union. */
Test(report, separate_runs_sum_durations)
{
	struct fx a, b, c;
	struct gs_profile m;
	char err[256];

	struct fx *runs[] = { &a, &b, &c };
	for (int i = 0; i < 3; i++) {
		fx_build(runs[i]);
		gs_profile_add_comment(&runs[i]->p, "gpusample 0.1.0");
	}
	b.p.time_nanos = a.p.time_nanos + 3600000000000ULL;
	b.p.duration_nanos = 2000000000ULL;
	c.p.time_nanos = b.p.time_nanos + 1500000000ULL; /* overlaps b by 0.5 s */
	gs_profile_init(&m);
	cr_assert_eq(gs_profile_merge(&m, &a.p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_profile_merge(&m, &b.p, err, sizeof(err)), 0, "%s", err);
	char *r = report(&m, 15);
	HAS(r, "duration 3.00 s,");
	free(r);
	cr_assert_eq(gs_profile_merge(&m, &c.p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(m.duration_nanos, 3500000000ULL);
	cr_assert_eq(m.time_nanos, a.p.time_nanos);
	gs_profile_free(&m);
	gs_profile_free(&a.p);
	gs_profile_free(&b.p);
	gs_profile_free(&c.p);
}

/* Workers that wait for a CPU on a machine without a free core: more
 * workers will not help; a job without CUDA is not told to pin memory. */
Test(report, input_bound_workers_starved)
{
	struct fx x;
	const uint64_t ms = 1000000;
	fx_build(&x);
	fx_add_offcpu(&x);
	fx_offcpu(&x.p, FX_ST_WORKER(&x.p), 1201, 1201, "pt_data_worker", "dataloader", "runnable",
		  300 * ms, 200 * ms);
	gs_profile_add_comment(&x.p, "machine CPU: 2 CPUs; outside the job 1.50 cores over 1.00 s "
				     "(cc1 1.50 (4 processes; most pid 9: cc1))");
	/* no GPU: the fixture's GPU samples, agent states and sync time go */
	size_t kept = 0;
	for (size_t i = 0; i < x.p.n_samples; i++)
		if (gs_profile_ctx(&x.p, &x.p.samples[i])->cuda_device < 0 &&
		    gs_wall_classify(&x.p, &x.p.samples[i]) != GS_WALL_CUDA_SYNC)
			x.p.samples[kept++] = x.p.samples[i];
	x.p.n_samples = kept;
	for (uint32_t i = 0; i < x.p.n_processes; i++)
		x.p.processes[i].gpu = 0;
	char *r = report(&x.p, 15);
	HAS(r, "starved 70% (waiting for a CPU); their CPU goes to MyDataset.__getitem__ "
	       "(data;set.py:33) (100%); more workers will not help: they wait for a CPU; make "
	       "MyDataset.__getitem__ cheaper or give the job more cores.\n");
	cr_assert_null(strstr(r, "pin_memory"), "%s", r);
	cr_assert_null(strstr(r, "raise num_workers"), "%s", r);
	gs_profile_free(&x.p);
	free(r);
}

/* A job oversubscribing its cores whose main process runs no intra-op
 * pool (torch.set_num_threads(1) already): not told to lower it. */
Test(report, thread_advice_only_for_settings_not_made)
{
	struct fx x;
	char *r, *v;

	fx_build(&x);
	fx_offcpu(&x.p, FX_ST_CPU(&x.p), 1200, 1200, "python3", "main", "runnable", 0, 900000000);
	fx_offcpu(&x.p, FX_ST_WORKER(&x.p), 1201, 1201, "pt_data_worker", "dataloader", "runnable",
		  0, 900000000);
	gs_profile_add_comment(&x.p, "machine CPU: 1 CPUs; outside the job 0.00 cores over 1.00 s "
				     "()");
	r = report(&x.p, 15);
	HAS(r, "the job oversubscribes its cores");
	HAS(r, "use fewer threads/processes than cores: fewer DataLoader workers (num_workers: 1 "
	       "seen; the main process already computes on one thread) or more cores.\n");
	v = strstr(r, "Verdict:");
	cr_assert_null(strstr(v, "torch.set_num_threads"), "%s", v);
	free(r);
	gs_profile_free(&x.p);
}

/* CPU starvation names who took the cores wherever it is listed, not only
 * as the verdict: its row in the split and the "Next:" line. */
Test(report, starvation_names_who_took_the_cores)
{
	struct fx x;
	fx_build(&x);
	fx_add_offcpu(&x);
	gs_profile_add_comment(&x.p, "machine CPU: 2 CPUs; outside the job 0.80 cores over 1.00 s "
				     "(gsburner 0.80 (2 processes; most pid 77: ./gsburner -q))");
	char *r = report(&x.p, 15);
	HAS(r, "      taken by: other processes took 0.80 of the 2 cores: gsburner 0.80 (2 "
	       "processes; most pid 77: ./gsburner -q)\n");
	HAS(r, "  Next: CPU starvation 20%: other processes took 0.80 of the 2 cores: gsburner "
	       "0.80 (2 processes; most pid 77: ./gsburner -q).\n");
	free(r);
	gs_profile_free(&x.p);
	/* nobody outside: the job's own threads took them */
	fx_build(&x);
	fx_add_offcpu(&x);
	gs_profile_add_comment(&x.p, "machine CPU: 2 CPUs; outside the job 0.01 cores over 1.00 s "
				     "(cron 0.01 (pid 5: cron))");
	r = report(&x.p, 15);
	HAS(r, "      taken by: the job's own ");
	HAS(r, "  Next: CPU starvation 20%: the job's own ");
	free(r);
	gs_profile_free(&x.p);
}

/* A thread that waits for a CPU is starved, never "blocked". */
Test(report, starved_is_not_blocked)
{
	struct fx x;
	fx_build(&x);
	fx_offcpu(&x.p, FX_ST_CPU(&x.p), 1200, 1200, "python3", "main", "runnable", 0, 900000000);
	char *r = report(&x.p, 15);
	HAS(r, "    CPU starvation      0.90 s  90.0%");
	HAS(r, "Verdict: CPU starvation 90% of the main thread's wall time (0.90 s): CPU-starved: "
	       "it is "
	       "runnable but waits for a CPU (not blocked); the machine runs more busy threads "
	       "than it "
	       "has cores: use fewer threads/processes than cores (torch.set_num_threads");
	char *v = strstr(r, "Verdict:");
	cr_assert_null(strstr(v, "is blocked"), "%s", v);
	cr_assert_null(strstr(v, "mostly blocked"), "%s", v);
	free(r);
	gs_profile_free(&x.p);
}

/* A 1 s profile with a training step's locations, root first: a = step >
 * all_reduce (a collective wait), b = step alone. */
static void ddp_locs(struct gs_profile *p, uint32_t a[2], uint32_t b[1])
{
	uint32_t mid = py_profile(p, 1000000000ULL);
	uint32_t f_ar = fx_fn(p, "all_reduce", NULL,
			      "/x/dist-packages/torch/distributed/distributed_c10d.py", 1);
	uint32_t f_step = fx_fn(p, "step", NULL, "/home/u/ddp.py", 1);

	a[0] = b[0] = fx_loc(p, mid, 0, GS_FRAME_PYTHON, f_step, 3);
	a[1] = fx_loc(p, mid, 0, GS_FRAME_PYTHON, f_ar, 9);
}

/* A wait's waker labels (session/wakers.c) give "woken by" lines under
 * its category: share of that wait, role, frames root first; under 5% no
 * line. */
static void waker_labels(struct gs_sample_ctx *c, void *arg)
{
	struct gs_profile *p = arg;
	static int n;

	c->str_labels[GS_SL_WAKER_ROLE] = gs_profile_intern(p, n ? "timer" : "dataloader_worker");
	c->str_labels[GS_SL_WAKER] = gs_profile_intern(p, n ? "hrtimer_wakeup"
							    : "loop (w.py:1);decode (w.py:9)");
	n++;
}

static bool offcpu_sample(const struct gs_sample *s, const struct gs_sample_ctx *c, void *arg)
{
	return s->values[GS_V_OFFCPU_NS] > 0;
}

Test(report, woken_by_lines)
{
	struct gs_profile p;
	uint32_t a[2], b[1];
	ddp_locs(&p, a, b);
	fx_samples(&p, b, 1, 10, 70, 70, "python3", "main", 0, 1);
	uint32_t st_ar = p.samples[0].stack + 1; /* added next */
	fx_samples(&p, a, 2, 1, 70, 70, "python3", "main", 0, 1);
	fx_offcpu(&p, st_ar, 70, 70, "python3", "main", "blocked", 0, 600000000);
	fx_offcpu(&p, st_ar, 70, 70, "python3", "other", "blocked", 0, 200000000);
	cr_assert_eq(gs_profile_edit_ctx(&p, offcpu_sample, waker_labels, &p), 0);
	char *r = report(&p, 15);
	/* shares of the category's time (its on-CPU 10 ms included) */
	HAS(r, "    collective wait     0.81 s  89.0%  step (ddp.py:3) > all_reduce "
	       "(distributed_c10d.py:9)\n"
	       "      woken by                  74.1%  dataloader_worker: loop (w.py:1) > "
	       "decode (w.py:9)\n"
	       "                                24.7%  timer: hrtimer_wakeup\n");
	free(r);
	gs_profile_free(&p);
}

/* Oversubscription is the job's threads wanting more cores than there are:
 * one starved thread on 2 cores whose neighbours took little (0.22) is
 * not it; three such threads are. */
Test(report, one_starved_thread_does_not_oversubscribe)
{
	struct fx x;
	fx_build(&x);
	gs_profile_add_comment(&x.p, "machine CPU: 2 CPUs; outside the job 0.22 cores over 1.00 "
				     "s (clang 0.19)");
	fx_offcpu(&x.p, FX_ST_CPU(&x.p), 1200, 1200, "python3", "main", "runnable", 0, 900000000);
	char *r = report(&x.p, 15);
	char *v = strstr(r, "Verdict: CPU starvation");
	cr_assert_not_null(v, "%s", r);
	cr_assert_null(strstr(v, "oversubscribes"), "%s", v);
	free(r);
	for (uint32_t tid = 1210; tid < 1212; tid++)
		fx_offcpu(&x.p, FX_ST_CPU(&x.p), 1200, tid, "python3", "main", "runnable", 0,
			  900000000);
	r = report(&x.p, 15);
	HAS(r, "CPU-starved: the job oversubscribes its cores: 3 busy threads wanted");
	free(r);
	gs_profile_free(&x.p);
}

/* Each main process gets its split and verdict, labelled with its rank. */
static void rank_from_pid(struct gs_sample_ctx *c, void *arg)
{
	c->num_labels[GS_NL_RANK] = c->pid - 70;
	c->num_set = 1u << GS_NL_RANK;
}

Test(report, one_split_per_rank)
{
	struct gs_profile p;
	uint32_t a[2], b[1];
	ddp_locs(&p, a, b);
	fx_samples(&p, b, 1, 10, 70, 70, "python3", "main", 0, 1);
	fx_samples(&p, b, 1, 10, 71, 71, "python3", "main", 0, 1);
	uint32_t st_ar = p.samples[0].stack + 1; /* added next */
	fx_samples(&p, a, 2, 1, 71, 71, "python3", "main", 0, 1);
	cr_assert_eq(p.samples[20].stack, st_ar);
	fx_offcpu(&p, st_ar, 71, 71, "python3", "main", "blocked", 0, 790000000);
	fx_offcpu(&p, p.samples[0].stack, 70, 70, "python3", "main", "blocked", 0, 100000000);
	cr_assert_eq(gs_profile_edit_ctx(&p, NULL, rank_from_pid, NULL), 0);
	char *r = report(&p, 15);
	HAS(r, "rank 0 main thread (python3 pid 70): 0.20 s of wall time");
	HAS(r, "rank 1 main thread (python3 pid 71): 0.90 s of wall time");
	HAS(r, "    collective wait     0.80 s  88.9%  step (ddp.py:3) > all_reduce "
	       "(distributed_c10d.py:9)");
	HAS(r, "Verdict (rank 0 main thread (python3 pid 70)): compute 50%");
	HAS(r, "Verdict (rank 1 main thread (python3 pid 71)): collective wait 89% of the main "
	       "thread's "
	       "wall time (0.80 s): collective-bound");
	free(r);
	gs_profile_free(&p);
}

/* A category's top stack names the frame that put the time there (an
 * outer DataLoader frame), the leaf-most Python frames and the native
 * call that waits; too long, it loses frames from the root side. */
Test(report, top_stack_names_the_reason)
{
	struct gs_profile p;
	uint32_t mid = py_profile(&p, 0);
	const char *dl = "/x/dist-packages/torch/utils/data/dataloader.py";
	uint32_t l[] = {
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
		       fx_fn(&p, "<module>", NULL, "/home/u/train.py", 1), 5),
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
		       fx_fn(&p, "_BaseDataLoaderIter.__next__", NULL, dl, 620), 630),
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
		       fx_fn(&p, "_MultiProcessingDataLoaderIter._get_data", NULL, dl, 1140), 1150),
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
		       fx_fn(&p, "Queue.get", NULL, "/usr/lib/python3.11/multiprocessing/queues.py",
			     98),
		       103),
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
		       fx_fn(&p, "wait", NULL, "/usr/lib/python3.11/multiprocessing/connection.py",
			     900),
		       930),
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
		       fx_fn(&p, "_PollLikeSelector.select", NULL,
			     "/usr/lib/python3.11/selectors.py", 400),
		       415),
		fx_loc(&p, 0, 0x10, GS_FRAME_NATIVE, fx_fn(&p, "poll", NULL, NULL, 0), 0),
	};
	fx_samples(&p, l, 7, 1, 90, 90, "python3", "main", 0, 1);
	fx_offcpu(&p, p.samples[0].stack, 90, 90, "python3", "main", "blocked", 0, 90000000);
	char *r = report(&p, 15);
	HAS(r, "    input wait          0.10 s 100.0%  _MultiProcessingDataLoaderIter._get_data "
	       "(dataloader.py:1150) > "
	       "wait (connection.py:930) > _PollLikeSelector.select (selectors.py:415) > poll\n");
	free(r);
	/* the same under a 150-character Python name: root-side frames go */
	char longname[160];
	memset(longname, 'x', 150);
	longname[150] = 0;
	uint32_t deep[] = {
		l[0],
		l[1],
		l[2],
		l[3],
		l[4],
		fx_loc(&p, mid, 0, GS_FRAME_PYTHON, fx_fn(&p, longname, NULL, "/home/u/l.py", 1), 2),
		l[6]
	};
	fx_samples(&p, deep, 7, 20, 90, 90, "python3", "main", 0, 1);
	r = report(&p, 15);
	char want[256];
	snprintf(want, sizeof(want),
		 "    input wait          0.30 s 100.0%%  ... > wait (connection.py:930) > %s "
		 "(l.py:2) > poll\n",
		 longname);
	HAS(r, want);
	free(r);
	gs_profile_free(&p);
}

/* The main thread (pid 40) blocked in names[i] (io.py:11 + i, under
 * <module> at io.py:2) for ns[i]: stack i. */
static void blocked_calls(struct gs_profile *p, const char *const *names, const int64_t *ns, int n)
{
	uint32_t mid = py_profile(p, 0);
	uint32_t root = fx_loc(p, mid, 0, GS_FRAME_PYTHON,
			       fx_fn(p, "<module>", NULL, "/home/u/io.py", 1), 2);

	for (int i = 0; i < n; i++) {
		uint32_t l[] = { root, fx_loc(p, mid, 0, GS_FRAME_PYTHON,
					      fx_fn(p, names[i], NULL, "/home/u/io.py", 10 + i),
					      11 + i) };
		fx_samples(p, l, 2, 0, 40, 40, "python3", "main", 0, 0);
		fx_offcpu(p, (uint32_t)i, 40, 40, "python3", "main", "blocked", 0, ns[i]);
	}
}

/* A run with no wall time to speak of gets no split and no verdict: one
 * line says there is nothing to conclude. */
Test(report, no_verdict_without_time)
{
	struct gs_profile p;
	const char *names[] = { "wait_select", "wait_lock" };
	const int64_t ns[] = { 3000000, 1000000 };

	blocked_calls(&p, names, ns, 2);
	char *r = report(&p, 15);
	HAS(r, "  main thread (python3 pid 40): no wall time in this profile (under 0.01 s; "
	       "profile 0.00 s): nothing to conclude about it\n");
	cr_assert_null(strstr(r, "Verdict"), "a verdict on a 0 s run:\n%s", r);
	cr_assert_null(strstr(r, "other blocking"), "a split of a 0 s run:\n%s", r);
	cr_assert_eq(strstr(r, "nothing to conclude"), strstr(r, "nothing to conclude about it\n"));
	const char *once = strstr(r, "nothing to conclude");
	cr_assert_null(strstr(once + 1, "nothing to conclude"), "said twice:\n%s", r);
	free(r);
	gs_profile_free(&p);
}

/* Other blocking lists its top stacks, most first: the top one on its
 * row, the next ones with their own time. */
Test(report, other_blocking_top_stacks)
{
	struct gs_profile p;
	const char *names[] = { "wait_select", "wait_lock", "wait_read", "wait_pipe" };
	const int64_t ns[] = { 400000000, 300000000, 200000000, 100000000 };

	blocked_calls(&p, names, ns, 4);
	char *r = report(&p, 15);
	HAS(r,
	    "    other blocking      1.00 s 100.0%  <module> (io.py:2) > wait_select (io.py:11)\n"
	    "      also              0.30 s  30.0%  <module> (io.py:2) > wait_lock (io.py:12)\n"
	    "                        0.20 s  20.0%  <module> (io.py:2) > wait_read (io.py:13)\n"
	    "\n");
	cr_assert_null(strstr(r, "wait_pipe"), "three stacks at most:\n%s", r);
	HAS(r, "Verdict: other blocking 100% of the main thread's wall time (1.00 s): blocked in "
	       "other waits");
	free(r);
	gs_profile_free(&p);
}

/* Stacks that differ only past the frames the report shows read the same:
 * one "also" line with their times added, none repeating the top line. */
Test(report, other_blocking_same_short_stacks_merged)
{
	struct gs_profile p;
	uint32_t mid = py_profile(&p, 0);
	uint32_t outer[2], mod, step, wait[3];
	const char *waits[] = { "wait_select", "wait_lock", "wait_read" };
	/* outer frame, wait, ns: 0 and 1 read the same, and so do 2 and 3 */
	const struct {
		int o, w;
		int64_t ns;
	} st[] = {
		{ 0, 0, 400000000 }, { 1, 0, 300000000 }, { 0, 1, 200000000 },
		{ 1, 1, 150000000 }, { 0, 2, 250000000 },
	};

	for (int i = 0; i < 2; i++)
		outer[i] = fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
				  fx_fn(&p, i ? "run_b" : "run_a", NULL, "/home/u/io.py", 1 + i),
				  2 + i);
	mod = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, fx_fn(&p, "<module>", NULL, "/home/u/io.py", 1),
		     5);
	step = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, fx_fn(&p, "step", NULL, "/home/u/io.py", 7), 8);
	for (int i = 0; i < 3; i++)
		wait[i] = fx_loc(&p, mid, 0, GS_FRAME_PYTHON,
				 fx_fn(&p, waits[i], NULL, "/home/u/io.py", 10 + i), 11 + i);
	for (uint32_t i = 0; i < 5; i++) {
		uint32_t l[] = { outer[st[i].o], mod, step, wait[st[i].w] };
		fx_samples(&p, l, 4, 0, 40, 40, "python3", "main", 0, 0);
		fx_offcpu(&p, i, 40, 40, "python3", "main", "blocked", 0, st[i].ns);
	}
	char *r = report(&p, 15);
	HAS(r, "    other blocking      1.30 s 100.0%  <module> (io.py:5) > step (io.py:8) > "
	       "wait_select (io.py:11)\n"
	       "      also              0.35 s  26.9%  <module> (io.py:5) > step (io.py:8) > "
	       "wait_lock (io.py:12)\n"
	       "                        0.25 s  19.2%  <module> (io.py:5) > step (io.py:8) > "
	       "wait_read (io.py:13)\n"
	       "\n");
	free(r);
	gs_profile_free(&p);
}

/* An "also" stack under 0.5% of the thread's time is no line ("0.00 s 0.0%"). */
Test(report, other_blocking_tiny_stacks_left_out)
{
	struct gs_profile p;
	const char *names[] = { "wait_select", "wait_lock", "wait_read" };
	const int64_t ns[] = { 700000000, 300000000, 2000000 };

	blocked_calls(&p, names, ns, 3);
	char *r = report(&p, 15);
	HAS(r,
	    "      also              0.30 s  29.9%  <module> (io.py:2) > wait_lock (io.py:12)\n\n");
	cr_assert_null(strstr(r, "wait_read"), "a 0.2%% stack listed:\n%s", r);
	free(r);
	gs_profile_free(&p);
}

/* Target-controlled names cannot put control bytes on the terminal. */
Test(report, names_are_cleaned)
{
	struct gs_profile p;
	uint32_t mid = py_profile(&p, 0);
	uint32_t f = fx_fn(&p, "evil\033[2J\n", NULL, "/home/u/x\r.py", 1);
	uint32_t l = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f, 2);
	fx_samples(&p, &l, 1, 3, 80, 80, "py\033thon", "main", 0, 1);
	char *r = report(&p, 15);
	char *w = strstr(r, "Where the time goes");
	cr_assert_not_null(w, "%s", r);
	HAS(w, "main thread (py\\x1bthon pid 80)");
	HAS(w, "evil\\x1b[2J\\x0a (x\\x0d.py:2)");
	cr_assert_null(strchr(r, '\033'), "an escape byte reached the report");
	free(r);
	gs_profile_free(&p);
}

/* .item() of a CUDA tensor (_local_scalar_dense_cuda) is sync, even with
 * a DataLoader frame further up, on-CPU or blocked; __next__ outside
 * torch.utils.data is not input. */
Test(report, sync_beats_input)
{
	struct gs_profile p;
	uint32_t mid = py_profile(&p, 0);
	p.frequency_hz = 100;
	uint32_t f_next = fx_fn(&p, "_BaseDataLoaderIter.__next__", NULL,
				"/x/site-packages/torch/utils/data/dataloader.py", 1);
	uint32_t f_item = fx_fn(&p, "at::native::_local_scalar_dense_cuda(at::Tensor const&)", NULL,
				NULL, 0);
	uint32_t f_mynext = fx_fn(&p, "MyIter.__next__", NULL, "/home/u/it.py", 1);
	uint32_t l_next = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_next, 5);
	uint32_t l_item = fx_loc(&p, 0, 0x10, GS_FRAME_NATIVE, f_item, 0);
	uint32_t l_mynext = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_mynext, 3);
	uint32_t a[] = { l_next, l_item };
	fx_samples(&p, a, 2, 7, 50, 50, "python3", "main", 0, 1);
	uint32_t b[] = { l_mynext };
	fx_samples(&p, b, 1, 3, 50, 50, "python3", "main", 0, 1);
	struct gs_process pr = { .pid = 50,
				 .comm = gs_profile_intern(&p, "python3"),
				 .role = gs_profile_intern(&p, "main") };
	gs_profile_add_process(&p, &pr);
	fx_offcpu(&p, p.samples[0].stack, 50, 50, "python3", "main", "blocked", 0, 100000000);
	char *r = report(&p, 15);
	HAS(r, "    compute             0.03 s  15.0%  MyIter.__next__ (it.py:3)\n");
	HAS(r, "    CUDA sync           0.17 s  85.0%  _BaseDataLoaderIter.__next__ "
	       "(dataloader.py:5) > "
	       "at::native::_local_scalar_dense_cuda\n");
	cr_assert_null(strstr(r, "input wait "), "%s", r);
	HAS(r, "Verdict: CUDA sync 85% of the main thread's wall time (0.17 s): GPU-sync-bound");
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
	HAS(r, "No CPU samples from the main thread: nothing to conclude about it.");
	free(r);
	gs_profile_free(&p);
}

/* A file whose samples all have empty stacks (a hostile or truncated pprof
 * file) has no location ids at all: every writer takes it without indexing
 * the absent array (UBSan in make asan: "zero offset to null pointer"). */
Test(report, only_empty_stacks)
{
	struct gs_profile p;
	char dir[] = "/tmp/gs-empty-XXXXXX", path[96], err[256];
	gs_profile_init(&p);
	p.period_ns = FX_PERIOD;
	p.duration_nanos = 1000000000;
	int64_t st = gs_profile_add_stack(&p, NULL, 0);
	cr_assert_geq(st, 0);
	struct gs_sample_ctx c = { .pid = 7, .tid = 7, .cuda_device = -1 };
	struct gs_sample s = { .stack = (uint32_t)st };
	s.values[GS_V_SAMPLES] = 3;
	s.values[GS_V_CPU_NS] = 3 * FX_PERIOD;
	cr_assert_eq(gs_profile_add_sample(&p, &s, &c), 0);
	cr_assert_null(p.stack_locs);
	char *r = report(&p, 15);
	HAS(r, "3 CPU samples");
	free(r);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.pb.gz", dir);
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	snprintf(path, sizeof(path), "%s/p.folded", dir);
	cr_assert_eq(gs_write_folded(&p, GS_FOLDED_CPU, path, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	snprintf(path, sizeof(path), "%s/p.speedscope.json", dir);
	cr_assert_eq(gs_write_speedscope(&p, path, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	snprintf(path, sizeof(path), "%s/p.trace.json", dir);
	cr_assert_eq(gs_write_trace(&p, path, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	rmdir(dir);
	gs_profile_free(&p);
}

/* A `gpusample dump` profile (one stack per thread, no time) is reported as
 * one: threads, not CPU samples; no wall-time split or verdict. */
Test(report, dump_profile)
{
	struct gs_profile p;
	uint32_t m = py_profile(&p, 0);
	uint32_t loc = gs_profile_add_location(&p, m, 0x1234, GS_FRAME_NATIVE, NULL, 0);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	cr_assert_geq(st, 0);
	for (uint32_t tid = 10; tid < 13; tid++) {
		struct gs_sample_ctx c = { .pid = tid < 12 ? 10 : 20,
					   .tid = tid,
					   .cuda_device = -1 };
		struct gs_sample s = { .stack = (uint32_t)st };
		s.values[GS_V_SAMPLES] = 1;
		cr_assert_eq(gs_profile_add_sample(&p, &s, &c), 0);
	}
	gs_profile_add_comment(&p, GS_DUMP_COMMENT "registers from the BPF task iterator");
	char *r = report(&p, 15);
	HAS(r, "  a dump: one stack per thread at one moment, 3 threads in 2 processes\n");
	HAS(r, "Top functions by threads stopped in them");
	HAS(r, "      pid     tid thread           role\n");
	cr_assert_null(strstr(r, "CPU samples"), "%s", r);
	cr_assert_null(strstr(r, "Verdict"), "%s", r);
	cr_assert_null(strstr(r, "Processes"), "%s", r);
	free(r);
	gs_profile_free(&p);
}

/* torch does not rename DataLoader workers: a process running
 * torch.utils.data's _worker_loop is a worker whatever its role label. */
Test(report, workers_found_by_stack)
{
	struct gs_profile p;
	uint32_t mid = py_profile(&p, 1000000000ULL);
	uint32_t f_loop = fx_fn(&p, "_worker_loop", NULL,
				"/x/dist-packages/torch/utils/data/_utils/worker.py", 200);
	uint32_t f_main = fx_fn(&p, "<module>", NULL, "/home/u/train.py", 1);
	uint32_t l_loop = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_loop, 250);
	uint32_t l_main = fx_loc(&p, mid, 0, GS_FRAME_PYTHON, f_main, 3);
	uint32_t a[] = { l_main, l_loop };
	fx_samples(&p, a, 2, 20, 61, 61, "python3", "other", 0, 1);
	fx_samples(&p, a, 2, 30, 62, 62, "python3", "other", 0, 1);
	uint32_t b[] = { l_main };
	fx_samples(&p, b, 1, 10, 60, 60, "python3", "main", 0, 1);
	fx_samples(&p, b, 1, 5, 63, 63, "python3", "other", 0, 1); /* not a worker */
	char *r = report(&p, 15);
	HAS(r,
	    "DataLoader workers (2 processes): 0.50 s on-CPU, 25% busy on average (on-CPU only)");
	free(r);
	gs_profile_free(&p);
}

/* Off-CPU recording was on (session/offcpu.c's comment) but the profile holds no
 * off-CPU sample (a process that exits within tens of ms): the report says
 * so and does not tell the user to drop an option they did not give. */
Test(report, offcpu_on_without_offcpu_samples)
{
	struct fx x;
	fx_build(&x);
	gs_profile_add_comment(&x.p, "off-CPU: sched_switch; per thread exact on-CPU");
	char *r = report(&x.p, 15);
	cr_assert_null(strstr(r, "--no-offcpu"), "advice about an option not given:\n%s", r);
	HAS(r, "on-CPU only: off-CPU time was recorded but none was seen (the run or the "
	       "process was too short), so waits do not show");
	HAS(r, "Verdict: on-CPU only (no off-CPU time was seen, waits do not show; profile a "
	       "longer run for a wall-clock verdict): of its on-CPU time 50% (0.05 s) is input "
	       "wait.");
	free(r);
	gs_profile_free(&x.p);
}

/* With --no-offcpu the advice stays. */
Test(report, no_offcpu_option_keeps_advice)
{
	struct fx x;
	fx_build(&x);
	gs_profile_add_comment(&x.p, "off-CPU: off (--no-offcpu)");
	char *r = report(&x.p, 15);
	HAS(r, "run without --no-offcpu for a wall-clock verdict");
	free(r);
	gs_profile_free(&x.p);
}

/* The function tables read stacks as a reader would: an interrupt-enable
 * skid frame gives its samples to its caller, thread roots and the
 * interpreter's start-up frames are no rows, a function without a symbol
 * is counted under its nearest named caller, never as "lib+0x...". */
Test(report, tables_skip_roots_skid_and_unnamed_offsets)
{
	struct gs_profile p;
	uint32_t m_py = py_profile(&p, 1000000000);
	uint32_t m_rt = fx_map(&p, "/usr/bin/python3.11", "aa", 0x400000, 0x800000, false);
	uint32_t m_libc = fx_map(&p, "/lib/libc.so.6", "bb", 0x7f0000, 0x7f8000, false);
	uint32_t m_t = fx_map(&p, "/usr/lib/libtorch_cpu.so.1.13.0", "cc", 0x900000, 0xa00000,
			      false);
	uint32_t m_k = fx_map(&p, "[kernel.kallsyms]", "", 0, 0, false);
#define L(m, k, name) fx_loc(&p, m, 0, k, fx_fn(&p, name, NULL, NULL, 0), 0)
	uint32_t start = L(m_rt, GS_FRAME_NATIVE, "_start"),
		 libc = L(m_libc, GS_FRAME_NATIVE, "__libc_start_main_impl"),
		 bytesmain = L(m_rt, GS_FRAME_NATIVE, "Py_BytesMain"),
		 helper = L(m_rt, GS_FRAME_NATIVE, "python3.11+0x651740"),
		 evalcode = L(m_rt, GS_FRAME_NATIVE, "PyEval_EvalCode"),
		 mod = fx_loc(&p, m_py, 0, GS_FRAME_PYTHON, fx_fn(&p, "<module>", NULL, "t.py", 1),
			      3),
		 tpcall = L(m_rt, GS_FRAME_NATIVE, "_PyObject_MakeTpCall"),
		 impl = L(m_t, GS_FRAME_NATIVE, "at::TensorIteratorBase::serial_for_each"),
		 anon = L(m_t, GS_FRAME_NATIVE, "libtorch_cpu.so.1.13.0+0x4f1ee8a"),
		 fault = L(m_k, GS_FRAME_KERNEL, "exc_page_fault"),
		 skid = L(m_k, GS_FRAME_KERNEL, "pvm_irq_enable"),
		 thunk = L(m_k, GS_FRAME_KERNEL, "__raw_callee_save_pvm_irq_enable"),
		 clone3 = L(m_libc, GS_FRAME_NATIVE, "__clone3"),
		 st = L(m_libc, GS_FRAME_NATIVE, "start_thread"),
		 worker = L(m_t, GS_FRAME_NATIVE, "c10::ThreadPool::main_loop");
#undef L
	uint32_t a[] = { start, libc, bytesmain, helper, evalcode, mod, tpcall, impl, anon };
	uint32_t b[] = { start,  libc, bytesmain, helper, evalcode, mod,
			 tpcall, impl, anon,      fault,  thunk,    skid };
	uint32_t c[] = { clone3, st, worker };

	fx_samples(&p, a, 9, 6, 1, 1, "python3", "main", 0, 10000000);
	fx_samples(&p, b, 12, 3, 1, 1, "python3", "main", 100000000, 10000000);
	fx_samples(&p, c, 3, 1, 1, 2, "python3", "main", 200000000, 10000000);
	gs_profile_add_comment(&p, "sample event: cpu-clock");
	char *r = report(&p, 15);

	HAS(r, "  duration 1.00 s, 0 Hz cpu-clock, 10 CPU samples"); /* the event sampled */
	/* self: the unnamed function under its named caller; the skid's
	 * samples on the page fault it interrupted */
	HAS(r, "        6  60.0%       9  90.0%  at::TensorIteratorBase::serial_for_each > "
	       "libtorch_cpu.so.1.13.0 [no symbols]\n");
	HAS(r, "        3  30.0%       3  30.0%  exc_page_fault [kernel]\n");
	HAS(r, "        1  10.0%       1  10.0%  c10::ThreadPool::main_loop\n");
	const char *gone[] = {
		"<module>",     "+0x",          "irq_enable",      "raw_callee_save",      "_start",
		"__libc_start", "Py_BytesMain", "PyEval_EvalCode", "_PyObject_MakeTpCall", "clone3",
		"start_thread"
	};
	const char *tables_end = strstr(r, "\nProcesses");

	cr_assert_not_null(tables_end);
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		const char *hit = strstr(r, gone[i]);

		cr_assert(!hit || hit > tables_end, "%s in the function tables:\n%s", gone[i], r);
	}
	free(r);
	/* unnamed code of a second library under the same caller: the row
	 * names no one library */
	uint32_t gomp = fx_loc(&p, fx_map(&p, "/lib/libgomp.so.1", "dd", 0xb00000, 0xb10000, false),
			       0, GS_FRAME_NATIVE, fx_fn(&p, "libgomp.so.1+0x1234", NULL, NULL, 0),
			       0);
	uint32_t d[] = { start, libc, bytesmain, helper, evalcode, mod, tpcall, impl, gomp };
	fx_samples(&p, d, 9, 1, 1, 1, "python3", "main", 300000000, 10000000);
	r = report(&p, 15);
	HAS(r, "        7  63.6%      10  90.9%  at::TensorIteratorBase::serial_for_each > "
	       "[libraries without symbols]\n");
	free(r);
	gs_profile_free(&p);
}

/* Row `fn` of the table that starts at `title` in report r (NULL: none). */
static const char *table_row(const char *r, const char *title, const char *fn)
{
	const char *t = strstr(r, title), *end = t ? strstr(t, "\n\n") : NULL;
	const char *hit = t ? strstr(t, fn) : NULL;

	return hit && (!end || hit < end) ? hit : NULL;
}

/* Python functions are named at their hottest line, per table: the leaf
 * line with most self samples, the line of their frames with most total. */
Test(report, tables_name_the_hottest_line)
{
	struct gs_profile p;
	uint32_t m = py_profile(&p, 1000000000);
	uint32_t f_dec = fx_fn(&p, "decode", NULL, "/home/u/data.py", 10),
		 f_load = fx_fn(&p, "load", NULL, "/home/u/data.py", 30),
		 f_step = fx_fn(&p, "step", NULL, "/home/u/data.py", 40);
	uint32_t d17 = fx_loc(&p, m, 0, GS_FRAME_PYTHON, f_dec, 17),
		 d12 = fx_loc(&p, m, 0, GS_FRAME_PYTHON, f_dec, 12),
		 l33 = fx_loc(&p, m, 0, GS_FRAME_PYTHON, f_load, 33),
		 s45 = fx_loc(&p, m, 0, GS_FRAME_PYTHON, f_step, 45),
		 s41 = fx_loc(&p, m, 0, GS_FRAME_PYTHON, f_step, 41);
	uint32_t a[] = { s45, l33, d17 }, b[] = { s45, l33, d12 }, c[] = { s41 };

	fx_samples(&p, a, 3, 8, 1, 1, "python3", "main", 0, 10000000);
	fx_samples(&p, b, 3, 2, 1, 1, "python3", "main", 100000000, 10000000);
	fx_samples(&p, c, 1, 3, 1, 1, "python3", "main", 200000000, 10000000);
	char *r = report(&p, 15);

	HAS(r, "Top functions by self CPU\n"
	       "     self  self%   total total%  function\n"
	       "       10  76.9%      10  76.9%  decode (/home/u/data.py:17, 80%)\n"
	       "        3  23.1%      13 100.0%  step (/home/u/data.py:41)\n");
	HAS(r, "Top functions by total CPU (self + callees)\n"
	       "     self  self%   total total%  function\n"
	       "        3  23.1%      13 100.0%  step (/home/u/data.py:45, 77%)\n"
	       "       10  76.9%      10  76.9%  decode (/home/u/data.py:17, 80%)\n"
	       "        0   0.0%      10  76.9%  load (/home/u/data.py:33)\n");
	free(r);
	gs_profile_free(&p);
}

/* "By total" leaves out the known plumbing frames (the script's module,
 * multiprocessing's start-up, the DataLoader worker's loop and fetcher, the
 * interpreter's call machinery) and a stripped libc's start frame, and keeps
 * the job's functions that share a name with one of them. */
Test(report, total_table_skips_plumbing)
{
	struct gs_profile p;
	uint32_t m = py_profile(&p, 1000000000);
	uint32_t m_app = fx_map(&p, "/opt/app/bin/app", "aa", 0x400000, 0x800000, false);
	uint32_t m_libc = fx_map(&p, "/lib/libc.so.6", "bb", 0x7f0000, 0x7f8000, false);
	const char *mp = "/usr/lib/python3.11/multiprocessing/popen_fork.py",
		   *wk = "/x/dist-packages/torch/utils/data/_utils/worker.py",
		   *fe = "/x/dist-packages/torch/utils/data/_utils/fetch.py";
#define PY(name, file, line) \
	fx_loc(&p, m, 0, GS_FRAME_PYTHON, fx_fn(&p, name, NULL, file, line), line)
#define C(map, name) fx_loc(&p, map, 0, GS_FRAME_NATIVE, fx_fn(&p, name, NULL, NULL, 0), 0)
	uint32_t a[] = { C(m_app, "_start"),
			 C(m_libc, "libc.so.6+0x29f49"),
			 C(m_app, "PyObject_Vectorcall"),
			 PY("<module>", "/home/u/train.py", 5),
			 PY("Popen._launch", mp, 71),
			 PY("_worker_loop", wk, 300),
			 PY("_MapDatasetFetcher.fetch", fe, 58),
			 PY("_MapDatasetFetcher.fetch.<locals>.<listcomp>", fe, 58),
			 PY("Items.fetch", "/home/u/data.py", 20),
			 PY("Thread.run", "/home/u/mythreading.py", 8),
			 PY("decode", "/home/u/data.py", 17) };
#undef PY
#undef C
	fx_samples(&p, a, 11, 5, 1, 1, "python3", "main", 0, 10000000);
	char *r = report(&p, 15);
	const char *t = "Top functions by total CPU";
	const char *gone[] = { "<module>",           "Popen._launch",       "_worker_loop",
			       "_MapDatasetFetcher", "PyObject_Vectorcall", "libc.so.6" };

	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		cr_assert_null(table_row(r, t, gone[i]), "%s listed:\n%s", gone[i], r);
	cr_assert_null(strstr(r, "libc.so.6"), "the libc start frame listed:\n%s", r);
	cr_assert_not_null(table_row(r, t, "  Items.fetch (/home/u/data.py:20)\n"), "%s", r);
	cr_assert_not_null(table_row(r, t, "  Thread.run (/home/u/mythreading.py:8)\n"), "%s", r);
	cr_assert_not_null(table_row(r, t, "  decode (/home/u/data.py:17)\n"), "%s", r);
	free(r);
	gs_profile_free(&p);
}

/* A loop whose DataLoader re-creates its 2 workers every epoch: main pid 60,
 * 300 epochs of 2 workers (pids 1000...) with 10 samples each, 150 ms
 * apart; with_table: the process table says so too (exited workers of 60);
 * reuse: the last epoch's workers get the first epoch's pids again. */
static void churned_workers(struct gs_profile *p, bool with_table, bool reuse)
{
	uint32_t mid = py_profile(p, 45000000000ULL);
	uint32_t f_loop = fx_fn(p, "_worker_loop", NULL,
				"/x/dist-packages/torch/utils/data/_utils/worker.py", 200);
	uint32_t f_main = fx_fn(p, "<module>", NULL, "/home/u/train.py", 1);
	uint32_t l_loop = fx_loc(p, mid, 0, GS_FRAME_PYTHON, f_loop, 250);
	uint32_t l_main = fx_loc(p, mid, 0, GS_FRAME_PYTHON, f_main, 3);
	uint32_t a[] = { l_main, l_loop }, b[] = { l_main };
	const uint64_t ms = 1000000;
	fx_samples(p, b, 1, 100, 60, 60, "python3", "main", 0, 100 * ms);
	for (uint32_t e = 0; e < 300; e++) /* epoch e: 2 workers of 10 samples */
		for (uint32_t k = 0; k < 2; k++) {
			uint32_t pid = reuse && e == 299 ? 1000 + k : 1000 + 2 * e + k;
			fx_samples(p, a, 2, 10, pid, pid, "python3", "dataloader",
				   150 * ms * e + k * ms, 10 * ms);
		}
	if (!with_table)
		return;
	struct gs_process m = { .pid = 60,
				.comm = gs_profile_intern(p, "python3"),
				.role = gs_profile_intern(p, "main"),
				.cpu_samples = 100 };
	gs_profile_add_process(p, &m);
	for (uint32_t i = 0; i < 600; i++) {
		struct gs_process w = { .pid = 1000 + i,
					.ppid = 60,
					.comm = m.comm,
					.role = gs_profile_intern(p, "dataloader"),
					.cpu_samples = 10,
					.exited = true };
		gs_profile_add_process(p, &w);
	}
}

/* Every worker is counted (the report once stopped at 256, silently, and
 * said 25.6 s on-CPU), and the line says how they came. */
Test(report, churned_workers_all_counted_by_generation)
{
	struct gs_profile p;
	churned_workers(&p, false, false);
	char *r = report(&p, 15);
	HAS(r, "DataLoader workers (600 processes over 300 epochs, 2 at a time): 60.0 s on-CPU, "
	       "67% busy on average (on-CPU only)");
	free(r);
	gs_profile_free(&p);
}

/* The Processes and Threads tables give the exited workers one row each,
 * not 600 rows cut off at the table's length. */
Test(report, churned_workers_grouped_in_tables)
{
	struct gs_profile p;
	churned_workers(&p, true, false);
	char *r = report(&p, 15);
	HAS(r, "        - python3          dataloader      6000  98.4%  -                - (600 "
	       "exited "
	       "workers of pid 60)");
	HAS(r,
	    "        -       - python3          dataloader      6000  98.4%  (600 threads of 600 "
	    "exited workers of pid 60)");
	cr_assert_null(strstr(r, "more threads"), "%s", r);
	cr_assert_null(strstr(r, "more processes"), "%s", r);
	free(r);
	gs_profile_free(&p);
}

/* Occurrences of needle in the file at path. */
static size_t count_in_file(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	char *buf = NULL;
	size_t len = 0, n = 0;
	cr_assert_gt(getdelim(&buf, &len, '\0', f), 0, "%s is empty", path);
	fclose(f);
	for (const char *q = buf; (q = strstr(q, needle)); q++)
		n++;
	free(buf);
	return n;
}

/* The timelines give 600 exited workers, 2 at a time, two lanes (one per
 * slot), not 600, and the main process's 300 "pt_pin" threads, one per
 * epoch, one lane: their size follows what runs at a time, not the epochs.
 * Its 8 "pool" threads, alive together, keep a lane each. */
Test(report, churned_workers_share_timeline_lanes)
{
	struct gs_profile p;
	char dir[] = "/tmp/gs_lanes_XXXXXX", path[64], err[256];
	churned_workers(&p, true, false);
	uint32_t f = fx_fn(&p, "pin_loop", NULL, "/x/torch/utils/data/_utils/pin_memory.py", 40);
	uint32_t loc = fx_loc(&p, 1, 0, GS_FRAME_PYTHON, f, 50);
	for (uint32_t e = 0; e < 300; e++)
		fx_samples(&p, &loc, 1, 5, 60, 2000 + e, "pt_pin", "main", 150000000ULL * e,
			   10000000);
	for (uint32_t k = 0; k < 8; k++)
		fx_samples(&p, &loc, 1, 5, 60, 3000 + k, "pool", "main", 0, 10000000);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.speedscope.json", dir);
	cr_assert_eq(gs_write_speedscope(&p, path, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(count_in_file(path, "\"type\":\"sampled\""), 12,
		     "main thread + 8 pool + 1 pt_pin + 2 worker slots");
	cr_expect_eq(count_in_file(path, "python3 pid 60: threads pt_pin, slot 0 (300 threads)"),
		     1);
	cr_expect_eq(count_in_file(path, "exited DataLoader workers of pid 60, slot 0, thread 0 "
					 "(300 processes)"),
		     1);
	cr_expect_eq(count_in_file(path, "exited DataLoader workers of pid 60, slot 1, thread 0 "
					 "(300 processes)"),
		     1);
	unlink(path);
	snprintf(path, sizeof(path), "%s/p.trace.json", dir);
	cr_assert_eq(gs_write_trace(&p, path, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(count_in_file(path, "\"thread_name\""), 12,
		     "main thread + 8 pool + 1 pt_pin + 2 worker slots");
	cr_expect_eq(count_in_file(path, "\"process_name\""), 1, "the workers lie in pid 60");
	cr_expect_eq(count_in_file(path, "slot 1, thread 0 (300 processes)"), 1);
	unlink(path);
	rmdir(dir);
	gs_profile_free(&p);
}

/* Over hours the kernel hands a worker's pid out again (pid_max wraps): the
 * last epoch's workers get the first epoch's pids, joining two lives into
 * one span 45 s long.  The count at a time stays 2 (it said 4 with such
 * spans counted); a reused pid is one process in the profile. */
Test(report, reused_worker_pid_does_not_inflate_at_a_time)
{
	struct gs_profile p;
	churned_workers(&p, false, true);
	char *r = report(&p, 15);
	HAS(r, "DataLoader workers (598 processes over 299 epochs, 2 at a time)");
	free(r);
	gs_profile_free(&p);
}
