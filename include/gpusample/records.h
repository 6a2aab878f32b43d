/* SPDX-License-Identifier: MIT */
/*
 * gpusample wire records: the one place where BPF, user space and the GPU
 * agent agree on byte layouts.  Included from BPF C (after vmlinux.h, which
 * provides __u8.. __u64) and from user space (after <stdint.h> via the
 * typedefs below).
 *
 * Transport: every record travels through the single BPF ring buffer `events`
 * and starts with struct gs_rec_hdr.  Records are variable length; hdr.size
 * is the total byte size including the header and is always a multiple of 8.
 * Times are CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns()).
 *
 * Versioning: bump GS_RECORDS_VERSION on any layout change; user space
 * rejects records whose hdr.version differs.
 */
#ifndef GPUSAMPLE_RECORDS_H
#define GPUSAMPLE_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* __u8 .. __u64, same as the kernel's */
#endif

/* 2: off-CPU records; 3: gs_cpu_sample.origin; 4: gs_gpu_cubin.alias_of */
#define GS_RECORDS_VERSION 4

#define GS_COMM_LEN          16
#define GS_MAX_KERNEL_FRAMES 127 /* kernel.perf_event_max_stack default */
/* Native user frames of a CFI walk: importing PyTorch 2.x nests a dozen
 * native frames per Python import level, and at 127 a fifth of the stacks
 * of a 3.14 job's start-up were cut (tests/tools/unwind_shares.sh). */
#define GS_MAX_USER_FRAMES 255
#define GS_MAX_FP_FRAMES   127 /* the frame-pointer walk: kernel.perf_event_max_stack */
#define GS_MAX_PY_FRAMES   128

enum gs_rec_type {
	GS_REC_CPU_SAMPLE = 1,      /* struct gs_cpu_sample */
	GS_REC_PROC_EVENT = 2,      /* struct gs_proc_event */
	GS_REC_GPU_PC_BATCH = 3,    /* struct gs_gpu_pc_batch */
	GS_REC_GPU_STALL_TABLE = 4, /* struct gs_gpu_stall_table */
	GS_REC_GPU_CUBIN = 5,       /* struct gs_gpu_cubin */
	GS_REC_GPU_LAUNCH = 6,      /* struct gs_gpu_launch + CPU stack */
	GS_REC_GPU_STATUS = 7,      /* struct gs_gpu_status */
	GS_REC_WAKEUP = 8,          /* bare gs_rec_hdr: user space has work (CFI table wanted) */
	GS_REC_OFFCPU_STACK = 9,    /* struct gs_offcpu_stack + CPU stack */
	GS_REC_OFFCPU_END = 10,     /* struct gs_offcpu_end */
	GS_REC_STEP_MARK = 11,      /* struct gs_step_mark */
	GS_REC_OFFCPU_WAKER = 12,   /* struct gs_offcpu_waker + CPU stack */
	GS_REC_MEM_CALL = 13,       /* struct gs_mem_call + CPU stack */
	GS_REC_MEM_RET = 14,        /* struct gs_mem_ret */
	GS_REC_MEM_FREE = 15,       /* struct gs_mem_free */
};

struct gs_rec_hdr {
	__u16 type;    /* enum gs_rec_type */
	__u16 version; /* GS_RECORDS_VERSION */
	__u32 size;    /* bytes, header included, multiple of 8 */
	__u64 ktime_ns;
};

/* One Python frame as recorded by the BPF walker at sample time.  User space
 * reads the code object later (qualname, filename, line table). */
#define GS_PYF_ENTRY    (1u << 0) /* last frame of one C-level eval invocation */
#define GS_PYF_BAD_CODE (1u << 1) /* code pointer could not be validated */
struct gs_py_frame {
	__u64 code;  /* PyCodeObject* in the target's address space */
	__u32 lasti; /* byte offset of the current instruction in co_code
		       * (3.11+: in co_code_adaptive); 0xffffffff = not started */
	__u16 check; /* gs_py_checksum(co_firstlineno, co_argcount), python.h */
	__u16 flags; /* GS_PYF_* */
};

/* gs_cpu_sample.flags */
#define GS_CPU_IN_KERNEL  (1u << 0) /* interrupted in kernel mode */
#define GS_CPU_USER_TRUNC (1u << 1) /* native user walk hit its depth bound */
#define GS_CPU_PY_TRUNC   (1u << 2) /* Python walk hit GS_MAX_PY_FRAMES */
#define GS_CPU_KSTACK_ERR (1u << 3) /* bpf_get_stack(kernel) failed */
#define GS_CPU_PY_ERR     (1u << 4) /* Python walk failed (read fault) */
#define GS_CPU_USER_CFI   (1u << 5) /* user frames came from the CFI unwinder */
#define GS_CPU_USER_SCAN \
	(1u << 6) /* a caller was found by a stack scan (code
					* without a table or frame pointer: JIT) */

/* Reasons a native user unwind stopped early; counted in BPF (stats map). */
enum gs_unwind_err {
	GS_UNWIND_OK = 0,
	GS_UNWIND_NO_TABLE = 1,
	GS_UNWIND_READ_FAULT = 2,
	GS_UNWIND_BAD_RULE = 3,
	GS_UNWIND_DEPTH = 4,
	GS_UNWIND_NR = 5,
};

/* gs_cpu_sample.origin: the BPF path that took the stack.  A sample nested
 * in another record says that record's path, so every consumer reads a
 * launch or off-CPU stack as a CPU sample with its origin (the codec
 * refuses a sample whose origin is not its container's). */
enum gs_cpu_origin {
	GS_ORIGIN_TIMER = 1,  /* perf event tick (gs_sample): GS_REC_CPU_SAMPLE */
	GS_ORIGIN_OFFCPU = 2, /* switch-out (gs_off_switch): in GS_REC_OFFCPU_STACK */
	GS_ORIGIN_LAUNCH = 3, /* GPU kernel launch (agent USDT): in GS_REC_GPU_LAUNCH */
	GS_ORIGIN_WAKER = 4,  /* the waker at sched_waking: in GS_REC_OFFCPU_WAKER */
	GS_ORIGIN_MEM = 5,    /* CUDA driver allocation (uprobe): in GS_REC_MEM_CALL */
};

/* A CPU sample.  Followed by, in this order:
 *   __u64 kernel_ips[n_kernel];            leaf first
 *   __u64 user_ips[n_user];                leaf first, runtime addresses
 *   struct gs_py_frame py[n_python];       innermost (leaf) first
 * User return addresses are as read from the stack (the caller's PC after the
 * call); symbolizers subtract 1 for every non-leaf frame. */
struct gs_cpu_sample {
	struct gs_rec_hdr hdr;
	__u32 tgid;
	__u32 tid;
	__u32 cpu;
	__u16 flags; /* GS_CPU_* */
	__u8 n_kernel;
	__u8 n_user;
	__u16 n_python;
	__u16 unwind_err; /* enum gs_unwind_err of the native walk */
	__u16 origin;     /* enum gs_cpu_origin */
	__u16 pad;
	char comm[GS_COMM_LEN]; /* thread comm */
	__u64 frames[];
};

/* ---- off-CPU time (tp_btf/sched_switch, bpf/offcpu.bpf.h) ---------------
 *
 * Accounting is exact; stacks are sampled.  For every thread of a target,
 * BPF splits the time between two of its switch-outs from the kernel's own
 * counters: on-CPU = delta of se.sum_exec_runtime, runnable = delta of
 * sched_info.run_delay (waiting in a run queue: preempted, or woken and not
 * yet running), blocked = the rest of the wall time between the two
 * switch-outs.  The three sum to the wall time by construction.
 *
 * At a switch-out BPF walks the thread's stack (the same walkers as CPU
 * samples) with probability p (per thread: 1 while it switches out less than
 * the configured rate, else rate / switch-outs per second, re-estimated every
 * 50 ms over the last two windows) and emits GS_REC_OFFCPU_STACK at once.  When the interval that
 * stack waited in is closed (at the thread's next switch-out, at its exit)
 * BPF emits GS_REC_OFFCPU_END with the interval's blocked and runnable
 * parts and the exact time of everything not sampled since the thread's
 * previous END record.  What is still open at the end of the run is in the
 * `offcpu_thr` map (struct gs_offcpu_thr), which user space reads after
 * detaching.  Times are CLOCK_MONOTONIC ns. */
enum gs_offcpu_state {
	GS_OFF_BLOCKED = 1,  /* went to sleep: futex, poll, read, nanosleep, D state */
	GS_OFF_RUNNABLE = 2, /* preempted: stayed in the run queue */
};
#define GS_OFF_P_ONE 65536u /* p is in units of 1/65536 */

/* Followed by a complete struct gs_cpu_sample (own hdr, frames, origin
 * GS_ORIGIN_OFFCPU) of the thread at its switch-out; hdr.size covers both.
 * hdr.ktime_ns = the switch-out time. */
struct gs_offcpu_stack {
	struct gs_rec_hdr hdr; /* type GS_REC_OFFCPU_STACK */
	__u32 seq;             /* per thread; matched by gs_offcpu_end.seq */
	__u16 state;           /* enum gs_offcpu_state at the switch-out */
	__u16 pad;
	__u32 p; /* sampling probability, GS_OFF_P_ONE = 1 */
	__u32 pad2;
};

/* gs_offcpu_end.flags */
#define GS_OFFEND_EXIT (1u << 0) /* the thread exited: no more records for it */
struct gs_offcpu_end {
	struct gs_rec_hdr hdr; /* type GS_REC_OFFCPU_END; ktime_ns = when closed */
	__u32 tgid;
	__u32 tid;
	__u32 seq;   /* the gs_offcpu_stack closed here; 0 = none */
	__u16 flags; /* GS_OFFEND_* */
	__u16 pad;
	__u64 blocked_ns;  /* that interval, blocked part (ns) */
	__u64 runnable_ns; /* that interval, run-queue part (ns) */
	/* Exact time of the thread since its previous END record (or the start
	 * of its window) that is not in blocked_ns / runnable_ns above. */
	__u64 acc_on_ns;
	__u64 acc_blocked_ns;
	__u64 acc_runnable_ns;
};

/* A training-step boundary seen from outside the job (bpf/steps.bpf.h): a
 * return from autograd's backward (torch::autograd::Engine::execute, a
 * uretprobe user space attaches per process to the libtorch_cpu it maps).
 * Or the entry of an optimizer's step (kind GS_STEP_OPTIMIZER: a uprobe on
 * the profiler's record_function_enter_new, region "Optimizer.step#...").
 * At most step_mark_rate per second, process and kind pass (the rest are
 * counted); hdr.ktime_ns is the event, on the clock of CPU samples. */
enum gs_step_kind {
	GS_STEP_BACKWARD_END = 1, /* return from Engine::execute */
	GS_STEP_OPTIMIZER = 2,    /* entry of an "Optimizer.step#..." profiler region */
};
struct gs_step_mark {
	struct gs_rec_hdr hdr; /* type GS_REC_STEP_MARK */
	__u32 tgid;
	__u32 tid;
	__u32 kind; /* enum gs_step_kind */
	__u32 pad;
};

/* The wakeup that ended a sampled blocked interval (sched_waking, in the
 * waker's context: bpf/offcpu.bpf.h gs_off_waking).  Taken for the first
 * wakeup of a thread after a switch-out that got a stack (seq), so there are
 * at most as many as GS_REC_OFFCPU_STACK records.  Followed by a complete
 * struct gs_cpu_sample (origin GS_ORIGIN_WAKER) of the waker: tgid, tid and
 * comm of the thread that was current, its kernel stack and, for a waker of
 * a target only, its native and Python stacks.  A wakeup from an interrupt
 * (timer expiry, I/O completion) runs on whatever thread the interrupt hit:
 * its kernel stack says so (hardirq / softirq entry frames), and user space
 * names it by them instead of blaming that thread.  hdr.ktime_ns = the
 * wakeup. */
#define GS_WAKER_KTHREAD (1u << 0) /* current is a kernel thread (PF_KTHREAD) */
#define GS_WAKER_OUTSIDE (1u << 1) /* current is no target's: kernel stack only */
struct gs_offcpu_waker {
	struct gs_rec_hdr hdr; /* type GS_REC_OFFCPU_WAKER */
	__u32 tgid;            /* the wakee */
	__u32 tid;
	__u32 seq;   /* the wakee's gs_offcpu_stack this wakeup ends */
	__u16 flags; /* GS_WAKER_* */
	__u16 pad;
};

/* Value of the BPF hash map `offcpu_thr`, keyed by tid (root pid namespace):
 * one per thread of a target, from its first switch-out (or from the seed
 * user space writes at start) until its exit. */
struct gs_offcpu_thr {
	__u64 last_ns;   /* CLOCK_MONOTONIC of the baseline: last close / window start */
	__u64 sum_exec;  /* se.sum_exec_runtime then */
	__u64 run_delay; /* sched_info.run_delay then */
	__u64 acc_on_ns; /* exact time not yet reported (see gs_offcpu_end) */
	__u64 acc_blocked_ns;
	__u64 acc_runnable_ns;
	__u32 tgid;
	__u32 seq;     /* last stack record's seq */
	__u8 state;    /* enum gs_offcpu_state of the sampled interval, 0 = unknown */
	__u8 captured; /* the open interval has a stack record (seq) */
	__u8 pad[6];
};

enum gs_proc_kind {
	GS_PROC_FORK = 1, /* new process (child tgid) entered the target set */
	GS_PROC_EXEC = 2, /* image replaced; re-read maps and runtimes */
	GS_PROC_EXIT = 3, /* whole thread group gone */
};

struct gs_proc_event {
	struct gs_rec_hdr hdr;
	__u32 kind; /* enum gs_proc_kind */
	__u32 tgid;
	__u32 ppid; /* parent tgid for FORK */
	__u32 pad;
	char comm[GS_COMM_LEN]; /* process comm (group leader) */
};

/* ---- target configuration: user space -> BPF maps ---------------------- */

/* Value of the BPF `targets` hash map, keyed by tgid. */
#define GS_TARGET_FOLLOW_CHILDREN (1u << 0)
struct gs_target {
	__u32 flags;     /* GS_TARGET_* */
	__u32 py_cfg_id; /* 0 = no Python; else key into `py_cfgs` */
	__u32 root_tgid; /* the -p / launched process this one descends from */
	__u32 pad;
};

/* Per-interpreter Python walker configuration (BPF map `py_cfgs`).  Filled by
 * symbolizer/python discovery (gs_py_discover); inherited by fork children
 * through the targets entry (same address space).  56 bytes.
 * Thread state: *(fsbase + tls_1stblock + tss_key*16 + 8) (glibc
 * struct pthread.specific_1stblock[key].data, key < 32); tss_key ==
 * GS_PY_TSS_TLS: *(fsbase + (__s32)tls_1stblock), a static thread-local
 * variable (3.15 keeps the PyGILState thread state in one, no TSS key). */
#define GS_PY_TSS_TLS (-2)
struct gs_py_cfg {
	__u32 version_hex;  /* PY_VERSION_HEX, e.g. 0x030b07f0 */
	__s32 tss_key;      /* pthread TSS key holding PyThreadState* */
	__u32 tls_1stblock; /* glibc struct pthread.specific_1stblock */
	__u32 pad0;
	__u64 py_none;   /* &_Py_NoneStruct (3.13 C entry frame) */
	__u64 code_type; /* &PyCode_Type: frames whose code object has
				 * another type get GS_PYF_BAD_CODE */
	/* PyThreadState */
	__u16 ts_frame;       /* <=3.10 frame, 3.11/3.12 cframe, 3.13 current_frame */
	__u16 cframe_current; /* _PyCFrame.current_frame (3.11/3.12) */
	/* frame (PyFrameObject <=3.10, _PyInterpreterFrame 3.11+) */
	__u16 fr_back;
	__u16 fr_code;
	__u16 fr_lasti;         /* f_lasti (int) or prev_instr/instr_ptr (ptr) */
	__u16 fr_entry;         /* is_entry (3.11) or owner (3.12+) */
	__u16 code_adaptive;    /* co_code_adaptive offset (3.11+) */
	__u16 code_firstlineno; /* used for the checksum */
	__u16 code_argcount;
	__u16 pad1[3];
};

/* ---- GPU agent records (USDT -> BPF -> ring buffer) ---------------------
 * Owned by gpu_sampler/ (see gpu_sampler/agent.h for the probe list).  The
 * agent fills these in its own memory and passes pointer + size to a USDT
 * probe; the BPF handler copies them (bounded) into the ring buffer behind a
 * gs_rec_hdr. */

/*
 * Transport.  The agent builds each record complete (gs_rec_hdr included:
 * type, version, size) in its own memory and fires USDT probe
 * gpusample:record(ptr, size) -- or gpusample:launch(ptr, size) for launch
 * events.  The BPF handler copies at most GS_GPU_REC_MAX bytes, rejects a
 * record whose hdr.type/version/size disagree with the probe, then overwrites
 * hdr.ktime_ns and gpu.tgid / gpu.tid (root pid namespace) before writing it
 * into the `events` ring buffer.  Everything is little-endian, 8-aligned, and
 * hdr.size is a multiple of 8.
 *
 * Identity: ctx_uid is CUPTI's context id (cuptiGetContextId, unique per
 * process), device is CUPTI's device id (cuptiGetDeviceId).  A stall reason
 * index means nothing without the stall table of the same (tgid, ctx_uid):
 * tables differ by GPU architecture, indices are sparse and unsorted.
 *
 * Function identity across records: name_hash = FNV-1a 64 of the full
 * mangled kernel name (GS_FNV64_*).  PC records and launch events both carry
 * it, so they join even where a name was truncated for transport.
 */
#define GS_GPU_REC_MAX        16384 /* max bytes of one GPU record */
#define GS_GPU_STALL_NAME_LEN 128   /* CUPTI_STALL_REASON_STRING_SIZE */
#define GS_GPU_STATUS_MSG_LEN 256
#ifndef __VMLINUX_H__
#include "util/hash.h" /* GS_FNV64_*, the constants of both wire hashes */

/* The kernel identity carried by gs_gpu_pc.name_hash and
 * gs_gpu_launch.name_hash (agent) and matched by the join (host). */
static inline __u64 gs_kernel_name_hash(const char *mangled)
{
	if (!mangled)
		return 0; /* unknown */
	/* seed 0: plain FNV-1a 64 */
	return gs_hash_bytes(mangled, strlen(mangled), 0);
}

/* Cubin identity (gs_gpu_pc.cubin_crc, gs_gpu_cubin.crc, the symbolizer's
 * key): a hash of every byte.  cuptiGetCubinCrc samples the image sparsely
 * (one byte flipped at 257 spread offsets of a 7 MB cubin never changed it;
 * cubins differing in one immediate collide), so the agent registers this
 * with cuptiRegisterComputeCrcCallback and CUPTI stamps it into PC records.
 * Each step (xor a word, multiply by an odd constant, rotate) is a
 * bijection of the state, so images of one length differing in a single
 * 8-byte word always hash apart.  Never 0 (0 = unknown). */
static inline __u64 gs_cubin_hash(const void *image, __u64 size)
{
	const unsigned char *p = (const unsigned char *)image;
	__u64 h = GS_FNV64_OFFSET ^ (size * GS_GOLDEN64);
	__u64 i = 0;

	for (; i + 8 <= size; i += 8) {
		__u64 w;
		__builtin_memcpy(&w, p + i, 8);
		h = (h ^ w) * GS_FMIX64_M1;
		h = (h << 31) | (h >> 33);
	}
	for (; i < size; i++)
		h = gs_fnv1a_byte(h, p[i]);
	h ^= h >> 33;
	h *= GS_FMIX64_M2;
	h ^= h >> 33;
	return h ? h : 1;
}
#endif

/* Common prefix of every GPU record, right after gs_rec_hdr. */
struct gs_gpu_common {
	__u32 tgid;    /* set by BPF */
	__u32 tid;     /* set by BPF: the thread that fired the probe */
	__u32 ctx_uid; /* CUPTI context id; 0 = process-wide record */
	__u32 device;  /* CUPTI device id; ~0u when ctx_uid == 0 */
};

/* gs_gpu_pc_batch.flags */
#define GS_GPU_BATCH_SERIALIZED     (1u << 0) /* kernel-serialized mode: correlation ids valid */
#define GS_GPU_BATCH_HW_FULL        (1u << 1) /* GetData reported hardwareBufferFull */
#define GS_GPU_BATCH_FIRST          (1u << 2) /* first record of one cuptiPCSamplingGetData call */
#define GS_GPU_BATCH_LAST           (1u << 3) /* remainingNumPcs was 0 after this call */
#define GS_GPU_BATCH_NO_CORRELATION (1u << 4) /* CUPTI < API v22: correlation_id absent (0) */

/* One PC (one SASS instruction of one kernel in one range). */
struct gs_gpu_pc {
	__u64 cubin_crc;      /* CUpti_PCSamplingPCData.cubinCrc = gs_cubin_hash (registered) */
	__u64 pc_offset;      /* function-relative byte offset of the SASS instruction */
	__u64 name_hash;      /* FNV-1a 64 of the full mangled function name */
	__u32 function_index; /* symbol index of the function in the cubin's ELF symtab */
	__u32 correlation_id; /* serialized mode: the launch's correlation id; else 0 */
	__u32 name_off;       /* offset of the NUL-terminated mangled name in names[] */
	__u16 first_count;    /* index of this PC's first entry in counts[] */
	__u16 n_counts;       /* entries in counts[]: (stall reason index, samples) */
};

struct gs_gpu_stall_count {
	__u32 reason_index; /* index from this context's stall table */
	__u32 samples;
};

/* A batch of PC records from one cuptiPCSamplingGetData call (one call may
 * be split over several batches; the per-call totals are in the FIRST one
 * and zero in the rest, so summing over batches is always right).
 * Followed by:
 *   struct gs_gpu_pc pcs[n_pcs];
 *   struct gs_gpu_stall_count counts[n_counts];
 *   char names[names_len];  NUL-terminated mangled names, deduplicated per
 *                           batch, each truncated to at most 4095 bytes
 *   zero padding to hdr.size. */
struct gs_gpu_pc_batch {
	struct gs_rec_hdr hdr; /* type GS_REC_GPU_PC_BATCH */
	struct gs_gpu_common gpu;
	__u64 range_id;         /* CUpti_PCSamplingData.rangeId */
	__u64 total_samples;    /* all samples of the call, incl. dropped, non-user */
	__u64 dropped_samples;  /* dropped by the hardware */
	__u64 non_user_samples; /* samples in non-user kernels (no PC records) */
	__u32 n_pcs;
	__u32 n_counts;
	__u32 names_len;       /* bytes of names[], including NULs */
	__u32 flags;           /* GS_GPU_BATCH_* */
	__u32 seq;             /* per-context batch counter (gaps = lost records) */
	__u32 sampling_period; /* CUPTI exponent: period is 2^value cycles */
};

/* Stall reason table of one context, emitted when the context is armed.
 * Followed by struct gs_gpu_stall_reason reasons[n_reasons], in CUPTI's
 * order (not sorted by index). */
struct gs_gpu_stall_reason {
	__u32 index;                      /* pcSamplingStallReasonIndex */
	__u32 flags;                      /* GS_GPU_STALL_* */
	char name[GS_GPU_STALL_NAME_LEN]; /* e.g. "smsp__pcsamp_warps_issue_stalled_barrier" */
};
#define GS_GPU_STALL_NOT_ISSUED \
	(1u << 0) /* name ends in _not_issued: latency twin, never add to the base */
#define GS_GPU_STALL_COUNTER (1u << 1) /* sample_count / samples_data_dropped, not a warp state */
struct gs_gpu_stall_table {
	struct gs_rec_hdr hdr; /* type GS_REC_GPU_STALL_TABLE */
	struct gs_gpu_common gpu;
	__u32 n_reasons;
	__u32 sampling_period; /* CUPTI exponent in effect (read back) */
	__u32 collection_mode; /* 1 continuous, 2 kernel serialized */
	__u32 sm_count;        /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0 unknown */
	__u32 clock_khz;       /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0 unknown */
	__u32 pad;
};

/* A module (cubin) known to the agent.  The agent keeps its own copy of
 * the bytes at `addr` for the life of the process (unless GS_GPU_CUBIN_NOT_KEPT),
 * so the host reads them with process_vm_readv(tgid, addr, size) at any
 * time.  Emitted at MODULE_LOADED while armed, and again for every known
 * cubin each time the agent arms (late attach, second attach).
 * An alias record (alias_of != 0) adds `crc` as a second key of the cubin
 * announced just before under alias_of: PC records may carry either (CUPTI
 * keys them with its own CRC when it does not honour the agent's CRC
 * callback for a module); the host reads no bytes for it, addr and size
 * repeat the first record's. */
#define GS_GPU_CUBIN_UNLOADED (1u << 0) /* MODULE_UNLOAD_STARTING */
#define GS_GPU_CUBIN_NOT_KEPT (1u << 1) /* over the agent's memory cap: addr = 0 */
#define GS_GPU_CUBIN_REPLAY   (1u << 2) /* re-announced at arm time */
struct gs_gpu_cubin {
	struct gs_rec_hdr hdr; /* type GS_REC_GPU_CUBIN */
	struct gs_gpu_common gpu;
	__u64 crc;       /* gs_cubin_hash of the image: matches gs_gpu_pc.cubin_crc */
	__u64 addr;      /* agent's copy in the target's address space */
	__u64 size;      /* bytes */
	__u32 module_id; /* CUpti_ModuleResourceData.moduleId */
	__u32 flags;     /* GS_GPU_CUBIN_* */
	__u64 alias_of;  /* 0, or the crc of the cubin this key also names */
};

/* A kernel launch, 1 in sample_every, fired on the launching thread inside
 * the CUDA launch call (driver API ENTER callback).  The agent passes the
 * fixed part (exactly sizeof(struct gs_gpu_launch) = GS_SCRATCH_PREFIX = 64
 * bytes); BPF appends the CPU stack of that thread as a complete
 * struct gs_cpu_sample record (its own hdr, type GS_REC_CPU_SAMPLE, origin
 * GS_ORIGIN_LAUNCH, frames following), so the outer hdr.size covers both:
 *   struct gs_gpu_launch; struct gs_cpu_sample stack; frames...
 * The kernel is identified by name_hash (the same hash as gs_gpu_pc.name_hash;
 * names travel in PC batches).  Kernel-serialized mode: correlation_id equals
 * gs_gpu_pc.correlation_id of the launch's samples. */
struct gs_gpu_launch {
	struct gs_rec_hdr hdr; /* type GS_REC_GPU_LAUNCH */
	struct gs_gpu_common gpu;
	__u64 name_hash;      /* FNV-1a 64 of the full mangled kernel name (symbolName) */
	__u32 correlation_id; /* CUpti_CallbackData.correlationId */
	__u32 cbid;           /* CUPTI driver CBID (cuLaunchKernel = 307, GS_CBID_GRAPH_*) */
	__u32 sample_every;   /* this event stands for this many launches (>= 1) */
	__u32 seq;            /* per-process launch event counter (gaps = lost) */
	__u64 launches_total; /* launches seen by the agent so far while armed */
};

/* ---- CUDA driver memory calls (uprobes on libcuda.so.1, bpf/gpumem.bpf.h) --
 *
 * An allocation entry point (cuMemAlloc_v2, cuMemCreate, ...: every one
 * whose first argument is the out-parameter) emits GS_REC_MEM_CALL at entry
 * with the calling thread's CPU stack, and GS_REC_MEM_RET at its return
 * with the result and the out-parameter as read then; the pair is matched
 * by (tid, call_ns).  A free-like entry point (cuMemFree_v2, cuMemRelease,
 * cuMemUnmap, ...) emits GS_REC_MEM_FREE at entry, without a stack.  Which
 * entry point fired is told by ip (its address in the process): BPF passes
 * the raw arguments and user space interprets them (gpu/gpumem.h). */
struct gs_mem_call {
	struct gs_rec_hdr hdr; /* type GS_REC_MEM_CALL; ktime_ns = entry */
	__u64 ip;              /* the entry point's address in the process */
	__u64 args[4];         /* the first four integer arguments, raw */
	__u64 pad;
	/* a complete struct gs_cpu_sample follows (origin GS_ORIGIN_MEM) */
};

struct gs_mem_ret {
	struct gs_rec_hdr hdr; /* type GS_REC_MEM_RET; ktime_ns = return */
	__u32 tgid, tid;
	__u64 call_ns; /* the GS_REC_MEM_CALL's hdr.ktime_ns */
	__s32 result;  /* CUresult (0 success, 2 CUDA_ERROR_OUT_OF_MEMORY) */
	__u32 flags;   /* GS_MEMRET_* */
	__u64 out;     /* *(u64 *)args[0] after the call (the address or handle) */
	__u64 aux;     /* *(u64 *)args[1] after the call (cuMemAllocPitch's pitch) */
};
#define GS_MEMRET_OUT_FAULT (1u << 0) /* args[0] could not be read */
#define GS_MEMRET_AUX_FAULT (1u << 1) /* args[1] could not be read */

struct gs_mem_free {
	struct gs_rec_hdr hdr; /* type GS_REC_MEM_FREE */
	__u32 tgid, tid;
	__u64 ip;      /* the entry point's address in the process */
	__u64 args[2]; /* the address or handle, and a size (cuMemUnmap) */
};

/* CUPTI driver CBIDs of cuGraphLaunch(_ptsz) (cupti_driver_cbid.h, CUDA
 * 13.0): a graph's kernels get no launch callbacks of their own, so the join
 * hangs PCs of kernels never launched directly under the graph launches. */
#define GS_CBID_GRAPH_LAUNCH      514
#define GS_CBID_GRAPH_LAUNCH_PTSZ 515

/* Agent state transitions and failures. */
enum gs_gpu_state {
	GS_GPU_ST_DORMANT = 0,   /* loaded, subscribed, waiting for gpusample */
	GS_GPU_ST_ARMED = 1,     /* PC sampling on (per context if ctx_uid != 0) */
	GS_GPU_ST_DISARMED = 2,  /* drained and disabled after detach */
	GS_GPU_ST_OFF = 3,       /* GPU sampling off for this process/context: see reason */
	GS_GPU_ST_RECOVERED = 4, /* hardware buffer overflow: disabled + re-enabled */
	GS_GPU_ST_WARNING = 5,   /* something degraded but sampling continues */
};
enum gs_gpu_reason {
	GS_GPU_R_NONE = 0,
	GS_GPU_R_NO_CUPTI = 1,           /* libcupti not found / missing symbols */
	GS_GPU_R_CUPTI_TOO_OLD = 2,      /* API version without PC sampling (< 15); with
					  * GS_GPU_ST_WARNING: before a documented fix */
	GS_GPU_R_PRIVILEGES = 3,         /* CUPTI_ERROR_INSUFFICIENT_PRIVILEGES */
	GS_GPU_R_OTHER_SUBSCRIBER = 4,   /* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
	GS_GPU_R_HW_BUSY = 5,            /* CUPTI_ERROR_HARDWARE_BUSY (DCGM, another profiler) */
	GS_GPU_R_UNSUPPORTED_DEVICE = 6, /* NOT_SUPPORTED, virtualized, MIG, CMP, WSL... */
	GS_GPU_R_SECOND_CONTEXT = 7,     /* another context on this GPU is already sampled */
	GS_GPU_R_OUT_OF_MEMORY = 8,      /* buffers could not be allocated */
	GS_GPU_R_HW_BUFFER_FULL = 9,     /* overflow; recovered with disable + enable */
	GS_GPU_R_CUPTI_ERROR = 10,       /* any other CUPTI failure: see cupti_result */
	GS_GPU_R_NO_DRIVER = 11,         /* CUPTI could not reach the driver */
	GS_GPU_R_BAD_CONFIG = 12,        /* options rejected (period outside 5..31, ...) */
	GS_GPU_R_OTHER_OWNER = 13,       /* host side: another live gpusample owns the agent */
	GS_GPU_R_SCRATCH_FULL = 14,      /* scratch buffer overflow; recovered, bigger buffer */
};
struct gs_gpu_status {
	struct gs_rec_hdr hdr; /* type GS_REC_GPU_STATUS */
	struct gs_gpu_common gpu;
	__u32 state;                         /* enum gs_gpu_state */
	__u32 reason;                        /* enum gs_gpu_reason */
	__s32 cupti_result;                  /* CUptiResult of the failing call, 0 if none */
	__u32 cupti_version;                 /* cuptiGetVersion() */
	__u32 session;                       /* gs_gpu_agent_cfg.session this refers to */
	__u32 contexts;                      /* live contexts known to the agent */
	__u32 contexts_armed;                /* of which PC sampling is on */
	__u32 launch_every;                  /* current 1-in-N launch sampling */
	__u64 batches;                       /* PC batch records emitted (process, all sessions) */
	__u64 samples;                       /* PC samples (sum of counts) emitted */
	__u64 dropped_samples;               /* hardware dropped + lost to overflow recovery */
	__u64 hw_buffer_full;                /* overflow recoveries */
	__u64 launches;                      /* launches seen while armed */
	__u64 launch_events;                 /* launch events emitted */
	__u64 records_failed;                /* records too large or otherwise not emitted */
	char message[GS_GPU_STATUS_MSG_LEN]; /* what happened and what to do */
};

/*
 * Options: gpusample -> agent.  The agent exports (default visibility) one
 * `struct gs_gpu_agent_cfg gs_agent_cfg` in .data.  Before attaching the
 * USDT probes of a process, the host writes the whole struct there with
 * process_vm_writev (address = load bias + st_value of the dynamic symbol
 * "gs_agent_cfg").  The agent reads it when it arms.  Launch mode may also
 * pass the same options in the environment (GS_AGENT_OPTS, see
 * gpu_sampler/agent.h); the memory write wins.
 *
 * Detach handshake: the host sets detach_req = session (another write of
 * these 4 bytes at offsetof(detach_req)), waits for the status record
 * GS_GPU_ST_DISARMED of that session (the agent drains first, so the final
 * PC batches come before it), then detaches the probes.  If the probes go
 * away without this (gpusample killed), the agent disarms on its own;
 * records drained then are lost.  Only the owner (owner_pid) writes here
 * while its session is open.
 */
#define GS_GPU_CFG_MAGIC       0x67736367u /* "gcsg" */
#define GS_GPU_CFG_VERSION     2
#define GS_GPU_MODE_CONTINUOUS 1
#define GS_GPU_MODE_SERIALIZED 2
struct gs_gpu_agent_cfg {
	__u32 magic;               /* GS_GPU_CFG_MAGIC once written by a host */
	__u32 version;             /* GS_GPU_CFG_VERSION */
	__u32 session;             /* nonzero, new for every attach */
	__u32 detach_req;          /* == session: drain, disable, report DISARMED */
	__u32 sampling_period;     /* CUPTI exponent 5..31; 0 = CUPTI default */
	__u32 collection_mode;     /* GS_GPU_MODE_*; 0 = continuous */
	__u32 launch_events_per_s; /* target rate of launch events; 0 = 200 */
	__u32 drain_interval_ms;   /* periodic GetData; 0 = 100 */
	__u64 hw_buffer_bytes;     /* 0 = CUPTI default (512 MiB device memory) */
	__u64 scratch_bytes;       /* 0 = CUPTI default */
	__u64 cubin_keep_bytes;    /* cap on cubin copies; 0 = 1 GiB */
	/* One agent, one owner: the gpusample that armed it (its pid and the
	 * process start time, field 22 of /proc/PID/stat, so a reused pid is
	 * no owner).  A second gpusample finds a live owner here, with
	 * detach_req != session, and leaves the agent alone (its report says
	 * so); a dead owner's agent is taken over. */
	__u32 owner_pid;
	__u32 owner_start_lo; /* low 32 bits of the start time in clock ticks */
};

#endif /* GPUSAMPLE_RECORDS_H */
