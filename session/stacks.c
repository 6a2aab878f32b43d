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
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "session/procs.h"
#include "session/rawstacks.h"
#include "session/session_int.h"
#include "gpusample/profile.h"
#include "python/python.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h"
#include "util/vec.h"

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
	if (idx >= 0 && is_new) {
		struct gs_procinfo *p = gs_procs_get(&s->rt.procs, v->s->tgid);

		new_stack(s, &s->stacks.raw.items[idx]);
		/* no room: symbolized at the end, its process's snapshots kept */
		if (p)
			(void)GS_PUSH(p->raw, p->n_raw, p->cap_raw, (uint32_t)idx);
	}
	return idx;
}

/* PyTorch 1.x does not name its DataLoader worker threads; a process whose
 * stacks run torch.utils.data's _worker_loop is a worker whatever its comm.
 * Judged as each stack is symbolized, before any sample is built. */
void gs_session_note_dataloader(struct session *s, const struct gs_rawstack *r, uint32_t stack)
{
	const struct gs_profile *p = &s->prof;
	struct gs_procinfo *proc = gs_procs_get(&s->rt.procs, r->tgid);
	const struct gs_stack *st = &p->stacks[stack];

	if (!proc || proc->proc->role == GS_ROLE_DATALOADER)
		return;
	for (uint32_t k = 0; k < st->n; k++) {
		const struct gs_location *l = gs_profile_location(p, p->stack_locs[st->first + k]);

		if (l->kind == GS_FRAME_PYTHON && l->n_lines &&
		    !strcmp(gs_profile_str(
				p, gs_profile_function(p, p->lines[l->first_line].function)->name),
			    "_worker_loop")) {
			gs_procs_set_dataloader(proc);
			return;
		}
	}
}

int gs_session_exited(struct session *s, struct gs_procinfo *p, uint64_t now)
{
	struct gs_session_stacks *k = &s->stacks;

	p->exit_ns = now ? now : 1;
	if (k->retire_head && k->retire_head == k->n_retiring)
		k->retire_head = k->n_retiring = 0; /* all retired: start over */
	return GS_PUSH(k->retiring, k->n_retiring, k->cap_retiring, p->proc->tgid);
}

/* p's stacks symbolized now, its frames freed, its maps snapshots
 * dropped.  A pid handed out again meanwhile (alive) waits for its exit. */
static int retire(struct session *s, struct gs_procinfo *p)
{
	for (size_t i = 0; i < p->n_raw; i++) {
		struct gs_rawstack *r = &s->stacks.raw.items[p->raw[i]];
		int64_t id = r->settled ? (int64_t)r->settled - 1 : gs_session_stack(s, r);

		if (id < 0)
			return (int)id;
		gs_session_note_dataloader(s, r, (uint32_t)id);
		gs_rawstacks_settle(&s->stacks.raw, p->raw[i], (uint32_t)id);
	}
	free(p->raw);
	p->raw = NULL;
	p->n_raw = p->cap_raw = 0;
	gs_proc_table_retire(s->rt.pt, p->proc->tgid);
	return 0;
}

int gs_session_retire_exited(struct session *s, uint64_t now)
{
	struct gs_session_stacks *k = &s->stacks;
	unsigned n = 0;
	int rc = 0;

	while (!rc && k->retire_head < k->n_retiring) {
		struct gs_procinfo *p = gs_procs_get(&s->rt.procs, k->retiring[k->retire_head]);

		if (p && p->exit_ns && now - p->exit_ns < GS_RETIRE_DELAY_NS)
			break;
		k->retire_head++;
		if (p && p->exit_ns && p->proc->exited) {
			rc = retire(s, p);
			n++;
		}
	}
	/* The snapshots freed leave holes of whole pages inside the heap,
	 * which free() keeps: give them back now and then, so that resident
	 * memory follows what is kept. */
	if (n && now - k->trim_ns >= GS_RETIRE_TRIM_NS) {
		malloc_trim(0);
		k->trim_ns = now;
	}
	return rc;
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
	if (r->settled)
		return (int64_t)r->settled - 1;
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
