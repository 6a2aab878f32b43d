/* SPDX-License-Identifier: MIT */
/* One recorded CPU stack -> location ids (gs_sym_cpu_stack, symbolizer.h):
 * the one place where kernel, native and Python frames of a sample are
 * symbolized and merged, for the profiling session and the dump alike. */
#include <errno.h>
#include <string.h>

#include "python/python.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h"

/* Leaf-first user part: native frames, merged with the Python frames where
 * the stack has them; returns the count or -ENOSPC. */
static int user_stack(struct gs_symbolizer *sym, struct gs_py *py, const struct gs_cpu_stack *r,
		      bool interp_frames, uint32_t *out, uint32_t cap)
{
	uint32_t native[GS_MAX_USER_FRAMES], py_locs[GS_MAX_PY_FRAMES];
	uint32_t n_user = r->n_user > GS_MAX_USER_FRAMES ? GS_MAX_USER_FRAMES : r->n_user;
	uint32_t n_py = py ? r->n_python : 0, trunc = 0;
	struct gs_py_range eval[GS_PY_EVAL_RANGES];

	if (n_py > GS_MAX_PY_FRAMES)
		n_py = GS_MAX_PY_FRAMES;
	for (uint32_t i = 0; i < n_user; i++)
		native[i] = gs_sym_native(sym, r->tgid, r->user[i], i > 0);
	for (uint32_t i = 0; i + 1 < n_user; i++)
		native[i] = gs_sym_entry_frame(sym, native[i], native[i + 1]);
	if (!n_py) {
		if (n_user > cap)
			return -ENOSPC;
		memcpy(out, native, n_user * sizeof(*out));
		return (int)n_user;
	}
	for (uint32_t i = 0; i < n_py; i++)
		py_locs[i] = gs_py_location(py, r->tgid, &r->py[i]);
	if (r->flags & GS_CPU_PY_TRUNC)
		trunc = gs_py_truncated_location(py);
	struct gs_py_stack st = {
		.native = native,
		.native_ips = r->user,
		.n_native = n_user,
		.py_locs = py_locs,
		.py_frames = r->py,
		.n_py = n_py,
		.trunc_loc = trunc,
		.py_partial = (r->flags & GS_CPU_PY_ERR) != 0,
		.eval = eval,
		.n_eval = gs_py_eval_ranges(py, r->tgid, eval, GS_PY_EVAL_RANGES),
		.interp_frames = interp_frames,
	};

	return gs_py_merge(gs_sym_profile(sym), &st, out, cap);
}

int gs_sym_cpu_stack(struct gs_symbolizer *sym, struct gs_py *py, const struct gs_cpu_stack *r,
		     bool interp_frames, uint32_t truncated_loc, uint32_t *out, uint32_t cap)
{
	uint32_t n = 0;
	int rc;

	if (cap < r->n_kernel + 1)
		return -ENOSPC;
	for (uint32_t i = 0; i < r->n_kernel; i++)
		out[n++] = gs_sym_kernel(sym, r->kernel[i]);
	rc = user_stack(sym, py, r, interp_frames, out + n, cap - n - 1);
	if (rc < 0)
		return rc;
	n += (uint32_t)rc;
	if ((r->flags & GS_CPU_USER_TRUNC) && truncated_loc)
		out[n++] = truncated_loc;
	return (int)n;
}
