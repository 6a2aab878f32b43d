/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/procs.h"

#define PF_KTHREAD 0x00200000u

int gs_proc_stat(uint32_t pid, struct gs_proc_stat *st)
{
	char path[64], buf[1024], *open_paren, *close_paren;
	unsigned long flags = 0;
	int ppid = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may contain spaces and parentheses: it ends at the last ')'. */
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->pid = pid;
	n = (size_t)(close_paren - open_paren - 1);
	if (n >= sizeof(st->comm))
		n = sizeof(st->comm) - 1;
	memcpy(st->comm, open_paren + 1, n);
	/* fields after comm: state ppid pgrp session tty_nr tpgid flags */
	if (sscanf(close_paren + 2, "%c %d %*d %*d %*d %*d %lu", &st->state, &ppid, &flags) != 3)
		return -EINVAL;
	st->ppid = (uint32_t)ppid;
	st->kernel_thread = (flags & PF_KTHREAD) != 0;
	return 0;
}

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
		snprintf(err, errlen, "PID %u (%s) is a kernel thread; gpusample profiles user processes",
			 pid, st.comm);
		return -EINVAL;
	}
	return 0;
}

struct pid_ppid { uint32_t pid, ppid; };

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

static bool descends(const struct pid_ppid *v, size_t n, uint32_t pid,
		     const uint32_t *roots, int n_roots)
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

struct gs_procinfo *gs_proctab_get(struct gs_proctab *t, uint32_t pid)
{
	for (uint32_t i = t->n; i-- > 0;)
		if (t->items[i].pid == pid)
			return &t->items[i];
	return NULL;
}

struct gs_procinfo *gs_proctab_add(struct gs_proctab *t, uint32_t pid, uint32_t ppid)
{
	struct gs_procinfo *p = gs_proctab_get(t, pid), *parent;

	if (p)
		return p;
	if (t->n == t->cap) {
		void *n = realloc(t->items, (t->cap = t->cap ? t->cap * 2 : 64) * sizeof(*t->items));
		if (!n)
			return NULL;
		t->items = n;
	}
	p = &t->items[t->n++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = ppid;
	p->root = pid;
	parent = gs_proctab_get(t, ppid);
	if (parent) {
		p->root = parent->root;
		memcpy(p->comm, parent->comm, sizeof(p->comm));
		memcpy(p->python, parent->python, sizeof(p->python));
		p->py_state = parent->py_state;
		p->py_cfg_id = parent->py_cfg_id;
		p->py_first_try = parent->py_first_try;
	}
	return p;
}

void gs_proctab_free(struct gs_proctab *t)
{
	free(t->items);
	memset(t, 0, sizeof(*t));
}

const char *gs_proc_role(const struct gs_procinfo *p)
{
	if (p->dataloader)
		return "dataloader";
	return p->main ? "main" : "other";
}
