/* SPDX-License-Identifier: MIT */
/* /proc helpers for target selection and the process table of a run. */
#ifndef GS_CLI_PROCS_H
#define GS_CLI_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusample/procstat.h" /* gs_proc_stat */
#include "proc/proc.h"          /* gs_proc, gs_proc_slots, gs_rank_env */

/* Validate a -p PID: exists, is not a kernel thread.  err gets a one-line
 * message saying what to do. */
int gs_check_target(uint32_t pid, char *err, size_t errlen);
/* Call fn for every live process that descends from one of roots[]. */
int gs_for_each_descendant(const uint32_t *roots, int n_roots,
			   void (*fn)(void *ctx, uint32_t pid, uint32_t ppid), void *ctx);

/* The session's state of each process: what the report and the role
 * labels need, in the process's slot of the one table (proc/proc.h, which
 * carries its tgid, parent, root, ranks and role).  Made by gs_procs_add
 * at the session's three places that announce a process (a target, a first
 * sight, a fork record), so the session's list of them, in order of
 * creation, is the list of the processes of the run. */
struct gs_procinfo {
	struct gs_proc *proc; /* the table's entry (stable to the end of the run) */
	char comm[16];
	uint32_t ns_pid; /* its pid in its own pid namespace when not tgid, else 0 */
	bool is_root;
	uint64_t cpu_samples;
	char gpu[96]; /* GPU agent state */
	/* The raw stacks it left that are not symbolized yet (indices into
	 * the session's raw stacks): symbolized when it is retired, a while
	 * after its exit, so that its maps snapshots can go. */
	uint32_t *raw;
	size_t n_raw, cap_raw;
	uint64_t exit_ns; /* CLOCK_MONOTONIC ns of its exit record, 0 alive */
};

/* The state of tgid in s (a gs_proc_slots of struct gs_procinfo), or NULL. */
struct gs_procinfo *gs_procs_get(struct gs_proc_slots *s, uint32_t tgid);
/* The state of tgid, made when new with the table's entry of parent ppid
 * (gs_proc_table_add): it starts with the parent's comm (a fork child runs
 * the same image).  NULL on ENOMEM. */
struct gs_procinfo *gs_procs_add(struct gs_proc_slots *s, uint32_t tgid, uint32_t ppid);
/* Role "main" (a target root, what a wrapper runs) or not; a DataLoader
 * worker stays one. */
void gs_procs_set_main(struct gs_procinfo *p, bool main);
void gs_procs_set_dataloader(struct gs_procinfo *p);
const char *gs_procs_role(const struct gs_procinfo *p);
/* Roles once all processes are known.  Distributed jobs: a rank head is a
 * process with a rank whose parent does not have the same one (source and
 * value); heads without heads below them are "main" (one per rank, its
 * DataLoader workers inherit the rank and belong to it); processes above a
 * head are launchers and lose their rank labels.  A tree without ranks keeps
 * the wrapper rule: a root doing under 5% of the CPU work of its busiest
 * non-DataLoader descendant hands "main" to that descendant. */
void gs_procs_assign_roles(struct gs_proc_slots *s);

#endif
