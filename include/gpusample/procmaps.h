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

/* The number at *p (base 16 or 10, at least one digit, no overflow); *p
 * moved past it.  A hand parser: a job can have 65530 lines per process,
 * read again at each change, and sscanf was most of a dump's time. */
static inline int gs_maps_num(char **p, unsigned base, uint64_t *v)
{
	char *s = *p;
	uint64_t x = 0;

	for (;; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		if (x > (UINT64_MAX - d) / base)
			return -EINVAL;
		x = x * base + d;
	}
	if (s == *p)
		return -EINVAL;
	*v = x;
	*p = s;
	return 0;
}

/* The number, then the separator c. */
static inline int gs_maps_field(char **p, unsigned base, uint64_t *v, char c)
{
	if (gs_maps_num(p, base, v) || **p != c)
		return -EINVAL;
	++*p;
	return 0;
}

static inline int gs_maps_parse_line(char *line, struct gs_maps_line *m)
{
	uint64_t major, minor;
	char *p = line, *perms;
	size_t len;

	if (gs_maps_field(&p, 16, &m->start, '-') || gs_maps_field(&p, 16, &m->end, ' '))
		return -EINVAL;
	perms = p;
	p += strcspn(p, " ");
	if (p == perms || p - perms > 7 || *p++ != ' ')
		return -EINVAL;
	m->exec = memchr(perms, 'x', (size_t)(p - 1 - perms)) != NULL;
	if (gs_maps_field(&p, 16, &m->offset, ' ') || gs_maps_field(&p, 16, &major, ':') ||
	    gs_maps_num(&p, 16, &minor) || *p != ' ' || major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	p += strspn(p, " ");
	if (gs_maps_num(&p, 10, &m->inode) || (*p && *p != ' ' && *p != '\n'))
		return -EINVAL;
	m->dev_major = (unsigned)major;
	m->dev_minor = (unsigned)minor;
	m->path = p + strspn(p, " ");
	len = strlen(m->path);
	while (len && (m->path[len - 1] == '\n' || m->path[len - 1] == ' '))
		m->path[--len] = '\0';
	if (!len)
		m->path = NULL;
	return 0;
}

#endif
