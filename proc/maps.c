/* SPDX-License-Identifier: MIT */
/*
 * The one reader of /proc/PID/maps.  The file is read whole into one
 * buffer first (a bounded loop of read()), then parsed in place, so that a
 * snapshot is two allocations and its paths cost no copies.  One mapping
 * can also be asked of the kernel alone (PROCMAP_QUERY), which costs a
 * few microseconds where the whole file of a large job costs milliseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/types.h>
#include "proc/proc.h"
#include "util/vec.h"

/* The whole file, NUL-terminated, in *text (*len bytes). */
static int slurp(int fd, char **text, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0, n = 0;

	for (;;) {
		if (GS_GROW(buf, cap, n + 65536 + 1)) {
			free(buf);
			return -ENOMEM;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno == ENOENT ? -ESRCH : -errno;
			free(buf);
			return err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > GS_PROC_MAPS_MAX_BYTES) {
			free(buf);
			return -EFBIG;
		}
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

static int parse(struct gs_proc_maps *s, char *text)
{
	size_t cap = 0;

	for (char *line = text, *nl; *line; line = nl) {
		struct gs_maps_line l;

		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		else
			nl = line + strlen(line);
		if (gs_maps_parse_line(line, &l))
			continue;
		if (GS_PUSH(s->m, s->n, cap, l))
			return -ENOMEM;
	}
	return 0;
}

int gs_proc_maps_read(uint32_t tgid, struct gs_proc_maps **out)
{
	char path[64];
	size_t len;
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
	err = slurp(fd, &s->text, &len);
	close(fd);
	if (!err)
		err = parse(s, s->text);
	if (err) {
		gs_proc_maps_put(s);
		return err;
	}
	*out = s;
	return 0;
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
