/* SPDX-License-Identifier: MIT */
/*
 * The machine's CPU time over the profile's window, to tell CPU starvation
 * caused by the job from starvation caused by its neighbours: /proc/stat
 * (all CPUs) and every process's utime + stime (/proc/PID/stat), read at
 * the start and at the end of sampling.
 */
#ifndef GS_CLI_MACHINE_H
#define GS_CLI_MACHINE_H

#include <stddef.h>
#include <stdint.h>

#include "gpusample/profile.h"

struct gs_proc_cpu {
	uint32_t pid;
	uint64_t start; /* starttime (ticks after boot): tells a reused pid */
	uint64_t ticks; /* utime + stime */
	char comm[16];
};

struct gs_cpu_snap {
	uint64_t mono_ns;
	unsigned n_cpus;
	char root[256]; /* the /proc it was read from (command lines) */
	uint64_t busy;  /* /proc/stat's user + nice + system ticks, all CPUs; 0 unread */
	struct gs_proc_cpu *procs;
	size_t n;
};

/* root: the /proc to read ("/proc" in use; tests pass a fake tree).
 * 0, or -errno (the snapshot is then empty). */
int gs_cpu_snap_take(struct gs_cpu_snap *s, const char *root);
void gs_cpu_snap_free(struct gs_cpu_snap *s);

/* The profile comment the report reads (output/report_wall.c):
 *   "machine CPU: N CPUs; outside the job X.XX cores over A.AA s (name
 *   X.XX (pid P: COMMAND), name X.XX (K processes; most pid P: COMMAND),
 *   name X.XX (pid P, exited))"
 * outside = the CPU time of every process not in p->processes (and not
 * gpusample itself, self_pid) between a and b, top 3 by name, each with
 * its busiest process's pid and command line (read at b's root, cut to 60
 * characters, escaped for a terminal, as the name is).  Processes that
 * exited between a and b are in neither snapshot: their time is the
 * machine's (/proc/stat) less that of the processes in b and less the
 * job's own exited processes' (the job's CPU samples' time less its
 * processes in b), named "short-lived processes" (no pid). */
int gs_cpu_snap_comment(struct gs_profile *p, const struct gs_cpu_snap *a,
			const struct gs_cpu_snap *b, uint32_t self_pid, long hz);

#endif
