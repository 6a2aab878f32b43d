/* SPDX-License-Identifier: MIT */
/* gs_py_merge: splicing Python frames into native stacks (leaf first). */
#include <criterion/criterion.h>
#include <errno.h>
#include "gpusample/profile.h"
#include "python/python.h"

static struct gs_profile p;

static uint32_t native(const char *fn)
{
	struct gs_function f = { .name = gs_profile_intern(&p, fn) };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f) };

	return gs_profile_add_location(&p, 0, 0x1000 + p.n_locations, GS_FRAME_NATIVE, &l, 1);
}

static uint32_t pyloc(const char *fn)
{
	struct gs_function f = { .name = gs_profile_intern(&p, fn),
				 .file = gs_profile_intern(&p, "x.py") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f), .line = 1 };

	return gs_profile_add_location(&p, 0, 0, GS_FRAME_PYTHON, &l, 1);
}

static void setup(void)
{
	gs_profile_init(&p);
}
static void teardown(void)
{
	gs_profile_free(&p);
}
TestSuite(merge, .init = setup, .fini = teardown);

/* Merge by names (no address ranges). */
static int merge(const uint32_t *nat, uint32_t n_nat, const uint32_t *py,
		 const struct gs_py_frame *fr, uint32_t n_py, uint32_t trunc, uint32_t *out,
		 uint32_t cap)
{
	struct gs_py_stack s = { .native = nat,
				 .n_native = n_nat,
				 .py_locs = py,
				 .py_frames = fr,
				 .n_py = n_py,
				 .trunc_loc = trunc };

	return gs_py_merge(&p, &s, out, cap);
}

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
	int n = merge(nat, 5, py, fr, 2, 0, out, 16);
	uint32_t want[] = { leaf, a, call, b, main_ };

	expect(out, n, want, 5);
}

Test(merge, entry_groups_311_and_cold_part)
{
	/* 3.11+: one eval frame runs several Python frames up to the entry. */
	uint32_t ev = native("_PyEval_EvalFrameDefault"),
		 cold = native("_PyEval_EvalFrameDefault.cold"), c = native("builtin_sorted"),
		 main_ = native("Py_RunMain");
	uint32_t f1 = pyloc("key"), f2 = pyloc("rec"), f3 = pyloc("main"), f4 = pyloc("<module>");
	uint32_t nat[] = { cold, c, ev, main_ };
	uint32_t py[] = { f1, f2, f3, f4 };
	struct gs_py_frame fr[] = {
		{ .flags = 0 }, { .flags = GS_PYF_ENTRY }, { 0 }, { .flags = GS_PYF_ENTRY }
	};
	uint32_t out[16];
	int n = merge(nat, 4, py, fr, 4, 0, out, 16);
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
	int n = merge(nat, 2, py, fr, 2, 0, out, 16);
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
	int n = merge(nat, 2, py, fr, 3, tr, out, 16);
	uint32_t want[] = { f1, f2, f3, tr, tail };

	expect(out, n, want, 5);
}

Test(merge, complete_chain_aligns_from_the_root)
{
	/* A generator's eval call returning (3.12 INTERPRETER_EXIT): its
	 * frames are popped, the C activation is still there.  The complete
	 * chain (root frame is an entry) belongs to the OUTER activation. */
	uint32_t ev = native("_PyEval_EvalFrameDefault"), gen = native("gen_send_ex2"),
		 sum = native("builtin_sum"), root = native("_start");
	uint32_t f1 = pyloc("consume"), f2 = pyloc("<module>");
	uint32_t nat[] = { ev, gen, sum, ev, root };
	uint32_t py[] = { f1, f2 };
	struct gs_py_frame fr[] = { { 0 }, { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	int n = merge(nat, 5, py, fr, 2, 0, out, 16);
	uint32_t want[] = { ev, gen, sum, f1, f2, root };

	expect(out, n, want, 6);
}

Test(merge, generator_groups_each_in_own_activation)
{
	uint32_t ev = native("_PyEval_EvalFrameDefault"), gen = native("gen_send_ex2"),
		 sum = native("builtin_sum"), root = native("_start"),
		 leaf = native("PyLong_FromLong");
	uint32_t g = pyloc("gen"), ge = pyloc("<genexpr>"), c = pyloc("consume"),
		 m = pyloc("<module>");
	uint32_t nat[] = { leaf, ev, gen, ev, gen, sum, ev, root };
	uint32_t py[] = { g, ge, c, m };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY },
				    { .flags = GS_PYF_ENTRY },
				    { 0 },
				    { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	int n = merge(nat, 8, py, fr, 4, 0, out, 16);
	uint32_t want[] = { leaf, g, gen, ge, gen, sum, c, m, root };

	expect(out, n, want, 9);
}

Test(merge, incomplete_chain_aligns_from_the_leaf)
{
	/* Root-most Python frame is no entry (3.11+): the walk stopped short
	 * of the root, so what it has belongs to the leaf-most activations. */
	uint32_t ev = native("_PyEval_EvalFrameDefault");
	uint32_t f1 = pyloc("a");
	uint32_t nat[] = { ev, ev };
	uint32_t py[] = { f1 };
	struct gs_py_frame fr[] = { { 0 } };
	uint32_t out[16];
	int n = merge(nat, 2, py, fr, 1, 0, out, 16);
	uint32_t want[] = { f1, ev };

	expect(out, n, want, 2);
	/* a read fault or a truncation says the same */
	struct gs_py_frame fe[] = { { .flags = GS_PYF_ENTRY } };
	struct gs_py_stack s = { .native = nat,
				 .n_native = 2,
				 .py_locs = py,
				 .py_frames = fe,
				 .n_py = 1,
				 .py_partial = true };

	expect(out, gs_py_merge(&p, &s, out, 16), want, 2);
}

Test(merge, by_address_on_stripped_code_and_not_by_name)
{
	/* Stripped binary: the eval loop symbolizes as "python3.11+0x...";
	 * a foreign function that happens to be named like the eval loop (a
	 * second interpreter) is not this process's eval loop. */
	uint32_t ev = native("python3.11+0x52b2f0"), other = native("_PyEval_EvalFrameDefault"),
		 call = native("python3.11+0x53ad53"), root = native("_start");
	uint32_t f1 = pyloc("inner"), f2 = pyloc("<module>");
	uint32_t nat[] = { ev, other, call, ev, root };
	__u64 ips[] = { 0x52b2f0, 0x900001, 0x53ad53, 0x52b100 + 1, 0x401000 };
	struct gs_py_range r[] = { { 0x52b0f0, 0x52b0f0 + 43345 } };
	uint32_t py[] = { f1, f2 };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY }, { .flags = GS_PYF_ENTRY } };
	uint32_t out[16];
	struct gs_py_stack s = { .native = nat,
				 .native_ips = ips,
				 .n_native = 5,
				 .py_locs = py,
				 .py_frames = fr,
				 .n_py = 2,
				 .eval = r,
				 .n_eval = 1 };
	uint32_t want[] = { f1, other, call, f2, root };

	expect(out, gs_py_merge(&p, &s, out, 16), want, 5);
	/* a return address just past the range is the call at its end */
	ips[3] = 0x52b0f0 + 43345;
	expect(out, gs_py_merge(&p, &s, out, 16), want, 5);
	ips[3]++;
	uint32_t want2[] = { f1, f2, other, call, ev, root }; /* leftover after the splice */

	expect(out, gs_py_merge(&p, &s, out, 16), want2, 6);
}

Test(merge, no_python_is_identity_and_small_cap_fails)
{
	uint32_t a = native("f"), b = native("main");
	uint32_t nat[] = { a, b }, out[4];

	expect(out, merge(nat, 2, NULL, NULL, 0, 0, out, 4), nat, 2);
	cr_assert_eq(merge(nat, 2, NULL, NULL, 0, 0, out, 1), -ENOSPC);
	cr_assert(!gs_py_is_eval_location(&p, a));
	cr_assert(!gs_py_is_eval_location(&p, 0));
	cr_assert(!gs_py_is_eval_location(&p, native("_PyEval_EvalFrameDefaultX")));
}

/* A native location in a mapping of file. */
static uint32_t native_in(const char *fn, const char *file)
{
	struct gs_mapping m = { .start = 0x400000,
				.limit = 0x900000,
				.file = gs_profile_intern(&p, file) };
	struct gs_function f = { .name = gs_profile_intern(&p, fn) };
	struct gs_line l = { .function = gs_profile_add_function(&p, &f) };

	return gs_profile_add_location(&p, gs_profile_add_mapping(&p, &m), 0x400000 + p.n_locations,
				       GS_FRAME_NATIVE, &l, 1);
}

Test(merge, interpreter_frames_between_python_frames_fold)
{
	/* Leaf first: torch op called from Python, the interpreter's call
	 * machinery between two Python frames, start-up below <module>. */
	const char *py311 = "/usr/bin/python3.11", *ext = "/usr/lib/libtorch_python.so";
	uint32_t op = native_in("at::add", "/usr/lib/libtorch_cpu.so"),
		 tpcall = native_in("_PyObject_MakeTpCall", py311),
		 helper = native_in("python3.11+0x547b69", py311),
		 ev = native_in("_PyEval_EvalFrameDefault", py311),
		 cb = native_in("THPFunction_apply", ext),
		 vcall = native_in("PyObject_Vectorcall", py311),
		 evalcode = native_in("PyEval_EvalCode", py311),
		 bytesmain = native_in("Py_BytesMain", py311), start = native_in("_start", py311);
	uint32_t f1 = pyloc("step"), f2 = pyloc("main"), f3 = pyloc("<module>");
	uint32_t nat[] = { op, tpcall, helper, ev,       cb,        vcall,
			   ev, vcall,  ev,     evalcode, bytesmain, start };
	uint32_t py[] = { f1, f2, f3 };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY },
				    { .flags = GS_PYF_ENTRY },
				    { .flags = GS_PYF_ENTRY } };
	struct gs_py_stack s = {
		.native = nat, .n_native = 12, .py_locs = py, .py_frames = fr, .n_py = 3
	};
	uint32_t out[32];
	/* the extension's frame (another file) stays between step and main */
	uint32_t want[] = { op, tpcall, helper, f1, cb, f2, f3, evalcode, bytesmain, start };

	expect(out, gs_py_merge(&p, &s, out, 32), want, 10);
	/* --interpreter-frames: everything stays */
	uint32_t all[] = { op, tpcall, helper, f1,       cb,        vcall,
			   f2, vcall,  f3,     evalcode, bytesmain, start };

	s.interp_frames = true;
	expect(out, gs_py_merge(&p, &s, out, 32), all, 12);
}

Test(merge, interpreter_named_by_its_eval_mapping)
{
	/* An interpreter binary of any name (a venv's "bin/py") is the file of
	 * the eval activations; a helper in it between two Python frames folds. */
	uint32_t ev = native_in("_PyEval_EvalFrameDefault", "/opt/venv/bin/py"),
		 helper = native_in("py+0x1234", "/opt/venv/bin/py"),
		 root = native_in("main", "/opt/venv/bin/py");
	uint32_t f1 = pyloc("inner"), f2 = pyloc("outer");
	uint32_t nat[] = { ev, helper, ev, root }, py[] = { f1, f2 };
	struct gs_py_frame fr[] = { { .flags = GS_PYF_ENTRY }, { .flags = GS_PYF_ENTRY } };
	struct gs_py_stack s = {
		.native = nat, .n_native = 4, .py_locs = py, .py_frames = fr, .n_py = 2
	};
	uint32_t out[16], want[] = { f1, f2, root };

	expect(out, gs_py_merge(&p, &s, out, 16), want, 3);
}
