/* SPDX-License-Identifier: MIT */
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
 * Session wiring (cli/session.c), in ring-buffer order, after
 * gs_gpu_host_on_record(h, rec) has seen the record:
 *   c = gs_cuda_new(profile); j = gs_join_new(profile, t0 ktime)
 *   GS_REC_GPU_CUBIN:       bytes = gs_gpu_host_cubin(h, rec->crc, &size);
 *                           gs_cuda_add_cubin_borrowed(c, rec->crc, bytes, size, tgid,
 *                                                      NULL, NULL)
 *   GS_REC_GPU_STALL_TABLE: gs_cuda_stall_table_record(c, rec, hdr.size)
 *   GS_REC_GPU_LAUNCH:      stack = the profile stack of the embedded
 *                           gs_cpu_sample (symbolized like any CPU sample);
 *                           gs_join_launch_record(j, rec, stack, comm, role)
 *   GS_REC_GPU_PC_BATCH:    gs_join_pc_batch_record(j, c, rec, hdr.size)
 *   at the end:             gs_join_emit(j, &stats); gs_cuda_add_comments(c)
 * A session that symbolizes CPU stacks only at the end can buffer these
 * records and replay them in the same order then.
 *
 * Errors: 0 or a negative errno (-ENOMEM, -EINVAL for a bad stack index).
 */
#ifndef GS_SYMBOLIZER_JOIN_H
#define GS_SYMBOLIZER_JOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/profile.h"
#include "gpusample/records.h" /* gs_kernel_name_hash */

struct gs_join;

/* Kernel identity shared by launches and PC records: gs_kernel_name_hash()
 * of the full mangled name (records.h). */

struct gs_join *gs_join_new(struct gs_profile *p, uint64_t t0_ns);
void gs_join_free(struct gs_join *j);

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
