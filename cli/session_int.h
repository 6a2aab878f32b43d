/* SPDX-License-Identifier: MIT */
/* State of one profiling session, shared by the cli/session*.c files only. */
#ifndef GS_CLI_SESSION_INT_H
#define GS_CLI_SESSION_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpusample/records.h"
#include "bpf/cfi.h"
#include "bpf/sampler.h"
#include "cli/launch.h"
#include "cli/options.h"
#include "cli/procs.h"
#include "cli/rawstacks.h"
#include "gpusample/profile.h"
#include "symbolizer/python.h"
#include "symbolizer/symbolizer.h"

struct raw_sample {
	uint32_t stack; /* index into rawstacks */
	uint32_t tid;
	uint64_t ktime;
	gs_str comm;
};

struct session {
	const struct gs_options *o;
	struct gs_sampler *sampler;
	struct gs_symbolizer *sym;
	struct gs_py *py;         /* NULL with --no-python */
	struct gs_cfi *cfi;       /* NULL with --no-cfi */
	struct gs_py_cfg py_cfgs[64]; /* ids 1..n_py_cfgs, deduplicated */
	uint32_t n_py_cfgs;
	struct gs_profile prof;
	struct gs_rawstacks raw;
	struct raw_sample *samples;
	size_t n_samples, cap_samples;
	struct gs_proctab procs;
	struct gs_launch launch;
	bool launched, launch_exited;
	uint64_t t0_mono, t0_wall;
	char prefix[PATH_MAX];
	char err[512];
};


uint64_t gs_now_ns(int clk);

/* cli/runtimes.c: Python discovery and CFI tables per process. */
int gs_rt_open(struct session *s);
void gs_rt_close(struct session *s);
void gs_rt_new_process(struct session *s, struct gs_procinfo *p);   /* first sight */
void gs_rt_fork(struct session *s, struct gs_procinfo *child);
void gs_rt_exec(struct session *s, struct gs_procinfo *p);
void gs_rt_exit(struct session *s, struct gs_procinfo *p);
void gs_rt_tick(struct session *s);   /* from the poll loop */
void gs_rt_new_stack(struct session *s, const struct gs_rawstack *r);
/* Leaf-first user part of a stack (native + Python merged); returns count. */
int gs_rt_user_stack(struct session *s, const struct gs_rawstack *r, uint32_t *out, uint32_t cap);
/* Push the targets entry of p (flags, root, py_cfg_id) to BPF. */
int gs_session_update_target(struct session *s, const struct gs_procinfo *p);

#endif
