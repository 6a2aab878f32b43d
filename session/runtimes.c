/* SPDX-License-Identifier: MIT */
/*
 * Per-process runtimes of a session, registered as handlers of the one
 * process table (proc/proc.h): the native symbolizer, the CFI unwind
 * tables, the Python plug-in (python/plugin.c, given the run's handle to
 * BPF state here) and the GPU agent (its handler: session/gpu.c).  The
 * stacks these runtimes resolve are merged in symbolizer/cpustack.c.
 * The session feeds BPF process events into the table (session.c,
 * stacks.c); the table calls the handlers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session/session_int.h"
#include "proc/proc.h"
#include "gpusample.skel.h"
#include "util/log.h"

int gs_rt_open(struct session *s)
{
	if (s->o->python) {
		s->rt.py = gs_py_new(&s->prof);
		if (!s->rt.py)
			return -ENOMEM;
	}
	if (s->o->cfi) {
		int rc = gs_cfi_open(gs_sampler_skel(s->rt.sampler)->obj, &s->rt.cfi, s->err,
				     sizeof(s->err));

		/* One ELF cache: each library opened once for symbols and CFI
		 * (cannot fail: no process was added yet). */
		if (!rc && s->rt.sym)
			gs_cfi_set_elf_cache(s->rt.cfi, gs_sym_elf_cache(s->rt.sym));
		/* GS_DEBUG: one line per table built and loaded */
		const char *dbg = getenv("GS_DEBUG");
		if (!rc && dbg && *dbg)
			gs_cfi_set_verbose(s->rt.cfi, true);
		/* GS_CFI_BUDGET_MB: the unwind tables' BPF map memory, all
		 * objects together (default GS_CFI_BPF_BUDGET, 512 MiB) */
		const char *bmb = getenv("GS_CFI_BUDGET_MB");
		if (!rc && bmb && *bmb) {
			char *end;
			unsigned long long mb = strtoull(bmb, &end, 10);
			if (!*end && mb && mb < (1ull << 20))
				gs_cfi_set_budget(s->rt.cfi, mb << 20);
			else
				gs_log("warning: GS_CFI_BUDGET_MB=%s ignored (MiB, 1 to 2^20)\n",
				       bmb);
		}
		if (rc) {
			/* Frame pointers still work; say why stacks may be short. */
			gs_log("CFI unwinding off: %s\n", s->err);
			gs_profile_add_note(
			    &s->prof,
			    "CFI unwinding off (%s): native stacks use frame pointers only",
			    s->err);
			s->rt.cfi = NULL;
		} else if ((rc = gs_cfi_set_async(s->rt.cfi))) {
			gs_log("warning: no table-building thread (%s); tables are "
			       "built on the sampling thread\n",
			       strerror(-rc));
		} else {
			gs_session_attach_builder(s->rt.cfi);
		}
	}
	return 0;
}

void gs_rt_close(struct session *s)
{
	if (s->rt.cfi)
		gs_cfi_close(s->rt.cfi);
	if (s->rt.py)
		gs_py_free(s->rt.py);
	s->rt.cfi = NULL;
	s->rt.py = NULL;
}

int gs_session_update_target(struct session *s, const struct gs_procinfo *p)
{
	struct gs_py_proc py;
	struct gs_target t = {
		.flags = s->o->children ? GS_TARGET_FOLLOW_CHILDREN : 0,
		.root_tgid = p->proc->root,
	};

	gs_py_proc_view(s->rt.py, p->proc->tgid, &py);
	t.py_cfg_id = py.cfg_id;
	return gs_sampler_add_target(s->rt.sampler, p->proc->tgid, &t);
}

/* ---- the Python plug-in's handle (struct gs_py_host) -------------------------- */

static int py_set_cfg(void *ctx, uint32_t id, const struct gs_py_cfg *cfg)
{
	struct session *s = ctx;

	return gs_sampler_set_py_cfg(s->rt.sampler, id, cfg);
}

static void py_cfg_changed(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;
	struct gs_procinfo *p = gs_procs_get(&s->rt.procs, tgid);

	if (p)
		gs_session_update_target(s, p);
}

static void py_maps_grew(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;

	/* every plug-in that keeps maps hears of them: maps_changed */
	gs_proc_maps_reread(s->rt.pt, tgid, GS_MAPS_NOW, 0);
}

static const char *py_comm(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;
	struct gs_procinfo *p = gs_procs_get(&s->rt.procs, tgid);

	return p ? p->comm : "";
}

/* ---- registration ------------------------------------------------------------ */

/* Each plug-in's registration: its handler(s) on s->rt.pt and its per-process
 * state bound to their slots; 0 (nothing registered) when it is off. */
static int add_symbolizer(struct session *s)
{
	struct gs_proc_handler h;
	int rc;

	gs_sym_proc_handler(s->rt.sym, &h);
	return (rc = gs_proc_register(s->rt.pt, &h)) < 0 ? rc
							 : gs_sym_bind(s->rt.sym, s->rt.pt, rc);
}

static int add_cfi(struct session *s)
{
	struct gs_proc_handler h;
	int rc;

	if (!s->rt.cfi)
		return 0;
	gs_cfi_proc_handler(s->rt.cfi, &h);
	return (rc = gs_proc_register(s->rt.pt, &h)) < 0 ? rc
							 : gs_cfi_bind(s->rt.cfi, s->rt.pt, rc);
}

static int add_python(struct session *s)
{
	const struct gs_py_host host = {
		.ctx = s,
		.set_cfg = py_set_cfg,
		.cfg_changed = py_cfg_changed,
		.maps_grew = py_maps_grew,
		.comm = py_comm,
	};
	struct gs_proc_handler h;
	int rc;

	if (!s->rt.py)
		return 0;
	gs_py_plugin(s->rt.py, &host, &h);
	return (rc = gs_proc_register(s->rt.pt, &h)) < 0 ? rc : gs_py_bind(s->rt.py, s->rt.pt, rc);
}

/* The plug-ins, in the order the table calls them at each event: the
 * symbolizer's snapshot, the CFI tables, Python discovery, the GPU agent, the
 * training-step probes (a
 * re-read Python or the GPU agent asks proc/ for reaches the first two
 * through maps_changed).  They never call each other. */
static int (*const plugins[])(struct session *s) = {
	add_symbolizer, add_cfi, add_python, gs_gpu_register, gs_steps_register, gs_memory_register,
};

int gs_rt_register(struct session *s)
{
	const struct gs_proc_handler session = { .name = "session" };
	int rc;

	s->rt.pt = gs_proc_table_new(gs_sym_elf_cache(s->rt.sym));
	if (!s->rt.pt)
		return -ENOMEM;
	/* The session's own per-process state (struct gs_procinfo): a slot
	 * without ops, made by gs_procs_add before each announcing event. */
	if ((rc = gs_proc_slots_init(&s->rt.procs, "session", sizeof(struct gs_procinfo))) ||
	    (rc = gs_proc_register(s->rt.pt, &session)) < 0 ||
	    (rc = gs_proc_slots_bind(&s->rt.procs, s->rt.pt, rc)))
		return rc;
	for (size_t i = 0; i < sizeof(plugins) / sizeof(plugins[0]); i++)
		if ((rc = plugins[i](s)))
			return rc;
	return 0;
}

void gs_rt_comments(struct session *s)
{
	size_t scanned = 0;

	for (size_t i = 0; i < s->stacks.n_samples; i++)
		scanned += (s->stacks.raw.items[s->stacks.samples[i].stack].flags &
			    GS_CPU_USER_SCAN) != 0;
	if (scanned)
		gs_profile_add_comment(&s->prof,
				       "native stacks: %zu of %zu samples continued past "
				       "code without an unwind table or frame pointer (JIT) by a "
				       "stack scan",
				       scanned, s->stacks.n_samples);
	gs_proc_table_report(s->rt.pt, &s->prof);
}
