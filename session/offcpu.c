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
 *
 * Where on the timeline: a sampled part keeps its own duration at its own
 * time; the rest of its scaled share is the time of switch-outs without a
 * stack, and those are known by stretch: every END record carries the
 * exact sums since the thread's previous one, so the stretch between two
 * of them (less the sampled interval the END closes) holds exactly that
 * much blocked, runnable and on-CPU time.  Most waits of a thread that
 * switches out often are in such stretches (the stack rate and the
 * per-window cap skip them: a training loop's long input wait right after
 * a burst of short ones gets no stack).  So each stretch's blocked and
 * runnable time is laid in its largest gaps between the thread's CPU
 * samples, as pieces of the scaled shares (stacks in time order, the
 * per-stack sums unchanged; a blocked part whose waker was recorded is cut
 * by what the waker did, wakers.c, and each cut keeps its waker on its
 * pieces, so the per-waker sums are unchanged too): the timelines show each thread's state for
 * its whole window, the stacks of unsampled waits being those sampled
 * nearest in time.
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
	uint64_t ns;   /* duration */
	uint8_t state; /* BLK or RUN */
};

/* A stretch of one thread without a sampled interval: [from, to)
 * (CLOCK_MONOTONIC) held ns[ON, BLK, RUN] exactly; placed counts the
 * off-CPU ns laid in it so far (blocked first, then runnable). */
struct off_stretch {
	struct gs_thread *t;
	uint64_t from, to;
	uint64_t ns[3];
	uint64_t placed;
};

struct gs_offcpu {
	struct gs_thread **th; /* the threads accounted, in order of first sight */
	size_t n_th, cap_th;
	struct off_sample *smp;
	size_t n_smp, cap_smp;
	struct off_stretch *str;
	size_t n_str, cap_str;
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
		.ns = ns,
		.state = state,
	};
	return 0;
}

/* Time of thread t without a stack up to `to`, from where its accounted
 * time reached (at first: its birth or the window's start); its accounted
 * time then reaches `mark`.  A stretch that cannot be kept only loses its place on
 * the timeline: the sums stay exact. */
static void add_stretch(struct session *s, struct gs_thread *t, uint64_t to, uint64_t mark,
			uint64_t on, uint64_t blocked, uint64_t runnable)
{
	struct gs_offcpu *o = s->off;
	uint64_t len = on + blocked + runnable, from = t->off.mark;

	/* the sums cover the stretch exactly: a thread's first one starts at
	 * its birth (a worker started mid-window), or the window's start */
	if (!from)
		from = to > len && to - len > s->window.t0_mono ? to - len : s->window.t0_mono;
	t->off.mark = mark;
	if (!blocked && !runnable)
		return;
	if (gs_grow((void **)&o->str, &o->cap_str, o->n_str + 1, sizeof(*o->str)))
		return;
	o->str[o->n_str++] = (struct off_stretch){
		.t = t,
		.from = from,
		.to = to > from ? to : from,
		.ns = { on, blocked, runnable },
	};
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

	uint64_t now = e->hdr.ktime_ns, off = e->blocked_ns + e->runnable_ns, on_part;

	if (!t)
		return;
	add_acc(t, e->acc_on_ns, e->acc_blocked_ns, e->acc_runnable_ns);
	if (e->seq && t->off.pend_stack >= 0 && t->off.pend_seq != e->seq) {
		s->off->stacks_lost++;
		t->off.pend_stack = -1;
	}
	if (!e->seq || t->off.pend_stack < 0) { /* no sampled part: all of it a stretch */
		add_stretch(s, t, now, now, e->acc_on_ns, e->acc_blocked_ns + e->blocked_ns,
			    e->acc_runnable_ns + e->runnable_ns);
		if (e->seq)
			close_sampled(s->off, t, e->blocked_ns, e->runnable_ns);
		return;
	}
	/* the sums before the sampled interval; its on-CPU part follows its off parts */
	on_part = now > t->off.pend_out + off ? now - t->off.pend_out - off : 0;
	add_stretch(s, t, t->off.pend_out, now, e->acc_on_ns > on_part ? e->acc_on_ns - on_part : 0,
		    e->acc_blocked_ns, e->acc_runnable_ns);
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
	add_stretch(s, t, v->last_ns, v->last_ns, v->acc_on_ns, v->acc_blocked_ns,
		    v->acc_runnable_ns);
	if (read_schedstat(v->tgid, tid, &exec, &delay, &runs))
		return 0; /* gone meanwhile: its exit record has the rest */
	wall = now > v->last_ns ? now - v->last_ns : 0;
	on = exec > v->sum_exec ? exec - v->sum_exec : 0;
	on = on > wall ? wall : on;
	run = delay > v->run_delay ? delay - v->run_delay : 0;
	run = run > wall - on ? wall - on : run;
	t->off.exact[ON] += on;
	if (v->captured && t->off.pend_stack >= 0 && t->off.pend_seq == v->seq) {
		close_sampled(s->off, t, wall - on - run, run);
	} else {
		add_acc(t, 0, wall - on - run, run);
		add_stretch(s, t, now, now, on, wall - on - run, run);
	}
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
 * sampled]" and the like, so the thread's sums stay exact; at: where the
 * timelines put it (profile time: the thread's first known). */
static int add_unsampled(struct session *s, struct gs_thread *t, int state, uint64_t ns,
			 uint64_t at)
{
	static const char *const names[] = { "[on-CPU: no CPU sample]",
					     "[blocked: stack not sampled]",
					     "[runnable: stack not sampled]" };
	uint32_t loc = gs_session_special(s, names[state]);
	int64_t stack = gs_profile_add_stack(&s->prof, &loc, 1);
	struct gs_sample smp = {
		.time_ns = at,
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

/* The CPU samples' places on the timeline (output/timeline.c: the period
 * around each tick), by thread (key pid << 32 | tid) and start. */
struct cpu_span {
	uint64_t key, start, end;
};

static int by_key_start(const void *a, const void *b)
{
	const struct cpu_span *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Where a state's scaled parts go: the thread's stretches str[lo, hi) in
 * time order, and the CPU samples of all threads. */
struct fill_ctx {
	const struct off_stretch *str;
	size_t lo, hi;
	uint64_t first; /* the thread's first known time (profile time) */
	const struct cpu_span *cpu;
	size_t n_cpu;
};

/* A free part of a stretch: [at, at + len) in profile time. */
struct free_seg {
	uint64_t at, len;
};

static int by_len_desc(const void *a, const void *b)
{
	const struct free_seg *x = a, *y = b;

	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The segments of [a, b) (profile time) that `amount` ns of off-CPU time
 * fill in thread key's stretch: its gaps between CPU samples, largest
 * first, after the `skip` ns laid there before; what finds no gap goes at
 * the stretch's end.  *segs (grown as needed) gets them, *n their count. */
static int fill_segs(const struct fill_ctx *f, uint64_t key, uint64_t a, uint64_t b, uint64_t skip,
		     uint64_t amount, struct free_seg **segs, size_t *n, size_t *cap)
{
	size_t lo = 0, hi = f->n_cpu, nf = 0;
	uint64_t at = a;

	while (lo < hi) { /* first CPU span of key ending after a */
		size_t mid = lo + (hi - lo) / 2;
		const struct cpu_span *c = &f->cpu[mid];

		if (c->key < key || (c->key == key && c->end <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; at < b; i++) {
		bool last = i >= f->n_cpu || f->cpu[i].key != key || f->cpu[i].start >= b;
		uint64_t end = last ? b : f->cpu[i].start;

		if (end > at) {
			if (gs_grow((void **)segs, cap, nf + 1, sizeof(**segs)))
				return -ENOMEM;
			(*segs)[nf++] = (struct free_seg){ .at = at, .len = end - at };
		}
		if (last)
			break;
		at = f->cpu[i].end > at ? f->cpu[i].end : at;
	}
	if (nf) /* *segs is NULL without any */
		qsort(*segs, nf, sizeof(**segs), by_len_desc);
	*n = 0;
	for (size_t i = 0; i < nf && amount; i++) {
		uint64_t len = (*segs)[i].len, from = (*segs)[i].at;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		from += skip;
		len -= skip;
		skip = 0;
		len = len < amount ? len : amount;
		(*segs)[(*n)++] = (struct free_seg){ .at = from, .len = len };
		amount -= len;
	}
	if (amount) { /* n < nf + 1 <= cap */
		if (gs_grow((void **)segs, cap, *n + 1, sizeof(**segs)))
			return -ENOMEM;
		(*segs)[(*n)++] = (struct free_seg){ .at = b > a + amount ? b - amount : a,
						     .len = amount };
	}
	return 0;
}

/* One piece of a scaled share on the timeline. */
static int add_piece(struct session *s, int64_t ctx, uint32_t stack, uint64_t at, uint64_t ns)
{
	struct gs_sample smp = { .stack = stack, .ctx = (uint32_t)ctx, .time_ns = at };

	smp.values[GS_V_OFFCPU_NS] = (int64_t)ns;
	return gs_profile_add_sample(&s->prof, &smp, NULL) ? -ENOMEM : 0;
}

/* A scaled share on its way to the timeline: a sampled part's, or one
 * waker's cut of it (the context carries the waker); extra is what is not
 * laid at the part's own time. */
struct share_piece {
	int64_t ctx;
	uint32_t stack;
	int64_t extra;
};

/* Lay the pieces' extra (p[n], time order) in the thread's stretches of
 * this state, in proportion to each stretch's time there (see the file
 * comment). */
static int fill_stretches(struct session *s, const struct fill_ctx *f, int state,
			  struct share_piece *p, size_t n)
{
	struct off_stretch *str = (struct off_stretch *)f->str;
	struct free_seg *segs = NULL;
	size_t n_segs = 0, cap = 0, i = 0;
	uint64_t total = 0, want = 0, cum = 0, given = 0, t0 = s->window.t0_mono;
	int rc = 0;

	for (size_t k = f->lo; k < f->hi; k++)
		total += str[k].ns[state];
	for (size_t j = 0; j < n; j++)
		want += (uint64_t)p[j].extra;
	for (size_t k = f->lo; k < f->hi && !rc; k++) {
		struct off_stretch *x = &str[k];
		uint64_t key = (uint64_t)x->t->tgid << 32 | x->t->tid, amount;

		if (!x->ns[state])
			continue;
		cum += x->ns[state];
		amount = (uint64_t)((double)want * cum / total + 0.5) - given;
		given += amount;
		rc = fill_segs(f, key, x->from > t0 ? x->from - t0 : 0, x->to > t0 ? x->to - t0 : 0,
			       x->placed, amount, &segs, &n_segs, &cap);
		x->placed += amount;
		for (size_t g = 0; g < n_segs && !rc; g++) {
			uint64_t at = segs[g].at, len = segs[g].len;

			while (len && !rc) {
				while (i < n && !p[i].extra)
					i++;
				if (i == n)
					break;
				uint64_t take = (uint64_t)p[i].extra < len ? (uint64_t)p[i].extra
									   : len;

				rc = add_piece(s, p[i].ctx, p[i].stack, at, take);
				p[i].extra -= (int64_t)take;
				at += take;
				len -= take;
			}
		}
	}
	free(segs);
	return rc;
}

/* Part k of n of `total` split by cumulative shares cum[] (cum[n-1] is
 * taken as 1), so the parts sum to total exactly. */
static int64_t cut(int64_t total, const double *cum, int k, int n)
{
	int64_t hi = k == n - 1 ? total : llround((double)total * cum[k]);
	int64_t lo = k ? llround((double)total * cum[k - 1]) : 0;

	return hi > lo ? hi - lo : 0;
}

/* Sampled part x (scaled share `share` ns, stack `stack`) on the timeline:
 * shared by what its waker did (wakers.c) when its wakeup was recorded,
 * each cut at the part's own time for its cut of the part's own duration
 * (the whole share without stretches); the rest is appended to *p for the
 * stretches. */
static int add_part_share(struct session *s, struct gs_thread *t, const struct off_sample *x,
			  int64_t ctx, struct gs_sample_ctx c, uint32_t stack,
			  const uint32_t *stack_ids, int64_t share, bool stretches,
			  struct share_piece **p, size_t *n, size_t *cap)
{
	struct gs_sample_ctx wc[GS_WAKE_MAX_PARTS] = { c };
	double part[GS_WAKE_MAX_PARTS] = { 1.0 }, cum[GS_WAKE_MAX_PARTS];
	int64_t own = stretches && share > (int64_t)x->ns ? (int64_t)x->ns : share;
	uint64_t at = x->out > s->window.t0_mono ? x->out - s->window.t0_mono : 0;
	int labelled = 0, parts;

	/* a wait whose wakeup was recorded: shared by what the waker did */
	if (x->waker >= 0 && (labelled = gs_wakers_label(s, s->off->wk, x->waker, stack_ids, wc,
							 part, GS_WAKE_MAX_PARTS)) < 0)
		return -ENOMEM;
	parts = labelled ? labelled : 1;
	for (int k = 0; k < parts; k++)
		cum[k] = (k ? cum[k - 1] : 0) + part[k];
	for (int k = 0; k < parts; k++) {
		int64_t wi = labelled ? gs_profile_add_ctx(&s->prof, &wc[k]) : ctx;
		int64_t all = cut(share, cum, k, parts), mine = cut(own, cum, k, parts);
		struct gs_sample smp = { .ctx = (uint32_t)wi, .stack = stack, .time_ns = at };

		if (wi < 0)
			return -ENOMEM;
		mine = mine < all ? mine : all;
		smp.values[GS_V_OFFCPU_NS] = mine;
		if (mine && gs_session_add_thread_sample(s, t, &smp, NULL))
			return -ENOMEM;
		at += (uint64_t)mine; /* the cuts one after another */
		if (all == mine)
			continue;
		if (gs_grow((void **)p, cap, *n + 1, sizeof(**p)))
			return -ENOMEM;
		(*p)[(*n)++] =
		    (struct share_piece){ .ctx = wi, .stack = stack, .extra = all - mine };
	}
	return 0;
}

/* Scale the sampled parts smp[lo, hi) of one thread and state to its exact
 * time there, each part at its own time for its own duration and the rest
 * laid in the thread's stretches (see the file comment). */
static int add_state(struct session *s, struct gs_thread *t, int state, size_t lo, size_t hi,
		     const struct fill_ctx *f, const uint32_t *stack_ids)
{
	struct gs_offcpu *o = s->off;
	double sum = 0, scale;
	int64_t left = (int64_t)t->off.exact[state], ctx;
	size_t n = hi > lo ? hi - lo : 1, last = SIZE_MAX, n_p = 0, cap_p = 0;
	struct gs_sample_ctx c = thread_ctx(s, t, state);
	int64_t *share = calloc(n, sizeof(*share));
	uint32_t *stack = calloc(n, sizeof(*stack));
	struct share_piece *p = NULL;
	bool stretches = false;
	int rc = 0;

	for (size_t i = lo; i < hi; i++)
		sum += o->smp[i].w;
	if (left <= 0 || !share || !stack) {
		rc = left > 0 ? -ENOMEM : 0;
		goto out;
	}
	if ((ctx = gs_profile_add_ctx(&s->prof, &c)) < 0) {
		rc = (int)ctx;
		goto out;
	}
	if (sum <= 0) { /* no stack: all of it unsampled, laid in the stretches */
		uint32_t loc = gs_session_special(s, state == BLK
							 ? "[blocked: stack not sampled]"
							 : "[runnable: stack not sampled]");
		int64_t id = gs_profile_add_stack(&s->prof, &loc, 1);
		struct share_piece one = { .ctx = ctx, .stack = (uint32_t)id, .extra = left };

		if (id < 0 || f->lo == f->hi)
			rc = id < 0 ? (int)id
				    : add_unsampled(s, t, state, (uint64_t)left, f->first);
		else
			rc = fill_stretches(s, f, state, &one, 1);
		goto out;
	}
	scale = (double)t->off.exact[state] / sum;
	for (size_t i = lo; i < hi; i++) {
		int64_t id = off_stack(s, o->smp[i].stack, stack_ids);

		if (id < 0) {
			rc = (int)id;
			goto out;
		}
		stack[i - lo] = (uint32_t)id;
		share[i - lo] = llround(o->smp[i].w * scale);
		left -= share[i - lo];
		if (share[i - lo])
			last = i - lo;
	}
	if (last == SIZE_MAX) { /* every part rounded to 0 ns */
		rc = left > 0 ? add_unsampled(s, t, state, (uint64_t)left, f->first) : 0;
		goto out;
	}
	share[last] += left; /* rounding: keep the sum exact */
	for (size_t k = f->lo; k < f->hi; k++)
		stretches |= f->str[k].ns[state] > 0;
	for (size_t i = lo; i < hi && !rc; i++)
		if (share[i - lo])
			rc = add_part_share(s, t, &o->smp[i], ctx, c, stack[i - lo], stack_ids,
					    share[i - lo], stretches, &p, &n_p, &cap_p);
	if (!rc && n_p)
		rc = fill_stretches(s, f, state, p, n_p);
out:
	free(p);
	free(share);
	free(stack);
	return rc;
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

/* Stretches ordered by thread, then time. */
static int by_thread_from(const void *a, const void *b)
{
	const struct off_stretch *x = a, *y = b;
	int c = thread_cmp(x->t, y->t);

	if (c)
		return c;
	return x->from < y->from ? -1 : x->from > y->from;
}

/* The CPU samples' places (see struct cpu_span), sorted; NULL on ENOMEM. */
static struct cpu_span *cpu_spans(const struct gs_profile *p, size_t *n_out)
{
	struct cpu_span *c = malloc(sizeof(*c) * (p->n_samples ? p->n_samples : 1));
	size_t n = 0;

	if (!c)
		return NULL;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *x = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, x);
		uint64_t w = (uint64_t)x->values[GS_V_CPU_NS];

		if (x->values[GS_V_CPU_NS] <= 0 || x->values[GS_V_OFFCPU_NS] > 0 ||
		    sc->cuda_device >= 0)
			continue;
		c[n++] = (struct cpu_span){ .key = (uint64_t)sc->pid << 32 | sc->tid,
					    .start = x->time_ns > w / 2 ? x->time_ns - w / 2 : 0,
					    .end = x->time_ns + (w - w / 2) };
	}
	qsort(c, n, sizeof(*c), by_key_start);
	*n_out = n;
	return c;
}

/* Thread t's first known time (profile time): its first stretch's start
 * (str, NULL if none) or its first sampled part (from smp[i] on, sorted). */
static uint64_t first_known(struct session *s, const struct gs_thread *t,
			    const struct off_stretch *str, size_t i)
{
	const struct gs_offcpu *o = s->off;
	uint64_t first = str ? str->from : UINT64_MAX;

	while (i < o->n_smp && thread_cmp(o->smp[i].t, t) < 0)
		i++;
	for (; i < o->n_smp && o->smp[i].t == t; i++)
		first = o->smp[i].out < first ? o->smp[i].out : first;
	if (first == UINT64_MAX || first < s->window.t0_mono)
		return 0;
	return first - s->window.t0_mono;
}

int gs_off_finish(struct session *s, const uint32_t *stack_ids)
{
	struct gs_offcpu *o = s->off;
	struct fill_ctx f = { 0 };
	struct cpu_span *cpu;
	size_t i = 0, j = 0;
	int rc = 0;

	if (!o)
		return 0;
	/* the arrays are NULL while empty, and qsort's base must not be */
	if (o->n_smp)
		qsort(o->smp, o->n_smp, sizeof(*o->smp), by_thread_state);
	if (o->n_str)
		qsort(o->str, o->n_str, sizeof(*o->str), by_thread_from);
	if (!(cpu = cpu_spans(&s->prof, &f.n_cpu)))
		return -ENOMEM;
	f.cpu = cpu;
	f.str = o->str;
	/* threads in tid order, as smp and str: walk the three together */
	if (o->n_th)
		qsort(o->th, o->n_th, sizeof(*o->th), by_tid);
	for (size_t k = 0; k < o->n_th && !rc; k++) {
		struct gs_thread *t = o->th[k];

		while (j < o->n_str && thread_cmp(o->str[j].t, t) < 0)
			j++;
		f.lo = j;
		while (j < o->n_str && o->str[j].t == t)
			j++;
		f.hi = j;
		f.first = first_known(s, t, f.lo < f.hi ? &o->str[f.lo] : NULL, i);
		if (!t->cpu_samples && t->off.exact[ON])
			rc = add_unsampled(s, t, ON, t->off.exact[ON], f.first);
		for (int state = BLK; state <= RUN && !rc; state++) {
			size_t lo;

			while (i < o->n_smp && (thread_cmp(o->smp[i].t, t) < 0 ||
						(o->smp[i].t == t && o->smp[i].state < state)))
				i++; /* parts of no known thread: cannot happen */
			lo = i;
			while (i < o->n_smp && o->smp[i].t == t && o->smp[i].state == state)
				i++;
			rc = add_state(s, t, state, lo, i, &f, stack_ids);
		}
	}
	free(cpu);
	return rc ? -ENOMEM : 0;
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
	free(s->off->str);
	free(s->off->trimmed);
	gs_wakers_free(s->off->wk);
	free(s->off);
	s->off = NULL;
}
