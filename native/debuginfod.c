/* SPDX-License-Identifier: MIT */
/*
 * Debug files from debuginfod servers, when DEBUGINFOD_URLS is set.
 *
 * elfutils' client library is dlopen'ed (libdebuginfod.so.1, Debian package
 * libdebuginfod1): gpusample links libdw statically and must start where the
 * library is absent; libdw's own debuginfod hooks (dwfl_build_id_find_elf
 * without a file, dwfl_standard_find_debuginfo) are never reached, since
 * modules are reported with an fd and debuginfo.c replaces the standard
 * search.  The client runs here, in gpusample's own process (root, the
 * host's mount namespace), never in or for the target, and only after the
 * build-id and debuglink searches under /usr/lib/debug found nothing.
 *
 * Bounds, as for any file a target may influence:
 *  - the cache is GS_DEBUGINFOD_CACHE, a directory chain owned by root and
 *    writable by root only (not $HOME/.cache of whoever ran sudo: that user
 *    could swap cached files);
 *  - one time budget per run (GS_DEBUGINFOD_BUDGET_S, all queries together):
 *    once spent, no more queries, and a note says so;
 *  - a size limit per file (GS_DEBUGINFOD_MAX_BYTES), told to the server
 *    (DEBUGINFOD_MAXSIZE) and enforced by the progress callback; an answer
 *    without a Content-Length is refused at its first byte (its size is
 *    unknown until it is all in the cache) and counted as such;
 *  - the downloaded file is checked by debuginfo.c as a target's debug file
 *    is (ELF headers, the module's build-id, its compressed sections against
 *    the inflate cap and the memory budget) before libdwfl reads it, and a
 *    refused file is deleted from the cache, so no later run reads it
 *    without asking (a file the server sent, kept, then the server gone);
 *  - the cache holds at most GS_DEBUGINFOD_CACHE_BYTES on disk
 *    (GS_DEBUGINFOD_CACHE_MB in the environment sets another): the least
 *    recently used build-ids are deleted past it (before each query and
 *    after each fetch).
 * The client library reads its settings from the environment
 * (DEBUGINFOD_CACHE_PATH, _TIMEOUT, _MAXTIME, _MAXSIZE): they are set around
 * each query and put back, so a job gpusample starts never inherits them.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "native/sym_internal.h"
#include "util/clock.h"

typedef struct debuginfod_client debuginfod_client;
typedef int (*progressfn_t)(debuginfod_client *c, long a, long b);

static struct {
	pthread_mutex_t lock;
	bool inited, usable, gave_up;
	char why[160]; /* not usable: why, for the note */
	void *so;
	debuginfod_client *client;
	debuginfod_client *(*begin)(void);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*set_progressfn)(debuginfod_client *, progressfn_t);
	void (*end)(debuginfod_client *);
	double spent;    /* seconds in queries so far */
	double deadline; /* this query's end (monotonic seconds) */
	bool too_big, no_length;
	size_t n_fetched, n_missed, n_skipped;
	bool stopped; /* a transfer ended by a stop request */
	/* refused: over the size limit, sent without Content-Length, failed
	 * debuginfo.c's checks; deleted from the cache; cache entries pruned */
	size_t n_big, n_no_length, n_bad, n_deleted, n_pruned;
	char bad_why[96];
	size_t last_at;     /* the last fetch's place in fetched[], and its size: */
	uint64_t last_size; /* taken back when debuginfo.c refuses it */
	uint64_t bytes;
	char fetched[512];  /* "name (size)" list for the note, cut at its size */
	uint64_t cache_cap; /* bytes on disk */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cache_cap = GS_DEBUGINFOD_CACHE_BYTES };

/* A directory owned by root that only root writes; created when missing. */
static int root_dir(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) && errno != EEXIST)
		return -errno;
	if (lstat(path, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	return 0;
}

static void init_locked(void)
{
	const char *urls = getenv("DEBUGINFOD_URLS"), *mb = getenv("GS_DEBUGINFOD_CACHE_MB");
	char *end;
	unsigned long long v = mb ? strtoull(mb, &end, 10) : 0;

	g.inited = true;
	if (mb && *mb && !*end && v > 0 && v < (1ull << 44))
		g.cache_cap = v << 20;
	if (!urls || !urls[0])
		return;
	if (geteuid() != 0) {
		snprintf(g.why, sizeof(g.why), "gpusample is not root (the cache must be root's)");
		return;
	}
	if (root_dir(GS_DEBUGINFOD_CACHE_PARENT, 0755) || root_dir(GS_DEBUGINFOD_CACHE, 0700)) {
		snprintf(g.why, sizeof(g.why),
			 "the cache %s is not a directory owned and written by root only",
			 GS_DEBUGINFOD_CACHE);
		return;
	}
	g.so = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!g.so) {
		snprintf(g.why, sizeof(g.why),
			 "libdebuginfod.so.1 not found (Debian/Ubuntu package libdebuginfod1)");
		return;
	}
	g.begin = (debuginfod_client * (*)(void)) dlsym(g.so, "debuginfod_begin");
	g.find_debuginfo = (int (*)(debuginfod_client *, const unsigned char *, int, char **))dlsym(
	    g.so, "debuginfod_find_debuginfo");
	g.set_progressfn =
	    (void (*)(debuginfod_client *, progressfn_t))dlsym(g.so, "debuginfod_set_progressfn");
	g.end = (void (*)(debuginfod_client *))dlsym(g.so, "debuginfod_end");
	if (!g.begin || !g.find_debuginfo || !g.set_progressfn || !g.end ||
	    !(g.client = g.begin())) {
		snprintf(g.why, sizeof(g.why), "libdebuginfod.so.1 unusable");
		return;
	}
	g.set_progressfn(g.client, NULL);
	g.usable = true;
}

/* Nonzero aborts the transfer: past the budget, or past the size limit
 * (b: the size the server announced, negative when it sent none; a: bytes
 * so far).  An unknown size is refused: the client writes the whole
 * answer into root's cache before anything here could check it. */
static int progress(debuginfod_client *c, long a, long b)
{
	(void)c;
	if (b < 0) {
		g.no_length = true;
		return 1;
	}
	if ((uint64_t)a > GS_DEBUGINFOD_MAX_BYTES || (uint64_t)b > GS_DEBUGINFOD_MAX_BYTES) {
		g.too_big = true;
		return 1;
	}
	if (gs_sym_stop_asked()) {
		g.stopped = true;
		return 1;
	}
	return gs_mono_s() > g.deadline;
}

struct env_save {
	const char *name;
	char *old;
	bool had;
};

static void env_set(struct env_save *e, const char *name, const char *val)
{
	const char *o = getenv(name);

	e->name = name;
	e->had = o != NULL;
	e->old = o ? strdup(o) : NULL;
	setenv(name, val, 1);
}

static void env_restore(struct env_save *e)
{
	if (e->had && e->old)
		setenv(e->name, e->old, 1);
	else
		unsetenv(e->name);
	free(e->old);
}

static void list_add(const char *name, uint64_t size)
{
	size_t l = strlen(g.fetched);

	if (l + 4 < sizeof(g.fetched))
		snprintf(g.fetched + l, sizeof(g.fetched) - l, "%s%s (%.1f %s)", l ? ", " : "",
			 name, (double)size / (size < 1048576 ? 1024.0 : 1048576.0),
			 size < 1048576 ? "KiB" : "MiB");
}

/* Delete path, a file the client put in the cache, and its build-id
 * directory when that is left empty.  Only a name under the cache is
 * touched. */
static void cache_delete_locked(const char *path)
{
	size_t l = strlen(GS_DEBUGINFOD_CACHE);
	char dir[PATH_MAX];

	if (!path || strncmp(path, GS_DEBUGINFOD_CACHE "/", l + 1) || strstr(path, "/../") ||
	    snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	if (!unlink(path))
		g.n_deleted++;
	char *slash = strrchr(dir, '/');
	if (slash && (size_t)(slash - dir) > l) {
		*slash = 0;
		rmdir(dir); /* fails while other files are there: kept */
	}
}

struct cache_entry {
	char name[NAME_MAX + 1];
	uint64_t bytes;
	int64_t used; /* newest access or change, seconds */
};

static int entry_cmp(const void *a, const void *b)
{
	const struct cache_entry *x = a, *y = b;

	return (x->used > y->used) - (x->used < y->used);
}

/* Directory name under cfd, never through a link; NULL if it is none. */
static DIR *subdir(int cfd, const char *name)
{
	int dfd = openat(cfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;

	if (!d && dfd >= 0)
		close(dfd);
	return d;
}

/* The files of one build-id directory: their bytes and last use. */
static void entry_measure(int cfd, struct cache_entry *e)
{
	DIR *d = subdir(cfd, e->name);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		e->bytes += (uint64_t)st.st_blocks * 512;
		if (st.st_atime > e->used)
			e->used = st.st_atime;
		if (st.st_mtime > e->used)
			e->used = st.st_mtime;
	}
	if (d)
		closedir(d);
}

static void entry_delete(int cfd, const char *name)
{
	DIR *d = subdir(cfd, name);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	if (d)
		closedir(d);
	unlinkat(cfd, name, AT_REMOVEDIR);
}

/* Keep the cache within g.cache_cap bytes on disk: the least recently used
 * build-id directories go first (at most GS_DEBUGINFOD_CACHE_ENTRIES are
 * looked at; more are deleted oldest-unknown, as they come). */
static void cache_prune_locked(void)
{
	int cfd = open(GS_DEBUGINFOD_CACHE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = cfd >= 0 ? fdopendir(cfd) : NULL;
	struct cache_entry *e = NULL;
	size_t n = 0;
	uint64_t total = 0;
	struct dirent *de;

	if (!d) {
		if (cfd >= 0)
			close(cfd);
		return;
	}
	e = calloc(GS_DEBUGINFOD_CACHE_ENTRIES, sizeof(*e));
	while (e && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (n == GS_DEBUGINFOD_CACHE_ENTRIES) {
			entry_delete(cfd, de->d_name);
			g.n_pruned++;
			continue;
		}
		snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
		entry_measure(cfd, &e[n]);
		total += e[n++].bytes;
	}
	if (e && total > g.cache_cap) {
		qsort(e, n, sizeof(*e), entry_cmp);
		for (size_t i = 0; i < n && total > g.cache_cap; i++) {
			entry_delete(cfd, e[i].name);
			total -= e[i].bytes;
			g.n_pruned++;
		}
	}
	free(e);
	closedir(d);
}

int gs_sym_debuginfod_find(const unsigned char *bid, int n, const char *modname, char **path)
{
	int fd = -1;

	*path = NULL;
	if (n <= 0)
		return -1;
	pthread_mutex_lock(&g.lock);
	if (!g.inited)
		init_locked();
	if (!g.usable) {
		pthread_mutex_unlock(&g.lock);
		return -1;
	}
	if (g.gave_up || gs_sym_stop_asked()) {
		g.n_skipped++;
		pthread_mutex_unlock(&g.lock);
		return -1;
	}
	double left = GS_DEBUGINFOD_BUDGET_S - g.spent, t0 = gs_mono_s();
	char secs[32], maxsize[32];
	struct env_save env[4];

	snprintf(secs, sizeof(secs), "%d", (int)left + 1);
	snprintf(maxsize, sizeof(maxsize), "%llu", (unsigned long long)GS_DEBUGINFOD_MAX_BYTES);
	env_set(&env[0], "DEBUGINFOD_CACHE_PATH", GS_DEBUGINFOD_CACHE);
	env_set(&env[1], "DEBUGINFOD_TIMEOUT", secs);
	env_set(&env[2], "DEBUGINFOD_MAXTIME", secs);
	env_set(&env[3], "DEBUGINFOD_MAXSIZE", maxsize);
	g.deadline = t0 + left;
	g.too_big = g.no_length = g.stopped = false;
	cache_prune_locked();
	g.set_progressfn(g.client, progress);
	fd = g.find_debuginfo(g.client, bid, n, path);
	g.set_progressfn(g.client, NULL);
	for (int i = 3; i >= 0; i--)
		env_restore(&env[i]);
	g.spent += gs_mono_s() - t0;
	if (fd >= 0) {
		struct stat st;
		bool bad = fstat(fd, &st) || !S_ISREG(st.st_mode) ||
			   (uint64_t)st.st_size > GS_DEBUGINFOD_MAX_BYTES;

		if (bad || g.no_length) {
			/* the client may finish a short answer before it tells
			 * the callback that no length came: refused all the same */
			close(fd);
			fd = -1;
			if (g.no_length)
				g.n_no_length++;
			else
				g.n_big++;
			cache_delete_locked(*path);
			free(*path);
			*path = NULL;
		} else {
			g.n_fetched++;
			g.bytes += (uint64_t)st.st_size;
			g.last_at = strlen(g.fetched);
			g.last_size = (uint64_t)st.st_size;
			list_add(modname ? modname : "?", (uint64_t)st.st_size);
			cache_prune_locked();
		}
	} else if (g.no_length || g.too_big || g.stopped || fd == -EFBIG) {
		/* -EFBIG: the client's own MAXSIZE check.  Whatever the client
		 * left of a refused or stopped answer goes. */
		char hex[2 * 64 + 1], left[PATH_MAX];

		for (int i = 0; i < n && i < 64; i++)
			snprintf(hex + 2 * i, 3, "%02x", bid[i]);
		snprintf(left, sizeof(left), "%s/%s/debuginfo", GS_DEBUGINFOD_CACHE, hex);
		cache_delete_locked(left);
		if (g.no_length)
			g.n_no_length++;
		else if (g.stopped)
			g.n_skipped++;
		else
			g.n_big++;
	} else {
		g.n_missed++;
	}
	if (fd < 0 && g.spent >= GS_DEBUGINFOD_BUDGET_S)
		g.gave_up = true;
	pthread_mutex_unlock(&g.lock);
	return fd;
}

void gs_sym_debuginfod_refused(const char *path, const char *why)
{
	pthread_mutex_lock(&g.lock);
	if (g.n_fetched) {
		g.n_fetched--;
		g.bytes -= g.last_size;
		g.fetched[g.last_at] = 0;
		g.last_size = 0;
	}
	if (!g.n_bad++)
		snprintf(g.bad_why, sizeof(g.bad_why), "%s", why);
	cache_delete_locked(path);
	pthread_mutex_unlock(&g.lock);
}

void gs_sym_debuginfod_report(struct gs_profile *prof)
{
	pthread_mutex_lock(&g.lock);
	if (g.inited && !g.usable && g.why[0])
		gs_profile_add_note(prof, "debuginfod not asked (DEBUGINFOD_URLS is set): %s",
				    g.why);
	size_t refused = g.n_big + g.n_no_length + g.n_bad;
	if (g.usable && (g.n_fetched || g.n_missed || refused || g.gave_up))
		gs_profile_add_note(
		    prof,
		    "debuginfod: %zu debug file(s) fetched or found in the cache %s (%.2f MiB%s%s)"
		    ", %zu not on the server(s), %zu refused%s; %.1f s of the %d s budget",
		    g.n_fetched, GS_DEBUGINFOD_CACHE, (double)g.bytes / 1048576.0,
		    g.fetched[0] ? ": " : "", g.fetched, g.n_missed, refused,
		    g.gave_up ? "; budget spent, later modules not asked" : "", g.spent,
		    GS_DEBUGINFOD_BUDGET_S);
	if (refused)
		gs_profile_add_note(
		    prof,
		    "debuginfod refused %zu file(s): %zu over %llu MiB, %zu sent without a "
		    "Content-Length (the size must be known before a file enters the cache), "
		    "%zu failing the checks of a debug file%s%s%s; %zu deleted from the cache",
		    refused, g.n_big, (unsigned long long)(GS_DEBUGINFOD_MAX_BYTES >> 20),
		    g.n_no_length, g.n_bad, g.n_bad ? " (first: " : "", g.bad_why,
		    g.n_bad ? ")" : "", g.n_deleted);
	if (g.n_pruned)
		gs_profile_add_note(prof,
				    "debuginfod: %zu least recently used build-id(s) deleted from "
				    "the cache %s (kept within %llu MiB)",
				    g.n_pruned, GS_DEBUGINFOD_CACHE,
				    (unsigned long long)(g.cache_cap >> 20));
	if (g.n_skipped)
		gs_profile_add_note(
		    prof,
		    "debuginfod: %zu module(s) not fetched, the time budget was spent or a stop "
		    "was asked (names there are offsets)",
		    g.n_skipped);
	pthread_mutex_unlock(&g.lock);
}
