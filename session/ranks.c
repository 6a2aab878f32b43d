/* SPDX-License-Identifier: MIT */
/*
 * Distributed jobs: each process's ranks (from its environment, read by
 * the process table, proc/environ.c) and the host name become labels on every CPU sample, so one
 * profile of a torchrun job, or a merge of many hosts' profiles, can be cut
 * by rank (`go tool pprof -tagfocus=rank=1`) and by host.
 */
#include <stdbool.h>
#include <stdio.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/session_int.h"
#include "util/log.h"

/* ---- -o templates (gs_expand_prefix, session.h) ---- */

static int put_char(char *out, size_t outlen, size_t *n, char c)
{
	if (*n + 1 >= outlen)
		return -ENAMETOOLONG;
	out[(*n)++] = c;
	return 0;
}

static int put_str(char *out, size_t outlen, size_t *n, const char *s, bool host)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		char c = *s;

		/* A host name is a path component here: nothing that could
		 * climb or split the path. */
		if (host && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			c = '_';
		rc = put_char(out, outlen, n, c);
	}
	return rc;
}

int gs_expand_prefix(const char *tmpl, const struct gs_prefix_vars *v, char *out, size_t outlen,
		     char *err, size_t errlen)
{
	char num[24];
	size_t n = 0;
	int rc = 0;

	for (const char *t = tmpl; *t && !rc; t++) {
		if (*t != '%') {
			rc = put_char(out, outlen, &n, *t);
			continue;
		}
		switch (*++t) {
		case '%':
			rc = put_char(out, outlen, &n, '%');
			break;
		case 'h':
			rc = put_str(out, outlen, &n, v->host && *v->host ? v->host : "unknown",
				     true);
			break;
		case 'p':
			snprintf(num, sizeof(num), "%u", v->pid);
			rc = put_str(out, outlen, &n, num, false);
			break;
		case 'r':
			if (v->rank < 0) {
				snprintf(err, errlen,
					 "-o %s: %%r needs the rank, but neither RANK nor "
					 "OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID is set "
					 "(use %%h and %%p)",
					 tmpl);
				return -EINVAL;
			}
			snprintf(num, sizeof(num), "%lld", (long long)v->rank);
			rc = put_str(out, outlen, &n, num, false);
			break;
		default:
			snprintf(
			    err, errlen,
			    "-o %s: unknown %%%s (use %%h host, %%p pid, %%r rank, %%%% for %%)",
			    tmpl, *t ? (char[2]){ *t, 0 } : "at the end");
			return -EINVAL;
		}
	}
	if (rc) {
		snprintf(err, errlen, "-o %s: the expanded name is too long", tmpl);
		return rc;
	}
	out[n] = '\0';
	return 0;
}

/* This machine's host name, "unknown" if it has none. */
static void local_host(char *host, size_t len)
{
	if (gethostname(host, len) || !host[0])
		snprintf(host, len, "unknown");
	host[len - 1] = '\0';
}

int gs_expand_prefix_of(const char *tmpl, uint32_t pid, char *out, size_t outlen, char *err,
			size_t errlen)
{
	struct gs_rank_env r = GS_RANK_ENV_UNKNOWN;
	char host[256];

	local_host(host, sizeof(host));
	gs_proc_rank_env(pid, &r);
	return gs_expand_prefix(tmpl, &(struct gs_prefix_vars){ host, pid, r.rank }, out, outlen,
				err, errlen);
}

static gs_str host_label(struct session *s)
{
	char host[256];

	if (!s->stacks.host_label) {
		local_host(host, sizeof(host));
		s->stacks.host_label = gs_profile_intern(&s->prof, host);
	}
	return s->stacks.host_label;
}

static void set_num(struct gs_sample_ctx *c, enum gs_num_label l, int64_t v)
{
	if (v < 0)
		return;
	c->num_labels[l] = v;
	c->num_set |= 1u << l;
}

void gs_session_proc_labels(struct session *s, uint32_t tgid, struct gs_sample_ctx *c)
{
	const struct gs_procinfo *info = gs_procs_get(&s->rt.procs, tgid);
	const struct gs_proc *p = info ? info->proc : NULL;
	gs_str host = host_label(s);

	if (host != (gs_str)-1)
		c->str_labels[GS_SL_HOST] = host;
	if (!p)
		return;
	set_num(c, GS_NL_RANK, p->ranks.rank);
	set_num(c, GS_NL_LOCAL_RANK, p->ranks.local_rank);
	set_num(c, GS_NL_WORLD_SIZE, p->ranks.world_size);
	set_num(c, GS_NL_NODE_RANK, p->ranks.node_rank);
}

/* Rank of the profiled root: the launched command inherits gpusample's own
 * environment; an attached process is read like any other. */
static int64_t root_rank(const struct gs_session_targets *t)
{
	extern char **environ;
	struct gs_rank_env r = GS_RANK_ENV_UNKNOWN;

	if (t->launched) {
		for (char **e = environ; e && *e; e++)
			gs_rank_env_entry(&r, *e, strlen(*e));
	} else {
		gs_proc_rank_env(t->roots[0], &r);
	}
	return r.rank;
}

/* A name made from a template (%h, %p, %r) is meant to be one run's own:
 * srun starts one gpusample per task, so a file already at the expanded
 * path is another run's profile, and it is never replaced.  Checked before
 * the run starts (a run that would only fail at the end is worse); runs
 * started at the same instant are the output layer's to keep apart. */
static int refuse_clash(const struct session *s, const char *tmpl)
{
	const struct gs_out_file *outs = gs_out_files;
	char path[PATH_MAX + 32];
	struct stat st;

	for (size_t i = 0; i < GS_N_OUT_FILES; i++) {
		if (!(s->o->formats & outs[i].fmt))
			continue;
		snprintf(path, sizeof(path), "%s%s", s->out.prefix, outs[i].suffix);
		if (!lstat(path, &st)) {
			/* with %p already in the name, the clash is an earlier run
			 * on the same process (the default -o names none other) */
			gs_log("%s exists: -o %s names one run's files, and that one is "
			       "an earlier run's; not overwriting it (%s)\n",
			       path, tmpl,
			       strstr(tmpl, "%p") ? "an earlier run on this PID: remove or rename "
						    "it, or give -o another name"
						  : "remove it, or add %p or %r to -o");
			return -EEXIST;
		}
	}
	return 0;
}

static bool has_escape(const char *tmpl)
{
	for (const char *t = strchr(tmpl, '%'); t; t = strchr(t + 2, '%')) {
		if (t[1] == 'h' || t[1] == 'p' || t[1] == 'r')
			return true;
		if (!t[1])
			break;
	}
	return false;
}

int gs_session_prefix(struct session *s)
{
	const char *tmpl = s->o->prefix ? s->o->prefix : "gpusample-%p";
	char host[256];
	struct gs_prefix_vars v = { .host = host,
				    .pid = s->targets.roots[0],
				    .rank = root_rank(&s->targets) };
	int rc;

	local_host(host, sizeof(host));
	rc = gs_expand_prefix(tmpl, &v, s->out.prefix, sizeof(s->out.prefix), s->err,
			      sizeof(s->err));
	if (rc) {
		gs_log("%s\n", s->err);
		return rc;
	}
	return has_escape(tmpl) ? refuse_clash(s, tmpl) : 0;
}
