/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU time in the session: GS_REC_OFFCPU_* records (bpf/offcpu.bpf.h,
 * include/gpusample/records.h) -> profile samples.
 *
 * Per thread (on its entry in the process table, struct gs_thread's off)
 * this keeps the exact split of its window into on-CPU, blocked and
 * runnable time (the kernel's counters, summed from END records and the
 * open intervals read at stop); here, the sampled off-CPU intervals with
 * the stack each waited in.  At build time:
 *   - each sampled interval gives one sample per state part (blocked, then
 *     the run-queue wait after its wake-up) with offcpu = its duration / p
 *     (the probability its stack was taken), then every such sample of one
 *     thread and state is scaled by one factor so that they sum to the
 *     thread's exact time in that state (intervals without a stack are
 *     spread over the sampled ones in proportion to their duration);
 *   - a thread's CPU samples share its exact on-CPU time (sum_exec_runtime
 *     over the window) equally, so cpu/nanoseconds is exact per thread and
 *     statistical only per stack (gs_off_cpu_ns, as each CPU sample is
 *     added: the thread's count of them is known from the run);
 *   - time no sample can carry (a state without any sampled stack, on-CPU
 *     time without a CPU sample) goes on a "[... stack not sampled]" frame.
 * So for every thread cpu + offcpu = its wall time in the window.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session/session_int.h"
#include "dump/dump.h"
#include "gpusample/records_codec.h"
#include "util/log.h"
#include "util/vec.h" /* gs_grow */

enum { ON = 0, BLK = 1, RUN = 2 };
#define GS_WAKE_MAX_PARTS \
	8 /* parts one wait's sample is split into (wakers.c) */ /* exact[] slots; BLK/RUN = enum gs_offcpu_state */
/* A sampled interval's stack: a raw stack index (s->stacks.raw), or with this bit
 * a profile stack made during the run (the seed stacks from /proc). */
#define GS_OFF_PROF (1ll << 40)

/* The per-thread state lives on the thread's entry in the process table
 * (struct gs_thread, its off member); this keeps the sampled parts. */
struct off_sample {
	int64_t stack; /* see GS_OFF_PROF */
	struct gs_thread *t;
	uint64_t out;  /* start of this part (CLOCK_MONOTONIC) */
	double w;      /* duration / p */
	int64_t waker; /* the wakeup that ended a blocked part (wakers.c), -1 none */
	uint8_t state; /* BLK or RUN */
};

struct gs_offcpu {
	struct gs_thread **th; /* the threads accounted, in order of first sight */
	size_t n_th, cap_th;
	struct off_sample *smp;
	size_t n_smp, cap_smp;
	uint64_t stacks_lost; /* END without its stack record (or the reverse) */
	int64_t *trimmed;     /* build time: raw stack -> trimmed profile stack */
	struct gs_wakers *wk; /* who ended the sampled waits */
};

/* The thread's entry, accounted from now on; NULL on allocation failure. */
static struct gs_thread *thread_get(struct session *s, uint32_t tid, uint32_t tgid)
{
	struct gs_thread *t = gs_thread_get(s->rt.pt, tgid, tid);

	if (!t || t->off.accounted)
		return t;
	if (GS_PUSH(s->off->th, s->off->n_th, s->off->cap_th, t))
		return NULL;
	t->off.accounted = true;
	return t;
}

static int add_part(struct gs_offcpu *o, struct gs_thread *t, uint64_t out, uint64_t ns,
		    uint8_t state, int64_t waker)
{
	if (!ns)
		return 0;
	if (gs_grow((void **)&o->smp, &o->cap_smp, o->n_smp + 1, sizeof(*o->smp)))
		return -ENOMEM;
	o->smp[o->n_smp++] = (struct off_sample){
		.stack = t->off.pend_stack,
		.t = t,
		.out = out,
		.w = (double)ns * GS_OFF_P_ONE / (t->off.pend_p ? t->off.pend_p : 1),
		.waker = waker,
		.state = state,
	};
	return 0;
}

/* A sampled interval closed: blocked part first, then the run-queue wait. */
static void close_sampled(struct gs_offcpu *o, struct gs_thread *t, uint64_t blocked,
			  uint64_t runnable)
{
	struct gs_thread_offcpu *x = &t->off;

	x->exact[BLK] += blocked;
	x->exact[RUN] += runnable;
	if (x->pend_stack >= 0) {
		add_part(o, t, x->pend_out, blocked, BLK, x->pend_waker);
		add_part(o, t, x->pend_out + blocked, runnable, RUN, -1);
	}
	x->pend_stack = -1;
	x->pend_waker = -1;
}

/* A stack record the codec accepted: v is its CPU stack (origin off-CPU). */
static void on_stack(struct session *s, const struct gs_offcpu_stack *h,
		     const struct gs_rec_cpu_view *v)
{
	const struct gs_cpu_sample *cs = v->s;
	char comm[GS_COMM_LEN + 1];
	struct gs_thread *t;
	int64_t idx;

	memcpy(comm, cs->comm, GS_COMM_LEN);
	comm[GS_COMM_LEN] = '\0';
	t = thread_get(s, cs->tid, cs->tgid);
	if (!t)
		return;
	if (t->off.pend_stack >= 0)
		s->off->stacks_lost++; /* its END was lost: the time stays exact */
	t->off.pend_stack = -1;
	t->off.pend_waker = -1;
	/* before the launched command's exec: its time stays exact (unsampled) */
	if (gs_targets_pre_exec(&s->targets, cs->tgid, comm) || (idx = gs_session_intern(s, v)) < 0)
		return;
	t->comm = gs_profile_intern(&s->prof, comm);
	t->off.pend_stack = idx;
	t->off.pend_seq = h->seq;
	t->off.pend_p = h->p;
	t->off.pend_out = h->hdr.ktime_ns;
}

/* Add the kernel's accumulated on-CPU, blocked and runnable ns. */
static void add_acc(struct gs_thread *t, uint64_t on, uint64_t blocked, uint64_t runnable)
{
	t->off.exact[ON] += on;
	t->off.exact[BLK] += blocked;
	t->off.exact[RUN] += runnable;
}

static void on_end(struct session *s, const struct gs_offcpu_end *e)
{
	struct gs_thread *t = thread_get(s, e->tid, e->tgid);

	if (!t)
		return;
	add_acc(t, e->acc_on_ns, e->acc_blocked_ns, e->acc_runnable_ns);
	if (!e->seq)
		return;
	if (t->off.pend_stack >= 0 && t->off.pend_seq != e->seq) {
		s->off->stacks_lost++;
		t->off.pend_stack = -1;
	}
	close_sampled(s->off, t, e->blocked_ns, e->runnable_ns);
}

/* The wakeup that ended thread h->tid's wait h->seq, if that wait is the
 * pending one (its stack kept, its END not yet here). */
static void on_waker(struct session *s, const struct gs_offcpu_waker *h,
		     const struct gs_rec_cpu_view *v)
{
	struct gs_thread *t = gs_thread_find(s->rt.pt, h->tgid, h->tid);
	int64_t idx;

	if (!t || t->off.pend_stack < 0 || t->off.pend_seq != h->seq || t->off.pend_waker >= 0) {
		gs_wakers_miss(s->off->wk);
		return;
	}
	if ((idx = gs_wakers_add(s, s->off->wk, h, v, t->off.pend_out,
				 t->off.pend_stack & GS_OFF_PROF ? -1 : t->off.pend_stack)) >= 0)
		t->off.pend_waker = idx;
}

void gs_off_record(struct session *s, const struct gs_rec_hdr *h)
{
	const struct gs_offcpu_waker *wk;
	const struct gs_offcpu_stack *os;
	struct gs_rec_cpu_view v;
	const void *end;

	if (!s->off)
		return;
	if (!gs_rec_offcpu_stack(h, &os, &v))
		on_stack(s, os, &v);
	else if (!gs_rec_fixed(h, GS_REC_OFFCPU_END, &end))
		on_end(s, end);
	else if (!gs_rec_offcpu_waker(h, &wk, &v))
		on_waker(s, wk, &v);
	else
		s->out.counts[GS_C_records_malformed]++;
}

/* ---- window edges ------------------------------------------------------- */

/* /proc/TGID/task/TID/schedstat: on-CPU ns, run-queue ns, times run on a
 * CPU. */
static int read_schedstat(uint32_t tgid, uint32_t tid, uint64_t *exec, uint64_t *delay,
			  uint64_t *runs)
{
	char path[64];
	unsigned long long a, b, c;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", tgid, tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fscanf(f, "%llu %llu %llu", &a, &b, &c);
	fclose(f);
	if (n != 3)
		return -EIO;
	*exec = a;
	*delay = b;
	*runs = c;
	return 0;
}

/* The kernel functions a thread waits in from /proc/TID/stack ("[<0>]
 * do_select+0x65c/0x940" lines, leaf first) under a marker frame: a profile
 * stack (GS_OFF_PROF | id) or <0. */
struct kstack_locs {
	struct session *s;
	uint32_t locs[32], n;
};

static int kstack_loc(void *ctx, const char *func)
{
	struct kstack_locs *k = ctx;

	k->locs[k->n++] = gs_session_special(k->s, func);
	return k->n == 31; /* room for the marker */
}

static int64_t proc_stack(struct session *s, uint32_t tgid, uint32_t tid)
{
	struct kstack_locs k = { .s = s };
	uint32_t *locs = k.locs;
	int64_t id;

	gs_proc_task_kstack(tgid, tid, kstack_loc, &k);
	uint32_t n = k.n;
	locs[n++] = gs_session_special(s,
				       "[off-CPU since before the window: user stack not sampled]");
	id = gs_profile_add_stack(&s->prof, locs, n);
	return id < 0 ? id : (int64_t)(GS_OFF_PROF | id);
}

/* A thread asleep when the window opens has no stack record for that wait
 * (it went to sleep before BPF was there).  Its first interval gets the
 * stack the dump engine took of it at the start (its entry's seed_raw:
 * kernel, native and Python frames, a raw stack symbolized like the others), else the kernel
 * functions of /proc/TID/stack under a marker frame (proc_stack: no task
 * iterator), as a sampled interval (seq 1 of its seed, closed by BPF like
 * any other).  The thread's comm comes from /proc. */
static void seed_stack(struct session *s, uint32_t tgid, uint32_t tid, uint64_t runs,
		       struct gs_offcpu_thr *v)
{
	char path[64], name[GS_COMM_LEN + 1] = "";
	struct gs_thread *t = thread_get(s, tid, tgid);
	int64_t id;
	FILE *f;

	if (!t)
		return;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", tgid, tid);
	if ((f = fopen(path, "re"))) {
		if (fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = 0;
			t->comm = gs_profile_intern(&s->prof, name);
		}
		fclose(f);
	}
	/* the dump's stack only if the thread has not run since: the same wait */
	id = t->off.seed_raw >= 0 && t->off.seed_runs == runs ? t->off.seed_raw
							      : proc_stack(s, tgid, tid);
	if (id < 0)
		return;
	t->off.pend_stack = id;
	t->off.pend_seq = v->seq = 1;
	t->off.pend_p = GS_OFF_P_ONE;
	t->off.pend_out = v->last_ns;
	v->captured = 1;
	v->state = GS_OFF_BLOCKED;
}

static void seed_thread(void *ctx, uint32_t tgid, uint32_t tid)
{
	struct session *s = ctx;
	struct gs_offcpu_thr v = { .tgid = tgid };
	struct gs_proc_stat st;
	uint64_t exec, delay, runs;

	v.last_ns = gs_now_ns(CLOCK_MONOTONIC);
	if (read_schedstat(tgid, tid, &exec, &delay, &runs))
		return;
	v.sum_exec = exec;
	v.run_delay = delay;
	/* The launched command, not yet let go, waits in gpusample's own code
	 * (gs_launch_release): that wait is no stack of the command's. */
	if (!gs_proc_stat(tid, &st) && (st.state == 'S' || st.state == 'D') &&
	    !(s->targets.launched && tgid == (uint32_t)s->targets.launch.pid))
		seed_stack(s, tgid, tid, runs, &v);
	gs_sampler_offcpu_seed(s->rt.sampler, tid, &v);
}

static void seed_process(struct session *s, uint32_t tgid)
{
	gs_proc_for_each_tid(tgid, seed_thread, s);
}

static const struct gs_py_cfg *seed_py_cfg(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;

	return gs_py_cfg_of(s->rt.py, tgid);
}

/* One thread of the dump at the start: a blocked one's stack, interned as
 * an off-CPU stack of its own (origin off-CPU, as a switch-out's). */
static int seed_raw(void *ctx, const struct gs_dump_raw *r)
{
	struct session *s = ctx;
	struct gs_cpu_sample cs = {
		.tgid = r->tgid,
		.tid = r->tid,
		.flags = r->flags,
		.n_kernel = (uint8_t)r->n_kernel,
		.n_user = (uint8_t)r->n_user,
		.n_python = (uint16_t)r->n_python,
		.origin = GS_ORIGIN_OFFCPU,
	};
	struct gs_rec_cpu_view v = { .s = &cs,
				     .kernel = r->kernel,
				     .user = r->user,
				     .py = r->py,
				     .n_kernel = r->n_kernel,
				     .n_user = r->n_user,
				     .n_python = r->n_python };
	struct gs_thread *t;
	uint64_t exec, delay, runs;
	int64_t raw;

	if (r->state != 'S' || read_schedstat(r->tgid, r->tid, &exec, &delay, &runs))
		return 0;
	memcpy(cs.comm, r->comm, sizeof(cs.comm));
	raw = gs_session_intern(s, &v);
	if (raw < 0 || !(t = gs_thread_get(s->rt.pt, r->tgid, r->tid)))
		return 0;
	t->off.seed_raw = raw;
	t->off.seed_runs = runs;
	return 0;
}

/* The stacks of the threads asleep now, user stacks included (dump/dump.h);
 * where the task iterator cannot load, seed_stack falls back to /proc. */
static void seed_stacks(struct session *s)
{
	struct gs_dump_walk_src src = { .elf = gs_sym_elf_cache(s->rt.sym),
					.py_cfg = seed_py_cfg,
					.ctx = s };
	uint32_t *tgids = calloc(s->rt.procs.n ? s->rt.procs.n : 1, sizeof(*tgids));
	char err[256];
	int rc;

	if (!tgids)
		return;
	for (size_t i = 0; i < s->rt.procs.n; i++)
		tgids[i] = ((struct gs_procinfo *)s->rt.procs.all[i])->proc->tgid;
	if (s->o->cfi &&
	    (rc = gs_dump_walk(tgids, s->rt.procs.n, &src, seed_raw, s, err, sizeof(err))))
		gs_log_more("note: stacks of threads asleep at the start from /proc only (%s)\n",
			    rc == -ENOTSUP ? err : strerror(-rc));
	free(tgids);
}

int gs_off_prepare(struct session *s)
{
	if (!s->o->offcpu)
		return 0;
	s->off = calloc(1, sizeof(*s->off));
	if (!s->off || !(s->off->wk = gs_wakers_new()))
		return -ENOMEM;
	/* Before the window: the walk takes a good part of a second with big
	 * libraries, which the window's start must not wait for. */
	seed_stacks(s);
	return 0;
}

int gs_off_start(struct session *s)
{
	if (!s->off)
		return 0;
	/* BPF ignores switches until the window is set, so every thread
	 * there now either gets its seed or, born after t0, starts at birth. */
	for (size_t i = 0; i < s->rt.procs.n; i++)
		seed_process(s, ((struct gs_procinfo *)s->rt.procs.all[i])->proc->tgid);
	gs_sampler_offcpu_window(s->rt.sampler, s->window.t0_mono);
	return 0;
}

/* A thread's interval still open after the detach: split it like BPF does,
 * from its schedstat now. */
static int close_open(void *ctx, uint32_t tid, const struct gs_offcpu_thr *v)
{
	struct session *s = ctx;
	struct gs_thread *t = thread_get(s, tid, v->tgid);
	uint64_t now = s->window.t1_mono, exec, delay, runs, wall, on, run;

	if (!t)
		return 0;
	add_acc(t, v->acc_on_ns, v->acc_blocked_ns, v->acc_runnable_ns);
	if (read_schedstat(v->tgid, tid, &exec, &delay, &runs))
		return 0; /* gone meanwhile: its exit record has the rest */
	wall = now > v->last_ns ? now - v->last_ns : 0;
	on = exec > v->sum_exec ? exec - v->sum_exec : 0;
	on = on > wall ? wall : on;
	run = delay > v->run_delay ? delay - v->run_delay : 0;
	run = run > wall - on ? wall - on : run;
	t->off.exact[ON] += on;
	if (v->captured && t->off.pend_stack >= 0 && t->off.pend_seq == v->seq)
		close_sampled(s->off, t, wall - on - run, run);
	else
		add_acc(t, 0, wall - on - run, run);
	return 0;
}

void gs_off_stop(struct session *s)
{
	if (!s->off)
		return;
	gs_sampler_offcpu_each(s->rt.sampler, close_open, s);
}

/* ---- building the profile ----------------------------------------------- */

static gs_str state_name(struct gs_profile *p, int state)
{
	return gs_profile_intern(p, state == ON    ? "running"
				    : state == BLK ? "blocked"
						   : "runnable");
}

/* The thread's latest name; a thread never seen by name (its only stack
 * taken before the launched command's exec) is named, if it is the main
 * thread, by its process's. */
static gs_str thread_name(struct session *s, const struct gs_thread *t)
{
	const struct gs_procinfo *p;
	char comm[sizeof(p->comm) + 1];

	if (t->comm || t->tid != t->tgid || !(p = gs_procs_get(&s->rt.procs, t->tgid)))
		return t->comm;
	memcpy(comm, p->comm, sizeof(p->comm));
	comm[sizeof(p->comm)] = '\0';
	return gs_profile_intern(&s->prof, comm);
}

/* What an off-CPU sample of thread t in state says besides its stack. */
static struct gs_sample_ctx thread_ctx(struct session *s, const struct gs_thread *t, int state)
{
	struct gs_sample_ctx c = {
		.pid = t->tgid,
		.tid = t->tid,
		.thread_name = thread_name(s, t),
		.process_role = gs_profile_intern(&s->prof, gs_session_role(s, t->tgid)),
		.cuda_device = -1,
	};

	c.str_labels[GS_SL_THREAD_STATE] = state_name(&s->prof, state);
	gs_session_proc_labels(s, t->tgid, &c);
	return c;
}

/* A sample carrying time without a sampled stack: "[blocked: stack not
 * sampled]" and the like, so the thread's sums stay exact. */
static int add_unsampled(struct session *s, struct gs_thread *t, int state, uint64_t ns)
{
	static const char *const names[] = { "[on-CPU: no CPU sample]",
					     "[blocked: stack not sampled]",
					     "[runnable: stack not sampled]" };
	uint32_t loc = gs_session_special(s, names[state]);
	int64_t stack = gs_profile_add_stack(&s->prof, &loc, 1);
	struct gs_sample smp = {
		.values = { [GS_V_CPU_NS] = state == ON ? (int64_t)ns : 0,
			    [GS_V_OFFCPU_NS] = state == ON ? 0 : (int64_t)ns },
	};
	struct gs_sample_ctx c = thread_ctx(s, t, state);

	if (stack < 0)
		return (int)stack;
	smp.stack = (uint32_t)stack;
	return gs_session_add_thread_sample(s, t, &smp, &c);
}

/* The tracer's own frames on top of a switch-out's kernel stack (this
 * program, bpf_trace_run4, __traceiter_sched_switch): not where the thread
 * waits, so the sample's stack starts below them (at __schedule). */
static bool tracer_frame(const struct gs_profile *p, uint32_t loc_id)
{
	const struct gs_location *l = gs_profile_location(p, loc_id);
	const char *fn;

	if (l->kind != GS_FRAME_KERNEL || !l->n_lines)
		return false;
	fn = gs_profile_str(p, gs_profile_function(p, p->lines[l->first_line].function)->name);
	return !strncmp(fn, "bpf_", 4) || !strncmp(fn, "__bpf_", 6) ||
	       !strncmp(fn, "__traceiter_", 12);
}

/* Profile stack of a raw off-CPU stack, tracer frames trimmed; memoized in
 * o->trimmed (by raw stack index). */
static int64_t off_stack(struct session *s, int64_t raw, const uint32_t *stack_ids)
{
	struct gs_offcpu *o = s->off;
	struct gs_profile *p = &s->prof;
	const struct gs_stack *st;
	uint32_t k = 0;
	int64_t id;

	if (raw & GS_OFF_PROF)
		return raw & ~GS_OFF_PROF; /* already a profile stack */
	if (!o->trimmed) {
		o->trimmed = malloc((s->stacks.raw.n ? s->stacks.raw.n : 1) * sizeof(*o->trimmed));
		if (!o->trimmed)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->stacks.raw.n; i++)
			o->trimmed[i] = -1;
	}
	if (o->trimmed[raw] >= 0)
		return o->trimmed[raw];
	st = &p->stacks[stack_ids[raw]];
	while (k < st->n && tracer_frame(p, p->stack_locs[st->first + k]))
		k++;
	if (!k || k == st->n) {
		id = stack_ids[raw];
	} else {
		/* add_stack may move stacks[] and stack_locs[]: copy the ids out */
		uint32_t n = st->n - k,
			 locs[GS_MAX_KERNEL_FRAMES + GS_MAX_USER_FRAMES + GS_MAX_PY_FRAMES + 8];

		if (n > sizeof(locs) / sizeof(locs[0]))
			n = sizeof(locs) / sizeof(locs[0]);
		memcpy(locs, p->stack_locs + st->first + k, n * sizeof(locs[0]));
		id = gs_profile_add_stack(p, locs, n);
	}
	if (id >= 0)
		o->trimmed[raw] = id;
	return id;
}

static int thread_cmp(const struct gs_thread *x, const struct gs_thread *y)
{
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->tgid < y->tgid ? -1 : x->tgid > y->tgid;
}

static int by_tid(const void *a, const void *b)
{
	return thread_cmp(*(struct gs_thread *const *)a, *(struct gs_thread *const *)b);
}

/* Sampled parts ordered by thread, state, time: each (thread, state) is a run. */
static int by_thread_state(const void *a, const void *b)
{
	const struct off_sample *x = a, *y = b;
	int c = thread_cmp(x->t, y->t);

	if (c)
		return c;
	if (x->state != y->state)
		return x->state < y->state ? -1 : 1;
	return x->out < y->out ? -1 : x->out > y->out;
}

/* Scale the sampled parts smp[lo, hi) of one thread and state to its exact
 * time there (see the file comment). */
static int add_state(struct session *s, struct gs_thread *t, int state, size_t lo, size_t hi,
		     const uint32_t *stack_ids)
{
	struct gs_offcpu *o = s->off;
	double sum = 0, scale;
	int64_t left = (int64_t)t->off.exact[state];
	size_t last = SIZE_MAX;
	struct gs_sample_ctx c = thread_ctx(s, t, state);
	int64_t ctx;

	for (size_t i = lo; i < hi; i++)
		sum += o->smp[i].w;
	if (sum <= 0)
		return left > 0 ? add_unsampled(s, t, state, (uint64_t)left) : 0;
	if ((ctx = gs_profile_add_ctx(&s->prof, &c)) < 0)
		return (int)ctx;
	scale = (double)t->off.exact[state] / sum;
	for (size_t i = lo; i < hi; i++) {
		const struct off_sample *x = &o->smp[i];
		struct gs_sample_ctx wc[GS_WAKE_MAX_PARTS] = { c };
		double share[GS_WAKE_MAX_PARTS] = { 1.0 };
		int64_t stack;
		int parts = 0;
		struct gs_sample smp = {
			.ctx = (uint32_t)ctx,
			.time_ns = x->out > s->window.t0_mono ? x->out - s->window.t0_mono : 0,
		};

		if ((stack = off_stack(s, x->stack, stack_ids)) < 0)
			return (int)stack;
		smp.stack = (uint32_t)stack;
		/* a wait whose wakeup was recorded: shared by what the waker did */
		if (x->waker >= 0 && (parts = gs_wakers_label(s, o->wk, x->waker, stack_ids, wc,
							      share, GS_WAKE_MAX_PARTS)) < 0)
			return -ENOMEM;
		for (int k = 0; k < (parts ? parts : 1); k++) {
			int64_t wi = parts ? gs_profile_add_ctx(&s->prof, &wc[k]) : ctx;

			if (wi < 0)
				return -ENOMEM;
			smp.ctx = (uint32_t)wi;
			smp.values[GS_V_OFFCPU_NS] = llround(x->w * scale * share[k]);
			smp.values[GS_V_WALL_NS] = 0;
			if (!smp.values[GS_V_OFFCPU_NS])
				continue;
			left -= smp.values[GS_V_OFFCPU_NS];
			if (gs_session_add_thread_sample(s, t, &smp, NULL))
				return -ENOMEM;
			last = s->prof.n_samples - 1;
		}
	}
	if (last == SIZE_MAX) /* every part rounded to 0 ns */
		return left > 0 ? add_unsampled(s, t, state, (uint64_t)left) : 0;
	s->prof.samples[last].values[GS_V_OFFCPU_NS] += left; /* rounding: keep the sum exact */
	s->prof.samples[last].values[GS_V_WALL_NS] += left;
	return 0;
}

int64_t gs_off_cpu_ns(struct gs_thread *th, int64_t period_ns)
{
	struct gs_thread_offcpu *o = th ? &th->off : NULL;
	int64_t share;

	if (!o || !o->exact[ON] || !th->cpu_samples)
		return period_ns;
	share = (int64_t)(o->exact[ON] / th->cpu_samples);
	if (!o->rem_given) {
		share += (int64_t)(o->exact[ON] % th->cpu_samples);
		o->rem_given = true;
	}
	return share;
}

int gs_off_finish(struct session *s, const uint32_t *stack_ids)
{
	struct gs_offcpu *o = s->off;
	size_t i = 0;

	if (!o)
		return 0;
	qsort(o->smp, o->n_smp, sizeof(*o->smp), by_thread_state);
	for (size_t k = 0; k < o->n_th; k++) {
		struct gs_thread *t = o->th[k];

		if (!t->cpu_samples && t->off.exact[ON] &&
		    add_unsampled(s, t, ON, t->off.exact[ON]))
			return -ENOMEM;
	}
	/* threads in tid order, as smp: walk both together */
	qsort(o->th, o->n_th, sizeof(*o->th), by_tid);
	for (size_t k = 0; k < o->n_th; k++) {
		struct gs_thread *t = o->th[k];

		for (int state = BLK; state <= RUN; state++) {
			size_t lo;

			while (i < o->n_smp && (thread_cmp(o->smp[i].t, t) < 0 ||
						(o->smp[i].t == t && o->smp[i].state < state)))
				i++; /* parts of no known thread: cannot happen */
			lo = i;
			while (i < o->n_smp && o->smp[i].t == t && o->smp[i].state == state)
				i++;
			if (add_state(s, t, state, lo, i, stack_ids))
				return -ENOMEM;
		}
	}
	return 0;
}

void gs_off_comments(struct session *s, const struct gs_sampler_stats *st)
{
	const struct gs_sampler_opts so = { .offcpu_rate = s->o->offcpu_rate };
	struct gs_profile *p = &s->prof;

	if (!s->off) {
		gs_profile_add_comment(p, "off-CPU: off (--no-offcpu)");
		return;
	}
	s->out.counts[GS_C_off_stacks_unmatched] = s->off->stacks_lost;
	gs_profile_add_comment(p,
			       "off-CPU: sched_switch; per thread exact on-CPU (sum_exec_runtime), "
			       "runnable (run_delay) and blocked time; cpu/nanoseconds of a thread "
			       "is its exact on-CPU time shared by its CPU samples");
	gs_profile_add_comment(p,
			       "off-CPU stacks: taken at switch-out with p = 1 up to r "
			       "switch-outs/s per thread, then p = r / rate (r = %u, or %u for a "
			       "thread on-CPU under 1/16 of the time once it has 64 stacks); %llu "
			       "stacks, %llu "
			       "switch-outs without a stack (their time is spread over the sampled "
			       "stacks of the same thread and state, weights duration / p)",
			       gs_sampler_offcpu_rate(&so), gs_sampler_offcpu_idle_rate(&so),
			       (unsigned long long)st->off_stacks,
			       (unsigned long long)st->off_unsampled);
	gs_profile_add_comment(p,
			       "wakers: sched_waking; the first wakeup after a switch-out with a "
			       "stack takes the waker's stack (%llu), %llu not joined to a wait; "
			       "a helper waker is followed back to the thread on-CPU in the wait",
			       (unsigned long long)st->off_wakers,
			       (unsigned long long)gs_wakers_unmatched(s->off->wk));
	if (s->off->stacks_lost || st->off_threads_full || st->off_unseeded)
		gs_profile_add_comment(
		    p,
		    "off-CPU lost: %llu stack records unmatched, %llu threads "
		    "not accounted (map full), %llu threads accounted from first "
		    "sight only",
		    (unsigned long long)s->off->stacks_lost,
		    (unsigned long long)st->off_threads_full, (unsigned long long)st->off_unseeded);
}

void gs_off_free(struct session *s)
{
	if (!s->off)
		return;
	free(s->off->th);
	free(s->off->smp);
	free(s->off->trimmed);
	gs_wakers_free(s->off->wk);
	free(s->off);
	s->off = NULL;
}
