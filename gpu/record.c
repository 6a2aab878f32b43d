// SPDX-License-Identifier: MIT
/* GPU records decoded once: see gpu.h (struct gs_gpu_rec). */
#include "gpu/gpu.h"

#include <errno.h>

int gs_gpu_rec_decode(const struct gs_rec_hdr *h, struct gs_gpu_rec *r)
{
	const void *fixed = NULL;
	int rc;

	*r = (struct gs_gpu_rec){ .type = h->type, .hdr = h, .gpu = (const void *)(h + 1) };
	switch (h->type) {
	case GS_REC_GPU_PC_BATCH:
		return gs_rec_pc_batch(h, &r->batch);
	case GS_REC_GPU_STALL_TABLE:
		return gs_rec_stall_table(h, &r->table.t, &r->table.reasons);
	case GS_REC_GPU_LAUNCH:
		return gs_rec_gpu_launch(h, &r->launch.l, &r->launch.stack);
	case GS_REC_GPU_CUBIN:
		rc = gs_rec_fixed(h, GS_REC_GPU_CUBIN, &fixed);
		r->cubin = fixed;
		return rc;
	case GS_REC_GPU_STATUS:
		rc = gs_rec_fixed(h, GS_REC_GPU_STATUS, &fixed);
		r->status = fixed;
		return rc;
	default:
		return -EBADMSG;
	}
}

int gs_gpu_rec_decode_as(const void *rec, size_t size, uint16_t type, struct gs_gpu_rec *r)
{
	const struct gs_rec_hdr *h = rec;

	if (gs_rec_hdr_check(rec, size) || h->type != type || gs_gpu_rec_decode(h, r))
		return -EINVAL;
	return 0;
}
