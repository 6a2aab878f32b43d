/* SPDX-License-Identifier: MIT */
/* The threads of a process: /proc/TGID/task (gs_proc_for_each_tid). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "proc/proc.h"

int gs_proc_for_each_tid(uint32_t tgid, void (*fn)(void *ctx, uint32_t tgid, uint32_t tid),
			 void *ctx)
{
	char path[48];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%u/task", tgid);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((d = readdir(dir))) {
		char *end;
		unsigned long tid = strtoul(d->d_name, &end, 10);

		if (!*end && tid && tid <= UINT32_MAX)
			fn(ctx, tgid, (uint32_t)tid);
	}
	closedir(dir);
	return 0;
}
