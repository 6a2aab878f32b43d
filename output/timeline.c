// SPDX-License-Identifier: MIT
/*
 * The wall-clock timeline shared by the speedscope and trace writers: CPU
 * samples grouped per thread in time order, and each thread's samples laid
 * on one axis from the profile's start (time_ns).
 *
 * Placement: an off-CPU sample covers [time_ns, time_ns + offcpu) exactly
 * (time_ns is its switch-out); a CPU sample at tick t covers the period
 * centred on t, [t - w/2, t + w/2), w = its cpu ns.  Positions stay true:
 * a sample that starts inside the one before (ticks jitter; off-CPU
 * durations are scaled when switches are sampled) cuts that one short; a
 * gap shorter than half a period is closed by extending the sample before,
 * so runs of one stack stay one slice.  Samples with the same start (pprof
 * files read back have no times, all 0) lie end to end instead.
 *
 * Lanes: a thread is a lane, except the exited DataLoader workers of a
 * parent that had GS_TL_MERGE_MIN or more of them (workers re-created each
 * epoch): those share lanes by slot, the way they ran (a worker takes the
 * lowest slot free when its first sample comes; slot k, thread j of a
 * worker is one lane), and the threads of one process and name when there
 * are GS_TL_MERGE_MIN or more (a DataLoader's pin-memory and queue feeder
 * threads, started again each epoch) likewise, so the timelines grow with
 * what runs at a time, not with the epochs.  Lane keys: internal.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"

/* One thread's place in the order: the main process first, then by pid,
 * pid 0 (idle, kernel threads) last; within a process its main thread
 * first, then by tid. */
struct tl_thread {
	uint32_t pid, tid;
	size_t n, at; /* its samples, and where they start in the order */
};

static uint64_t pid_rank(uint32_t pid, uint32_t main_pid)
{
	if (pid == main_pid)
		return 0;
	return pid ? pid : UINT64_MAX;
}

static int cmp_thread(const void *a, const void *b, void *main_pid)
{
	const struct tl_thread *x = a, *y = b;
	uint32_t m = *(const uint32_t *)main_pid;
	if (x->pid != y->pid)
		return pid_rank(x->pid, m) < pid_rank(y->pid, m) ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid == x->pid ? -1 : y->tid == y->pid ? 1 : x->tid < y->tid ? -1 : 1;
	return 0;
}

/* (time, index) of one sample: sorting these within a thread is the time
 * order, ties in profile order. */
struct tl_key {
	uint64_t time;
	uint32_t idx;
};

static int cmp_key(const void *a, const void *b)
{
	const struct tl_key *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static bool is_timeline_sample(const struct gs_profile *p, const struct gs_sample *s)
{
	return gs_profile_ctx(p, s)->cuda_device < 0 && gs_wall_ns(p, s) > 0;
}

/* ---- lanes ------------------------------------------------------------- */

/* What takes a slot: an exited worker process (its threads go with it), or
 * a thread of a churned group (GS_TL_GROUP_BIT lanes). */
struct tl_unit {
	uint64_t group; /* workers: the parent's pid; threads: pid << 32 | name */
	uint32_t id;    /* pid of a worker, tid of a thread */
	uint32_t slot;
	uint64_t first, last; /* its timeline samples' span */
};

static int cmp_unit(const void *a, const void *b)
{
	const struct tl_unit *x = a, *y = b;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static bool merged_worker(const struct gs_profile *p, const struct gs_process *pr)
{
	return pr->exited && gs_find_process(p, pr->pid) == pr && pr->role &&
	       !strcmp(gs_profile_str(p, pr->role), "dataloader");
}

/* The lanes being made: units (workers, then threads), the maps from a
 * worker's pid (wmap) and a thread's pid << 32 | tid (tmap) to its unit,
 * and the worker threads seen (keys). */
struct tl_build {
	struct tl_unit *u;
	size_t n, cap, n_workers;
	struct gs_hmap wmap, tmap;
	uint64_t *keys;
	size_t n_keys, cap_keys;
};

/* The exited workers of parents with GS_TL_MERGE_MIN or more. */
static int find_workers(const struct gs_profile *p, struct tl_build *b)
{
	struct gs_hmap per_parent = { 0 };
	int rc = 0;
	for (uint32_t i = 0; i < p->n_processes && !rc; i++) {
		bool added;
		uint64_t *v = merged_worker(p, &p->processes[i])
				  ? gs_hmap_slot(&per_parent, p->processes[i].ppid, &added)
				  : &(uint64_t){ 0 };
		rc = v ? 0 : -ENOMEM;
		if (v)
			++*v;
	}
	for (uint32_t i = 0; i < p->n_processes && !rc; i++) {
		const struct gs_process *pr = &p->processes[i];
		const uint64_t *c = merged_worker(p, pr) ? gs_hmap_get(&per_parent, pr->ppid)
							 : NULL;
		if (!c || *c < GS_TL_MERGE_MIN)
			continue;
		rc = GS_PUSH(
		    b->u, b->n, b->cap,
		    ((struct tl_unit){ .group = pr->ppid, .id = pr->pid, .first = UINT64_MAX }));
		rc = rc ? rc : gs_hmap_put(&b->wmap, pr->pid, b->n - 1);
	}
	gs_hmap_free(&per_parent);
	b->n_workers = b->n;
	return rc;
}

/* The threads (not a process's main thread, not a merged worker's) of the
 * groups (pid, thread name) with GS_TL_MERGE_MIN or more threads; and the
 * merged workers' threads (b->keys). */
static int find_threads_to_merge(const struct gs_profile *p, struct tl_build *b)
{
	struct gs_hmap per_group = { 0 }, seen = { 0 };
	size_t from = b->n;
	uint64_t last = UINT64_MAX;
	int rc = 0;
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, &p->samples[i]);
		uint64_t key = (uint64_t)sc->pid << 32 | sc->tid;
		if (key == last) /* runs of one thread: seen already */
			continue;
		bool added, worker = gs_hmap_get(&b->wmap, sc->pid);
		if (!is_timeline_sample(p, &p->samples[i]) ||
		    (!worker && (sc->tid == sc->pid || !sc->pid)))
			continue;
		last = key;
		if (!gs_hmap_slot(&seen, key, &added)) {
			rc = -ENOMEM;
		} else if (added && worker) {
			rc = GS_PUSH(b->keys, b->n_keys, b->cap_keys, key);
		} else if (added) {
			uint64_t group = (uint64_t)sc->pid << 32 | sc->thread_name, *c;
			rc = GS_PUSH(b->u, b->n, b->cap,
				     ((struct tl_unit){
					 .group = group, .id = sc->tid, .first = UINT64_MAX }));
			c = rc ? NULL : gs_hmap_slot(&per_group, group, &added);
			rc = rc ? rc : c ? 0 : -ENOMEM;
			if (c)
				++*c;
		}
	}
	size_t k = from; /* keep the groups big enough */
	for (size_t i = from; i < b->n && !rc; i++)
		if (*gs_hmap_get(&per_group, b->u[i].group) >= GS_TL_MERGE_MIN)
			b->u[k++] = b->u[i];
	b->n = rc ? b->n : k;
	gs_hmap_free(&per_group);
	gs_hmap_free(&seen);
	return rc;
}

/* Each unit's span (pass over the samples), after indexing the units. */
static int unit_spans(const struct gs_profile *p, struct tl_build *b)
{
	int rc = 0;
	for (size_t i = b->n_workers; i < b->n && !rc; i++)
		rc = gs_hmap_put(&b->tmap, (b->u[i].group & ~(uint64_t)UINT32_MAX) | b->u[i].id, i);
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		const uint64_t *v;
		if (!is_timeline_sample(p, s))
			continue;
		if (!(v = gs_hmap_get(&b->wmap, sc->pid)) &&
		    !(v = gs_hmap_get(&b->tmap, (uint64_t)sc->pid << 32 | sc->tid)))
			continue;
		struct tl_unit *x = &b->u[*v];
		uint64_t end = s->time_ns + (uint64_t)gs_wall_ns(p, s);
		x->first = s->time_ns < x->first ? s->time_ns : x->first;
		x->last = end > x->last ? end : x->last;
	}
	return rc;
}

/* Slots: each unit of u[0, n) (sorted by group, then first sample) takes
 * its group's lowest slot whose last unit ended by its first sample. */
static int assign_slots(struct tl_unit *u, size_t n)
{
	uint64_t *ends = NULL;
	size_t n_ends = 0, cap = 0;
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		if (i && u[i].group != u[i - 1].group)
			n_ends = 0;
		size_t k = 0;
		while (k < n_ends && ends[k] > u[i].first)
			k++;
		if (k == n_ends && (rc = GS_PUSH(ends, n_ends, cap, 0)))
			break;
		ends[k] = u[i].last;
		u[i].slot = (uint32_t)(k < 0xff ? k : 0xff);
	}
	free(ends);
	return rc;
}

/* Count a unit in its lane (lane key without the thread byte). */
static int count_in(struct gs_tl_lanes *l, uint64_t base)
{
	bool added;
	uint64_t *c = gs_hmap_slot(&l->count, base, &added);
	if (!c)
		return -ENOMEM;
	++*c;
	return 0;
}

/* Lane keys: a worker's thread j (0 its main thread, then the others in
 * tid order) in its slot under its parent; a group's thread in its slot
 * under its process, the group numbered in its process. */
static int lane_keys(struct gs_tl_lanes *l, struct tl_build *b)
{
	int rc = 0;
	for (size_t i = 0; i < b->n_workers && !rc; i++) {
		rc = gs_hmap_put(&b->wmap, b->u[i].id, i); /* indexes after the sort */
		rc = rc ? rc
			: count_in(l, b->u[i].group << 32 | GS_TL_LANE_TID | b->u[i].slot << 8);
	}
	if (b->n_keys)
		qsort(b->keys, b->n_keys, sizeof(*b->keys), cmp_u64);
	uint32_t j = 0;
	for (size_t i = 0; i < b->n_keys && !rc; i++) {
		uint32_t pid = (uint32_t)(b->keys[i] >> 32), tid = (uint32_t)b->keys[i];
		const struct tl_unit *x = &b->u[*gs_hmap_get(&b->wmap, pid)];
		j = i && (uint32_t)(b->keys[i - 1] >> 32) == pid ? j + 1 : 0;
		uint32_t ord = tid == pid ? 0 : j + (tid > pid ? 0 : 1);
		rc = gs_hmap_put(&l->of, b->keys[i],
				 x->group << 32 | GS_TL_LANE_TID | x->slot << 8 |
				     (ord < 0xff ? ord : 0xff));
	}
	uint32_t g = 0;
	bool own = false;
	for (size_t i = b->n_workers, e = i; i < b->n && !rc; i++) {
		const struct tl_unit *x = &b->u[i], *prev = i > b->n_workers ? x - 1 : NULL;
		if (prev && prev->group != x->group)
			g = prev->group >> 32 == x->group >> 32 ? g + 1 : 0;
		if (i == e) { /* a group's first: u[i, e) is the group */
			size_t n_slots = 0;
			for (; e < b->n && b->u[e].group == x->group; e++)
				n_slots = b->u[e].slot + 1 > n_slots ? b->u[e].slot + 1 : n_slots;
			/* as many slots as threads: a pool that lives on, not churn */
			own = n_slots >= e - i;
		}
		if (own)
			continue;
		uint64_t base = (x->group & ~(uint64_t)UINT32_MAX) | GS_TL_LANE_TID |
				GS_TL_GROUP_BIT | (g < 0xff ? g : 0xff) << 16 | x->slot << 8;
		rc = gs_hmap_put(&l->of, (x->group & ~(uint64_t)UINT32_MAX) | x->id, base);
		rc = rc ? rc : count_in(l, base);
	}
	return rc;
}

int gs_tl_lanes_build(const struct gs_profile *p, struct gs_tl_lanes *l)
{
	struct tl_build b = { 0 };
	memset(l, 0, sizeof(*l));
	int rc = find_workers(p, &b);
	rc = rc ? rc : find_threads_to_merge(p, &b);
	rc = rc ? rc : unit_spans(p, &b);
	if (!rc && b.n) {
		qsort(b.u, b.n_workers, sizeof(*b.u), cmp_unit);
		qsort(b.u + b.n_workers, b.n - b.n_workers, sizeof(*b.u), cmp_unit);
		rc = assign_slots(b.u, b.n_workers);
		rc = rc ? rc : assign_slots(b.u + b.n_workers, b.n - b.n_workers);
		rc = rc ? rc : lane_keys(l, &b);
	}
	gs_hmap_free(&b.wmap);
	gs_hmap_free(&b.tmap);
	free(b.u);
	free(b.keys);
	if (rc)
		gs_tl_lanes_free(l);
	return rc;
}

void gs_tl_lanes_free(struct gs_tl_lanes *l)
{
	gs_hmap_free(&l->of);
	gs_hmap_free(&l->count);
	memset(l, 0, sizeof(*l));
}

uint64_t gs_tl_lane(const struct gs_tl_lanes *l, const struct gs_profile *p,
		    const struct gs_sample *s, uint32_t *merged)
{
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
	uint64_t key = (uint64_t)sc->pid << 32 | sc->tid;
	const uint64_t *v = l ? gs_hmap_get(&l->of, key) : NULL;
	const uint64_t *c = v ? gs_hmap_get(&l->count, *v & ~(uint64_t)0xff) : NULL;
	if (merged)
		*merged = c ? (uint32_t)*c : 0;
	return v ? *v : key;
}

bool gs_tl_lane_name(const struct gs_tl_lanes *l, const struct gs_profile *p,
		     const struct gs_sample *s, char *buf, size_t len)
{
	uint32_t merged;
	uint64_t lane = gs_tl_lane(l, p, s, &merged);
	uint32_t pid = (uint32_t)(lane >> 32), tid = (uint32_t)lane;
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
	const struct gs_process *pr = gs_find_process(p, pid);
	if (!merged)
		return false;
	if (tid & GS_TL_GROUP_BIT)
		snprintf(buf, len, "%s pid %u: threads %s, slot %u (%u thread%s)",
			 pr && pr->comm ? gs_profile_str(p, pr->comm) : "?", pid,
			 sc->thread_name ? gs_profile_str(p, sc->thread_name) : "?",
			 (tid >> 8) & 0xff, merged, merged == 1 ? "" : "s");
	else
		snprintf(buf, len,
			 "exited DataLoader workers of pid %u, slot %u, thread %u (%u process%s)",
			 pid, (tid >> 8) & 0xff, tid & 0xff, merged, merged == 1 ? "" : "es");
	return true;
}

/* Distinct threads of the timeline samples, in order, with their counts
 * and start offsets; *map maps (pid << 32 | tid) to the thread's index. */
static int find_threads(const struct gs_profile *p, const struct gs_tl_lanes *l, uint32_t main_pid,
			struct gs_hmap *map, struct tl_thread **out, size_t *n_out)
{
	struct tl_thread *th = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (!is_timeline_sample(p, s))
			continue;
		bool added;
		uint64_t lane = gs_tl_lane(l, p, s, NULL);
		uint64_t *v = gs_hmap_slot(map, lane, &added);
		if (!v || (added && GS_PUSH(th, n, cap,
					    ((struct tl_thread){ .pid = (uint32_t)(lane >> 32),
								 .tid = (uint32_t)lane })))) {
			free(th);
			return -ENOMEM;
		}
		if (added)
			*v = n - 1;
		th[*v].n++;
	}
	if (n) /* th is NULL for a profile without timeline samples */
		qsort_r(th, n, sizeof(*th), cmp_thread, &main_pid);
	size_t at = 0;
	for (size_t t = 0; t < n; t++) {
		th[t].at = at;
		at += th[t].n;
		*gs_hmap_get(map, (uint64_t)th[t].pid << 32 | th[t].tid) = t;
	}
	*out = th;
	*n_out = n;
	return 0;
}

/* Put each thread's samples (placed in profile order) in time order. */
static int sort_threads(const struct gs_profile *p, uint32_t *idx, const struct tl_thread *th,
			size_t n)
{
	size_t most = 0;
	for (size_t t = 0; t < n; t++)
		most = th[t].n > most ? th[t].n : most;
	struct tl_key *k = malloc(sizeof(*k) * (most ? most : 1));
	if (!k)
		return -ENOMEM;
	for (size_t t = 0; t < n; t++) {
		uint32_t *seg = idx + th[t].at;
		bool sorted = true;
		for (size_t i = 0; i < th[t].n; i++) {
			k[i] = (struct tl_key){ .time = p->samples[seg[i]].time_ns, .idx = seg[i] };
			sorted &= !i || k[i - 1].time <= k[i].time;
		}
		if (sorted) /* the common case: nothing to do */
			continue;
		qsort(k, th[t].n, sizeof(*k), cmp_key);
		for (size_t i = 0; i < th[t].n; i++)
			seg[i] = k[i].idx;
	}
	free(k);
	return 0;
}

/* Grouping by a counting pass and sorting each thread on its own keeps
 * this linear in the samples (plus a sort of the few out-of-order
 * threads): one qsort over all of them with a comparator reading the
 * samples was a quarter of the speedscope writer's time at 5M samples. */
int gs_timeline_order(const struct gs_profile *p, const struct gs_tl_lanes *l, uint32_t **idx_out,
		      size_t *n_out)
{
	struct gs_hmap map = { 0 };
	struct tl_thread *th = NULL;
	size_t n_th = 0, n = 0;
	uint32_t *idx = malloc(sizeof(*idx) * (p->n_samples ? p->n_samples : 1));
	uint32_t main_pid = 0;
	for (uint32_t i = 0; i < p->n_processes; i++)
		if (p->processes[i].role &&
		    !strcmp(gs_profile_str(p, p->processes[i].role), "main")) {
			main_pid = p->processes[i].pid;
			break;
		}
	int rc = idx ? find_threads(p, l, main_pid, &map, &th, &n_th) : -ENOMEM;
	for (size_t i = 0; !rc && i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (!is_timeline_sample(p, s))
			continue;
		struct tl_thread *t = &th[*gs_hmap_get(&map, gs_tl_lane(l, p, s, NULL))];
		idx[t->at++] = (uint32_t)i;
		n++;
	}
	for (size_t t = 0; !rc && t < n_th; t++)
		th[t].at -= th[t].n; /* back to the thread's start */
	rc = rc ? rc : sort_threads(p, idx, th, n_th);
	gs_hmap_free(&map);
	free(th);
	if (rc) {
		free(idx);
		return rc;
	}
	*idx_out = idx;
	*n_out = n;
	return 0;
}

size_t gs_timeline_thread_end(const struct gs_profile *p, const struct gs_tl_lanes *l,
			      const uint32_t *idx, size_t b, size_t n)
{
	uint64_t lane = gs_tl_lane(l, p, &p->samples[idx[b]], NULL);
	size_t e = b + 1;
	while (e < n && gs_tl_lane(l, p, &p->samples[idx[e]], NULL) == lane)
		e++;
	return e;
}

void gs_timeline_layout(const struct gs_profile *p, const uint32_t *idx, size_t n,
			struct gs_tl_item *out)
{
	uint64_t cursor = 0, close = p->period_ns > 0 ? (uint64_t)p->period_ns / 2 : 0;
	for (size_t i = 0; i < n; i++) {
		const struct gs_sample *s = &p->samples[idx[i]];
		int64_t off = s->values[GS_V_OFFCPU_NS] > 0 ? s->values[GS_V_OFFCPU_NS] : 0;
		uint64_t len = (uint64_t)gs_wall_ns(p, s);
		uint64_t start = s->time_ns;
		if (!off) /* CPU sample: the period around its tick */
			start = start > len / 2 ? start - len / 2 : 0;
		if (i && start < cursor && start > out[i - 1].start)
			out[i - 1].end = start; /* cut the one before short */
		else if (start < cursor)
			start = cursor; /* same start: end to end */
		else if (i && start - cursor < close)
			out[i - 1].end = start; /* close a small gap */
		out[i] =
		    (struct gs_tl_item){ .start = start, .end = start + len, .sample = idx[i] };
		cursor = start + len;
	}
}

const char *gs_wait_name(const struct gs_profile *p, uint32_t stack, char *buf, size_t len)
{
	const struct gs_stack *st = &p->stacks[stack];
	struct gs_dframe df[66];
	snprintf(buf, len, "?");
	for (uint32_t i = 0; i < st->n; i++) { /* leaf first */
		uint32_t lid = p->stack_locs[st->first + i];
		const struct gs_location *l = gs_profile_location(p, lid);
		if (l->kind == GS_FRAME_KERNEL && i + 1 < st->n)
			continue;
		size_t nd = gs_location_dframes(p, lid, df, 66);
		if (nd)
			return gs_dframe_name(p, &df[nd - 1], buf, len);
	}
	return buf;
}
