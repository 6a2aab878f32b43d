// SPDX-License-Identifier: MIT
/* Counters defined once (include/gpusample/counters.h): the profile comment
 * names every row, survives a pprof round trip, sums over merged inputs, and
 * the report's "dropped:" line lists exactly the non-zero loss counters
 * other than `lost` (absent when there are none). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "output_fixture.h"

static char *report(const struct gs_profile *p)
{
	char *r = fx_report(p);
	cr_assert_not_null(r, "gs_write_report failed");
	return r;
}

/* Occurrences of needle in s. */
static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *at = s; (at = strstr(at, needle)); at++)
		n++;
	return n;
}

Test(counters, every_row_named_once_in_the_comment)
{
	struct gs_profile p;
	uint64_t v[GS_NCOUNTERS], back[GS_NCOUNTERS];
	gs_profile_init(&p);
	for (int c = 0; c < GS_NCOUNTERS; c++)
		v[c] = 1000 + (uint64_t)c;
	cr_assert_eq(gs_profile_add_counters(&p, v), 0);
	cr_assert_eq(p.n_comments, 1);
	const char *s = gs_profile_str(&p, p.comments[0]);
	cr_assert(!strncmp(s, GS_COUNTERS_COMMENT " ", strlen(GS_COUNTERS_COMMENT) + 1), "%s", s);
	for (int c = 0; c < GS_NCOUNTERS; c++) {
		char word[96], name[96];
		snprintf(word, sizeof(word), " %s=%llu", gs_counter_name(c),
			 (unsigned long long)v[c]);
		snprintf(name, sizeof(name), " %s=", gs_counter_name(c));
		cr_assert_eq(count(s, word), 1, "no \"%s\" in %s", word, s);
		cr_assert_eq(count(s, name), 1, "\"%s\" more than once in %s", name, s);
	}
	cr_assert_eq(gs_profile_counters(&p, back), 1);
	cr_assert_arr_eq(back, v, sizeof(v));
	gs_profile_free(&p);
}

Test(counters, pprof_round_trip_and_merge_sum)
{
	struct fx a, b;
	uint64_t va[GS_NCOUNTERS] = { 0 }, vb[GS_NCOUNTERS] = { 0 }, got[GS_NCOUNTERS];
	fx_build(&a);
	fx_build(&b);
	cr_assert_eq(gs_profile_add_comment(&a.p, "gpusample 0.1.0"),
		     0); /* merge wants one version */
	cr_assert_eq(gs_profile_add_comment(&b.p, "gpusample 0.1.0"), 0);
	va[GS_C_py_truncated] = 5;
	va[GS_C_samples] = 100;
	vb[GS_C_py_truncated] = 7;
	vb[GS_C_kstack_errors] = 2;
	vb[GS_C_samples] = 50;
	cr_assert_eq(gs_profile_add_counters(&a.p, va), 0);
	cr_assert_eq(gs_profile_add_counters(&b.p, vb), 0);
	char path[] = "/tmp/gs-counters-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	char err[256];
	cr_assert_eq(gs_write_pprof(&a.p, path, err, sizeof(err)), 0, "%s", err);
	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	cr_assert_eq(gs_profile_counters(&r, got), 1);
	cr_assert_arr_eq(got, va, sizeof(va));
	cr_assert_eq(gs_profile_merge(&r, &b.p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(gs_profile_counters(&r, got), 2);
	cr_assert_eq(got[GS_C_py_truncated], 12);
	cr_assert_eq(got[GS_C_kstack_errors], 2);
	cr_assert_eq(got[GS_C_samples], 150);
	char *rep = report(&r);
	cr_assert_not_null(strstr(rep, "\n  dropped: py_truncated 12, kstack_errors 2\n"), "%s",
			   rep);
	free(rep);
	gs_profile_free(&r);
	gs_profile_free(&a.p);
	gs_profile_free(&b.p);
}

Test(counters, no_dropped_line_without_losses)
{
	struct fx x;
	uint64_t v[GS_NCOUNTERS] = { 0 };
	fx_build(&x);
	char *before = report(&x.p);
	v[GS_C_samples] = 10;
	v[GS_C_lost] = 3; /* has its own line: not on the dropped line */
	v[GS_C_off_stacks] = 4;
	cr_assert_eq(gs_profile_add_counters(&x.p, v), 0);
	char *after = report(&x.p);
	cr_assert_null(strstr(after, "dropped:"), "%s", after);
	cr_assert_str_eq(before, after);
	free(before);
	free(after);
	gs_profile_free(&x.p);
}
