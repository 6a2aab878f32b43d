/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Off-CPU time: tp_btf/sched_switch.  Included once by bpf/gpusample.bpf.c
 * after gs_fill_stack(); records and the per-thread state are described in
 * include/gpusample/records.h (gs_offcpu_*).
 *
 *   gs_off_switch   every context switch on every CPU.  Only the thread
 *                      leaving the CPU (prev == current) is looked at: the
 *                      interval that ends when it runs again is measured at
 *                      its next switch-out from the kernel's counters
 *                      (sum_exec_runtime, run_delay), so a switch-in needs no
 *                      work and a switch of a thread outside the target set
 *                      costs one lookup, in the array `target_filter`; a
 *                      target thread's switch-out without a stack one task
 *                      storage lookup and a jiffies read (the fast
 *                      path: no precise clock, no map write); the
 *                      `offcpu_thr` hash and the precise clock only where a
 *                      stack is taken or the interval of one closes.
 *   gs_off_waking   sched_waking (in the waker's context): the first
 *                      wakeup of a target thread after a switch-out that
 *                      got a stack takes the waker's stack, so the waits
 *                      that have a stack say who ended them; at most one
 *                      waker walk per off-CPU stack walk, so the same
 *                      budget bounds both.  Any other wakeup costs one
 *                      array load (`target_filter`) or, for a target
 *                      thread, one task storage lookup.
 *   gs_offcpu_exit     called from the sched_process_exit handlers for every
 *                      exiting thread: closes its last interval, frees its
 *                      `offcpu_thr` entry.
 *
 * Why at switch-out: current is prev there, so the same walkers as CPU
 * samples (bpf_get_stack for the kernel, the CFI unwinder from the saved user
 * registers, the Python walker) see exactly the stack the thread waits in.
 *
 * Cost bound: a stack walk costs microseconds, a switch of a busy target can
 * come every few microseconds, so stacks are sampled per thread: p = 1 while
 * the thread switches out less than its rate r times a second, else r / its
 * switch rate, re-estimated each GS_OFF_WINDOW_NS, with at most
 * GS_OFF_WINDOW_CAP walks per window (the first window of a sudden burst).
 * r is offcpu_rate, or offcpu_idle_rate for a thread that ran less than
 * 1/GS_OFF_IDLE_DIV of its last two windows and already has
 * GS_OFF_IDLE_AFTER stacks: a job has many threads that only wait (queue
 * feeders, pool and driver threads), they wait in a few places, and at the
 * full rate they cost more walks than all the working threads together, so
 * that the walk count would grow with the thread count (the training loop
 * in bench/: six such threads took 70% of the walks).  The allowance keeps
 * short runs exact: a thread that waits in two places needs tens of stacks
 * before its split between them is within a few percent.
 * Time is never sampled: intervals without a stack travel as exact sums in
 * the END records and user space spreads them over the sampled stacks of the
 * same thread and state (session/offcpu.c).
 *
 * Scratch: its own slot (GS_SCRATCH_OFFCPU) and one level of nest_depth via
 * gs_fill_stack; see GS_NEST_MAX in common.bpf.h for why that is enough.
 */
#ifndef GS_OFFCPU_BPF_H
#define GS_OFFCPU_BPF_H

#define GS_OFF_WINDOW_NS  50000000ull /* 50 ms */
#define GS_OFF_WINDOW_CAP 16          /* stack walks per thread and window, at most */
#define GS_PF_EXITING     0x00000004  /* include/linux/sched.h */
#define GS_OFF_IDLE_DIV   16          /* on-CPU below 1/16 of the windows: idle */
#define GS_OFF_IDLE_AFTER 64          /* stacks of a thread before the idle rate */

/* Stack walks per second and thread before p drops below 1, for threads
 * that run and for threads that only wait: the loader sets them
 * (GS_OFF_DEFAULT_RATE, bpf/sampler.h). */
const volatile __u32 offcpu_rate = 25;
const volatile __u32 offcpu_idle_rate = 5;
/* Window start (CLOCK_MONOTONIC), written by user space once it has seeded
 * the threads there (0 until then: switches are ignored); threads created
 * later start their window at birth. */
volatile __u64 offcpu_t0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct gs_offcpu_thr);
} offcpu_thr SEC(".maps");

/* The per-switch state of a target thread, in the task itself: a task
 * storage lookup is a few loads where the `offcpu_thr` hash costs a jhash and
 * a bucket walk, and most switch-outs need nothing else (the fast path).
 * `offcpu_thr` stays the record of the exact-time baselines, read by user
 * space (seeds, the intervals still open at stop); it is touched only when a
 * stack is taken or a sampled interval closes.  win_start is in jiffies:
 * the window only paces the sampling, and tracing programs may not read the
 * coarse clock. */
struct gs_off_fast {
	__u64 win_start;
	__u64 win_exec;     /* sum_exec_runtime at win_start */
	__u32 p;            /* capture probability of this window (GS_OFF_P_ONE = 1) */
	__u16 win_switches; /* switch-outs of this window */
	__u16 win_captures;
	__u16 prev_switches; /* of the previous window (rate smoothing) */
	__u8 captured;       /* mirrors offcpu_thr's: a stack waits for its END */
	__u8 prev_idle;      /* the previous window ran below 1/GS_OFF_IDLE_DIV */
	__u32 stacks;        /* stacks taken, up to GS_OFF_IDLE_AFTER */
	__u32 seq;           /* offcpu_thr's seq of the stack that waits (captured) */
	__u8 woken;          /* that wait's waker is taken (gs_off_waking) */
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct gs_off_fast);
} offcpu_fast SEC(".maps");

/* Kernels without task storage (before 5.11) keep the same fast state in
 * a hash by tid, used only by gs_off_switch_compat: one jhash more per
 * switch-out there.  No preallocation on the kernels that never use it; the
 * loader preallocates it where it is used (5.10's verifier warns about
 * run-time allocated hashes in tracing programs). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct gs_off_fast);
} offcpu_fast_h SEC(".maps");

/* The fast state of thread p (tid), created when create is set; compat
 * (a constant) picks the hash. */
static __always_inline struct gs_off_fast *gs_off_fast_get(struct task_struct *p, __u32 tid,
							   bool create, bool compat)
{
	struct gs_off_fast zero = {};

	if (!compat)
		return create ? bpf_task_storage_get(&offcpu_fast, p, 0,
						     BPF_LOCAL_STORAGE_GET_F_CREATE)
			      : bpf_task_storage_get(&offcpu_fast, p, 0, 0);
	if (create)
		bpf_map_update_elem(&offcpu_fast_h, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&offcpu_fast_h, &tid);
}

/* sched_info.run_delay (CONFIG_SCHED_INFO, set by every distribution
 * kernel; also what /proc/PID/schedstat's second field shows), 0 without. */
static __always_inline __u64 gs_run_delay(struct task_struct *p)
{
	if (!bpf_core_field_exists(p->sched_info))
		return 0;
	return p->sched_info.run_delay;
}

/* Split the time since th->last_ns (up to now) by the task's counters and
 * move the baseline.  Returns the off-CPU part split into *blocked and
 * *runnable; *on gets the on-CPU part.  Each part is clipped so that the
 * three sum to the wall time exactly. */
static __always_inline void gs_off_split(struct gs_offcpu_thr *th, struct task_struct *p, __u64 now,
					 __u64 *on, __u64 *blocked, __u64 *runnable)
{
	__u64 exec = p->se.sum_exec_runtime, delay = gs_run_delay(p);
	__u64 wall = now > th->last_ns ? now - th->last_ns : 0;
	__u64 o = exec > th->sum_exec ? exec - th->sum_exec : 0;
	__u64 r = delay > th->run_delay ? delay - th->run_delay : 0;

	if (o > wall)
		o = wall;
	if (!bpf_core_field_exists(p->sched_info) && th->state == GS_OFF_RUNNABLE)
		r = wall; /* no run_delay: a preempted interval is all run queue */
	if (r > wall - o)
		r = wall - o;
	*on = o;
	*runnable = r;
	*blocked = wall - o - r;
	th->last_ns = now;
	th->sum_exec = exec;
	th->run_delay = delay;
}

static __always_inline void gs_off_emit_end(struct gs_offcpu_thr *th, __u32 tid, __u64 now,
					    __u32 seq, __u16 flags, __u64 blocked, __u64 runnable,
					    struct gs_stats *st)
{
	struct gs_offcpu_end e = {};

	e.hdr.type = GS_REC_OFFCPU_END;
	e.hdr.version = GS_RECORDS_VERSION;
	e.hdr.size = sizeof(e);
	e.hdr.ktime_ns = now;
	e.tgid = th->tgid;
	e.tid = tid;
	e.seq = seq;
	e.flags = flags;
	e.blocked_ns = blocked;
	e.runnable_ns = runnable;
	e.acc_on_ns = th->acc_on_ns;
	e.acc_blocked_ns = th->acc_blocked_ns;
	e.acc_runnable_ns = th->acc_runnable_ns;
	if (bpf_ringbuf_output(&events, &e, sizeof(e), gs_rb_lazy())) {
		gs_stat_inc(st, GS_STAT_LOST);
		return; /* keep the sums: the next END carries them */
	}
	th->acc_on_ns = th->acc_blocked_ns = th->acc_runnable_ns = 0;
	gs_stat_inc(st, GS_STAT_OFF_ENDS);
}

/* Close the interval since the last switch-out: its off part belongs to the
 * stack taken then (if any), its on part is plain on-CPU time. */
static __always_inline void gs_off_close(struct gs_offcpu_thr *th, struct task_struct *p, __u32 tid,
					 __u64 now, __u16 flags, struct gs_stats *st)
{
	__u64 on, blocked, runnable;

	gs_off_split(th, p, now, &on, &blocked, &runnable);
	th->acc_on_ns += on;
	if (th->captured) {
		th->captured = 0;
		gs_off_emit_end(th, tid, now, th->seq, flags, blocked, runnable, st);
		return;
	}
	th->acc_blocked_ns += blocked;
	th->acc_runnable_ns += runnable;
	if (flags & GS_OFFEND_EXIT)
		gs_off_emit_end(th, tid, now, 0, flags, 0, 0, st);
}

/* A new entry: a thread born in the window starts at birth with zero
 * counters; one that was there before (not seeded by user space: it
 * appeared between the seed and the attach) starts now. */
static __always_inline struct gs_offcpu_thr *gs_off_new(struct task_struct *p, __u32 tid,
							__u32 tgid, __u64 now, struct gs_stats *st)
{
	struct gs_offcpu_thr th = {}, *e;
	__u64 born = p->start_time, t0 = offcpu_t0;

	th.tgid = tgid;
	if (born >= t0 && born <= now) {
		th.last_ns = born;
		th.state = GS_OFF_RUNNABLE; /* a new task waits for its first run */
	} else {
		th.last_ns = now;
		th.sum_exec = p->se.sum_exec_runtime;
		th.run_delay = gs_run_delay(p);
		gs_stat_inc(st, GS_STAT_OFF_UNSEEDED);
	}
	bpf_map_update_elem(&offcpu_thr, &tid, &th, BPF_NOEXIST);
	e = bpf_map_lookup_elem(&offcpu_thr, &tid);
	if (!e)
		gs_stat_inc(st, GS_STAT_OFF_THR_FULL);
	return e;
}

/* The kernel's CONFIG_HZ, set by the loader from the kernel's config file
 * where it has one (bpf/sampler.c); 0 where it does not (many containers
 * have neither /boot/config-RELEASE nor /proc/config.gz): then the window
 * runs on the precise clock.  Not a libbpf __kconfig extern: libbpf fails
 * the whole load when it finds no config file, even for a weak one. */
const volatile __u32 gs_config_hz = 0;

static __always_inline __u64 gs_off_tick(void)
{
	return gs_config_hz ? bpf_jiffies64() : bpf_ktime_get_ns();
}

/* Decide whether this switch-out of task p gets a stack: see the file
 * comment.  now is gs_off_tick(). */
static __always_inline bool gs_off_want_stack(struct gs_off_fast *f, struct task_struct *task,
					      __u64 now)
{
	__u64 elapsed = now - f->win_start;

	if (gs_config_hz)
		elapsed = elapsed * (1000000000ull / gs_config_hz);

	if (elapsed >= GS_OFF_WINDOW_NS) {
		/* the mean of two windows: one burst does not crush p */
		__u64 n = ((__u64)f->win_switches + f->prev_switches + 1) / 2;
		__u64 exec = task->se.sum_exec_runtime;
		bool idle = exec - f->win_exec < elapsed / GS_OFF_IDLE_DIV;
		__u64 rate = idle && f->prev_idle && f->stacks >= GS_OFF_IDLE_AFTER
				 ? offcpu_idle_rate
				 : offcpu_rate;
		/* a span of 100 s gives p = 1 at any real rate; longer would overflow */
		__u64 span = elapsed < 100000000000ull ? elapsed : 100000000000ull;
		__u64 p = rate * span * GS_OFF_P_ONE / (1000000000ull * (n ? n : 1));

		f->p = p >= GS_OFF_P_ONE ? GS_OFF_P_ONE : p ? p : 1;
		f->win_start = now;
		f->win_exec = exec;
		f->prev_idle = idle;
		f->prev_switches = f->win_switches;
		f->win_switches = 0;
		f->win_captures = 0;
	}
	if (f->win_switches < 0xffff)
		f->win_switches++;
	if (f->win_captures >= GS_OFF_WINDOW_CAP)
		return false;
	if (f->p < GS_OFF_P_ONE && (bpf_get_prandom_u32() & (GS_OFF_P_ONE - 1)) >= f->p)
		return false;
	f->win_captures++;
	if (f->stacks < GS_OFF_IDLE_AFTER)
		f->stacks++;
	return true;
}

/* Send a record whose fixed part (prefix bytes at h) sits right before a
 * CPU sample of size bytes in the GS_SCRATCH_OFFCPU slot; sets hdr.size.
 * False when it did not go out (counted). */
static __always_inline bool gs_off_send(struct gs_rec_hdr *h, __u64 prefix, __u32 size,
					struct gs_stats *st)
{
	__u64 total = prefix + size;

	asm volatile("" : "+r"(total)); /* keep the check on the register used below */
	if (total > GS_SCRATCH_SIZE - GS_SCRATCH_PREFIX + prefix)
		return false;
	h->size = total;
	if (bpf_ringbuf_output(&events, h, total, gs_rb_lazy())) {
		gs_stat_inc(st, GS_STAT_LOST);
		return false;
	}
	return true;
}

/* The stack record: struct gs_offcpu_stack right before a CPU sample that
 * starts at the usual GS_SCRATCH_PREFIX offset of the scratch slot. */
static __always_inline void gs_off_emit_stack(void *ctx, struct task_struct *p, __u32 tgid,
					      const struct gs_target *t, struct gs_offcpu_thr *th,
					      __u32 p_capture, __u64 now, struct gs_stats *st,
					      bool compat)
{
	void *buf = gs_scratch(GS_SCRATCH_OFFCPU);
	struct gs_offcpu_stack *h;
	struct gs_cpu_sample *rec;
	__u32 size;

	_Static_assert(sizeof(struct gs_offcpu_stack) <= GS_SCRATCH_PREFIX, "fits the prefix");
	if (!buf) {
		gs_stat_inc(st, GS_STAT_SCRATCH_ERR);
		return;
	}
	rec = buf + GS_SCRATCH_PREFIX;
	h = buf + GS_SCRATCH_PREFIX - sizeof(*h);
	gs_fill_head(rec, bpf_get_current_pid_tgid(), GS_ORIGIN_OFFCPU);
	rec->flags = GS_CPU_IN_KERNEL;
	/* the kernel stack starts with this program and the tracepoint's
	 * machinery; session/offcpu.c trims those frames by name */
	size = gs_fill_stack(ctx, p, tgid, t, kernel_stacks, rec, st, compat);
	if (size > GS_CPU_SAMPLE_MAX_SIZE)
		return;
	rec->hdr.size = size;
	th->seq++;
	h->hdr.type = GS_REC_OFFCPU_STACK;
	h->hdr.version = GS_RECORDS_VERSION;
	h->hdr.ktime_ns = now;
	h->seq = th->seq;
	h->state = th->state;
	h->pad = 0;
	h->p = p_capture;
	h->pad2 = 0;
	if (!gs_off_send(&h->hdr, sizeof(*h), size, st))
		return;
	th->captured = 1;
	gs_stat_inc(st, GS_STAT_OFF_STACKS);
}

/* First switch-out of a target thread seen here: its `offcpu_thr` entry
 * (seeded by user space, or new) and its fast state. */
static __always_inline struct gs_off_fast *gs_off_first(struct task_struct *p, __u32 tid,
							__u32 tgid, bool compat)
{
	struct gs_offcpu_thr *th = bpf_map_lookup_elem(&offcpu_thr, &tid);
	struct gs_off_fast *f;

	if (!th) {
		if (!bpf_map_lookup_elem(&targets, &tgid))
			return NULL;
		th = gs_off_new(p, tid, tgid, bpf_ktime_get_ns(), gs_stats_get());
		if (!th)
			return NULL;
	}
	f = gs_off_fast_get(p, tid, true, compat);
	if (!f) {
		gs_stat_inc(gs_stats_get(), GS_STAT_OFF_THR_FULL);
		return NULL; /* the baselines stay: the time is still exact */
	}
	f->win_start = gs_off_tick();
	f->win_exec = p->se.sum_exec_runtime;
	f->p = GS_OFF_P_ONE;
	f->captured = th->captured;
	f->seq = th->seq;
	f->woken = 0;
	return f;
}

static __always_inline int gs_off_switch_body(void *ctx, bool preempt, struct task_struct *prev,
					      unsigned int prev_state, bool compat)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	struct gs_offcpu_thr *th;
	struct gs_target *t;
	struct gs_off_fast *f;
	struct gs_stats *st;
	bool want;
	__u64 now;

	if (!gs_maybe_target(tgid) || !tid)
		return 0; /* the common case: one array load */
	if (!offcpu_t0 || (prev->flags & GS_PF_EXITING))
		return 0; /* window not open yet (seeding); exit: gs_offcpu_exit */
	/* Storage exists only for threads of targets: no `targets` lookup on
	 * the hot path (the filter has collisions, the storage has not). */
	f = gs_off_fast_get(prev, tid, false, compat);
	if (!f && !(f = gs_off_first(prev, tid, tgid, compat)))
		return 0;
	want = gs_off_want_stack(f, prev, gs_off_tick());
	st = gs_stats_get();
	/* Fast path: no stack now and none waiting for its END.  The time since
	 * the baseline is not lost: sum_exec_runtime and run_delay are
	 * cumulative, so the next close splits the whole span at once (without
	 * run_delay the split needs each interval's state: no fast path). */
	if (!want && !f->captured && bpf_core_field_exists(prev->sched_info)) {
		gs_stat_inc(st, GS_STAT_OFF_UNSAMPLED);
		return 0;
	}
	th = bpf_map_lookup_elem(&offcpu_thr, &tid);
	if (!th)
		return 0; /* map full at its birth: counted then */
	now = bpf_ktime_get_ns();
	gs_off_close(th, prev, tid, now, 0, st);
	f->captured = 0;
	/* TASK_RUNNING (0) or a preemption: it stays in the run queue. */
	th->state = preempt || !prev_state ? GS_OFF_RUNNABLE : GS_OFF_BLOCKED;
	if (want && (t = bpf_map_lookup_elem(&targets, &tgid))) {
		gs_off_emit_stack(ctx, prev, tgid, t, th, f->p, now, st, compat);
		f->captured = th->captured;
		f->seq = th->seq;
		f->woken = 0;
	} else {
		gs_stat_inc(st, GS_STAT_OFF_UNSAMPLED);
	}
	return 0;
}

/* One of the two is loaded: see gs_sample in gpusample.bpf.c. */
SEC("tp_btf/sched_switch")
int BPF_PROG(gs_off_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return gs_off_switch_body(ctx, preempt, prev, prev_state, false);
}

/* Before 5.18 the tracepoint passes no prev_state: it is the task's state
 * field as the kernel would pass it (`__state` from 5.14, `state` before). */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int gs_task_state(struct task_struct *p)
{
	struct task_struct___pre514 *old = (void *)p;

	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return BPF_CORE_READ(old, state);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(gs_off_switch_compat, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return gs_off_switch_body(ctx, preempt, prev, gs_task_state(prev), true);
}

/* ---- wakers (tp_btf/sched_waking) --------------------------------------
 * The tracepoint fires at the start of try_to_wake_up(), in the waker's
 * context (current is the waker, the argument the wakee); sched_wakeup may
 * run on the wakee's CPU, so this is the one place the waker's stack can be
 * taken.  Where try_to_wake_up() traces it, interrupts are off and the
 * wakee's pi_lock is held, except when a thread wakes itself (p == current,
 * preemption off only): that case returns before any walk. */
#define GS_PF_KTHREAD 0x00200000 /* include/linux/sched.h */

/* The waker's kernel stack alone (a waker outside the targets: its user
 * stack could not be symbolized, and is none of the job's). */
static __always_inline __u32 gs_fill_kstack(void *ctx, struct gs_cpu_sample *rec,
					    struct gs_stats *st)
{
	__u64 nk = 0;
	long n = 0;

	if (kernel_stacks)
		n = bpf_get_stack(ctx, rec->frames, GS_MAX_KERNEL_FRAMES * sizeof(__u64), 0);
	if (n < 0) {
		rec->flags |= GS_CPU_KSTACK_ERR;
		gs_stat_inc(st, GS_STAT_KSTACK_ERR);
	} else {
		nk = (__u64)n / sizeof(__u64);
	}
	GS_BOUND(nk, GS_MAX_KERNEL_FRAMES);
	rec->n_kernel = nk;
	rec->n_user = 0;
	rec->n_python = 0;
	rec->unwind_err = GS_UNWIND_OK;
	return sizeof(*rec) + nk * sizeof(__u64);
}

/* The waker record: struct gs_offcpu_waker right before the waker's CPU
 * sample, laid out as gs_off_emit_stack's. */
static __always_inline void gs_off_emit_waker(void *ctx, __u32 tgid, __u32 tid, __u32 seq,
					      bool compat)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	void *buf = gs_scratch(GS_SCRATCH_OFFCPU);
	struct gs_stats *st = gs_stats_get();
	__u32 ctgid = pid_tgid >> 32, size;
	struct gs_target *t = NULL;
	struct gs_offcpu_waker *h;
	struct gs_cpu_sample *rec;
	__u16 flags = 0;

	_Static_assert(sizeof(struct gs_offcpu_waker) <= GS_SCRATCH_PREFIX, "fits the prefix");
	if (!buf) {
		gs_stat_inc(st, GS_STAT_SCRATCH_ERR);
		return;
	}
	rec = buf + GS_SCRATCH_PREFIX;
	h = buf + GS_SCRATCH_PREFIX - sizeof(*h);
	gs_fill_head(rec, pid_tgid, GS_ORIGIN_WAKER);
	rec->flags = GS_CPU_IN_KERNEL;
	if (BPF_CORE_READ(cur, flags) & GS_PF_KTHREAD)
		flags |= GS_WAKER_KTHREAD;
	else if (gs_maybe_target(ctgid))
		t = bpf_map_lookup_elem(&targets, &ctgid);
	if (t) {
		size = gs_fill_stack(ctx, cur, ctgid, t, kernel_stacks, rec, st, compat);
	} else {
		flags |= GS_WAKER_OUTSIDE;
		size = gs_fill_kstack(ctx, rec, st);
	}
	if (size > GS_CPU_SAMPLE_MAX_SIZE)
		return;
	rec->hdr.size = size;
	h->hdr.type = GS_REC_OFFCPU_WAKER;
	h->hdr.version = GS_RECORDS_VERSION;
	h->hdr.ktime_ns = rec->hdr.ktime_ns;
	h->tgid = tgid;
	h->tid = tid;
	h->seq = seq;
	h->flags = flags;
	h->pad = 0;
	if (gs_off_send(&h->hdr, sizeof(*h), size, st))
		gs_stat_inc(st, GS_STAT_OFF_WAKERS);
}

static __always_inline int gs_off_waking_body(void *ctx, struct task_struct *p, bool compat)
{
	__u32 tgid = p->tgid, tid = p->pid;
	struct gs_off_fast *f;

	if (!gs_maybe_target(tgid) || !tid)
		return 0; /* the common case: one array load */
	if (!offcpu_t0 || tid == (__u32)bpf_get_current_pid_tgid())
		return 0; /* a thread waking itself ended no wait */
	/* storage exists only for threads of targets that switched out */
	f = gs_off_fast_get(p, tid, false, compat);
	if (!f || !f->captured || f->woken)
		return 0;
	f->woken = 1;
	gs_off_emit_waker(ctx, tgid, tid, f->seq, compat);
	return 0;
}

/* One of the two is loaded, as the switch handlers. */
SEC("tp_btf/sched_waking")
int BPF_PROG(gs_off_waking, struct task_struct *p)
{
	return gs_off_waking_body(ctx, p, false);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(gs_off_waking_compat, struct task_struct *p)
{
	return gs_off_waking_body(ctx, p, true);
}

/* From sched_process_exit (current == p, for every exiting thread). */
static __always_inline void gs_offcpu_exit(struct task_struct *p)
{
	__u32 tid = p->pid;
	struct gs_offcpu_thr *th = bpf_map_lookup_elem(&offcpu_thr, &tid);

	if (!th)
		return;
	gs_off_close(th, p, tid, bpf_ktime_get_ns(), GS_OFFEND_EXIT, gs_stats_get());
	bpf_map_delete_elem(&offcpu_thr, &tid);
	bpf_map_delete_elem(&offcpu_fast_h, &tid); /* task storage goes with the task */
}

#endif
