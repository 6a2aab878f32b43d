/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU records from the real BPF object (bpf/offcpu.bpf.h) through the
 * sampler, as root: a child that sleeps 20 ms at a time gets one stack record
 * per sleep (it switches out far less than the sampling rate, so p = 1) and
 * one END per closed interval whose blocked part is the sleep; the END sums
 * cover its whole life in the window; its exit sends a last END.  A thread
 * that only sleeps gets the idle rate, a fifth of the stacks of one that also
 * runs (bpf/offcpu.bpf.h), once it has its first 64.  Also the
 * target filter in front of `targets`: counted once per inserted entry,
 * back to 0 when it is deleted.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "bpf/common.bpf.h"
#include "bpf/sampler.h"
#include "gpusample/records_codec.h"
#include "gpusample.skel.h"

#define NAPS   25
#define NAP_NS 20000000ll

struct seen {
	uint32_t tid;
	int stacks, ends, exits, sleeps, kernel_stacks;
	uint64_t total_ns; /* all time in END records */
	uint64_t first_out;
	uint32_t last_seq;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int on_record(void *ctx, const struct gs_rec_hdr *h)
{
	struct seen *c = ctx;

	if (h->type == GS_REC_OFFCPU_STACK) {
		const struct gs_offcpu_stack *st;
		struct gs_rec_cpu_view v;

		cr_assert_eq(gs_rec_offcpu_stack(h, &st, &v), 0, "the codec takes what BPF sends");
		const struct gs_cpu_sample *cs = v.s;
		if (cs->tid != c->tid)
			return 0;
		cr_expect_eq(cs->origin, GS_ORIGIN_OFFCPU);
		cr_expect_eq(h->size, sizeof(*st) + cs->hdr.size);
		cr_expect_eq(st->p, GS_OFF_P_ONE, "a slow thread is sampled with p = 1");
		c->stacks++;
		c->kernel_stacks += v.n_kernel > 3;
		c->last_seq = st->seq;
		if (!c->first_out)
			c->first_out = h->ktime_ns;
	} else if (h->type == GS_REC_OFFCPU_END) {
		const struct gs_offcpu_end *e = (const void *)h;

		if (e->tid != c->tid)
			return 0;
		c->ends++;
		c->exits += !!(e->flags & GS_OFFEND_EXIT);
		if (e->seq) {
			cr_expect_eq(e->seq, c->last_seq, "END closes the last stack record");
			c->sleeps += e->blocked_ns + e->runnable_ns >= NAP_NS * 9 / 10;
		}
		c->total_ns += e->blocked_ns + e->runnable_ns + e->acc_on_ns + e->acc_blocked_ns +
			       e->acc_runnable_ns;
	}
	return 0;
}

Test(offcpu, sleeps_and_exit, .timeout = 60)
{
	/* a rate far above the child's 50 switch-outs/s: p stays 1 */
	struct gs_sampler_opts o = {
		.frequency_hz = 99, .kernel_stacks = true, .offcpu = true, .offcpu_rate = 5000
	};
	struct gs_target t = { .root_tgid = 0 };
	struct gs_sampler *s = NULL;
	struct seen c = { 0 };
	char err[512] = "";
	int go[2], status;
	uint64_t t0, t_exit;
	pid_t pid;

	cr_assert_eq(geteuid(), 0, "needs root (BPF): run the unit tests as root");
	cr_assert_eq(pipe(go), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct timespec nap = { 0, NAP_NS };
		char b;

		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(1);
		for (int i = 0; i < NAPS; i++)
			nanosleep(&nap, NULL);
		_exit(0);
	}
	close(go[0]);
	cr_assert_eq(gs_sampler_open(&o, &s, err, sizeof(err)), 0, "open: %s", err);
	cr_assert_eq(gs_sampler_add_target(s, pid, &t), 0);
	cr_assert_eq(gs_sampler_start(s, err, sizeof(err)), 0, "start: %s", err);
	t0 = mono_ns();
	gs_sampler_offcpu_window(s, t0); /* the child is not seeded: it starts now */
	c.tid = pid;
	cr_assert_eq(write(go[1], "x", 1), 1);
	while (waitpid(pid, &status, WNOHANG) == 0)
		gs_sampler_poll(s, 50, on_record, &c);
	t_exit = mono_ns();
	gs_sampler_stop(s);
	while (gs_sampler_poll(s, 0, on_record, &c) > 0)
		;
	gs_sampler_close(s);

	cr_expect_geq(c.stacks, NAPS - 2, "%d stack records for %d sleeps", c.stacks, NAPS);
	cr_expect_geq(c.kernel_stacks, c.stacks - 2, "stacks with kernel frames: %d",
		      c.kernel_stacks);
	cr_expect_geq(c.sleeps, NAPS - 3, "%d closed intervals as long as a sleep", c.sleeps);
	cr_expect_eq(c.exits, 1, "one END with the exit flag");
	/* from its first switch-out (unseeded: it starts there) to its exit */
	cr_expect(c.total_ns > (uint64_t)(NAPS - 2) * NAP_NS && c.total_ns <= t_exit - t0,
		  "END records cover %llu ns, life in the window <= %llu ns",
		  (unsigned long long)c.total_ns, (unsigned long long)(t_exit - t0));
}

struct two {
	uint32_t tid[2];
	int stacks[2];
};

static int count_stacks(void *ctx, const struct gs_rec_hdr *h)
{
	struct two *c = ctx;
	const struct gs_offcpu_stack *st;
	struct gs_rec_cpu_view v;

	if (h->type != GS_REC_OFFCPU_STACK || gs_rec_offcpu_stack(h, &st, &v))
		return 0;
	for (int i = 0; i < 2; i++)
		c->stacks[i] += v.s->tid == c->tid[i];
	return 0;
}

/* 2 ms naps for about 2 s; with spin, 2 ms on the CPU before each. */
static pid_t nap_child(int go, bool spin)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct timespec nap = { 0, 2000000 };
		char b;

		if (read(go, &b, 1) != 1)
			_exit(1);
		for (int i = 0; i < (spin ? 500 : 1000); i++) {
			for (uint64_t t = mono_ns(); spin && mono_ns() - t < 2000000;)
				;
			nanosleep(&nap, NULL);
		}
		_exit(0);
	}
	return pid;
}

Test(offcpu, idle_threads_get_the_idle_rate, .timeout = 60)
{
	/* 200 stacks/s for threads that run, 40 for threads that only wait
	 * (after 64 stacks); both children switch out more often than either */
	struct gs_sampler_opts o = { .frequency_hz = 99, .offcpu = true, .offcpu_rate = 200 };
	struct gs_target t = { .root_tgid = 0 };
	struct gs_sampler *s = NULL;
	struct two c = { { 0 } };
	char err[512] = "";
	int go[2], status;
	pid_t pid[2];

	cr_assert_eq(geteuid(), 0, "needs root (BPF): run the unit tests as root");
	cr_assert_eq(gs_sampler_offcpu_idle_rate(&o), 40);
	cr_assert_eq(pipe(go), 0);
	pid[0] = nap_child(go[0], false);
	pid[1] = nap_child(go[0], true);
	cr_assert(pid[0] > 0 && pid[1] > 0);
	close(go[0]);
	cr_assert_eq(gs_sampler_open(&o, &s, err, sizeof(err)), 0, "open: %s", err);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(gs_sampler_add_target(s, pid[i], &t), 0);
		c.tid[i] = pid[i];
	}
	cr_assert_eq(gs_sampler_start(s, err, sizeof(err)), 0, "start: %s", err);
	gs_sampler_offcpu_window(s, mono_ns());
	cr_assert_eq(write(go[1], "xx", 2), 2);
	for (int i = 0; i < 2; i++)
		while (waitpid(pid[i], &status, WNOHANG) == 0)
			gs_sampler_poll(s, 50, count_stacks, &c);
	gs_sampler_stop(s);
	while (gs_sampler_poll(s, 0, count_stacks, &c) > 0)
		;
	gs_sampler_close(s);

	/* expected about 135 (64 at the full rate, then two per 50 ms window)
	 * against about 400 (p = 0.8 at 250 switch-outs/s); one rate for both
	 * would give them about the same */
	cr_expect_geq(c.stacks[0], 64, "the sleeper gets its allowance and more: %d", c.stacks[0]);
	cr_expect_lt(2 * c.stacks[0], c.stacks[1],
		     "sleeper %d stacks, sleeper that also runs %d: the idle rate is not applied",
		     c.stacks[0], c.stacks[1]);
}

static uint64_t filter_slot(struct gs_sampler *s, uint32_t tgid)
{
	uint32_t k = tgid & (GS_TFILTER_SLOTS - 1);
	uint64_t v = 0;

	cr_assert_eq(bpf_map__lookup_elem(gs_sampler_skel(s)->maps.target_filter, &k, sizeof(k), &v,
					  sizeof(v), 0),
		     0);
	return v;
}

Test(offcpu, target_filter_counts_entries)
{
	struct gs_sampler_opts o = { .frequency_hz = 99, .offcpu = true };
	struct gs_target t = { .root_tgid = 1 };
	struct gs_sampler *s = NULL;
	uint32_t a = 4242, b = 4242 + GS_TFILTER_SLOTS; /* same slot */
	char err[512] = "";

	cr_assert_eq(geteuid(), 0, "needs root (BPF): run the unit tests as root");
	cr_assert_eq(gs_sampler_open(&o, &s, err, sizeof(err)), 0, "open: %s", err);
	cr_expect_eq(filter_slot(s, a), 0);
	cr_assert_eq(gs_sampler_add_target(s, a, &t), 0);
	t.py_cfg_id = 3;
	cr_assert_eq(gs_sampler_add_target(s, a, &t), 0); /* an update, not a second entry */
	cr_expect_eq(filter_slot(s, a), 1);
	cr_assert_eq(gs_sampler_add_target(s, b, &t), 0);
	cr_expect_eq(filter_slot(s, a), 2, "two targets share the slot");
	cr_assert_eq(gs_sampler_remove_target(s, a), 0);
	cr_expect_eq(filter_slot(s, b), 1);
	cr_expect_neq(gs_sampler_remove_target(s, a), 0, "already gone");
	cr_expect_eq(filter_slot(s, b), 1, "a failed delete does not count");
	cr_assert_eq(gs_sampler_remove_target(s, b), 0);
	cr_expect_eq(filter_slot(s, a), 0);
	gs_sampler_close(s);
}
