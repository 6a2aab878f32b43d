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
#include "util/clock.h"
#include "util/hashmap.h"
#include "util/vec.h"

/* Executable ranges asked of the kernel to prove a snapshot current: a
 * process with more is re-read instead (torch: ~400). */
#define EXEC_RANGES_MAX 4096

/* An entry: the process, and proc/'s state of its maps. */
struct entry {
	struct gs_proc p; /* first: an entry is freed as its gs_proc */
	uint64_t read_ns; /* the last read, or proof the snapshot was current */
	uint64_t miss_ns; /* GS_MAPS_CODE_MISS's back-off now (0: not yet) */
	uint64_t addr_ns; /* the last GS_MAPS_ADDR_MISS or GS_MAPS_NOW read */
	uint32_t n_files; /* file-backed executable mappings at the last read */
	uint32_t n_found; /* code-miss re-reads that found new ones */
	bool announcing;  /* maps_changed calls under way */
};

struct gs_proc_table {
	struct gs_proc_handler h[GS_PROC_MAX_HANDLERS];
	int n_handlers;
	bool probes;     /* some handler has probe: objects needed */
	bool reads_maps; /* probes, or some handler takes maps_changed */
	struct gs_elf_cache *elf;
	struct gs_proc_range *ranges; /* EXEC_RANGES_MAX, for the proofs */
	struct gs_proc **procs;       /* in order of first sight */
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
	free(t->ranges);
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
	t->reads_maps |= t->probes || h->maps_changed != NULL;
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
	struct entry *e = calloc(1, sizeof(*e));
	struct gs_proc *p = e ? &e->p : NULL;

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
	/* a handler may have the maps re-read meanwhile: this one stays */
	struct gs_proc_maps *m = p->maps ? gs_proc_maps_get(p->maps) : NULL;

	for (size_t i = 0; m && t->probes && i < m->n; i++) {
		const struct gs_maps_line *l = &m->m[i];
		struct gs_elf_obj *o;

		if (!l->path || l->path[0] != '/' || !l->inode || l->offset ||
		    strstr(l->path, " (deleted)") || gs_elf_get_mapped(t->elf, p->tgid, l, &o))
			continue;
		for (int k = 0; k < t->n_handlers; k++)
			if (t->h[k].probe && t->h[k].attach && claims(t, k, o))
				t->h[k].attach(t->h[k].ctx, p, o, l);
	}
	gs_proc_maps_put(m);
}

static struct entry *entry_of(struct gs_proc *p)
{
	return (struct entry *)p;
}

/* File-backed executable mappings: what code-miss re-reads look for. */
static uint32_t count_files(const struct gs_proc_maps *m)
{
	uint32_t n = 0;

	for (size_t i = 0; m && i < m->n; i++)
		n += m->m[i].exec && m->m[i].inode && m->m[i].path && m->m[i].path[0] == '/';
	return n;
}

static void attach_all(struct gs_proc_table *t, struct gs_proc *p)
{
	if (t->reads_maps) {
		gs_proc_maps_put(p->maps);
		p->maps = NULL;
		gs_proc_maps_read(p->tgid, &p->maps); /* gone or unreadable: no objects */
		entry_of(p)->read_ns = gs_mono_ns();
		entry_of(p)->n_files = count_files(p->maps);
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
	/* made by gs_proc_table_slot, or a pid the kernel handed out again
	 * after its process exited: the record gives its parent */
	if (!c->announced || c->exited)
		set_parent(t, c, ppid);
	if (c->exited) { /* another process now: another image, alive */
		c->exited = false;
		c->image++;
	}
	c->announced = true;
	/* Same address space at fork: the parent's snapshot is the child's,
	 * also for a child first seen by its samples before this record. */
	if (parent && parent->maps && parent != c) {
		gs_proc_maps_put(c->maps);
		c->maps = gs_proc_maps_get(parent->maps);
		entry_of(c)->read_ns = gs_mono_ns();
		entry_of(c)->n_files = entry_of(parent)->n_files;
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

int gs_proc_table_retire(struct gs_proc_table *t, uint32_t tgid)
{
	struct gs_proc *p = gs_proc_get(t, tgid);

	if (!p || !p->announced)
		return -ENOENT;
	if (!p->exited)
		return -EBUSY;
	for (int k = t->n_handlers; k-- > 0;)
		if (t->h[k].retire)
			t->h[k].retire(t->h[k].ctx, p);
	gs_proc_maps_put(p->maps);
	p->maps = NULL;
	return 0;
}

/* ---- re-reads of the maps ------------------------------------------------ */

static bool same_line(const struct gs_maps_line *a, const struct gs_maps_line *b)
{
	return a->start == b->start && a->end == b->end && a->offset == b->offset &&
	       a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && a->exec == b->exec &&
	       (a->path && b->path ? !strcmp(a->path, b->path) : a->path == b->path);
}

/* The mappings of a not in b (both ascending by start) into out[]. */
static size_t only_in(const struct gs_proc_maps *a, const struct gs_proc_maps *b,
		      const struct gs_maps_line **out)
{
	size_t n = 0, j = 0;

	for (size_t i = 0; a && i < a->n; i++) {
		while (b && j < b->n && b->m[j].start < a->m[i].start)
			j++;
		if (!b || j == b->n || !same_line(&a->m[i], &b->m[j]))
			out[n++] = &a->m[i];
	}
	return n;
}

static void announce(struct gs_proc_table *t, struct entry *e, struct gs_proc_maps_change *ch)
{
	e->announcing = true;
	for (int k = 0; k < t->n_handlers; k++)
		if (t->h[k].maps_changed)
			t->h[k].maps_changed(t->h[k].ctx, &e->p, ch);
	e->announcing = false;
}

/* Read the maps, diff, tell the handlers.  *found: the read found other
 * file-backed code (its count changed).  1 told, 0 nothing differed. */
static int reread(struct gs_proc_table *t, struct entry *e, unsigned why, bool *found)
{
	struct gs_proc_maps *old = e->p.maps, *snap;
	struct gs_proc_maps_change ch = { .why = why };
	const struct gs_maps_line **diff;
	uint32_t before = e->n_files;
	int err = gs_proc_maps_read(e->p.tgid, &snap);

	if (err)
		return err;
	if (!snap->n) { /* a zombie: the last snapshot stays */
		gs_proc_maps_put(snap);
		return -ESRCH;
	}
	diff = malloc((snap->n + (old ? old->n : 0)) * sizeof(*diff));
	if (!diff) {
		gs_proc_maps_put(snap);
		return -ENOMEM;
	}
	e->read_ns = gs_mono_ns();
	e->n_files = count_files(snap);
	*found = e->n_files != before;
	e->p.maps = snap;
	ch.added = diff;
	ch.n_added = only_in(snap, old, diff);
	ch.removed = diff + ch.n_added;
	ch.n_removed = only_in(old, snap, diff + ch.n_added);
	err = ch.n_added || ch.n_removed || GS_MAPS_WHY(why) == GS_MAPS_NOW;
	if (err)
		announce(t, e, &ch);
	free(diff);
	gs_proc_maps_put(old); /* after the handlers: ch points into it */
	return err;
}

/* Whether the kernel's executable mappings of p (one PROCMAP_QUERY each)
 * are the snapshot's: then a PC outside these is outside those, and a
 * re-read would find the same code.  Unsure (an old kernel, too many): no. */
static bool exec_unchanged(struct gs_proc_table *t, const struct gs_proc *p)
{
	const struct gs_proc_maps *m = p->maps;
	int n, k = 0;

	if (!t->ranges && !(t->ranges = calloc(EXEC_RANGES_MAX, sizeof(*t->ranges))))
		return false;
	if ((n = gs_proc_exec_ranges(p->tgid, t->ranges, EXEC_RANGES_MAX)) < 0)
		return false;
	for (size_t i = 0; i < m->n; i++) {
		if (!m->m[i].exec || m->m[i].start >> 63) /* [vsyscall]: not in the answer */
			continue;
		if (k == n || t->ranges[k].start != m->m[i].start ||
		    t->ranges[k].end != m->m[i].end)
			return false;
		k++;
	}
	return k == n;
}

/* Whether the kernel's mapping at addr (one PROCMAP_QUERY) is not the
 * snapshot's there.  A kernel that cannot say: yes. */
static bool differs_at(const struct gs_proc *p, uint64_t addr)
{
	const struct gs_maps_line *m = gs_proc_maps_find(p->maps, addr);
	struct gs_maps_line v;
	int rc = gs_proc_vma_at(p->tgid, addr, &v);

	if (rc == -ENOENT) /* no mapping there: one went, or nothing to find */
		return m != NULL;
	return rc || !m || m->start != v.start || m->end != v.end || m->inode != v.inode ||
	       m->dev_major != v.dev_major || m->dev_minor != v.dev_minor || m->exec != v.exec ||
	       (v.inode && m->offset != v.offset);
}

/* After a code-miss re-read (or the proof that one would find nothing):
 * back off while re-reads find nothing new. */
static void back_off(struct entry *e, bool found_new)
{
	if (found_new && e->n_found < GS_MAPS_FAST_FINDS)
		e->n_found++;
	uint64_t min = e->n_found < GS_MAPS_FAST_FINDS ? GS_MAPS_MISS_MIN_NS : GS_MAPS_MISS_SLOW_NS;
	uint64_t twice = e->miss_ns * 2;

	e->miss_ns = found_new                     ? min
		     : twice > GS_MAPS_MISS_MAX_NS ? GS_MAPS_MISS_MAX_NS
		     : twice < min                 ? min
						   : twice;
}

static int code_miss(struct gs_proc_table *t, struct entry *e, unsigned why)
{
	bool found = false;
	int rc;

	if (!e->miss_ns)
		e->miss_ns = GS_MAPS_MISS_MIN_NS;
	if (gs_mono_ns() - e->read_ns < e->miss_ns)
		return -EAGAIN;
	if (exec_unchanged(t, &e->p)) {
		e->read_ns = gs_mono_ns();
		back_off(e, false);
		return 0;
	}
	if ((rc = reread(t, e, why, &found)) >= 0)
		back_off(e, found);
	return rc;
}

int gs_proc_maps_reread(struct gs_proc_table *t, uint32_t tgid, unsigned why, uint64_t addr)
{
	struct gs_proc *p = gs_proc_get(t, tgid);
	struct entry *e = p ? entry_of(p) : NULL;
	bool found;

	if (!p || p->exited)
		return -ESRCH;
	if (e->announcing) /* its handlers are being told of the last read */
		return 0;
	if (!p->maps) /* never read, or unreadable so far */
		return reread(t, e, why, &found);
	switch (GS_MAPS_WHY(why)) {
	case GS_MAPS_CODE_MISS:
		return code_miss(t, e, why);
	case GS_MAPS_ADDR_MISS:
		if (e->addr_ns && gs_mono_ns() - e->addr_ns < GS_MAPS_ADDR_MIN_NS)
			return -EAGAIN;
		if (!differs_at(p, addr)) /* leaves the rate limit alone */
			return 0;
		break;
	case GS_MAPS_CHECK:
		if (exec_unchanged(t, p)) {
			e->read_ns = gs_mono_ns();
			return 0;
		}
		return reread(t, e, why, &found);
	case GS_MAPS_NOW:
		break;
	default:
		return -EINVAL;
	}
	e->addr_ns = gs_mono_ns();
	return reread(t, e, why, &found);
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

int gs_proc_slots_init_handler(struct gs_proc_slots *s, const struct gs_proc_handler *h,
			       size_t size)
{
	*s = (struct gs_proc_slots){ .t = gs_proc_table_new(NULL), .own = true, .size = size };
	if (!s->t || gs_proc_register(s->t, h) < 0) {
		gs_proc_slots_fini(s);
		return -ENOMEM;
	}
	return 0;
}

int gs_proc_slots_init(struct gs_proc_slots *s, const char *name, size_t size)
{
	const struct gs_proc_handler h = { .name = name };

	return gs_proc_slots_init_handler(s, &h, size);
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
