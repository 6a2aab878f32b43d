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

/* Thread roles (symbolizer/thread_roles.c, one table): label every CPU and
 * off-CPU sample (cuda_device < 0) of a thread with GS_SL_THREAD_ROLE, one
 * of gs_thread_role_name[].  A thread's role comes from its frames: per
 * sample the root-most frame that matches a row of the table, the role with
 * most such samples winning; the thread whose tid is its process's tgid is
 * "main" unless it runs the DataLoader worker loop; a thread matching no row
 * falls back to its name (comm), then "other".  Returns 0 or -ENOMEM. */
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
int gs_thread_roles(struct gs_profile *p);

#endif
