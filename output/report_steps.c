// SPDX-License-Identifier: MIT
/*
 * The report's Steps section (see internal.h, gs_report_steps): per
 * process with training steps (p->steps, from gs_profile_label_steps), the
 * step times, their trend, the slowest steps with what they waited on, and
 * the phase split; for several ranks, each step's straggler.  Step times are backward end to backward end (exact
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
#include "util/hashmap.h"
#include "util/vec.h"

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

/* What step ps->want of ps's stepping thread was doing, into buf: its
 * dominant wall category, its waits for a CPU counted where they fell (a
 * loaded machine makes every slow step "starved"), and that category's
 * short stack ("input wait 288.5 ms (60.2 ms of it waiting for a CPU) in
 * ..."); "" when it has no samples.  Collective waits are left out with
 * skip_collective (a straggler's, what it did while the others waited). */
static int step_cause(struct proc_steps *ps, bool skip_collective, char *buf, size_t len)
{
	char c[32], w[96] = "", stack[400];
	struct gs_wall_split x;
	int best = -1, rc;
	uint32_t top;

	buf[0] = '\0';
	if ((rc = gs_wall_split(ps->p, keep_step, ps, &x)))
		return rc;
	for (int k = 0; k < GS_NWALL_CATS; k++)
		if (k != GS_WALL_STARVED && !(skip_collective && k == GS_WALL_COLLECTIVE) &&
		    x.ns[k] + x.starved_in[k] &&
		    (best < 0 || x.ns[k] + x.starved_in[k] > x.ns[best] + x.starved_in[best]))
			best = k;
	if (best < 0 && x.ns[GS_WALL_STARVED])
		best = GS_WALL_STARVED;
	top = best < 0 ? UINT32_MAX : x.top_stack[best];
	if (top == UINT32_MAX && best >= 0)
		top = x.top_stack[GS_WALL_STARVED];
	if (top == UINT32_MAX)
		return 0;
	ms(c, sizeof(c), x.ns[best] + (best != GS_WALL_STARVED ? x.starved_in[best] : 0));
	if (best != GS_WALL_STARVED && x.starved_in[best]) {
		char s[32];

		ms(s, sizeof(s), x.starved_in[best]);
		snprintf(w, sizeof(w), " (%s of it waiting for a CPU)", s);
	}
	gs_report_short_stack(ps->p, top, best, stack, sizeof(stack));
	snprintf(buf, len, "%s %s%s in %s", gs_wall_cat_name[best], c, w, stack);
	return 0;
}

static int slowest(struct proc_steps *ps, FILE *out, const size_t *order, size_t n_timed)
{
	char t[32], cause[600];

	fprintf(out, "  slowest steps:\n");
	for (size_t i = 0; i < n_timed && i < SLOWEST; i++) {
		const struct gs_step *st = &ps->st[order[i]];
		int rc;

		ps->want = st->number;
		if ((rc = step_cause(ps, false, cause, sizeof(cause))))
			return rc;
		ms(t, sizeof(t), st->wall_ns);
		fprintf(out, "    step %u: %s%s%s\n", st->number, t,
			cause[0] ? ", " : " (no samples)", cause);
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

static int one_process(struct proc_steps *ps, int64_t rank, FILE *out)
{
	size_t n_timed = 0, *order = malloc(ps->n * sizeof(*order));
	uint64_t *walls = malloc(ps->n * sizeof(*walls));
	char p50[32], p90[32], mx[32], rk[32] = "";
	int rc = -ENOMEM;

	if (!order || !walls)
		goto out;
	if (rank >= 0)
		snprintf(rk, sizeof(rk), " (rank %" PRId64 ")", rank);
	if (ps->st[0].by_optimizer)
		fprintf(out,
			"  pid %u%s: %zu steps (boundary: start of the optimizer's step on thread "
			"%u; a step's time runs from the previous one's to its own)\n",
			ps->st[0].pid, rk, ps->n, ps->st[0].tid);
	else
		fprintf(out,
			"  pid %u%s: %zu steps (boundary: return from autograd's backward on "
			"thread %u; a step's time runs from the previous backward's end to its "
			"own)\n",
			ps->st[0].pid, rk, ps->n, ps->st[0].tid);
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

/* Several ranks: in synchronous data-parallel training every rank waits in
 * the gradient all-reduce for the slowest, so a step's times are alike on
 * all ranks; the straggler of a step is the rank busy (its stepping
 * thread's wall time in the step, collective waits left out) well over the
 * others.  Steps are compared by number: each rank's first backward is its
 * step 1 (a run attached to ranks already training may number them apart). */
#define STRAGGLER_RATIO  1.5         /* busy over the others' median, and */
#define STRAGGLER_MIN_NS 20000000ull /* at least this much more */
#define STRAGGLER_LINES  10

struct rank_steps {
	struct proc_steps ps;
	int64_t rank;   /* -1: none */
	uint64_t *busy; /* [number - 1], ns */
};

/* pid -> index into g[0..n_g) (a merged profile may hold thousands of
 * ranks: no scan of the groups per sample).  0 or -ENOMEM. */
static int pid_index(const struct rank_steps *g, size_t n_g, struct gs_hmap *m)
{
	for (size_t k = 0; k < n_g; k++)
		if (gs_hmap_put(m, g[k].ps.st[0].pid, k))
			return -ENOMEM;
	return 0;
}

/* Each group's rank, from its process's samples' rank label. */
static int group_ranks(const struct gs_profile *p, struct rank_steps *g, size_t n_g)
{
	struct gs_hmap m = { 0 };
	int rc = pid_index(g, n_g, &m);

	for (uint32_t i = 0; i < p->n_ctxs && !rc; i++) {
		const struct gs_sample_ctx *c = &p->ctxs[i];
		const uint64_t *k = gs_hmap_get(&m, c->pid);

		if (k && c->cuda_device < 0 && (c->num_set & (1u << GS_NL_RANK)))
			g[*k].rank = c->num_labels[GS_NL_RANK];
	}
	gs_hmap_free(&m);
	return rc;
}

/* busy[k-1] of each ranked group: its stepping thread's wall time in step
 * k but for collective waits. */
static int busy_times(const struct gs_profile *p, struct rank_steps *g, size_t n_g)
{
	struct gs_hmap m = { 0 };
	int rc = pid_index(g, n_g, &m);

	for (size_t k = 0; k < n_g && !rc; k++)
		if (!(g[k].busy = calloc(g[k].ps.n, sizeof(uint64_t))))
			rc = -ENOMEM;
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *c = gs_profile_ctx(p, s);
		const uint64_t *k = gs_hmap_get(&m, c->pid);
		uint32_t n = k ? step_of(&g[*k].ps, c) : 0;

		if (n && gs_wall_classify(p, s) != GS_WALL_COLLECTIVE)
			g[*k].busy[n - 1] += (uint64_t)gs_wall_ns(p, s);
	}
	gs_hmap_free(&m);
	return rc;
}

/* A step whose straggler stands out: the rank, its busy time, the others'
 * median. */
struct straggler {
	uint32_t number;
	size_t slow; /* index into the ranked groups */
	uint64_t busy, others;
};

/* Step `number`'s straggler into *x; false when none stands out. */
static bool find_straggler(const struct rank_steps *r, size_t n_r, uint32_t number,
			   struct straggler *x)
{
	uint64_t others[64];
	size_t slow = 0, n_o = 0;

	for (size_t k = 1; k < n_r; k++)
		if (r[k].busy[number - 1] > r[slow].busy[number - 1])
			slow = k;
	for (size_t k = 0; k < n_r && n_o < 64; k++)
		if (k != slow)
			others[n_o++] = r[k].busy[number - 1];
	qsort(others, n_o, sizeof(*others), cmp_u64);
	*x = (struct straggler){ number, slow, r[slow].busy[number - 1], others[(n_o - 1) / 2] };
	return (double)x->busy >= STRAGGLER_RATIO * (double)x->others &&
	       x->busy >= x->others + STRAGGLER_MIN_NS;
}

/* Largest excess over the others first (ties: lower step first). */
static int cmp_excess(const void *a, const void *b)
{
	const struct straggler *x = a, *y = b;
	uint64_t ex = x->busy - x->others, ey = y->busy - y->others;

	if (ex != ey)
		return ex > ey ? -1 : 1;
	return x->number < y->number ? -1 : 1;
}

static int print_straggler(struct rank_steps *r, const struct straggler *x, FILE *out)
{
	char b[32], o[32], cause[600];
	int rc;

	r[x->slow].ps.want = x->number;
	if ((rc = step_cause(&r[x->slow].ps, true, cause, sizeof(cause))))
		return rc;
	ms(b, sizeof(b), x->busy);
	ms(o, sizeof(o), x->others);
	fprintf(out, "    step %u: rank %" PRId64 " busy %s, the others %s%s%s\n", x->number,
		r[x->slow].rank, b, o, cause[0] ? ": " : "", cause);
	return 0;
}

/* The steps per rank, then the steps whose straggler stands out most
 * (ranked groups r[0..n_r), by rank). */
static int stragglers(struct rank_steps *r, size_t n_r, FILE *out)
{
	size_t n = r[0].ps.n, found = 0;
	struct straggler *x;
	int rc = 0;

	fprintf(out, "  ranks:");
	for (size_t k = 0; k < n_r; k++) {
		fprintf(out, "%s rank %" PRId64 " %zu steps", k ? "," : "", r[k].rank, r[k].ps.n);
		n = r[k].ps.n < n ? r[k].ps.n : n;
	}
	fprintf(out,
		"\n  stragglers (the rank busy, not waiting in collectives, %.1fx the "
		"others' median or more in a step; largest first):\n",
		STRAGGLER_RATIO);
	if (!(x = malloc(n * sizeof(*x))))
		return -ENOMEM;
	for (uint32_t k = 1; k <= n; k++)
		found += find_straggler(r, n_r, k, &x[found]);
	qsort(x, found, sizeof(*x), cmp_excess);
	for (size_t i = 0; i < found && i < STRAGGLER_LINES && !rc; i++)
		rc = print_straggler(r, &x[i], out);
	if (!rc && !found)
		fprintf(out, "    none\n");
	else if (!rc && found > STRAGGLER_LINES)
		fprintf(out, "    (%zu more steps with a smaller straggler)\n",
			found - STRAGGLER_LINES);
	free(x);
	return rc;
}

/* Ranked groups first, by rank; then the others. */
static int cmp_rank(const void *a, const void *b)
{
	const struct rank_steps *x = a, *y = b;

	if ((x->rank < 0) != (y->rank < 0))
		return x->rank < 0 ? 1 : -1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The cross-rank part of the section: when two or more processes with
 * steps carry distinct ranks. */
static int ranks_part(struct rank_steps *g, size_t n_g, FILE *out)
{
	size_t n_r = 0;
	int rc;

	qsort(g, n_g, sizeof(*g), cmp_rank);
	while (n_r < n_g && g[n_r].rank >= 0)
		n_r++;
	for (size_t k = 1; k < n_r; k++)
		if (g[k].rank == g[k - 1].rank)
			return 0; /* two runs of one rank (a merge): not one job's steps */
	if (n_r < 2)
		return 0;
	if ((rc = busy_times(g[0].ps.p, g, n_r)))
		return rc;
	return stragglers(g, n_r, out);
}

int gs_report_steps(const struct gs_profile *p, FILE *out, bool color)
{
	struct rank_steps *g = NULL;
	size_t n_g = 0, cap_g = 0;
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
		if (GS_GROW(g, cap_g, n_g + 1)) {
			rc = -ENOMEM;
			break;
		}
		g[n_g++] = (struct rank_steps){ .ps = ps, .rank = -1 };
	}
	if (!rc)
		rc = group_ranks(p, g, n_g);
	for (size_t k = 0; k < n_g && !rc; k++)
		rc = one_process(&g[k].ps, g[k].rank, out);
	if (!rc)
		rc = ranks_part(g, n_g, out);
	for (size_t k = 0; k < n_g; k++)
		free(g[k].busy);
	free(g);
	return rc;
}
