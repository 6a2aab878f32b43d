/* SPDX-License-Identifier: MIT */
/*
 * Separate debug files, found only where root trusts them.
 *
 * libdwfl's dwfl_standard_find_debuginfo looks next to the library
 * (LIB.debug, .debug/LIB.debug, the .gnu_debuglink name in the library's
 * directory) with a plain open(2): the target's user owns that directory,
 * so a FIFO there hung root's gpusample in open(2) for good and a link made
 * root open its files or a device.  This callback looks only under
 * /usr/lib/debug, of the target's root (when it has its own) and of the
 * host: by build-id (.build-id/xx/rest.debug) and by .gnu_debuglink
 * (/usr/lib/debug/DIR/NAME, NAME a plain file name), and the dwz alt file
 * (an absolute name under /usr/lib/debug).  Every open resolves inside that
 * root (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: no link or ".."
 * leads out of it, no /proc magic link is followed), looks at the file
 * through O_PATH first (only a regular file is opened, non-blocking), and
 * the file must carry the module's build-id (or, without one, the
 * debuglink's CRC) before libdwfl reads it.  Only when none is found there
 * are the debuginfod servers of DEBUGINFOD_URLS asked (debuginfod.c), and
 * their file passes the same checks.
 *
 * What the target controls is bounded before libdw sees it:
 *  - a .gnu_debuglink name is looked for only under the target's own root
 *    (a chrooted job's /lib/x.so is not the host's), opened without
 *    following a link at its end, must be ELF and at most
 *    GS_DEBUG_FILE_MAX bytes (its CRC reads it whole), and all CRCs of a
 *    run get GS_DEBUGLINK_CRC_S seconds and end at a stop request
 *    (gs_sym_watch_stop): SIGINT during a CRC of a huge sparse file;
 *  - every file libdw reads (the module's own, each debug file) has its
 *    compressed sections' claimed sizes checked (gs_elf_inflate_check)
 *    against GS_DEBUG_INFLATE_MAX and charged to the run's memory budget;
 *  - a debug file from a root (build-id) must be one the job's user could
 *    read (world-readable, or by its uid or one of its groups, as
 *    /proc/PID/status shows them), and under the host's root one root
 *    owns: a build-id is only a claim, and a 0600 root-only file under
 *    /usr/lib/debug must not lend its names to the job's profile.
 * Refusals are counted by cause for the profile's notes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <zlib.h>
#include <elfutils/libdwelf.h>
#include "native/native.h"
#include "proc/proc.h"
#include "native/sym_internal.h"
#include "util/membudget.h"
#include "util/clock.h"

#define DEBUG_DIR "usr/lib/debug"

/* Refusals by cause, for the notes (first: one file named). */
enum refusal {
	R_INFLATE,    /* compressed sections over the per-file cap, or impossible */
	R_BUDGET,     /* their claims did not fit the memory budget */
	R_UNREADABLE, /* the job's user could not read it, or not root's */
	R_TOO_BIG,    /* a debuglink file over GS_DEBUG_FILE_MAX */
	R_CRC_STOP,   /* CRC cut: stop request or the run's CRC time spent */
	R_KINDS,
};

static struct {
	pthread_mutex_t lock;
	size_t n[R_KINDS];
	char first[R_KINDS][160];
	double crc_s; /* seconds of debuglink CRCs so far */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const volatile sig_atomic_t *g_signals;
static sig_atomic_t g_signals_base;

void gs_sym_watch_stop(const volatile sig_atomic_t *count)
{
	g_signals = count;
	g_signals_base = count ? *count : 0;
}

bool gs_sym_stop_asked(void)
{
	return g_signals && *g_signals != g_signals_base;
}

/* m (NULL: none) is counted once per cause: libdwfl asks for its debug
 * file again for the symbol table and for DWARF. */
static void refused(struct gs_sym_module *m, enum refusal r, const char *name, const char *why)
{
	if (m && (m->debug_refused & (1u << r)))
		return;
	if (m)
		m->debug_refused |= 1u << r;
	pthread_mutex_lock(&g.lock);
	if (!g.n[r]++)
		snprintf(g.first[r], sizeof(g.first[r]), "%s%s%s", name ? name : "?",
			 why ? ": " : "", why ? why : "");
	pthread_mutex_unlock(&g.lock);
}

/* ---- the job's user ------------------------------------------------------ */

/* The first number of a status line ("Uid:\t1000\t1000\t1000\t1000"). */
static int first_id(uint32_t tgid, const char *key, unsigned *out)
{
	char v[128];
	int err = gs_proc_status_field(tgid, key, v, sizeof(v));

	if (err)
		return err;
	return sscanf(v, "%u", out) == 1 ? 0 : -EINVAL;
}

int gs_sym_creds_read(uint32_t tgid, struct gs_sym_creds *c)
{
	char v[1024];
	unsigned uid, gid;
	int err;

	memset(c, 0, sizeof(*c));
	if ((err = first_id(tgid, "Uid:", &uid)) || (err = first_id(tgid, "Gid:", &gid)))
		return err;
	c->uid = uid;
	c->gid = gid;
	/* a line cut at v's size loses groups: stricter, never looser */
	if (!gs_proc_status_field(tgid, "Groups:", v, sizeof(v))) {
		char *p = v, *e;

		for (unsigned long x; c->n_groups < GS_SYM_MAX_GROUPS; p = e) {
			x = strtoul(p, &e, 10);
			if (e == p)
				break;
			c->groups[c->n_groups++] = (gid_t)x;
		}
	}
	c->known = true;
	return 0;
}

static bool creds_same(const struct gs_sym_creds *a, const struct gs_sym_creds *b)
{
	return a->uid == b->uid && a->gid == b->gid && a->n_groups == b->n_groups &&
	       !memcmp(a->groups, b->groups, sizeof(gid_t) * (size_t)a->n_groups);
}

void gs_sym_module_creds(struct gs_sym_module *m, const struct gs_sym_creds *c)
{
	if (m->creds_mixed)
		return;
	if (!m->creds.known) {
		if (c->known)
			m->creds = *c;
		else
			m->creds_mixed = true;
		return;
	}
	if (!c->known || !creds_same(&m->creds, c)) {
		m->creds_mixed = true;
		m->creds.known = false;
	}
}

/* Could the job's user read the file st?  World-readable always; else by
 * its uid or one of its groups, as the kernel's permission bits say. */
static bool readable_by(const struct stat *st, const struct gs_sym_module *m)
{
	const struct gs_sym_creds *c = m ? &m->creds : NULL;

	if (st->st_mode & S_IROTH)
		return true;
	if (!c || !c->known)
		return false;
	if (st->st_uid == c->uid)
		return st->st_mode & S_IRUSR;
	if (st->st_gid == c->gid)
		return st->st_mode & S_IRGRP;
	for (int i = 0; i < c->n_groups; i++)
		if (st->st_gid == c->groups[i])
			return st->st_mode & S_IRGRP;
	return false;
}

/* ---- what libdw may inflate --------------------------------------------- */

int gs_sym_debug_admit(struct gs_sym_module *m, int fd, const char *name)
{
	uint64_t bytes = 0;
	const char *why = NULL;

	if (gs_elf_inflate_check(fd, GS_DEBUG_INFLATE_MAX, &bytes, &why)) {
		refused(m, R_INFLATE, name, why);
		return -EFBIG;
	}
	if (!bytes)
		return 0;
	if (gs_mem_charge(GS_MEM_DEBUG_DATA, bytes)) {
		refused(m, R_BUDGET, name, NULL);
		return -ENOSPC;
	}
	if (m)
		m->inflate_charged += bytes;
	else
		gs_mem_release(GS_MEM_DEBUG_DATA, bytes); /* checked, never kept */
	return 0;
}

void gs_sym_debug_release(struct gs_sym_module *m)
{
	gs_mem_release(GS_MEM_DEBUG_DATA, m->inflate_charged);
	m->inflate_charged = 0;
}

/* ---- where debug files are looked for ------------------------------------ */

/* file_name is "/proc/PID/root/PATH" when the target has a root of its own
 * (native/maps.c), else the host path: split it into the root and the
 * path inside it. */
static void split_root(const char *file_name, char *root, size_t n, const char **inner)
{
	unsigned pid;
	int used = 0;

	if (sscanf(file_name, "/proc/%u/root%n", &pid, &used) == 1 && used > 0 &&
	    file_name[used] == '/') {
		snprintf(root, n, "/proc/%u/root", pid);
		*inner = file_name + used;
		return;
	}
	snprintf(root, n, "/");
	*inner = file_name;
}

/* A name from the target's ELF used as one path component. */
static bool plain_name(const char *s)
{
	return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* An absolute dwz name: under /usr/lib/debug, no "." or ".." component. */
static bool alt_name_ok(const char *s)
{
	if (strncmp(s, "/" DEBUG_DIR "/", sizeof(DEBUG_DIR) + 1))
		return false;
	for (const char *p = s; *p;) {
		const char *e = strchrnul(++p, '/');
		size_t l = (size_t)(e - p);

		if (!l || (l == 1 && p[0] == '.') || (l == 2 && !memcmp(p, "..", 2)))
			return false;
		p = e;
	}
	return true;
}

/* The .gnu_debuglink CRC of fd (size bytes, at most GS_DEBUG_FILE_MAX),
 * -EINTR when a stop was asked or the run's CRC time is spent, -EIO when
 * unreadable. */
static int file_crc(int fd, off_t size, uint32_t *out)
{
	const size_t chunk = 1 << 20;
	unsigned char *buf = malloc(chunk);
	uLong crc = crc32(0, NULL, 0);
	double t0 = gs_mono_s(), left;
	int err = buf ? 0 : -ENOMEM;

	pthread_mutex_lock(&g.lock);
	left = GS_DEBUGLINK_CRC_S - g.crc_s;
	pthread_mutex_unlock(&g.lock);
	for (off_t off = 0; off < size && !err;) {
		ssize_t r = pread(fd, buf, chunk, off);

		if (r <= 0)
			err = -EIO;
		else if (gs_sym_stop_asked() || gs_mono_s() - t0 > left)
			err = -EINTR;
		else {
			crc = crc32(crc, buf, (uInt)r);
			off += r;
		}
	}
	pthread_mutex_lock(&g.lock);
	g.crc_s += gs_mono_s() - t0;
	pthread_mutex_unlock(&g.lock);
	free(buf);
	*out = (uint32_t)crc;
	return err;
}

static bool is_elf(int fd)
{
	unsigned char h[SELFMAG];

	return pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) && !memcmp(h, ELFMAG, SELFMAG);
}

/* Is fd the debug file of a module with build-id bid (len n > 0), or
 * without one, with debuglink CRC crc (0: not checked, the dwz file)?
 * name: the file, for the notes. */
static bool matches(struct gs_sym_module *m, int fd, const struct stat *st,
		    const unsigned char *bid, int n, uint32_t crc, const char *name)
{
	if (!is_elf(fd) || gs_elf_headers_check(fd, NULL))
		return false;
	if (n <= 0) {
		uint32_t got;
		int err;

		if (!crc)
			return true;
		if ((uint64_t)st->st_size > GS_DEBUG_FILE_MAX) {
			refused(m, R_TOO_BIG, name, NULL);
			return false;
		}
		if ((err = file_crc(fd, st->st_size, &got)) == -EINTR)
			refused(m, R_CRC_STOP, name, NULL);
		return !err && got == crc;
	}
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	const void *got = NULL;
	ssize_t len = e ? dwelf_elf_gnu_build_id(e, &got) : -1;
	bool ok = len == n && !memcmp(got, bid, (size_t)n);

	if (e)
		elf_end(e);
	return ok;
}

/* The debug file at rel under root, checked (see the header comment), or
 * -1.  link_ok: a link at the path's end is followed (inside root):
 * build-id entries are links by design; a debuglink name is not. */
static int try_open(struct gs_sym_module *m, const char *root, const char *rel,
		    const unsigned char *bid, int n, uint32_t crc, bool link_ok, char **name)
{
	struct stat st;
	char *path = NULL;
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), fd;

	if (rfd < 0)
		return -1;
	fd = gs_open_regular_at(rfd, rel, link_ok ? 0 : O_NOFOLLOW,
				RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, &st);
	close(rfd);
	if (fd < 0)
		return -1;
	if (asprintf(&path, "%s%s%s", root, root[1] ? "/" : "", rel) < 0)
		path = NULL;
	/* the host's /usr/lib/debug is root's; the job's own root is its own,
	 * where only what its user could read anyway is taken */
	if (!readable_by(&st, m) || (!root[1] && st.st_uid != 0)) {
		refused(m, R_UNREADABLE, path, NULL);
		goto no;
	}
	if (!matches(m, fd, &st, bid, n, crc, path) || gs_sym_debug_admit(m, fd, path))
		goto no;
	if (name)
		*name = path;
	else
		free(path);
	return fd;
no:
	free(path);
	close(fd);
	return -1;
}

/* The debug file of build-id bid from debuginfod, checked as one from a
 * root is (but for its owner: root's cache), or -1; a refused one is
 * deleted from the cache. */
static int from_debuginfod(struct gs_sym_module *m, const unsigned char *bid, int n,
			   const char *modname, char **name)
{
	char *path = NULL;
	int fd;
	struct stat st;
	const char *why = NULL;

	/* libdwfl asks again (symbols, then DWARF): the servers once a module */
	if (m && m->debuginfod_asked)
		return -1;
	if (m)
		m->debuginfod_asked = true;
	if ((fd = gs_sym_debuginfod_find(bid, n, modname, &path)) < 0)
		return -1;
	if (fstat(fd, &st) || !matches(m, fd, &st, bid, n, 0, path))
		why = "not the module's debug file";
	else if (gs_sym_debug_admit(m, fd, path))
		why = "compressed sections over the cap or the memory budget";
	if (why) {
		close(fd);
		fd = -1;
		gs_sym_debuginfod_refused(path, why);
	}
	if (fd >= 0 && name)
		*name = path;
	else
		free(path);
	return fd;
}

int gs_sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **debuginfo_file_name)
{
	struct gs_sym_module *m = userdata ? *userdata : NULL;
	const unsigned char *bid = NULL;
	GElf_Addr bid_vaddr;
	int n = dwfl_module_build_id(mod, &bid, &bid_vaddr);
	char roots[2][64], rel[4200];
	const char *inner = NULL;
	size_t n_roots = 1;

	(void)base;
	split_root(file_name ? file_name : "", roots[0], sizeof(roots[0]), &inner);
	if (strcmp(roots[0], "/"))
		snprintf(roots[n_roots++], sizeof(roots[0]), "/");
	for (size_t r = 0; r < n_roots; r++) {
		int fd = -1;

		if (debuglink && debuglink[0] == '/' && alt_name_ok(debuglink)) {
			/* the dwz alt file: its own build-id is not the module's */
			fd = try_open(m, roots[r], debuglink + 1, NULL, 0, 0, true,
				      debuginfo_file_name);
			if (fd >= 0)
				return fd;
			continue;
		}
		if (n > 0 && n <= 64) {
			int k = snprintf(rel, sizeof(rel), DEBUG_DIR "/.build-id/%02x/", bid[0]);

			for (int i = 1; i < n && k < (int)sizeof(rel) - 8; i++)
				k += snprintf(rel + k, sizeof(rel) - (size_t)k, "%02x", bid[i]);
			snprintf(rel + k, sizeof(rel) - (size_t)k, ".debug");
			fd = try_open(m, roots[r], rel, bid, n, 0, true, debuginfo_file_name);
			if (fd >= 0)
				return fd;
		}
		/* the library's directory is a path in its own root only */
		if (r == 0 && debuglink && plain_name(debuglink) && inner && inner[0] == '/') {
			const char *slash = strrchr(inner, '/');
			int dl = (int)(slash - inner);

			if (snprintf(rel, sizeof(rel), DEBUG_DIR "%.*s/%s", dl, inner, debuglink) <
				(int)sizeof(rel) &&
			    (fd = try_open(m, roots[r], rel, bid, n, crc, false,
					   debuginfo_file_name)) >= 0)
				return fd;
		}
	}
	if (n > 0 && n <= 64)
		return from_debuginfod(m, bid, n, modname, debuginfo_file_name);
	return -1;
}

void gs_sym_debug_report(struct gs_profile *prof)
{
	/* each cause: what, the cap (if any), what else */
	static const char *const what[R_KINDS][2] = {
		[R_INFLATE] = { "their compressed sections claim more inflated than the cap per "
				"file",
				", or an impossible size" },
		[R_BUDGET] = { "their compressed sections did not fit the run's memory budget "
			       "(GS_MEM_BUDGET_MB sets another)",
			       "" },
		[R_UNREADABLE] = { "the job's user could not read them (or, on the host, root "
				   "does not own them)",
				   "" },
		[R_TOO_BIG] = { "a .gnu_debuglink file over the size cap",
				": its CRC is not read" },
		[R_CRC_STOP] = { "a .gnu_debuglink CRC cut short (a stop was asked, or the run's "
				 "CRC time was spent",
				 ")" },
	};
	static const unsigned long long cap[R_KINDS] = {
		[R_INFLATE] = GS_DEBUG_INFLATE_MAX >> 20,
		[R_TOO_BIG] = GS_DEBUG_FILE_MAX >> 20,
		[R_CRC_STOP] = GS_DEBUGLINK_CRC_S,
	};

	pthread_mutex_lock(&g.lock);
	for (int r = 0; r < R_KINDS; r++) {
		char c[48] = "";

		if (!g.n[r])
			continue;
		if (cap[r])
			snprintf(c, sizeof(c), " (%llu %s)", cap[r], r == R_CRC_STOP ? "s" : "MiB");
		gs_profile_add_note(prof,
				    "%zu debug file(s) or libraries not read for names: %s%s%s "
				    "(first: %s); their frames are named from the symbol table "
				    "or offsets",
				    g.n[r], what[r][0], c, what[r][1], g.first[r]);
	}
	pthread_mutex_unlock(&g.lock);
}
