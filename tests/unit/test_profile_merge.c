/* SPDX-License-Identifier: MIT */
/* gs_profile_merge (output/merge.c): profiles of two hosts become one with
 * every sample, label and process kept; versions must match. */
#include <criterion/criterion.h>
#include <errno.h>

#include "output/output.h"
#include "output_fixture.h"

struct host_rank {
	gs_str host;
	int64_t rank;
};

static void set_host_rank(struct gs_sample_ctx *c, void *arg)
{
	const struct host_rank *h = arg;

	c->str_labels[GS_SL_HOST] = h->host;
	c->num_labels[GS_NL_RANK] = h->rank;
	c->num_set |= 1u << GS_NL_RANK;
}

static void host_profile(struct fx *x, const char *host, int64_t rank, const char *version)
{
	struct gs_profile *p = &x->p;

	fx_build(x);
	gs_profile_add_comment(p, "gpusample %s", version);
	struct host_rank h = { gs_profile_intern(p, host), rank };

	cr_assert_eq(gs_profile_edit_ctx(p, NULL, set_host_rank, &h), 0);
}

static void totals(const struct gs_profile *p, int64_t *v, int64_t rank, const char *host)
{
	memset(v, 0, GS_NVALUES * sizeof(*v));
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];

		if (rank >= 0 && gs_profile_ctx(p, s)->num_labels[GS_NL_RANK] != rank)
			continue;
		if (host &&
		    strcmp(gs_profile_str(p, gs_profile_ctx(p, s)->str_labels[GS_SL_HOST]), host))
			continue;
		for (int k = 0; k < GS_NVALUES; k++)
			v[k] += s->values[k];
	}
}

Test(profile_merge, totals_add_up_and_labels_stay)
{
	struct fx a, b;
	struct gs_profile m;
	int64_t ta[GS_NVALUES], tb[GS_NVALUES], tm[GS_NVALUES], t1[GS_NVALUES];
	char err[256];

	host_profile(&a, "node-a", 0, "0.1.0");
	host_profile(&b, "node-b", 1, "0.1.0");
	b.p.time_nanos = a.p.time_nanos + 500000000ULL; /* started 0.5 s later */
	gs_profile_init(&m);
	cr_assert_eq(gs_profile_merge(&m, &a.p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_profile_merge(&m, &b.p, err, sizeof(err)), 0, "%s", err);
	totals(&a.p, ta, -1, NULL);
	totals(&b.p, tb, -1, NULL);
	totals(&m, tm, -1, NULL);
	for (int k = 0; k < GS_NVALUES; k++)
		cr_assert_eq(tm[k], ta[k] + tb[k], "column %s: %lld != %lld + %lld",
			     gs_value_type[k], (long long)tm[k], (long long)ta[k],
			     (long long)tb[k]);
	totals(&m, t1, 1, "node-b");
	for (int k = 0; k < GS_NVALUES; k++)
		cr_assert_eq(t1[k], tb[k]);
	cr_assert_eq(m.n_samples, a.p.n_samples + b.p.n_samples);
	cr_assert_eq(m.n_processes, 4);
	cr_assert_eq(m.lost_samples, 14);
	cr_assert_eq(m.time_nanos, a.p.time_nanos);
	cr_assert_eq(m.duration_nanos, 1500000000ULL);
	cr_assert_str_eq(gs_profile_version(&m), "0.1.0");
	/* Frames resolve to the same names as in the source. */
	for (size_t i = 0; i < a.p.n_samples; i++) {
		const struct gs_stack *sa = &a.p.stacks[a.p.samples[i].stack];
		const struct gs_stack *sm = &m.stacks[m.samples[i].stack];

		cr_assert_eq(sa->n, sm->n);
		for (uint32_t k = 0; k < sa->n; k++) {
			const struct gs_location *la =
			    gs_profile_location(&a.p, a.p.stack_locs[sa->first + k]);
			const struct gs_location *lm =
			    gs_profile_location(&m, m.stack_locs[sm->first + k]);

			cr_assert_eq(la->n_lines, lm->n_lines);
			cr_assert_eq(la->address, lm->address);
			if (la->n_lines)
				cr_assert_str_eq(
				    gs_profile_str(&a.p,
						   gs_profile_function(
						       &a.p, a.p.lines[la->first_line].function)
						       ->name),
				    gs_profile_str(&m, gs_profile_function(
							   &m, m.lines[lm->first_line].function)
							   ->name));
		}
	}
	gs_profile_free(&a.p);
	gs_profile_free(&b.p);
	gs_profile_free(&m);
}

Test(profile_merge, versions_must_match)
{
	struct fx a, b, c;
	struct gs_profile m;
	char err[256];

	host_profile(&a, "a", 0, "0.1.0");
	host_profile(&b, "b", 1, "0.2.0");
	fx_build(&c); /* no version comment */
	gs_profile_init(&m);
	cr_assert_eq(gs_profile_merge(&m, &a.p, err, sizeof(err)), 0);
	cr_assert_eq(gs_profile_merge(&m, &b.p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "0.2.0") && strstr(err, "0.1.0"), "%s", err);
	cr_assert_eq(gs_profile_merge(&m, &c.p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "not a gpusample profile"), "%s", err);
	gs_profile_free(&a.p);
	gs_profile_free(&b.p);
	gs_profile_free(&c.p);
	gs_profile_free(&m);
}

/* Through the files a user merges: written, read back, merged. */
Test(profile_merge, read_back_files)
{
	struct fx a, b;
	struct gs_profile ra, rb, m;
	int64_t ta[GS_NVALUES], tb[GS_NVALUES], tm[GS_NVALUES];
	char pa[] = "/tmp/gs-merge-a-XXXXXX", pb[] = "/tmp/gs-merge-b-XXXXXX", err[256];

	close(mkstemp(pa));
	close(mkstemp(pb));
	unlink(pa);
	unlink(pb);
	host_profile(&a, "node-a", 0, "0.1.0");
	host_profile(&b, "node-b", 1, "0.1.0");
	cr_assert_eq(gs_write_pprof(&a.p, pa, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_write_pprof(&b.p, pb, err, sizeof(err)), 0, "%s", err);
	gs_profile_init(&ra);
	gs_profile_init(&rb);
	gs_profile_init(&m);
	cr_assert_eq(gs_read_pprof(pa, &ra, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_read_pprof(pb, &rb, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_profile_merge(&m, &ra, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_profile_merge(&m, &rb, err, sizeof(err)), 0, "%s", err);
	totals(&a.p, ta, -1, NULL);
	totals(&b.p, tb, -1, NULL);
	totals(&m, tm, -1, NULL);
	for (int k = 0; k < GS_NVALUES; k++)
		cr_assert_eq(tm[k], ta[k] + tb[k], "column %s", gs_value_type[k]);
	totals(&m, tm, 1, "node-b");
	cr_assert_eq(tm[GS_V_SAMPLES], tb[GS_V_SAMPLES]);
	unlink(pa);
	unlink(pb);
	gs_profile_free(&a.p);
	gs_profile_free(&b.p);
	gs_profile_free(&ra);
	gs_profile_free(&rb);
	gs_profile_free(&m);
}
