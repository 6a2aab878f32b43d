/* SPDX-License-Identifier: MIT */
/* Python/native stack merge (see gs_py_merge in python.h). */
#include <errno.h>
#include <string.h>
#include "python/python.h"

static bool is_eval_name(const char *n)
{
	static const char *const names[] = { "_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t l = strlen(names[i]);

		/* the split-off part: "_PyEval_EvalFrameDefault.cold" (.cold.123) */
		if (!strncmp(n, names[i], l) && (n[l] == 0 || n[l] == '.'))
			return true;
	}
	return false;
}

bool gs_py_is_eval_location(const struct gs_profile *p, uint32_t loc)
{
	if (!loc || loc > p->n_locations)
		return false;
	const struct gs_location *l = gs_profile_location(p, loc);

	if (l->kind != GS_FRAME_NATIVE)
		return false;
	/* The eval loop is the outermost function of the inline chain. */
	for (uint32_t i = 0; i < l->n_lines; i++) {
		const struct gs_line *ln = &p->lines[l->first_line + i];

		if (ln->function &&
		    is_eval_name(gs_profile_str(p, gs_profile_function(p, ln->function)->name)))
			return true;
	}
	return false;
}

/* Length of the Python group starting at py index i: up to and including
 * the next frame with GS_PYF_ENTRY (or the end). */
static uint32_t group_len(const struct gs_py_frame *f, uint32_t i, uint32_t n)
{
	uint32_t j = i;

	while (j < n && !(f[j].flags & GS_PYF_ENTRY))
		j++;
	return (j < n ? j + 1 : n) - i;
}

static bool in_ranges(const struct gs_py_range *r, uint32_t n, uint64_t pc)
{
	for (uint32_t i = 0; i < n; i++)
		if (pc >= r[i].lo && pc < r[i].hi)
			return true;
	return false;
}

/* Is native frame i an eval-loop activation?  By address when the ranges
 * are known: names fail on stripped code (a .cold part without a symbol)
 * and cannot tell two interpreters in one process apart. */
static bool is_eval(const struct gs_profile *p, const struct gs_py_stack *s, uint32_t i)
{
	if (s->n_eval && s->native_ips)
		/* above the leaf, a return address: the call is just before it */
		return in_ranges(s->eval, s->n_eval, s->native_ips[i] - (i > 0));
	return gs_py_is_eval_location(p, s->native[i]);
}

static uint32_t count_groups(const struct gs_py_frame *f, uint32_t n)
{
	uint32_t g = 0;

	for (uint32_t i = 0; i < n; i += group_len(f, i, n))
		g++;
	return g;
}

/* How many leaf-most activations get no group (see gs_py_merge). */
static uint32_t leaf_skip(const struct gs_profile *p, const struct gs_py_stack *s)
{
	uint32_t acts = 0, groups;

	if (!s->n_py || s->trunc_loc || s->py_partial ||
	    !(s->py_frames[s->n_py - 1].flags & GS_PYF_ENTRY))
		return 0; /* the root end of the Python chain is unknown */
	for (uint32_t i = 0; i < s->n_native; i++)
		acts += is_eval(p, s, i);
	groups = count_groups(s->py_frames, s->n_py);
	return acts > groups ? acts - groups : 0;
}

/* Is file (a mapping's path) the interpreter by its name: python3.11,
 * python3, libpython3.11.so.1.0 (a versioned or debug build too)? */
static bool is_python_file(const char *file)
{
	const char *b = strrchr(file, '/');

	b = b ? b + 1 : file;
	return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

/* File (interned path) of native location loc's mapping, 0 if none. */
static gs_str loc_file(const struct gs_profile *p, uint32_t loc)
{
	if (!loc || loc > p->n_locations)
		return 0;
	const struct gs_location *l = gs_profile_location(p, loc);

	if (l->kind != GS_FRAME_NATIVE || !l->mapping || l->mapping > p->n_mappings)
		return 0;
	return p->mappings[l->mapping - 1].file;
}

/* Is location loc (native) the interpreter's own code?  In the file of one
 * of the eval activations seen (eval_files), else in a file named as the
 * interpreter (a stack whose Python frames were not spliced at an
 * activation: the eval file is then unknown). */
static bool is_interp(const struct gs_profile *p, uint32_t loc, const gs_str *eval_files,
		      uint32_t n_eval_files)
{
	gs_str f = loc_file(p, loc);

	if (!f)
		return false;
	for (uint32_t i = 0; i < n_eval_files; i++)
		if (eval_files[i] == f)
			return true;
	return is_python_file(gs_profile_str(p, f));
}

static bool is_py_loc(const struct gs_profile *p, uint32_t loc)
{
	return loc && loc <= p->n_locations && gs_profile_location(p, loc)->kind == GS_FRAME_PYTHON;
}

/* Drop the interpreter's frames between the leaf-most and the root-most
 * Python frame of out[0..n) (see gs_py_merge); returns the new count. */
static uint32_t fold_interp(const struct gs_profile *p, uint32_t *out, uint32_t n,
			    const gs_str *eval_files, uint32_t n_eval_files)
{
	uint32_t first = n, last = 0, o;

	for (uint32_t i = 0; i < n; i++)
		if (is_py_loc(p, out[i])) {
			if (first == n)
				first = i;
			last = i;
		}
	if (first == n)
		return n;
	o = first;
	for (uint32_t i = first; i < n; i++)
		if (i > last || is_py_loc(p, out[i]) ||
		    !is_interp(p, out[i], eval_files, n_eval_files))
			out[o++] = out[i];
	return o;
}

int gs_py_merge(const struct gs_profile *p, const struct gs_py_stack *s, uint32_t *out,
		uint32_t cap)
{
	gs_str eval_files[4];
	uint32_t n_eval_files = 0;
	uint32_t o = 0, pi = 0, insert_at = 0, n_py = s->n_py;
	uint32_t skip = leaf_skip(p, s);
	bool spliced = false;

#define PUT(x)                          \
	do {                            \
		if (o >= cap)           \
			return -ENOSPC; \
		out[o++] = (x);         \
	} while (0)

	for (uint32_t i = 0; i < s->n_native; i++) {
		if (pi < n_py && is_eval(p, s, i)) {
			gs_str f = loc_file(p, s->native[i]);

			if (f && n_eval_files < 4 &&
			    (!n_eval_files || eval_files[n_eval_files - 1] != f))
				eval_files[n_eval_files++] = f;
			if (skip) { /* an activation without Python frames (yet) */
				skip--;
				PUT(s->native[i]);
				continue;
			}
			uint32_t g = group_len(s->py_frames, pi, n_py);

			for (uint32_t k = 0; k < g; k++)
				PUT(s->py_locs[pi + k]);
			pi += g;
			spliced = true;
			insert_at = o;
			continue;
		}
		PUT(s->native[i]);
	}
	if (!spliced)
		insert_at = o;
	if (pi < n_py || s->trunc_loc) {
		/* Leftover groups go right after the last splice (or above all
		 * native frames): shift the native tail up to make room. */
		uint32_t extra = (n_py - pi) + (s->trunc_loc ? 1 : 0), tail = o - insert_at;

		if (o + extra > cap)
			return -ENOSPC;
		memmove(&out[insert_at + extra], &out[insert_at], tail * sizeof(*out));
		for (uint32_t k = 0; pi < n_py; k++, pi++)
			out[insert_at + k] = s->py_locs[pi];
		if (s->trunc_loc)
			out[insert_at + extra - 1] = s->trunc_loc;
		o += extra;
	}
	if (!s->interp_frames)
		o = fold_interp(p, out, o, eval_files, n_eval_files);
	return (int)o;
#undef PUT
}
