/* SPDX-License-Identifier: MIT */
/* The run's counters into the profile: the sampler's (BPF) and the
 * session's own (s->counts), one row each of gpusample/counters.h. */
#include <string.h>

#include "cli/session_int.h"
#include "output/output.h"

int gs_session_counters(struct session *s, const struct gs_sampler_stats *st)
{
	uint64_t v[GS_NCOUNTERS];

	memcpy(v, s->counts, sizeof(v));
#define GS_X_BPF(name, kind, what) v[GS_C_##name] = st->name;
	GS_BPF_COUNTERS(GS_X_BPF)
#undef GS_X_BPF
	return gs_profile_add_counters(&s->prof, v);
}
