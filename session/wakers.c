/* SPDX-License-Identifier: MIT */
/*
 * Who ended a sampled wait: GS_REC_OFFCPU_WAKER records (bpf/offcpu.bpf.h
 * gs_off_waking) joined to the off-CPU intervals they ended (offcpu.c),
 * then, at build time, followed back to the thread that did the work.
 *
 * The thread that wakes a waiting one is often a helper: a DataLoader
 * worker's queue feeder thread writes the pipe the main thread polls, after
 * the worker's main thread put the decoded item on its queue.  So the wait
 * is shared by what the threads of the waker's chain did in it, in
 * proportion to their CPU samples there: the waker's, then, unless the
 * waker was on-CPU for most of the wait (GS_WAKE_BUSY_DIV of the ticks a
 * thread on-CPU all along would have), the thread whose recorded wakeup
 * woke it within the wait, up to GS_WAKE_HOPS times (wakers are recorded
 * for sampled waits only), and where the chain has no recorded link, the
 * busiest thread of the helper's own process in the wait (a helper works
 * for its process).  A wait of a few ticks has few samples: the window is
 * GS_WAKE_LOOK ticks at least, GS_WAKE_WIDE times that when no thread of
 * the chain ran in it (a machine short of CPUs).  Without any CPU sample
 * the wait goes to the direct waker's stack at the wakeup.
 *
 * A wait for the GIL is the holder's: whatever ended it (CPython's 5 ms
 * timer, the holder's release), it goes to the busiest other thread of the
 * wakee's process in the wait, by the same samples.
 *
 * A wakeup from an interrupt runs on whatever thread the interrupt hit, so
 * the waker's kernel stack is read first: a timer expiry, a hard or a soft
 * interrupt is named as such (role "timer", "irq", "softirq"), a kernel
 * thread is "kthread", a process outside the job "other process", and none
 * of these is blamed on a thread (no waker_tid).
 *
 * Labels of an off-CPU sample (include/gpusample/profile.h): waker_role,
 * waker (top frames, root first, ';'-separated) and waker_tid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h" /* gs_wall_frame_cat */
#include "session/session_int.h"
#include "util/vec.h"

#define GS_WAKE_HOPS     3 /* helper threads followed back, at most */
#define GS_WAKE_BUSY_DIV 2 /* busy: on-CPU samples >= 1/2 of the wait's ticks */
#define GS_WAKE_FRAMES   3 /* frames in the waker label */
#define GS_WAKE_PARTS    8 /* distinct waker texts one wait is shared by, at most */
#define GS_WAKE_WIDE     4 /* the second, wider window: GS_WAKE_LOOK ticks times this */
#define GS_WAKE_LOOK     8 /* ticks before a wakeup its stack is taken from, at least */

enum wake_kind { WK_THREAD = 0, WK_TIMER, WK_IRQ, WK_SOFTIRQ, WK_KTHREAD, WK_OUTSIDE };
static const char *const kind_role[] = { "", "timer", "irq", "softirq", "kthread", "other process" };

struct waker {
	uint64_t t;                     /* the wakeup (CLOCK_MONOTONIC) */
	uint64_t wakee_out;             /* the switch-out that began the wait it ended */
	uint32_t tgid, tid;             /* the waker (current at sched_waking) */
	uint32_t wakee_tgid, wakee_tid; /* the wakee */
	int64_t wakee_raw;              /* the raw stack it waited in, -1 none */
	int64_t raw;                    /* the waker's raw stack, -1 none */
	gs_str comm;                    /* the waker's comm */
	uint16_t flags;                 /* GS_WAKER_* */
	bool done;                      /* labels below resolved */
	uint8_t kind;                   /* enum wake_kind, once resolved */
	/* Who did what while x's wakee waited: up to GS_WAKE_PARTS parts,
	 * each a thread's role, tid (0: none named) and top frames, with its
	 * count of CPU samples (the wait is shared in proportion). */
	uint8_t n_part;
	struct wake_part {
		gs_str role, text;
		uint32_t tid;
		uint32_t count;
	} part[GS_WAKE_PARTS];
};

struct gs_wakers {
	struct waker *v;
	size_t n, cap;
	uint32_t *by_wakee; /* build time: indexes of v by (wakee_tid, t) */
	uint32_t *by_tid;   /* build time: CPU samples by (tid, ktime) */
	uint64_t unmatched; /* records whose wait was not pending */
};

struct gs_wakers *gs_wakers_new(void)
{
	return calloc(1, sizeof(struct gs_wakers));
}

void gs_wakers_free(struct gs_wakers *w)
{
	if (!w)
		return;
	free(w->v);
	free(w->by_wakee);
	free(w->by_tid);
	free(w);
}

uint64_t gs_wakers_unmatched(const struct gs_wakers *w)
{
	return w ? w->unmatched : 0;
}

void gs_wakers_miss(struct gs_wakers *w)
{
	if (w)
		w->unmatched++;
}

int64_t gs_wakers_add(struct session *s, struct gs_wakers *w, const struct gs_offcpu_waker *h,
		      const struct gs_rec_cpu_view *v, uint64_t wakee_out, int64_t wakee_raw)
{
	struct gs_cpu_sample head = *v->s;
	struct gs_rec_cpu_view kv = *v;
	char comm[GS_COMM_LEN + 1];
	struct waker x = {
		.t = h->hdr.ktime_ns,
		.wakee_out = wakee_out,
		.tgid = v->s->tgid,
		.tid = v->s->tid,
		.wakee_tgid = h->tgid,
		.wakee_tid = h->tid,
		.wakee_raw = wakee_raw,
		.flags = h->flags,
	};

	memcpy(comm, v->s->comm, GS_COMM_LEN);
	comm[GS_COMM_LEN] = '\0';
	x.comm = gs_profile_intern(&s->prof, comm);
	if (h->flags & (GS_WAKER_OUTSIDE | GS_WAKER_KTHREAD)) {
		/* kernel frames only, filed under the wakee's process: a
		 * process outside the job gets no entry of its own */
		head.tgid = h->tgid;
		head.n_user = 0;
		head.n_python = 0;
		kv.s = &head;
		kv.n_user = kv.n_python = 0;
	}
	x.raw = gs_session_intern(s, &kv);
	if (GS_PUSH(w->v, w->n, w->cap, x))
		return -ENOMEM;
	return (int64_t)(w->n - 1);
}

/* ---- build time --------------------------------------------------------- */

static int cmp_wakee(const void *a, const void *b, void *arg)
{
	const struct waker *v = arg;
	const struct waker *x = &v[*(const uint32_t *)a], *y = &v[*(const uint32_t *)b];

	if (x->wakee_tid != y->wakee_tid)
		return x->wakee_tid < y->wakee_tid ? -1 : 1;
	return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_sample(const void *a, const void *b, void *arg)
{
	const struct raw_sample *v = arg;
	const struct raw_sample *x = &v[*(const uint32_t *)a], *y = &v[*(const uint32_t *)b];

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->ktime < y->ktime ? -1 : x->ktime > y->ktime;
}

static int build_index(struct session *s, struct gs_wakers *w)
{
	size_t n = s->stacks.n_samples;

	if (w->by_tid || !w->n)
		return 0;
	if (n > UINT32_MAX)
		n = UINT32_MAX;
	w->by_wakee = malloc(w->n * sizeof(*w->by_wakee));
	w->by_tid = malloc((n ? n : 1) * sizeof(*w->by_tid));
	if (!w->by_wakee || !w->by_tid)
		return -ENOMEM;
	for (size_t i = 0; i < w->n; i++)
		w->by_wakee[i] = (uint32_t)i;
	for (size_t i = 0; i < n; i++)
		w->by_tid[i] = (uint32_t)i;
	qsort_r(w->by_wakee, w->n, sizeof(*w->by_wakee), cmp_wakee, w->v);
	qsort_r(w->by_tid, n, sizeof(*w->by_tid), cmp_sample, s->stacks.samples);
	return 0;
}

/* First position in by_tid of thread tid's samples at or after t. */
static size_t sample_lb(const struct session *s, const struct gs_wakers *w, uint32_t tid,
			uint64_t t)
{
	size_t lo = 0, hi = s->stacks.n_samples > UINT32_MAX ? UINT32_MAX : s->stacks.n_samples;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct raw_sample *r = &s->stacks.samples[w->by_tid[mid]];

		if (r->tid < tid || (r->tid == tid && r->ktime < t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Thread tid's CPU samples in [a, b]: their count, *first their start in by_tid. */
static size_t samples_in(const struct session *s, const struct gs_wakers *w, uint32_t tid,
			 uint64_t a, uint64_t b, size_t *first)
{
	size_t lo = sample_lb(s, w, tid, a), hi = sample_lb(s, w, tid, b + 1);

	*first = lo;
	return hi > lo ? hi - lo : 0;
}

/* The latest recorded wakeup of thread tid within [a, b], NULL none. */
static const struct waker *woken_in(const struct gs_wakers *w, uint32_t tid, uint64_t a, uint64_t b)
{
	size_t lo = 0, hi = w->n;
	const struct waker *best = NULL;

	while (lo < hi) { /* first entry of tid after b */
		size_t mid = lo + (hi - lo) / 2;
		const struct waker *x = &w->v[w->by_wakee[mid]];

		if (x->wakee_tid < tid || (x->wakee_tid == tid && x->t <= b))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0) {
		const struct waker *x = &w->v[w->by_wakee[lo - 1]];

		if (x->wakee_tid == tid && x->t >= a && x->t <= b)
			best = x;
	}
	return best;
}

static const char *fn_name(const struct gs_profile *p, uint32_t loc_id, int64_t *line,
			   const char **file)
{
	const struct gs_location *l = gs_profile_location(p, loc_id);
	const struct gs_line *ln;
	const struct gs_function *f;

	*line = 0;
	*file = NULL;
	if (!l->n_lines)
		return NULL;
	ln = &p->lines[l->first_line + l->n_lines - 1]; /* the caller: outermost inline */
	f = gs_profile_function(p, ln->function);
	/* the function's first line, not the sampled one: one text per function */
	*line = f->start_line > 0 ? f->start_line : ln->line;
	*file = f->file ? gs_profile_str(p, f->file) : NULL;
	return gs_profile_str(p, f->name);
}

/* The scheduler's own frames and the tracer's on top of a waker's kernel
 * stack: not what the waker was doing. */
static bool wake_machinery(const char *fn)
{
	static const char *const prefixes[] = { "bpf_",      "__bpf_",           "__traceiter_",
						"trace_",    "try_to_wake_up",   "wake_up",
						"__wake_up", "autoremove_wake",  "default_wake",
						"pollwake",  "ep_poll_callback", "wake_q" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(fn, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* What kind of context ran the wakeup, from its kernel frames leaf first:
 * the first frame that names a timer expiry or an interrupt entry decides;
 * *fn gets that frame's function. */
static enum wake_kind classify(const struct gs_profile *p, const struct gs_stack *st,
			       const char **fn)
{
	static const char *const timer[] = { "hrtimer_wakeup", "process_timeout", "it_real_fn",
					     "posix_timer_fn", "call_timer_fn" };
	static const char *const soft[] = { "handle_softirqs", "__do_softirq", "do_softirq",
					    "net_rx_action", "tasklet_action" };
	static const char *const hard[] = { "handle_irq_event", "__handle_irq_event_percpu",
					    "common_interrupt", "asm_common_interrupt",
					    "__sysvec_call_function_single" };
	const uint32_t *locs = gs_profile_stack_locs(p, st);

	for (uint32_t i = 0; i < st->n; i++) {
		const struct gs_location *l = gs_profile_location(p, locs[i]);
		const char *file, *name;
		int64_t line;

		if (l->kind != GS_FRAME_KERNEL)
			break;
		if (!(name = fn_name(p, locs[i], &line, &file)))
			continue;
		*fn = name;
		for (size_t k = 0; k < sizeof(timer) / sizeof(timer[0]); k++)
			if (!strcmp(name, timer[k]))
				return WK_TIMER;
		for (size_t k = 0; k < sizeof(soft) / sizeof(soft[0]); k++)
			if (!strcmp(name, soft[k]))
				return WK_SOFTIRQ;
		for (size_t k = 0; k < sizeof(hard) / sizeof(hard[0]); k++)
			if (!strcmp(name, hard[k]) || !strncmp(name, "asm_sysvec_", 11))
				return WK_IRQ;
	}
	*fn = NULL;
	return WK_THREAD;
}

/* Append one frame's text to buf (root first: callers go before): a ';'
 * in a name becomes ':' so the label stays a frame list. */
static void frame_text(char *out, size_t size, const char *name, const char *file, int64_t line,
		       const char *rest)
{
	const char *base = file ? strrchr(file, '/') : NULL;
	char *c;

	base = base ? base + 1 : file;
	if (base && line > 0)
		snprintf(out, size, "%s (%s:%lld)%s%s", name, base, (long long)line,
			 *rest ? ";" : "", rest);
	else
		snprintf(out, size, "%s%s%s", name, *rest ? ";" : "", rest);
	for (c = out; *c && c < out + strlen(name); c++)
		if (*c == ';')
			*c = ':';
}

/* The top frames of profile stack st as a label: its innermost
 * GS_WAKE_FRAMES Python frames if it has any, else native user frames,
 * else kernel frames past the wake-up machinery; root first. */
static gs_str stack_text(struct gs_profile *p, const struct gs_stack *st)
{
	static const uint8_t order[] = { GS_FRAME_PYTHON, GS_FRAME_NATIVE, GS_FRAME_KERNEL };
	const uint32_t *locs = gs_profile_stack_locs(p, st);
	char buf[512] = "", tmp[512];

	for (size_t k = 0; k < sizeof(order); k++) {
		int taken = 0;

		for (uint32_t i = 0; i < st->n && taken < GS_WAKE_FRAMES; i++) {
			const struct gs_location *l = gs_profile_location(p, locs[i]);
			const char *name, *file;
			int64_t line;

			if (l->kind != order[k] || !(name = fn_name(p, locs[i], &line, &file)))
				continue;
			if (order[k] == GS_FRAME_KERNEL && !taken && wake_machinery(name))
				continue;
			/* leaf first in the stack: each new frame is a caller */
			frame_text(tmp, sizeof(tmp), name, file, line, buf);
			memcpy(buf, tmp, sizeof(buf));
			taken++;
		}
		if (taken)
			break;
	}
	return gs_profile_intern(p, buf[0] ? buf : "[no frames]");
}

/* Add thread tid's cnt CPU samples from by_tid[first] to x's parts by
 * their top frames (parts past GS_WAKE_PARTS count for the last). */
static void add_samples(struct session *s, const struct gs_wakers *w, uint32_t tgid, uint32_t tid,
			size_t first, size_t cnt, const uint32_t *stack_ids, struct waker *x)
{
	struct gs_profile *p = &s->prof;
	const struct gs_thread *t = gs_thread_find(s->rt.pt, tgid, tid);
	gs_str role = gs_profile_intern(
	    p, gs_thread_role_name[t ? gs_thread_role_decide(p, t) : GS_TR_OTHER]);

	if (cnt > 64)
		first += cnt - 64, cnt = 64; /* the latest: closest to the wakeup */
	for (size_t i = 0; i < cnt; i++) {
		uint32_t id = stack_ids[s->stacks.samples[w->by_tid[first + i]].stack];
		gs_str text = stack_text(p, &p->stacks[id]);
		uint8_t k;

		for (k = 0; k < x->n_part && (x->part[k].text != text || x->part[k].tid != tid);
		     k++)
			;
		if (k == x->n_part) {
			if (k == GS_WAKE_PARTS)
				k--;
			else
				x->part[x->n_part++] = (struct wake_part){ role, text, tid, 0 };
		}
		x->part[k].count++;
	}
}

/* The busiest thread of process tgid in [a, b] other than skip and skip2:
 * its tid and sample count (0 none). */
static size_t busiest_of(struct session *s, const struct gs_wakers *w, uint32_t tgid, uint32_t skip,
			 uint32_t skip2, uint64_t a, uint64_t b, uint32_t *tid)
{
	struct gs_proc *proc = gs_proc_get(s->rt.pt, tgid);
	size_t best = 0, first;

	for (size_t i = 0; proc && i < gs_thread_count(proc); i++) {
		const struct gs_thread *t = gs_thread_at(proc, i);
		size_t n;

		if (t->tid == skip || t->tid == skip2)
			continue;
		if ((n = samples_in(s, w, t->tid, a, b, &first)) > best) {
			best = n;
			*tid = t->tid;
		}
	}
	return best;
}

/* Walk back from x's waker through recorded wakeups within [a, b], up to
 * GS_WAKE_HOPS, adding each thread's CPU samples in the window to x's
 * parts; a thread on-CPU most of the window (need samples) ends the walk,
 * one without a recorded link hands over to the busiest thread of its
 * process (over GS_WAKE_WIDE times look ns when none ran in the window).
 * Returns the samples added. */
static size_t chain(struct session *s, const struct gs_wakers *w, struct waker *x, uint64_t a,
		    uint64_t b, size_t need, uint64_t look, const uint32_t *stack_ids)
{
	uint32_t tid = x->tid, tgid = x->tgid, seen[GS_WAKE_HOPS + 2];
	size_t total = 0, first, n;
	int n_seen = 0;

	for (int hop = 0; hop <= GS_WAKE_HOPS; hop++) {
		const struct waker *y;
		bool again = false;

		for (int k = 0; k < n_seen; k++)
			again |= seen[k] == tid;
		if (again) /* a loop of wakeups: each thread counts once */
			break;
		seen[n_seen++] = tid;
		n = samples_in(s, w, tid, a, b, &first);
		add_samples(s, w, tgid, tid, first, n, stack_ids, x);
		total += n;
		if (n >= need)
			break; /* on-CPU most of the wait: the work itself */
		y = woken_in(w, tid, a, b);
		if (!y || (y->flags & (GS_WAKER_KTHREAD | GS_WAKER_OUTSIDE)) ||
		    y->tid == x->wakee_tid) {
			uint32_t z = 0;

			/* no recorded link: the helper's own process, over the
			 * wider window when none of it ran in this one */
			uint64_t wa = x->t > GS_WAKE_WIDE * look ? x->t - GS_WAKE_WIDE * look : 0;

			if (!busiest_of(s, w, tgid, x->wakee_tid, tid, a, x->t, &z) && wa < a)
				busiest_of(s, w, tgid, x->wakee_tid, tid, (a = wa), x->t, &z);
			if (z) {
				n = samples_in(s, w, z, a, x->t, &first);
				add_samples(s, w, tgid, z, first, n, stack_ids, x);
				total += n;
			}
			break;
		}
		tid = y->tid;
		tgid = y->tgid;
		b = y->t;
	}
	return total;
}

/* The wait is for the GIL (take_gil and its exported callers, the
 * report's table: output/walltime.c). */
static bool gil_wait(const struct gs_profile *p, const struct gs_stack *st)
{
	const uint32_t *locs = gs_profile_stack_locs(p, st);

	for (uint32_t i = 0; i < st->n; i++) {
		const struct gs_location *l = gs_profile_location(p, locs[i]);

		for (uint32_t k = 0; k < l->n_lines; k++)
			if (gs_wall_frame_cat(p, p->lines[l->first_line + k].function, l->kind) ==
			    GS_WALL_GIL)
				return true;
	}
	return false;
}

/* Follow the waker x of a wait back to the thread that did the work (see
 * the file comment); fills x's labels. */
static void resolve(struct session *s, struct gs_wakers *w, struct waker *x,
		    const uint32_t *stack_ids)
{
	struct gs_profile *p = &s->prof;
	const struct gs_stack *st = x->raw >= 0 ? &p->stacks[stack_ids[x->raw]] : NULL;
	uint64_t a = x->wakee_out, b = x->t, look = GS_WAKE_LOOK * (uint64_t)p->period_ns;
	uint64_t ticks;
	size_t need;
	const char *fn = NULL;

	x->done = true;
	/* A wait of a few ticks holds a sample or two at most (none when the
	 * waker waited for a CPU): the work just before it is the same, so
	 * the search spans GS_WAKE_LOOK ticks at least. */
	if (b - a < look && b > look)
		a = b - look;
	ticks = p->period_ns > 0 ? (b - a) / (uint64_t)p->period_ns : 0;
	need = ticks / GS_WAKE_BUSY_DIV ? ticks / GS_WAKE_BUSY_DIV : 1;
	/* A GIL wait ends at a timer (CPython 3.2+ waits 5 ms at a time, then
	 * asks the holder to drop it) or at the holder's release: either way
	 * it waited for the thread holding the GIL, the one of its process
	 * on-CPU in the wait (the wider window where none was). */
	if (x->wakee_raw >= 0 && gil_wait(p, &p->stacks[stack_ids[x->wakee_raw]])) {
		uint32_t z = 0;
		size_t first, n;

		uint64_t wa = b > GS_WAKE_WIDE * look ? b - GS_WAKE_WIDE * look : 0;

		if (!busiest_of(s, w, x->wakee_tgid, x->wakee_tid, 0, a, b, &z) && wa < a)
			busiest_of(s, w, x->wakee_tgid, x->wakee_tid, 0, (a = wa), b, &z);
		if (z && (n = samples_in(s, w, z, a, b, &first))) {
			add_samples(s, w, x->wakee_tgid, z, first, n, stack_ids, x);
			x->kind = WK_THREAD;
			return;
		}
	}
	x->kind = x->flags & GS_WAKER_KTHREAD   ? WK_KTHREAD
		  : x->flags & GS_WAKER_OUTSIDE ? WK_OUTSIDE
						: WK_THREAD;
	if (st) { /* an interrupt on the idle task (swapper, a kthread) is the interrupt's */
		enum wake_kind k = classify(p, st, &fn);

		if (k != WK_THREAD)
			x->kind = k;
	}
	if (x->kind != WK_THREAD) {
		x->part[0] =
		    (struct wake_part){ gs_profile_intern(p, kind_role[x->kind]),
					x->kind == WK_KTHREAD || x->kind == WK_OUTSIDE
					    ? x->comm
					    : gs_profile_intern(p, fn ? fn : kind_role[x->kind]),
					0, 1 };
		x->n_part = 1;
		return;
	}
	/* the chain; then, when no thread of it ran in the window (a machine
	 * short of CPUs), the same over a window GS_WAKE_WIDE times longer */
	if (!chain(s, w, x, a, b, need, look, stack_ids)) {
		a = x->t > GS_WAKE_WIDE * look ? x->t - GS_WAKE_WIDE * look : 0;
		chain(s, w, x, a, b, need, look, stack_ids);
	}
	if (!x->n_part) { /* no CPU sample anywhere: the waker at the wakeup */
		const struct gs_thread *t = gs_thread_find(s->rt.pt, x->tgid, x->tid);

		x->part[0] = (struct wake_part){
			gs_profile_intern(
			    p, gs_thread_role_name[t ? gs_thread_role_decide(p, t) : GS_TR_OTHER]),
			st ? stack_text(p, st) : x->comm, x->tid, 1
		};
		x->n_part = 1;
	}
}

int gs_wakers_label(struct session *s, struct gs_wakers *w, int64_t idx, const uint32_t *stack_ids,
		    struct gs_sample_ctx *c, double *share, int max)
{
	struct waker *x;
	uint32_t total = 0;
	int n;

	if (!w || idx < 0 || (size_t)idx >= w->n)
		return 0;
	if (build_index(s, w))
		return -ENOMEM;
	x = &w->v[idx];
	if (!x->done)
		resolve(s, w, x, stack_ids);
	for (n = 0; n < x->n_part; n++)
		total += x->part[n].count;
	for (n = 0; n < x->n_part && n < max; n++) {
		const struct wake_part *q = &x->part[n];

		if (q->role == (gs_str)-1 || q->text == (gs_str)-1)
			return -ENOMEM;
		if (n)
			c[n] = c[0];
		c[n].str_labels[GS_SL_WAKER_ROLE] = q->role;
		c[n].str_labels[GS_SL_WAKER] = q->text;
		if (q->tid) {
			c[n].num_labels[GS_NL_WAKER_TID] = q->tid;
			c[n].num_set |= 1u << GS_NL_WAKER_TID;
		}
		share[n] = total ? (double)q->count / total : 1.0;
	}
	return n;
}
