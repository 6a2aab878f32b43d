/* SPDX-License-Identifier: MIT */
/*
 * Process roles of a job (gs_proc_assign_roles, proc.h): one rule for the
 * profiling session and `gpusample dump`.  Distributed jobs: a rank head
 * is a process with a rank whose parent does not have the same one (source
 * and value); a head is "main" unless it launches other heads (torchrun,
 * mpirun: launchers, whose ranks are not the job's).  A target root with
 * no head below it is "main", unless most of the work (20x its own CPU
 * samples) is in one descendant: then a wrapper runs the job (a shell
 * script, `python -m` of a launcher), and that descendant is "main".
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>

#include "proc/proc.h"
#include "util/hashmap.h"

/* Parent links by index, -1 for none (a root, or a parent not in v). */
static int parents(const struct gs_role_proc *v, size_t n, ssize_t *parent)
{
	struct gs_hmap by_tgid = { 0 };
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++)
		rc = gs_hmap_put(&by_tgid, v[i].tgid, i);
	for (size_t i = 0; i < n && !rc; i++) {
		const uint64_t *p = v[i].is_root ? NULL : gs_hmap_get(&by_tgid, v[i].ppid);

		parent[i] = p && *p != i ? (ssize_t)*p : -1;
	}
	gs_hmap_free(&by_tgid);
	return rc;
}

static void set_main(struct gs_role_proc *p, bool main)
{
	if (p->role != GS_ROLE_DATALOADER)
		p->role = main ? GS_ROLE_MAIN : GS_ROLE_OTHER;
}

/* The target root above i (bounded walk; i itself when it has no parent). */
static size_t root_of(const ssize_t *parent, size_t i)
{
	for (int depth = 0; parent[i] >= 0 && depth < 256; depth++)
		i = (size_t)parent[i];
	return i;
}

static void wrapper_main(struct gs_role_proc *v, size_t n, const size_t *root, size_t r)
{
	struct gs_role_proc *best = NULL;

	for (size_t k = 0; k < n; k++)
		if (root[k] == r && v[k].role != GS_ROLE_DATALOADER &&
		    (!best || v[k].cpu_samples > best->cpu_samples))
			best = &v[k];
	if (!best || best == &v[r] || !best->cpu_samples ||
	    v[r].cpu_samples * 20 > best->cpu_samples)
		return; /* the root itself does a real share of the work */
	set_main(&v[r], false);
	set_main(best, true);
}

int gs_proc_assign_roles(struct gs_role_proc *v, size_t n)
{
	ssize_t *parent = calloc(n ? n : 1, sizeof(*parent));
	size_t *root = calloc(n ? n : 1, sizeof(*root));
	bool *head = calloc(n ? n : 1, sizeof(*head)), *launcher = calloc(n ? n : 1, 1),
	     *has_heads = calloc(n ? n : 1, 1);
	int rc = parent && root && head && launcher && has_heads ? parents(v, n, parent) : -ENOMEM;

	for (size_t i = 0; i < n && !rc; i++)
		root[i] = root_of(parent, i);
	for (size_t i = 0; i < n && !rc; i++) {
		head[i] = gs_rank_head(&v[i].ranks, parent[i] >= 0 ? &v[parent[i]].ranks : NULL);
		for (ssize_t p = head[i] ? parent[i] : -1, depth = 0; p >= 0 && depth < 256;
		     p = parent[p], depth++)
			launcher[p] = true;
		if (head[i])
			has_heads[root[i]] = true;
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (head[i])
			set_main(&v[i], !launcher[i]);
	for (size_t i = 0; i < n && !rc; i++) {
		if (launcher[i]) {
			set_main(&v[i], false);
			v[i].ranks = GS_RANK_ENV_UNKNOWN;
		} else if (v[i].is_root && !has_heads[i]) {
			wrapper_main(v, n, root, i);
		}
	}
	free(parent);
	free(root);
	free(head);
	free(launcher);
	free(has_heads);
	return rc;
}
