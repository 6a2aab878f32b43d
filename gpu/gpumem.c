/* SPDX-License-Identifier: MIT */
/* GPU memory by CPU stack: the live set (see gpumem.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpumem.h"
#include "proc/proc.h"
#include "util/hashmap.h"
#include "util/vec.h"

static const struct gs_gpumem_fn_info fns[GS_MEMFN_NR] = {
	[GS_MEMFN_ALLOC] = { "cuMemAlloc_v2", true, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_ALLOC_PITCH] = { "cuMemAllocPitch_v2", true, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_ALLOC_MANAGED] = { "cuMemAllocManaged", true, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_ALLOC_ASYNC] = { "cuMemAllocAsync", true, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_ALLOC_POOL_ASYNC] = { "cuMemAllocFromPoolAsync", true, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_CREATE] = { "cuMemCreate", true, GS_GPUMEM_PHYS, false },
	[GS_MEMFN_ALLOC_HOST] = { "cuMemAllocHost_v2", true, GS_GPUMEM_PINNED, false },
	[GS_MEMFN_HOST_ALLOC] = { "cuMemHostAlloc", true, GS_GPUMEM_PINNED, false },
	[GS_MEMFN_FREE] = { "cuMemFree_v2", false, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_FREE_ASYNC] = { "cuMemFreeAsync", false, GS_GPUMEM_DEVICE, false },
	[GS_MEMFN_RELEASE] = { "cuMemRelease", false, GS_GPUMEM_PHYS, false },
	[GS_MEMFN_FREE_HOST] = { "cuMemFreeHost", false, GS_GPUMEM_PINNED, false },
	[GS_MEMFN_MAP] = { "cuMemMap", false, GS_GPUMEM_DEVICE, true },
	[GS_MEMFN_UNMAP] = { "cuMemUnmap", false, GS_GPUMEM_DEVICE, true },
};

const struct gs_gpumem_fn_info *gs_gpumem_fn_info(enum gs_gpumem_fn fn)
{
	return (unsigned)fn < GS_MEMFN_NR ? &fns[fn] : NULL;
}

uint64_t gs_gpumem_call_size(enum gs_gpumem_fn fn, const uint64_t args[4], uint64_t aux)
{
	uint64_t size = args[1];

	if (fn == GS_MEMFN_ALLOC_PITCH && __builtin_mul_overflow(aux, args[3], &size))
		return 0;
	return size > GS_GPUMEM_SIZE_MAX ? 0 : size;
}

/* Live bytes and allocations of one stack in one process (device memory). */
struct stack_acc {
	uint32_t stack;
	uint64_t live, live_n, alloc, alloc_n;
};

struct live_ent {
	uint64_t size;
	uint32_t acc; /* index into stacks; UINT32_MAX for pinned memory */
	uint32_t next_free;
};

/* An allocation call between its entry and its return. */
struct inflight {
	uint64_t call_ns;
	uint64_t args[4];
	uint32_t tid, stack;
	int fn; /* enum gs_gpumem_fn; -1: a free place */
};

struct mproc {
	struct gs_gpumem_proc pub;
	struct inflight calls[GS_GPUMEM_INFLIGHT_MAX];
	unsigned n_calls;
	struct gs_hmap live[GS_GPUMEM_NSPACE]; /* address or handle -> index into ents */
	struct live_ent *ents;
	size_t n_ents, cap_ents;
	uint32_t free_head;    /* UINT32_MAX: none */
	struct gs_hmap acc_of; /* stack -> index into accs */
	struct stack_acc *accs;
	size_t n_accs, cap_accs;
	bool peak_is_now; /* nothing was freed since the peak: the live set is it */
	struct gs_gpumem_stack_bytes *at_peak, *view;
	size_t n_at_peak, cap_at_peak, cap_view;
	struct gs_gpumem_point *series;
	size_t n_series, cap_series;
};

struct gs_gpumem {
	struct gs_proc_slots slots; /* struct mproc of each process, in order of first sight */
	uint64_t n_live;            /* live entries of every process */
};

struct gs_gpumem *gs_gpumem_new(void)
{
	struct gs_gpumem *m = calloc(1, sizeof(*m));

	if (m && gs_proc_slots_init(&m->slots, "gpumem", sizeof(struct mproc))) {
		free(m);
		return NULL;
	}
	return m;
}

int gs_gpumem_bind(struct gs_gpumem *m, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&m->slots, t, id);
}

static void proc_free(struct mproc *p)
{
	for (int i = 0; i < GS_GPUMEM_NSPACE; i++)
		gs_hmap_free(&p->live[i]);
	gs_hmap_free(&p->acc_of);
	free(p->ents);
	free(p->accs);
	free(p->at_peak);
	free(p->view);
	free(p->series);
}

void gs_gpumem_free(struct gs_gpumem *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->slots.n; i++)
		proc_free(m->slots.all[i]);
	gs_proc_slots_fini(&m->slots);
	free(m);
}

static struct mproc *proc_get(struct gs_gpumem *m, uint32_t tgid, bool create)
{
	struct mproc *p = gs_proc_slots_get(&m->slots, tgid, create);

	if (p && !p->pub.tgid) { /* new */
		p->pub.tgid = tgid;
		p->free_head = UINT32_MAX;
	}
	return p;
}

/* The accumulator of stack in p; past GS_GPUMEM_STACKS_MAX stacks, the
 * shared GS_GPUMEM_STACK_OTHER one.  UINT32_MAX on ENOMEM. */
static uint32_t acc_get(struct mproc *p, uint32_t stack)
{
	bool added;
	uint64_t *ix;

	if (!gs_hmap_get(&p->acc_of, stack) && p->n_accs >= GS_GPUMEM_STACKS_MAX)
		stack = GS_GPUMEM_STACK_OTHER;
	if (GS_GROW(p->accs, p->cap_accs, p->n_accs + 1) ||
	    !(ix = gs_hmap_slot(&p->acc_of, stack, &added)))
		return UINT32_MAX;
	if (added) {
		*ix = p->n_accs;
		p->accs[p->n_accs++] = (struct stack_acc){ .stack = stack };
	}
	return (uint32_t)*ix;
}

static uint64_t device_live(const struct mproc *p)
{
	return p->pub.live[GS_GPUMEM_DEVICE] + p->pub.live[GS_GPUMEM_PHYS];
}

/* One more point of device bytes over time; when full, pairs of points
 * become their larger one (peaks survive the thinning). */
static void series_add(struct mproc *p, uint64_t t_ns)
{
	size_t j = 0;

	if (p->n_series == GS_GPUMEM_SERIES_MAX) {
		for (size_t i = 0; i + 1 < p->n_series; i += 2, j++) {
			const struct gs_gpumem_point *a = &p->series[i], *b = &p->series[i + 1];

			p->series[j] = (struct gs_gpumem_point){ a->t_ns, a->bytes > b->bytes
									      ? a->bytes
									      : b->bytes };
		}
		p->n_series = j;
	}
	if (p->n_series && p->series[p->n_series - 1].t_ns == t_ns) {
		p->series[p->n_series - 1].bytes = device_live(p);
		return;
	}
	if (!GS_GROW(p->series, p->cap_series, p->n_series + 1))
		p->series[p->n_series++] = (struct gs_gpumem_point){ t_ns, device_live(p) };
}

/* A free entry of p's slab (UINT32_MAX on ENOMEM), and one given back. */
static uint32_t ent_take(struct mproc *p)
{
	uint32_t ix = p->free_head;

	if (ix != UINT32_MAX) {
		p->free_head = p->ents[ix].next_free;
		return ix;
	}
	if (p->n_ents >= UINT32_MAX - 1 || GS_GROW(p->ents, p->cap_ents, p->n_ents + 1))
		return UINT32_MAX;
	return (uint32_t)p->n_ents++;
}

static void ent_give(struct mproc *p, uint32_t ix)
{
	p->ents[ix].next_free = p->free_head;
	p->free_head = ix;
}

/* Device bytes by stack as they are now, into *out (largest first). */
static int snapshot(struct mproc *p, struct gs_gpumem_stack_bytes **out, size_t *cap, size_t *n,
		    enum gs_gpumem_view v);

int gs_gpumem_alloc(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_space sp, uint64_t addr,
		    uint64_t size, uint32_t stack, uint64_t t_ns)
{
	struct mproc *p;
	uint32_t acc = UINT32_MAX, ix;
	bool added;
	uint64_t *slot;

	if ((unsigned)sp >= GS_GPUMEM_NSPACE)
		return -EINVAL;
	if (!(p = proc_get(m, tgid, true)))
		return -ENOMEM;
	if (!size || size > GS_GPUMEM_SIZE_MAX) {
		p->pub.lost.bad_size++;
		return 0;
	}
	if (gs_hmap_get(&p->live[sp], addr)) {
		p->pub.lost.reused++; /* its free was not seen: gone */
		gs_gpumem_release(m, tgid, sp, addr, t_ns);
	}
	if (m->n_live >= GS_GPUMEM_LIVE_MAX) {
		p->pub.lost.capped++;
		return 0;
	}
	if (sp != GS_GPUMEM_PINNED && (acc = acc_get(p, stack)) == UINT32_MAX)
		return -ENOMEM;
	if ((ix = ent_take(p)) == UINT32_MAX)
		return -ENOMEM;
	if (!(slot = gs_hmap_slot(&p->live[sp], addr, &added))) {
		ent_give(p, ix);
		return -ENOMEM;
	}
	*slot = ix;
	p->ents[ix] = (struct live_ent){ .size = size, .acc = acc, .next_free = UINT32_MAX };
	m->n_live++;
	p->pub.live[sp] += size;
	if (p->pub.live[sp] > p->pub.peak[sp])
		p->pub.peak[sp] = p->pub.live[sp];
	p->pub.allocs++;
	p->pub.alloc_bytes += size;
	if (acc != UINT32_MAX) {
		struct stack_acc *a = &p->accs[acc];

		a->live += size;
		a->live_n++;
		a->alloc += size;
		a->alloc_n++;
		if (device_live(p) > p->pub.peak_device) {
			p->pub.peak_device = device_live(p);
			p->pub.peak_ns = t_ns;
			p->peak_is_now = true;
		}
		series_add(p, t_ns);
	}
	return 0;
}

int gs_gpumem_release(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_space sp, uint64_t addr,
		      uint64_t t_ns)
{
	struct mproc *p;
	struct live_ent *e;
	uint64_t ix;

	if ((unsigned)sp >= GS_GPUMEM_NSPACE)
		return -EINVAL;
	if (!(p = proc_get(m, tgid, true)))
		return -ENOMEM;
	p->pub.frees++;
	if (!gs_hmap_del(&p->live[sp], addr, &ix)) {
		p->pub.lost.unknown_frees++;
		return -ENOENT;
	}
	e = &p->ents[ix];
	if (e->acc != UINT32_MAX && p->peak_is_now) {
		/* The live set leaves its peak: keep what it held. */
		if (snapshot(p, &p->at_peak, &p->cap_at_peak, &p->n_at_peak, GS_GPUMEM_LIVE))
			return -ENOMEM; /* unchanged: the free is retried never, counted */
		p->peak_is_now = false;
	}
	p->pub.live[sp] -= e->size;
	if (e->acc != UINT32_MAX) {
		p->accs[e->acc].live -= e->size;
		p->accs[e->acc].live_n--;
		series_add(p, t_ns);
	}
	ent_give(p, (uint32_t)ix);
	m->n_live--;
	return 0;
}

int gs_gpumem_oom(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_fn fn, uint64_t size,
		  uint32_t stack, uint64_t t_ns)
{
	struct mproc *p = proc_get(m, tgid, true);

	if (!p)
		return -ENOMEM;
	if (p->pub.ooms < GS_GPUMEM_OOM_KEEP)
		p->pub.oom[p->pub.ooms] = (struct gs_gpumem_oom){
			.t_ns = t_ns, .size = size, .live = device_live(p), .stack = stack, .fn = fn
		};
	p->pub.ooms++;
	return 0;
}

int gs_gpumem_count(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_fn fn)
{
	struct mproc *p = proc_get(m, tgid, true);

	if (!p)
		return -ENOMEM;
	if (fn == GS_MEMFN_MAP)
		p->pub.maps++;
	else if (fn == GS_MEMFN_UNMAP)
		p->pub.unmaps++;
	return 0;
}

void gs_gpumem_exit(struct gs_gpumem *m, uint32_t tgid)
{
	struct mproc *p = proc_get(m, tgid, false);

	if (p)
		p->pub.exited = true;
}

size_t gs_gpumem_nprocs(const struct gs_gpumem *m)
{
	return m->slots.n;
}

static struct mproc *proc_at(const struct gs_gpumem *m, size_t i)
{
	return i < m->slots.n ? m->slots.all[i] : NULL;
}

const struct gs_gpumem_proc *gs_gpumem_proc_at(const struct gs_gpumem *m, size_t i)
{
	struct mproc *p = proc_at(m, i);

	return p ? &p->pub : NULL;
}

static int by_bytes_desc(const void *a, const void *b)
{
	const struct gs_gpumem_stack_bytes *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int snapshot(struct mproc *p, struct gs_gpumem_stack_bytes **out, size_t *cap, size_t *n,
		    enum gs_gpumem_view v)
{
	size_t k = 0;

	if (GS_GROW(*out, *cap, p->n_accs + 1))
		return -ENOMEM;
	for (size_t i = 0; i < p->n_accs; i++) {
		const struct stack_acc *a = &p->accs[i];
		uint64_t bytes = v == GS_GPUMEM_ALLOCATED ? a->alloc : a->live;

		if (bytes)
			(*out)[k++] = (struct gs_gpumem_stack_bytes){
				.stack = a->stack,
				.bytes = bytes,
				.count = v == GS_GPUMEM_ALLOCATED ? a->alloc_n : a->live_n,
			};
	}
	qsort(*out, k, sizeof(**out), by_bytes_desc);
	*n = k;
	return 0;
}

int gs_gpumem_by_stack(struct gs_gpumem *m, size_t i, enum gs_gpumem_view v,
		       const struct gs_gpumem_stack_bytes **out, size_t *n)
{
	struct mproc *p;
	int rc;

	if (!(p = proc_at(m, i)))
		return -EINVAL;
	if (v == GS_GPUMEM_AT_PEAK && !p->peak_is_now) {
		*out = p->at_peak;
		*n = p->n_at_peak;
		return 0;
	}
	rc = snapshot(p, &p->view, &p->cap_view, n, v == GS_GPUMEM_AT_PEAK ? GS_GPUMEM_LIVE : v);
	*out = p->view;
	return rc;
}

const struct gs_gpumem_point *gs_gpumem_series(const struct gs_gpumem *m, size_t i, size_t *n)
{
	struct mproc *p = proc_at(m, i);

	*n = p ? p->n_series : 0;
	return p ? p->series : NULL;
}

int gs_gpumem_call(struct gs_gpumem *m, uint32_t tgid, uint32_t tid, uint64_t call_ns,
		   enum gs_gpumem_fn fn, const uint64_t args[4], uint32_t stack)
{
	struct mproc *p;
	unsigned k, i;

	if ((unsigned)fn >= GS_MEMFN_NR || !fns[fn].alloc)
		return -EINVAL;
	if (!(p = proc_get(m, tgid, true)))
		return -ENOMEM;
	for (k = 0; k < p->n_calls && p->calls[k].tid != tid; k++)
		;
	if (k < p->n_calls) {
		p->pub.lost
		    .unmatched++; /* a thread has one call in flight: its last lost its return */
	} else if (p->n_calls < GS_GPUMEM_INFLIGHT_MAX) {
		k = p->n_calls++;
	} else { /* full: the oldest call gives way */
		for (k = 0, i = 1; i < p->n_calls; i++)
			if (p->calls[i].call_ns < p->calls[k].call_ns)
				k = i;
		p->pub.lost.unmatched++;
	}
	p->calls[k] = (struct inflight){ .call_ns = call_ns, .tid = tid, .stack = stack, .fn = fn };
	memcpy(p->calls[k].args, args, sizeof(p->calls[k].args));
	return 0;
}

int gs_gpumem_return(struct gs_gpumem *m, uint32_t tgid, const struct gs_gpumem_ret *r)
{
	struct mproc *p = proc_get(m, tgid, true);
	struct inflight c;
	uint64_t size;
	unsigned k;

	if (!p)
		return -ENOMEM;
	for (k = 0; k < p->n_calls && p->calls[k].tid != r->tid; k++)
		;
	if (k == p->n_calls || p->calls[k].call_ns != r->call_ns) {
		p->pub.lost.unmatched++;
		return -ENOENT;
	}
	c = p->calls[k];
	p->calls[k] = p->calls[--p->n_calls];
	size = gs_gpumem_call_size(c.fn, c.args, r->aux_ok ? r->aux : 0);
	if (r->result == GS_CUDA_ERROR_OUT_OF_MEMORY)
		return gs_gpumem_oom(m, tgid, c.fn, size, c.stack, r->t_ns);
	if (r->result != 0) {
		p->pub.failed++;
		return 0;
	}
	if (!r->out_ok) {
		p->pub.lost.unmatched++; /* it succeeded, but where is unknown */
		return 0;
	}
	return gs_gpumem_alloc(m, tgid, fns[c.fn].space, r->out, size, c.stack, r->t_ns);
}

int gs_gpumem_free_call(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_fn fn,
			const uint64_t args[2], uint64_t t_ns)
{
	if ((unsigned)fn >= GS_MEMFN_NR || fns[fn].alloc)
		return -EINVAL;
	if (fns[fn].counted_only)
		return gs_gpumem_count(m, tgid, fn);
	if (!args[0]) /* freeing NULL is allowed and frees nothing */
		return 0;
	return gs_gpumem_release(m, tgid, fns[fn].space, args[0], t_ns);
}
