/* SPDX-License-Identifier: MIT */
/* The three CPython line-table decoders against real code objects: fixtures
 * tests/unit/python_lines/VERSION.txt were written by gen.py under each
 * pyenv CPython 3.8-3.13 and the sid root's 3.14 / 3.15
 * (scripts/sid-root.sh: chroot ROOT python3.14 - < gen.py) (expected lines
 * from co_lines() / dis, i.e. from CPython itself), so every instruction
 * offset of every code object is a case.  3.14 and 3.15 keep 3.11's
 * location-table format.  3.10 is included on purpose (f_lasti in code units, reference E4). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "python/python.h"

static int hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

/* Returns the number of checked offsets; fails the test on a mismatch. */
static int check_fixture(const char *version)
{
	char path[256], line[1 << 16];
	uint8_t table[1 << 15];
	size_t tlen = 0;
	unsigned ver = 0;
	int first = 0, checked = 0, codes = 0;
	char name[128] = "";

	snprintf(path, sizeof(path), "tests/unit/python_lines/%s.txt", version);
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "fixture %s missing (run from the repo root)", path);
	while (fgets(line, sizeof(line), f)) {
		char hex[sizeof(line)];
		unsigned lasti;
		int want;

		if (sscanf(line, "code %x %d %s %127s", &ver, &first, hex, name) == 4) {
			tlen = 0;
			for (size_t i = 0; hex[0] != '-' && hex[i] && hex[i + 1]; i += 2)
				table[tlen++] = (uint8_t)(hexval(hex[i]) << 4 | hexval(hex[i + 1]));
			codes++;
		} else if (sscanf(line, "q %u %d", &lasti, &want) == 2) {
			int got = gs_py_addr2line(ver, table, tlen, first, lasti);

			cr_assert_eq(got, want, "%s %s: offset %u: line %d, CPython says %d",
				     version, name, lasti, got, want);
			checked++;
		}
	}
	fclose(f);
	cr_assert_gt(codes, 5, "%s: fixture has %d code objects", version, codes);
	cr_assert_eq(ver >> 16,
		     (unsigned)(strtoul(version, NULL, 10) << 8 |
				strtoul(strchr(version, '.') + 1, NULL, 10)),
		     "fixture %s holds version %#x", version, ver);
	return checked;
}

Test(python_lines, lnotab_38)
{
	cr_assert_gt(check_fixture("3.8.18"), 1000);
}
Test(python_lines, lnotab_39)
{
	cr_assert_gt(check_fixture("3.9.18"), 1000);
}
Test(python_lines, pep626_310)
{
	cr_assert_gt(check_fixture("3.10.13"), 1000);
}
Test(python_lines, locations_311)
{
	cr_assert_gt(check_fixture("3.11.7"), 1000);
}
Test(python_lines, locations_312)
{
	cr_assert_gt(check_fixture("3.12.1"), 1000);
}
Test(python_lines, locations_313)
{
	cr_assert_gt(check_fixture("3.13.0"), 1000);
}
Test(python_lines, locations_314)
{
	cr_assert_gt(check_fixture("3.14.10"), 1000);
}
Test(python_lines, locations_315)
{
	cr_assert_gt(check_fixture("3.15.2"), 1000);
}

Test(python_lines, not_started_is_firstlineno)
{
	static const uint8_t t[] = { 0x80 | (13 << 3), 0x02 };

	cr_assert_eq(gs_py_line_311(t, sizeof(t), 7, 0xffffffffu), 7);
	cr_assert_eq(gs_py_line_310(t, sizeof(t), 7, 0xffffffffu), 7);
	cr_assert_eq(gs_py_line_lnotab(t, sizeof(t), 7, 0xffffffffu), 7);
}

Test(python_lines, truncated_tables_do_not_overrun)
{
	/* long form whose varints run off the end */
	static const uint8_t t[] = { 0x80 | (14 << 3), 0x40 | 1 };

	cr_assert_eq(gs_py_line_311(t, sizeof(t), 1, 0), -1);
	cr_assert_eq(gs_py_line_310(t, 1, 1, 0), -1);
}

Test(python_lines, checksum_matches_bpf_formula)
{
	/* gs_py_checksum is duplicated in bpf/python.bpf.h; pin its values. */
	cr_assert_eq(gs_py_checksum(0, 0), 0);
	uint32_t x = 12u * 0x9e37u ^ 3u * 0x85ebu;

	cr_assert_eq(gs_py_checksum(12, 3), (uint16_t)(x ^ (x >> 16)));
	cr_assert_neq(gs_py_checksum(12, 3), gs_py_checksum(13, 3));
}

/* Hostile tables push the line past INT_MAX: it wraps as in CPython (built
 * with -fwrapv) instead of being undefined (the ASan+UBSan build traps). */
Test(python_lines, hostile_deltas_wrap)
{
	/* 3.11: code 13 (no columns), length 1, svarint +2^30 (v = 2^31: 6 bytes) */
	uint8_t t[64];
	size_t n = 0;
	for (int k = 0; k < 4; k++) {
		t[n++] = 0x80 | (13 << 3);
		uint32_t v = 1u << 31; /* +2^30 */
		while (v >= 64) {
			t[n++] = 64 | (v & 63);
			v >>= 6;
		}
		t[n++] = (uint8_t)v;
	}
	int l = gs_py_line_311(t, n, 0x7ffffff0, 6); /* the 4th entry */
	cr_assert_neq(l, -2, "returns some line, without UB");
	uint8_t lno[] = { 1, 127, 1, 127, 1, 127 };
	gs_py_line_lnotab(lno, sizeof(lno), 0x7fffffff, 5);
	gs_py_line_310(lno, sizeof(lno), 0x7fffffff, 5);
}
