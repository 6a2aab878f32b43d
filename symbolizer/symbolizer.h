/* SPDX-License-Identifier: MIT */
/*
 * The frames layer above the runtimes: one recorded CPU stack symbolized
 * whole (kernel and native frames from native/, Python frames from python/,
 * merged), and thread roles from symbolized frames.  Used by the profiling
 * session (session/) and `gpusample dump` (dump/) alike.
 */
#ifndef GS_SYMBOLIZER_H
#define GS_SYMBOLIZER_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusample/profile.h"
#include "gpusample/records.h"
#include "native/native.h"
#include "proc/proc.h" /* gs_thread, gs_proc_table */
#include "python/python.h"

/* One recorded CPU stack (the frame runs of a struct gs_cpu_sample, leaf
 * first: records.h) of process tgid, symbolized (symbolizer/cpustack.c):
 * kernel frames first, then the native user frames merged with the Python
 * frames (gs_py_merge, python.h; py NULL or n_python 0: native only), then
 * truncated_loc when flags has GS_CPU_USER_TRUNC (0: none).  The profiling
 * session and `gpusample dump` both take their stacks through here.
 * Python frames' code objects must have been noted (gs_py_note_frames).
 * Writes out[0..return) and returns the count, or -ENOSPC when cap is too
 * small (n_kernel + n_user + n_python + 2 always fits). */
struct gs_py;
struct gs_cpu_stack {
	uint32_t tgid;
	uint16_t flags; /* GS_CPU_* */
	const __u64 *kernel, *user;
	uint32_t n_kernel, n_user;
	const struct gs_py_frame *py;
	uint32_t n_python;
};
int gs_sym_cpu_stack(struct gs_symbolizer *sym, struct gs_py *py, const struct gs_cpu_stack *r,
		     bool interp_frames, uint32_t truncated_loc, uint32_t *out, uint32_t cap);

/* Thread roles (symbolizer/thread_roles.c, one table): every CPU and
 * off-CPU sample (cuda_device < 0) of a thread gets GS_SL_THREAD_ROLE, one
 * of gs_thread_role_name[].  A thread's role comes from its frames: per
 * sample the root-most frame that matches a row of the table, the role with
 * most such samples winning; the thread whose tid is its process's tgid is
 * "main" unless it runs the DataLoader worker loop; a thread matching no row
 * falls back to its name (comm), then "other".
 *
 * The role depends on all of a thread's samples, so it cannot be known when
 * the first one is added.  The votes are kept on the thread's entry in the
 * process table (struct gs_thread) as samples are added: gs_thread_role_vote
 * for each CPU and off-CPU sample, right after gs_profile_add_sample (v
 * caches each stack's and function's role; zero it first, free it with
 * gs_thread_voter_free).  Then one final step, gs_thread_roles_apply, labels
 * the samples of each thread with the role its entry decides: the only
 * label set after a sample is added.  gs_thread_roles does both for a
 * profile built elsewhere (`gpusample dump`), with a table of its own.
 * Each returns 0 or -ENOMEM. */
struct gs_thread_voter {
	uint8_t *fn_role, *st_role; /* role + 1 by function / stack id, 0xff: not yet */
	size_t n_fn, n_st;          /* their lengths */
};
int gs_thread_role_vote(struct gs_thread_voter *v, const struct gs_profile *p, struct gs_thread *th,
			uint32_t stack, gs_str thread_name);
void gs_thread_voter_free(struct gs_thread_voter *v);
int gs_thread_roles_apply(struct gs_profile *p, const struct gs_proc_table *t);
enum gs_thread_role {
	GS_TR_OTHER = 0,
	GS_TR_MAIN,
	GS_TR_DATALOADER_WORKER,
	GS_TR_PIN_MEMORY,
	GS_TR_QUEUE_FEEDER,
	GS_TR_AUTOGRAD,
	GS_TR_INTRA_OP,
	GS_TR_COLLECTIVE,
	GS_NTHREAD_ROLES
};
extern const char *const gs_thread_role_name[GS_NTHREAD_ROLES];
/* The role th's votes so far decide (what gs_thread_roles_apply labels). */
enum gs_thread_role gs_thread_role_decide(const struct gs_profile *p, const struct gs_thread *th);
int gs_thread_roles(struct gs_profile *p);

#endif
