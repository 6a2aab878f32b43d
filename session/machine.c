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

/* user + nice + system of root/stat's "cpu" line (all CPUs); 0 unread.
 * irq, softirq and steal are left out: no process's utime + stime has them. */
static uint64_t machine_busy(const char *root)
{
	char path[300];
	unsigned long long user, nice, sys;
	snprintf(path, sizeof(path), "%s/stat", root);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int n = fscanf(f, "cpu %llu %llu %llu", &user, &nice, &sys);
	fclose(f);
	return n == 3 ? user + nice + sys : 0;
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
	s->busy = machine_busy(root);
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
	char comm[32]; /* a comm, or "short-lived processes" */
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

/* Count dt ticks of process pid (0: processes that are gone, no count) to
 * name comm among names[0, *nn). */
static void add_name(struct by_name *names, size_t *nn, const char *comm, uint32_t pid, uint64_t dt)
{
	size_t k = 0;
	if (!dt)
		return;
	while (k < *nn && strncmp(names[k].comm, comm, sizeof(names[k].comm)))
		k++;
	if (k == *nn)
		snprintf(names[(*nn)++].comm, sizeof(names[k].comm), "%s", comm);
	names[k].ticks += dt;
	if (!pid)
		return;
	names[k].n_procs++;
	if (dt > names[k].pid_ticks) {
		names[k].pid = pid;
		names[k].pid_ticks = dt;
	}
}

/* Ticks of the processes outside the job that exited between a and b (see
 * machine.h): the machine's, less those of the processes in b (alive) and
 * of the job's exited ones (its samples' CPU time less job_alive). */
static uint64_t exited_outside(const struct gs_profile *p, const struct gs_cpu_snap *a,
			       const struct gs_cpu_snap *b, uint64_t alive, uint64_t job_alive,
			       long hz)
{
	if (!a->busy || b->busy <= a->busy + alive)
		return 0;
	int64_t job_ns = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (sc->cuda_device < 0 && sc->pid && s->values[GS_V_CPU_NS] > 0)
			job_ns += s->values[GS_V_CPU_NS];
	}
	uint64_t job = (uint64_t)((double)job_ns * (double)hz / 1e9);
	uint64_t job_gone = job > job_alive ? job - job_alive : 0;
	uint64_t gone = b->busy - a->busy - alive;
	return gone > job_gone ? gone - job_gone : 0;
}

/* " (pid P: COMMAND)" or " (K processes; most pid P: COMMAND)" for
 * name x, "exited" for the command of a process gone since. */
static void process_of(const char *root, const struct by_name *x, char *who, size_t len)
{
	char cmd[128];
	bool exited = command_line(root, x->pid, cmd, sizeof(cmd)) != 0;
	int n;

	if (x->n_procs == 1)
		n = snprintf(who, len, " (pid %u", x->pid);
	else
		n = snprintf(who, len, " (%u processes; most pid %u", x->n_procs, x->pid);
	if (n > 0 && (size_t)n < len)
		snprintf(who + n, len - (size_t)n, "%s%s)", exited ? ", " : ": ",
			 exited ? "exited" : cmd);
}

int gs_cpu_snap_comment(struct gs_profile *p, const struct gs_cpu_snap *a,
			const struct gs_cpu_snap *b, uint32_t self_pid, long hz)
{
	if (!a->mono_ns || !b->mono_ns || b->mono_ns <= a->mono_ns || hz <= 0)
		return 0;
	struct by_name *names = calloc(b->n + 2, sizeof(*names));
	size_t nn = 0;
	uint64_t total = 0;
	if (!names)
		return -ENOMEM;
	uint64_t alive = 0, job_alive = 0; /* ticks of every process in b; of the job's */
	for (size_t i = 0; i < b->n; i++) {
		const struct gs_proc_cpu *pc = &b->procs[i];
		uint64_t before = 0; /* started in the window: all of its time */
		const struct gs_proc_cpu *was = bsearch(&pc->pid, a->procs, a->n, sizeof(*a->procs),
							cmp_pid);
		if (was && was->start == pc->start)
			before = was->ticks;
		if (pc->ticks <= before)
			continue;
		uint64_t dt = pc->ticks - before;
		alive += dt;
		bool job = gs_find_process(p, pc->pid);
		job_alive += job ? dt : 0;
		if (pc->pid == self_pid || job)
			continue;
		total += dt;
		add_name(names, &nn, pc->comm, pc->pid, dt);
	}
	uint64_t gone = exited_outside(p, a, b, alive, job_alive, hz);
	total += gone;
	add_name(names, &nn, "short-lived processes", 0, gone);
	qsort(names, nn, sizeof(*names), cmp_ticks);
	double win = (double)(b->mono_ns - a->mono_ns) / 1e9;
	char top[400] = "";
	size_t used = 0;
	for (size_t k = 0; k < nn && k < 3 && names[k].ticks && used < sizeof(top); k++) {
		char comm[64], who[200] = ""; /* short-lived processes: gone, no pid */

		gs_term_escape(names[k].comm, comm, sizeof(comm));
		if (names[k].n_procs)
			process_of(b->root, &names[k], who, sizeof(who));
		used += (size_t)snprintf(top + used, sizeof(top) - used, "%s%s %.2f%s",
					 k ? ", " : "", comm,
					 (double)names[k].ticks / (double)hz / win, who);
	}
	int rc = gs_profile_add_comment(
	    p, "machine CPU: %u CPUs; outside the job %.2f cores over %.2f s (%s)", b->n_cpus,
	    (double)total / (double)hz / win, win, top);
	free(names);
	return rc;
}
