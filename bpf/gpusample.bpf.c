// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gpusample's one BPF object.  This file owns the CPU sampling core:
 *
 *   gs_sample           perf_event (cpu-clock, one event per CPU): filter by
 *                       `targets`, build one struct gs_cpu_sample in per-CPU
 *                       scratch (kernel stack, native user stack, Python
 *                       frames), copy it into `events` without a wakeup.
 *   gs_proc_fork        tp_btf/sched_process_fork: a followed target's new
 *                       process inherits its `targets` entry here, in BPF, so
 *                       short-lived workers are sampled from their first tick.
 *   gs_proc_exec        tp_btf/sched_process_exec: image replaced; Python
 *                       config dropped until user space sets a new one.
 *   gs_proc_exit_gd     tp_btf/sched_process_exit, kernels whose tracepoint
 *                       passes (task, bool group_dead) (6.16+).
 *   gs_proc_exit_live   same for older kernels (task only): the group is dead
 *                       when signal->live has dropped to 0.  The loader keeps
 *                       exactly one of the two (checks the kernel BTF).  Both
 *                       also close the exiting thread's off-CPU accounting.
 *   gs_off_switch    tp_btf/sched_switch: off-CPU time and the stacks
 *                       threads wait in (offcpu.bpf.h).
 *
 * Other parts of the object are included from headers owned elsewhere:
 * unwind.bpf.h (native unwinder), python.bpf.h (Python walker) and, at the
 * end of this file, gpu.bpf.h (GPU agent USDT handlers).
 *
 * Cost matters: this program runs F times a second on every CPU (the filter
 * path for non-targets is one array load, `target_filter`).  Scratch lives in a per-CPU
 * array, never on the 512-byte stack.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "gpusample/records.h"
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL"; /* bpf_get_stack is GPL-only */

/* Set by the loader before load (struct gs_sampler_opts). */
const volatile bool kernel_stacks = true;
const volatile bool follow_children = true;

/* tgid (root pid namespace) -> what to sample and how. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct gs_target);
} targets SEC(".maps");

/* A negative filter in front of `targets` for the hottest caller, the
 * sched_switch handler (every context switch of every CPU): slot tgid &
 * (GS_TFILTER_SLOTS - 1) counts the `targets` entries that fall in it, so 0
 * means "not a target" after one inlined array load instead of a hash.
 * Counted atomically where entries are inserted (BPF_NOEXIST, here and in
 * bpf/sampler.c through an mmap of this map) and deleted. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GS_TFILTER_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64); /* 8 bytes: the mmap'ed layout of an array (elements are 8-aligned) */
} target_filter SEC(".maps");

static __always_inline bool gs_maybe_target(__u32 tgid)
{
	__u32 k = tgid & (GS_TFILTER_SLOTS - 1);
	__u64 *n = bpf_map_lookup_elem(&target_filter, &k);

	return n && *n;
}

static __always_inline void gs_filter_count(__u32 tgid, int delta)
{
	__u32 k = tgid & (GS_TFILTER_SLOTS - 1);
	__u64 *n = bpf_map_lookup_elem(&target_filter, &k);

	if (n)
		__sync_fetch_and_add(n, delta);
}

/* Every record goes here; size set by the loader (power of 2). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* The flag for a record that can wait for the reader's next poll (up to
 * 200 ms away): none while the ring is under a quarter full, a wakeup
 * after.  A burst (a GPU agent's PC batches, a storm of switch-outs) is
 * read while the ring still has room, not lost to a sleeping reader. */
/* The ring's size in bytes, set by the loader with the map's (a constant:
 * no query for it on every record). */
const volatile __u64 gs_rb_bytes = 4 << 20;

static __always_inline __u64 gs_rb_lazy(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > gs_rb_bytes / 4 ? BPF_RB_FORCE_WAKEUP
									       : BPF_RB_NO_WAKEUP;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_stats);
} stats SEC(".maps");

struct gs_scratch {
	__u8 b[GS_SCRATCH_SIZE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GS_SCRATCH_NR);
	__type(key, __u32);
	__type(value, struct gs_scratch);
} scratch SEC(".maps");

/* Stack walks in progress on this CPU (GS_NEST_MAX, common.bpf.h): the
 * walk state level that gs_fill_stack takes for the unwinder and the Python
 * walker.  Interrupts nest, so a counter is enough. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} nest_depth SEC(".maps");

_Static_assert(sizeof(struct gs_cpu_sample) % 8 == 0, "frames must be 8-aligned");
_Static_assert(sizeof(struct gs_py_frame) % 8 == 0, "py frames must keep 8-alignment");

static __always_inline struct gs_stats *gs_stats_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline void gs_stat_inc(struct gs_stats *st, __u32 idx)
{
	__u64 i = idx;

	if (!st || i >= GS_STAT_MAX)
		return;
	/* identity for valid slots (GS_STAT_MAX is a power of 2); keeps the
	 * bound on the register clang indexes with */
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(GS_STAT_MAX - 1));
	st->c[i]++;
}

/* v = min(v, max) on the very register used afterwards: clang otherwise
 * may keep using a copy from before a C-level clamp, which the verifier
 * then sees as unbounded.  v must be a 64-bit lvalue. */
#define GS_BOUND(v, max) \
	asm volatile("if %[x] <= %[m] goto +1\n\t%[x] = %[m]" : [x] "+r"(v) : [m] "i"(max))

/* A scratch slot (enum gs_scratch_slot) of this CPU, GS_SCRATCH_SIZE bytes. */
static __always_inline void *gs_scratch(__u32 slot)
{
	return bpf_map_lookup_elem(&scratch, &slot);
}

#define GS_WAKE_RINGBUF events
#include "unwind.bpf.h"
#include "python.bpf.h"

/* True when the sampled registers are kernel mode. */
static __always_inline bool gs_regs_kernel(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* CPL is the low two bits of CS.  The perf_event context only allows
	 * word-sized loads of regs, and 6.9+ turned cs into a 2-byte field in
	 * a union with FRED's csx, so read the whole 8-byte slot at its ABI
	 * offset: offsetof() on the CO-RE type would emit a relocation whose
	 * size (2 from 6.9+ headers) libbpf refuses to apply to an 8-byte
	 * load on older kernels. */
	__u64 cs = *(volatile __u64 *)((void *)&ctx->regs + GS_PT_REGS_CS_OFF);

	return (cs & 3) == 0;
#elif defined(__TARGET_ARCH_arm64)
	return (ctx->regs.pstate & 0xf) != 0; /* PSR_MODE_EL0t == 0 */
#else
	return false;
#endif
}

/*
 * Fill the stack part of rec for the current thread: rec->frames (kernel,
 * native user, Python, in that order), n_kernel, n_user, n_python,
 * unwind_err, and OR the GS_CPU_* stack flags into rec->flags.  Counts
 * unwind and Python errors in st (may be NULL).  Returns the record size in
 * bytes from rec (header included), a multiple of 8, at most
 * GS_CPU_SAMPLE_MAX_SIZE.
 *
 * ctx is the program context (perf_event or uprobe/USDT: bpf_get_stack
 * takes the user registers from it); task is bpf_get_current_task() (a plain
 * kernel pointer: read it with BPF_CORE_READ).  want_kernel asks for the
 * kernel stack; only meaningful when ctx interrupted kernel mode.  rec must
 * point into a scratch slot with GS_STAGE_END bytes behind it (the Python
 * staging area).  Reused by the GPU launch-site handler (gpu.bpf.h).  When
 * every walk-state level of this CPU is taken (cannot happen with today's
 * programs) the record gets the kernel stack only.  compat (a constant)
 * picks the walks for kernels before bpf_loop (unwind.bpf.h).
 *
 * Verification cost: the native walk is a global function (unwind.bpf.h,
 * gs_unwind_cfi) that the verifier checks once per program with unknown
 * arguments, so the state here does not multiply it.  The Python walker
 * writes at a fixed offset (the staging area behind the record) and both
 * walks leave their counts in map values that are read back, bounded, before
 * one memcpy-like helper call per part moves the frames into place (tens of
 * ns): an output pointer or count tied to the kernel stack's depth would
 * multiply the verifier's states.  The counts per kernel and the rules that
 * keep them low are in bpf/unwind.bpf.h (640k-926k with the walk inlined
 * here).
 */
static __always_inline __u32 gs_fill_stack(void *ctx, struct task_struct *task, __u32 tgid,
					   const struct gs_target *t, bool want_kernel,
					   struct gs_cpu_sample *rec, struct gs_stats *st,
					   bool compat)
{
	struct gs_py_frame *pystage = (void *)rec + GS_STAGE_PY_OFF;
	struct gs_unwind_state *uw = NULL;
	__u64 nk = 0, nu = 0, np = 0;
	__u16 flags = rec->flags, uerr = GS_UNWIND_OK;
	__u32 zero = 0, level, *depth;
	long n;

	if (want_kernel) {
		n = bpf_get_stack(ctx, rec->frames, GS_MAX_KERNEL_FRAMES * sizeof(__u64), 0);
		if (n < 0) {
			flags |= GS_CPU_KSTACK_ERR;
			gs_stat_inc(st, GS_STAT_KSTACK_ERR);
		} else {
			nk = (__u64)n / sizeof(__u64);
		}
	}
	GS_BOUND(nk, GS_MAX_KERNEL_FRAMES);

	/* The walks store their counts in map values and the copies below
	 * read them back: a value loaded from a map is not tied to the walks'
	 * states, so the verifier can prune their many exit states.  The
	 * native walk itself is a global function (gs_unwind_cfi), verified
	 * once whatever the state here. */
	rec->n_python = 0;
	depth = bpf_map_lookup_elem(&nest_depth, &zero);
	if (depth && *depth >= GS_NEST_MAX)
		depth = NULL; /* every level taken: no user or Python stack */
	if (depth) {
		level = *depth;
		*depth = level + 1;
		uw = gs_unwind_begin(ctx, tgid, level, &flags, compat);
		if (t->py_cfg_id) {
			n = gs_walk_python(task, t->py_cfg_id, level, pystage, &flags, compat);
			if (compat) /* frames in py_stage[level], see python.bpf.h */
				pystage = bpf_map_lookup_elem(&py_stage, &level);
			rec->n_python = n < 0 ? 0 : n > GS_MAX_PY_FRAMES ? GS_MAX_PY_FRAMES : n;
		}
		if (uw) {
			nu = *(volatile __u32 *)&uw->n;
			uerr = *(volatile __u16 *)&uw->err;
		}
	}
	np = *(volatile __u16 *)&rec->n_python;
	GS_BOUND(nu, GS_MAX_USER_FRAMES);
	GS_BOUND(np, GS_MAX_PY_FRAMES);
	if (uw && nu)
		bpf_probe_read_kernel(rec->frames + nk, nu * sizeof(__u64), uw->ips);
	if (np && pystage)
		bpf_probe_read_kernel(rec->frames + nk + nu, np * sizeof(struct gs_py_frame),
				      pystage);
	if (depth) /* give the level back once its frames are copied */
		*depth -= 1;

	if (uerr < GS_UNWIND_NR)
		gs_stat_inc(st, GS_STAT_UNWIND0 + uerr);
	if (flags & GS_CPU_PY_ERR)
		gs_stat_inc(st, GS_STAT_PY_ERR);
	if (flags & GS_CPU_PY_TRUNC)
		gs_stat_inc(st, GS_STAT_PY_TRUNC);
	rec->n_kernel = nk;
	rec->n_user = nu;
	rec->unwind_err = uerr;
	rec->flags = flags;
	return sizeof(*rec) + (nk + nu) * sizeof(__u64) + np * sizeof(struct gs_py_frame);
}

/* Fill everything of a CPU sample but the stacks and hdr.size; origin is
 * the path taking it (enum gs_cpu_origin). */
static __always_inline void gs_fill_head(struct gs_cpu_sample *rec, __u64 pid_tgid, __u16 origin)
{
	rec->hdr.type = GS_REC_CPU_SAMPLE;
	rec->hdr.version = GS_RECORDS_VERSION;
	rec->hdr.ktime_ns = bpf_ktime_get_ns();
	rec->tgid = pid_tgid >> 32;
	rec->tid = (__u32)pid_tgid;
	rec->cpu = bpf_get_smp_processor_id();
	rec->flags = 0;
	rec->origin = origin;
	rec->pad = 0;
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
}

static __always_inline int gs_sample_body(struct bpf_perf_event_data *ctx, bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct gs_target *t;
	struct gs_cpu_sample *rec;
	struct gs_stats *st;
	bool in_kernel;
	__u32 size;

	/* Most ticks of a busy host hit other processes: the inlined array
	 * load of the filter, not a hash lookup, turns them away (the hash
	 * cost ~1 us per run on a loaded VM, bench/results_bpfcost.md). */
	if (!gs_maybe_target(tgid))
		return 0;
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t)
		return 0;
	st = gs_stats_get();
	rec = gs_scratch(GS_SCRATCH_SAMPLE);
	if (!rec) {
		gs_stat_inc(st, GS_STAT_SCRATCH_ERR);
		return 0;
	}
	in_kernel = gs_regs_kernel(ctx);
	gs_fill_head(rec, pid_tgid, GS_ORIGIN_TIMER);
	if (in_kernel)
		rec->flags = GS_CPU_IN_KERNEL;
	size = gs_fill_stack(ctx, (struct task_struct *)bpf_get_current_task(), tgid, t,
			     kernel_stacks && in_kernel, rec, st, compat);
	if (size > GS_CPU_SAMPLE_MAX_SIZE) /* keeps the verifier's bound explicit */
		return 0;
	rec->hdr.size = size;
	if (bpf_ringbuf_output(
		&events, rec, size,
		gs_py_wakeup_flag((struct task_struct *)bpf_get_current_task(), rec->n_python)))
		gs_stat_inc(st, GS_STAT_LOST);
	else
		gs_stat_inc(st, GS_STAT_SAMPLES);
	return 0;
}

/* The loader loads one of the two (bpf/sampler.c): gs_sample where the
 * kernel has bpf_loop and friends, gs_sample_compat before (unwind.bpf.h). */
SEC("perf_event")
int gs_sample(struct bpf_perf_event_data *ctx)
{
	return gs_sample_body(ctx, false);
}

SEC("perf_event")
int gs_sample_compat(struct bpf_perf_event_data *ctx)
{
	return gs_sample_body(ctx, true);
}

/* ---- off-CPU time (tp_btf/sched_switch) -------------------------------- */
#include "offcpu.bpf.h"

/* ---- process tree ------------------------------------------------------ */

/* Proc events wake the reader: user space must snapshot a new process's
 * maps (and read its Python code objects) before a short-lived worker is
 * gone. */
static __always_inline void gs_emit_proc(__u32 kind, __u32 tgid, __u32 ppid, const char *comm)
{
	struct gs_stats *st = gs_stats_get();
	struct gs_proc_event ev = {};

	ev.hdr.type = GS_REC_PROC_EVENT;
	ev.hdr.version = GS_RECORDS_VERSION;
	ev.hdr.size = sizeof(ev);
	ev.hdr.ktime_ns = bpf_ktime_get_ns();
	ev.kind = kind;
	ev.tgid = tgid;
	ev.ppid = ppid;
	bpf_probe_read_kernel_str(ev.comm, sizeof(ev.comm), comm);
	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP))
		gs_stat_inc(st, GS_STAT_LOST);
	else
		gs_stat_inc(st, GS_STAT_PROC_EVENTS);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(gs_proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct gs_target *t, copy;
	long rc;

	if (!follow_children || ptgid == ctgid) /* a new thread, not a process */
		return 0;
	t = bpf_map_lookup_elem(&targets, &ptgid);
	if (!t || !(t->flags & GS_TARGET_FOLLOW_CHILDREN))
		return 0;
	copy = *t; /* same address space image: Python config stays valid */
	rc = bpf_map_update_elem(&targets, &ctgid, &copy, BPF_NOEXIST);
	if (rc == -17 /* EEXIST: user space was first, keep its entry */)
		return 0;
	if (rc) {
		gs_stat_inc(gs_stats_get(), GS_STAT_TARGETS_FULL);
		return 0;
	}
	gs_filter_count(ctgid, 1);
	gs_emit_proc(GS_PROC_FORK, ctgid, ptgid, child->comm);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(gs_proc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct gs_target *t = bpf_map_lookup_elem(&targets, &tgid);

	if (!t)
		return 0;
	/* The old image's interpreter layout is gone; walking it now would read
	 * garbage.  User space sets a new py_cfg_id after the EXEC event. */
	t->py_cfg_id = 0;
	/* Likewise its mappings: the new image's PCs would be looked up in
	 * the old image's tables (wrong rules, garbage frames).  Frame
	 * pointers (bpf_get_stack) until user space publishes the new image's
	 * mappings, a few ms after the EXEC event wakes it. */
	bpf_map_delete_elem(&gs_cfi_procs, &tgid);
	gs_emit_proc(GS_PROC_EXEC, tgid, p->real_parent->tgid, p->comm);
	return 0;
}

/* Deleting first makes the event once-only when several exiting threads
 * see the group dead. */
static __always_inline void gs_group_exit(struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (bpf_map_delete_elem(&targets, &tgid))
		return;
	gs_filter_count(tgid, -1);
	gs_emit_proc(GS_PROC_EXIT, tgid, p->real_parent->tgid, p->group_leader->comm);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(gs_proc_exit_gd, struct task_struct *p, bool group_dead)
{
	gs_offcpu_exit(p);
	if (group_dead)
		gs_group_exit(p);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(gs_proc_exit_live, struct task_struct *p)
{
	gs_offcpu_exit(p);
	/* do_exit() decrements signal->live before this tracepoint. */
	if (p->signal->live.counter == 0)
		gs_group_exit(p);
	return 0;
}

/* ---- GPU agent USDT handlers --------------------------------------------
 * The GPU part goes here: #include "gpu.bpf.h".  It may use targets,
 * events, stats (free slots, see common.bpf.h), gs_scratch(GS_SCRATCH_LAUNCH)
 * and gs_fill_stack() to capture a launch-site CPU stack. */
#include "gpu.bpf.h"

/* ---- training-step marks (uprobe on autograd's backward) ---------------- */
#include "steps.bpf.h"
/* ---- CUDA driver memory calls (uprobes on libcuda) --------------------- */
#include "gpumem.bpf.h"
