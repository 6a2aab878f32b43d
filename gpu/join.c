// SPDX-License-Identifier: MIT
/* CPU <-> GPU join: see join.h. */
#include "gpu/gpu.h"

#include <errno.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpusample/records.h"
#include "gpusample/records_codec.h"
#include "gpu/cuda_internal.h"
#include "proc/proc.h"

/* Function key of CUDA graph launches (no kernel name): 0, which no kernel
 * name hashes to in practice and which PC records never carry for a known
 * kernel. */
#define GRAPH_FN 0

/* Launches older than this before a window's start are dropped from the
 * per-function time lists (they stay in the whole-run histogram) and from
 * the correlation-id table. */
#define KEEP_NS (60ull * 1000000000ull)
/* The correlation table is compacted (aged, then capped) when it reaches
 * this many entries, then at twice what survived, at most the total cap. */
#define CORR_COMPACT_MIN 65536u
/* A kfn finds its hist entries by a linear scan up to this many, then
 * through a map: most kernels have a few launching contexts, and a map per
 * kernel would cost ~1 KB each. */
#define HIST_SCAN 8

#define NO_STACK UINT32_MAX

/* A distinct launching context: CPU stack + thread. */
struct lkey {
	uint32_t pid, stack, tid;
	gs_str thread_name, role;
};

struct launch {
	uint64_t time;
	uint32_t lkey, weight;
};

/* One (kernel function, launching context) pair of a kfn: whole-run count
 * and the rounding remainders carried between entries. */
struct hist {
	uint32_t lkey;
	uint64_t count;
	double res_s, res_ni;
};

struct join_proc;

/* Launch history of one (pid, kernel function). */
struct kfn {
	struct join_proc *proc; /* its process's state */
	struct launch *l;
	size_t n, cap, head; /* live launches are l[head..n) */
	bool unsorted;
	struct hist *h;
	size_t nh, caph;
	struct gs_kmap h_by_lkey; /* (lkey, 0, 0) -> h index, once nh > HIST_SCAN */
};

struct corr {
	uint64_t time;
	struct join_proc *proc;
	uint32_t corr, lkey;
};

struct agg {
	uint32_t stack, pid, lkey; /* lkey UINT32_MAX = none (unknown launch) */
	gs_str reason;
	int32_t device;
	uint8_t attr;
	int64_t s, ni;
	uint64_t time;
	int64_t done_s, done_ni;
};

/* Drain windows of one (pid, device). */
struct dev_window {
	uint64_t last_end;   /* end of the newest batch */
	uint64_t call_start; /* window start of the newest GetData call */
	bool open;           /* records: the newest batch's drain is not complete */
};

/* What the join keeps of one process, in its slot of the process table:
 * its share of the caps (gpu.h GS_JOIN_*), its kernels and correlation
 * ids by key (the entries themselves are in the join's run-wide lists,
 * which the total caps and the oldest-first trimming need), and its
 * devices' drain windows. */
struct join_proc {
	uint32_t kfns, corrs;
	uint32_t excess;              /* scratch of compact_corrs */
	uint64_t launches;            /* live launch history entries of its kfns */
	struct gs_kmap kfn_by_fn;     /* (function, 0, 0) -> kfns index */
	struct gs_kmap corr_by_id;    /* (correlation id, 0, 0) -> corrs index */
	struct gs_kmap window_by_dev; /* (device, 0, 0) -> windows index */
	struct dev_window *windows;
	size_t n_windows, cap_windows;
};

struct gs_join {
	struct gs_profile *p;
	uint64_t t0;

	struct lkey *lkeys;
	size_t n_lkeys, cap_lkeys;
	struct gs_kmap lkey_map; /* (pid<<32|stack, tid<<32|name, role) -> lkeys index */

	/* Per process: struct join_proc, in the process table's slots
	 * (gs_join_bind) or in a table of its own. */
	struct gs_proc_slots slots;

	struct kfn *kfns; /* every process's, for the total caps */
	size_t n_kfns, cap_kfns;

	struct corr *corrs; /* every process's, oldest first */
	size_t n_corrs, cap_corrs;
	size_t corr_compact_at;
	uint64_t latest_end, newest_launch;

	uint64_t n_launches; /* live launch history entries, all kfns */

	struct gs_kmap stack_map; /* (gpu loc, cpu stack, 0) -> combined stack */
	uint32_t unknown_loc;

	struct agg *aggs;
	size_t n_aggs, cap_aggs;
	struct gs_kmap agg_map; /* (stack<<32|reason, lkey<<32|pid, device<<32|attr) */

	struct gs_join_stats st;
};

struct gs_join *gs_join_new(struct gs_profile *p, uint64_t t0_ns)
{
	struct gs_join *j = calloc(1, sizeof(*j));

	if (j && !gs_proc_slots_init(&j->slots, "join", sizeof(struct join_proc))) {
		j->p = p;
		j->t0 = t0_ns;
		return j;
	}
	free(j);
	return NULL;
}

int gs_join_bind(struct gs_join *j, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&j->slots, t, id);
}

void gs_join_free(struct gs_join *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n_kfns; i++) {
		free(j->kfns[i].l);
		free(j->kfns[i].h);
		gs_kmap_free(&j->kfns[i].h_by_lkey);
	}
	for (size_t i = 0; i < j->slots.n; i++) {
		struct join_proc *p = j->slots.all[i];
		gs_kmap_free(&p->kfn_by_fn);
		gs_kmap_free(&p->corr_by_id);
		gs_kmap_free(&p->window_by_dev);
		free(p->windows);
	}
	gs_proc_slots_fini(&j->slots);
	free(j->kfns);
	free(j->lkeys);
	free(j->corrs);
	free(j->aggs);
	gs_kmap_free(&j->lkey_map);
	gs_kmap_free(&j->stack_map);
	gs_kmap_free(&j->agg_map);
	free(j);
}

/* ---- launches ------------------------------------------------------------ */

static int get_lkey(struct gs_join *j, const struct gs_join_launch *l, uint32_t *out)
{
	uint64_t a = (uint64_t)l->pid << 32 | l->stack;
	uint64_t b = (uint64_t)l->tid << 32 | l->thread_name;
	if (gs_kmap_get(&j->lkey_map, a, b, l->process_role, out))
		return 0;
	if (gs_grow((void **)&j->lkeys, &j->cap_lkeys, j->n_lkeys + 1, sizeof(struct lkey)))
		return -ENOMEM;
	j->lkeys[j->n_lkeys] = (struct lkey){ l->pid, l->stack, l->tid, l->thread_name,
					      l->process_role };
	*out = (uint32_t)j->n_lkeys;
	if (gs_kmap_put(&j->lkey_map, a, b, l->process_role, *out))
		return -ENOMEM;
	j->n_lkeys++;
	return 0;
}

/* pid's state; made (zeroed) with create.  NULL: none, or ENOMEM. */
static struct join_proc *join_proc(struct gs_join *j, uint32_t pid, bool create)
{
	return gs_proc_slots_get(&j->slots, pid, create);
}

/* Room for one more kernel of u's process. */
static bool kernel_room(const struct gs_join *j, const struct join_proc *u)
{
	return u->kfns < GS_JOIN_KERNELS_PER_PID && j->n_kfns < GS_JOIN_KERNELS_TOTAL;
}

static struct kfn *get_kfn(struct gs_join *j, uint32_t pid, uint64_t fn, bool create)
{
	struct join_proc *u = join_proc(j, pid, create);
	uint32_t i;

	if (!u)
		return NULL;
	if (gs_kmap_get(&u->kfn_by_fn, fn, 0, 0, &i))
		return &j->kfns[i];
	if (!create || gs_grow((void **)&j->kfns, &j->cap_kfns, j->n_kfns + 1, sizeof(struct kfn)))
		return NULL;
	memset(&j->kfns[j->n_kfns], 0, sizeof(struct kfn));
	j->kfns[j->n_kfns].proc = u;
	if (gs_kmap_put(&u->kfn_by_fn, fn, 0, 0, (uint32_t)j->n_kfns))
		return NULL;
	u->kfns++;
	return &j->kfns[j->n_kfns++];
}

static bool find_hist(const struct kfn *k, uint32_t lkey, uint32_t *i)
{
	if (k->nh > HIST_SCAN)
		return gs_kmap_get(&k->h_by_lkey, lkey, 0, 0, i);
	for (size_t x = 0; x < k->nh; x++)
		if (k->h[x].lkey == lkey)
			return *i = (uint32_t)x, true;
	return false;
}

static struct hist *get_hist(struct kfn *k, uint32_t lkey)
{
	uint32_t i;
	if (find_hist(k, lkey, &i))
		return &k->h[i];
	if (gs_grow_from((void **)&k->h, &k->caph, k->nh + 1, sizeof(struct hist), 2))
		return NULL;
	k->h[k->nh] = (struct hist){ .lkey = lkey };
	if (k->nh == HIST_SCAN) /* the map from now on, with every entry */
		for (size_t x = 0; x < k->nh; x++)
			if (gs_kmap_put(&k->h_by_lkey, k->h[x].lkey, 0, 0, (uint32_t)x))
				return NULL;
	if (k->nh >= HIST_SCAN && gs_kmap_put(&k->h_by_lkey, lkey, 0, 0, (uint32_t)k->nh))
		return NULL;
	return &k->h[k->nh++];
}

/* Drop the first n live launches of k (the oldest, in arrival order). */
static void drop_launches(struct gs_join *j, struct kfn *k, size_t n)
{
	k->head += n;
	k->proc->launches -= n;
	j->n_launches -= n;
	if (k->head > 64 && k->head * 2 > k->n) {
		memmove(k->l, k->l + k->head, (k->n - k->head) * sizeof(struct launch));
		k->n -= k->head;
		k->head = 0;
	}
}

/* Append a launch to k's time list under the history caps: past one,
 * the kernel's older half goes (or, with less than 2 live, this one is
 * not kept).  Either way the launch stays in k's whole-run histogram. */
static int push_launch(struct gs_join *j, struct kfn *k, const struct launch *ln)
{
	struct join_proc *u = k->proc;
	size_t live = k->n - k->head;
	if (live >= GS_JOIN_LAUNCHES_PER_KERNEL || u->launches >= GS_JOIN_LAUNCHES_PER_PID ||
	    j->n_launches >= GS_JOIN_LAUNCHES_TOTAL) {
		if (live < 2) {
			j->st.launches_trimmed++;
			return 0;
		}
		j->st.launches_trimmed += live / 2;
		drop_launches(j, k, live / 2);
	}
	if (gs_grow_from((void **)&k->l, &k->cap, k->n + 1, sizeof(struct launch), 2))
		return -ENOMEM;
	if (k->n > k->head && k->l[k->n - 1].time > ln->time)
		k->unsorted = true;
	k->l[k->n++] = *ln;
	u->launches++;
	j->n_launches++;
	return 0;
}

/* Compact the correlation table: ids far older than the newest drain or
 * launch go (batches or not), then the oldest of every process over 3/4
 * of its cap down to half of it, then the oldest of all over 3/4 of the
 * total cap down to half of that (both counted: exact attribution lost). */
static int compact_corrs(struct gs_join *j)
{
	uint64_t ref = j->latest_end > j->newest_launch ? j->latest_end : j->newest_launch;
	size_t w = 0;
	bool over = false;

	for (size_t u = 0; u < j->slots.n; u++) {
		struct join_proc *p = j->slots.all[u];
		p->corrs = 0;
		gs_kmap_free(&p->corr_by_id); /* rebuilt below */
	}
	for (size_t i = 0; i < j->n_corrs; i++) {
		if (ref > KEEP_NS && j->corrs[i].time + KEEP_NS < ref)
			continue;
		j->corrs[w++] = j->corrs[i];
		j->corrs[i].proc->corrs++;
	}
	j->n_corrs = w;
	for (size_t u = 0; u < j->slots.n; u++) {
		struct join_proc *p = j->slots.all[u];
		p->excess = p->corrs > GS_JOIN_CORRS_PER_PID / 4 * 3
				? p->corrs - GS_JOIN_CORRS_PER_PID / 2
				: 0;
		over |= p->excess != 0;
	}
	if (over) {
		w = 0;
		for (size_t i = 0; i < j->n_corrs; i++) {
			struct join_proc *p = j->corrs[i].proc;
			if (p->excess) {
				p->excess--;
				p->corrs--;
				j->st.corrs_capped++;
				continue;
			}
			j->corrs[w++] = j->corrs[i];
		}
		j->n_corrs = w;
	}
	if (j->n_corrs > GS_JOIN_CORRS_TOTAL / 4 * 3) {
		size_t drop = j->n_corrs - GS_JOIN_CORRS_TOTAL / 2;
		for (size_t i = 0; i < drop; i++)
			j->corrs[i].proc->corrs--;
		memmove(j->corrs, j->corrs + drop, (j->n_corrs - drop) * sizeof(struct corr));
		j->n_corrs -= drop;
		j->st.corrs_capped += drop;
	}
	for (size_t i = 0; i < j->n_corrs; i++)
		if (gs_kmap_put(&j->corrs[i].proc->corr_by_id, j->corrs[i].corr, 0, 0, (uint32_t)i))
			return -ENOMEM;
	j->corr_compact_at = j->n_corrs * 2 > CORR_COMPACT_MIN ? j->n_corrs * 2 : CORR_COMPACT_MIN;
	if (j->corr_compact_at > GS_JOIN_CORRS_TOTAL)
		j->corr_compact_at = GS_JOIN_CORRS_TOTAL;
	return 0;
}

static int add_corr(struct gs_join *j, const struct gs_join_launch *l, uint32_t lkey,
		    struct join_proc *u)
{
	int err;

	if (!j->corr_compact_at)
		j->corr_compact_at = CORR_COMPACT_MIN;
	if ((j->n_corrs >= j->corr_compact_at || u->corrs >= GS_JOIN_CORRS_PER_PID) &&
	    (err = compact_corrs(j)))
		return err;
	if (gs_grow((void **)&j->corrs, &j->cap_corrs, j->n_corrs + 1, sizeof(struct corr)))
		return -ENOMEM;
	j->corrs[j->n_corrs] = (struct corr){ l->time_ns, u, l->correlation_id, lkey };
	if (gs_kmap_put(&u->corr_by_id, l->correlation_id, 0, 0, (uint32_t)j->n_corrs))
		return -ENOMEM;
	j->n_corrs++;
	u->corrs++;
	return 0;
}

bool gs_join_launch_admit(struct gs_join *j, uint32_t pid, uint64_t function, bool graph)
{
	struct join_proc *u;

	if ((!function && !graph) || get_kfn(j, pid, graph ? GRAPH_FN : function, false))
		return true;
	if (!(u = join_proc(j, pid, true)) || kernel_room(j, u))
		return true; /* no memory: gs_join_add_launch says so */
	j->st.kernels_capped++;
	return false;
}

int gs_join_add_launch(struct gs_join *j, const struct gs_join_launch *l)
{
	if (l->stack >= j->p->n_stacks)
		return -EINVAL;
	/* A new kernel past the kernel caps: the whole launch goes, counted
	 * (gs_join_launch_admit; callers that ask first never get here). */
	if (!gs_join_launch_admit(j, l->pid, l->function, l->graph))
		return 0;
	struct join_proc *u = join_proc(j, l->pid, true);
	uint32_t lkey;
	int err = u ? get_lkey(j, l, &lkey) : -ENOMEM;
	if (err)
		return err;
	j->st.launches++;
	if (l->time_ns > j->newest_launch)
		j->newest_launch = l->time_ns;
	if (l->correlation_id && (err = add_corr(j, l, lkey, u)))
		return err;
	if (!l->function && !l->graph)
		return 0;
	/* graph launches share the function key 0 (GRAPH_FN) */
	struct kfn *k = get_kfn(j, l->pid, l->graph ? GRAPH_FN : l->function, true);
	if (!k)
		return -ENOMEM;
	uint32_t w = l->weight ? l->weight : 1;
	struct hist *h = get_hist(k, lkey);
	if (!h)
		return -ENOMEM;
	h->count += w;
	return push_launch(j, k, &(struct launch){ l->time_ns, lkey, w });
}

/* ---- output aggregation --------------------------------------------------- */

static int64_t combined_stack(struct gs_join *j, uint32_t gpu_loc, uint32_t cpu_stack)
{
	uint32_t id;
	if (gs_kmap_get(&j->stack_map, gpu_loc, cpu_stack, 0, &id))
		return id;
	uint32_t n = 1, *locs;
	if (cpu_stack == NO_STACK) {
		if (!j->unknown_loc) {
			struct gs_function f = { .name = gs_profile_intern(j->p,
									   "[unknown launch]") };
			uint32_t fid = f.name == (gs_str)-1 ? 0 : gs_profile_add_function(j->p, &f);
			struct gs_line ln = { .function = fid };
			j->unknown_loc =
			    fid ? gs_profile_add_location(j->p, 0, 0, GS_FRAME_SPECIAL, &ln, 1) : 0;
			if (!j->unknown_loc)
				return -ENOMEM;
		}
		locs = malloc(2 * sizeof(*locs));
		if (!locs)
			return -ENOMEM;
		locs[n++] = j->unknown_loc;
	} else {
		const struct gs_stack *s = &j->p->stacks[cpu_stack];
		locs = malloc((s->n + 1) * sizeof(*locs));
		if (!locs)
			return -ENOMEM;
		/* copy: stack_locs may move when the new stack is added */
		memcpy(locs + 1, &j->p->stack_locs[s->first], s->n * sizeof(*locs));
		n += s->n;
	}
	locs[0] = gpu_loc;
	int64_t st = gs_profile_add_stack(j->p, locs, n);
	free(locs);
	if (st < 0)
		return st;
	if (gs_kmap_put(&j->stack_map, gpu_loc, cpu_stack, 0, (uint32_t)st))
		return -ENOMEM;
	return st;
}

static int add_out(struct gs_join *j, const struct gs_join_batch *b, const struct gs_join_pc *pc,
		   uint32_t lkey, int attr, uint64_t s, uint64_t ni)
{
	if (!s && !ni)
		return 0;
	uint32_t cpu_stack = lkey == NO_STACK ? NO_STACK : j->lkeys[lkey].stack;
	int64_t st = combined_stack(j, pc->location, cpu_stack);
	if (st < 0)
		return (int)st;
	uint64_t ka = (uint64_t)st << 32 | pc->stall_reason;
	uint64_t kb = (uint64_t)lkey << 32 | b->pid;
	uint64_t kc = (uint64_t)(uint32_t)b->device << 32 | (uint32_t)attr;
	uint32_t i;
	if (!gs_kmap_get(&j->agg_map, ka, kb, kc, &i)) {
		if (gs_grow((void **)&j->aggs, &j->cap_aggs, j->n_aggs + 1, sizeof(struct agg)))
			return -ENOMEM;
		i = (uint32_t)j->n_aggs;
		j->aggs[i] = (struct agg){
			.stack = (uint32_t)st,
			.pid = b->pid,
			.lkey = lkey,
			.reason = pc->stall_reason,
			.device = b->device,
			.attr = (uint8_t)attr,
			.time = b->end_ns > j->t0 ? b->end_ns - j->t0 : 0,
		};
		if (gs_kmap_put(&j->agg_map, ka, kb, kc, i))
			return -ENOMEM;
		j->n_aggs++;
	}
	j->aggs[i].s += (int64_t)s;
	j->aggs[i].ni += (int64_t)ni;
	j->st.samples[attr] += s;
	j->st.not_issued[attr] += ni;
	return 0;
}

/* ---- proportional split --------------------------------------------------- */

/* Split total over n shares in proportion to c[] (sum C > 0): floors first,
 * then the remaining units (< n) to the largest fractional parts plus the
 * carried remainders res[], which are updated.  out[] sums to total. */
static void spread(uint64_t total, size_t n, const uint64_t *c, uint64_t C, double *const *res,
		   uint64_t *out, double *pri, bool *chosen)
{
	uint64_t given = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned __int128 q = (unsigned __int128)total * c[i];
		out[i] = (uint64_t)(q / C);
		pri[i] = (double)(uint64_t)(q % C) / (double)C + *res[i];
		chosen[i] = false;
		given += out[i];
	}
	for (uint64_t r = total - given; r > 0; r--) {
		size_t best = n;
		for (size_t i = 0; i < n; i++) {
			if (chosen[i])
				continue;
			if (best == n || pri[i] > pri[best] ||
			    (pri[i] == pri[best] && c[i] > c[best]))
				best = i;
		}
		chosen[best] = true;
		out[best]++;
	}
	for (size_t i = 0; i < n; i++)
		*res[i] = pri[i] - (chosen[i] ? 1.0 : 0.0);
}

struct pending {
	uint64_t fn;
	const struct gs_join_pc *pc;
};

static int cmp_pending(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;
	if (x->fn != y->fn)
		return x->fn < y->fn ? -1 : 1;
	if (x->pc->location != y->pc->location)
		return x->pc->location < y->pc->location ? -1 : 1;
	if (x->pc->stall_reason != y->pc->stall_reason)
		return x->pc->stall_reason < y->pc->stall_reason ? -1 : 1;
	return 0;
}

static int cmp_launch(const void *a, const void *b)
{
	const struct launch *x = a, *y = b;
	return x->time < y->time ? -1 : x->time > y->time;
}

/* Launch weights per hist entry of k inside [start, end]; falls back to the
 * whole-run histogram when the window holds none.  Fills idx[]/c[] with
 * hist indices and weights; returns their count. */
static size_t distribution(struct gs_join *j, struct kfn *k, uint64_t start, uint64_t end,
			   uint32_t *idx, uint64_t *c, uint64_t *C)
{
	if (k->unsorted) {
		qsort(k->l + k->head, k->n - k->head, sizeof(struct launch), cmp_launch);
		k->unsorted = false;
	}
	size_t old = 0;
	while (k->head + old < k->n && k->l[k->head + old].time + KEEP_NS < start)
		old++;
	drop_launches(j, k, old);
	memset(c, 0, k->nh * sizeof(*c));
	*C = 0;
	for (size_t i = k->head; i < k->n && k->l[i].time <= end; i++) {
		if (k->l[i].time < start)
			continue;
		uint32_t h = 0;
		if (!find_hist(k, k->l[i].lkey, &h))
			continue; /* cannot happen: every launch has its hist entry */
		c[h] += k->l[i].weight;
		*C += k->l[i].weight;
	}
	if (!*C)
		for (size_t h = 0; h < k->nh; h++) {
			c[h] = k->h[h].count;
			*C += c[h];
		}
	size_t n = 0;
	for (size_t h = 0; h < k->nh; h++)
		if (c[h]) {
			idx[n] = (uint32_t)h;
			c[n++] = c[h];
		}
	return n;
}

static int proportional(struct gs_join *j, const struct gs_join_batch *b, uint64_t start,
			struct kfn *k, const struct pending *pe, size_t npe, int attr)
{
	size_t nh = k->nh;
	uint32_t *idx = malloc(nh * sizeof(*idx));
	uint64_t *c = malloc(nh * sizeof(*c)), *out = malloc(nh * sizeof(*out));
	double **res = malloc(nh * sizeof(*res)), *pri = malloc(nh * sizeof(*pri));
	bool *chosen = malloc(nh * sizeof(*chosen));
	int err = -ENOMEM;
	if (!idx || !c || !out || !res || !pri || !chosen)
		goto out;
	uint64_t C;
	size_t n = distribution(j, k, start, b->end_ns, idx, c, &C);
	err = 0;
	for (size_t e = 0; e < npe && !err; e++) {
		const struct gs_join_pc *pc = pe[e].pc;
		for (size_t i = 0; i < n; i++)
			res[i] = &k->h[idx[i]].res_s;
		spread(pc->samples, n, c, C, res, out, pri, chosen);
		for (size_t i = 0; i < n && !err; i++)
			err = add_out(j, b, pc, k->h[idx[i]].lkey, attr, out[i], 0);
		for (size_t i = 0; i < n; i++)
			res[i] = &k->h[idx[i]].res_ni;
		spread(pc->not_issued, n, c, C, res, out, pri, chosen);
		for (size_t i = 0; i < n && !err; i++)
			err = add_out(j, b, pc, k->h[idx[i]].lkey, attr, 0, out[i]);
	}
out:
	free(idx);
	free(c);
	free(out);
	free(res);
	free(pri);
	free(chosen);
	return err;
}

/* ---- batches -------------------------------------------------------------- */

static struct dev_window *dev_window(struct gs_join *j, uint32_t pid, int32_t device)
{
	struct join_proc *u = join_proc(j, pid, true);
	uint32_t i;

	if (!u)
		return NULL;
	if (!gs_kmap_get(&u->window_by_dev, (uint32_t)device, 0, 0, &i)) {
		if (gs_grow((void **)&u->windows, &u->cap_windows, u->n_windows + 1,
			    sizeof(*u->windows)))
			return NULL;
		i = (uint32_t)u->n_windows++;
		u->windows[i] = (struct dev_window){ 0, 0, false };
		if (gs_kmap_put(&u->window_by_dev, (uint32_t)device, 0, 0, i))
			return NULL;
	}
	return &u->windows[i];
}

static int window_start(struct gs_join *j, const struct gs_join_batch *b, uint64_t *start)
{
	struct dev_window *w = dev_window(j, b->pid, b->device);
	if (!w)
		return -ENOMEM;
	if (b->same_drain)
		*start = w->call_start;
	else if (b->start_ns)
		*start = b->start_ns;
	else
		*start = w->last_end < b->end_ns ? w->last_end : 0;
	w->call_start = *start;
	if (b->end_ns > w->last_end)
		w->last_end = b->end_ns;
	if (b->end_ns > j->latest_end)
		j->latest_end = b->end_ns;
	return 0;
}

int gs_join_add_pc_batch(struct gs_join *j, const struct gs_join_batch *b,
			 const struct gs_join_pc *pcs, size_t n)
{
	uint64_t start;
	int err = window_start(j, b, &start);
	if (err || !n)
		return err;
	struct pending *pe = malloc(n * sizeof(*pe));
	if (!pe)
		return -ENOMEM;
	struct join_proc *u = join_proc(j, b->pid, false); /* made by window_start */
	size_t npe = 0;
	for (size_t i = 0; i < n && !err; i++) {
		uint32_t ci;
		if (pcs[i].correlation_id && u &&
		    gs_kmap_get(&u->corr_by_id, pcs[i].correlation_id, 0, 0, &ci)) {
			err = add_out(j, b, &pcs[i], j->corrs[ci].lkey, GS_JOIN_EXACT,
				      pcs[i].samples, pcs[i].not_issued);
			continue;
		}
		pe[npe++] = (struct pending){ pcs[i].function, &pcs[i] };
	}
	if (!err)
		qsort(pe, npe, sizeof(*pe), cmp_pending);
	for (size_t g = 0; g < npe && !err;) {
		size_t e = g;
		while (e < npe && pe[e].fn == pe[g].fn)
			e++;
		struct kfn *k = pe[g].fn ? get_kfn(j, b->pid, pe[g].fn, false) : NULL;
		struct kfn *gk = get_kfn(j, b->pid, GRAPH_FN, false);
		if (k && k->nh)
			err = proportional(j, b, start, k, pe + g, e - g, GS_JOIN_PROPORTIONAL);
		else if (gk && gk->nh)
			err = proportional(j, b, start, gk, pe + g, e - g, GS_JOIN_GRAPH);
		else
			for (size_t x = g; x < e && !err; x++)
				err = add_out(j, b, pe[x].pc, NO_STACK, GS_JOIN_UNKNOWN,
					      pe[x].pc->samples, pe[x].pc->not_issued);
		g = e;
	}
	free(pe);
	return err;
}

/* ---- emit ----------------------------------------------------------------- */

static const char *const attr_name[4] = { "exact", "proportional", "unknown", "graph" };

int gs_join_emit(struct gs_join *j, struct gs_join_stats *st)
{
	gs_str attr[4];
	for (int i = 0; i < 4; i++)
		if ((attr[i] = gs_profile_intern(j->p, attr_name[i])) == (gs_str)-1)
			return -ENOMEM;
	for (size_t i = 0; i < j->n_aggs; i++) {
		struct agg *a = &j->aggs[i];
		int64_t s = a->s - a->done_s, ni = a->ni - a->done_ni;
		if (!s && !ni)
			continue;
		struct gs_sample smp = {
			.stack = a->stack,
			.time_ns = a->time,
		};
		struct gs_sample_ctx c = {
			.pid = a->pid,
			.cuda_stall_reason = a->reason,
			.gpu_attribution = attr[a->attr],
			.cuda_device = a->device,
		};
		smp.values[GS_V_GPU_SAMPLES] = s;
		smp.values[GS_V_GPU_NOT_ISSUED] = ni;
		if (a->lkey != NO_STACK) {
			const struct lkey *k = &j->lkeys[a->lkey];
			c.tid = k->tid;
			c.thread_name = k->thread_name;
			c.process_role = k->role;
		}
		int err = gs_profile_add_sample(j->p, &smp, &c);
		if (err)
			return err;
		a->done_s = a->s;
		a->done_ni = a->ni;
		j->st.emitted++;
		if (s)
			j->p->default_sample_type = GS_V_GPU_SAMPLES;
	}
	if (st)
		*st = j->st;
	return 0;
}

void gs_join_stats(const struct gs_join *j, struct gs_join_stats *st)
{
	*st = j->st;
}

/* ---- wire records --------------------------------------------------------- */

int gs_join_pc_batch_record(struct gs_join *j, struct gs_cuda *c, const struct gs_gpu_pc_batch *rec,
			    size_t size)
{
	struct gs_gpu_rec v;

	if (gs_gpu_rec_decode_as(rec, size, GS_REC_GPU_PC_BATCH, &v))
		return -EINVAL;
	return gs_join_pc_batch(j, c, &v.batch);
}

int gs_join_pc_batch(struct gs_join *j, struct gs_cuda *c, const struct gs_rec_pc_batch_view *v)
{
	int err;
	const struct gs_gpu_pc_batch *rec = v->b;
	const struct gs_gpu_pc *pcs = v->pcs;
	const struct gs_gpu_stall_count *counts = v->counts;
	const char *names = v->names;
	uint32_t pid = rec->gpu.tgid;
	int32_t device = (int32_t)rec->gpu.device;
	if (rec->total_samples || rec->dropped_samples || rec->non_user_samples)
		gs_cuda_add_counts(c, pid, device, rec->total_samples, rec->dropped_samples,
				   rec->non_user_samples);

	/* at most one output entry per (PC, count) pair; PCs may share counts */
	size_t cap = 1;
	for (uint32_t i = 0; i < rec->n_pcs; i++)
		cap += pcs[i].n_counts;
	struct gs_join_pc *out = malloc(cap * sizeof(*out));
	struct gs_cuda_stall_in *in = malloc(cap * sizeof(*in));
	struct gs_cuda_stall_out *folded = malloc(cap * sizeof(*folded));
	size_t n = 0;
	err = out && in && folded ? 0 : -ENOMEM;
	bool serialized = rec->flags & GS_GPU_BATCH_SERIALIZED;
	for (uint32_t i = 0; i < rec->n_pcs && !err; i++) {
		const struct gs_gpu_pc *pc = &pcs[i];
		const char *name = names + pc->name_off;
		uint32_t loc = gs_cuda_location_pid(c, pid, pc->cubin_crc, name, pc->pc_offset);
		if (!loc) {
			err = -ENOMEM;
			break;
		}
		for (uint32_t k = 0; k < pc->n_counts; k++)
			in[k] = (struct gs_cuda_stall_in){ counts[pc->first_count + k].reason_index,
							   counts[pc->first_count + k].samples };
		size_t nf;
		bool unannounced = gs_cuda_cubin_unannounced(c, pc->cubin_crc);
		err = gs_cuda_fold_stalls(c, pid, rec->gpu.ctx_uid, in, pc->n_counts, folded, cap,
					  &nf);
		for (size_t k = 0; k < nf && unannounced; k++)
			j->st.unannounced += folded[k].samples;
		for (size_t k = 0; k < nf && !err; k++)
			out[n++] = (struct gs_join_pc){
				.location = loc,
				.function = pc->name_hash,
				.correlation_id = serialized ? pc->correlation_id : 0,
				.stall_reason = folded[k].reason,
				.samples = folded[k].samples,
				.not_issued = folded[k].not_issued,
			};
	}
	if (!err) {
		/* A drain pages through GetData until remainingNumPcs is 0
		 * (GS_GPU_BATCH_LAST); every page and call of it shares one
		 * window.  A lost LAST record only merges two windows. */
		struct dev_window *w = dev_window(j, pid, device);
		struct gs_join_batch b = {
			.pid = pid,
			.device = device,
			.end_ns = rec->hdr.ktime_ns,
			.same_drain = w && w->open,
		};
		err = w ? gs_join_add_pc_batch(j, &b, out, n) : -ENOMEM;
		if (!err)
			w->open = !(rec->flags & GS_GPU_BATCH_LAST);
	}
	free(out);
	free(in);
	free(folded);
	return err;
}

int gs_join_launch_record(struct gs_join *j, const struct gs_gpu_launch *rec, uint32_t stack,
			  gs_str thread_name, gs_str process_role)
{
	struct gs_join_launch l = {
		.pid = rec->gpu.tgid,
		.tid = rec->gpu.tid,
		.correlation_id = rec->correlation_id,
		.function = rec->name_hash,
		.time_ns = rec->hdr.ktime_ns,
		.stack = stack,
		.weight = rec->sample_every ? rec->sample_every : 1,
		.thread_name = thread_name,
		.process_role = process_role,
		.graph = rec->cbid == GS_CBID_GRAPH_LAUNCH ||
			 rec->cbid == GS_CBID_GRAPH_LAUNCH_PTSZ,
	};
	return gs_join_add_launch(j, &l);
}
