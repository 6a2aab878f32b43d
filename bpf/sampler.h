/* SPDX-License-Identifier: MIT */
/*
 * CPU sampler: loads the one BPF object (build/gpusample.skel.h), opens one
 * cpu-clock perf event per online CPU in frequency mode, attaches the
 * process-tree tracepoints, and hands ring-buffer records to a callback.
 *
 * Lifecycle: gs_sampler_open -> gs_sampler_set_py_cfg / add_target ...
 * -> gs_sampler_start -> gs_sampler_poll (repeat) -> gs_sampler_stop ->
 * gs_sampler_poll (drain) -> gs_sampler_close.
 *
 * Errors: 0 or a negative errno; `err` receives a one-line message that says
 * what happened and what to do (e.g. "perf_event_open refused (EACCES): run
 * as root (sudo) or grant CAP_PERFMON").
 */
#ifndef GS_BPF_SAMPLER_H
#define GS_BPF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/counters.h"
#include "gpusample/records.h"

struct bpf_program;

/* Off-CPU stack walks per second and thread (bpf/offcpu.bpf.h): threads
 * that run get the rate, threads that only wait a fifth of it. */
#define GS_OFF_DEFAULT_RATE 25
#define GS_OFF_IDLE_SHARE   5

/* A job controls its agent's USDT probes (a hostile one fires them in a
 * loop), so BPF passes on at most this many launch events and agent records
 * per second and process; the agent's own default is 200 launch events per
 * second (GS_AGENT_LAUNCH_RATE) and a PC-sampling agent sends tens of
 * batches per second, so only a flood reaches these. */
#define GS_GPU_LAUNCH_RATE_MAX 5000u
#define GS_GPU_RECORD_RATE_MAX 2000u
/* CUDA driver memory calls per second and process that BPF records
 * (bpf/gpumem.bpf.h gpu_mem_rate): PyTorch's caching allocator calls the
 * driver a few times a second, so only a storm reaches it. */
#define GS_GPU_MEM_RATE_MAX 2000u

struct gs_sampler_opts {
	uint32_t frequency_hz;    /* per CPU, 1 .. perf_event_max_sample_rate */
	bool kernel_stacks;       /* record kernel stacks (--no-kernel clears) */
	bool follow_children;     /* fork handler copies targets entries: a new
				  * process is followed when this is set AND its
				  * parent's entry has GS_TARGET_FOLLOW_CHILDREN */
	bool offcpu;              /* attach tp_btf/sched_switch (--no-offcpu clears) */
	uint32_t offcpu_rate;     /* off-CPU stack walks per second and thread
				  * before sampling starts (0 =
				  * GS_OFF_DEFAULT_RATE); a thread that ran
				  * under 1/16 of its last 100 ms and has 64
				  * stacks gets offcpu_rate /
				  * GS_OFF_IDLE_SHARE (>= 1); see
				  * bpf/offcpu.bpf.h, records.h gs_offcpu_* */
	bool verifier_stats;      /* keep each program's verifier statistics
				  * (BPF_LOG_STATS) for gs_sampler_prog_stats */
	uint32_t gpu_launch_rate; /* launch events per second and process the
				    * BPF side passes on (0 =
				    * GS_GPU_LAUNCH_RATE_MAX), the rest
				    * counted in gpu_rate_limited */
	uint32_t gpu_record_rate; /* agent records (PC batches, cubins, ...)
				    * per second and process (0 =
				    * GS_GPU_RECORD_RATE_MAX) */
	uint32_t ringbuf_bytes;   /* 0 = sized for >= 1 s of worst case
				  * (online CPUs x F x largest sample, power of
				  * 2, 4 MiB .. 256 MiB); else rounded up to a
				  * power of 2 (>= 4096) */
};

/* One field per row of GS_BPF_COUNTERS (gpusample/counters.h), then the
 * native unwinder's stops by cause. */
struct gs_sampler_stats {
#define GS_X_FIELD(name, kind, what) uint64_t name;
	GS_BPF_COUNTERS(GS_X_FIELD)
#undef GS_X_FIELD
	uint64_t unwind_err[GS_UNWIND_NR]; /* by enum gs_unwind_err */
};

struct gs_sampler;

/* Called for every record, in ring-buffer order.  `rec->size` bytes are
 * valid for the duration of the call.  Return 0 to continue, <0 to stop. */
typedef int (*gs_record_fn)(void *ctx, const struct gs_rec_hdr *rec);

int gs_sampler_open(const struct gs_sampler_opts *o, struct gs_sampler **out, char *err,
		    size_t errlen);
/* Insert / update a `targets` entry (tgid in the root pid namespace).
 * Entries change in BPF too: a fork child of a followed target gets a copy
 * (GS_PROC_FORK), exec sets py_cfg_id to 0 (GS_PROC_EXEC: set it again once
 * the new image is resolved), and the entry is deleted when the whole thread
 * group has exited (GS_PROC_EXIT).  Proc events wake the poller at once. */
int gs_sampler_add_target(struct gs_sampler *s, uint32_t tgid, const struct gs_target *t);
int gs_sampler_remove_target(struct gs_sampler *s, uint32_t tgid);
/* Store a Python walker configuration under id (>= 1). */
int gs_sampler_set_py_cfg(struct gs_sampler *s, uint32_t id, const struct gs_py_cfg *cfg);
int gs_sampler_start(struct gs_sampler *s, char *err, size_t errlen);
/* Poll the ring buffer for up to timeout_ms; returns records handled or <0.
 * Sleeps the whole timeout unless a proc event arrives (samples are written
 * without wakeups), then drains everything queued.  EINTR is not an error:
 * it drains and returns.  Records with a bad header are dropped (counted in
 * stats.lost).  An fn error stops the drain and is returned. */
int gs_sampler_poll(struct gs_sampler *s, int timeout_ms, gs_record_fn fn, void *ctx);
/* Off-CPU accounting (opts.offcpu).  Before gs_sampler_start: set the
 * window start (CLOCK_MONOTONIC ns; threads born later start at birth) and
 * seed the threads that exist (their counters read from
 * /proc/TID/schedstat at `v->last_ns`).  After gs_sampler_stop: call fn for
 * every thread whose interval is still open.  0 or a negative errno; fn's
 * error stops the walk and is returned. */
void gs_sampler_offcpu_window(struct gs_sampler *s, uint64_t t0_ns);
int gs_sampler_offcpu_seed(struct gs_sampler *s, uint32_t tid, const struct gs_offcpu_thr *v);
typedef int (*gs_offcpu_thr_fn)(void *ctx, uint32_t tid, const struct gs_offcpu_thr *v);
int gs_sampler_offcpu_each(struct gs_sampler *s, gs_offcpu_thr_fn fn, void *ctx);
/* Detach the perf events and tracepoints; records already queued stay. */
void gs_sampler_stop(struct gs_sampler *s);
void gs_sampler_stats(struct gs_sampler *s, struct gs_sampler_stats *st);
/* The per-process GPU rates BPF enforces (launch events and agent records
 * per second): the options', GS_GPU_RATE_MAX's or the defaults. */
void gs_sampler_gpu_rates(const struct gs_sampler *s, uint32_t *launch, uint32_t *record);
void gs_sampler_close(struct gs_sampler *s);
/* The loaded skeleton (struct gpusample_bpf from build/gpusample.skel.h), for
 * the modules that own other parts of the one BPF object (CFI tables, GPU
 * USDT attachments).  Valid from open to close. */
struct gpusample_bpf *gs_sampler_skel(struct gs_sampler *s);
/* True when the programs for kernels before bpf_loop are loaded
 * (bpf/unwind.bpf.h; GS_BPF_COMPAT=1 forces them). */
bool gs_sampler_compat(struct gs_sampler *s);
/* The event that samples the CPUs, after gs_sampler_start: "cycles"
 * (hardware, where a PMU exists), "cpu-clock" (the fallback: no PMU, as on
 * most VMs), or "cycles (cpu-clock on some CPUs)". */
const char *gs_sampler_event(struct gs_sampler *s);
/* Processes the compat programs unwind with CFI: their kernels (before
 * 6.1) allow perf_event programs only preallocated hashes, 32 KiB per
 * process; the others get frame pointers. */
#define GS_CFI_COMPAT_PROCS 256
/* The GPU launch-site program that is loaded (gs_gpu_launch or its compat
 * twin), for the GPU host's USDT attachments. */
struct bpf_program *gs_sampler_launch_prog(struct gs_sampler *s);
/* The training-step probes (bpf/steps.bpf.h), attached per process by the
 * session with bpf_program__attach_uprobe: the uretprobe on autograd's
 * backward, or (optimizer) the uprobe on the profiler's region entry. */
struct bpf_program *gs_sampler_step_prog(struct gs_sampler *s, bool optimizer);
/* The CUDA driver memory entry program that is loaded (gs_mem_enter or its
 * compat twin), for the uprobes on libcuda (gpu/gpumem_probe.c). */
struct bpf_program *gs_sampler_mem_enter_prog(struct gs_sampler *s);
/* File descriptors of the loaded BPF programs (for bpf_stats in benches:
 * bpf_obj_get_info_by_fd gives run_time_ns / run_cnt).  Writes at most
 * max - 1 fds followed by -1; returns the number written. */
int gs_sampler_prog_fds(struct gs_sampler *s, int *fds, int max);

/* What the running kernel offers that the programs use where it exists
 * (libbpf's probes, never a version check); gs_sampler_open picks the
 * programs' variants from it. */
struct gs_bpf_features {
	bool bpf_loop;         /* helper bpf_loop (5.17+) */
	bool task_storage;     /* BPF_MAP_TYPE_TASK_STORAGE (5.11+) */
	bool task_pt_regs;     /* helper bpf_task_pt_regs (5.15+) */
	bool current_task_btf; /* helper bpf_get_current_task_btf (5.11+) */
};
void gs_bpf_features_probe(struct gs_bpf_features *f);
/* Shared with the other loaders of the tree (bpf/taskregs.c): libbpf's
 * output routed as the sampler's (quiet unless GS_DEBUG; the first warning
 * kept: gs_bpf_last_warning, "" when none, reset by gs_bpf_quiet_libbpf),
 * and x86-64's THREAD_SIZE of the running kernel (KASAN doubles it). */
void gs_bpf_quiet_libbpf(void);
const char *gs_bpf_last_warning(void);
uint32_t gs_bpf_thread_size(void);

/* One loaded program's name and the instructions the verifier processed
 * for it (from its BPF_LOG_STATS line with opts.verifier_stats, else the
 * kernel's verified_insns, 5.16+; -1 when neither tells). */
struct gs_prog_stat {
	char name[64];
	long insns;
};
/* Fills out[0..max) with the loaded programs; returns how many. */
int gs_sampler_prog_stats(struct gs_sampler *s, struct gs_prog_stat *out, int max);

/* The off-CPU walk rates (stacks per second and thread) that opts give:
 * for threads that run, and for threads that only wait. */
uint32_t gs_sampler_offcpu_rate(const struct gs_sampler_opts *o);
uint32_t gs_sampler_offcpu_idle_rate(const struct gs_sampler_opts *o);

/* Internal helpers, exposed for unit tests. */
/* Parse a kernel CPU list ("0-3,5,8-9"); marks cpus[0..max), returns the
 * number of CPUs, -EINVAL on syntax, -ERANGE past max. */
int gs_parse_cpu_list(const char *s, bool *cpus, int max);
/* Ring buffer bytes for the options (see gs_sampler_opts.ringbuf_bytes). */
uint32_t gs_ringbuf_size(uint32_t requested, uint32_t n_cpus, uint32_t frequency_hz);

#endif
