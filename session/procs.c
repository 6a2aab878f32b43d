/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/procs.h"

/* The process (tgid) thread tid belongs to; 0 when it cannot be read. */
static uint32_t tgid_of(uint32_t tid)
{
	char v[32];
	unsigned t;

	return !gs_proc_status_field(tid, "Tgid:", v, sizeof(v)) && sscanf(v, "%u", &t) == 1 ? t
											     : 0;
}

int gs_check_target(uint32_t pid, char *err, size_t errlen)
{
	uint32_t tgid;

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
	if ((tgid = tgid_of(pid)) && tgid != pid) {
		snprintf(err, errlen,
			 "%u is a thread (\"%s\") of process %u: profile the process, -p %u "
			 "(its threads are all sampled)",
			 pid, st.comm, tgid, tgid);
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
	/* A process in a container: the pid its own tools show, read while it
	 * is alive (0 when gone or the same). */
	int64_t ns = gs_proc_nstgid(tgid);
	p->ns_pid = ns > 0 && ns != tgid ? (uint32_t)ns : 0;
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

void gs_procs_assign_roles(struct gs_proc_slots *s)
{
	struct gs_role_proc *v = calloc(s->n ? s->n : 1, sizeof(*v));

	for (size_t i = 0; v && i < s->n; i++) {
		const struct gs_procinfo *p = s->all[i];

		v[i] = (struct gs_role_proc){
			.tgid = p->proc->tgid,
			.ppid = p->proc->ppid,
			.is_root = p->is_root,
			.cpu_samples = p->cpu_samples,
			.ranks = p->proc->ranks,
			.role = p->proc->role,
		};
	}
	if (v && !gs_proc_assign_roles(v, s->n)) {
		for (size_t i = 0; i < s->n; i++) {
			struct gs_procinfo *p = s->all[i];

			p->proc->role = v[i].role;
			p->proc->ranks = v[i].ranks;
		}
	}
	free(v);
}
