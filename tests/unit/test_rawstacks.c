// SPDX-License-Identifier: MIT
/* session/rawstacks.c: stacks are interned from the codec's views of real
 * records, so a launch stack (a CPU sample with origin launch) narrowed to
 * the program's frames is the same raw stack as a timer sample with those
 * frames, and a view's frame runs are stored in order. */
#include <criterion/criterion.h>
#include <string.h>

#include "session/rawstacks.h"

static _Alignas(8) unsigned char buf[2][4096];

/* A record in b: a bare CPU sample (fixed 0) or a launch (fixed = its
 * fixed part) whose stack has the given kernel ips, user ips and Python
 * frames; decoded by the codec into v. */
static void record(unsigned char *b, size_t fixed, uint16_t origin, const __u64 *k, int nk,
		   const __u64 *u, int nu, const struct gs_py_frame *py, int np,
		   struct gs_rec_cpu_view *v)
{
	struct gs_cpu_sample *s = (void *)(b + fixed);
	size_t size = sizeof(*s) + ((size_t)nk + nu + 2 * np) * sizeof(__u64);

	memset(b, 0, sizeof(buf[0]));
	s->hdr = (struct gs_rec_hdr){ .type = GS_REC_CPU_SAMPLE,
				      .version = GS_RECORDS_VERSION,
				      .size = (uint32_t)size };
	s->tgid = 42;
	s->origin = origin;
	s->n_kernel = (uint8_t)nk;
	s->n_user = (uint8_t)nu;
	s->n_python = (uint16_t)np;
	memcpy(s->frames, k, nk * sizeof(*k));
	memcpy(s->frames + nk, u, nu * sizeof(*u));
	memcpy(s->frames + nk + nu, py, np * sizeof(*py));
	if (fixed)
		*(struct gs_rec_hdr *)b = (struct gs_rec_hdr){ .type = GS_REC_GPU_LAUNCH,
							       .version = GS_RECORDS_VERSION,
							       .size = (uint32_t)(fixed + size) };
	cr_assert_eq(gs_rec_stack((void *)b, v), 0, "the codec takes the record");
}

static const __u64 kips[] = { 0xffffffff81000010, 0xffffffff81000020 };
static const __u64 agent[] = { 0x7f00000010 };                /* the agent's callback path */
static const __u64 prog[] = { 0x401000, 0x402000, 0x403000 }; /* the program's frames */
static const struct gs_py_frame py[] = { { .code = 0x7f1000, .lasti = 8 } };

Test(rawstacks, narrowed_launch_stack_is_the_timer_sample)
{
	struct gs_rawstacks t;
	struct gs_rec_cpu_view timer, launch;
	__u64 user[4];
	bool is_new;

	gs_rawstacks_init(&t);
	record(buf[0], 0, GS_ORIGIN_TIMER, kips, 0, prog, 3, py, 1, &timer);
	int64_t a = gs_rawstacks_intern(&t, &timer, 0, &is_new);
	cr_assert_geq(a, 0);
	cr_expect(is_new);

	memcpy(user, agent, sizeof(agent));
	memcpy(user + 1, prog, sizeof(prog));
	record(buf[1], sizeof(struct gs_gpu_launch), GS_ORIGIN_LAUNCH, kips, 2, user, 4, py, 1,
	       &launch);
	cr_expect_eq(launch.s->origin, GS_ORIGIN_LAUNCH);
	int64_t whole = gs_rawstacks_intern(&t, &launch, 0, &is_new);
	cr_expect(is_new && whole != a, "with kernel and agent frames: another stack");

	/* what session/gpu.c does to a launch stack: no kernel frames, no agent path */
	launch.kernel += launch.n_kernel;
	launch.n_kernel = 0;
	launch.user += 1;
	launch.n_user -= 1;
	int64_t b = gs_rawstacks_intern(&t, &launch, 0, &is_new);
	cr_expect_eq(b, a, "the narrowed launch stack is the timer sample's");
	cr_expect(!is_new);
	cr_expect_eq(t.n, 2);
	gs_rawstacks_free(&t);
}

Test(rawstacks, runs_stored_in_order_and_flags_count)
{
	struct gs_rawstacks t;
	struct gs_rec_cpu_view v;
	bool is_new;

	gs_rawstacks_init(&t);
	record(buf[0], 0, GS_ORIGIN_TIMER, kips, 2, prog, 3, py, 1, &v);
	int64_t a = gs_rawstacks_intern(&t, &v, 0, &is_new);
	cr_assert_geq(a, 0);
	const struct gs_rawstack *r = &t.items[a];
	cr_expect(r->tgid == 42 && r->n_kernel == 2 && r->n_user == 3 && r->n_python == 1);
	cr_expect_eq(r->frames[0], kips[0]);
	cr_expect_eq(r->frames[2], prog[0]);
	cr_expect_eq(gs_rawstack_py(r)->code, py[0].code);
	cr_expect_eq(gs_rawstack_py(r)->lasti, py[0].lasti);

	int64_t trunc = gs_rawstacks_intern(&t, &v, GS_CPU_USER_TRUNC, &is_new);
	cr_expect(is_new && trunc != a, "the same frames with other flags: another stack");
	v.n_python = 0;
	int64_t nopy = gs_rawstacks_intern(&t, &v, 0, &is_new);
	cr_expect(is_new && nopy != a, "fewer Python frames: another stack");
	cr_expect_eq(gs_rawstacks_intern(&t, &v, 0, &is_new), nopy);
	cr_expect(!is_new);
	gs_rawstacks_free(&t);
}
