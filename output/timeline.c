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

static const struct gs_profile *sort_p;
static uint32_t sort_main_pid;

/* Process order: the main process first, then by pid, pid 0 (idle, kernel
 * threads) last; within a process its main thread first, then by tid. */
static uint64_t pid_rank(uint32_t pid)
{
	if (pid == sort_main_pid)
		return 0;
	return pid ? pid : UINT64_MAX;
}

static int cmp_cpu(const void *a, const void *b)
{
	const struct gs_sample *x = &sort_p->samples[*(const uint32_t *)a];
	const struct gs_sample *y = &sort_p->samples[*(const uint32_t *)b];
	if (x->pid != y->pid)
		return pid_rank(x->pid) < pid_rank(y->pid) ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid == x->pid ? -1 : y->tid == y->pid ? 1 : x->tid < y->tid ? -1 : 1;
	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

int gs_timeline_order(const struct gs_profile *p, uint32_t **idx_out, size_t *n_out)
{
	uint32_t *idx = malloc(sizeof(*idx) * (p->n_samples ? p->n_samples : 1));
	size_t n = 0;
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++)
		if (p->samples[i].cuda_device < 0 && gs_wall_ns(p, &p->samples[i]) > 0)
			idx[n++] = (uint32_t)i;
	sort_p = p;
	sort_main_pid = 0;
	for (uint32_t i = 0; i < p->n_processes; i++)
		if (p->processes[i].role && !strcmp(gs_profile_str(p, p->processes[i].role), "main")) {
			sort_main_pid = p->processes[i].pid;
			break;
		}
	qsort(idx, n, sizeof(*idx), cmp_cpu);
	*idx_out = idx;
	*n_out = n;
	return 0;
}

size_t gs_timeline_thread_end(const struct gs_profile *p, const uint32_t *idx, size_t b, size_t n)
{
	const struct gs_sample *x = &p->samples[idx[b]];
	size_t e = b + 1;
	while (e < n && p->samples[idx[e]].pid == x->pid && p->samples[idx[e]].tid == x->tid)
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
		out[i] = (struct gs_tl_item){.start = start, .end = start + len, .sample = idx[i]};
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
