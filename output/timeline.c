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

/* Distinct threads of the timeline samples, in order, with their counts
 * and start offsets; *map maps (pid << 32 | tid) to the thread's index. */
static int find_threads(const struct gs_profile *p, uint32_t main_pid, struct gs_hmap *map,
			struct tl_thread **out, size_t *n_out)
{
	struct tl_thread *th = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (!is_timeline_sample(p, s))
			continue;
		bool added;
		uint64_t *v = gs_hmap_slot(map, (uint64_t)sc->pid << 32 | sc->tid, &added);
		if (!v ||
		    (added &&
		     GS_PUSH(th, n, cap, ((struct tl_thread){ .pid = sc->pid, .tid = sc->tid })))) {
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
int gs_timeline_order(const struct gs_profile *p, uint32_t **idx_out, size_t *n_out)
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
	int rc = idx ? find_threads(p, main_pid, &map, &th, &n_th) : -ENOMEM;
	for (size_t i = 0; !rc && i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (!is_timeline_sample(p, s))
			continue;
		struct tl_thread *t = &th[*gs_hmap_get(&map, (uint64_t)sc->pid << 32 | sc->tid)];
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

size_t gs_timeline_thread_end(const struct gs_profile *p, const uint32_t *idx, size_t b, size_t n)
{
	const struct gs_sample *x = &p->samples[idx[b]];
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, x);
	size_t e = b + 1;
	while (e < n && gs_profile_ctx(p, &p->samples[idx[e]])->pid == sc->pid &&
	       gs_profile_ctx(p, &p->samples[idx[e]])->tid == sc->tid)
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
