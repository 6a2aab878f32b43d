/* SPDX-License-Identifier: MIT */
/* /proc helpers for target selection and the process table of a run. */
#ifndef GS_CLI_PROCS_H
#define GS_CLI_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_proc_stat {
	uint32_t pid, ppid;
	char comm[16];
	char state;         /* R, S, D, Z, ... */
	bool kernel_thread; /* PF_KTHREAD */
};

/* Read /proc/PID/stat.  -ESRCH if the process does not exist. */
int gs_proc_stat(uint32_t pid, struct gs_proc_stat *st);
/* Validate a -p PID: exists, is not a kernel thread.  err gets a one-line
 * message saying what to do. */
int gs_check_target(uint32_t pid, char *err, size_t errlen);
/* Call fn for every live process that descends from one of roots[]. */
int gs_for_each_descendant(const uint32_t *roots, int n_roots,
			   void (*fn)(void *ctx, uint32_t pid, uint32_t ppid), void *ctx);
bool gs_proc_alive(uint32_t pid);

/* Process table of the run: what the report and the role labels need. */
struct gs_procinfo {
	uint32_t pid, ppid, root;
	char comm[16];
	bool exited, is_root, dataloader;
	bool main;        /* role "main": the root, or what a wrapper root runs */
	uint64_t cpu_samples;
	char python[64]; /* "CPython 3.11.7" or a note */
	uint8_t py_state;      /* enum gs_py_state */
	uint32_t py_cfg_id;    /* BPF py_cfgs id, 0 = none */
	uint64_t py_first_try; /* CLOCK_MONOTONIC ns of the first discovery try */
	char gpu[96];    /* GPU agent state */
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

#endif
