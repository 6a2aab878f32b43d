/* SPDX-License-Identifier: MIT */
/* Unit-test fixtures of hex words ("#" lines are comments): the
 * _Py_DebugOffsets words of real interpreters (test_python_debug,
 * test_inject). */
#ifndef GS_TESTS_FIXTURE_WORDS_H
#define GS_TESTS_FIXTURE_WORDS_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Exactly n words of path (relative to the repo root) into out. */
static inline void fixture_words(const char *path, uint64_t *out, int n)
{
	char line[256];
	int got = 0;
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "fixture %s missing (run from the repo root)", path);
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		if (line[0] == '#')
			continue;
		for (unsigned long long v; got < n && (v = strtoull(p, &end, 16), end != p);
		     p = end)
			out[got++] = v;
	}
	fclose(f);
	cr_assert_eq(got, n, "%s: %d words", path, got);
}

#endif
