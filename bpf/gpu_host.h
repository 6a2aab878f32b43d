/* SPDX-License-Identifier: MIT */
/*
 * Host side of the GPU agent: find the agent in target processes (the
 * mapped ELF object with USDT probes of provider "gpusample", whatever its
 * file name), pass options, attach the USDT handlers of bpf/gpu.bpf.h
 * (which arms the agent), follow its state, read cubins, detach cleanly.
 *
 * Session wiring (cli/session.c):
 *   h = gs_gpu_host_new(skel->progs.gs_gpu_record, skel->progs.gs_gpu_launch, &opts)
 *       unless --no-gpu; programs from the one skeleton (gs_sampler_skel()).
 *   gs_gpu_host_add_process(h, tgid)   every target: at start, on GS_PROC_FORK
 *                                      and GS_PROC_EXEC (rescans its maps).
 *                                      Idempotent and safe when events arrive
 *                                      late: an attachment is kept while the
 *                                      same agent image stays mapped at the
 *                                      same address, dropped and redone after
 *                                      an exec.  Attaches only once the agent
 *                                      finished initializing (its watcher
 *                                      thread "gs-agent" runs).
 *   after each of those two: for every tgid = gs_gpu_host_next_ready(h),
 *       prepare its unwind tables, then gs_gpu_host_arm(h, tgid)
 *   gs_gpu_host_poll(h)                on every poll tick: rescans targets
 *                                      without an agent (the CUDA driver loads
 *                                      it at cuInit, possibly much later),
 *                                      at most every 500 ms per process (every
 *                                      tick while a mapped agent initializes)
 *   gs_gpu_host_on_record(h, rec)      every GS_REC_GPU_* record from the ring
 *                                      buffer (reads cubins right away)
 *   gs_gpu_host_remove_process(h, tgid) on GS_PROC_EXIT
 *   gs_gpu_host_detach(h, poll, ctx, timeout_ms)  at stop, BEFORE the final
 *                                      drain: asks each agent to drain and
 *                                      disarm, polls until each acknowledges
 *                                      (status DISARMED) or the timeout, then
 *                                      detaches the probes
 *   gs_gpu_host_free(h)
 *
 * Launch mode (gpusample -- CMD): put these in CMD's environment:
 *   CUDA_INJECTION64_PATH=<dir of gpusample>/../lib/gpusample/libgpusample_agent.so
 *       (or the build tree's build/libgpusample_agent.so; gs_gpu_agent_path())
 *   GS_AGENT_OPTS=period=N[,mode=serialized]   (optional; the host also
 *       writes the options into the agent before arming it)
 *
 * Options reach the agent through process_vm_writev into its exported
 * `gs_agent_cfg` (struct gs_gpu_agent_cfg, records.h) before the probes are
 * attached, so they are in place when the agent arms.
 *
 * Errors: 0 or a negative errno; messages go to the per-process state
 * (gs_gpu_host_foreach) and never stop CPU profiling.
 */
#ifndef GS_BPF_GPU_HOST_H
#define GS_BPF_GPU_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/records.h"

struct bpf_program;
struct gs_gpu_host;
struct gs_elf_cache;

struct gs_gpu_host_opts {
	uint32_t sampling_period;     /* CUPTI exponent 5..31; 0 = CUPTI default */
	bool serialized;              /* kernel-serialized mode */
	uint32_t launch_events_per_s; /* 0 = agent default (200) */
	uint32_t drain_interval_ms;   /* 0 = agent default (100) */
	uint64_t hw_buffer_bytes;     /* 0 = CUPTI default */
	uint64_t scratch_bytes;       /* CUPTI scratch buffer; 0 = agent default (16 MiB) */
	/* Caps on cubin bytes read from agents (their sizes are the target's
	 * word): per cubin and in total; 0 = 64 MiB and 512 MiB.  Cubins over
	 * a cap are not read and are counted (gs_gpu_host_cubin_losses). */
	uint64_t cubin_max_bytes;
	uint64_t cubin_total_bytes;
	/* proc/'s ELF cache to open target files through (the symbolizer's:
	 * gs_sym_elf_cache); NULL: one of its own.  A reference is taken. */
	struct gs_elf_cache *elf;
};

/* Per-process GPU state, for the progress line and the report. */
enum gs_gpu_proc_state {
	GS_GPU_PROC_NO_AGENT = 0, /* agent not mapped (yet) */
	GS_GPU_PROC_ATTACHED,     /* probes attached, agent not heard from yet */
	GS_GPU_PROC_ARMED,
	GS_GPU_PROC_OFF, /* agent reported GPU sampling off (see message) */
	GS_GPU_PROC_DISARMED,
	GS_GPU_PROC_ERROR, /* host could not attach (see message) */
};

struct gs_gpu_proc_info {
	uint32_t tgid;
	enum gs_gpu_proc_state state;
	uint32_t reason; /* enum gs_gpu_reason of the last OFF/warning */
	uint32_t contexts, contexts_armed;
	uint64_t samples; /* warp samples (base stall reasons) received */
	uint64_t batches, launch_events, dropped_samples, hw_buffer_full;
	uint64_t scratch_full;    /* scratch buffer overflows (recovered) seen */
	uint64_t armed_ktime_ns;  /* ktime of the first ARMED status of this session */
	uint64_t attach_ktime_ns; /* CLOCK_MONOTONIC when the probes were attached */
	uint32_t session;
	char agent_path[256];
	char message[GS_GPU_STATUS_MSG_LEN]; /* last status message */
	/* ARMED message of a session that armed only once another CUPTI
	 * subscriber let go (reason GS_GPU_R_OTHER_SUBSCRIBER); "" if none */
	char late_message[GS_GPU_STATUS_MSG_LEN];
};

struct gs_gpu_host *gs_gpu_host_new(struct bpf_program *record_prog,
				    struct bpf_program *launch_prog,
				    const struct gs_gpu_host_opts *o);
void gs_gpu_host_free(struct gs_gpu_host *h);
/* Keep per-process state in the slots of t (proc/proc.h), id being the
 * GPU handler's registration id, instead of a table of its own: before the
 * first process (-EBUSY after); t must outlive h's use of processes (h's
 * free touches only its own list). */
struct gs_proc_table;
int gs_gpu_host_bind(struct gs_gpu_host *h, struct gs_proc_table *t, int id);

/* Look for the agent in tgid's mappings now; once it finished
 * InitializeInjection (its "gs-agent" thread runs, so libcupti is mapped)
 * write its options and mark the process ready to arm.  Returns 1 ready
 * (or already attached), 0 no agent (remembered, rescanned by
 * gs_gpu_host_poll), <0 error (message in the process info).
 * One agent, one owner: when another live gpusample armed the agent and
 * has not detached (gs_gpu_agent_cfg.owner_pid), nothing is written and
 * nothing attached: -EBUSY, state ERROR, reason GS_GPU_R_OTHER_OWNER, and
 * a message naming the owner.  The owner's session is never disturbed. */
int gs_gpu_host_add_process(struct gs_gpu_host *h, uint32_t tgid);
void gs_gpu_host_remove_process(struct gs_gpu_host *h, uint32_t tgid);
/* 1 when tgid maps an agent (recognised by its probes, initialized or
 * not, armed by anyone or not), 0 when it maps none, <0 an error reading
 * its maps.  Nothing is attached or remembered. */
int gs_gpu_host_agent_mapped(struct gs_gpu_host *h, uint32_t tgid);
void gs_gpu_host_poll(struct gs_gpu_host *h);
/* A process ready to arm (after add_process or poll), 0 when none.  The
 * caller prepares what its launch stacks need (unwind tables and symbols
 * of the agent, libcupti and libcuda, mapped since the last snapshot: the
 * very first launch events must walk out of them), then arms it with
 * gs_gpu_host_arm: attaching the probes is what arms the agent.  No call
 * goes back up into the caller. */
uint32_t gs_gpu_host_next_ready(const struct gs_gpu_host *h);
/* Attach tgid's probes: 1 attached, -ENOENT not ready, <0 error (message
 * in the process info). */
int gs_gpu_host_arm(struct gs_gpu_host *h, uint32_t tgid);
/* Update state from a GS_REC_GPU_* record; other types are ignored. */
void gs_gpu_host_on_record(struct gs_gpu_host *h, const struct gs_rec_hdr *rec);

/* Drain-and-disarm handshake, then detach every probe.  poll(ctx, ms) must
 * poll the ring buffer (feeding gs_gpu_host_on_record).  Returns the number
 * of agents that did not acknowledge in time. */
int gs_gpu_host_detach(struct gs_gpu_host *h, int (*poll)(void *ctx, int timeout_ms), void *ctx,
		       int timeout_ms);

/* Cubins announced but not kept. */
struct gs_gpu_cubin_losses {
	uint64_t cubins;   /* not kept, any cause */
	uint64_t bytes;    /* their announced sizes */
	uint64_t over_cap; /* of which over a cap (the rest: read failed, no memory) */
	uint64_t max_bytes, total_bytes, kept_bytes; /* the caps in force, bytes kept */
};
void gs_gpu_host_cubin_losses(const struct gs_gpu_host *h, struct gs_gpu_cubin_losses *l);

/* Cubin bytes by CRC (read from the agent with process_vm_readv), or NULL. */
const void *gs_gpu_host_cubin(struct gs_gpu_host *h, uint64_t crc, size_t *size);
/* Last stall table of (tgid, ctx_uid), or NULL. */
const struct gs_gpu_stall_table *gs_gpu_host_stall_table(struct gs_gpu_host *h, uint32_t tgid,
							 uint32_t ctx_uid);
int gs_gpu_host_foreach(struct gs_gpu_host *h,
			int (*fn)(void *ctx, const struct gs_gpu_proc_info *p), void *ctx);
/* "GPU: 2 armed (2 ctx), 12.3k samples" / "GPU: off (insufficient privileges)"
 * / "GPU: no agent" for the progress line. */
void gs_gpu_host_summary(struct gs_gpu_host *h, char *buf, size_t len);
const char *gs_gpu_state_name(enum gs_gpu_proc_state s);

/* Default agent path next to the running gpusample binary (build tree or
 * installed layout); NULL if not found. */
const char *gs_gpu_agent_path(char *buf, size_t len);

#endif
