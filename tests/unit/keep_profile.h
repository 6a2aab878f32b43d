/* SPDX-License-Identifier: MIT */
/*
 * GS_KEEP_PROFILES=DIR: a unit test that built a profile from fixed inputs
 * writes it as DIR/SUITE.TEST[.N].pb.gz before freeing it, so that
 * scripts/compare-profiles.sh can check that two trees (a refactor and its
 * base) make byte-identical profiles from the same inputs.  Unset: nothing.
 */
#ifndef GS_TEST_KEEP_PROFILE_H
#define GS_TEST_KEEP_PROFILE_H

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpusample/profile.h"
#include "output/output.h"

static inline void gs_test_keep_profile(const struct gs_profile *p)
{
	const char *dir = getenv("GS_KEEP_PROFILES");
	const struct criterion_test *t = criterion_current_test;
	char path[PATH_MAX], err[256];

	if (!dir || !*dir || !t)
		return;
	for (int n = 0; n < 100; n++) {
		snprintf(path, sizeof(path), n ? "%s/%s.%s.%d.pb.gz" : "%s/%s.%s.pb.gz", dir,
			 t->category, t->name, n);
		if (access(path, F_OK))
			break;
	}
	cr_assert_eq(gs_write_pprof(p, path, err, sizeof(err)), 0, "%s", err);
}

#endif
