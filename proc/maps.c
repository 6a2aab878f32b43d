/* SPDX-License-Identifier: MIT */
/*
 * The one reader of /proc/PID/maps.  The file is read in chunks and parsed
 * line by line; a snapshot keeps the lines its caps allow (proc.h), their
 * paths copied into one pool, and is charged to the memory budget.  One mapping
 * can also be asked of the kernel alone (PROCMAP_QUERY), which costs a
 * few microseconds where the whole file of a large job costs milliseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/types.h>
#include "proc/proc.h"
#include "util/membudget.h"
#include "util/vec.h"

static uint64_t capped_procs, dropped_lines; /* gs_proc_maps_capped */

/* The state of one read: the kept lines' path offsets in the pool (the
 * pool moves as it grows; pointers are set at the end). */
struct reading {
	struct gs_proc_maps *s;
	size_t cap, *offs, offs_cap, pool_cap, pool_n, n_anon;
};

/* One line of the file: kept (pushed, its path copied into the pool) or
 * dropped and counted by the caps. */
static int take_line(struct reading *r, char *line)
{
	struct gs_proc_maps *s = r->s;
	struct gs_maps_line l;
	size_t plen;

	if (gs_maps_parse_line(line, &l))
		return 0;
	/* anonymous data (no file, no pseudo path, not code): what a job can
	 * make endlessly and nothing symbolizes */
	bool anon = !l.inode && !l.path && !l.exec;
	if (s->n >= GS_PROC_MAPS_MAX_LINES || (anon && ++r->n_anon > GS_PROC_MAPS_ANON_MAX)) {
		s->dropped++;
		return 0;
	}
	plen = l.path ? strlen(l.path) + 1 : 0;
	if ((plen && GS_GROW(s->text, r->pool_cap, r->pool_n + plen)) ||
	    GS_GROW(r->offs, r->offs_cap, s->n + 1) || GS_PUSH(s->m, s->n, r->cap, l))
		return -ENOMEM;
	r->offs[s->n - 1] = plen ? r->pool_n : SIZE_MAX;
	if (plen)
		memcpy(s->text + r->pool_n, l.path, plen);
	r->pool_n += plen;
	return 0;
}

/* Read the file in chunks and keep the lines the caps allow: memory
 * follows what is kept, not what the job mapped. */
static int read_lines(int fd, struct gs_proc_maps *s, size_t *bytes)
{
	char *buf = malloc(GS_PROC_MAPS_CHUNK + 1);
	struct reading r = { .s = s };
	size_t have = 0, total = 0;
	int err = buf ? 0 : -ENOMEM;

	while (!err) {
		ssize_t got = read(fd, buf + have, GS_PROC_MAPS_CHUNK - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			err = errno == ENOENT ? -ESRCH : -errno;
			break;
		}
		total += (size_t)got;
		if (total > GS_PROC_MAPS_MAX_BYTES) {
			err = -EFBIG;
			break;
		}
		have += (size_t)got;
		buf[have] = '\0';
		char *line = buf, *nl;
		while (!err && (nl = strchr(line, '\n'))) {
			*nl = '\0';
			err = take_line(&r, line);
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (got == 0) { /* the last line, without a newline */
			buf[have] = '\0';
			if (have && !err)
				err = take_line(&r, buf);
			break;
		}
		if (have == GS_PROC_MAPS_CHUNK) /* no line is this long: not a maps file */
			err = -EPROTO;
	}
	for (size_t i = 0; !err && i < s->n; i++)
		s->m[i].path = r.offs[i] == SIZE_MAX ? NULL : s->text + r.offs[i];
	*bytes = r.cap * sizeof(*s->m) + r.pool_cap;
	free(r.offs);
	free(buf);
	return err;
}

int gs_proc_maps_read(uint32_t tgid, struct gs_proc_maps **out)
{
	char path[64];
	size_t bytes = 0;
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%u/maps", tgid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	struct gs_proc_maps *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->tgid = tgid;
	s->refs = 1;
	err = read_lines(fd, s, &bytes);
	close(fd);
	if (!err && gs_mem_charge(GS_MEM_MAPS, bytes))
		err = -ENOSPC;
	if (!err)
		s->bytes = bytes; /* charged: given back at the last put */
	if (err) {
		gs_proc_maps_put(s);
		return err;
	}
	if (s->dropped) {
		__atomic_add_fetch(&capped_procs, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&dropped_lines, s->dropped, __ATOMIC_RELAXED);
	}
	*out = s;
	return 0;
}

void gs_proc_maps_capped(uint64_t *snapshots, uint64_t *lines)
{
	*snapshots = __atomic_load_n(&capped_procs, __ATOMIC_RELAXED);
	*lines = __atomic_load_n(&dropped_lines, __ATOMIC_RELAXED);
}

int gs_proc_maps_cap_note(char *buf, size_t len)
{
	uint64_t snaps, lines;

	gs_proc_maps_capped(&snaps, &lines);
	if (!lines)
		return 0;
	snprintf(buf, len,
		 "maps: %llu mapping lines left out in %llu reads of a maps file (more than %u "
		 "lines of anonymous data, or %u lines in all, in one process): addresses in "
		 "them are not symbolized",
		 (unsigned long long)lines, (unsigned long long)snaps, GS_PROC_MAPS_ANON_MAX,
		 GS_PROC_MAPS_MAX_LINES);
	return 1;
}

struct gs_proc_maps *gs_proc_maps_get(struct gs_proc_maps *s)
{
	s->refs++;
	return s;
}

void gs_proc_maps_put(struct gs_proc_maps *s)
{
	if (!s || --s->refs > 0)
		return;
	gs_mem_release(GS_MEM_MAPS, s->bytes);
	free(s->m);
	free(s->text);
	free(s);
}

const struct gs_maps_line *gs_proc_maps_find(const struct gs_proc_maps *s, uint64_t addr)
{
	size_t i = GS_UPPER_BOUND(s->m, s->n, start, addr);

	return i && addr < s->m[i - 1].end ? &s->m[i - 1] : NULL;
}

/* ---- one mapping: PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h) ---- */

/* The kernel ABI, for C libraries whose headers predate it. */
struct gs_procmap_query {
	__u64 size;
	__u64 query_flags;
	__u64 query_addr;
	__u64 vma_start, vma_end;
	__u64 vma_flags;
	__u64 vma_page_size;
	__u64 vma_offset;
	__u64 inode;
	__u32 dev_major, dev_minor;
	__u32 vma_name_size, build_id_size;
	__u64 vma_name_addr, build_id_addr;
};
#define GS_PROCMAP_QUERY    _IOWR('f', 17, struct gs_procmap_query)
#define GS_PROCMAP_VMA_EXEC 0x04ull
/* an executable mapping: the one containing addr or the next one above */
#define GS_PROCMAP_EXEC_OR_NEXT (GS_PROCMAP_VMA_EXEC | 0x10ull)

static int query_vma(int fd, uint64_t addr, struct gs_maps_line *out, uint64_t flags)
{
	struct gs_procmap_query q = { .size = sizeof(q), .query_flags = flags, .query_addr = addr };

	if (ioctl(fd, GS_PROCMAP_QUERY, &q) < 0)
		return -errno;
	*out = (struct gs_maps_line){
		.start = q.vma_start,
		.end = q.vma_end,
		.offset = q.vma_offset,
		.inode = q.inode,
		.dev_major = q.dev_major,
		.dev_minor = q.dev_minor,
		.exec = (q.vma_flags & GS_PROCMAP_VMA_EXEC) != 0,
	};
	return 0;
}

static bool unsupported; /* the kernel said so once: don't ask again */

static int open_query(uint32_t tgid)
{
	char path[64];
	int fd;

	if (__atomic_load_n(&unsupported, __ATOMIC_RELAXED))
		return -EOPNOTSUPP;
	snprintf(path, sizeof(path), "/proc/%u/maps", tgid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 ? fd : errno == ENOENT ? -ESRCH : -errno;
}

/* -ENOTTY: no such ioctl; -EINVAL: another ABI.  Either stays so. */
static int query_result(int err)
{
	if (err != -ENOTTY && err != -EINVAL)
		return err;
	__atomic_store_n(&unsupported, true, __ATOMIC_RELAXED);
	return -EOPNOTSUPP;
}

int gs_proc_vma_at(uint32_t tgid, uint64_t addr, struct gs_maps_line *out)
{
	int fd = open_query(tgid), err;

	if (fd < 0)
		return fd;
	err = query_vma(fd, addr, out, 0);
	close(fd);
	return query_result(err);
}

int gs_proc_exec_ranges(uint32_t tgid, struct gs_proc_range *out, size_t max)
{
	int fd = open_query(tgid), err = 0;
	struct gs_maps_line v;
	size_t n = 0;

	if (fd < 0)
		return fd;
	/* each answer is the next executable mapping at or above addr, and
	 * the next question starts at its end: the walk ascends, then ends */
	for (uint64_t addr = 0; n <= max; addr = v.end) {
		err = query_vma(fd, addr, &v, GS_PROCMAP_EXEC_OR_NEXT);
		if (err)
			break;
		if (n < max)
			out[n] = (struct gs_proc_range){ v.start, v.end };
		n++;
	}
	close(fd);
	if (n > max)
		return -E2BIG;
	if (err == -ENOENT) /* past the last one */
		return (int)n;
	return query_result(err);
}
