// SPDX-License-Identifier: MIT
/*
 * The report's Steps section (see internal.h, gs_report_steps): per
 * process with training steps (p->steps, from gs_profile_label_steps), the
 * step times, their trend, the slowest steps with what they waited on, and
 * the phase split.  Step times are backward end to backward end (exact
 * to the probe); the phase split (gs_step.phase_ns) and the slow steps'
 * categories are the main thread's wall time of the samples labelled with
 * the step.  Everything here is in a saved pprof too (the steps in
 * gpusample's meta message, the labels on the samples), so `gpusample
 * report FILE.pb.gz` prints the same section.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"

#define SLOWEST   3
#define TREND_MIN 8 /* timed steps needed to speak of a trend */

struct proc_steps {
	const struct gs_profile *p;
	const struct gs_step *st; /* this process's steps, numbers 1..n */
	size_t n;
	uint32_t want; /* the step gs_wall_split keeps */
};

static void ms(char *buf, size_t len, uint64_t ns)
{
	gs_report_fmt_ns(buf, len, (int64_t)ns);
}

/* The step of a sample of this process's stepping thread, 0 for none. */
static uint32_t step_of(const struct proc_steps *ps, const struct gs_sample_ctx *c)
{
	if (c->pid != ps->st[0].pid || c->tid != ps->st[0].tid || c->cuda_device >= 0 ||
	    !(c->num_set & (1u << GS_NL_STEP)) || c->num_labels[GS_NL_STEP] < 1 ||
	    (uint64_t)c->num_labels[GS_NL_STEP] > ps->n)
		return 0;
	return (uint32_t)c->num_labels[GS_NL_STEP];
}

static bool keep_step(const struct gs_sample *s, const struct gs_sample_ctx *c, void *ctx)
{
	const struct proc_steps *ps = ctx;

	return step_of(ps, c) == ps->want;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Indexes of the timed steps, slowest first (ties: lower number first). */
static int cmp_slow(const void *a, const void *b, void *ctx)
{
	const struct gs_step *st = ctx;
	const struct gs_step *x = &st[*(const size_t *)a], *y = &st[*(const size_t *)b];

	if (x->wall_ns != y->wall_ns)
		return x->wall_ns > y->wall_ns ? -1 : 1;
	return x->number < y->number ? -1 : 1;
}

static int slowest(struct proc_steps *ps, FILE *out, const size_t *order, size_t n_timed)
{
	char t[32], c[32], w[96] = "", stack[400];

	fprintf(out, "  slowest steps:\n");
	for (size_t i = 0; i < n_timed && i < SLOWEST; i++) {
		const struct gs_step *st = &ps->st[order[i]];
		struct gs_wall_split x;
		int best = -1;
		int rc;

		uint32_t top;

		ps->want = st->number;
		if ((rc = gs_wall_split(ps->p, keep_step, ps, &x)))
			return rc;
		/* what the step was doing, its waits for a CPU counted where they
		 * fell (a loaded machine makes every slow step "starved") */
		for (int k = 0; k < GS_NWALL_CATS; k++)
			if (k != GS_WALL_STARVED && x.ns[k] + x.starved_in[k] &&
			    (best < 0 ||
			     x.ns[k] + x.starved_in[k] > x.ns[best] + x.starved_in[best]))
				best = k;
		if (best < 0 && x.ns[GS_WALL_STARVED])
			best = GS_WALL_STARVED;
		ms(t, sizeof(t), st->wall_ns);
		top = best < 0 ? UINT32_MAX : x.top_stack[best];
		if (top == UINT32_MAX && best >= 0)
			top = x.top_stack[GS_WALL_STARVED];
		if (top == UINT32_MAX) {
			fprintf(out, "    step %u: %s (no samples)\n", st->number, t);
			continue;
		}
		ms(c, sizeof(c), x.ns[best] + (best != GS_WALL_STARVED ? x.starved_in[best] : 0));
		if (best != GS_WALL_STARVED && x.starved_in[best]) {
			char s[32];

			ms(s, sizeof(s), x.starved_in[best]);
			snprintf(w, sizeof(w), " (%s of it waiting for a CPU)", s);
		}
		gs_report_short_stack(ps->p, top, best, stack, sizeof(stack));
		fprintf(out, "    step %u: %s, %s %s%s in %s\n", st->number, t,
			gs_wall_cat_name[best], c, w, stack);
		w[0] = '\0';
	}
	return 0;
}

/* Median of the step times of steps [b, e) (indexes into ps->st, timed
 * only: a stall every Nth step is not a trend) and the mean of each phase
 * over them; walls has room for e - b. */
static uint64_t quarter(const struct proc_steps *ps, size_t b, size_t e, double *phase,
			uint64_t *walls)
{
	size_t n = 0;

	for (int j = 0; j < GS_NPHASES; j++)
		phase[j] = 0;
	for (size_t i = b; i < e; i++) {
		if (!ps->st[i].wall_ns)
			continue;
		walls[n++] = ps->st[i].wall_ns;
		for (int j = 0; j < GS_NPHASES; j++)
			phase[j] += (double)ps->st[i].phase_ns[j];
	}
	for (int j = 0; j < GS_NPHASES && n; j++)
		phase[j] /= (double)n;
	qsort(walls, n, sizeof(*walls), cmp_u64);
	return n ? walls[(n - 1) / 2] : 0;
}

static void trend(const struct proc_steps *ps, FILE *out, uint64_t *walls)
{
	size_t q = ps->n / 4;
	double first[GS_NPHASES], last[GS_NPHASES];
	uint64_t a = quarter(ps, 1, q + 1, first, walls);
	uint64_t b = quarter(ps, ps->n - q, ps->n, last, walls);
	char ta[32], tb[32];
	int grew = -1;

	if (!a || !b)
		return;
	ms(ta, sizeof(ta), a);
	ms(tb, sizeof(tb), b);
	double change = 100.0 * ((double)b - (double)a) / (double)a;
	fprintf(out, "  trend (median step): first quarter %s, last quarter %s (%+.0f%%)", ta, tb,
		change);
	if (change > 20) {
		for (int j = 0; j < GS_NPHASES; j++)
			if (grew < 0 || last[j] - first[j] > last[grew] - first[grew])
				grew = j;
		ms(ta, sizeof(ta), (uint64_t)(first[grew] > 0 ? first[grew] : 0));
		ms(tb, sizeof(tb), (uint64_t)(last[grew] > 0 ? last[grew] : 0));
		fprintf(out, ": step time grew; %s grew most, %s -> %s", gs_phase_name[grew], ta,
			tb);
	}
	fprintf(out, "\n");
}

static void mean_phases(const struct proc_steps *ps, FILE *out)
{
	char t[32];

	fprintf(out, "  phase split (mean per step, main thread):");
	for (int j = 0; j < GS_NPHASES; j++) {
		uint64_t sum = 0;

		for (size_t i = 0; i < ps->n; i++)
			sum += ps->st[i].phase_ns[j];
		ms(t, sizeof(t), sum / ps->n);
		fprintf(out, " %s %s%s", gs_phase_name[j], t, j + 1 < GS_NPHASES ? "," : "\n");
	}
}

static int one_process(struct proc_steps *ps, FILE *out)
{
	size_t n_timed = 0, *order = malloc(ps->n * sizeof(*order));
	uint64_t *walls = malloc(ps->n * sizeof(*walls));
	char p50[32], p90[32], mx[32];
	int rc = -ENOMEM;

	if (!order || !walls)
		goto out;
	if (ps->st[0].by_optimizer)
		fprintf(
		    out,
		    "  pid %u: %zu steps (boundary: start of the optimizer's step on thread %u; "
		    "a step's time runs from the previous one's to its own)\n",
		    ps->st[0].pid, ps->n, ps->st[0].tid);
	else
		fprintf(out,
			"  pid %u: %zu steps (boundary: return from autograd's backward on thread "
			"%u; a step's time runs from the previous backward's end to its own)\n",
			ps->st[0].pid, ps->n, ps->st[0].tid);
	for (size_t i = 0; i < ps->n; i++)
		walls[i] = ps->st[i].backwards;
	qsort(walls, ps->n, sizeof(*walls), cmp_u64);
	if (walls[(ps->n - 1) / 2] > 1)
		fprintf(out,
			"  gradient accumulation: %" PRIu64 " backward calls per step (median)\n",
			walls[(ps->n - 1) / 2]);
	for (size_t i = 0; i < ps->n; i++)
		if (ps->st[i].wall_ns) {
			order[n_timed] = i;
			walls[n_timed++] = ps->st[i].wall_ns;
		}
	rc = 0;
	if (n_timed) {
		qsort(walls, n_timed, sizeof(*walls), cmp_u64);
		qsort_r(order, n_timed, sizeof(*order), cmp_slow, (void *)ps->st);
		ms(p50, sizeof(p50), walls[(n_timed - 1) / 2]);
		ms(p90, sizeof(p90), walls[(n_timed - 1) * 9 / 10]);
		ms(mx, sizeof(mx), walls[n_timed - 1]);
		fprintf(out, "  step time: p50 %s, p90 %s, max %s (step %u)\n", p50, p90, mx,
			ps->st[order[0]].number);
		if (n_timed >= TREND_MIN)
			trend(ps, out, walls); /* walls is free again */
		rc = slowest(ps, out, order, n_timed);
	}
	if (!rc)
		mean_phases(ps, out);
out:
	free(order);
	free(walls);
	return rc;
}

int gs_report_steps(const struct gs_profile *p, FILE *out, bool color)
{
	int rc = 0;

	if (!p->n_steps)
		return 0;
	fprintf(out, color ? "\n\033[1m%s\033[0m\n" : "\n%s\n", "Steps");
	for (size_t b = 0, e; b < p->n_steps && !rc; b = e) {
		struct proc_steps ps = { .p = p, .st = &p->steps[b] };

		/* one process's steps: one pid, numbered on (a merged profile
		 * may hold two runs' processes of one pid) */
		for (e = b + 1; e < p->n_steps && p->steps[e].pid == p->steps[b].pid &&
				p->steps[e].number == p->steps[e - 1].number + 1;
		     e++)
			;
		ps.n = e - b;
		rc = one_process(&ps, out);
	}
	return rc;
}
