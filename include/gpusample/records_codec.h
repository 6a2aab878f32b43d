/* SPDX-License-Identifier: MIT */
/*
 * The one record codec beside records.h: every record type's sizes and the
 * counts and offsets inside it are checked here, once, before any consumer
 * reads a field.  Records come from BPF and, for GPU records, from the agent
 * in the target's address space: every byte is hostile, no size is trusted.
 *
 * Two levels:
 *  - gs_rec_hdr_check(data, size): the header as delivered (the ring
 *    buffer's size): hdr.size within [header, size], this GS_RECORDS_VERSION.
 *    After it, h->size bytes at h are readable.
 *  - gs_rec_check(h) and the typed decoders: the type's layout inside
 *    h->size bytes (fixed part, frame counts against their limits and the
 *    size, nested CPU stacks, PC/count/name tables of a PC batch).  A CPU
 *    stack's origin must be its record's: GS_ORIGIN_TIMER in a
 *    GS_REC_CPU_SAMPLE, _OFFCPU in an off-CPU stack, _LAUNCH in a launch.
 * Decoders fill a view of pointers into the record; they copy nothing.
 * Errors: -EINVAL (sizes or counts lie), -EPROTO (another version),
 * -ENOENT (gs_rec_check: a type this build does not know), -EBADMSG (the
 * decoder's type is not the record's).
 */
#ifndef GS_RECORDS_CODEC_H
#define GS_RECORDS_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "gpusample/records.h"

int gs_rec_hdr_check(const void *data, size_t size);
int gs_rec_check(const struct gs_rec_hdr *h);

/* A CPU stack: the sample's fixed part and its frame runs.  The counts are
 * the view's own (the sample's as decoded): a consumer drops frames by
 * narrowing the view, without copying the record. */
struct gs_rec_cpu_view {
	const struct gs_cpu_sample *s; /* tgid, tid, flags, origin, comm */
	const __u64 *kernel, *user;    /* n_kernel, n_user ips */
	const struct gs_py_frame *py;  /* n_python frames */
	uint32_t n_kernel, n_user, n_python;
};
/* GS_REC_CPU_SAMPLE (origin GS_ORIGIN_TIMER). */
int gs_rec_cpu_sample(const struct gs_rec_hdr *h, struct gs_rec_cpu_view *v);
/* GS_REC_OFFCPU_STACK: its fixed part and the CPU stack that follows
 * (origin GS_ORIGIN_OFFCPU). */
int gs_rec_offcpu_stack(const struct gs_rec_hdr *h, const struct gs_offcpu_stack **os,
			struct gs_rec_cpu_view *v);
/* GS_REC_OFFCPU_WAKER: its fixed part and the waker's CPU stack (origin
 * GS_ORIGIN_WAKER). */
int gs_rec_offcpu_waker(const struct gs_rec_hdr *h, const struct gs_offcpu_waker **w,
			struct gs_rec_cpu_view *v);
/* GS_REC_GPU_LAUNCH: its fixed part and the launching CPU stack (origin
 * GS_ORIGIN_LAUNCH). */
int gs_rec_gpu_launch(const struct gs_rec_hdr *h, const struct gs_gpu_launch **l,
		      struct gs_rec_cpu_view *v);
/* GS_REC_MEM_CALL: its fixed part and the calling CPU stack (origin
 * GS_ORIGIN_MEM). */
int gs_rec_mem_call(const struct gs_rec_hdr *h, const struct gs_mem_call **c,
		    struct gs_rec_cpu_view *v);
/* Any record that carries a CPU stack (the four above): its stack, whose
 * s->origin says which path took it; -EBADMSG for a record without one. */
int gs_rec_stack(const struct gs_rec_hdr *h, struct gs_rec_cpu_view *v);

/* A record that is only a fixed part (GS_REC_PROC_EVENT, _OFFCPU_END,
 * _GPU_CUBIN, _GPU_STATUS, _WAKEUP, _MEM_RET, _MEM_FREE) of that type: *rec = h. */
int gs_rec_fixed(const struct gs_rec_hdr *h, uint16_t type, const void **rec);

/* GS_REC_GPU_PC_BATCH: every pcs[i] has its counts inside counts[] and its
 * name_off on a NUL-terminated name inside names[]. */
struct gs_rec_pc_batch_view {
	const struct gs_gpu_pc_batch *b;
	const struct gs_gpu_pc *pcs;             /* b->n_pcs */
	const struct gs_gpu_stall_count *counts; /* b->n_counts */
	const char *names;                       /* b->names_len bytes */
};
int gs_rec_pc_batch(const struct gs_rec_hdr *h, struct gs_rec_pc_batch_view *v);

/* GS_REC_GPU_STALL_TABLE: reasons[t->n_reasons] inside the record (names
 * are not NUL-terminated on the wire: copy at most GS_GPU_STALL_NAME_LEN - 1). */
int gs_rec_stall_table(const struct gs_rec_hdr *h, const struct gs_gpu_stall_table **t,
		       const struct gs_gpu_stall_reason **reasons);

#endif
