/* SPDX-License-Identifier: MIT */
/*
 * One line of /proc/PID/maps, parsed in place: the one parser for every
 * component that reads maps (symbolizer snapshots, Python discovery, CFI
 * tables, the GPU agent finder).
 *
 *   start-end perms offset major:minor inode [path]
 *
 * path points into the line (trailing newline and blanks removed), NULL
 * for anonymous memory; pseudo paths such as "[vdso]" and the " (deleted)"
 * suffix are kept as the kernel prints them.  Returns 0, or -EINVAL for a
 * line that does not parse.
 */
#ifndef GPUSAMPLE_PROCMAPS_H
#define GPUSAMPLE_PROCMAPS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct gs_maps_line {
	uint64_t start, end; /* runtime [start, end) */
	uint64_t offset;     /* file offset of start */
	uint64_t inode;      /* 0 for anonymous memory */
	unsigned dev_major, dev_minor;
	bool exec; /* 'x' in perms */
	char *path;
};

static inline int gs_maps_parse_line(char *line, struct gs_maps_line *m)
{
	unsigned long long start, end, off, ino;
	char perms[8];
	int n = 0;
	size_t len;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off,
		   &m->dev_major, &m->dev_minor, &ino, &n) < 7 ||
	    !n)
		return -EINVAL;
	m->start = start;
	m->end = end;
	m->offset = off;
	m->inode = ino;
	m->exec = strchr(perms, 'x') != NULL;
	m->path = line + n;
	len = strlen(m->path);
	while (len && (m->path[len - 1] == '\n' || m->path[len - 1] == ' '))
		m->path[--len] = '\0';
	if (!len)
		m->path = NULL;
	return 0;
}

#endif
