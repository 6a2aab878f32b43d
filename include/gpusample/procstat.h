/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/stat, parsed: the one reader for every component that needs a
 * process's parent, state, flags or start time (target checks, the process
 * table, off-CPU seeding, the GPU agent's owner check).
 *
 * comm may hold spaces and parentheses: fields are counted from the last
 * ')'.  Returns 0, -ESRCH when the process does not exist, -EINVAL for a
 * line that does not parse, or another negative errno.
 */
#ifndef GPUSAMPLE_PROCSTAT_H
#define GPUSAMPLE_PROCSTAT_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GS_PF_KTHREAD 0x00200000u

struct gs_proc_stat {
	uint32_t pid, ppid;
	char comm[16];
	char state;          /* R, S, D, Z, ... */
	bool kernel_thread;  /* PF_KTHREAD */
	uint64_t start_time; /* field 22: clock ticks since boot */
};

static inline int gs_proc_stat(uint32_t pid, struct gs_proc_stat *st)
{
	char path[64], buf[1024], *open_paren, *close_paren;
	unsigned long flags = 0;
	unsigned long long start = 0;
	int ppid = 0, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EIO;
	buf[n] = '\0';
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->pid = pid;
	n = close_paren - open_paren - 1;
	if ((size_t)n >= sizeof(st->comm))
		n = sizeof(st->comm) - 1;
	memcpy(st->comm, open_paren + 1, (size_t)n);
	/* after comm: state ppid pgrp session tty_nr tpgid flags minflt
	 * cminflt majflt cmajflt utime stime cutime cstime priority nice
	 * num_threads itrealvalue starttime */
	if (sscanf(close_paren + 1,
		   " %c %d %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u %*d %*d "
		   "%*d %*d %*d %*d %llu",
		   &st->state, &ppid, &flags, &start) != 4)
		return -EINVAL;
	st->ppid = (uint32_t)ppid;
	st->kernel_thread = (flags & GS_PF_KTHREAD) != 0;
	st->start_time = start;
	return 0;
}

/* pid exists and has not exited (a zombie has: its parent just has not
 * reaped it). */
static inline bool gs_proc_alive(uint32_t pid)
{
	struct gs_proc_stat st;

	return gs_proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

#endif
