/* SPDX-License-Identifier: MIT */
/*
 * Stacks of the session: CPU-sample records interned (first sight of a
 * process starts its runtimes; a new stack has its Python code objects and
 * maps read while the process lives), raw stacks symbolized into profile
 * stacks (native and Python frames merged), special frames, a thread's
 * samples added with their role votes.  Below
 * session.c, gpu.c and offcpu.c; it calls only procs.c and the
 * components (symbolizer, Python, the process table), nothing back up.
 */
#include <errno.h>
#include <string.h>

#include "session/procs.h"
#include "session/rawstacks.h"
#include "session/session_int.h"
#include "gpusample/profile.h"
#include "python/python.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h"

/* A new raw stack: what must be read while its process lives. */
static void new_stack(struct session *s, const struct gs_rawstack *r)
{
	struct gs_sym_mapping_info mi;

	/* Read code objects now: the process (a DataLoader worker) may be gone
	 * by the end of the run. */
	if (s->rt.py && r->n_python)
		gs_py_note_frames(s->rt.py, r->tgid, gs_rawstack_py(r), r->n_python);
	/* Likewise the maps: a native address outside the snapshot (a library
	 * mapped after exec or dlopened after attach) makes the symbolizer
	 * re-read them now, while the process lives (rate-limited there).
	 * Symbolization itself still waits for the end of the run. */
	for (uint32_t i = 0; i < r->n_user; i++)
		gs_sym_mapping_for(s->rt.sym, r->tgid, r->frames[r->n_kernel + i], &mi);
}

struct gs_procinfo *gs_session_first_sight(struct session *s, uint32_t tgid)
{
	struct gs_proc_stat st;
	struct gs_procinfo *p;

	if (gs_proc_stat(tgid, &st))
		st.ppid = 0;
	p = gs_procs_add(&s->rt.procs, tgid, st.ppid);
	if (p) /* reads its ranks, then attaches the runtimes */
		gs_proc_table_seen(s->rt.pt, tgid, st.ppid);
	return p;
}

int64_t gs_session_intern(struct session *s, const struct gs_rec_cpu_view *v)
{
	bool is_new;
	int64_t idx;

	if (!gs_procs_get(&s->rt.procs, v->s->tgid))
		gs_session_first_sight(s, v->s->tgid);
	idx = gs_rawstacks_intern(
	    &s->stacks.raw, v,
	    v->s->flags & (GS_CPU_USER_TRUNC | GS_CPU_PY_TRUNC | GS_CPU_PY_ERR | GS_CPU_USER_SCAN),
	    &is_new);
	if (idx >= 0 && is_new)
		new_stack(s, &s->stacks.raw.items[idx]);
	return idx;
}

const char *gs_session_role(struct session *s, uint32_t tgid)
{
	struct gs_procinfo *p = gs_procs_get(&s->rt.procs, tgid);

	return p ? gs_procs_role(p) : "other";
}

uint32_t gs_session_special(struct session *s, const char *name)
{
	struct gs_function f = { .name = gs_profile_intern(&s->prof, name) };
	struct gs_line l = { .function = gs_profile_add_function(&s->prof, &f) };

	return gs_profile_add_location(&s->prof, 0, 0, GS_FRAME_SPECIAL, &l, 1);
}

static int64_t symbolize_stack(struct session *s, const struct gs_rawstack *r,
			       uint32_t truncated_loc)
{
	uint32_t locs[GS_MAX_KERNEL_FRAMES + GS_MAX_USER_FRAMES + GS_MAX_PY_FRAMES + 2];
	struct gs_cpu_stack cs = {
		.tgid = r->tgid,
		.flags = r->flags,
		.kernel = r->frames,
		.n_kernel = r->n_kernel,
		.user = r->frames + r->n_kernel,
		.n_user = r->n_user,
		.py = gs_rawstack_py(r),
		.n_python = r->n_python,
	};
	int rc = gs_sym_cpu_stack(s->rt.sym, s->rt.py, &cs, s->o->interp_frames, truncated_loc,
				  locs, sizeof(locs) / sizeof(locs[0]));

	if (rc < 0)
		return rc;
	return gs_profile_add_stack(&s->prof, locs, (uint32_t)rc);
}

int64_t gs_session_stack(struct session *s, const struct gs_rawstack *r)
{
	if (!s->stacks.truncated_loc)
		s->stacks.truncated_loc = gs_session_special(s, "[truncated]");
	return symbolize_stack(s, r, s->stacks.truncated_loc);
}

int gs_session_add_thread_sample(struct session *s, struct gs_thread *th,
				 const struct gs_sample *smp, const struct gs_sample_ctx *c)
{
	struct gs_profile *p = &s->prof;
	int rc = gs_profile_add_sample(p, smp, c);

	if (rc || !th) /* tid 0: no thread */
		return rc;
	return gs_thread_role_vote(&s->stacks.roles, p, th, smp->stack,
				   gs_profile_ctx(p, &p->samples[p->n_samples - 1])->thread_name);
}
