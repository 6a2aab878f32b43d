/* SPDX-License-Identifier: MIT */
/*
 * Perf maps (/tmp/perf-PID.map, written by JITs such as CPython 3.12+'s perf
 * trampoline and oneDNN): one "START SIZE name" line per code region, START
 * and SIZE in hex (with or without 0x).  PID is the process's pid in its own
 * pid namespace and the file lives in its mount namespace, so we read
 * /proc/TGID/root/tmp/perf-NSTGID.map.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "symbolizer/sym_internal.h"

static int pm_cmp(const void *a, const void *b)
{
	const struct gs_perfmap_entry *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int gs_perfmap_parse(FILE *f, struct gs_perfmap *pm)
{
	char *line = NULL;
	size_t cap = 0, ecap = 0;
	ssize_t len;
	int err = 0;
	memset(pm, 0, sizeof(*pm));
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = 0;
		char *p = line, *end;
		uint64_t start = strtoull(p, &end, 16);
		if (end == p || (*end != ' ' && *end != '\t'))
			continue;
		p = end;
		uint64_t size = strtoull(p, &end, 16);
		if (end == p || (*end != ' ' && *end != '\t'))
			continue;
		while (*end == ' ' || *end == '\t')
			end++;
		if (!*end || !size)
			continue;
		if ((err = gs_grow_from((void **)&pm->e, &ecap, pm->n + 1, sizeof(*pm->e), 64)))
			break;
		char *name = strdup(end);
		if (!name) {
			err = -ENOMEM;
			break;
		}
		pm->e[pm->n++] = (struct gs_perfmap_entry){ start, size, name };
	}
	free(line);
	if (err) {
		gs_perfmap_free(pm);
		return err;
	}
	/* stable order; for equal starts the later line (newer code) wins in
	 * find() because it searches for the last entry at or below addr */
	if (pm->n)
		qsort(pm->e, pm->n, sizeof(*pm->e), pm_cmp);
	return 0;
}

int gs_perfmap_read(const char *path, struct gs_perfmap *pm)
{
	memset(pm, 0, sizeof(*pm));
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int err = gs_perfmap_parse(f, pm);
	fclose(f);
	return err;
}

void gs_perfmap_free(struct gs_perfmap *pm)
{
	for (size_t i = 0; i < pm->n; i++)
		free(pm->e[i].name);
	free(pm->e);
	memset(pm, 0, sizeof(*pm));
}

const struct gs_perfmap_entry *gs_perfmap_find(const struct gs_perfmap *pm, uint64_t addr)
{
	size_t lo = GS_UPPER_BOUND(pm->e, pm->n, start, addr);
	/* overlapping regions (code re-JITted in place): the nearest start
	 * that still covers addr */
	for (size_t i = lo; i > 0 && lo - i < 16; i--) {
		const struct gs_perfmap_entry *e = &pm->e[i - 1];
		if (addr - e->start < e->size)
			return e;
	}
	return NULL;
}

int64_t gs_sym_nstgid(uint32_t tgid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	snprintf(path, sizeof(path), "/proc/%u/status", tgid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	int64_t ns = tgid;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "NStgid:", 7))
			continue;
		/* last field: the pid in the innermost namespace */
		char *p = line + 7, *end;
		for (;;) {
			long long v = strtoll(p, &end, 10);
			if (end == p)
				break;
			ns = v;
			p = end;
		}
		break;
	}
	free(line);
	fclose(f);
	return ns;
}

int gs_perfmap_path(uint32_t tgid, char *buf, size_t len)
{
	int64_t ns = gs_sym_nstgid(tgid);
	if (ns < 0)
		return (int)ns;
	snprintf(buf, len, "/proc/%u/root/tmp/perf-%" PRId64 ".map", tgid, ns);
	return 0;
}
