/* SPDX-License-Identifier: MIT */
/* The threads of a process: /proc/TGID/task (gs_proc_for_each_tid) and
 * a thread's kernel wait (gs_proc_task_kstack). */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int gs_proc_task_kstack(uint32_t tgid, uint32_t tid, int (*fn)(void *ctx, const char *func),
			void *ctx)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/stack", tgid, tid);
	if (!(f = fopen(path, "re")))
		return -errno;
	for (int n = 0; n < 64 && fgets(line, sizeof(line), f); n++) {
		char *fn_name = strstr(line, "] ");

		if (!fn_name)
			continue;
		fn_name += 2;
		fn_name[strcspn(fn_name, "+ \n")] = 0;
		if (*fn_name && fn(ctx, fn_name))
			break;
	}
	fclose(f);
	return 0;
}

int gs_proc_status_fields(uint32_t pid, size_t n, const char *const keys[], char *const outs[],
			  size_t len)
{
	char path[48], line[1024];
	bool at_start = true; /* fgets splits long lines (Groups:) */
	uint64_t seen = 0;    /* keys found, by index: the first line of each wins */
	size_t found = 0;
	FILE *f;

	if (n > 64)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? -ESRCH : -errno;
	while (found < n && fgets(line, sizeof(line), f)) {
		bool whole = strchr(line, '\n') != NULL;

		for (size_t i = 0; at_start && i < n; i++) {
			size_t k = strlen(keys[i]);
			const char *v;

			if ((seen >> i & 1) || strncmp(line, keys[i], k))
				continue;
			seen |= 1ull << i;
			v = line + k + strspn(line + k, " \t");
			snprintf(outs[i], len, "%.*s", (int)strcspn(v, "\n"), v);
			found++;
			break;
		}
		at_start = whole;
	}
	fclose(f);
	return found == n ? 0 : -ENOENT;
}

int gs_proc_status_field(uint32_t pid, const char *key, char *out, size_t len)
{
	return gs_proc_status_fields(pid, 1, &key, &out, len);
}

int64_t gs_proc_nstgid(uint32_t tgid)
{
	char v[256], *p = v, *end;
	int64_t ns = tgid;
	int rc = gs_proc_status_field(tgid, "NStgid:", v, sizeof(v));

	if (rc == -ENOENT) /* a kernel without pid namespaces in status */
		return tgid;
	if (rc)
		return -ESRCH;
	/* last field: the pid in the innermost namespace */
	for (long long x; (x = strtoll(p, &end, 10)), end != p; p = end)
		ns = x;
	return ns;
}
