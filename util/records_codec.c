/* SPDX-License-Identifier: MIT */
/* The one record codec: see include/gpusample/records_codec.h. */
#include <errno.h>
#include <string.h>

#include "gpusample/records_codec.h"

int gs_rec_hdr_check(const void *data, size_t size)
{
	const struct gs_rec_hdr *h = data;

	if (size < sizeof(*h) || h->size < sizeof(*h) || h->size > size)
		return -EINVAL;
	return h->version == GS_RECORDS_VERSION ? 0 : -EPROTO;
}

_Static_assert(sizeof(struct gs_cpu_sample) == 56, "the wire layout of a CPU sample");

/* A CPU sample of this origin at `at`, of at most room bytes (the rest of
 * its record): nested ones are complete records of their own. */
static int cpu_stack(const void *at, size_t room, uint16_t origin, struct gs_rec_cpu_view *v)
{
	const struct gs_cpu_sample *s = at;

	if (room < sizeof(*s) || s->hdr.size < sizeof(*s) || s->hdr.size > room)
		return -EINVAL;
	if (s->hdr.type != GS_REC_CPU_SAMPLE || s->origin != origin)
		return -EINVAL;
	if (s->hdr.version != GS_RECORDS_VERSION)
		return -EPROTO;
	/* n_user is a __u8: every value is within GS_MAX_USER_FRAMES (255) */
	_Static_assert(GS_MAX_USER_FRAMES == 255, "n_user's bound is its type's");
	if (s->n_kernel > GS_MAX_KERNEL_FRAMES || s->n_python > GS_MAX_PY_FRAMES)
		return -EINVAL;
	size_t words = (size_t)s->n_kernel + s->n_user + 2u * s->n_python;
	if (s->hdr.size - sizeof(*s) < words * sizeof(__u64))
		return -EINVAL;
	*v = (struct gs_rec_cpu_view){
		.s = s,
		.kernel = s->frames,
		.user = s->frames + s->n_kernel,
		.py = (const struct gs_py_frame *)(s->frames + s->n_kernel + s->n_user),
		.n_kernel = s->n_kernel,
		.n_user = s->n_user,
		.n_python = s->n_python,
	};
	return 0;
}

static int want(const struct gs_rec_hdr *h, uint16_t type, size_t fixed)
{
	if (h->type != type)
		return -EBADMSG;
	return h->size < fixed ? -EINVAL : 0;
}

int gs_rec_cpu_sample(const struct gs_rec_hdr *h, struct gs_rec_cpu_view *v)
{
	int rc = want(h, GS_REC_CPU_SAMPLE, sizeof(struct gs_cpu_sample));

	return rc ? rc : cpu_stack(h, h->size, GS_ORIGIN_TIMER, v);
}

/* A record of type with a fixed part and a complete CPU sample after it. */
static int nested(const struct gs_rec_hdr *h, uint16_t type, size_t fixed, uint16_t origin,
		  struct gs_rec_cpu_view *v)
{
	int rc = want(h, type, fixed);

	return rc ? rc : cpu_stack((const char *)h + fixed, h->size - fixed, origin, v);
}

int gs_rec_offcpu_stack(const struct gs_rec_hdr *h, const struct gs_offcpu_stack **os,
			struct gs_rec_cpu_view *v)
{
	int rc = nested(h, GS_REC_OFFCPU_STACK, sizeof(**os), GS_ORIGIN_OFFCPU, v);

	if (!rc)
		*os = (const void *)h;
	return rc;
}

int gs_rec_offcpu_waker(const struct gs_rec_hdr *h, const struct gs_offcpu_waker **w,
			struct gs_rec_cpu_view *v)
{
	int rc = nested(h, GS_REC_OFFCPU_WAKER, sizeof(**w), GS_ORIGIN_WAKER, v);

	if (!rc)
		*w = (const void *)h;
	return rc;
}

int gs_rec_gpu_launch(const struct gs_rec_hdr *h, const struct gs_gpu_launch **l,
		      struct gs_rec_cpu_view *v)
{
	int rc = nested(h, GS_REC_GPU_LAUNCH, sizeof(**l), GS_ORIGIN_LAUNCH, v);

	if (!rc)
		*l = (const void *)h;
	return rc;
}

int gs_rec_mem_call(const struct gs_rec_hdr *h, const struct gs_mem_call **c,
		    struct gs_rec_cpu_view *v)
{
	int rc = nested(h, GS_REC_MEM_CALL, sizeof(**c), GS_ORIGIN_MEM, v);

	if (!rc)
		*c = (const void *)h;
	return rc;
}

int gs_rec_stack(const struct gs_rec_hdr *h, struct gs_rec_cpu_view *v)
{
	const struct gs_offcpu_stack *os;
	const struct gs_offcpu_waker *w;
	const struct gs_gpu_launch *l;
	const struct gs_mem_call *c;

	switch (h->type) {
	case GS_REC_CPU_SAMPLE:
		return gs_rec_cpu_sample(h, v);
	case GS_REC_OFFCPU_STACK:
		return gs_rec_offcpu_stack(h, &os, v);
	case GS_REC_GPU_LAUNCH:
		return gs_rec_gpu_launch(h, &l, v);
	case GS_REC_OFFCPU_WAKER:
		return gs_rec_offcpu_waker(h, &w, v);
	case GS_REC_MEM_CALL:
		return gs_rec_mem_call(h, &c, v);
	default:
		return -EBADMSG;
	}
}

/* The fixed size of a record type that is nothing else; 0 for the others. */
static size_t fixed_size(uint16_t type)
{
	switch (type) {
	case GS_REC_PROC_EVENT:
		return sizeof(struct gs_proc_event);
	case GS_REC_OFFCPU_END:
		return sizeof(struct gs_offcpu_end);
	case GS_REC_GPU_CUBIN:
		return sizeof(struct gs_gpu_cubin);
	case GS_REC_GPU_STATUS:
		return sizeof(struct gs_gpu_status);
	case GS_REC_WAKEUP:
		return sizeof(struct gs_rec_hdr);
	case GS_REC_STEP_MARK:
		return sizeof(struct gs_step_mark);
	case GS_REC_MEM_RET:
		return sizeof(struct gs_mem_ret);
	case GS_REC_MEM_FREE:
		return sizeof(struct gs_mem_free);
	default:
		return 0;
	}
}

int gs_rec_fixed(const struct gs_rec_hdr *h, uint16_t type, const void **rec)
{
	size_t fixed = fixed_size(type);
	int rc = fixed ? want(h, type, fixed) : -EBADMSG;

	if (!rc)
		*rec = h;
	return rc;
}

int gs_rec_pc_batch(const struct gs_rec_hdr *h, struct gs_rec_pc_batch_view *v)
{
	const struct gs_gpu_pc_batch *b = (const void *)h;
	int rc = want(h, GS_REC_GPU_PC_BATCH, sizeof(*b));

	if (rc)
		return rc;
	uint64_t need = sizeof(*b) + (uint64_t)b->n_pcs * sizeof(struct gs_gpu_pc) +
			(uint64_t)b->n_counts * sizeof(struct gs_gpu_stall_count) + b->names_len;
	if (need > h->size)
		return -EINVAL;
	const struct gs_gpu_pc *pcs = (const void *)(b + 1);
	const struct gs_gpu_stall_count *counts = (const void *)(pcs + b->n_pcs);
	const char *names = (const char *)(counts + b->n_counts);
	for (uint32_t i = 0; i < b->n_pcs; i++) {
		if ((uint32_t)pcs[i].first_count + pcs[i].n_counts > b->n_counts)
			return -EINVAL;
		if (pcs[i].name_off >= b->names_len ||
		    !memchr(names + pcs[i].name_off, 0, b->names_len - pcs[i].name_off))
			return -EINVAL;
	}
	*v = (struct gs_rec_pc_batch_view){ b, pcs, counts, names };
	return 0;
}

int gs_rec_stall_table(const struct gs_rec_hdr *h, const struct gs_gpu_stall_table **t,
		       const struct gs_gpu_stall_reason **reasons)
{
	const struct gs_gpu_stall_table *st = (const void *)h;
	int rc = want(h, GS_REC_GPU_STALL_TABLE, sizeof(*st));

	if (rc)
		return rc;
	if (st->n_reasons > (h->size - sizeof(*st)) / sizeof(struct gs_gpu_stall_reason))
		return -EINVAL;
	*t = st;
	*reasons = (const void *)(st + 1);
	return 0;
}

int gs_rec_check(const struct gs_rec_hdr *h)
{
	struct gs_rec_cpu_view cv;
	struct gs_rec_pc_batch_view bv;
	const struct gs_gpu_stall_table *t;
	const struct gs_gpu_stall_reason *r;
	const void *rec;

	switch (h->type) {
	case GS_REC_CPU_SAMPLE:
	case GS_REC_OFFCPU_STACK:
	case GS_REC_OFFCPU_WAKER:
	case GS_REC_GPU_LAUNCH:
	case GS_REC_MEM_CALL:
		return gs_rec_stack(h, &cv);
	case GS_REC_GPU_PC_BATCH:
		return gs_rec_pc_batch(h, &bv);
	case GS_REC_GPU_STALL_TABLE:
		return gs_rec_stall_table(h, &t, &r);
	default:
		return fixed_size(h->type) ? gs_rec_fixed(h, h->type, &rec) : -ENOENT;
	}
}
