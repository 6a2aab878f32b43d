// SPDX-License-Identifier: MIT
/* The GPU agent as a handler of the process table: see gpu.h
 * (gs_gpu_proc_handler). */
#include "gpu/gpu.h"

#include <errno.h>

#include "proc/proc.h"
#include "util/log.h"

/* Right before the agent in tgid is armed, the hook prepares what its
 * launch stacks need (they run through the agent, libcupti and libcuda,
 * mapped since the last snapshots); then attaching the probes arms it. */
static void prepare_and_arm(struct gs_gpu_plugin *g)
{
	uint32_t tgid;

	while ((tgid = gs_gpu_host_next_ready(g->host))) {
		if (g->hooks.prepare)
			g->hooks.prepare(g->hooks.ctx, tgid);
		gs_gpu_host_arm(g->host, tgid); /* an error is in the process info */
	}
}

static int say_refused(void *ctx, const struct gs_gpu_proc_info *p)
{
	if (p->tgid != *(const uint32_t *)ctx)
		return 0;
	gs_log("pid %u: %s\n", p->tgid, p->message);
	return 1;
}

static void add_process(struct gs_gpu_plugin *g, uint32_t tgid)
{
	if (!g->host)
		return;
	/* A second gpusample on an armed agent is told at once, not only in
	 * the report at the end. */
	if (gs_gpu_host_add_process(g->host, tgid) == -EBUSY)
		gs_gpu_host_foreach(g->host, say_refused, &tgid);
	prepare_and_arm(g);
}

static int gpu_h_attach(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
			const struct gs_maps_line *l)
{
	add_process(ctx, p->tgid);
	return 0;
}

static int gpu_h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *child)
{
	struct gs_gpu_plugin *g = ctx;

	if (g->hooks.fork)
		g->hooks.fork(g->hooks.ctx, parent->tgid, child->tgid);
	add_process(g, child->tgid);
	return 0;
}

static void gpu_h_detach(void *ctx, struct gs_proc *p, bool exec)
{
	struct gs_gpu_plugin *g = ctx;

	if (g->hooks.gone)
		g->hooks.gone(g->hooks.ctx, p->tgid);
	/* An exec's attach looks for the agent in the new image. */
	if (!exec && g->host)
		gs_gpu_host_remove_process(g->host, p->tgid);
}

static void gpu_h_tick(void *ctx)
{
	struct gs_gpu_plugin *g = ctx;

	if (!g->host)
		return;
	if (g->hooks.tick)
		g->hooks.tick(g->hooks.ctx);
	gs_gpu_host_poll(g->host);
	prepare_and_arm(g);
	gs_gpu_host_summary(g->host, g->summary, sizeof(g->summary));
}

void gs_gpu_proc_handler(struct gs_gpu_plugin *g, struct gs_proc_handler *h)
{
	static const struct gs_proc_handler ops = {
		.name = "gpu",
		.attach = gpu_h_attach,
		.fork = gpu_h_fork,
		.detach = gpu_h_detach,
		.tick = gpu_h_tick,
	};

	*h = ops;
	h->ctx = g;
}
