/* SPDX-License-Identifier: MIT */
/*
 * The one stall classifier.  CUPTI names its PC-sampling stall reasons
 * "smsp__pcsamp_warps_issue_stalled_<reason>", each with a
 * "<reason>_not_issued" twin (a subset count: never add the two), plus two
 * counters, "smsp__pcsamp_sample_count" and
 * "smsp__pcsamp_samples_data_dropped", which are not warp states.
 *
 * The name is read once, in the agent, where CUPTI hands it out:
 * gs_stall_flags_of_name gives the GS_GPU_STALL_* flags sent in the stall
 * table record (gpusample/records.h).  Every consumer after that (the
 * agent's own sample count, the BPF host's batch totals, the symbolizer's
 * fold into gpu_samples / gpu_samples_not_issued) trusts those wire flags
 * through gs_stall_kind and never looks at the name again.
 * Header-only and libc-only: the agent includes it too.
 */
#ifndef GS_STALL_H
#define GS_STALL_H

#include <stdint.h>
#include <string.h>
#include "gpusample/records.h"

enum gs_stall_kind {
	GS_STALL_BASE = 0,   /* a reason: counts into gpu_samples */
	GS_STALL_NOT_ISSUED, /* its _not_issued twin: gpu_samples_not_issued */
	GS_STALL_COUNTER,    /* sample_count / samples_data_dropped: skipped */
};

#define GS_STALL_NOT_ISSUED_SUFFIX "_not_issued"

/* GS_GPU_STALL_* of a CUPTI stall reason name (NUL-terminated). */
static inline uint32_t gs_stall_flags_of_name(const char *name)
{
	size_t n = strlen(name), suf = sizeof(GS_STALL_NOT_ISSUED_SUFFIX) - 1;

	if (!strcmp(name, "smsp__pcsamp_sample_count") ||
	    !strcmp(name, "smsp__pcsamp_samples_data_dropped"))
		return GS_GPU_STALL_COUNTER;
	if (n > suf && !strcmp(name + n - suf, GS_STALL_NOT_ISSUED_SUFFIX))
		return GS_GPU_STALL_NOT_ISSUED;
	return 0;
}

/* The kind of a reason from its wire flags (a counter wins over a twin). */
static inline enum gs_stall_kind gs_stall_kind(uint32_t flags)
{
	if (flags & GS_GPU_STALL_COUNTER)
		return GS_STALL_COUNTER;
	if (flags & GS_GPU_STALL_NOT_ISSUED)
		return GS_STALL_NOT_ISSUED;
	return GS_STALL_BASE;
}

#endif
