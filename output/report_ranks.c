// SPDX-License-Identifier: MIT
/*
 * The report's cross-rank table: for a job with several ranks (samples
 * labelled rank, one profile or a merge of many hosts), the wall split of
 * each rank's main thread (gs_wall_split) side by side as min / median /
 * max per category with the rank at the max, then the two findings that
 * matter in data-parallel training:
 *  - a straggler: in synchronous training every rank waits in the gradient
 *    all-reduce for the slowest one, so the rank with the least collective
 *    wait, when the others wait much longer, is the one holding them back;
 *    its largest excess over the other ranks' median says on what;
 *  - an input-starved rank: one waiting for its DataLoader well above the
 *    median of the ranks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"

struct rank_split {
	int64_t rank;
	struct gs_wall_split x;
};

struct rank_key {
	const struct gs_profile *p;
	int64_t rank;
	gs_str main_role;
};

static bool has_rank(const struct gs_sample_ctx *c)
{
	return c->cuda_device < 0 && (c->num_set & (1u << GS_NL_RANK));
}

/* The training loop of a rank: its main process's main thread. */
static bool keep_rank_main(const struct gs_sample *s, const struct gs_sample_ctx *c, void *ctx)
{
	const struct rank_key *k = ctx;

	return has_rank(c) && c->num_labels[GS_NL_RANK] == k->rank && c->tid == c->pid &&
	       c->process_role == k->main_role;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Distinct ranks of main-thread samples, sorted; *n_out of them. */
static int64_t *find_ranks(const struct gs_profile *p, gs_str main_role, size_t *n_out)
{
	int64_t *v = malloc((p->n_samples ? p->n_samples : 1) * sizeof(*v));
	size_t n = 0, u = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample_ctx *c = gs_profile_ctx(p, &p->samples[i]);

		if (has_rank(c) && c->tid == c->pid && c->process_role == main_role)
			v[n++] = c->num_labels[GS_NL_RANK];
	}
	qsort(v, n, sizeof(*v), cmp_i64);
	for (size_t i = 0; i < n; i++)
		if (!u || v[u - 1] != v[i])
			v[u++] = v[i];
	*n_out = u;
	return v;
}

static double median(uint64_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++) /* insertion sort: n is the rank count */
		for (size_t k = i; k > 0 && v[k - 1] > v[k]; k--) {
			uint64_t t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

/* Median of category c (GS_NWALL_CATS = total) over the ranks but skip
 * (skip = SIZE_MAX: over all). */
static double cat_median(const struct rank_split *r, size_t n, int c, size_t skip, uint64_t *tmp)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (i != skip)
			tmp[m++] = c == GS_NWALL_CATS ? r[i].x.total_ns : r[i].x.ns[c];
	return m ? median(tmp, m) : 0.0;
}

static uint64_t cat_ns(const struct rank_split *r, int c)
{
	return c == GS_NWALL_CATS ? r->x.total_ns : r->x.ns[c];
}

static void table(FILE *out, const struct rank_split *r, size_t n, uint64_t *tmp)
{
	fprintf(out, "  %-18s %9s %9s %9s  %s\n", "category", "min", "median", "max", "max at");
	for (int c = 0; c <= GS_NWALL_CATS; c++) {
		size_t lo = 0, hi = 0;

		for (size_t i = 1; i < n; i++) {
			if (cat_ns(&r[i], c) < cat_ns(&r[lo], c))
				lo = i;
			if (cat_ns(&r[i], c) > cat_ns(&r[hi], c))
				hi = i;
		}
		if (!cat_ns(&r[hi], c))
			continue;
		fprintf(out, "  %-18s %7.2f s %7.2f s %7.2f s  rank %" PRId64 "\n",
			c == GS_NWALL_CATS ? "wall (main thread)" : gs_wall_cat_name[c],
			(double)cat_ns(&r[lo], c) / 1e9, cat_median(r, n, c, SIZE_MAX, tmp) / 1e9,
			(double)cat_ns(&r[hi], c) / 1e9, r[hi].rank);
	}
}

/* The straggler's categories above the other ranks' median, largest first
 * (at most 3, each at least 2% of its wall time): what holds it back. */
static void print_excess(FILE *out, const struct rank_split *r, size_t n, size_t s, uint64_t *tmp)
{
	double d[GS_NWALL_CATS];
	int shown = 0;

	for (int c = 0; c < GS_NWALL_CATS; c++)
		d[c] = c == GS_WALL_COLLECTIVE ? 0
					       : (double)r[s].x.ns[c] - cat_median(r, n, c, s, tmp);
	while (shown < 3) {
		int best = -1;

		for (int c = 0; c < GS_NWALL_CATS; c++)
			if (d[c] > 0.02 * (double)r[s].x.total_ns && (best < 0 || d[c] > d[best]))
				best = c;
		if (best < 0)
			break;
		fprintf(out, "%s %s (+%.2f s: %.2f s, %.0f%% of its wall time)",
			shown ? "," : "; it spends more than the others in", gs_wall_cat_name[best],
			d[best] / 1e9, (double)r[s].x.ns[best] / 1e9,
			100.0 * (double)r[s].x.ns[best] / (double)r[s].x.total_ns);
		d[best] = 0;
		shown++;
	}
}

static void straggler(FILE *out, const struct rank_split *r, size_t n, uint64_t *tmp)
{
	size_t s = 0;
	double others;

	for (size_t i = 1; i < n; i++)
		if (r[i].x.ns[GS_WALL_COLLECTIVE] < r[s].x.ns[GS_WALL_COLLECTIVE])
			s = i;
	others = cat_median(r, n, GS_WALL_COLLECTIVE, s, tmp);
	/* The others must wait clearly longer, by a real share of the run. */
	if (others < 2.0 * (double)r[s].x.ns[GS_WALL_COLLECTIVE] + 1 ||
	    others - (double)r[s].x.ns[GS_WALL_COLLECTIVE] <
		0.05 * cat_median(r, n, GS_NWALL_CATS, s, tmp)) {
		fprintf(out, "  No straggler: collective wait is even across ranks.\n");
		return;
	}
	fprintf(out,
		"  Straggler: rank %" PRId64
		" -- the other ranks wait %.2f s (median) in collectives "
		"for it, rank %" PRId64 " only %.2f s",
		r[s].rank, others / 1e9, r[s].rank, (double)r[s].x.ns[GS_WALL_COLLECTIVE] / 1e9);
	print_excess(out, r, n, s, tmp);
	fprintf(out, ".\n");
}

static void input_starved(FILE *out, const struct rank_split *r, size_t n, uint64_t *tmp)
{
	size_t hi = 0;
	double med;

	for (size_t i = 1; i < n; i++)
		if (r[i].x.ns[GS_WALL_INPUT] > r[hi].x.ns[GS_WALL_INPUT])
			hi = i;
	med = cat_median(r, n, GS_WALL_INPUT, hi, tmp);
	if ((double)r[hi].x.ns[GS_WALL_INPUT] > 2.0 * med &&
	    r[hi].x.ns[GS_WALL_INPUT] * 10 >= r[hi].x.total_ns && r[hi].x.total_ns)
		fprintf(out,
			"  Input-starved: rank %" PRId64
			" waits %.2f s (%.0f%%) for its DataLoader, "
			"the other ranks %.2f s (median): give it more workers or faster input.\n",
			r[hi].rank, (double)r[hi].x.ns[GS_WALL_INPUT] / 1e9,
			100.0 * (double)r[hi].x.ns[GS_WALL_INPUT] / (double)r[hi].x.total_ns,
			med / 1e9);
}

int gs_report_ranks(const struct gs_profile *p, FILE *out, bool color)
{
	int64_t main_role = gs_profile_find_str(p, "main");
	struct rank_split *r = NULL;
	uint64_t *tmp = NULL;
	int64_t *ranks;
	size_t n = 0;
	bool offcpu = false;
	int rc = 0;

	if (main_role < 0)
		return 0;
	if (!(ranks = find_ranks(p, (gs_str)main_role, &n)))
		return -ENOMEM;
	if (n < 2)
		goto out;
	r = calloc(n, sizeof(*r));
	tmp = calloc(n, sizeof(*tmp));
	if (!r || !tmp) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct rank_key k = { p, ranks[i], (gs_str)main_role };

		r[i].rank = ranks[i];
		rc = gs_wall_split(p, keep_rank_main, &k, &r[i].x);
	}
	if (rc)
		goto out;
	for (size_t i = 0; i < p->n_samples && !offcpu; i++)
		offcpu = p->samples[i].values[GS_V_OFFCPU_NS] > 0;
	fprintf(out,
		color ? "\n\033[1m%s\033[0m (main thread of each of %zu ranks)\n"
		      : "\n%s (main thread of each of %zu ranks)\n",
		"Across ranks", n);
	table(out, r, n, tmp);
	if (offcpu)
		straggler(out, r, n, tmp);
	else /* waiting in an all-reduce is off-CPU time */
		fprintf(out,
			"  No off-CPU data in this profile: collective waits do not show, so no "
			"straggler can be named (profile without --no-offcpu).\n");
	input_starved(out, r, n, tmp);
out:
	free(ranks);
	free(r);
	free(tmp);
	return rc;
}
