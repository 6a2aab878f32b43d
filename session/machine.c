// SPDX-License-Identifier: MIT
/* The machine's CPU time over the window (session/machine.h). */
#include <ctype.h>
#include <stdbool.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/machine.h"
#include "output/internal.h"
#include "util/clock.h"
#include "util/escape.h"

/* comm, utime + stime and starttime from a /proc/PID/stat line: comm is
 * the text between the first '(' and the last ')' (it may hold both). */
static int parse_stat(const char *line, struct gs_proc_cpu *pc)
{
	const char *l = strchr(line, '('), *r = strrchr(line, ')');
	unsigned long long ut, st, start;
	if (!l || !r || r < l)
		return -EINVAL;
	size_t n = (size_t)(r - l - 1);
	if (n >= sizeof(pc->comm))
		n = sizeof(pc->comm) - 1;
	memcpy(pc->comm, l + 1, n);
	pc->comm[n] = 0;
	/* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime(14) stime(15) cutime cstime prio nice threads
	 * itreal starttime(22) */
	if (sscanf(r + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
		   "%*d %*d %llu",
		   &ut, &st, &start) != 3)
		return -EINVAL;
	pc->ticks = ut + st;
	pc->start = start;
	return 0;
}

static int cmp_pid(const void *key, const void *e)
{
	uint32_t k = *(const uint32_t *)key, p = ((const struct gs_proc_cpu *)e)->pid;
	return k < p ? -1 : k > p;
}

static int cmp_proc_pid(const void *a, const void *b)
{
	return cmp_pid(&((const struct gs_proc_cpu *)a)->pid, b);
}

int gs_cpu_snap_take(struct gs_cpu_snap *s, const char *root)
{
	char path[300], line[1024];
	size_t cap = 0;
	memset(s, 0, sizeof(*s));
	snprintf(s->root, sizeof(s->root), "%s", root);
	s->mono_ns = gs_now_ns(CLOCK_MONOTONIC);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	s->n_cpus = n > 0 ? (unsigned)n : 1;
	DIR *d = opendir(root);
	if (!d)
		return -errno;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s/stat", root, e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue; /* gone meanwhile */
		struct gs_proc_cpu pc = { .pid = (uint32_t)strtoul(e->d_name, NULL, 10) };
		bool ok = fgets(line, sizeof(line), f) && !parse_stat(line, &pc);
		fclose(f);
		if (!ok)
			continue;
		if (s->n == cap) {
			size_t nc = cap ? 2 * cap : 512;
			void *np = realloc(s->procs, nc * sizeof(*s->procs));
			if (!np) {
				closedir(d);
				return -ENOMEM;
			}
			s->procs = np;
			cap = nc;
		}
		s->procs[s->n++] = pc;
	}
	closedir(d);
	/* by pid: the stop snapshot pairs each process with its start entry by
	 * binary search (a node can run tens of thousands of processes) */
	qsort(s->procs, s->n, sizeof(*s->procs), cmp_proc_pid);
	return 0;
}

void gs_cpu_snap_free(struct gs_cpu_snap *s)
{
	free(s->procs);
	memset(s, 0, sizeof(*s));
}

struct by_name {
	char comm[16];
	uint64_t ticks;
	uint32_t n_procs;
	uint32_t pid; /* its busiest process */
	uint64_t pid_ticks;
};

static int cmp_ticks(const void *a, const void *b)
{
	const struct by_name *x = a, *y = b;
	return x->ticks < y->ticks ? 1 : x->ticks > y->ticks ? -1 : strcmp(x->comm, y->comm);
}

/* The command line of pid under root, arguments joined by spaces, cut to
 * 60 characters and escaped for a terminal; 0 or -errno (gone).  The
 * process is anyone's: the file is opened without following links and
 * read within bounds. */
static int command_line(const char *root, uint32_t pid, char *out, size_t outlen)
{
	char path[300], raw[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/cmdline", root, pid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, raw, 60);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT; /* a kernel thread, or a zombie */
	while (n > 0 && !raw[n - 1])
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (!raw[i])
			raw[i] = ' ';
	raw[n] = 0;
	gs_term_escape(raw, out, outlen);
	return 0;
}

int gs_cpu_snap_comment(struct gs_profile *p, const struct gs_cpu_snap *a,
			const struct gs_cpu_snap *b, uint32_t self_pid, long hz)
{
	if (!a->mono_ns || !b->mono_ns || b->mono_ns <= a->mono_ns || hz <= 0)
		return 0;
	struct by_name *names = calloc(b->n + 1, sizeof(*names));
	size_t nn = 0;
	uint64_t total = 0;
	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < b->n; i++) {
		const struct gs_proc_cpu *pc = &b->procs[i];
		if (pc->pid == self_pid || gs_find_process(p, pc->pid))
			continue;
		uint64_t before = 0; /* started in the window: all of its time */
		const struct gs_proc_cpu *was = bsearch(&pc->pid, a->procs, a->n, sizeof(*a->procs),
							cmp_pid);
		if (was && was->start == pc->start)
			before = was->ticks;
		if (pc->ticks <= before)
			continue;
		uint64_t dt = pc->ticks - before;
		total += dt;
		size_t k = 0;
		while (k < nn && strcmp(names[k].comm, pc->comm))
			k++;
		if (k == nn)
			memcpy(names[nn++].comm, pc->comm, sizeof(pc->comm));
		names[k].ticks += dt;
		names[k].n_procs++;
		if (dt > names[k].pid_ticks) {
			names[k].pid = pc->pid;
			names[k].pid_ticks = dt;
		}
	}
	qsort(names, nn, sizeof(*names), cmp_ticks);
	double win = (double)(b->mono_ns - a->mono_ns) / 1e9;
	char top[400] = "";
	size_t used = 0;
	for (size_t k = 0; k < nn && k < 3 && names[k].ticks && used < sizeof(top); k++) {
		char comm[64], cmd[128], who[160];

		bool gone = command_line(b->root, names[k].pid, cmd, sizeof(cmd)) != 0;

		gs_term_escape(names[k].comm, comm, sizeof(comm));
		if (names[k].n_procs == 1)
			snprintf(who, sizeof(who), "pid %u", names[k].pid);
		else
			snprintf(who, sizeof(who), "%u processes; most pid %u", names[k].n_procs,
				 names[k].pid);
		snprintf(who + strlen(who), sizeof(who) - strlen(who), "%s%s", gone ? ", " : ": ",
			 gone ? "exited" : cmd);
		used += (size_t)snprintf(top + used, sizeof(top) - used, "%s%s %.2f (%s)",
					 k ? ", " : "", comm,
					 (double)names[k].ticks / (double)hz / win, who);
	}
	int rc = gs_profile_add_comment(
	    p, "machine CPU: %u CPUs; outside the job %.2f cores over %.2f s (%s)", b->n_cpus,
	    (double)total / (double)hz / win, win, top);
	free(names);
	return rc;
}
