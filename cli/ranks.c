/* SPDX-License-Identifier: MIT */
/*
 * Distributed jobs: each process's ranks (from its environment, read by
 * cli/procs.c) and the host name become labels on every CPU sample, so one
 * profile of a torchrun job, or a merge of many hosts' profiles, can be cut
 * by rank (`go tool pprof -tagfocus=rank=1`) and by host.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/session_int.h"

void gs_session_read_ranks(struct gs_procinfo *p, bool exec)
{
	struct gs_rank_env r;

	/* Unreadable without an exec (the process is gone, or hides it): what
	 * the fork child inherited from its parent stays right. */
	if (!gs_proc_rank_env(p->pid, &r) || exec)
		p->ranks = r;
}

static gs_str host_label(struct session *s)
{
	char host[256];

	if (!s->host_label) {
		if (gethostname(host, sizeof(host)))
			strcpy(host, "unknown");
		host[sizeof(host) - 1] = '\0';
		s->host_label = gs_profile_intern(&s->prof, host);
	}
	return s->host_label;
}

static void set_num(struct gs_sample *smp, enum gs_num_label l, int64_t v)
{
	if (v < 0)
		return;
	smp->num_labels[l] = v;
	smp->num_set |= 1u << l;
}

static void label_sample(gs_str host, const struct gs_procinfo *p, struct gs_sample *smp)
{
	if (host != (gs_str)-1)
		smp->str_labels[GS_SL_HOST] = host;
	if (!p)
		return;
	set_num(smp, GS_NL_RANK, p->ranks.rank);
	set_num(smp, GS_NL_LOCAL_RANK, p->ranks.local_rank);
	set_num(smp, GS_NL_WORLD_SIZE, p->ranks.world_size);
	set_num(smp, GS_NL_NODE_RANK, p->ranks.node_rank);
}

void gs_session_label_samples(struct session *s)
{
	gs_str host = host_label(s);
	const struct gs_procinfo *p = NULL;

	for (size_t i = 0; i < s->prof.n_samples; i++) {
		struct gs_sample *smp = &s->prof.samples[i];

		if (smp->cuda_device >= 0)
			continue;
		if (!p || p->pid != smp->pid) /* samples come in runs of one process */
			p = gs_proctab_get(&s->procs, smp->pid);
		label_sample(host, p, smp);
	}
}

/* Rank of the profiled root: the launched command inherits gpusample's own
 * environment; an attached process is read like any other. */
static int64_t root_rank(const struct session *s)
{
	extern char **environ;
	struct gs_rank_env r = GS_RANK_ENV_UNKNOWN;

	if (s->launched) {
		for (char **e = environ; e && *e; e++)
			gs_rank_env_entry(&r, *e, strlen(*e));
	} else {
		gs_proc_rank_env(s->roots[0], &r);
	}
	return r.rank;
}

int gs_session_prefix(struct session *s)
{
	char host[256];
	struct gs_prefix_vars v = { .host = host, .pid = s->roots[0], .rank = root_rank(s) };
	int rc;

	if (gethostname(host, sizeof(host)))
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	rc = gs_expand_prefix(s->o->prefix ? s->o->prefix : "gpusample-%p", &v, s->prefix,
			      sizeof(s->prefix), s->err, sizeof(s->err));
	if (rc)
		fprintf(stderr, "gpusample: %s\n", s->err);
	return rc;
}
