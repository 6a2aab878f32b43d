/* SPDX-License-Identifier: MIT */
/*
 * Private to output/report_analysis.c (the numbers of the terminal report)
 * and output/report.c (their text): what a renderer reads.  Not a public
 * contract.  The analysis reads the profile once and keeps no text; a
 * renderer names functions, kernels and launch sites from the profile.
 */
#ifndef GS_OUTPUT_REPORT_INT_H
#define GS_OUTPUT_REPORT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "gpusample/profile.h"

/* CPU samples of one function (or, for ids past n_functions, of one
 * address-only location: id - n_functions; past n_functions + n_locations,
 * of the functions without a symbol ("libfoo.so+0x1234") whose nearest
 * named caller is function id - n_functions - n_locations) as leaf (self)
 * and anywhere on the stack, once per stack (total).  The tables skip
 * thread roots and interpreter start-up frames and give the samples of
 * interrupt-enable skid frames to their caller; by_total also leaves out the
 * known plumbing frames (report_analysis.c). */
struct gs_rpt_fn {
	uint32_t fn;
	int64_t self, total;
	/* a row of unnamed code under a caller: one of its functions
	 * ("libfoo.so+0x1a2b", which names the library), GS_RPT_LIBS when they
	 * come from several libraries; 0 for other rows */
	uint32_t unnamed;
	/* a Python function's hottest line for each table, with its samples:
	 * the leaf line with most self samples, and the line of its frames
	 * with most total samples (a stack counts once); line 0: none known */
	int64_t self_line, self_line_n, total_line, total_line_n;
};
#define GS_RPT_LIBS UINT32_MAX

/* A thread with CPU samples, by (pid, tid); or, with n_procs > 0, the
 * threads named `name` of a group of exited workers (pid: their parent,
 * tid 0): n_threads of them in n_procs processes. */
struct gs_rpt_thread {
	uint32_t pid, tid;
	gs_str name, role;
	int64_t samples;
	uint32_t n_threads, n_procs;
};

/* Exited DataLoader workers of one parent, when there are at least
 * GS_RPT_GROUP_MIN of them (a loop that re-creates its workers each epoch):
 * one row in the Processes table and one per thread name in Threads, not
 * thousands. */
#define GS_RPT_GROUP_MIN 8
struct gs_rpt_group {
	uint32_t ppid;
	gs_str comm, role;
	uint32_t n_procs;
	int64_t samples;
	uint32_t first; /* index in p->processes of its first member */
};

/* GPU sample counts keyed by (tag, kernel function, a, b):
 *   GS_RPT_KERNEL  kfn 0, a = kernel function
 *   GS_RPT_REASON  kfn (0: all kernels), a = stall reason string
 *   GS_RPT_LINE    kfn, a = function, b = line
 *   GS_RPT_LAUNCH  kfn, a = innermost Python location of the launch site, b =
 *                  the one above it (0: none; GS_RPT_LAUNCH_UNKNOWN with a 0:
 *                  the launch was never seen) */
enum { GS_RPT_KERNEL = 1, GS_RPT_REASON, GS_RPT_LINE, GS_RPT_LAUNCH };
#define GS_RPT_LAUNCH_UNKNOWN UINT64_MAX
struct gs_rpt_cnt {
	uint32_t tag, kfn;
	uint64_t a, b;
	int64_t v, ni; /* GPU samples, of which not issued */
};

struct gs_rpt {
	const struct gs_profile *p;
	uint8_t *fn_kind;  /* frame kind of each function's first location */
	int64_t cpu_total; /* CPU samples */
	int64_t gpu_total, gpu_ni;
	/* functions with CPU samples, sorted by self and by total (ties by id);
	 * by_total without the plumbing frames: n_total of them */
	struct gs_rpt_fn *by_self, *by_total;
	size_t n_fns, n_total;
	/* threads sorted by samples (ties by tid); CPU samples of each process
	 * (index in p->processes) */
	struct gs_rpt_thread *threads;
	size_t n_threads;
	int64_t *proc_cpu;
	/* groups of exited workers, and each process's group + 1 (0: none) */
	struct gs_rpt_group *groups;
	size_t n_groups;
	uint32_t *proc_group;
	/* GPU counts sorted by (tag, kfn), then by samples; only with GPU samples */
	struct gs_rpt_cnt *cnt;
	size_t n_cnt;
	int64_t gpu_unknown; /* samples under [unknown launch] */
	uint32_t top_kernel; /* function, 0 = none or [unknown kernel] */
	gs_str top_reason;   /* over all kernels */
	int64_t top_reason_n;
};

/* The numbers of the report of p.  0 or -ENOMEM; free with
 * gs_rpt_free even on error. */
int gs_rpt_analyze(const struct gs_profile *p, struct gs_rpt *r);
void gs_rpt_free(struct gs_rpt *r);

/* The range [*b, *e) of r->cnt with (tag, kfn). */
void gs_rpt_cnt_range(const struct gs_rpt *r, uint32_t tag, uint32_t kfn, size_t *b, size_t *e);

#endif
