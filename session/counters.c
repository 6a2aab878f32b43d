/* SPDX-License-Identifier: MIT */
/* The run's counters into the profile: the sampler's (BPF) and the
 * session's own (s->out.counts), one row each of gpusample/counters.h. */
#include <stdio.h>
#include <string.h>

#include "session/session_int.h"
#include "output/output.h"
#include "proc/proc.h"
#include "util/membudget.h"

/* What the stores a target can grow took of the run's one memory budget,
 * and what it refused (each store names its own losses too). */
static void memory_budget(struct session *s)
{
	struct gs_mem_stats m;
	char held[256] = "", refused[256] = "", note[320];
	size_t h = 0, r = 0;
	uint64_t n_refused = 0;

	gs_mem_stats(&m);
	for (int k = 0; k < GS_MEM_KINDS; k++) {
		const char *sep = k ? ", " : "";

		h += (size_t)snprintf(held + h, h < sizeof(held) ? sizeof(held) - h : 0,
				      "%s%s %.1f", sep, gs_mem_kind_name(k),
				      m.used_by[k] / 1048576.0);
		r += (size_t)snprintf(refused + r, r < sizeof(refused) ? sizeof(refused) - r : 0,
				      "%s%s %llu", sep, gs_mem_kind_name(k),
				      (unsigned long long)m.refused[k]);
		n_refused += m.refused[k];
	}
	gs_profile_add_comment(&s->prof,
			       "memory budget: peak %.1f MiB of %llu MiB (at the end: %s MiB); "
			       "refused: %s",
			       m.peak / 1048576.0, (unsigned long long)(m.budget >> 20), held,
			       refused);
	if (n_refused)
		gs_profile_add_note(
		    &s->prof,
		    "the run's memory budget (%llu MiB of perf maps, unwind tables, GPU names "
		    "and locations, maps snapshots and inflated debug sections together; "
		    "GS_MEM_BUDGET_MB sets "
		    "another) was spent: what came after it was dropped and counted",
		    (unsigned long long)(m.budget >> 20));
	if (gs_proc_maps_cap_note(note, sizeof(note)))
		gs_profile_add_note(&s->prof, "%s", note);
}

int gs_session_counters(struct session *s, const struct gs_sampler_stats *st)
{
	uint64_t v[GS_NCOUNTERS];

	memcpy(v, s->out.counts, sizeof(v));
#define GS_X_BPF(name, kind, what) v[GS_C_##name] = st->name;
	GS_BPF_COUNTERS(GS_X_BPF)
#undef GS_X_BPF
	memory_budget(s);
	return gs_profile_add_counters(&s->prof, v);
}
