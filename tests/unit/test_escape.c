// SPDX-License-Identifier: MIT
/* Terminal escaping of target strings and UTF-8 validity of folded names. */
#include <criterion/criterion.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"

static const char *esc(const char *in)
{
	static char buf[256];
	gs_term_escape(in, buf, sizeof(buf));
	return buf;
}

Test(escape, terminal)
{
	cr_assert_str_eq(esc("plain name (f.py:3)"), "plain name (f.py:3)");
	cr_assert_str_eq(esc("caf\xc3\xa9 \xe6\x97\xa5"), "caf\xc3\xa9 \xe6\x97\xa5", "UTF-8 kept");
	cr_assert_str_eq(esc("a\x1b[31mb\x07"), "a\\x1b[31mb\\x07");
	cr_assert_str_eq(esc("\x7f\n\t"), "\\x7f\\x0a\\x09");
	cr_assert_str_eq(esc("x\xc2\x9b"
			     "2J"),
			 "x\\u009b2J", "C1 CSI");
	cr_assert_str_eq(esc("\xe2\x80\xae"
			     "exe"),
			 "\\u202eexe", "bidi override");
	cr_assert_str_eq(esc("\xe2\x81\xa6"), "\\u2066", "bidi isolate");
	cr_assert_str_eq(esc("bad\xff\xc0\xaf"), "bad\\xff\\xc0\\xaf", "invalid UTF-8 bytes");
	cr_assert_str_eq(esc("\xed\xa0\x80"), "\\xed\\xa0\\x80", "surrogate");
	cr_assert(!gs_term_needs_escape("ok \xc3\xa9"));
	cr_assert(gs_term_needs_escape("\x1b"));
	char small[6];
	gs_term_escape("ab\x1b", small, sizeof(small));
	cr_assert_str_eq(small, "ab", "never half an escape");
}

Test(escape, view_leaves_profile_alone)
{
	struct gs_profile p;
	gs_profile_init(&p);
	gs_str evil = gs_profile_intern(&p, "q\x1b]0;t\x07");
	gs_str fine = gs_profile_intern(&p, "fine");
	struct gs_term_view v;
	cr_assert_eq(gs_term_view_init(&v, &p), 0);
	cr_assert_neq(v.p, &p);
	cr_assert_str_eq(gs_profile_str(v.p, evil), "q\\x1b]0;t\\x07");
	cr_assert_str_eq(gs_profile_str(v.p, fine), "fine");
	cr_assert_str_eq(gs_profile_str(&p, evil), "q\x1b]0;t\x07", "original untouched");
	gs_term_view_free(&v);
	gs_profile_free(&p);
}

Test(escape, folded_is_valid_utf8)
{
	char out[64];
	gs_folded_escape("a;b\n\xff\xc3\xa9", out, sizeof(out));
	cr_assert_str_eq(out, "a:b \xef\xbf\xbd\xc3\xa9");
	gs_folded_escape("\xe6\x97\xa5\xe6\x97\xa5", out, 5);
	cr_assert_str_eq(out, "\xe6\x97\xa5", "whole characters only");
}
