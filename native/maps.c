/* SPDX-License-Identifier: MIT */
/*
 * The symbolizer's snapshots of proc/'s maps snapshots (the process table
 * reads /proc/PID/maps; this adds modules and perf maps).  Every file that has an executable mapping is
 * opened at once, through /proc/PID/map_files/START-END (root only; also
 * works for deleted files and memfds), else /proc/PID/root/PATH (the file as
 * the target's mount namespace sees it), and kept open in the module cache,
 * so that a process that exits before the end of the run still symbolizes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include "proc/proc.h"
#include "native/sym_internal.h"

void gs_sym_snapshot_put(struct gs_sym_snapshot *s)
{
	if (!s || --s->refs > 0)
		return;
	for (size_t i = 0; i < s->n; i++)
		if (s->maps[i].own_path)
			free((char *)s->maps[i].path);
	free(s->maps);
	gs_proc_maps_put(s->raw);
	gs_perfmap_free(&s->perf);
	free(s);
}

const struct gs_sym_map *gs_sym_snapshot_find(const struct gs_sym_snapshot *s, uint64_t addr)
{
	size_t lo = GS_UPPER_BOUND(s->maps, s->n, start, addr);
	if (lo && addr < s->maps[lo - 1].end)
		return &s->maps[lo - 1];
	return NULL;
}

static bool is_file(const struct gs_sym_map *m)
{
	return m->path && m->path[0] == '/';
}

/* Does /proc/PID/root show the same tree as ours?  Then debug files are
 * found under the plain path (and survive the process). */
static bool same_root(uint32_t tgid)
{
	char p[64];
	struct stat a, b;
	snprintf(p, sizeof(p), "/proc/%u/root/", tgid);
	return stat(p, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* maps names files as our root sees them: a chrooted job's library is
 * /JOBROOT/opt/x/lib.so there, and /opt/x/lib.so in its own root, where its
 * debug files are looked for (debuginfo.c).  The job's root as we see it
 * (len bytes of root, "/" when it is ours) is cut off the front. */
static const char *inside_root(const char *root, size_t len, const char *path)
{
	if (len > 1 && !strncmp(path, root, len) && path[len] == '/')
		return path + len;
	return path;
}

static int open_modules(struct gs_sym_modcache *c, uint32_t tgid, struct gs_sym_snapshot *s)
{
	bool host = same_root(tgid);
	struct gs_sym_creds creds = { 0 };
	char link[64], root[4096];
	ssize_t rl;

	snprintf(link, sizeof(link), "/proc/%u/root", tgid);
	rl = host ? -1 : readlink(link, root, sizeof(root) - 1);
	root[rl > 0 ? rl : 0] = 0;

	gs_sym_creds_read(tgid, &creds); /* gone: !known, public debug files only */
	for (size_t i = 0; i < s->n; i++) {
		struct gs_sym_map *m = &s->maps[i];
		if (!m->exec || !is_file(m))
			continue;
		char mf[80], rp[4200], plain[4096];
		snprintf(mf, sizeof(mf), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, tgid, m->start,
			 m->end);
		/* " (deleted)" is not part of the file name */
		snprintf(plain, sizeof(plain), "%s", m->path);
		size_t pl = strlen(plain);
		if (pl > 10 && !strcmp(plain + pl - 10, " (deleted)"))
			plain[pl - 10] = 0;
		snprintf(rp, sizeof(rp), "/proc/%u/root%s", tgid,
			 inside_root(root, strlen(root), plain));
		const char *paths[] = { mf, rp };
		m->mod = gs_sym_module_get(c, m->path, paths, 2, host ? plain : rp, m->dev, m->ino);
		if (!m->mod)
			return -ENOMEM;
		gs_sym_module_creds(m->mod, &creds);
	}
	/* Non-executable segments of the same files (data, relro: Python
	 * discovery reads _PyRuntime there) are adjacent in maps. */
	for (size_t i = 0; i < s->n; i++) {
		struct gs_sym_map *m = &s->maps[i];
		for (size_t d = 1; !m->mod && is_file(m) && d <= 6; d++) {
			const struct gs_sym_map *o[2] = { i >= d ? &s->maps[i - d] : NULL,
							  i + d < s->n ? &s->maps[i + d] : NULL };
			for (int k = 0; k < 2; k++)
				if (o[k] && o[k]->mod && o[k]->dev == m->dev && o[k]->ino == m->ino)
					m->mod = o[k]->mod;
		}
		uint64_t vaddr;
		if (m->mod && gs_sym_module_off_to_vaddr(m->mod, m->offset, &vaddr)) {
			m->load_bias = m->start - vaddr;
			m->has_bias = true;
		}
	}
	return 0;
}

/* The mappings of proc/'s snapshot raw, with the symbolizer's fields. */
static int take_maps(struct gs_proc_maps *raw, struct gs_sym_snapshot *s)
{
	s->raw = gs_proc_maps_get(raw);
	/* a zombie or kernel thread has an empty maps file */
	if (!s->raw->n)
		return -ESRCH;
	if (!(s->maps = calloc(s->raw->n, sizeof(*s->maps))))
		return -ENOMEM;
	for (size_t i = 0; i < s->raw->n; i++) {
		const struct gs_maps_line *l = &s->raw->m[i];
		s->maps[i] = (struct gs_sym_map){ .start = l->start,
						  .end = l->end,
						  .offset = l->offset,
						  .dev = makedev(l->dev_major, l->dev_minor),
						  .ino = l->inode,
						  .exec = l->exec,
						  .path = l->path };
	}
	s->n = s->raw->n;
	return 0;
}

int gs_sym_snapshot_make(struct gs_sym_modcache *c, uint32_t tgid, uint32_t id,
			 struct gs_proc_maps *raw, struct gs_sym_snapshot **out)
{
	struct gs_sym_snapshot *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->refs = 1;
	s->id = id;
	s->tgid = tgid;
	int err = take_maps(raw, s);
	if (!err)
		err = open_modules(c, tgid, s);
	if (err) {
		gs_sym_snapshot_put(s);
		return err;
	}
	char pp[128];
	struct stat pst;
	/* /proc/PID belongs to the process's effective uid (root when it is
	 * not dumpable): the user whose perf map we accept */
	snprintf(pp, sizeof(pp), "/proc/%u", tgid);
	if (stat(pp, &pst) == 0 && gs_perfmap_path(tgid, s->perf_path, sizeof(s->perf_path)) == 0)
		gs_perfmap_read(s->perf_path, pst.st_uid, &s->perf); /* usually absent: ENOENT */
	*out = s;
	return 0;
}
