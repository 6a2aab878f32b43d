/* SPDX-License-Identifier: MIT */
/*
 * The threads of each process in the table: one entry per (tgid, tid), at
 * a stable address from first sight to the end of the run.  The engine's
 * per-thread state (name, CPU sample count, role votes, off-CPU accounting)
 * lives in it, so no component keeps a table of threads of its own.
 */
#include <stdlib.h>

#include "proc/proc.h"
#include "util/hashmap.h"
#include "util/vec.h"

struct gs_proc_threads {
	struct gs_thread **v; /* in order of first sight */
	size_t n, cap;
	struct gs_hmap by_tid; /* tid -> index in v */
};

struct gs_thread *gs_thread_find(const struct gs_proc_table *t, uint32_t tgid, uint32_t tid)
{
	const struct gs_proc *p = gs_proc_get(t, tgid);
	const uint64_t *i;

	if (!p || !p->threads || !(i = gs_hmap_get(&p->threads->by_tid, tid)))
		return NULL;
	return p->threads->v[*i];
}

static struct gs_thread *thread_new(struct gs_proc_threads *ts, uint32_t tgid, uint32_t tid)
{
	struct gs_thread *th = calloc(1, sizeof(*th));

	if (!th || GS_GROW(ts->v, ts->cap, ts->n + 1) || gs_hmap_put(&ts->by_tid, tid, ts->n)) {
		free(th);
		return NULL;
	}
	th->tgid = tgid;
	th->tid = tid;
	th->off.pend_stack = -1;
	th->off.pend_waker = -1;
	th->off.seed_raw = -1;
	return ts->v[ts->n++] = th;
}

struct gs_thread *gs_thread_get(struct gs_proc_table *t, uint32_t tgid, uint32_t tid)
{
	struct gs_thread *th = gs_thread_find(t, tgid, tid);
	struct gs_proc *p;

	if (th || !tid)
		return th;
	if (!(p = gs_proc_table_add(t, tgid, 0)))
		return NULL;
	if (!p->threads && !(p->threads = calloc(1, sizeof(*p->threads))))
		return NULL;
	return thread_new(p->threads, tgid, tid);
}

size_t gs_thread_count(const struct gs_proc *p)
{
	return p->threads ? p->threads->n : 0;
}

struct gs_thread *gs_thread_at(const struct gs_proc *p, size_t i)
{
	return i < gs_thread_count(p) ? p->threads->v[i] : NULL;
}

void gs_proc_threads_free(struct gs_proc *p)
{
	if (!p->threads)
		return;
	for (size_t i = 0; i < p->threads->n; i++)
		free(p->threads->v[i]);
	free(p->threads->v);
	gs_hmap_free(&p->threads->by_tid);
	free(p->threads);
	p->threads = NULL;
}
