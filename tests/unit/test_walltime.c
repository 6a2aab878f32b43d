// SPDX-License-Identifier: MIT
/* Wall-clock classification (output/walltime.c): each category from its
 * frames and thread state, the priority between them, and gs_wall_split's
 * sums and top stacks. */
#include <criterion/criterion.h>
#include <errno.h>

#include "output/output.h"
#include "output_fixture.h"

struct cls_fx {
	struct gs_profile p;
	uint32_t m_py, m_nat, m_k;
};

static void cls_init(struct cls_fx *c)
{
	gs_profile_init(&c->p);
	c->p.period_ns = FX_PERIOD;
	c->m_py = fx_map(&c->p, "[python]", NULL, 0, 0, true);
	c->m_nat = fx_map(&c->p, "/usr/lib/libx.so", NULL, 0x1000, 0x100000, false);
	c->m_k = fx_map(&c->p, "[kernel.kallsyms]", NULL, 0, 0, false);
}

/* Location of a Python function "name" in file, or a native/kernel one. */
static uint32_t py(struct cls_fx *c, const char *name, const char *file)
{
	return fx_loc(&c->p, c->m_py, 0, GS_FRAME_PYTHON, fx_fn(&c->p, name, NULL, file, 1), 2);
}

static uint32_t nat(struct cls_fx *c, const char *name)
{
	static uint64_t addr = 0x2000;
	return fx_loc(&c->p, c->m_nat, addr += 16, GS_FRAME_NATIVE,
		      fx_fn(&c->p, name, NULL, NULL, 0), 0);
}

static uint32_t kern(struct cls_fx *c, const char *name)
{
	static uint64_t addr = 0xffffffff81000000ULL;
	return fx_loc(&c->p, c->m_k, addr += 16, GS_FRAME_KERNEL, fx_fn(&c->p, name, NULL, NULL, 0),
		      0);
}

/* Category of a sample on root-first locs in state (NULL = a CPU sample
 * without label; "running" = a CPU sample with one). */
static int classify(struct cls_fx *c, const uint32_t *root_first, uint32_t n, const char *state)
{
	uint32_t leaf_first[32];
	for (uint32_t i = 0; i < n; i++)
		leaf_first[i] = root_first[n - 1 - i];
	struct gs_sample s = { .stack = (uint32_t)gs_profile_add_stack(&c->p, leaf_first, n) };
	struct gs_sample_ctx s_c = { .cuda_device = -1, .pid = 1, .tid = 1 };
	if (state && strcmp(state, "running"))
		s.values[GS_V_OFFCPU_NS] = 1000;
	else
		s.values[GS_V_SAMPLES] = 1;
	s_c.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(&c->p, state);
	s.ctx = (uint32_t)gs_profile_add_ctx(&c->p, &s_c);
	return gs_wall_classify(&c->p, &s);
}

#define DL "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py"
#define EXPECT(cat, state, ...)                                                                    \
	do {                                                                                       \
		uint32_t l_[] = { __VA_ARGS__ };                                                   \
		int got_ = classify(&c, l_, sizeof(l_) / sizeof(l_[0]), state);                    \
		cr_expect_eq(got_, cat, "line %d: %s, want %s", __LINE__,                          \
			     got_ >= 0 ? gs_wall_cat_name[got_] : "error", gs_wall_cat_name[cat]); \
	} while (0)

Test(walltime, each_category_by_frames)
{
	struct cls_fx c;
	cls_init(&c);
	uint32_t mod = py(&c, "<module>", "/home/u/train.py");
	uint32_t next = py(&c, "_BaseDataLoaderIter.__next__", DL);
	uint32_t nextd = py(&c, "_MultiProcessingDataLoaderIter._next_data", DL);
	uint32_t get = py(&c, "Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py");
	uint32_t poll = nat(&c, "poll"), futex = kern(&c, "futex_wait"),
		 sched = kern(&c, "__schedule");
	/* input: blocked and on-CPU under the DataLoader iterator */
	EXPECT(GS_WALL_INPUT, "blocked", mod, next, nextd, get, poll, futex, sched);
	EXPECT(GS_WALL_INPUT, "running", mod, next, nextd, get);
	EXPECT(GS_WALL_INPUT, NULL, mod, next);
	/* the same wait outside the DataLoader is other blocking; on-CPU compute */
	EXPECT(GS_WALL_OTHER_BLOCKED, "blocked", mod, get, poll, futex, sched);
	EXPECT(GS_WALL_COMPUTE, "running", mod, get);
	/* a __next__ that is not torch.utils.data's */
	EXPECT(GS_WALL_COMPUTE, "running", mod, py(&c, "MyIter.__next__", "/home/u/it.py"));
	/* runnable is starvation whatever the frames */
	EXPECT(GS_WALL_STARVED, "runnable", mod, next, nextd, get);
	EXPECT(GS_WALL_STARVED, "runnable", mod, nat(&c, "cudaStreamSynchronize"));
	/* CUDA sync, blocked or spinning on-CPU, every entry point */
	const char *syncs[] = {
		"cudaStreamSynchronize",
		"cudaDeviceSynchronize",
		"cudaEventSynchronize",
		"cuStreamSynchronize",
		"cuStreamSynchronize_ptsz",
		"cuCtxSynchronize",
		"cudaMemcpy",
		"cuMemcpyDtoH_v2",
		"at::native::_local_scalar_dense_cuda(at::Tensor const&)",
		"c10::cuda::memcpy_and_sync(void*, void*, long, cudaMemcpyKind, CUstream_st*)",
		"at::native::copy_kernel_cuda(at::TensorIterator&, bool)",
		"c10::cuda::stream_synchronize(CUstream_st*)"
	};
	for (size_t i = 0; i < sizeof(syncs) / sizeof(syncs[0]); i++) {
		uint32_t s = nat(&c, syncs[i]),
			 spin = gs_profile_add_location(&c.p, c.m_nat, 0x9000 + i, GS_FRAME_NATIVE,
							NULL, 0);
		EXPECT(GS_WALL_CUDA_SYNC, "running", mod, s, spin);
		EXPECT(GS_WALL_CUDA_SYNC, "blocked", mod, s, futex, sched);
	}
	EXPECT(GS_WALL_CUDA_SYNC, "blocked", mod,
	       py(&c, "synchronize", "/x/torch/cuda/__init__.py"), futex);
	EXPECT(GS_WALL_COMPUTE, "running", mod, nat(&c, "cudaMemcpyAsync"));
	EXPECT(GS_WALL_COMPUTE, "running", mod, nat(&c, "cudaLaunchKernel"));
	/* .item() of a CPU tensor is no sync */
	EXPECT(GS_WALL_COMPUTE, "running", mod, nat(&c, "THPVariable_item"),
	       nat(&c, "at::_ops::_local_scalar_dense::call(at::Tensor const&)"),
	       nat(&c, "at::native::_local_scalar_dense_cpu(at::Tensor const&)"));
	/* collectives */
	EXPECT(GS_WALL_COLLECTIVE, "blocked", mod,
	       py(&c, "all_reduce", "/x/torch/distributed/distributed_c10d.py"), futex);
	EXPECT(GS_WALL_COLLECTIVE, "blocked", mod,
	       py(&c, "barrier", "/x/torch/distributed/distributed_c10d.py"));
	EXPECT(GS_WALL_COLLECTIVE, "blocked", mod,
	       nat(&c, "c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<long>)"),
	       futex);
	EXPECT(GS_WALL_COLLECTIVE, "running", mod,
	       nat(&c, "c10d::Reducer::mark_variable_ready(unsigned long)"));
	EXPECT(GS_WALL_COLLECTIVE, "running", mod,
	       nat(&c, "gloo::transport::tcp::UnboundBuffer::waitRecv(int*, "
		       "std::chrono::duration<long>)"));
	EXPECT(GS_WALL_COLLECTIVE, "running", mod, nat(&c, "ncclAllReduce"));
	/* GIL */
	EXPECT(GS_WALL_GIL, "blocked", mod, nat(&c, "take_gil"), futex);
	EXPECT(GS_WALL_GIL, "blocked", mod, nat(&c, "PyEval_RestoreThread"),
	       nat(&c, "pthread_cond_timedwait"));
	/* sleep: CPython, libc, kernel */
	EXPECT(GS_WALL_SLEEP, "blocked", mod, nat(&c, "time_sleep"), nat(&c, "clock_nanosleep"));
	EXPECT(GS_WALL_SLEEP, "blocked", mod, nat(&c, "__GI___clock_nanosleep"));
	EXPECT(GS_WALL_SLEEP, "blocked", mod, kern(&c, "__x64_sys_clock_nanosleep"),
	       kern(&c, "do_nanosleep"));
	/* an old file: off-CPU time without a state label is blocking */
	EXPECT(GS_WALL_OTHER_BLOCKED, "", mod, poll);
	gs_profile_free(&c.p);
}

Test(walltime, priority_between_categories)
{
	struct cls_fx c;
	cls_init(&c);
	uint32_t mod = py(&c, "<module>", "/home/u/train.py");
	uint32_t next = py(&c, "_BaseDataLoaderIter.__next__", DL);
	uint32_t coll = py(&c, "collate", "/home/u/train.py");
	uint32_t sleep = nat(&c, "clock_nanosleep"), gil = nat(&c, "take_gil");
	uint32_t item = nat(&c, "at::native::_local_scalar_dense_cuda(at::Tensor const&)");
	uint32_t sync = nat(&c, "cudaStreamSynchronize");
	uint32_t ar = nat(&c, "c10d::ProcessGroupGloo::AsyncWork::wait()");
	/* a sleeping collate_fn under the DataLoader is input wait */
	EXPECT(GS_WALL_INPUT, "blocked", mod, next, coll, sleep);
	/* a host sync inside input is sync; the GIL under input is GIL */
	EXPECT(GS_WALL_CUDA_SYNC, "blocked", mod, next, item);
	EXPECT(GS_WALL_GIL, "blocked", mod, next, gil);
	/* a collective that synchronizes a stream is a collective wait */
	EXPECT(GS_WALL_COLLECTIVE, "running", mod, ar, sync);
	EXPECT(GS_WALL_GIL, "blocked", mod, ar, gil);
	gs_profile_free(&c.p);
}

/* Importing torch.distributed runs distributed_c10d.py's module code (and
 * c10d's initializers) under importlib: no collective is waited for. */
Test(walltime, importing_torch_distributed_is_no_collective)
{
	struct cls_fx c;
	cls_init(&c);
	uint32_t mod = py(&c, "<module>", "/home/u/train.py");
	uint32_t imp = py(&c, "_find_and_load", "<frozen importlib._bootstrap>");
	uint32_t c10d_mod = py(&c, "<module>", "/x/torch/distributed/distributed_c10d.py");
	uint32_t c10d_fn = py(&c, "_register_backend", "/x/torch/distributed/distributed_c10d.py");
	uint32_t init = nat(&c, "c10d::ProcessGroupGloo::ProcessGroupGloo()");
	uint32_t ar = py(&c, "all_reduce", "/x/torch/distributed/distributed_c10d.py");
	uint32_t futex = kern(&c, "futex_wait");

	EXPECT(GS_WALL_COMPUTE, "running", mod, imp, c10d_mod);
	EXPECT(GS_WALL_COMPUTE, "running", mod, imp, c10d_mod, c10d_fn, init);
	EXPECT(GS_WALL_OTHER_BLOCKED, "blocked", mod, imp, c10d_mod, futex);
	/* an import inside a collective call is still that call's wait */
	EXPECT(GS_WALL_COLLECTIVE, "blocked", mod, ar, imp, c10d_mod, futex);
	EXPECT(GS_WALL_COLLECTIVE, "blocked", mod, ar, futex);
	gs_profile_free(&c.p);
}

Test(walltime, gpu_sample_is_einval)
{
	struct fx x;
	fx_build(&x);
	const struct gs_sample *g = &x.p.samples[x.p.n_samples - 1];
	cr_assert_geq(gs_profile_ctx(&x.p, g)->cuda_device, 0);
	cr_assert_eq(gs_wall_classify(&x.p, g), -EINVAL);
	gs_profile_free(&x.p);
}

static bool keep_pid(const struct gs_sample *s, const struct gs_sample_ctx *c, void *ctx)
{
	return c->pid == *(uint32_t *)ctx;
}

/* The split of a thread sums to its cpu + offcpu; categories and top
 * stacks per thread. */
Test(walltime, split_sums_and_top_stacks)
{
	struct fx x;
	fx_build(&x);
	fx_add_offcpu(&x);
	struct gs_wall_split s;
	uint32_t pid = 1200;
	cr_assert_eq(gs_wall_split(&x.p, keep_pid, &pid, &s), 0);
	cr_assert_eq(s.total_ns, 1000000000ULL);
	cr_assert_eq(s.ns[GS_WALL_COMPUTE], 30000000ULL);
	cr_assert_eq(s.ns[GS_WALL_INPUT], 650000000ULL);
	cr_assert_eq(s.ns[GS_WALL_CUDA_SYNC], 120000000ULL);
	cr_assert_eq(s.ns[GS_WALL_STARVED], 200000000ULL);
	uint64_t sum = 0;
	for (int c = 0; c < GS_NWALL_CATS; c++)
		sum += s.ns[c];
	cr_assert_eq(sum, s.total_ns);
	cr_assert_eq(s.top_stack[GS_WALL_INPUT], FX_ST_INPUT(&x.p));
	cr_assert_eq(s.top_stack[GS_WALL_CUDA_SYNC], FX_ST_SYNC(&x.p));
	cr_assert_eq(s.top_stack[GS_WALL_STARVED], FX_ST_CPU(&x.p));
	cr_assert_eq(s.top_stack[GS_WALL_GIL], UINT32_MAX);
	cr_assert_eq(s.top_stacks[GS_WALL_INPUT][0], FX_ST_INPUT(&x.p));
	cr_assert_eq(s.top_ns[GS_WALL_INPUT][0], 650000000ULL);
	cr_assert_eq(s.top_stacks[GS_WALL_INPUT][1], UINT32_MAX, "one input stack");
	cr_assert_eq(s.starved_in[GS_WALL_COMPUTE], 200000000ULL, "runnable in compute frames");
	cr_assert_gt(s.python_ns, 0, "the fixture's main thread has Python frames");
	cr_assert_leq(s.python_ns, s.total_ns);
	pid = 1201;
	cr_assert_eq(gs_wall_split(&x.p, keep_pid, &pid, &s), 0);
	cr_assert_eq(s.total_ns, 100000000ULL);
	cr_assert_eq(s.ns[GS_WALL_COMPUTE], 40000000ULL);
	cr_assert_eq(s.ns[GS_WALL_OTHER_BLOCKED], 50000000ULL);
	cr_assert_eq(s.ns[GS_WALL_STARVED], 10000000ULL);
	/* runnable under the DataLoader and in a sync: split by what it did */
	fx_offcpu(&x.p, FX_ST_INPUT(&x.p), 1201, 1201, "w", "dataloader", "runnable", 0, 7000000);
	fx_offcpu(&x.p, FX_ST_SYNC(&x.p), 1201, 1201, "w", "dataloader", "runnable", 0, 3000000);
	cr_assert_eq(gs_wall_split(&x.p, keep_pid, &pid, &s), 0);
	cr_assert_eq(s.ns[GS_WALL_STARVED], 20000000ULL);
	cr_assert_eq(s.starved_in[GS_WALL_COMPUTE], 10000000ULL);
	cr_assert_eq(s.starved_in[GS_WALL_INPUT], 7000000ULL);
	cr_assert_eq(s.starved_in[GS_WALL_CUDA_SYNC], 3000000ULL);
	/* NULL keep: every CPU sample, GPU samples never */
	cr_assert_eq(gs_wall_split(&x.p, NULL, NULL, &s), 0);
	cr_assert_eq(s.total_ns,
		     1000000000ULL + 110000000ULL + 10000000ULL); /* + the pid-0 sample */
	gs_profile_free(&x.p);
}

Test(walltime, names_cover_every_category)
{
	for (int c = 0; c < GS_NWALL_CATS; c++)
		cr_assert(gs_wall_cat_name[c] && *gs_wall_cat_name[c], "category %d has no name",
			  c);
}

/* A Python process whose Python frames could not be read: the split says
 * how much of the time had Python frames (none), and the report gives no
 * verdict from native frames alone but says why. */
Test(walltime, no_python_frames_no_verdict)
{
	struct gs_profile p;
	gs_profile_init(&p);
	p.period_ns = FX_PERIOD;
	uint32_t m = fx_map(&p, "/usr/lib/libc.so.6", NULL, 0x1000, 0x100000, false);
	uint32_t k = fx_map(&p, "[kernel.kallsyms]", NULL, 0, 0, false);
	uint32_t stack[3] = {
		fx_loc(&p, m, 0x1100, GS_FRAME_NATIVE, fx_fn(&p, "main", NULL, NULL, 0), 0),
		fx_loc(&p, m, 0x1200, GS_FRAME_NATIVE, fx_fn(&p, "poll", NULL, NULL, 0), 0),
		fx_loc(&p, k, 0xffffffff81000010ULL, GS_FRAME_KERNEL,
		       fx_fn(&p, "do_sys_poll", NULL, NULL, 0), 0)
	};
	fx_samples(&p, stack, 2, 5, 900, 900, "python3.14", "main", 0, FX_PERIOD);
	uint32_t leaf_first[3] = { stack[2], stack[1], stack[0] };
	uint32_t st = (uint32_t)gs_profile_add_stack(&p, leaf_first, 3);
	fx_offcpu(&p, st, 900, 900, "python3.14", "main", "blocked", 100000000ULL, 500000000LL);
	struct gs_wall_split s;
	uint32_t pid = 900;
	cr_assert_eq(gs_wall_split(&p, keep_pid, &pid, &s), 0);
	cr_assert_gt(s.total_ns, 0);
	cr_assert_eq(s.python_ns, 0);
	char *r = fx_report(&p);
	cr_assert_not_null(r);
	cr_assert_not_null(strstr(r, "no Python frames from this Python process"), "%s", r);
	free(r);
	gs_profile_free(&p);
}
