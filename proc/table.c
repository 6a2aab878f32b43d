/* SPDX-License-Identifier: MIT */
/*
 * The one table of processes: an entry per tgid (stable pointers, kept to
 * the end of the run so that samples of exited processes still find their
 * handlers' state) and the dispatch of process events to the handlers.
 * Not thread-safe: the session thread drives it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "proc/proc.h"
#include "util/hashmap.h"
#include "util/vec.h"

struct gs_proc_table {
	struct gs_proc_handler h[GS_PROC_MAX_HANDLERS];
	int n_handlers;
	bool probes; /* some handler has probe: snapshots and objects needed */
	struct gs_elf_cache *elf;
	struct gs_proc **procs; /* in order of first sight */
	size_t n, cap;
	struct gs_hmap by_tgid; /* tgid -> index in procs */
	struct gs_hmap probed;  /* gs_elf_obj.id << 8 | handler -> 1 + claimed */
};

struct gs_proc_table *gs_proc_table_new(struct gs_elf_cache *elf)
{
	struct gs_proc_table *t = calloc(1, sizeof(*t));

	if (t && elf)
		t->elf = gs_elf_cache_ref(elf);
	return t;
}

void gs_proc_table_free(struct gs_proc_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		for (int k = 0; k < t->n_handlers; k++)
			if (t->h[k].release)
				t->h[k].release(t->h[k].ctx, t->procs[i]);
		gs_proc_maps_put(t->procs[i]->maps);
		gs_proc_threads_free(t->procs[i]);
		free(t->procs[i]);
	}
	free(t->procs);
	gs_hmap_free(&t->by_tgid);
	gs_hmap_free(&t->probed);
	gs_elf_cache_put(t->elf);
	free(t);
}

int gs_proc_register(struct gs_proc_table *t, const struct gs_proc_handler *h)
{
	if (t->n)
		return -EBUSY;
	if (t->n_handlers == GS_PROC_MAX_HANDLERS)
		return -ENOSPC;
	t->h[t->n_handlers] = *h;
	t->probes |= h->probe != NULL && t->elf != NULL;
	return t->n_handlers++;
}

struct gs_proc *gs_proc_get(const struct gs_proc_table *t, uint32_t tgid)
{
	uint64_t *v = gs_hmap_get(&t->by_tgid, tgid);

	return v ? t->procs[*v] : NULL;
}

size_t gs_proc_count(const struct gs_proc_table *t)
{
	return t->n;
}

struct gs_proc *gs_proc_at(const struct gs_proc_table *t, size_t i)
{
	return i < t->n ? t->procs[i] : NULL;
}

const char *gs_proc_role_name(uint8_t role)
{
	if (role == GS_ROLE_DATALOADER)
		return "dataloader";
	return role == GS_ROLE_MAIN ? "main" : "other";
}

/* Before the first event only: what a process inherits from its parent. */
static void set_parent(struct gs_proc_table *t, struct gs_proc *p, uint32_t ppid)
{
	struct gs_proc *parent = ppid ? gs_proc_get(t, ppid) : NULL; /* 0: unknown */

	if (parent == p)
		parent = NULL;
	p->ppid = ppid;
	p->root = parent ? parent->root : p->tgid;
	p->ranks = parent ? parent->ranks : GS_RANK_ENV_UNKNOWN; /* fork shares the environment */
}

/* The ranks of p's image.  Unreadable at first sight (gone, or hidden):
 * what it inherited stays right; after an exec it is unknown. */
static void read_ranks(struct gs_proc *p, bool exec)
{
	struct gs_rank_env r;

	if (!gs_proc_rank_env(p->tgid, &r) || exec)
		p->ranks = r;
}

/* A new entry (not yet announced to the handlers). */
static struct gs_proc *proc_new(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid)
{
	struct gs_proc *p = calloc(1, sizeof(*p));

	if (!p || GS_GROW(t->procs, t->cap, t->n + 1) || gs_hmap_put(&t->by_tgid, tgid, t->n)) {
		free(p);
		return NULL;
	}
	p->tgid = tgid;
	t->procs[t->n++] = p; /* first: ppid may be tgid itself (0 for 0) */
	set_parent(t, p, ppid);
	return p;
}

/* Does handler k claim o?  Asked once per (object, handler). */
static bool claims(struct gs_proc_table *t, int k, const struct gs_elf_obj *o)
{
	bool added;
	uint64_t *v = gs_hmap_slot(&t->probed, (uint64_t)o->id << 8 | (unsigned)k, &added);

	if (!v)
		return false;
	if (added)
		*v = 1 + (t->h[k].probe(t->h[k].ctx, o) > 0);
	return *v == 2;
}

/* Each mapped file once (its offset-0 mapping), to the handlers that claim
 * its object. */
static void attach_objects(struct gs_proc_table *t, struct gs_proc *p)
{
	const struct gs_proc_maps *m = p->maps;

	for (size_t i = 0; m && i < m->n; i++) {
		const struct gs_maps_line *l = &m->m[i];
		struct gs_elf_obj *o;

		if (!l->path || l->path[0] != '/' || !l->inode || l->offset ||
		    strstr(l->path, " (deleted)") || gs_elf_get_mapped(t->elf, p->tgid, l, &o))
			continue;
		for (int k = 0; k < t->n_handlers; k++)
			if (t->h[k].probe && t->h[k].attach && claims(t, k, o))
				t->h[k].attach(t->h[k].ctx, p, o, l);
	}
}

static void attach_all(struct gs_proc_table *t, struct gs_proc *p)
{
	if (t->probes) {
		gs_proc_maps_put(p->maps);
		p->maps = NULL;
		gs_proc_maps_read(p->tgid, &p->maps); /* gone or unreadable: no objects */
	}
	for (int k = 0; k < t->n_handlers; k++)
		if (t->h[k].attach)
			t->h[k].attach(t->h[k].ctx, p, NULL, NULL);
	attach_objects(t, p);
}

static void detach_all(struct gs_proc_table *t, struct gs_proc *p, bool exec)
{
	for (int k = t->n_handlers; k-- > 0;)
		if (t->h[k].detach)
			t->h[k].detach(t->h[k].ctx, p, exec);
}

struct gs_proc *gs_proc_table_seen(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid)
{
	struct gs_proc *p = gs_proc_get(t, tgid);

	if (p && p->announced)
		return p;
	if (!p && !(p = proc_new(t, tgid, ppid)))
		return NULL;
	if (!p->announced) /* made by gs_proc_table_slot: now its parent is known */
		set_parent(t, p, ppid);
	p->announced = true;
	read_ranks(p, false);
	attach_all(t, p);
	return p;
}

struct gs_proc *gs_proc_table_add(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid)
{
	struct gs_proc *p = gs_proc_get(t, tgid);

	if (!p)
		return proc_new(t, tgid, ppid);
	if (!p->announced)
		set_parent(t, p, ppid);
	return p;
}

void **gs_proc_table_slot(struct gs_proc_table *t, uint32_t tgid, int id, bool create)
{
	struct gs_proc *p = gs_proc_get(t, tgid);

	if (id < 0 || id >= t->n_handlers || (!p && (!create || !(p = proc_new(t, tgid, 0)))))
		return NULL;
	return &p->slot[id];
}

struct gs_proc *gs_proc_table_fork(struct gs_proc_table *t, uint32_t ppid, uint32_t child)
{
	struct gs_proc *c = gs_proc_get(t, child), *parent = gs_proc_get(t, ppid);

	if (!c && !(c = proc_new(t, child, ppid)))
		return NULL;
	if (!c->announced) /* made by gs_proc_table_slot: the record gives its parent */
		set_parent(t, c, ppid);
	c->announced = true;
	/* Same address space at fork: the parent's snapshot is the child's,
	 * also for a child first seen by its samples before this record. */
	if (parent && parent->maps && parent != c) {
		gs_proc_maps_put(c->maps);
		c->maps = gs_proc_maps_get(parent->maps);
	}
	for (int k = 0; k < t->n_handlers; k++)
		if (t->h[k].fork)
			t->h[k].fork(t->h[k].ctx, parent, c);
	return c;
}

struct gs_proc *gs_proc_table_exec(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid)
{
	struct gs_proc *p = gs_proc_table_seen(t, tgid, ppid);

	if (!p)
		return NULL;
	detach_all(t, p, true);
	p->image++;
	p->exited = false;
	read_ranks(p, true);
	attach_all(t, p);
	return p;
}

void gs_proc_table_exit(struct gs_proc_table *t, uint32_t tgid)
{
	struct gs_proc *p = gs_proc_get(t, tgid);

	if (!p || p->exited || !p->announced) /* unannounced: no handler attached */
		return;
	p->exited = true;
	detach_all(t, p, false);
}

void gs_proc_table_tick(struct gs_proc_table *t)
{
	for (int k = 0; k < t->n_handlers; k++)
		if (t->h[k].tick)
			t->h[k].tick(t->h[k].ctx);
}

void gs_proc_table_report(struct gs_proc_table *t, struct gs_profile *prof)
{
	for (int k = 0; k < t->n_handlers; k++)
		if (t->h[k].report)
			t->h[k].report(t->h[k].ctx, prof);
}

/* A state is its index in all[] followed by the component's block. */
struct slot_state {
	size_t idx;
	max_align_t data[];
};

static struct slot_state *state_of(void *data)
{
	return (struct slot_state *)((char *)data - offsetof(struct slot_state, data));
}

int gs_proc_slots_init(struct gs_proc_slots *s, const char *name, size_t size)
{
	const struct gs_proc_handler h = { .name = name };

	*s = (struct gs_proc_slots){ .t = gs_proc_table_new(NULL), .own = true, .size = size };
	if (!s->t || gs_proc_register(s->t, &h) < 0) {
		gs_proc_slots_fini(s);
		return -ENOMEM;
	}
	return 0;
}

int gs_proc_slots_bind(struct gs_proc_slots *s, struct gs_proc_table *t, int id)
{
	if (s->n)
		return -EBUSY;
	if (s->own)
		gs_proc_table_free(s->t);
	s->t = t;
	s->id = id;
	s->own = false;
	return 0;
}

void *gs_proc_slots_get(struct gs_proc_slots *s, uint32_t tgid, bool create)
{
	void **slot = gs_proc_table_slot(s->t, tgid, s->id, create);
	struct slot_state *st;

	if (!slot || *slot || !create)
		return slot ? *slot : NULL;
	if (GS_GROW(s->all, s->cap, s->n + 1) || !(st = calloc(1, sizeof(*st) + s->size)))
		return NULL;
	st->idx = s->n;
	s->all[s->n++] = st->data;
	return *slot = st->data;
}

void gs_proc_slots_drop(struct gs_proc_slots *s, uint32_t tgid)
{
	void **slot = gs_proc_table_slot(s->t, tgid, s->id, false);
	struct slot_state *st;

	if (!slot || !*slot)
		return;
	st = state_of(*slot);
	*slot = NULL;
	s->all[st->idx] = s->all[--s->n]; /* the last one moves into its place */
	state_of(s->all[st->idx])->idx = st->idx;
	free(st);
}

void gs_proc_slots_fini(struct gs_proc_slots *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(state_of(s->all[i]));
	free(s->all);
	if (s->own)
		gs_proc_table_free(s->t);
	*s = (struct gs_proc_slots){ 0 };
}
