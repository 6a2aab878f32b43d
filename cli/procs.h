/* SPDX-License-Identifier: MIT */
/* /proc helpers for target selection and the process table of a run. */
#ifndef GS_CLI_PROCS_H
#define GS_CLI_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusample/procstat.h" /* gs_proc_stat */

/* Validate a -p PID: exists, is not a kernel thread.  err gets a one-line
 * message saying what to do. */
int gs_check_target(uint32_t pid, char *err, size_t errlen);
/* Call fn for every live process that descends from one of roots[]. */
int gs_for_each_descendant(const uint32_t *roots, int n_roots,
			   void (*fn)(void *ctx, uint32_t pid, uint32_t ppid), void *ctx);
bool gs_proc_alive(uint32_t pid);

/* Ranks of a distributed job, from a process's environment.  Each field is
 * -1 when unknown.  Sources, in precedence order (the first one set wins,
 * field by field): torch.distributed's launcher (RANK, LOCAL_RANK,
 * WORLD_SIZE, GROUP_RANK), Open MPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK,
 * _SIZE), PMI (PMI_RANK, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_LOCALID,
 * SLURM_NTASKS, SLURM_NODEID).  src[] says which source gave each field:
 * torchrun under srun leaves SLURM_PROCID in every worker, so the launcher
 * (Slurm rank only) and its workers (RANK) stay apart. */
enum gs_rank_src { GS_RANK_NONE = 0, GS_RANK_TORCH, GS_RANK_OMPI, GS_RANK_PMI, GS_RANK_SLURM };
struct gs_rank_env {
	int64_t rank, local_rank, world_size, node_rank;
	uint8_t src[4]; /* enum gs_rank_src of each field above, in order */
};
#define GS_RANK_ENV_UNKNOWN ((struct gs_rank_env){ -1, -1, -1, -1, { 0 } })
/* Apply one "KEY=VALUE" entry of len bytes (not NUL-terminated) to r.
 * Values must be plain decimals 0..INT32_MAX, anything else is ignored. */
void gs_rank_env_entry(struct gs_rank_env *r, const char *kv, size_t len);
/* Parse a NUL-separated environment block of n bytes (as /proc/PID/environ). */
void gs_rank_env_parse(struct gs_rank_env *r, const char *buf, size_t n);
/* Read /proc/PID/environ (opened with O_NOFOLLOW, at most 1 MiB read: the
 * target is untrusted).  r is GS_RANK_ENV_UNKNOWN when the file cannot be
 * read (a process that hides it is simply unlabelled); returns 0 or -errno. */
int gs_proc_rank_env(uint32_t pid, struct gs_rank_env *r);

/* Process table of the run: what the report and the role labels need. */
struct gs_procinfo {
	uint32_t pid, ppid, root;
	char comm[16];
	bool exited, is_root, dataloader;
	bool main; /* role "main": the root, or what a wrapper root runs */
	uint64_t cpu_samples;
	char python[64];          /* "CPython 3.11.7" or a note */
	uint8_t py_state;         /* enum gs_py_state */
	uint32_t py_cfg_id;       /* BPF py_cfgs id, 0 = none */
	uint64_t py_first_try;    /* CLOCK_MONOTONIC ns of the first discovery try */
	char gpu[96];             /* GPU agent state */
	struct gs_rank_env ranks; /* from the environment; see gs_proctab_assign_roles */
	bool launcher; /* spawned the rank processes (torchrun, mpirun): no rank labels */
};

/* Python discovery per process: a freshly exec'ed interpreter has neither
 * libpython mapped nor its runtime initialised yet, so discovery is retried
 * for a few seconds before a process is taken as "not Python". */
enum gs_py_state { GS_PYS_UNKNOWN = 0, GS_PYS_FOUND, GS_PYS_NONE, GS_PYS_UNSUPPORTED };

struct gs_proctab {
	struct gs_procinfo *items;
	uint32_t n, cap;
};

struct gs_procinfo *gs_proctab_get(struct gs_proctab *t, uint32_t pid);
struct gs_procinfo *gs_proctab_add(struct gs_proctab *t, uint32_t pid, uint32_t ppid);
void gs_proctab_free(struct gs_proctab *t);
const char *gs_proc_role(const struct gs_procinfo *p);
/* Roles once all processes are known.  Distributed jobs: a rank head is a
 * process with a rank whose parent does not have the same one (source and
 * value); heads without heads below them are "main" (one per rank, its
 * DataLoader workers inherit the rank and belong to it); processes above a
 * head are launchers and lose their rank labels.  A tree without ranks keeps
 * the wrapper rule: a root doing under 5% of the CPU work of its busiest
 * non-DataLoader descendant hands "main" to that descendant. */
void gs_proctab_assign_roles(struct gs_proctab *t);

#endif
