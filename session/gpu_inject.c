/* SPDX-License-Identifier: MIT */
/*
 * --inject in a session: for each target root, once Python discovery knows
 * its interpreter and no agent is mapped, ask it (inject/inject.h) to load
 * the agent; the GPU host then finds and arms that agent as any dormant
 * one.  Every outcome is said on stderr when it happens and in the
 * profile's notes.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "session/session_int.h"
#include "inject/inject.h"
#include "util/log.h"

/* After the script ran, how long the agent has to show up (mapped, its
 * watcher thread started): dlopen and InitializeInjection take
 * milliseconds. */
#define AGENT_WAIT_MS 5000
#define CUDA_POLL_MS  500 /* how often a job without libcuda is looked at again */

enum {
	INJ_NOT_TRIED = 0,
	INJ_PENDING, /* request written */
	INJ_LOADING, /* script ran, agent not seen yet */
	INJ_DONE,
};

static uint64_t now_ms(void)
{
	return gs_now_ns(CLOCK_MONOTONIC) / 1000000;
}

static int find_state(void *ctx, const struct gs_gpu_proc_info *p)
{
	struct gs_gpu_proc_info *want = ctx;

	if (p->tgid != want->tgid)
		return 0;
	*want = *p;
	return 1;
}

/* The GPU host's state of tgid (NO_AGENT when it has none). */
static enum gs_gpu_proc_state host_state(struct session *s, uint32_t tgid)
{
	struct gs_gpu_proc_info i = { .tgid = tgid, .state = GS_GPU_PROC_NO_AGENT };

	gs_gpu_host_foreach(s->gpu.host, find_state, &i);
	return i.state;
}

/* The outcome: said now and kept for the notes; the staged files go. */
static void finish(struct gs_inject_slot *x, uint32_t tgid, bool refused, const char *what)
{
	snprintf(x->note, sizeof(x->note), "%s", what);
	gs_log("pid %u: --inject: %s%s\n", tgid, refused ? "GPU agent not loaded: " : "", x->note);
	x->phase = INJ_DONE;
	gs_inject_end(x->j); /* withdraws a request not taken, removes the files */
	x->j = NULL;
}

/* Only a job that uses CUDA gets the agent: libcuda mapped (PyTorch maps
 * it when it first touches the GPU, possibly well after the attach). */
static bool uses_cuda(struct session *s, struct gs_inject_slot *x, uint32_t tgid)
{
	const struct gs_proc_maps *m;
	struct gs_proc *p;
	bool found = false;
	uint64_t now = now_ms();

	if (x->since_ms && now - x->since_ms < CUDA_POLL_MS)
		return false;
	x->since_ms = now;
	/* the table's snapshot, re-read when new code was mapped since (the
	 * re-read reaches every handler: libcuda's unwind table too) */
	if (gs_proc_maps_reread(s->rt.pt, tgid, GS_MAPS_CHECK, 0) < 0 ||
	    !(p = gs_proc_get(s->rt.pt, tgid)) || !(m = p->maps))
		return false;
	for (size_t i = 0; i < m->n && !found; i++)
		found = m->m[i].path && strstr(m->m[i].path, "/libcuda.so");
	return found;
}

static void try_start(struct session *s, struct gs_inject_slot *x, uint32_t tgid)
{
	struct gs_py_proc p;
	char agent[PATH_MAX], msg[320];
	int rc;

	if (gs_py_proc_view(s->rt.py, tgid, &p) || p.state == GS_PYS_UNKNOWN)
		return;                                    /* discovery goes on */
	if (gs_gpu_host_agent_mapped(s->gpu.host, tgid)) { /* prepared, or injected before */
		finish(x, tgid, false,
		       "the GPU agent is already loaded: armed as it is, nothing injected");
		return;
	}
	if (p.state != GS_PYS_FOUND) {
		finish(x, tgid, true,
		       "not a CPython process gpusample can read (needs CPython 3.14+)");
		return;
	}
	if (!uses_cuda(s, x, tgid))
		return; /* asked again every CUDA_POLL_MS until the run ends */
	if (!gs_gpu_agent_path(agent, sizeof(agent))) {
		finish(x, tgid, true,
		       "gpusample's agent libgpusample_agent.so is not installed next to it");
		return;
	}
	struct gs_inject_req r = {
		.tgid = tgid,
		.runtime = p.runtime,
		.version_hex = p.version_hex,
		.agent = agent,
		.wait_ms = s->o->inject_wait_ms,
		.now_ms = now_ms(),
	};
	if ((rc = gs_inject_start(&r, &x->j, msg, sizeof(msg)))) {
		finish(x, tgid, true, msg);
		return;
	}
	x->phase = INJ_PENDING;
	x->since_ms = r.now_ms;
	gs_log("pid %u: --inject: asked the interpreter to run %s (loads the GPU agent)\n", tgid,
	       gs_inject_script(x->j));
}

static void follow(struct session *s, struct gs_inject_slot *x, uint32_t tgid)
{
	char msg[320];
	uint64_t now = now_ms();

	if (x->phase == INJ_PENDING) {
		enum gs_inject_state st = gs_inject_poll(x->j, now, msg, sizeof(msg));
		if (st == GS_INJECT_PENDING)
			return;
		if (st != GS_INJECT_RAN) {
			finish(x, tgid, true, msg);
			return;
		}
		gs_log("pid %u: --inject: %s\n", tgid, msg);
		x->phase = INJ_LOADING;
		x->since_ms = now;
	}
	/* Rescanned every tick (the host's own poll waits 500 ms). */
	gs_gpu_host_add_process(s->gpu.host, tgid);
	if (host_state(s, tgid) != GS_GPU_PROC_NO_AGENT) {
		snprintf(msg, sizeof(msg),
			 "the interpreter ran gpusample's script and the GPU agent was loaded "
			 "(%llu ms after the script ran); armed as any dormant agent from then on",
			 (unsigned long long)(now - x->since_ms));
		finish(x, tgid, false, msg);
		return;
	}
	if (now - x->since_ms >= AGENT_WAIT_MS)
		finish(x, tgid, true,
		       "the interpreter ran the script, but the agent did not start within 5 s "
		       "(ctypes missing in the job, or the loader refused the file)");
}

void gs_gpu_inject_tick(struct session *s)
{
	if (!s->o->inject_wait_ms || !s->gpu.host)
		return;
	for (int i = 0; i < s->targets.n_roots; i++) {
		struct gs_inject_slot *x = &s->gpu.injects[i];

		if (x->phase == INJ_NOT_TRIED)
			try_start(s, x, s->targets.roots[i]);
		else if (x->phase != INJ_DONE)
			follow(s, x, s->targets.roots[i]);
	}
}

void gs_gpu_inject_gone(struct session *s, uint32_t tgid)
{
	for (int i = 0; i < s->targets.n_roots; i++) {
		struct gs_inject_slot *x = &s->gpu.injects[i];

		if (s->targets.roots[i] != tgid || !x->j)
			continue;
		gs_inject_abandon(x->j); /* never written again */
		finish(x, tgid, true,
		       x->phase == INJ_PENDING
			   ? "the process exited or exec'd before its interpreter ran the script"
			   : "the process exited or exec'd before the agent started");
	}
}

void gs_gpu_inject_fork(struct session *s, uint32_t parent, uint32_t child)
{
	for (int i = 0; i < s->targets.n_roots; i++)
		if (s->targets.roots[i] == parent && s->gpu.injects[i].phase == INJ_PENDING)
			gs_inject_withdraw_in(s->gpu.injects[i].j, child);
}

void gs_gpu_inject_end(struct session *s)
{
	for (int i = 0; i < s->targets.n_roots; i++) {
		struct gs_inject_slot *x = &s->gpu.injects[i];

		if (x->phase == INJ_NOT_TRIED && x->since_ms)
			finish(x, s->targets.roots[i], true,
			       "the job never mapped libcuda.so during the run: nothing injected");
		else if (x->phase == INJ_PENDING || x->phase == INJ_LOADING)
			finish(x, s->targets.roots[i], true,
			       x->phase == INJ_PENDING
				   ? "the run ended before the interpreter ran the script; the "
				     "request was withdrawn"
				   : "the run ended before the agent started");
		gs_inject_end(x->j);
		x->j = NULL;
	}
}

void gs_gpu_inject_notes(struct session *s)
{
	for (int i = 0; i < s->targets.n_roots; i++)
		if (s->gpu.injects[i].note[0])
			gs_profile_add_note(&s->prof, "pid %u: --inject: %s", s->targets.roots[i],
					    s->gpu.injects[i].note);
}
