/* SPDX-License-Identifier: MIT */
/* Thread roles from frames (symbolizer/thread_roles.c). */
#include <criterion/criterion.h>

#include "output_fixture.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h"
#include "keep_profile.h"

struct roles_fx {
	struct gs_profile p;
	uint32_t l_clone, l_start, l_main, l_mod, l_boot, l_run, l_pin, l_feed, l_wloop, l_getitem,
	    l_gomp, l_conv, l_autograd, l_tmain, l_gloo, l_c10d_allreduce;
};

static void build(struct roles_fx *x)
{
	struct gs_profile *p = &x->p;
	uint32_t m_py, m_so;

	gs_profile_init(p);
	m_py = fx_map(p, "[python]", NULL, 0, 0, true);
	m_so = fx_map(p, "/usr/lib/libtorch_cpu.so", "ab", 0x1000, 0x900000, false);
#define NAT(name, addr) fx_loc(p, m_so, addr, GS_FRAME_NATIVE, fx_fn(p, name, NULL, NULL, 0), 0)
#define PY(name, file, line) \
	fx_loc(p, m_py, 0, GS_FRAME_PYTHON, fx_fn(p, name, NULL, file, 1), line)
	x->l_clone = NAT("clone3", 0x1100);
	x->l_start = NAT("_start", 0x1200);
	x->l_main = NAT("main", 0x1300);
	x->l_mod = PY("<module>", "/home/u/train.py", 3);
	x->l_boot = PY("Thread._bootstrap", "/usr/lib/python3.11/threading.py", 995);
	x->l_run = PY("Thread.run", "/usr/lib/python3.11/threading.py", 975);
	x->l_pin = PY("_pin_memory_loop",
		      "/usr/lib/python3/dist-packages/torch/utils/data/_utils/pin_memory.py", 49);
	x->l_feed = PY("Queue._feed", "/usr/lib/python3.11/multiprocessing/queues.py", 239);
	x->l_wloop = PY("_worker_loop",
			"/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", 302);
	x->l_getitem = PY("Data.__getitem__", "/home/u/train.py", 20);
	x->l_gomp = NAT("gomp_thread_start", 0x2000);
	x->l_conv = NAT("at::native::conv2d(at::Tensor const&)", 0x2100);
	x->l_autograd = NAT("torch::autograd::Engine::thread_init(int, "
			    "std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
			    0x2200);
	x->l_tmain = NAT("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::"
			 "GraphTask> const&)",
			 0x2300);
	x->l_gloo = NAT("gloo::transport::tcp::Loop::run()", 0x2400);
	x->l_c10d_allreduce = NAT("c10d::ProcessGroupGloo::allreduce(std::vector<at::Tensor>&)",
				  0x2500);
#undef NAT
#undef PY
}

static const char *role_of(const struct gs_profile *p, uint32_t tid)
{
	for (size_t i = 0; i < p->n_samples; i++)
		if (gs_profile_ctx(p, &p->samples[i])->tid == tid)
			return gs_profile_str(
			    p, gs_profile_ctx(p, &p->samples[i])->str_labels[GS_SL_THREAD_ROLE]);
	return NULL;
}

Test(thread_roles, pytorch_job_threads)
{
	struct roles_fx x;
	struct gs_profile *p = &x.p;

	build(&x);
	/* main thread: the training loop, also running autograd and c10d on
	 * its own stack (CPU backward runs on the caller): still main */
	uint32_t main1[] = { x.l_start, x.l_main, x.l_mod, x.l_tmain, x.l_c10d_allreduce };
	uint32_t main2[] = { x.l_start, x.l_main, x.l_mod, x.l_conv };
	fx_samples(p, main1, 5, 3, 100, 100, "python3", "main", 0, 1);
	fx_samples(p, main2, 4, 5, 100, 100, "python3", "main", 0, 1);
	uint32_t pin[] = { x.l_clone, x.l_boot, x.l_run, x.l_pin };
	fx_samples(p, pin, 4, 2, 100, 101, "python3", "main", 0, 1);
	uint32_t feed[] = { x.l_clone, x.l_boot, x.l_run, x.l_feed };
	fx_samples(p, feed, 4, 1, 100, 102, "python3", "main", 0, 1);
	uint32_t omp[] = { x.l_clone, x.l_gomp, x.l_conv };
	fx_samples(p, omp, 3, 4, 100, 103, "python3", "main", 0, 1);
	uint32_t ag[] = { x.l_clone, x.l_autograd, x.l_tmain, x.l_conv };
	fx_samples(p, ag, 4, 2, 100, 104, "python3", "main", 0, 1);
	uint32_t gl[] = { x.l_clone, x.l_gloo };
	fx_samples(p, gl, 2, 1, 100, 105, "python3", "main", 0, 1);
	/* an unmatched thread, and one named by torch >= 2 */
	uint32_t plain[] = { x.l_clone, x.l_conv };
	fx_samples(p, plain, 2, 1, 100, 106, "python3", "main", 0, 1);
	fx_samples(p, plain, 2, 1, 100, 107, "pt_autograd_0", "main", 0, 1);
	fx_samples(p, plain, 2, 1, 100, 109, "pt_data_pin", "main", 0, 1);
	fx_samples(p, plain, 2, 1, 100, 110, "pt_gloo_runloop", "main", 0, 1);
	/* a stripped pool: only the object's name says what it is */
	uint32_t m_pool = fx_map(p, "/usr/lib/x86_64-linux-gnu/libpthreadpool.so.0", "cd", 0xa000,
				 0xb000, false);
	uint32_t pool[] = { x.l_clone,
			    gs_profile_add_location(p, m_pool, 0xa79e, GS_FRAME_NATIVE, NULL, 0) };
	fx_samples(p, pool, 2, 2, 100, 108, "python3", "main", 0, 1);
	/* a forked DataLoader worker: the parent's frames, then _worker_loop */
	uint32_t w[] = { x.l_start, x.l_main, x.l_mod, x.l_wloop, x.l_getitem };
	fx_samples(p, w, 5, 6, 200, 200, "python3", "dataloader", 0, 1);
	uint32_t wf[] = { x.l_clone, x.l_boot, x.l_run, x.l_feed };
	fx_samples(p, wf, 4, 1, 200, 201, "python3", "dataloader", 0, 1);

	cr_assert_eq(gs_thread_roles(p), 0);
	cr_assert_str_eq(role_of(p, 100), "main");
	cr_assert_str_eq(role_of(p, 101), "pin_memory");
	cr_assert_str_eq(role_of(p, 102), "queue_feeder");
	cr_assert_str_eq(role_of(p, 103), "intra_op_pool");
	cr_assert_str_eq(role_of(p, 104), "autograd_engine");
	cr_assert_str_eq(role_of(p, 105), "collective");
	cr_assert_str_eq(role_of(p, 106), "other");
	cr_assert_str_eq(role_of(p, 107), "autograd_engine");
	cr_assert_str_eq(role_of(p, 108), "intra_op_pool");
	cr_assert_str_eq(role_of(p, 109), "pin_memory");
	cr_assert_str_eq(role_of(p, 110), "collective");
	cr_assert_str_eq(role_of(p, 200), "dataloader_worker");
	cr_assert_str_eq(role_of(p, 201), "queue_feeder");
	/* every sample of a thread carries its role */
	for (size_t i = 0; i < p->n_samples; i++)
		cr_assert_str_eq(
		    gs_profile_str(
			p, gs_profile_ctx(p, &p->samples[i])->str_labels[GS_SL_THREAD_ROLE]),
		    role_of(p, gs_profile_ctx(p, &p->samples[i])->tid));
	gs_test_keep_profile(p);
	gs_profile_free(p);
}

Test(thread_roles, gpu_samples_untouched)
{
	struct roles_fx x;
	struct gs_sample s = { 0 };
	struct gs_sample_ctx s_c = { .cuda_device = 0, .pid = 100, .tid = 100 };

	build(&x);
	s.stack = (uint32_t)gs_profile_add_stack(&x.p, &x.l_conv, 1);
	s.values[GS_V_GPU_SAMPLES] = 3;
	gs_profile_add_sample(&x.p, &s, &s_c);
	cr_assert_eq(gs_thread_roles(&x.p), 0);
	cr_assert_eq(gs_profile_ctx(&x.p, &x.p.samples[0])->str_labels[GS_SL_THREAD_ROLE], 0);
	gs_test_keep_profile(&x.p);
	gs_profile_free(&x.p);
}
