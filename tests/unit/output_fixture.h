/* SPDX-License-Identifier: MIT */
/*
 * Synthetic profile shared by the output/ unit tests: a training-like run
 * with a main process (CPU compute, DataLoader input wait, CUDA sync), one
 * DataLoader worker, a pid-0 kernel sample, and GPU PC samples of a
 * templated kernel on two source lines (one with an inlined device function)
 * plus an "[unknown launch]" sample.  Expected totals (used by the tests):
 *   samples 15, cpu 150 ms, gpu_samples 170, gpu_samples_not_issued 110.
 */
#ifndef GS_TEST_OUTPUT_FIXTURE_H
#define GS_TEST_OUTPUT_FIXTURE_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gpusample/profile.h"
#include "output/output.h"

#define FX_PERIOD  10000000LL
#define FX_SAMPLES 15
#define FX_GPU     170
#define FX_GPU_NI  110

struct fx {
	struct gs_profile p;
	uint32_t m_py, m_pyrt, m_kern, m_cubin, m_cudart, m_special;
};

static inline uint32_t fx_fn(struct gs_profile *p, const char *name, const char *sys,
			     const char *file, int64_t start)
{
	struct gs_function f = {
		.name = gs_profile_intern(p, name),
		.system_name = gs_profile_intern(p, sys),
		.file = gs_profile_intern(p, file),
		.start_line = start,
	};
	return gs_profile_add_function(p, &f);
}

static inline uint32_t fx_loc(struct gs_profile *p, uint32_t m, uint64_t addr, enum gs_frame_kind k,
			      uint32_t fn, int64_t line)
{
	struct gs_line l = { .function = fn, .line = line };
	return gs_profile_add_location(p, m, addr, k, &l, 1);
}

static inline uint32_t fx_map(struct gs_profile *p, const char *file, const char *bid,
			      uint64_t start, uint64_t limit, bool lines)
{
	struct gs_mapping m = { .start = start,
				.limit = limit,
				.file = gs_profile_intern(p, file),
				.build_id = gs_profile_intern(p, bid),
				.has_functions = true,
				.has_filenames = true,
				.has_lines = lines };
	return gs_profile_add_mapping(p, &m);
}

/* Add n samples of stack locs (root first here, stored leaf first). */
static inline void fx_samples(struct gs_profile *p, const uint32_t *root_first, uint32_t depth,
			      int n, uint32_t pid, uint32_t tid, const char *comm, const char *role,
			      uint64_t t0, uint64_t dt)
{
	uint32_t leaf_first[64];
	for (uint32_t i = 0; i < depth; i++)
		leaf_first[i] = root_first[depth - 1 - i];
	int64_t st = gs_profile_add_stack(p, leaf_first, depth);
	for (int i = 0; i < n; i++) {
		struct gs_sample s = { .stack = (uint32_t)st, .time_ns = t0 + (uint64_t)i * dt };
		struct gs_sample_ctx s_c = { .pid = pid,
					     .tid = tid,
					     .thread_name = gs_profile_intern(p, comm),
					     .process_role = gs_profile_intern(p, role),
					     .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = 1;
		s.values[GS_V_CPU_NS] = FX_PERIOD;
		gs_profile_add_sample(p, &s, &s_c);
	}
}

static inline void fx_gpu(struct gs_profile *p, const uint32_t *root_first, uint32_t depth,
			  int64_t n, int64_t not_issued, const char *reason,
			  const char *attribution, uint32_t pid, uint32_t tid)
{
	uint32_t leaf_first[64];
	for (uint32_t i = 0; i < depth; i++)
		leaf_first[i] = root_first[depth - 1 - i];
	struct gs_sample s = { .stack = (uint32_t)gs_profile_add_stack(p, leaf_first, depth),
			       .time_ns = 900000000 };
	struct gs_sample_ctx s_c = { .pid = pid,
				     .tid = tid,
				     .cuda_device = 0,
				     .cuda_stall_reason = gs_profile_intern(p, reason),
				     .gpu_attribution = gs_profile_intern(p, attribution),
				     .thread_name = gs_profile_intern(p, pid ? "python3" : NULL),
				     .process_role = gs_profile_intern(p, pid ? "main" : NULL) };
	s.values[GS_V_GPU_SAMPLES] = n;
	s.values[GS_V_GPU_NOT_ISSUED] = not_issued;
	gs_profile_add_sample(p, &s, &s_c);
}

static inline void fx_build(struct fx *x)
{
	struct gs_profile *p = &x->p;
	gs_profile_init(p);
	p->time_nanos = 1700000000000000000ULL;
	p->duration_nanos = 1000000000ULL;
	p->frequency_hz = 100;
	p->period_ns = FX_PERIOD;
	p->lost_samples = 7;
	p->default_sample_type = GS_V_GPU_SAMPLES;

	x->m_pyrt = fx_map(p, "/usr/bin/python3.11", "aabbccdd", 0x400000, 0x800000, true);
	x->m_py = fx_map(p, "[python]", NULL, 0, 0, true);
	x->m_kern = fx_map(p, "[kernel.kallsyms]", NULL, 0xffffffff81000000ULL,
			   0xffffffff82000000ULL, false);
	x->m_cudart = fx_map(p, "/usr/local/cuda/lib64/libcudart.so.12", "cafe", 0x7f0000000000ULL,
			     0x7f0000100000ULL, false);
	x->m_cubin = fx_map(p, "cubin:1a2b3c4d", "1a2b3c4d", 0, 0x4000, true);
	x->m_special = fx_map(p, "[gpusample]", NULL, 0, 0, false);

	uint32_t f_main = fx_fn(p, "main", NULL, "Programs/python.c", 15);
	uint32_t f_mod = fx_fn(p, "<module>", NULL, "/home/u/train.py", 1);
	uint32_t f_step = fx_fn(p, "train_step", NULL, "/home/u/train.py", 18);
	uint32_t f_next = fx_fn(p, "_BaseDataLoaderIter.__next__", NULL,
				"/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py",
				626);
	uint32_t f_nextd = fx_fn(p, "_MultiProcessingDataLoaderIter._next_data", NULL,
				 "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py",
				 1300);
	uint32_t f_get = fx_fn(p, "Queue.get", NULL,
			       "/usr/lib/python3.11/multiprocessing/queues.py", 98);
	uint32_t f_poll = fx_fn(p, "poll", NULL, NULL, 0);
	uint32_t f_sys = fx_fn(p, "do_syscall_64", NULL, NULL, 0);
	uint32_t f_addmm = fx_fn(p,
				 "at::native::addmm_out_cpu(at::Tensor const&, at::Tensor const&)",
				 "_ZN2at6native12addmm_out_cpuERKNS_6TensorES3_",
				 "aten/src/ATen/native/LinearAlgebra.cpp", 1500);
	uint32_t f_sync = fx_fn(p, "cudaStreamSynchronize", NULL, NULL, 0);
	uint32_t f_launch = fx_fn(p, "cudaLaunchKernel", NULL, NULL, 0);
	uint32_t f_wloop = fx_fn(p, "_worker_loop", NULL,
				 "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py",
				 200);
	uint32_t f_getitem = fx_fn(p, "MyDataset.__getitem__", NULL, "/home/u/data;set.py", 30);
	uint32_t f_kernel = fx_fn(p, "void matmul_kernel<float, 128>(float*, float const*, int)",
				  "_Z13matmul_kernelIfLi128EEvPfPKfi", "/home/u/matmul.cu", 30);
	uint32_t f_tile = fx_fn(p, "load_tile(float const*)", "_Z9load_tilePKf", "/home/u/tile.cuh",
				5);
	uint32_t f_unknown = fx_fn(p, "[unknown launch]", NULL, NULL, 0);
	uint32_t f_idle = fx_fn(p, "default_idle", NULL, NULL, 0);

	uint32_t l_main = fx_loc(p, x->m_pyrt, 0x401000, GS_FRAME_NATIVE, f_main, 20);
	uint32_t l_mod10 = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_mod, 10);
	uint32_t l_step20 = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_step, 20);
	uint32_t l_step21 = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_step, 21);
	uint32_t l_step22 = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_step, 22);
	uint32_t l_next = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_next, 630);
	uint32_t l_nextd = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_nextd, 1320);
	uint32_t l_get = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_get, 103);
	uint32_t l_poll = fx_loc(p, x->m_pyrt, 0x402000, GS_FRAME_NATIVE, f_poll, 0);
	uint32_t l_sys = fx_loc(p, x->m_kern, 0xffffffff81001000ULL, GS_FRAME_KERNEL, f_sys, 0);
	uint32_t l_addmm = fx_loc(p, x->m_pyrt, 0x403000, GS_FRAME_NATIVE, f_addmm, 1510);
	uint32_t l_sync = fx_loc(p, x->m_cudart, 0x7f0000001000ULL, GS_FRAME_NATIVE, f_sync, 0);
	uint32_t l_launch = fx_loc(p, x->m_cudart, 0x7f0000002000ULL, GS_FRAME_NATIVE, f_launch, 0);
	uint32_t l_wloop = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_wloop, 250);
	uint32_t l_getitem = fx_loc(p, x->m_py, 0, GS_FRAME_PYTHON, f_getitem, 33);
	uint32_t l_unknown = fx_loc(p, x->m_special, 0, GS_FRAME_SPECIAL, f_unknown, 0);
	uint32_t l_idle = fx_loc(p, x->m_kern, 0xffffffff81002000ULL, GS_FRAME_KERNEL, f_idle, 0);
	uint32_t l_noline = gs_profile_add_location(p, x->m_pyrt, 0x404321, GS_FRAME_NATIVE, NULL,
						    0);
	/* GPU PCs: 0x1a0 at tile.cuh:42 inlined into matmul.cu:50; 0x1b0 at matmul.cu:43 */
	struct gs_line pc1[2] = { { .function = f_tile, .line = 42 },
				  { .function = f_kernel, .line = 50 } };
	uint32_t l_pc1 = gs_profile_add_location(p, x->m_cubin, 0x1a0, GS_FRAME_GPU_PC, pc1, 2);
	uint32_t l_pc2 = fx_loc(p, x->m_cubin, 0x1b0, GS_FRAME_GPU_PC, f_kernel, 43);

	/* Samples, deliberately not in time order across stacks. */
	uint32_t s_sync[] = { l_main, l_mod10, l_step22, l_sync };
	fx_samples(p, s_sync, 4, 2, 1200, 1200, "python3", "main", 800000000, 10000000);
	uint32_t s_cpu[] = { l_main, l_mod10, l_step20, l_addmm, l_noline };
	fx_samples(p, s_cpu, 5, 3, 1200, 1200, "python3", "main", 100000000, 10000000);
	uint32_t s_in[] = { l_main, l_mod10, l_next, l_nextd, l_get, l_poll, l_sys };
	fx_samples(p, s_in, 7, 5, 1200, 1200, "python3", "main", 300000000, 10000000);
	uint32_t s_w[] = { l_main, l_wloop, l_getitem };
	fx_samples(p, s_w, 3, 4, 1201, 1201, "pt_data_worker", "dataloader", 200000000, 20000000);
	uint32_t s_idle[] = { l_idle };
	fx_samples(p, s_idle, 1, 1, 0, 0, "swapper/0", NULL, 500000000, 1);

	uint32_t g1[] = { l_main, l_mod10, l_step21, l_launch, l_pc1 };
	fx_gpu(p, g1, 5, 120, 100, "long_scoreboard", "exact", 1200, 1200);
	uint32_t g2[] = { l_main, l_mod10, l_step21, l_launch, l_pc2 };
	fx_gpu(p, g2, 5, 40, 0, "selected", "exact", 1200, 1200);
	uint32_t g3[] = { l_unknown, l_pc2 };
	fx_gpu(p, g3, 2, 10, 10, "long_scoreboard", NULL, 0, 0);

	struct gs_process main_p = { .pid = 1200,
				     .ppid = 1,
				     .comm = gs_profile_intern(p, "python3"),
				     .role = gs_profile_intern(p, "main"),
				     .python = gs_profile_intern(p, "CPython 3.11.2"),
				     .gpu = gs_profile_intern(p,
							      "agent armed, PC sampling on GPU0"),
				     .cpu_samples = 10 };
	gs_profile_add_process(p, &main_p);
	struct gs_process w = { .pid = 1201,
				.ppid = 1200,
				.comm = gs_profile_intern(p, "pt_data_worker"),
				.role = gs_profile_intern(p, "dataloader"),
				.python = gs_profile_intern(p, "CPython 3.11.2"),
				.cpu_samples = 4,
				.exited = true,
				.ns_pid = 7 /* in a container */ };
	gs_profile_add_process(p, &w);
	gs_profile_add_comment(p, "gpusample %s: 100 Hz CPU sampling", "0.1.0");
	gs_profile_add_comment(p, "gpu0 pc sampling factor 20");
	gs_profile_add_note(p, "python: 1 frame could not be read (test note)");
}

/* One off-CPU sample: dur ns in state ("blocked"/"runnable") at t0 on
 * stack st, as the off-CPU collector makes them (samples 0, cpu 0). */
static inline void fx_offcpu(struct gs_profile *p, uint32_t st, uint32_t pid, uint32_t tid,
			     const char *comm, const char *role, const char *state, uint64_t t0,
			     int64_t dur)
{
	struct gs_sample s = { .stack = st, .time_ns = t0 };
	struct gs_sample_ctx s_c = { .pid = pid,
				     .tid = tid,
				     .cuda_device = -1,
				     .thread_name = gs_profile_intern(p, comm),
				     .process_role = gs_profile_intern(p, role) };
	s.values[GS_V_OFFCPU_NS] = dur;
	s_c.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(p, state);
	gs_profile_add_sample(p, &s, &s_c);
}

/* The fixture's stacks by what they do (indexes into samples[]). */
#define FX_ST_SYNC(p)   ((p)->samples[0].stack)
#define FX_ST_CPU(p)    ((p)->samples[2].stack)
#define FX_ST_INPUT(p)  ((p)->samples[5].stack)
#define FX_ST_WORKER(p) ((p)->samples[10].stack)

/* Off-CPU data for the fixture: the main thread's wall time becomes 1 s =
 * 100 ms on-CPU (30 compute, 50 input, 20 sync) + 600 ms blocked under the
 * DataLoader + 200 ms runnable in compute + 100 ms blocked in
 * cudaStreamSynchronize: compute 3%, input 65%, sync 12%, starved 20%,
 * tiling [0, 1 s) around the CPU ticks' periods (95-125, 295-345,
 * 795-815 ms).  The worker: 40 ms on-CPU + 50 ms blocked + 10 ms runnable,
 * between its ticks (195-265 ms). */
static inline void fx_add_offcpu(struct fx *x)
{
	struct gs_profile *p = &x->p;
	uint32_t in = FX_ST_INPUT(p), cpu = FX_ST_CPU(p), sync = FX_ST_SYNC(p), w = FX_ST_WORKER(p);
	const uint64_t ms = 1000000;
	fx_offcpu(p, cpu, 1200, 1200, "python3", "main", "runnable", 0, 95 * ms);
	fx_offcpu(p, in, 1200, 1200, "python3", "main", "blocked", 125 * ms, 150 * ms);
	fx_offcpu(p, cpu, 1200, 1200, "python3", "main", "runnable", 275 * ms, 20 * ms);
	fx_offcpu(p, in, 1200, 1200, "python3", "main", "blocked", 345 * ms, 450 * ms);
	fx_offcpu(p, cpu, 1200, 1200, "python3", "main", "runnable", 815 * ms, 85 * ms);
	fx_offcpu(p, sync, 1200, 1200, "python3", "main", "blocked", 900 * ms, 100 * ms);
	for (int i = 0; i < 3; i++)
		fx_offcpu(p, w, 1201, 1201, "pt_data_worker", "dataloader", "blocked",
			  (205 + 20 * i) * ms, 10 * ms);
	fx_offcpu(p, w, 1201, 1201, "pt_data_worker", "dataloader", "blocked", 265 * ms, 20 * ms);
	fx_offcpu(p, w, 1201, 1201, "pt_data_worker", "dataloader", "runnable", 285 * ms, 10 * ms);
}

/* The terminal report of p (default options) as a malloc'ed string; NULL
 * when gs_write_report fails. */
static inline char *fx_report(const struct gs_profile *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc = f ? gs_write_report(p, NULL, f) : -ENOMEM;
	if (f)
		fclose(f);
	if (rc) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Repository root (tests run from it; GS_SRCDIR overrides). */
static inline const char *fx_root(void)
{
	const char *r = getenv("GS_SRCDIR");
	return r && *r ? r : ".";
}

/* Run a shell command, capture stdout into a malloc'ed string; *status = exit code. */
static inline char *fx_run(const char *cmd, int *status)
{
	FILE *f = popen(cmd, "r");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	size_t r;
	while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += r;
		if (cap - n < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	int st = pclose(f);
	if (buf)
		buf[n] = 0;
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return buf;
}

static inline bool fx_have(const char *tool)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static inline char *fx_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	if (b)
		b[n] = 0;
	fclose(f);
	if (len && b)
		*len = (size_t)n;
	return b;
}

/* A Criterion suite whose tests write into `tmpdir`, a fresh
 * /tmp/gs-TAG-XXXXXX made before and removed after each test (use after
 * including criterion/criterion.h). */
#define FX_TMPDIR_SUITE(suite, tag)                                         \
	static char tmpdir[64];                                             \
	static void fx_tmpdir_setup(void)                                   \
	{                                                                   \
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs-" tag "-XXXXXX"); \
		cr_assert_not_null(mkdtemp(tmpdir));                        \
	}                                                                   \
	static void fx_tmpdir_teardown(void)                                \
	{                                                                   \
		char cmd[128];                                              \
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);            \
		(void)!system(cmd);                                         \
	}                                                                   \
	TestSuite(suite, .init = fx_tmpdir_setup, .fini = fx_tmpdir_teardown, .timeout = 120)

#endif
