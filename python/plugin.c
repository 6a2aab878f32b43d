/* SPDX-License-Identifier: MIT */
/*
 * Python as a plug-in of the process table (gs_py_plugin, python.h): each
 * process's discovery state in Python's slot, discovery at attach and on
 * every tick for a few seconds after exec, the BPF walker's configurations
 * deduplicated, and every change to BPF state made through the run's
 * handle (struct gs_py_host), never by calling another plug-in.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpusample/procstat.h"
#include "proc/proc.h"
#include "python/python.h"
#include "python/python_int.h"
#include "util/clock.h"

/* A freshly exec'ed interpreter has neither libpython mapped nor its
 * runtime initialised: discovery is retried this long before a process is
 * taken as "not Python". */
#define DISCOVERY_WINDOW_NS (5ull * 1000000000ull)

static struct py_proc *slot(struct gs_py *py, uint32_t tgid)
{
	return gs_proc_slots_get(&py->slots, tgid, true);
}

static void reset(struct py_proc *pp)
{
	pp->state = GS_PYS_UNKNOWN;
	pp->cfg_id = 0;
	pp->first_try = 0;
	pp->name[0] = '\0';
}

/* Same configuration -> same id: fork-server and spawn workers re-exec the
 * same interpreter, and the BPF map has only GS_PY_MAX_CFGS slots. */
static uint32_t cfg_id(struct gs_py *py, const struct gs_py_cfg *cfg)
{
	for (uint32_t i = 1; i <= py->n_cfgs; i++)
		if (!memcmp(&py->cfgs[i - 1], cfg, sizeof(*cfg)))
			return i;
	if (py->n_cfgs == GS_PY_MAX_CFGS)
		return 0;
	py->cfgs[py->n_cfgs++] = *cfg;
	if (py->host.set_cfg(py->host.ctx, py->n_cfgs, cfg)) {
		py->n_cfgs--;
		return 0;
	}
	return py->n_cfgs;
}

int gs_py_note_native_only(struct gs_profile *prof, uint32_t pid, const char *comm, const char *why)
{
	if (strstr(why, "native stacks only"))
		return gs_profile_add_note(prof, "pid %u (%s): %s", pid, comm, why);
	return gs_profile_add_note(prof, "pid %u (%s): %s; native stacks only", pid, comm, why);
}

static void unsupported(struct gs_py *py, struct py_proc *pp, uint32_t tgid, const char *msg)
{
	pp->state = GS_PYS_UNSUPPORTED;
	snprintf(pp->name, sizeof(pp->name), "unsupported Python");
	gs_py_note_native_only(py->p, tgid, py->host.comm(py->host.ctx, tgid), msg);
}

static void found(struct gs_py *py, struct py_proc *pp, uint32_t tgid, const struct gs_py_cfg *cfg,
		  const struct gs_py_info *info, const char *msg, bool retry)
{
	pp->cfg_id = cfg_id(py, cfg);
	pp->state = GS_PYS_FOUND;
	pp->runtime = info->runtime_addr;
	pp->version_hex = info->version_hex;
	/* Found on a retry: the maps read at exec (or first sight) predates
	 * ld.so mapping libpython and its libraries, and the process may be
	 * gone before the end of the run re-reads them. */
	if (retry)
		py->host.maps_grew(py->host.ctx, tgid);
	snprintf(pp->name, sizeof(pp->name), "CPython %s", info->version);
	if (msg[0]) /* a version newer than those known: tried, with a note */
		gs_profile_add_note(py->p, "%s", msg);
	py->host.cfg_changed(py->host.ctx, tgid);
}

static void discover(struct gs_py *py, const struct gs_proc *pr)
{
	struct py_proc *pp = slot(py, pr->tgid);
	struct gs_py_cfg cfg;
	struct gs_py_info info;
	char msg[512] = "";
	uint64_t now = gs_now_ns(CLOCK_MONOTONIC);
	int rc;

	if (!pp || pp->state != GS_PYS_UNKNOWN || pr->exited)
		return;
	bool retry = pp->first_try != 0;

	if (!retry)
		pp->first_try = now;
	memset(&cfg, 0, sizeof(cfg));
	rc = gs_py_discover(py, pr->tgid, &cfg, &info, msg, sizeof(msg));
	if (rc == 0) {
		found(py, pp, pr->tgid, &cfg, &info, msg, retry);
	} else if (rc == -ENOENT || rc == -EAGAIN) {
		/* Not (yet) an initialised interpreter: libpython may still be
		 * loading right after exec. */
		if (now - pp->first_try <= DISCOVERY_WINDOW_NS)
			return;
		pp->state = GS_PYS_NONE;
		if (rc == -EAGAIN) /* CPython, but never walkable: say why */
			unsupported(py, pp, pr->tgid, msg);
	} else if (rc == -ESRCH) {
		pp->state = GS_PYS_NONE;
	} else {
		unsupported(py, pp, pr->tgid, msg);
	}
}

static int h_attach(void *ctx, struct gs_proc *pr, struct gs_elf_obj *o,
		    const struct gs_maps_line *l)
{
	struct gs_py *py = ctx;
	const struct py_proc *parent = gs_proc_slots_get(&py->slots, pr->ppid, false);
	struct py_proc *pp = slot(py, pr->tgid);

	if (!pp)
		return -ENOMEM;
	/* Seen without a fork record (a descendant found at attach, or one
	 * whose fork record was lost): BPF's fork handler copied the parent's
	 * targets entry, py_cfg_id included, which only a fork child shares --
	 * a descendant may run another interpreter, or the same one at other
	 * addresses (spawn and forkserver workers, torchrun's workers).
	 * Discover it itself, and drop the copied id unless found.  After an
	 * exec, detach has reset the state already. */
	bool copied = parent && pr->ppid != pr->tgid &&
		      (parent->state != GS_PYS_UNKNOWN || parent->cfg_id);

	reset(pp);
	discover(py, pr);
	if (copied && pp->state != GS_PYS_FOUND)
		py->host.cfg_changed(py->host.ctx, pr->tgid);
	return 0;
}

static int h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *pr)
{
	struct gs_py *py = ctx;
	const struct py_proc *pp = gs_proc_slots_get(&py->slots, parent->tgid, false);
	struct py_proc *cp = slot(py, pr->tgid);

	if (!cp)
		return -ENOMEM;
	/* Same address space and image: the parent's discovery state, as it
	 * is now; user space shares caches and tables. */
	if (pp) {
		cp->state = pp->state;
		cp->cfg_id = pp->cfg_id;
		cp->first_try = pp->first_try;
		cp->runtime = pp->runtime;
		cp->version_hex = pp->version_hex;
		memcpy(cp->name, pp->name, sizeof(cp->name));
	}
	gs_py_fork(py, parent->tgid, pr->tgid);
	/* BPF copied the parent's targets entry at fork time: a parent
	 * discovered in between (a fresh interpreter that forks its workers at
	 * once) left the child's entry without a py_cfg_id.  Push the current
	 * one. */
	if (cp->state == GS_PYS_FOUND && gs_proc_alive(pr->tgid))
		py->host.cfg_changed(py->host.ctx, pr->tgid);
	return 0;
}

static void h_detach(void *ctx, struct gs_proc *pr, bool exec)
{
	struct gs_py *py = ctx;
	struct py_proc *pp = gs_proc_slots_get(&py->slots, pr->tgid, false);

	if (!exec) {
		gs_py_exit(py, pr->tgid);
		return;
	}
	/* A new image: the old interpreter configuration is meaningless now. */
	if (pp) {
		reset(pp);
		py->host.cfg_changed(py->host.ctx, pr->tgid);
	}
	gs_py_exec(py, pr->tgid);
}

static void h_tick(void *ctx)
{
	struct gs_py *py = ctx;

	for (size_t i = 0; i < gs_proc_count(py->slots.t); i++) { /* in order of first sight */
		const struct gs_proc *pr = gs_proc_at(py->slots.t, i);

		if (pr->announced)
			discover(py, pr);
	}
}

static void h_report(void *ctx, struct gs_profile *prof)
{
	struct gs_py *py = ctx;
	struct gs_py_stats st;

	gs_py_get_stats(py, &st);
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

void gs_py_plugin(struct gs_py *py, const struct gs_py_host *host, struct gs_proc_handler *h)
{
	py->host = *host;
	*h = (struct gs_proc_handler){
		.name = "python",
		.ctx = py,
		.attach = h_attach,
		.fork = h_fork,
		.detach = h_detach,
		.tick = h_tick,
		.report = h_report,
	};
}

int gs_py_proc_view(struct gs_py *py, uint32_t tgid, struct gs_py_proc *out)
{
	const struct py_proc *pp = py ? gs_proc_slots_get(&py->slots, tgid, false) : NULL;

	*out = (struct gs_py_proc){ .state = GS_PYS_UNKNOWN, .name = "" };
	if (!pp)
		return -ENOENT;
	*out = (struct gs_py_proc){
		.state = pp->state,
		.cfg_id = pp->cfg_id,
		.runtime = pp->runtime,
		.version_hex = pp->version_hex,
		.name = pp->name,
	};
	return 0;
}

const struct gs_py_cfg *gs_py_cfg_of(struct gs_py *py, uint32_t tgid)
{
	const struct py_proc *pp = py ? gs_proc_slots_get(&py->slots, tgid, false) : NULL;

	if (!pp || !pp->cfg_id || pp->cfg_id > py->n_cfgs)
		return NULL;
	return &py->cfgs[pp->cfg_id - 1];
}
