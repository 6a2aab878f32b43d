/* SPDX-License-Identifier: MIT */
/* The run's counters into the profile: the sampler's (BPF) and the
 * session's own (s->out.counts), one row each of gpusample/counters.h. */
#include <string.h>

#include "session/session_int.h"
#include "output/output.h"
#include "util/membudget.h"

/* What the stores a target can grow took of the run's one memory budget,
 * and what it refused (each store names its own losses too). */
static void memory_budget(struct session *s)
{
	struct gs_mem_stats m;

	gs_mem_stats(&m);
	gs_profile_add_comment(
	    &s->prof,
	    "memory budget: peak %.1f MiB of %llu MiB (at the end: %s %.1f, %s "
	    "%.1f, %s %.1f MiB); refused: %s %llu, %s %llu, %s %llu",
	    m.peak / 1048576.0, (unsigned long long)(m.budget >> 20),
	    gs_mem_kind_name(GS_MEM_PERF_MAPS), m.used_by[0] / 1048576.0,
	    gs_mem_kind_name(GS_MEM_CFI_TABLES), m.used_by[1] / 1048576.0,
	    gs_mem_kind_name(GS_MEM_GPU_STORES), m.used_by[2] / 1048576.0,
	    gs_mem_kind_name(GS_MEM_PERF_MAPS), (unsigned long long)m.refused[0],
	    gs_mem_kind_name(GS_MEM_CFI_TABLES), (unsigned long long)m.refused[1],
	    gs_mem_kind_name(GS_MEM_GPU_STORES), (unsigned long long)m.refused[2]);
	if (m.refused[0] + m.refused[1] + m.refused[2])
		gs_profile_add_note(
		    &s->prof,
		    "the run's memory budget (%llu MiB of perf maps, unwind tables "
		    "and GPU names and locations together; GS_MEM_BUDGET_MB sets "
		    "another) was spent: what came after it was dropped and counted",
		    (unsigned long long)(m.budget >> 20));
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
