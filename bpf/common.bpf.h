/* SPDX-License-Identifier: MIT */
/*
 * Definitions shared by bpf/gpusample.bpf.c and its loader bpf/sampler.c:
 * the layout of the `stats` per-CPU counters and the size of the sample
 * scratch buffer.  Includable from BPF C (after vmlinux.h) and from user
 * space (after gpusample/records.h, which provides __u64 and friends).
 *
 * Stats: BPF map `stats`, PERCPU_ARRAY with one element of struct gs_stats.
 * Counters are per CPU and never reset; user space sums them.  Slots are
 * indexed by enum gs_stat.  Other BPF parts (the GPU USDT handlers) may
 * name unused slots (30..31 free) here; GS_STAT_MAX stays 32 so
 * the map layout does not change.
 */
#ifndef GS_COMMON_BPF_H
#define GS_COMMON_BPF_H

enum gs_stat {
	GS_STAT_SAMPLES = 0,      /* CPU sample records written to `events` */
	GS_STAT_LOST = 1,         /* CPU samples and proc events that did not fit in `events` */
	GS_STAT_PROC_EVENTS = 2,  /* proc events written */
	GS_STAT_PY_ERR = 3,       /* Python walks that hit a read fault */
	GS_STAT_PY_TRUNC = 4,     /* Python walks cut at GS_MAX_PY_FRAMES */
	GS_STAT_KSTACK_ERR = 5,   /* bpf_get_stack(kernel) failed */
	GS_STAT_SCRATCH_ERR = 6,  /* no per-CPU scratch (should never happen) */
	GS_STAT_TARGETS_FULL = 7, /* fork child not followed: `targets` full */
	GS_STAT_UNWIND0 = 8,      /* GS_STAT_UNWIND0 + enum gs_unwind_err */
	/* off-CPU (offcpu.bpf.h) */
	GS_STAT_OFF_STACKS = 16,    /* off-CPU stack records written */
	GS_STAT_OFF_ENDS = 17,      /* off-CPU end records written */
	GS_STAT_OFF_UNSAMPLED = 18, /* switch-outs accounted without a stack (p < 1) */
	GS_STAT_OFF_THR_FULL = 19,  /* threads not accounted: `offcpu_thr` full */
	GS_STAT_OFF_UNSEEDED = 20,  /* threads first seen mid-window without a seed */
	GS_STAT_OFF_WAKERS = 26,    /* waker records written (gs_off_waking) */
	/* GPU (bpf/gpu.bpf.h) */
	GS_STAT_GPU_RECORDS = 13,  /* GPU records written to `events` */
	GS_STAT_GPU_LAUNCHES = 14, /* launch events written */
	GS_STAT_GPU_BAD = 15,      /* GPU records rejected (bad header, read fault) */
	GS_STAT_GPU_LOST = 21,     /* GPU records and launch events that did not fit in `events` */
	GS_STAT_GPU_RATE = 22,     /* GPU records and launch events over their process's rate */
	/* training steps (bpf/steps.bpf.h) */
	GS_STAT_STEP_MARKS = 23, /* step marks written to `events` */
	GS_STAT_STEP_RATE = 24,  /* step marks over their process's rate */
	GS_STAT_STEP_LOST = 25,  /* step marks that did not fit in `events` */
	/* CUDA driver memory calls (gpumem.bpf.h) */
	GS_STAT_MEM_EVENTS = 27, /* memory call, return and free records written */
	GS_STAT_MEM_RATE = 28,   /* memory calls over their process's rate (not recorded) */
	GS_STAT_MEM_LOST = 29,   /* memory records that did not fit in `events` */
	GS_STAT_MAX = 32,
};

struct gs_stats {
	__u64 c[GS_STAT_MAX];
};

/* Slots of the `target_filter` map (gpusample.bpf.c); a power of 2. */
#define GS_TFILTER_SLOTS 65536

/* Largest CPU sample record: header + every stack at its bound. */
#define GS_CPU_SAMPLE_MAX_SIZE                                                            \
	(sizeof(struct gs_cpu_sample) + (GS_MAX_KERNEL_FRAMES + GS_MAX_USER_FRAMES) * 8 + \
	 GS_MAX_PY_FRAMES * sizeof(struct gs_py_frame))

/* Scratch slots in the per-CPU `scratch` map: a perf_event sample and a
 * uprobe/USDT handler can interleave on one CPU (a tp_btf or uprobe program
 * can be interrupted by the cpu-clock hrtimer), so each user has its own. */
enum gs_scratch_slot {
	GS_SCRATCH_SAMPLE = 0,
	GS_SCRATCH_LAUNCH = 1, /* GPU launch-site handler (gpu.bpf.h) */
	GS_SCRATCH_OFFCPU = 2, /* sched_switch and sched_waking handlers (offcpu.bpf.h):
				* both run with interrupts off under a scheduler
				* lock, so neither nests in the other */
	GS_SCRATCH_MEM = 3,    /* CUDA driver memory calls (gpumem.bpf.h) */
	GS_SCRATCH_NR = 4,
};

/* Bytes per scratch slot: a 64-byte prefix that a record embedding a CPU
 * stack (e.g. a GPU launch) may put first, the largest sample, then a
 * staging area at a fixed offset from the sample where the Python walker
 * writes before its frames are copied into place behind the native ones
 * (see gs_fill_stack: a fixed offset keeps its loop cheap to verify).  The
 * native unwinder writes into its own per-level state (unwind.bpf.h). */
#define GS_SCRATCH_PREFIX 64
#define GS_STAGE_PY_OFF   GS_CPU_SAMPLE_MAX_SIZE /* from the sample's start */
#define GS_STAGE_END      (GS_STAGE_PY_OFF + GS_MAX_PY_FRAMES * sizeof(struct gs_py_frame))
#define GS_SCRATCH_SIZE   (GS_SCRATCH_PREFIX + GS_STAGE_END)

/* Stack walks in progress on one CPU at most: a perf_event sample
 * (gs_sample) can interrupt a uprobe/USDT handler that is walking stacks
 * (the GPU launch handler), never the other way round, and perf_event
 * programs do not nest.  The sched_switch and sched_waking handlers
 * (offcpu.bpf.h) walk stacks with interrupts off, so nothing nests inside
 * them; it can only run on top of a
 * uprobe handler that was preempted (uprobe programs run with migration,
 * not preemption, disabled on preemptible kernels), which again makes two.  The per-CPU walk state of the native unwinder
 * (gs_unwind_st) and of the Python walker (py_walk) has one entry per
 * level; gs_fill_stack takes a level for both and gives it back. */
#define GS_NEST_MAX 2

/* Byte offset of cs in x86-64's struct pt_regs: fixed by the ptrace ABI
 * (struct user_regs_struct: r15 ... orig_ax, ip, cs = word 17) in every
 * kernel; only its C type changed (unsigned long, then a u16 in a union in
 * 6.9+).  Read as a whole word at this offset, never through CO-RE. */
#define GS_PT_REGS_CS_OFF (17 * 8)

#endif
