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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "native/sym_internal.h"
#include "util/membudget.h"

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

/* What a parse holds, counted for the budget: the entry array and each
 * name as malloc stores it (the string, its header, 16-byte rounding). */
struct parse_ctx {
	size_t ecap;
	size_t name_bytes;
	size_t limit; /* of name_bytes + the array */
	bool cut;     /* stopped at limit */
};

static size_t name_cost(size_t len)
{
	return (len + 1 + 8 + 15) & ~(size_t)15;
}

static int parse_line(char *line, struct gs_perfmap *pm, struct parse_ctx *c)
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
	size_t ncap = pm->n + 1 <= c->ecap ? c->ecap : c->ecap ? c->ecap * 2 : 64;
	size_t cost = name_cost(strlen(end));
	if (c->name_bytes + cost + ncap * sizeof(*pm->e) > c->limit) {
		c->cut = true;
		return -EFBIG;
	}
	if (gs_grow_from((void **)&pm->e, &c->ecap, pm->n + 1, sizeof(*pm->e), 64))
		return -ENOMEM;
	char *name = strdup(end);
	if (!name)
		return -ENOMEM;
	c->name_bytes += cost;
	pm->e[pm->n++] = (struct gs_perfmap_entry){ start, size, name };
	return 0;
}

/* Parse up to limit bytes of memory (see struct parse_ctx); *bytes gets
 * what the result holds, *cut whether the limit stopped it. */
static int parse_limited(FILE *f, struct gs_perfmap *pm, size_t limit, size_t *bytes, bool *cut)
{
	char line[LINE_MAX_BYTES];
	struct parse_ctx c = { .limit = limit };
	size_t total = 0;
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
		err = parse_line(line, pm, &c);
	}
	if (err == -EFBIG)
		err = 0; /* keep the first regions (entry count or memory bound) */
	if (err) {
		gs_perfmap_free(pm);
		return err;
	}
	/* stable order; for equal starts the later line (newer code) wins in
	 * find() because it searches for the last entry at or below addr */
	if (pm->n) {
		qsort(pm->e, pm->n, sizeof(*pm->e), pm_cmp);
		void *fit = realloc(pm->e, pm->n * sizeof(*pm->e));
		if (fit)
			pm->e = fit;
	}
	*bytes = c.name_bytes + pm->n * sizeof(*pm->e);
	*cut = c.cut;
	return 0;
}

int gs_perfmap_parse(FILE *f, struct gs_perfmap *pm)
{
	size_t bytes;
	bool cut;

	return parse_limited(f, pm, SIZE_MAX, &bytes, &cut);
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* ---- one parse per file, one budget for all ---------------------------------
 * A perf map is the target's to write and to hard-link: 16 processes whose
 * maps were links to one 61 MB file took 1.5 GB when each was parsed for
 * itself.  Parses are shared by file identity (a changed file is a new
 * identity: its readers re-read it) and all of them together hold at most
 * the budget.  The symbolizer runs on one thread; the lock is for tests and
 * for more than one symbolizer in a process. */
struct gs_perfmap_file {
	struct gs_perfmap_file *next;
	int refs;
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	struct gs_perfmap_entry *e;
	size_t n, bytes;
};

static pthread_mutex_t files_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gs_perfmap_file *files;
static size_t budget = GS_PERFMAP_TOTAL_BYTES;
static struct gs_perfmap_stats stats;
/* a parse was cut: what is left (slack of the cut one's array) would only
 * give the next file a sliver; no more until a parse is freed */
static bool spent;

size_t gs_perfmap_set_budget(size_t bytes)
{
	pthread_mutex_lock(&files_mu);
	size_t old = budget;
	budget = bytes;
	pthread_mutex_unlock(&files_mu);
	return old;
}

void gs_perfmap_stats(struct gs_perfmap_stats *st)
{
	pthread_mutex_lock(&files_mu);
	*st = stats;
	pthread_mutex_unlock(&files_mu);
}

static void note_loss(const char *path)
{
	if (!stats.first[0])
		snprintf(stats.first, sizeof(stats.first), "%s", path);
}

static void file_put(struct gs_perfmap_file *pf)
{
	pthread_mutex_lock(&files_mu);
	if (--pf->refs > 0) {
		pthread_mutex_unlock(&files_mu);
		return;
	}
	for (struct gs_perfmap_file **pp = &files; *pp; pp = &(*pp)->next)
		if (*pp == pf) {
			*pp = pf->next;
			break;
		}
	stats.bytes -= pf->bytes;
	gs_mem_release(GS_MEM_PERF_MAPS, pf->bytes);
	spent = false;
	pthread_mutex_unlock(&files_mu);
	for (size_t i = 0; i < pf->n; i++)
		free(pf->e[i].name);
	free(pf->e);
	free(pf);
}

/* The shared parse of the file open at fd (st: its identity), parsed now
 * if nobody holds it; pm aliases its entries.  fd is consumed.  Called
 * with files_mu held. */
static int file_get(int fd, const struct stat *st, const char *path, struct gs_perfmap *pm)
{
	struct gs_perfmap_file *pf;
	struct gs_perfmap tmp;
	size_t bytes;
	bool cut;
	FILE *f;
	int err;

	for (pf = files; pf; pf = pf->next)
		if (pf->dev == st->st_dev && pf->ino == st->st_ino &&
		    pf->size == (uint64_t)st->st_size && pf->mtime_ns == mtime_ns(st))
			break;
	if (pf) {
		close(fd);
		stats.shared++;
	} else {
		/* the perf maps' own budget, and what the run's shared one has left */
		size_t left = budget > stats.bytes ? budget - stats.bytes : 0;
		uint64_t shared = gs_mem_left();
		if (left > shared)
			left = (size_t)shared;
		if (!left || spent) {
			close(fd);
			stats.refused++;
			note_loss(path);
			return 0; /* pm stays empty: the budget is spent */
		}
		if (!(pf = calloc(1, sizeof(*pf))) || !(f = fdopen(fd, "r"))) {
			free(pf);
			close(fd);
			return -ENOMEM;
		}
		err = parse_limited(f, &tmp, left, &bytes, &cut);
		fclose(f);
		if (!err && gs_mem_charge(GS_MEM_PERF_MAPS, bytes)) {
			/* another store took the shared budget meanwhile */
			gs_perfmap_free(&tmp);
			free(pf);
			stats.refused++;
			note_loss(path);
			return 0;
		}
		if (err) {
			free(pf);
			return err;
		}
		*pf = (struct gs_perfmap_file){ .next = files,
						.dev = st->st_dev,
						.ino = st->st_ino,
						.size = (uint64_t)st->st_size,
						.mtime_ns = mtime_ns(st),
						.e = tmp.e,
						.n = tmp.n,
						.bytes = bytes };
		files = pf;
		stats.files++;
		stats.bytes += bytes;
		if (stats.bytes > stats.peak)
			stats.peak = stats.bytes;
		if (cut) {
			spent = true;
			stats.cut++;
			note_loss(path);
		}
	}
	pf->refs++;
	pm->shared = pf;
	pm->e = pf->e;
	pm->n = pf->n;
	return 0;
}

static void stamp(struct gs_perfmap *pm, const struct stat *st)
{
	pm->seen = true;
	pm->dev = st->st_dev;
	pm->ino = st->st_ino;
	pm->size = (uint64_t)st->st_size;
	pm->mtime_ns = mtime_ns(st);
}

/* "/proc/PID/root/REL" is opened as REL inside the target's root, as the
 * target would see it: openat2(RESOLVE_IN_ROOT) from that root, so neither
 * an absolute link (its tmp -> /root) nor ".." leads into ours; the last
 * component is never followed.  Another path is resolved inside "/". */
static int root_split(const char *path, const char **rel)
{
	char root[48];
	const char *p = path;
	int n = 0;

	*rel = path;
	if (sscanf(path, "/proc/%*u/root/%n", &n) == 0 && n > 0 && (size_t)n < sizeof(root)) {
		snprintf(root, sizeof(root), "%.*s", n, path);
		*rel = path + n;
		p = root;
	} else {
		p = "/";
	}
	int rfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return rfd < 0 ? -errno : rfd;
}

static int open_in_root(const char *path, struct stat *st)
{
	const char *rel;
	int rfd = root_split(path, &rel);

	if (rfd < 0)
		return rfd;
	int fd = gs_open_regular_at(rfd, rel, O_NOFOLLOW, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
				    st);
	close(rfd);
	return fd;
}

static int stat_in_root(const char *path, struct stat *st)
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	const char *rel;
	int rfd = root_split(path, &rel);

	if (rfd < 0)
		return rfd;
	int fd = (int)syscall(__NR_openat2, rfd, rel, &how, sizeof(how));
	int err = fd < 0 ? -errno : (fstat(fd, st) ? -errno : 0);
	if (fd >= 0)
		close(fd);
	close(rfd);
	return err;
}

bool gs_perfmap_unchanged(const struct gs_perfmap *pm, const char *path)
{
	struct stat st;

	if (!path[0])
		return false;
	int err = stat_in_root(path, &st);
	if (err)
		return err == -ENOENT && !pm->seen;
	return pm->seen && st.st_dev == pm->dev && st.st_ino == pm->ino &&
	       (uint64_t)st.st_size == pm->size && mtime_ns(&st) == pm->mtime_ns;
}

int gs_perfmap_read(const char *path, uid_t owner, struct gs_perfmap *pm)
{
	struct stat st;
	int fd, err;

	memset(pm, 0, sizeof(*pm));
	/* a regular file, not a link (a FIFO or a device would hang or feed us
	 * forever), written by the process's own user.  Not perf's "or root":
	 * a non-root job cannot write a root-owned file, so one in its view is
	 * somebody else's (a root-only directory bind-mounted as its tmp in a
	 * user namespace), and reading it would copy root's data into the
	 * profile. */
	fd = open_in_root(path, &st);
	if (fd < 0)
		return fd;
	if (st.st_uid != owner) {
		close(fd);
		stamp(pm, &st); /* refused as long as it stays this file */
		return -EPERM;
	}
	pthread_mutex_lock(&files_mu);
	err = file_get(fd, &st, path, pm);
	pthread_mutex_unlock(&files_mu);
	if (!err) /* as opened: what is appended after that counts as a change */
		stamp(pm, &st);
	return err;
}

void gs_perfmap_free(struct gs_perfmap *pm)
{
	if (pm->shared) {
		file_put(pm->shared);
		memset(pm, 0, sizeof(*pm));
		return;
	}
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

int gs_perfmap_path(uint32_t tgid, char *buf, size_t len)
{
	int64_t ns = gs_proc_nstgid(tgid);
	if (ns < 0)
		return (int)ns;
	snprintf(buf, len, "/proc/%u/root/tmp/perf-%" PRId64 ".map", tgid, ns);
	return 0;
}
