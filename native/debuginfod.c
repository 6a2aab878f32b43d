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
 *    (DEBUGINFOD_MAXSIZE) and enforced by the progress callback;
 *  - the downloaded file is checked by debuginfo.c as a target's debug file
 *    is (gs_elf_headers_check, the module's build-id) before libdwfl reads it.
 * The client library reads its settings from the environment
 * (DEBUGINFOD_CACHE_PATH, _TIMEOUT, _MAXTIME, _MAXSIZE): they are set around
 * each query and put back, so a job gpusample starts never inherits them.
 */
#include <dlfcn.h>
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
	bool too_big;
	size_t n_fetched, n_missed, n_refused, n_skipped;
	uint64_t bytes;
	char fetched[512]; /* "name (size)" list for the note, cut at its size */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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
	const char *urls = getenv("DEBUGINFOD_URLS");

	g.inited = true;
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
 * (b: the size the server announced, 0 when it did not; a: bytes so far). */
static int progress(debuginfod_client *c, long a, long b)
{
	(void)c;
	if ((uint64_t)a > GS_DEBUGINFOD_MAX_BYTES || (uint64_t)b > GS_DEBUGINFOD_MAX_BYTES) {
		g.too_big = true;
		return 1;
	}
	return now_s() > g.deadline;
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
	if (g.gave_up) {
		g.n_skipped++;
		pthread_mutex_unlock(&g.lock);
		return -1;
	}
	double left = GS_DEBUGINFOD_BUDGET_S - g.spent, t0 = now_s();
	char secs[32], maxsize[32];
	struct env_save env[4];

	snprintf(secs, sizeof(secs), "%d", (int)left + 1);
	snprintf(maxsize, sizeof(maxsize), "%llu", (unsigned long long)GS_DEBUGINFOD_MAX_BYTES);
	env_set(&env[0], "DEBUGINFOD_CACHE_PATH", GS_DEBUGINFOD_CACHE);
	env_set(&env[1], "DEBUGINFOD_TIMEOUT", secs);
	env_set(&env[2], "DEBUGINFOD_MAXTIME", secs);
	env_set(&env[3], "DEBUGINFOD_MAXSIZE", maxsize);
	g.deadline = t0 + left;
	g.too_big = false;
	g.set_progressfn(g.client, progress);
	fd = g.find_debuginfo(g.client, bid, n, path);
	g.set_progressfn(g.client, NULL);
	for (int i = 3; i >= 0; i--)
		env_restore(&env[i]);
	g.spent += now_s() - t0;
	if (fd >= 0) {
		struct stat st;

		if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > GS_DEBUGINFOD_MAX_BYTES) {
			close(fd);
			free(*path);
			*path = NULL;
			fd = -1;
			g.n_refused++;
		} else {
			g.n_fetched++;
			g.bytes += (uint64_t)st.st_size;
			list_add(modname ? modname : "?", (uint64_t)st.st_size);
		}
	} else if (g.too_big) {
		g.n_refused++;
	} else {
		g.n_missed++;
	}
	if (fd < 0 && g.spent >= GS_DEBUGINFOD_BUDGET_S)
		g.gave_up = true;
	pthread_mutex_unlock(&g.lock);
	return fd;
}

/* debuginfo.c: the file fd came from debuginfod and failed its checks. */
void gs_sym_debuginfod_refused(void)
{
	pthread_mutex_lock(&g.lock);
	if (g.n_fetched) {
		g.n_fetched--;
		g.n_refused++;
	}
	pthread_mutex_unlock(&g.lock);
}

void gs_sym_debuginfod_report(struct gs_profile *prof)
{
	pthread_mutex_lock(&g.lock);
	if (g.inited && !g.usable && g.why[0])
		gs_profile_add_note(prof, "debuginfod not asked (DEBUGINFOD_URLS is set): %s",
				    g.why);
	if (g.usable && (g.n_fetched || g.n_missed || g.n_refused || g.gave_up))
		gs_profile_add_note(
		    prof,
		    "debuginfod: %zu debug file(s) fetched or found in the cache %s (%.2f MiB%s%s)"
		    ", %zu not on the server(s), %zu refused (over %llu MiB or not the "
		    "module's)%s; %.1f s of the %d s budget",
		    g.n_fetched, GS_DEBUGINFOD_CACHE, (double)g.bytes / 1048576.0,
		    g.fetched[0] ? ": " : "", g.fetched, g.n_missed, g.n_refused,
		    (unsigned long long)(GS_DEBUGINFOD_MAX_BYTES >> 20),
		    g.gave_up ? "; budget spent, later modules not asked" : "", g.spent,
		    GS_DEBUGINFOD_BUDGET_S);
	if (g.n_skipped)
		gs_profile_add_note(
		    prof,
		    "debuginfod: %zu module(s) not asked, the time budget was spent "
		    "(names there are offsets)",
		    g.n_skipped);
	pthread_mutex_unlock(&g.lock);
}
