/* SPDX-License-Identifier: MIT */
/* `gpusample dump -p PID[,PID...]`: the subcommand's entry.  It resolves the
 * targets (children followed as in sampling), runs the dump engine
 * (dump/dump.h), prints its text and writes the profile files -o asks for. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session/procs.h"
#include "session/session.h"
#include "cli/cli.h"
#include "dump/dump.h"
#include "output/output.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/vec.h"

struct targets {
	struct gs_dump_target *t;
	size_t n, cap;
};

static bool has(const struct targets *ts, uint32_t pid)
{
	for (size_t i = 0; i < ts->n; i++)
		if (ts->t[i].tgid == pid)
			return true;
	return false;
}

static void add_child(void *ctx, uint32_t pid, uint32_t ppid)
{
	struct targets *ts = ctx;
	struct gs_dump_target t = { .tgid = pid, .ppid = ppid };

	/* not this process (a dump of the shell that runs it) */
	if (pid != (uint32_t)getpid() && !has(ts, pid) && ts->n < GS_DUMP_MAX_THREADS)
		GS_PUSH(ts->t, ts->n, ts->cap, t);
}

int gs_dump_main(const struct gs_options *o)
{
	struct targets ts = { 0 };
	struct gs_dump_stats st;
	struct gs_profile prof;
	char err[512], prefix[PATH_MAX];
	int rc;

	if (geteuid() != 0) {
		gs_log("gpusample dump reads other processes' kernel stacks and memory: run it "
		       "with sudo\n");
		return 1;
	}
	for (int i = 0; i < o->n_pids; i++) {
		struct gs_dump_target t = { .tgid = o->pids[i], .is_root = true };

		if (gs_check_target(o->pids[i], err, sizeof(err)))
			goto fail;
		if (!has(&ts, t.tgid) && GS_PUSH(ts.t, ts.n, ts.cap, t))
			goto fail_oom;
	}
	/* %h %p %r for the first -p PID, before the dump (a bad %r stops it) */
	if (o->prefix &&
	    gs_expand_prefix_of(o->prefix, o->pids[0], prefix, sizeof(prefix), err, sizeof(err)))
		goto fail;
	if (o->children)
		gs_for_each_descendant(o->pids, o->n_pids, add_child, &ts);
	gs_profile_init(&prof);
	prof.time_nanos = gs_now_ns(CLOCK_REALTIME);
	prof.default_sample_type = GS_V_SAMPLES; /* one sample per thread */
	struct gs_dump_opts d = {
		.procs = ts.t,
		.n_procs = ts.n,
		.native = o->cfi,
		.python = o->python,
		.interp_frames = o->interp_frames,
		.catch_stops = true,
		.force_proc = getenv("GS_DUMP_PROC") && !strcmp(getenv("GS_DUMP_PROC"), "1"),
	};
	rc = gs_dump_collect(&d, &prof, &st, err, sizeof(err));
	free(ts.t);
	if (rc)
		gs_log("dump failed: %s\n", err);
	else /* the files are written even when printing to stdout failed */
		rc = (o->prefix ? gs_outputs_write_dump(prefix, &prof) != 0 : 0) +
		     (gs_dump_print(&prof, &st, stdout) != 0);
	gs_profile_free(&prof);
	return rc ? 1 : 0;
fail_oom:
	strcpy(err, "out of memory");
fail:
	gs_log("%s\n", err);
	free(ts.t);
	return 1;
}
