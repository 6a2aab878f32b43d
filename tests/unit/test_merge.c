/* SPDX-License-Identifier: MIT */
/* gs_py_merge: splicing Python frames into native stacks (leaf first). */
#include <criterion/criterion.h>
#include <errno.h>
#include "gpusample/profile.h"
#include "symbolizer/python.h"

static struct gs_profile p;

static uint32_t native(const char *fn)
{
	struct gs_function f = { .name = gs_profile_intern(&p, fn) };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f) };

	return gs_profile_add_location(&p, 0, 0x1000 + p.n_locations, GS_FRAME_NATIVE, &l, 1);
}

static uint32_t pyloc(const char *fn)
{
	struct gs_function f = { .name = gs_profile_intern(&p, fn), .file = gs_profile_intern(&p, "x.py") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f), .line = 1 };

	return gs_profile_add_location(&p, 0, 0, GS_FRAME_PYTHON, &l, 1);
}

static void setup(void) { gs_profile_init(&p); }
static void teardown(void) { gs_profile_free(&p); }
TestSuite(merge, .init = setup, .fini = teardown);

static void expect(const uint32_t *got, int n, const uint32_t *want, int nwant)
{
	cr_assert_eq(n, nwant, "merged %d frames, want %d", n, nwant);
	for (int i = 0; i < n; i++)
		cr_assert_eq(got[i], want[i], "frame %d: %u, want %u", i, got[i], want[i]);
}

Test(merge, per_frame_groups_310)
{
	/* <= 3.10: one eval frame per Python frame, every frame ENTRY. */
	uint32_t leaf = native("sha256_block"), ev = native("_PyEval_EvalFrameDefault"),
		 call = native("_PyFunction_Vectorcall"), main_ = native("main");
	uint32_t a = pyloc("inner"), b = pyloc("main");
	uint32_t nat[] = { leaf, ev, call, ev, main_ };
	uint32_t py[] = { a, b };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY }, { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	int n = gs_py_merge(&p, nat, 5, py, fr, 2, 0, out, 16);
	uint32_t want[] = { leaf, a, call, b, main_ };

	expect(out, n, want, 5);
}

Test(merge, entry_groups_311_and_cold_part)
{
	/* 3.11+: one eval frame runs several Python frames up to the entry. */
	uint32_t ev = native("_PyEval_EvalFrameDefault"), cold = native("_PyEval_EvalFrameDefault.cold"),
		 c = native("builtin_sorted"), main_ = native("Py_RunMain");
	uint32_t f1 = pyloc("key"), f2 = pyloc("rec"), f3 = pyloc("main"), f4 = pyloc("<module>");
	uint32_t nat[] = { cold, c, ev, main_ };
	uint32_t py[] = { f1, f2, f3, f4 };
	struct gs_py_frame fr[] = { { .flags = 0 }, { .flags = GS_PYF_ENTRY }, { 0 }, { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	int n = gs_py_merge(&p, nat, 4, py, fr, 4, 0, out, 16);
	uint32_t want[] = { f1, f2, c, f3, f4, main_ };

	expect(out, n, want, 6);
}

Test(merge, no_eval_frames_keeps_native_leaf_below_python)
{
	/* Native walk stopped in libpython without frame pointers. */
	uint32_t leaf = native("memcpy"), lp = native("libpython3.11.so+0x1234");
	uint32_t f1 = pyloc("inner"), f2 = pyloc("<module>");
	uint32_t nat[] = { leaf, lp };
	uint32_t py[] = { f1, f2 };
	struct gs_py_frame fr[] = { { 0 }, { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	int n = gs_py_merge(&p, nat, 2, py, fr, 2, 0, out, 16);
	uint32_t want[] = { leaf, lp, f1, f2 };

	expect(out, n, want, 4);
}

Test(merge, leftover_groups_go_after_last_splice_and_truncation_last)
{
	uint32_t ev = native("_PyEval_EvalFrameDefault"), tail = native("_start");
	uint32_t f1 = pyloc("a"), f2 = pyloc("b"), f3 = pyloc("c"), tr = pyloc("[truncated]");
	uint32_t nat[] = { ev, tail };
	uint32_t py[] = { f1, f2, f3 };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY }, { .flags = GS_PYF_ENTRY }, { 0 } };
	uint32_t out[16];
	int n = gs_py_merge(&p, nat, 2, py, fr, 3, tr, out, 16);
	uint32_t want[] = { f1, f2, f3, tr, tail };

	expect(out, n, want, 5);
}

Test(merge, more_eval_frames_than_groups_keep_native)
{
	uint32_t ev = native("_PyEval_EvalFrameDefault");
	uint32_t f1 = pyloc("a");
	uint32_t nat[] = { ev, ev };
	uint32_t py[] = { f1 };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	int n = gs_py_merge(&p, nat, 2, py, fr, 1, 0, out, 16);
	uint32_t want[] = { f1, ev };

	expect(out, n, want, 2);
}

Test(merge, no_python_is_identity_and_small_cap_fails)
{
	uint32_t a = native("f"), b = native("main");
	uint32_t nat[] = { a, b }, out[4];

	expect(out, gs_py_merge(&p, nat, 2, NULL, NULL, 0, 0, out, 4), nat, 2);
	cr_assert_eq(gs_py_merge(&p, nat, 2, NULL, NULL, 0, 0, out, 1), -ENOSPC);
	cr_assert(!gs_py_is_eval_location(&p, a));
	cr_assert(!gs_py_is_eval_location(&p, 0));
	cr_assert(!gs_py_is_eval_location(&p, native("_PyEval_EvalFrameDefaultX")));
}
