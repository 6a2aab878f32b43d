/* SPDX-License-Identifier: MIT */
/*
 * Per-process runtimes of a session, registered as handlers of the one
 * process table (proc/proc.h): the native symbolizer, the CFI unwind
 * tables, the CPython interpreter (discovery -> BPF walker configuration:
 * its handler is here) and the GPU agent (its handler: session/gpu.c).  The
 * stacks these runtimes resolve are merged in session/stacks.c.
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

#define PY_DISCOVERY_WINDOW_NS (5ull * 1000000000ull)

int gs_rt_open(struct session *s)
{
	if (s->o->python) {
		s->py = gs_py_new(&s->prof);
		if (!s->py)
			return -ENOMEM;
	}
	if (s->o->cfi) {
		int rc = gs_cfi_open(gs_sampler_skel(s->sampler)->obj, &s->cfi, s->err,
				     sizeof(s->err));

		/* One ELF cache: each library opened once for symbols and CFI
		 * (cannot fail: no process was added yet). */
		if (!rc && s->sym)
			gs_cfi_set_elf_cache(s->cfi, gs_sym_elf_cache(s->sym));
		/* GS_DEBUG: one line per table built and loaded */
		const char *dbg = getenv("GS_DEBUG");
		if (!rc && dbg && *dbg)
			gs_cfi_set_verbose(s->cfi, true);
		/* GS_CFI_BUDGET_MB: the unwind tables' BPF map memory, all
		 * objects together (default GS_CFI_BPF_BUDGET, 512 MiB) */
		const char *bmb = getenv("GS_CFI_BUDGET_MB");
		if (!rc && bmb && *bmb) {
			char *end;
			unsigned long long mb = strtoull(bmb, &end, 10);
			if (!*end && mb && mb < (1ull << 20))
				gs_cfi_set_budget(s->cfi, mb << 20);
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
			s->cfi = NULL;
		} else if ((rc = gs_cfi_set_async(s->cfi))) {
			gs_log("warning: no table-building thread (%s); tables are "
			       "built on the sampling thread\n",
			       strerror(-rc));
		} else {
			gs_session_attach_builder(s);
		}
	}
	return 0;
}

void gs_rt_close(struct session *s)
{
	if (s->cfi)
		gs_cfi_close(s->cfi);
	if (s->py)
		gs_py_free(s->py);
	s->cfi = NULL;
	s->py = NULL;
}

int gs_session_update_target(struct session *s, const struct gs_procinfo *p)
{
	struct gs_target t = {
		.flags = s->o->children ? GS_TARGET_FOLLOW_CHILDREN : 0,
		.py_cfg_id = p->py_cfg_id,
		.root_tgid = p->proc->root,
	};

	return gs_sampler_add_target(s->sampler, p->proc->tgid, &t);
}

/* Same configuration -> same id: fork-server and spawn workers re-exec the
 * same interpreter, and py_cfgs has only 64 slots. */
static uint32_t py_cfg_id(struct session *s, const struct gs_py_cfg *cfg)
{
	for (uint32_t i = 1; i <= s->n_py_cfgs; i++)
		if (!memcmp(&s->py_cfgs[i - 1], cfg, sizeof(*cfg)))
			return i;
	if (s->n_py_cfgs == sizeof(s->py_cfgs) / sizeof(s->py_cfgs[0]))
		return 0;
	s->py_cfgs[s->n_py_cfgs++] = *cfg;
	if (gs_sampler_set_py_cfg(s->sampler, s->n_py_cfgs, cfg)) {
		s->n_py_cfgs--;
		return 0;
	}
	return s->n_py_cfgs;
}

/* "pid N (comm): why; native stacks only", the consequence said once: the
 * symbolizer's reasons often carry it already ("... (native stacks only)"). */
int gs_rt_note_native_only(struct gs_profile *prof, uint32_t pid, const char *comm, const char *why)
{
	if (strstr(why, "native stacks only"))
		return gs_profile_add_note(prof, "pid %u (%s): %s", pid, comm, why);
	return gs_profile_add_note(prof, "pid %u (%s): %s; native stacks only", pid, comm, why);
}

static void py_discover(struct session *s, struct gs_procinfo *p)
{
	struct gs_py_cfg cfg;
	struct gs_py_info info;
	char msg[512] = "";
	uint64_t now = gs_now_ns(CLOCK_MONOTONIC);
	int rc;

	if (!s->py || p->py_state != GS_PYS_UNKNOWN || p->proc->exited)
		return;
	bool retry = p->py_first_try != 0;

	if (!retry)
		p->py_first_try = now;
	memset(&cfg, 0, sizeof(cfg));
	rc = gs_py_discover(s->py, p->proc->tgid, &cfg, &info, msg, sizeof(msg));
	if (rc == 0) {
		p->py_cfg_id = py_cfg_id(s, &cfg);
		p->py_state = GS_PYS_FOUND;
		p->py_runtime = info.runtime_addr;
		p->py_version = info.version_hex;
		/* Found on a retry: the maps snapshot taken at exec (or first
		 * sight) predates ld.so mapping libpython and its libraries, and
		 * the process may be gone before the end of the run re-reads it
		 * (the symbolizer's and the CFI tables': libpython's table). */
		if (retry)
			gs_proc_maps_reread(s->pt, p->proc->tgid, GS_MAPS_NOW, 0);
		snprintf(p->python, sizeof(p->python), "CPython %s", info.version);
		if (msg[0]) /* a version newer than those known: tried, with a note */
			gs_profile_add_note(&s->prof, "%s", msg);
		gs_session_update_target(s, p);
		return;
	}
	if (rc == -ENOENT || rc == -EAGAIN) {
		/* Not (yet) an initialised interpreter: libpython may still be
		 * loading right after exec. */
		if (now - p->py_first_try <= PY_DISCOVERY_WINDOW_NS)
			return;
		p->py_state = GS_PYS_NONE;
		if (rc == -EAGAIN) { /* CPython, but never walkable: say why */
			p->py_state = GS_PYS_UNSUPPORTED;
			snprintf(p->python, sizeof(p->python), "unsupported Python");
			gs_rt_note_native_only(&s->prof, p->proc->tgid, p->comm, msg);
		}
		return;
	}
	if (rc == -ESRCH) {
		p->py_state = GS_PYS_NONE;
		return;
	}
	p->py_state = GS_PYS_UNSUPPORTED;
	snprintf(p->python, sizeof(p->python), "unsupported Python");
	gs_rt_note_native_only(&s->prof, p->proc->tgid, p->comm, msg);
}

/* ---- Python as a handler of the process table -------------------------------- */

/* The session's state of a table entry: made before the event that
 * announces the entry (session.c, stacks.c); NULL only after ENOMEM, or
 * for an entry a component made that no event announced. */
static struct gs_procinfo *info_of(struct session *s, const struct gs_proc *p)
{
	return gs_procs_get(&s->procs, p->tgid);
}

static int py_h_attach(void *ctx, struct gs_proc *pr, struct gs_elf_obj *o,
		       const struct gs_maps_line *l)
{
	struct session *s = ctx;
	struct gs_procinfo *p = info_of(s, pr);

	if (!p)
		return -ENOMEM;
	/* Seen without a fork record (a descendant found at attach, or one
	 * whose fork record was lost): the process table copied the parent's
	 * Python state, which only a fork child shares -- a descendant may
	 * run another interpreter, or the same one at other addresses (spawn
	 * and forkserver workers, torchrun's workers).  Discover it itself.
	 * After an exec, detach has reset the state already. */
	if (p->py_state != GS_PYS_UNKNOWN || p->py_cfg_id) {
		p->py_state = GS_PYS_UNKNOWN;
		p->py_cfg_id = 0;
		p->py_first_try = 0;
		p->python[0] = '\0';
		py_discover(s, p);
		if (p->py_state != GS_PYS_FOUND)
			gs_session_update_target(s, p); /* drop the copied py_cfg_id */
	} else {
		py_discover(s, p);
	}
	return 0;
}

static int py_h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *pr)
{
	struct session *s = ctx;
	struct gs_procinfo *child = info_of(s, pr);

	/* Same address space: the BPF fork handler copied the targets entry,
	 * py_cfg_id included; user space shares caches and tables. */
	if (s->py)
		gs_py_fork(s->py, pr->ppid, pr->tgid);
	/* The process table copied the parent's Python state as it is now,
	 * but BPF copied it at fork time: a parent discovered in between (a
	 * fresh interpreter that forks its workers at once) left the child's
	 * entry without a py_cfg_id.  Push the current one. */
	if (child && child->py_state == GS_PYS_FOUND && gs_proc_alive(pr->tgid))
		gs_session_update_target(s, child);
	return 0;
}

static void py_h_detach(void *ctx, struct gs_proc *pr, bool exec)
{
	struct session *s = ctx;
	struct gs_procinfo *p = info_of(s, pr);

	if (!exec) {
		if (s->py)
			gs_py_exit(s->py, pr->tgid);
		return;
	}
	/* A new image: the old interpreter configuration is meaningless now. */
	if (p) {
		p->py_state = GS_PYS_UNKNOWN;
		p->py_cfg_id = 0;
		p->py_first_try = 0;
		p->python[0] = '\0';
		gs_session_update_target(s, p);
	}
	if (s->py)
		gs_py_exec(s->py, pr->tgid);
}

static void py_h_tick(void *ctx)
{
	struct session *s = ctx;

	for (size_t i = 0; i < s->procs.n; i++) /* in order of first sight */
		py_discover(s, s->procs.all[i]);
}

static void py_h_report(void *ctx, struct gs_profile *prof)
{
	struct session *s = ctx;
	struct gs_py_stats st;

	if (!s->py)
		return;
	gs_py_get_stats(s->py, &st);
	if (!st.codes_read && !st.codes_failed)
		return;
	gs_profile_add_comment(
	    prof,
	    "python code objects: %llu read (%llu of them freed but "
	    "intact), %llu unreadable (reused or process gone before they were "
	    "read); %llu of %llu frames of distinct stacks are [unknown python]",
	    (unsigned long long)st.codes_read, (unsigned long long)st.codes_freed,
	    (unsigned long long)st.codes_failed, (unsigned long long)st.frames_unknown,
	    (unsigned long long)st.frames);
}

/* ---- registration ------------------------------------------------------------ */

int gs_rt_register(struct session *s)
{
	const struct gs_proc_handler py = {
		.name = "python",
		.ctx = s,
		.attach = py_h_attach,
		.fork = py_h_fork,
		.detach = py_h_detach,
		.tick = py_h_tick,
		.report = py_h_report,
	};
	const struct gs_proc_handler session = { .name = "session" };
	struct gs_proc_handler h;
	int rc;

	s->pt = gs_proc_table_new(gs_sym_elf_cache(s->sym));
	if (!s->pt)
		return -ENOMEM;
	/* The session's own per-process state (struct gs_procinfo): a slot
	 * without ops, made by gs_procs_add before each announcing event. */
	if ((rc = gs_proc_slots_init(&s->procs, "session", sizeof(struct gs_procinfo))) ||
	    (rc = gs_proc_register(s->pt, &session)) < 0 ||
	    (rc = gs_proc_slots_bind(&s->procs, s->pt, rc)))
		return rc;
	/* In this order at each event: the symbolizer's snapshot, the CFI
	 * tables, Python discovery, the GPU agent (a re-read Python or the
	 * GPU agent asks proc/ for reaches the first two through
	 * maps_changed). */
	gs_sym_proc_handler(s->sym, &h);
	if ((rc = gs_proc_register(s->pt, &h)) < 0 || (rc = gs_sym_bind(s->sym, s->pt, rc)))
		return rc;
	if (s->cfi) {
		gs_cfi_proc_handler(s->cfi, &h);
		if ((rc = gs_proc_register(s->pt, &h)) < 0 || (rc = gs_cfi_bind(s->cfi, s->pt, rc)))
			return rc;
	}
	if ((rc = gs_proc_register(s->pt, &py)) < 0 ||
	    (s->py && (rc = gs_py_bind(s->py, s->pt, rc))))
		return rc;
	gs_gpu_proc_handler(s, &h);
	if ((rc = gs_proc_register(s->pt, &h)) < 0)
		return rc;
	/* The symbolizer, the CFI tables, Python and the GPU host keep
	 * their per-process state in their slots. */
	return s->gpu ? gs_gpu_host_bind(s->gpu, s->pt, rc) : 0;
}

void gs_rt_comments(struct session *s)
{
	size_t scanned = 0;

	for (size_t i = 0; i < s->n_samples; i++)
		scanned += (s->raw.items[s->samples[i].stack].flags & GS_CPU_USER_SCAN) != 0;
	if (scanned)
		gs_profile_add_comment(&s->prof,
				       "native stacks: %zu of %zu samples continued past "
				       "code without an unwind table or frame pointer (JIT) by a "
				       "stack scan",
				       scanned, s->n_samples);
	gs_proc_table_report(s->pt, &s->prof);
}
