/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/procs.h"

bool gs_proc_alive(uint32_t pid)
{
	struct gs_proc_stat st;

	/* A zombie has exited already; its parent just hasn't reaped it. */
	return gs_proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

int gs_check_target(uint32_t pid, char *err, size_t errlen)
{
	struct gs_proc_stat st;
	int rc = gs_proc_stat(pid, &st);

	if (rc == -ESRCH) {
		snprintf(err, errlen, "no such process: %u (check the PID with ps or pgrep)", pid);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot read /proc/%u/stat: %s", pid, strerror(-rc));
		return rc;
	}
	if (st.kernel_thread) {
		snprintf(err, errlen,
			 "PID %u (%s) is a kernel thread; gpusample profiles user processes", pid,
			 st.comm);
		return -EINVAL;
	}
	return 0;
}

struct pid_ppid {
	uint32_t pid, ppid;
};

static int cmp_pid(const void *a, const void *b)
{
	const struct pid_ppid *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int read_all(struct pid_ppid **out, size_t *n_out)
{
	struct pid_ppid *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct gs_proc_stat st;
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || gs_proc_stat((uint32_t)pid, &st))
			continue;
		if (n == cap) {
			void *nv = realloc(v, (cap = cap ? cap * 2 : 512) * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = (struct pid_ppid){ (uint32_t)pid, st.ppid };
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_pid);
	*out = v;
	*n_out = n;
	return 0;
}

static bool descends(const struct pid_ppid *v, size_t n, uint32_t pid, const uint32_t *roots,
		     int n_roots)
{
	/* Bounded walk up the parent chain (pid 1 or a cycle ends it). */
	for (int depth = 0; depth < 256 && pid > 1; depth++) {
		struct pid_ppid key = { pid, 0 }, *e;

		e = bsearch(&key, v, n, sizeof(*v), cmp_pid);
		if (!e)
			return false;
		for (int i = 0; i < n_roots; i++)
			if (e->ppid == roots[i])
				return true;
		pid = e->ppid;
	}
	return false;
}

int gs_for_each_descendant(const uint32_t *roots, int n_roots,
			   void (*fn)(void *ctx, uint32_t pid, uint32_t ppid), void *ctx)
{
	struct pid_ppid *v = NULL;
	size_t n = 0;
	int rc = read_all(&v, &n);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (descends(v, n, v[i].pid, roots, n_roots))
			fn(ctx, v[i].pid, v[i].ppid);
	free(v);
	return 0;
}

struct gs_procinfo *gs_procs_get(struct gs_proc_slots *s, uint32_t tgid)
{
	return gs_proc_slots_get(s, tgid, false);
}

struct gs_procinfo *gs_procs_add(struct gs_proc_slots *s, uint32_t tgid, uint32_t ppid)
{
	struct gs_procinfo *p = gs_procs_get(s, tgid), *parent;
	struct gs_proc *pr;

	if (p) /* known: as is */
		return p;
	pr = gs_proc_table_add(s->t, tgid, ppid);
	if (!pr || !(p = gs_proc_slots_get(s, tgid, true)))
		return NULL;
	p->proc = pr;
	parent = pr->ppid && pr->ppid != tgid ? gs_procs_get(s, pr->ppid) : NULL;
	if (parent) {
		memcpy(p->comm, parent->comm, sizeof(p->comm));
	}
	return p;
}

void gs_procs_set_main(struct gs_procinfo *p, bool main)
{
	if (p->proc->role != GS_ROLE_DATALOADER)
		p->proc->role = main ? GS_ROLE_MAIN : GS_ROLE_OTHER;
}

void gs_procs_set_dataloader(struct gs_procinfo *p)
{
	p->proc->role = GS_ROLE_DATALOADER;
}

const char *gs_procs_role(const struct gs_procinfo *p)
{
	return gs_proc_role_name(p->proc->role);
}

/* ---- roles ---------------------------------------------------------------- */

static struct gs_procinfo *info_at(const struct gs_proc_slots *s, size_t i)
{
	return s->all[i];
}

static struct gs_procinfo *parent_of(struct gs_proc_slots *s, const struct gs_procinfo *p)
{
	return p->proc->tgid == p->proc->root ? NULL : gs_procs_get(s, p->proc->ppid);
}

static bool is_rank_head(struct gs_proc_slots *s, const struct gs_procinfo *p)
{
	const struct gs_procinfo *parent = parent_of(s, p);

	return gs_rank_head(&p->proc->ranks, parent ? &parent->proc->ranks : NULL);
}

/* Mark every ancestor of p in the table as a launcher (bounded walk). */
static void mark_launchers(struct gs_proc_slots *s, const struct gs_procinfo *p)
{
	for (int depth = 0; depth < 256; depth++) {
		struct gs_procinfo *parent = parent_of(s, p);

		if (!parent || parent->launcher)
			return;
		parent->launcher = true;
		p = parent;
	}
}

static void wrapper_main(struct gs_proc_slots *s, struct gs_procinfo *r)
{
	struct gs_procinfo *best = NULL;

	for (size_t k = 0; k < s->n; k++) {
		struct gs_procinfo *p = info_at(s, k);

		if (p->proc->root == r->proc->tgid && p->proc->role != GS_ROLE_DATALOADER &&
		    (!best || p->cpu_samples > best->cpu_samples))
			best = p;
	}
	if (!best || best == r || r->cpu_samples * 20 > best->cpu_samples)
		return; /* the root itself does a real share of the work */
	gs_procs_set_main(r, false);
	gs_procs_set_main(best, true);
}

/* Each rank head is "main" unless it launches other heads; has_heads[k]
 * says that process k is the root of some head. */
static void mark_heads(struct gs_proc_slots *s, bool *has_heads)
{
	for (size_t i = 0; i < s->n; i++) {
		struct gs_procinfo *p = info_at(s, i);

		if (!is_rank_head(s, p))
			continue;
		gs_procs_set_main(p, !p->launcher);
		for (size_t k = 0; has_heads && k < s->n; k++)
			if (info_at(s, k)->proc->tgid == p->proc->root)
				has_heads[k] = true;
	}
}

void gs_procs_assign_roles(struct gs_proc_slots *s)
{
	bool *has_heads = calloc(s->n ? s->n : 1, sizeof(*has_heads));

	for (size_t i = 0; i < s->n; i++)
		info_at(s, i)->launcher = false;
	for (size_t i = 0; i < s->n; i++)
		if (is_rank_head(s, info_at(s, i)))
			mark_launchers(s, info_at(s, i));
	mark_heads(s, has_heads);
	for (size_t i = 0; i < s->n; i++) {
		struct gs_procinfo *p = info_at(s, i);

		if (p->launcher) {
			gs_procs_set_main(p, false);
			p->proc->ranks = GS_RANK_ENV_UNKNOWN;
		} else if (p->is_root && !(has_heads && has_heads[i])) {
			wrapper_main(s, p);
		}
	}
	free(has_heads);
}
