/* SPDX-License-Identifier: MIT */
/*
 * The GPU runtime (gpu/): the agent host (gpu_host.c), cubins, kernels and
 * stall reasons (cuda.c) and the CPU <-> GPU join (join.c), one header.
 */
#ifndef GS_GPU_H
#define GS_GPU_H

/*
 * Host side of the GPU agent: find the agent in target processes (the
 * mapped ELF object with USDT probes of provider "gpusample", whatever its
 * file name), pass options, attach the USDT handlers of bpf/gpu.bpf.h
 * (which arms the agent), follow its state, read cubins, detach cleanly.
 *
 * Session wiring (session/session.c):
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
 *   gs_gpu_host_record(h, &view)       every GS_REC_GPU_* record from the ring
 *                                      buffer, as the router decoded it
 *                                      (gs_gpu_rec_decode; reads cubins right
 *                                      away)
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/profile.h"
#include "gpusample/records.h"
#include "gpusample/records_codec.h"
#include "gpusample/stall.h"

/*
 * One GPU record (GS_REC_GPU_PC_BATCH .. GS_REC_GPU_STATUS) decoded once,
 * by the one codec (include/gpusample/records_codec.h): the record router
 * decodes it and hands the view to every GPU consumer (the agent host,
 * the cubin symbolizer, the join), none of which checks it again.  The
 * view points into the record; it copies nothing.
 */
struct gs_gpu_rec {
	uint16_t type;                   /* hdr.type */
	const struct gs_rec_hdr *hdr;    /* hdr.size bytes, checked */
	const struct gs_gpu_common *gpu; /* the common part every GPU record has */
	union {
		struct gs_rec_pc_batch_view batch; /* GS_REC_GPU_PC_BATCH */
		struct {
			const struct gs_gpu_stall_table *t;
			const struct gs_gpu_stall_reason *reasons; /* t->n_reasons */
		} table;                                           /* GS_REC_GPU_STALL_TABLE */
		const struct gs_gpu_cubin *cubin;                  /* GS_REC_GPU_CUBIN */
		struct {
			const struct gs_gpu_launch *l;
			struct gs_rec_cpu_view stack; /* the launching CPU stack */
		} launch;                             /* GS_REC_GPU_LAUNCH */
		const struct gs_gpu_status *status;   /* GS_REC_GPU_STATUS */
	};
};
/* Decode h (past gs_rec_hdr_check: h->size bytes readable) into *r.
 * -EBADMSG: not a GPU record; -EINVAL: its layout lies (sizes, counts,
 * name offsets, the launch's nested stack). */
int gs_gpu_rec_decode(const struct gs_rec_hdr *h, struct gs_gpu_rec *r);
/* For a component fed raw records on its own (a test, a fuzzer): size
 * bytes at rec, header checked (gs_rec_hdr_check), then decoded; -EINVAL
 * unless it is a well-formed record of type. */
int gs_gpu_rec_decode_as(const void *rec, size_t size, uint16_t type, struct gs_gpu_rec *r);

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
	/* The one store of stall tables (gs_cuda_base_samples): a PC batch's
	 * warp samples (gs_gpu_proc_info.samples) are its base reasons as
	 * its context's table says; NULL: batches are counted, not their
	 * samples.  Not owned; it must outlive the host's records. */
	struct gs_cuda *cuda;
	/* Closes the probes' links off the caller's thread (bpf/reaper.h):
	 * the session's; NULL: closed inline.  Not owned; it must outlive the
	 * host, the BPF object must outlive it. */
	struct gs_link_reaper *reaper;
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

/*
 * The GPU agent as a handler of the process table (proc/proc.h), over the
 * host's state only: a process (at attach, fork and exec) is scanned for
 * the agent, configured and armed; an exited one dropped; the tick
 * rescans and arms, and refreshes the progress summary.  A second
 * gpusample refused by an armed agent is logged at once.  What the
 * session does around it comes through hooks (any may be NULL, called
 * with hooks.ctx): prepare(tgid) right before tgid's agent is armed (its
 * launch stacks run through objects mapped since the last snapshots),
 * and fork, gone (exit or exec) and tick for --inject's follow-up.
 * Without a host only fork and gone reach the hooks.
 */
struct gs_gpu_hooks {
	void *ctx;
	void (*prepare)(void *ctx, uint32_t tgid);
	void (*fork)(void *ctx, uint32_t parent, uint32_t child);
	void (*gone)(void *ctx, uint32_t tgid);
	void (*tick)(void *ctx);
};
struct gs_gpu_plugin {
	struct gs_gpu_host *host; /* NULL: no GPU sampling */
	struct gs_gpu_hooks hooks;
	char summary[128]; /* gs_gpu_host_summary as of the last tick */
};
struct gs_proc_handler;
/* g's handler (g must outlive the table's use of it). */
void gs_gpu_proc_handler(struct gs_gpu_plugin *g, struct gs_proc_handler *h);

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
 * its maps (-ESRCH: gone).  Nothing is attached or remembered here.
 * This, add_process, poll and detach look in the process table's maps
 * snapshot of tgid (its entry made when the table has none), which they
 * ask proc/ to re-read when the executable ranges changed
 * (GS_MAPS_CHECK): such a re-read reaches every handler's maps_changed. */
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
/* Update state from a decoded GPU record (the router's view): a status,
 * a cubin to read, a batch's warp samples to count (by opts.cuda's stall
 * tables: the router gives those to gs_cuda_stall_table), a launch to
 * count. */
void gs_gpu_host_record(struct gs_gpu_host *h, const struct gs_gpu_rec *r);
/* The same from a raw record (past gs_rec_hdr_check), for the host used
 * alone; non-GPU and malformed records are ignored. */
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

/* Cubin bytes by CRC (read from the agent with process_vm_readv), or NULL.
 * An alias record's key gives the bytes of the cubin it aliases (one copy). */
const void *gs_gpu_host_cubin(struct gs_gpu_host *h, uint64_t crc, size_t *size);
int gs_gpu_host_foreach(struct gs_gpu_host *h,
			int (*fn)(void *ctx, const struct gs_gpu_proc_info *p), void *ctx);
/* "GPU: 2 armed (2 ctx), 12.3k samples" / "GPU: off (insufficient privileges)"
 * / "GPU: no agent" for the progress line. */
void gs_gpu_host_summary(struct gs_gpu_host *h, char *buf, size_t len);
const char *gs_gpu_state_name(enum gs_gpu_proc_state s);

/* Default agent path next to the running gpusample binary (build tree or
 * installed layout); NULL if not found. */
const char *gs_gpu_agent_path(char *buf, size_t len);


/*
 * GPU PC symbolization: cubins, kernel functions, SASS pcOffsets and stall
 * reasons turned into profile-model entries.
 *
 * Cubins: the GPU agent reports each loaded module (CUPTI MODULE_LOADED) with
 * its cubinCrc; the host copies the bytes out of the target and hands them to
 * gs_cuda_add_cubin().  A PC record names (cubinCrc, mangled function name,
 * pcOffset); gs_cuda_location() turns that into one pprof Location:
 *   - Mapping: one per cubin, build_id = CRC as 16 hex digits, file = the
 *     module's origin when known else "cubin:<crc hex>", start 0, limit =
 *     cubin size (1 when the bytes were never seen), has_functions set,
 *     has_lines once any PC of it resolved to a source line.
 *   - Function: name = demangled kernel (libiberty, parameters kept),
 *     system_name = the mangled name when it differs, file = the .cu file of
 *     the resolved line (so `pprof -lines` prints kernel file.cu:N).
 *   - Location: kind GS_FRAME_GPU_PC, address = pcOffset (function-relative,
 *     as CUPTI reports it), one Line {kernel, source line or 0}.
 * Source lines come from libcupti's offline cuptiGetSassToSourceCorrelation,
 * which works without a GPU or driver.  A line of 0 or a NULL file means "no
 * line info" whatever the return code (cubins built without -lineinfo return
 * CUPTI_SUCCESS with line 0).  Such kernels are still attributed per function
 * and pcOffset.  Results are cached per (cubin, function, pcOffset).
 *
 * libcupti is dlopen'ed on first need, never linked: gpusample links
 * statically and must run on hosts without CUDA.  gpusample runs as root and
 * a library's constructor runs at dlopen, so only trusted files are loaded
 * (gs_cuda_trusted_lib: root-owned, not group/other-writable, up to /):
 * the --cupti file (gs_cuda_set_cupti), else the toolkit
 * (/usr/local/cuda/{extras/CUPTI/lib64,lib64,targets/x86_64-linux/lib,lib},
 * /usr/local/cuda-*), the distribution's /usr/lib/x86_64-linux-gnu, then
 * system-wide PyTorch wheels (nvidia/cu13/lib, nvidia/cuda_cupti/lib).  Never
 * the libcupti the target maps, nothing under /proc/PID/root, and no
 * environment variable (CUDA_HOME, VIRTUAL_ENV, ... of a sudo caller).  A
 * library without the two offline entry points is skipped (a CUPTI double).
 * Without libcupti everything still works minus source lines (and minus CRC
 * computation for cubins whose CRC the agent did not report).
 *
 * Stall reasons: CUPTI names them "smsp__pcsamp_warps_issue_stalled_<reason>"
 * with a "<reason>_not_issued" twin (a subset count: never add the two), plus
 * two counters, "smsp__pcsamp_sample_count" and
 * "smsp__pcsamp_samples_data_dropped", which are not stall reasons and are
 * excluded.  Indices differ per architecture, so tables are kept per
 * (pid, context) exactly as CUPTI returned them for that context.
 *
 * Errors: 0 or a negative errno.  Resolution never fails on bad input: an
 * unknown cubin or function still gets a location.  Location ids are 0 only
 * on allocation failure.
 */


struct gs_cuda;

struct gs_cuda *gs_cuda_new(struct gs_profile *p);
void gs_cuda_free(struct gs_cuda *c);
/* Keep each process's use of the caps in the slots of t (proc/proc.h),
 * id being a handler registered for it, instead of a table of its own:
 * before the first PC record (-EBUSY after). */
int gs_cuda_bind(struct gs_cuda *c, struct gs_proc_table *t, int id);

/* ---- libcupti (offline correlation) ------------------------------------ */

/* Whether root may load the library at path: its real path is a regular
 * file and it and every directory above it are owned by root and not
 * writable by group or others, so no other user can have written or swapped
 * it.  real (real_len bytes) gets the resolved path to load.  0 when
 * trusted; -EPERM (or the stat errno) with a sentence in why otherwise. */
int gs_cuda_trusted_lib(const char *path, char *real, size_t real_len, char *why, size_t len);
/* --cupti PATH: load this libcupti instead of searching ("none": no
 * libcupti, no source lines).  Checked with gs_cuda_trusted_lib() now, so a
 * bad path is refused before sampling starts (why says what is wrong).
 * Only effective before the first load. */
int gs_cuda_set_cupti(struct gs_cuda *c, const char *path, char *why, size_t len);
/* Load libcupti now if not yet tried.  0 when loaded, -ENOENT when none was
 * found (reason in gs_cuda_cupti_info()). */
int gs_cuda_load_cupti(struct gs_cuda *c);
/* Path of the loaded libcupti, or a sentence saying why there is none and
 * what to do.  Never NULL once gs_cuda_load_cupti() ran; NULL before. */
const char *gs_cuda_cupti_info(const struct gs_cuda *c);

/* The cubin key, gs_cubin_hash (records.h): the same full 64-bit hash the
 * agent registers with CUPTI for PC records.  -EINVAL on an empty image. */
int gs_cuda_cubin_crc(struct gs_cuda *c, const void *cubin, size_t len, uint64_t *crc);

/* ---- cubins ------------------------------------------------------------- */

/* Register a cubin image (copied).  crc: as the agent reported it (the value
 * PC records carry); 0 = compute it with libcupti (-ENOENT without).  origin:
 * module name for the Mapping's file, NULL for "cubin:<crc>".  pid: the
 * process that loaded it (informational; the CRC is the key).  Adding a CRC
 * twice keeps the first image.  Must come before the first gs_cuda_location()
 * of that CRC to give it source lines.  *crc_out (may be NULL) gets the key. */
int gs_cuda_add_cubin(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len, uint32_t pid,
		      const char *origin, uint64_t *crc_out);
/* Same without the copy: the caller keeps cubin valid and unchanged until
 * gs_cuda_free() (e.g. bytes held by gpu/gpu_host.c, which can run to
 * hundreds of MB for libtorch_cuda). */
int gs_cuda_add_cubin_borrowed(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len,
			       uint32_t pid, const char *origin, uint64_t *crc_out);
bool gs_cuda_has_cubin(const struct gs_cuda *c, uint64_t crc);
/* The agent announced this cubin (GS_REC_GPU_CUBIN), whether or not its
 * bytes could be kept.  0 or -ENOMEM. */
int gs_cuda_cubin_announced(struct gs_cuda *c, uint64_t crc);
/* Whether PC records of crc come from a cubin that was never announced and
 * is not registered: a module loaded while the agent was dormant (it holds
 * no CUPTI subscription then, and a module's cubin cannot be had later).
 * Such kernels get locations per kernel and pcOffset, without lines. */
bool gs_cuda_cubin_unannounced(const struct gs_cuda *c, uint64_t crc);
/* Distinct kernels (and cubins) located so far from never-announced cubins. */
void gs_cuda_unannounced(const struct gs_cuda *c, uint64_t *kernels, uint64_t *cubins);

/* Functions (STT_FUNC symbols) of a cubin image, read with libelf: name and
 * size in bytes of SASS (valid pcOffsets are [0, size)).  Calls fn for each;
 * a non-zero return from fn stops and is returned. */
int gs_cuda_cubin_functions(const void *cubin, size_t len,
			    int (*fn)(void *ctx, const char *name, uint64_t size), void *ctx);

/* ---- locations ---------------------------------------------------------- */

/* Location id for (cubin CRC, mangled function name, pcOffset); cached.
 * Its source line is looked up right away, or, after
 * gs_cuda_defer_lines(c, true), by gs_cuda_resolve_lines(): the lookup
 * (cuptiGetSassToSourceCorrelation, 0.6-2.7 ms per PC on a 7 MB cubin) then
 * stays out of the loop that reads the ring buffer.  Cubins without line
 * sections are never looked up (checked once per cubin). */
uint32_t gs_cuda_location(struct gs_cuda *c, uint64_t crc, const char *function,
			  uint64_t pc_offset);
/* The same for a PC record of process pid, under the caps below (pid 0:
 * gs_cuda_location's).  Kernel names and PC offsets come from the target:
 * a new kernel (cubin CRC, mangled name) past GS_CUDA_KERNELS_* or the name
 * bytes past GS_CUDA_NAME_BYTES_*, or a new location past
 * GS_CUDA_LOCATIONS_*, is not made (nothing interned) and the PC gets the
 * one "[other kernels]" location, counted (gs_cuda_cap_losses).  A real
 * job has thousands of kernels (libtorch_cuda: ~10k) and sampled PCs in
 * the tens of thousands; a hostile one made a new name per PC (issue 24,
 * item 6: 1.36 GB in 25 s).  The first process to make a kernel or
 * location is charged with it. */
#define GS_CUDA_KERNELS_PER_PID    65536u
#define GS_CUDA_KERNELS_TOTAL      262144u
#define GS_CUDA_NAME_BYTES_PER_PID (32ull << 20)
#define GS_CUDA_NAME_BYTES_TOTAL   (128ull << 20)
#define GS_CUDA_LOCATIONS_PER_PID  262144u
#define GS_CUDA_LOCATIONS_TOTAL    1048576u
/* What a location and a kernel (besides its names) are charged to the
 * run's memory budget (util/membudget.h): an estimate of the profile's
 * location, line and function entries and the caches' slots, rounded up. */
#define GS_CUDA_LOCATION_BYTES 160u
#define GS_CUDA_KERNEL_BYTES   256u
/* Stall indices missing from the context's table get "stall_<index>" names
 * up to this many distinct indices, then "stall_other". */
#define GS_CUDA_UNKNOWN_STALLS 1024u
uint32_t gs_cuda_location_pid(struct gs_cuda *c, uint32_t pid, uint64_t crc, const char *function,
			      uint64_t pc_offset);
struct gs_cuda_cap_losses {
	uint64_t kernels;   /* PC records of new kernels past the kernel or name-byte caps */
	uint64_t locations; /* PC records of new locations past the location caps */
};
void gs_cuda_cap_losses(const struct gs_cuda *c, struct gs_cuda_cap_losses *l);
void gs_cuda_defer_lines(struct gs_cuda *c, bool defer);
/* Fill in the source lines of every location made since the last call
 * (deferred mode); the profile's lines and functions change in place,
 * location ids stay.  0 or -ENOMEM. */
int gs_cuda_resolve_lines(struct gs_cuda *c);
/* libcupti gets target bytes (cubins from the agent channel): every lookup
 * runs in a child process with wall_mem more address space than gpusample
 * has (RLIMIT_AS), RLIMIT_CPU, and is killed after wall_ms per batch; the
 * lines it did not give are counted and named in the profile's comments.
 * -EINVAL for a zero time or under 16 MiB. */
#define GS_CUPTI_WALL_MS  30000u
#define GS_CUPTI_WALL_MEM (4ull << 30)
int gs_cuda_set_cupti_limits(struct gs_cuda *c, uint32_t wall_ms, uint64_t mem_bytes);

/* Source line of a pcOffset without touching the profile: *line = 0 and
 * file[0] = 0 when there is none.  -ENOENT: no such cubin or no libcupti;
 * -EINVAL: libcupti rejected the query (unknown function). */
int gs_cuda_source_line(struct gs_cuda *c, uint64_t crc, const char *function, uint64_t pc_offset,
			char *file, size_t file_len, uint32_t *line);

/* ---- stall reasons ------------------------------------------------------ */

/* Short name of a CUPTI stall reason into buf: prefix
 * "smsp__pcsamp_warps_issue_stalled_" and suffix "_not_issued" stripped,
 * e.g. "long_scoreboard".  Names without the prefix are kept as they are
 * (minus "smsp__pcsamp_").  The kind is not decided here: see
 * gpusample/stall.h. */
void gs_cuda_stall_short(const char *name, char *buf, size_t len);

/* Stall table of one context, as the agent sent it: n triples (CUPTI
 * index, GS_GPU_STALL_* flags from the wire, full name); the flags decide
 * each reason's kind (gs_stall_kind).  A second table for the same
 * (pid, context) replaces the first.  Kept in pid's state of the process
 * table (gs_cuda_bind), as are its devices (below).  The context id comes
 * from the target: past GS_CUDA_STALL_CONTEXTS_PER_PID contexts a new one's
 * table is refused (-ENOSPC), counted in a profile comment; its warp
 * samples then get "stall_<index>" names.  A real process has a context or
 * a few per device. */
#define GS_CUDA_STALL_CONTEXTS_PER_PID 64u
/* Device lines ("gpu pid P device D ...") per process: device ids come
 * from the target's records too; past this many a new id's facts and
 * counts are left out, counted in a comment. */
#define GS_CUDA_DEVICES_PER_PID 64u
int gs_cuda_add_stall_table(struct gs_cuda *c, uint32_t pid, uint32_t context, int32_t device,
			    size_t n, const uint32_t *indices, const uint32_t *flags,
			    const char *const *names);

/* The kind (enum gs_stall_kind, gpusample/stall.h) of CUPTI reason index
 * in the stall table of (pid, context): the one store of stall tables,
 * asked by the agent host to count a batch's warp samples.  -ENOENT when
 * there is no such table or the index is not in it. */
int gs_cuda_stall_kind(struct gs_cuda *c, uint32_t pid, uint32_t context, uint32_t index);
/* The warp samples of a PC batch's counts[0..n) under base reasons (no
 * _not_issued twins, no counters, no index the table lacks), the table of
 * (pid, context) looked up once: 0 without a table. */
struct gs_gpu_stall_count;
uint64_t gs_cuda_base_samples(struct gs_cuda *c, uint32_t pid, uint32_t context,
			      const struct gs_gpu_stall_count *counts, uint32_t n);

/* One PC record's stall reasons as CUPTI gives them (index, samples). */
struct gs_cuda_stall_in {
	uint32_t index;
	uint32_t samples;
};
/* Per short reason: base samples and not-issued samples of one PC. */
struct gs_cuda_stall_out {
	gs_str reason;       /* interned short name in the profile */
	uint64_t samples;    /* base family -> GS_V_GPU_SAMPLES */
	uint64_t not_issued; /* twin -> GS_V_GPU_NOT_ISSUED */
};
/* Fold a PC record's (index, samples) pairs into per-reason values using the
 * table of (pid, context).  Counters are skipped; an index missing from the
 * table (or no table at all) becomes reason "stall_<index>" (base).  out has
 * room for max entries; *n_out gets the count (reasons with both values 0 are
 * left out).  -ENOSPC when out is too small. */
int gs_cuda_fold_stalls(struct gs_cuda *c, uint32_t pid, uint32_t context,
			const struct gs_cuda_stall_in *in, size_t n_in,
			struct gs_cuda_stall_out *out, size_t max, size_t *n_out);

/* ---- device facts and run counters (profile comments) ------------------ */

struct gs_cuda_device_info {
	const char *name;      /* "NVIDIA H200", may be NULL */
	uint32_t sm_clock_khz; /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE */
	uint32_t sm_count;     /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
	uint32_t period_exp;   /* sampling period = 2^period_exp SM cycles; 0 unknown */
	const char *mode;      /* "continuous" / "kernel-serialized", may be NULL */
};
/* 0, -ENOMEM, or -ENOSPC past GS_CUDA_DEVICES_PER_PID. */
int gs_cuda_set_device(struct gs_cuda *c, uint32_t pid, int32_t device,
		       const struct gs_cuda_device_info *info);
/* Add one GetData drain's counters (CUpti_PCSamplingData totalSamples,
 * droppedSamples, nonUsrKernelsTotalSamples). */
void gs_cuda_add_counts(struct gs_cuda *c, uint32_t pid, int32_t device, uint64_t total,
			uint64_t dropped, uint64_t non_user);
/* Write one comment line per (pid, device) seen, in the order first seen
 * across processes: period, SM clock and count, ns per sample, totals,
 * dropped and non-user-kernel samples; plus a line about libcupti when
 * source lines were unavailable. */
int gs_cuda_add_comments(struct gs_cuda *c);

/* ---- wire records (include/gpusample/records.h) -------------------------- */

struct gs_gpu_stall_table;
/* A GS_REC_GPU_STALL_TABLE record of size bytes: adds the table of
 * (gpu.tgid, gpu.ctx_uid) and the device facts it carries (period, mode,
 * SM count and clock).  -EINVAL when the record is malformed. */
int gs_cuda_stall_table_record(struct gs_cuda *c, const struct gs_gpu_stall_table *rec,
			       size_t size);
/* The same from the router's decoded view (struct gs_gpu_rec's table):
 * 0, -ENOMEM, or -ENOSPC past the per-process caps on contexts and
 * devices (GS_CUDA_STALL_CONTEXTS_PER_PID, GS_CUDA_DEVICES_PER_PID). */
int gs_cuda_stall_table(struct gs_cuda *c, const struct gs_gpu_stall_table *t,
			const struct gs_gpu_stall_reason *reasons);


/*
 * The CPU <-> GPU join: hang GPU PC samples under the CPU stacks that
 * launched their kernels, and turn them into profile samples.
 *
 * Inputs, in ring-buffer order (any order works, but see "windows"):
 *   - launches (gs_join_add_launch): a launch-site event with the CPU stack
 *     the caller already symbolized into a profile stack index, the
 *     launching thread, the kernel's mangled name, the correlation id and
 *     the launch time;
 *   - PC batches (gs_join_add_pc_batch): one GetData drain's PC records of
 *     one (pid, device), each already turned into a GPU-PC location
 *     (gs_cuda_location) and folded per stall reason (gs_cuda_fold_stalls).
 *
 * Attribution of one PC entry, in this order:
 *   1. exact: correlation_id != 0 (kernel-serialized mode) and a launch with
 *      that (pid, correlation id) was seen -> that launch's stack, label
 *      gpu_attribution=exact;
 *   2. proportional: launches of the same kernel function (mangled name) by
 *      the same pid inside the batch's window [start_ns, end_ns]; the
 *      entry's samples are spread over their distinct (stack, tid) in
 *      proportion to how often each launched it (launch weights summed),
 *      with largest-remainder rounding so every entry's totals are kept
 *      exactly.  Remainders are carried per (pid, function, stack) from one
 *      entry and batch to the next, so many small entries still split in
 *      the right ratio instead of all going to the biggest stack.  When the
 *      window holds no launch of the function (a long kernel launched
 *      earlier; launches sampled 1 in N), the function's launches over the
 *      whole run so far are used.  Label gpu_attribution=proportional;
 *   3. graph: no launch of the function was seen, but the pid launched CUDA
 *      graphs (cuGraphLaunch: the graph's kernels have no launch callbacks
 *      of their own) -> spread as in 2. over the graph launches, label
 *      gpu_attribution=graph;
 *   4. unknown: neither -> stack [GPU PC, "[unknown launch]"], tid 0,
 *      label gpu_attribution=unknown.
 *
 * Windows: a batch's samples were collected between the previous drain of
 * that (pid, device) and this one.  start_ns = 0 means exactly that: the
 * end of the previous batch added for the same (pid, device), or the
 * beginning of the run for the first.  Launches must be added before the
 * batches whose window they fall in (the ring buffer delivers them first:
 * the launch happened before the kernel ran, which was before the drain).
 *
 * Output: samples are aggregated per (stack, stall reason, pid, tid,
 * device, attribution, thread, role) as batches arrive (memory grows with
 * distinct stacks, not with time) and written into the profile by
 * gs_join_emit(), which also sets default_sample_type = GS_V_GPU_SAMPLES
 * when any GPU sample was written.  Stack = [GPU PC location, launch stack
 * locations...], leaf first.  values[GS_V_GPU_SAMPLES] = base-family
 * samples, values[GS_V_GPU_NOT_ISSUED] = the _not_issued twins.
 *
 * Times are CLOCK_MONOTONIC ns (record ktime); sample time_ns is written
 * relative to t0_ns given to gs_join_new().
 *
 * Session wiring (session/session.c decodes each record once into r with
 * gs_gpu_rec_decode; session/gpu.c routes r), in ring-buffer order, after
 * gs_gpu_host_record(h, &r) has seen the record:
 *   c = gs_cuda_new(profile); j = gs_join_new(profile, t0 ktime)
 *   GS_REC_GPU_CUBIN:       bytes = gs_gpu_host_cubin(h, r.cubin->crc, &size);
 *                           gs_cuda_add_cubin_borrowed(c, r.cubin->crc, bytes, size,
 *                                                      tgid, NULL, NULL)
 *   GS_REC_GPU_STALL_TABLE: gs_cuda_stall_table(c, r.table.t, r.table.reasons)
 *   GS_REC_GPU_LAUNCH:      stack = the profile stack of r.launch.stack
 *                           (symbolized like any CPU sample);
 *                           gs_join_launch_record(j, r.launch.l, stack, comm, role)
 *   GS_REC_GPU_PC_BATCH:    gs_join_pc_batch(j, c, &r.batch)
 *   at the end:             gs_join_emit(j, &stats); gs_cuda_add_comments(c)
 * (gs_cuda_stall_table_record and gs_join_pc_batch_record take the raw
 * record, for the components used alone.)
 * A session that symbolizes CPU stacks only at the end can buffer these
 * records and replay them in the same order then.
 *
 * Errors: 0 or a negative errno (-ENOMEM, -EINVAL for a bad stack index).
 */


struct gs_join;

/* Kernel identity shared by launches and PC records: gs_kernel_name_hash()
 * of the full mangled name (records.h). */

struct gs_join *gs_join_new(struct gs_profile *p, uint64_t t0_ns);
void gs_join_free(struct gs_join *j);
/* Keep per-process state (the caps' counts, kernels and correlation ids
 * by key, drain windows) in the slots of t (proc/proc.h), id being a
 * handler registered for it, instead of a table of its own: before the
 * first record (-EBUSY after).  The run-wide lists stay the join's. */
int gs_join_bind(struct gs_join *j, struct gs_proc_table *t, int id);

struct gs_join_launch {
	uint32_t pid, tid;       /* tgid and launching thread */
	uint32_t correlation_id; /* CUPTI correlation id; 0 if unknown */
	uint64_t function;       /* kernel identity: gs_kernel_name_hash(mangled name); 0 unknown */
	uint64_t time_ns;        /* launch ktime */
	uint32_t stack;          /* profile stack index of the CPU stack (leaf first) */
	uint32_t weight;         /* launches this event stands for (1-in-N sampling: N); 0 = 1 */
	gs_str thread_name;      /* comm of the launching thread, 0 if unknown */
	gs_str process_role;     /* "main", "dataloader", ..., 0 if unknown */
	bool graph;              /* a CUDA graph launch (function is then 0) */
};
int gs_join_add_launch(struct gs_join *j, const struct gs_join_launch *l);

/* Caps on what launch records can make (kernel hashes and correlation ids
 * are the target's word: a hostile job sent a new kernel hash per launch,
 * 2.4-3.5 GB in 20-25 s, issue 24 item 5).  A real job has thousands of
 * kernels, launch events come at the agent's rate (200/s by default) and
 * launches older than 60 s before a drain window are dropped anyway:
 *   kernels (pid, kernel hash): per process and in total; a launch of a
 *     new kernel past them is dropped whole, counted (kernels_capped);
 *   live launch history: per kernel, per process and in total; past them
 *     the kernel's older half is cut from its time list (it stays in its
 *     whole-run histogram), counted (launches_trimmed);
 *   correlation ids: aged by the newest launch or drain (60 s), then per
 *     process and in total, the oldest first, counted (corrs_capped).
 * gs_join_launch_admit() is that first check, for a caller that would
 * otherwise symbolize the launch's stack for nothing: false (counted) when
 * the launch would be dropped. */
#define GS_JOIN_KERNELS_PER_PID     65536u
#define GS_JOIN_KERNELS_TOTAL       262144u
#define GS_JOIN_LAUNCHES_PER_KERNEL 65536u
#define GS_JOIN_LAUNCHES_PER_PID    524288u
#define GS_JOIN_LAUNCHES_TOTAL      2097152u
#define GS_JOIN_CORRS_PER_PID       131072u
#define GS_JOIN_CORRS_TOTAL         524288u
bool gs_join_launch_admit(struct gs_join *j, uint32_t pid, uint64_t function, bool graph);

struct gs_join_batch {
	uint32_t pid;
	int32_t device;
	uint64_t start_ns; /* window start; 0 = previous drain of (pid, device) */
	uint64_t end_ns;   /* drain ktime */
	bool same_drain;   /* another page of the previous batch's GetData call:
			    * same window as that batch (start_ns ignored) */
};

struct gs_join_pc {
	uint32_t location;       /* GPU PC location id (gs_cuda_location) */
	uint64_t function;       /* gs_kernel_name_hash(mangled name), as on the launches */
	uint32_t correlation_id; /* 0 in continuous mode */
	gs_str stall_reason;     /* short name (gs_cuda_fold_stalls) */
	uint64_t samples;        /* base family */
	uint64_t not_issued;     /* _not_issued twin */
};
int gs_join_add_pc_batch(struct gs_join *j, const struct gs_join_batch *b,
			 const struct gs_join_pc *pcs, size_t n);

struct gs_join_stats {
	uint64_t samples[4]; /* gpu_samples by attribution: exact, proportional, unknown, graph */
	uint64_t not_issued[4]; /* gpu_samples_not_issued, same split */
	uint64_t launches;      /* launch events added */
	uint64_t emitted;       /* profile samples written by gs_join_emit */
	uint64_t unannounced; /* gpu_samples of never-announced cubins (gs_cuda_cubin_unannounced) */
	uint64_t kernels_capped;   /* launch events of new kernels past the kernel caps, dropped */
	uint64_t launches_trimmed; /* launch events cut from time lists by the history caps */
	uint64_t corrs_capped;     /* correlation ids dropped by the correlation caps */
};
enum { GS_JOIN_EXACT = 0, GS_JOIN_PROPORTIONAL = 1, GS_JOIN_UNKNOWN = 2, GS_JOIN_GRAPH = 3 };

/* ---- wire records (include/gpusample/records.h) -------------------------- */

struct gs_cuda;
struct gs_gpu_pc_batch;
struct gs_gpu_launch;
/* A GS_REC_GPU_PC_BATCH record of size bytes, end to end: each PC becomes a
 * GPU-PC location (gs_cuda_location on cubin_crc, its mangled name and
 * pc_offset), its stall counts are folded with the (tgid, ctx_uid) table,
 * and the lot goes through gs_join_add_pc_batch with window end =
 * hdr.ktime_ns; every batch after one without GS_GPU_BATCH_LAST (more
 * pages or GetData calls of the same drain) shares that drain's window.  Correlation ids count only with
 * GS_GPU_BATCH_SERIALIZED.  The call's totals go to gs_cuda_add_counts.
 * -EINVAL when the record is malformed (nothing added then). */
int gs_join_pc_batch_record(struct gs_join *j, struct gs_cuda *c, const struct gs_gpu_pc_batch *rec,
			    size_t size);
/* The same from the router's decoded view (struct gs_gpu_rec's batch):
 * 0 or -ENOMEM. */
int gs_join_pc_batch(struct gs_join *j, struct gs_cuda *c, const struct gs_rec_pc_batch_view *v);
/* A GS_REC_GPU_LAUNCH record's fixed part; stack = the profile stack index
 * the caller made from the gs_cpu_sample that follows it (thread_name and
 * role likewise, 0 if unknown).  Weight = sample_every. */
int gs_join_launch_record(struct gs_join *j, const struct gs_gpu_launch *rec, uint32_t stack,
			  gs_str thread_name, gs_str process_role);

/* Write the aggregated samples into the profile (once; later batches after
 * an emit are written by the next emit).  st may be NULL. */
int gs_join_emit(struct gs_join *j, struct gs_join_stats *st);
void gs_join_stats(const struct gs_join *j, struct gs_join_stats *st);


#endif
