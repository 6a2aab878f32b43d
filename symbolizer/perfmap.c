/* SPDX-License-Identifier: MIT */
/*
 * Perf maps (/tmp/perf-PID.map, written by JITs such as CPython 3.12+'s perf
 * trampoline and oneDNN): one "START SIZE name" line per code region, START
 * and SIZE in hex (with or without 0x).  PID is the process's pid in its own
 * pid namespace and the file lives in its mount namespace, so we read
 * /proc/TGID/root/tmp/perf-NSTGID.map.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "symbolizer/sym_internal.h"

static int pm_cmp(const void *a, const void *b)
{
	const struct gs_perfmap_entry *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* One line's name part is at most this long (longer lines are skipped:
 * no JIT writes them); the whole file is read up to GS_PERFMAP_MAX_BYTES.
 * The target writes this file: it sets no size of ours. */
#define LINE_MAX_BYTES 1024

/* Skip the rest of a line longer than the buffer. */
static void skip_line(FILE *f, size_t *total)
{
	int ch;

	while ((ch = getc(f)) != EOF && ch != '\n')
		(*total)++;
}

static int parse_line(char *line, struct gs_perfmap *pm, size_t *ecap)
{
	char *p = line, *end;
	uint64_t start = strtoull(p, &end, 16);

	if (end == p || (*end != ' ' && *end != '\t'))
		return 0;
	p = end;
	uint64_t size = strtoull(p, &end, 16);
	if (end == p || (*end != ' ' && *end != '\t'))
		return 0;
	while (*end == ' ' || *end == '\t')
		end++;
	if (!*end || !size)
		return 0;
	if (pm->n >= GS_PERFMAP_MAX_ENTRIES)
		return -EFBIG;
	if (gs_grow_from((void **)&pm->e, ecap, pm->n + 1, sizeof(*pm->e), 64))
		return -ENOMEM;
	char *name = strdup(end);
	if (!name)
		return -ENOMEM;
	pm->e[pm->n++] = (struct gs_perfmap_entry){ start, size, name };
	return 0;
}

int gs_perfmap_parse(FILE *f, struct gs_perfmap *pm)
{
	char line[LINE_MAX_BYTES];
	size_t ecap = 0, total = 0;
	int err = 0;

	memset(pm, 0, sizeof(*pm));
	while (!err && total < GS_PERFMAP_MAX_BYTES && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		total += len;
		if (len && line[len - 1] == '\n') {
			line[--len] = 0;
		} else if (!feof(f)) {
			skip_line(f, &total); /* too long: not a perf map line */
			continue;
		}
		err = parse_line(line, pm, &ecap);
	}
	if (err == -EFBIG)
		err = 0; /* keep the first GS_PERFMAP_MAX_ENTRIES regions */
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

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static void stamp(struct gs_perfmap *pm, const struct stat *st)
{
	pm->seen = true;
	pm->dev = st->st_dev;
	pm->ino = st->st_ino;
	pm->size = (uint64_t)st->st_size;
	pm->mtime_ns = mtime_ns(st);
}

bool gs_perfmap_unchanged(const struct gs_perfmap *pm, const char *path)
{
	struct stat st;

	if (!path[0])
		return false;
	if (lstat(path, &st))
		return errno == ENOENT && !pm->seen;
	return pm->seen && st.st_dev == pm->dev && st.st_ino == pm->ino &&
	       (uint64_t)st.st_size == pm->size && mtime_ns(&st) == pm->mtime_ns;
}

int gs_perfmap_read(const char *path, uid_t owner, struct gs_perfmap *pm)
{
	struct stat st;
	FILE *f;
	int fd, err;

	memset(pm, 0, sizeof(*pm));
	/* a regular file, not a link (a FIFO or a device would hang or feed us
	 * forever), and perf's rule: written by the process's user or root */
	fd = gs_open_regular(path, O_NOFOLLOW, &st);
	if (fd < 0)
		return fd;
	if (st.st_uid != owner && st.st_uid != 0) {
		close(fd);
		stamp(pm, &st); /* refused as long as it stays this file */
		return -EPERM;
	}
	if (!(f = fdopen(fd, "r"))) {
		close(fd);
		return -ENOMEM;
	}
	err = gs_perfmap_parse(f, pm);
	fclose(f);
	if (!err) /* as opened: what is appended after that counts as a change */
		stamp(pm, &st);
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
