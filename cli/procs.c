/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/procs.h"

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
		void *n = realloc(t->items,
				  (t->cap = t->cap ? t->cap * 2 : 64) * sizeof(*t->items));
		if (!n)
			return NULL;
		t->items = n;
	}
	p = &t->items[t->n++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = ppid;
	p->root = pid;
	p->ranks = GS_RANK_ENV_UNKNOWN;
	parent = gs_proctab_get(t, ppid);
	if (parent) {
		p->root = parent->root;
		p->ranks = parent->ranks; /* a fork child shares the environment */
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

/* ---- ranks from the environment ------------------------------------------ */

enum rank_field { RF_RANK, RF_LOCAL, RF_WORLD, RF_NODE };

static const struct rank_var {
	const char *key;
	uint8_t field, src;
} rank_vars[] = {
	{ "RANK", RF_RANK, GS_RANK_TORCH },
	{ "LOCAL_RANK", RF_LOCAL, GS_RANK_TORCH },
	{ "WORLD_SIZE", RF_WORLD, GS_RANK_TORCH },
	{ "GROUP_RANK", RF_NODE, GS_RANK_TORCH },
	{ "OMPI_COMM_WORLD_RANK", RF_RANK, GS_RANK_OMPI },
	{ "OMPI_COMM_WORLD_LOCAL_RANK", RF_LOCAL, GS_RANK_OMPI },
	{ "OMPI_COMM_WORLD_SIZE", RF_WORLD, GS_RANK_OMPI },
	{ "PMI_RANK", RF_RANK, GS_RANK_PMI },
	{ "PMI_SIZE", RF_WORLD, GS_RANK_PMI },
	{ "SLURM_PROCID", RF_RANK, GS_RANK_SLURM },
	{ "SLURM_LOCALID", RF_LOCAL, GS_RANK_SLURM },
	{ "SLURM_NTASKS", RF_WORLD, GS_RANK_SLURM },
	{ "SLURM_NODEID", RF_NODE, GS_RANK_SLURM },
};

/* Strict decimal 0..INT32_MAX of exactly len bytes; -1 otherwise. */
static int64_t parse_rank_value(const char *v, size_t len)
{
	int64_t x = 0;

	if (len == 0 || len > 10)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x <= INT32_MAX ? x : -1;
}

void gs_rank_env_entry(struct gs_rank_env *r, const char *kv, size_t len)
{
	int64_t *field[] = { &r->rank, &r->local_rank, &r->world_size, &r->node_rank };
	const char *eq = memchr(kv, '=', len);

	if (!eq)
		return;
	for (size_t i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]); i++) {
		const struct rank_var *v = &rank_vars[i];
		size_t klen = strlen(v->key);
		int64_t x;

		if ((size_t)(eq - kv) != klen || memcmp(kv, v->key, klen))
			continue;
		x = parse_rank_value(eq + 1, len - klen - 1);
		/* A better source (lower enum) already set this field: keep it,
		 * whatever order the entries come in. */
		if (x < 0 || (r->src[v->field] && r->src[v->field] <= v->src))
			return;
		*field[v->field] = x;
		r->src[v->field] = v->src;
		return;
	}
}

void gs_rank_env_parse(struct gs_rank_env *r, const char *buf, size_t n)
{
	size_t i = 0;

	while (i < n) {
		const char *end = memchr(buf + i, '\0', n - i);
		size_t len = end ? (size_t)(end - (buf + i)) : n - i;

		gs_rank_env_entry(r, buf + i, len);
		i += len + 1;
	}
}

/* Bounds: environments of real jobs are tens of KiB; one that is larger
 * is read up to this much and the rest ignored. */
#define RANK_ENV_MAX   (1u << 20)
#define RANK_ENV_CHUNK 65536

int gs_proc_rank_env(uint32_t pid, struct gs_rank_env *r)
{
	char path[64], *buf;
	size_t n = 0, keep = 0;
	int fd, rc = 0;

	*r = GS_RANK_ENV_UNKNOWN;
	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(RANK_ENV_CHUNK + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* Chunked: parse complete entries, carry a partial one over (an entry
	 * longer than a chunk is no rank variable and is dropped). */
	while (n < RANK_ENV_MAX) {
		ssize_t got = read(fd, buf + keep, RANK_ENV_CHUNK - keep);
		char *last;

		if (got < 0) {
			rc = -errno;
			break;
		}
		if (got == 0) {
			gs_rank_env_parse(r, buf, keep);
			break;
		}
		n += (size_t)got;
		keep += (size_t)got;
		last = memrchr(buf, '\0', keep);
		if (!last) {
			keep = 0;
			continue;
		}
		gs_rank_env_parse(r, buf, (size_t)(last - buf));
		keep -= (size_t)(last + 1 - buf);
		memmove(buf, last + 1, keep);
	}
	free(buf);
	close(fd);
	return rc;
}

/* ---- roles ---------------------------------------------------------------- */

static bool same_rank(const struct gs_rank_env *a, const struct gs_rank_env *b)
{
	return a->rank == b->rank && a->src[0] == b->src[0];
}

static bool is_rank_head(struct gs_proctab *t, const struct gs_procinfo *p)
{
	const struct gs_procinfo *parent = p->pid == p->root ? NULL : gs_proctab_get(t, p->ppid);

	return p->ranks.rank >= 0 && !(parent && same_rank(&parent->ranks, &p->ranks));
}

/* Mark every ancestor of p in the table as a launcher (bounded walk). */
static void mark_launchers(struct gs_proctab *t, const struct gs_procinfo *p)
{
	for (int depth = 0; depth < 256 && p->pid != p->root; depth++) {
		struct gs_procinfo *parent = gs_proctab_get(t, p->ppid);

		if (!parent || parent->launcher)
			return;
		parent->launcher = true;
		p = parent;
	}
}

static void wrapper_main(struct gs_proctab *t, struct gs_procinfo *r)
{
	struct gs_procinfo *best = NULL;

	for (uint32_t k = 0; k < t->n; k++) {
		struct gs_procinfo *p = &t->items[k];

		if (p->root == r->pid && !p->dataloader &&
		    (!best || p->cpu_samples > best->cpu_samples))
			best = p;
	}
	if (!best || best == r || r->cpu_samples * 20 > best->cpu_samples)
		return; /* the root itself does a real share of the work */
	r->main = false;
	best->main = true;
}

void gs_proctab_assign_roles(struct gs_proctab *t)
{
	bool *has_heads = calloc(t->n ? t->n : 1, sizeof(*has_heads));

	for (uint32_t i = 0; i < t->n; i++)
		t->items[i].launcher = false;
	for (uint32_t i = 0; i < t->n; i++)
		if (is_rank_head(t, &t->items[i]))
			mark_launchers(t, &t->items[i]);
	for (uint32_t i = 0; i < t->n; i++) {
		struct gs_procinfo *p = &t->items[i];

		if (!is_rank_head(t, p))
			continue;
		p->main = !p->launcher && !p->dataloader;
		for (uint32_t k = 0; has_heads && k < t->n; k++)
			if (t->items[k].pid == p->root)
				has_heads[k] = true;
	}
	for (uint32_t i = 0; i < t->n; i++) {
		struct gs_procinfo *p = &t->items[i];

		if (p->launcher) {
			p->main = false;
			p->ranks = GS_RANK_ENV_UNKNOWN;
		} else if (p->is_root && !(has_heads && has_heads[i])) {
			wrapper_main(t, p);
		}
	}
	free(has_heads);
}
