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
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <zlib.h>
#include <elfutils/libdwelf.h>
#include "proc/proc.h"
#include "native/sym_internal.h"

#define DEBUG_DIR "usr/lib/debug"

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

static uint32_t file_crc(int fd, off_t size)
{
	unsigned char buf[65536];
	uLong crc = crc32(0, NULL, 0);

	for (off_t off = 0; off < size;) {
		ssize_t r = pread(fd, buf, sizeof(buf), off);

		if (r <= 0)
			return ~crc32(0, NULL, 0) ^ 1; /* unreadable: no match */
		crc = crc32(crc, buf, (uInt)r);
		off += r;
	}
	return (uint32_t)crc;
}

/* Is fd the debug file of a module with build-id bid (len n > 0), or
 * without one, with debuglink CRC crc (0: not checked, the dwz file)? */
static bool matches(int fd, const struct stat *st, const unsigned char *bid, int n, uint32_t crc)
{
	if (gs_elf_headers_check(fd, NULL))
		return false;
	if (n <= 0)
		return !crc || file_crc(fd, st->st_size) == crc;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	const void *got = NULL;
	ssize_t m = e ? dwelf_elf_gnu_build_id(e, &got) : -1;
	bool ok = m == n && !memcmp(got, bid, (size_t)n);

	if (e)
		elf_end(e);
	return ok;
}

static int try_open(const char *root, const char *rel, const unsigned char *bid, int n,
		    uint32_t crc, char **name)
{
	struct stat st;
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), fd;

	if (rfd < 0)
		return -1;
	fd = gs_open_regular_at(rfd, rel, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, &st);
	close(rfd);
	if (fd < 0)
		return -1;
	if (!matches(fd, &st, bid, n, crc)) {
		close(fd);
		return -1;
	}
	if (name && asprintf(name, "%s%s%s", root, root[1] ? "/" : "", rel) < 0)
		*name = NULL;
	return fd;
}

int gs_sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **debuginfo_file_name)
{
	const unsigned char *bid = NULL;
	GElf_Addr bid_vaddr;
	int n = dwfl_module_build_id(mod, &bid, &bid_vaddr);
	char roots[2][64], rel[4200];
	const char *inner = NULL;
	size_t n_roots = 1;

	split_root(file_name ? file_name : "", roots[0], sizeof(roots[0]), &inner);
	if (strcmp(roots[0], "/"))
		snprintf(roots[n_roots++], sizeof(roots[0]), "/");
	for (size_t r = 0; r < n_roots; r++) {
		int fd = -1;

		if (debuglink && debuglink[0] == '/' && alt_name_ok(debuglink)) {
			/* the dwz alt file: its own build-id is not the module's */
			fd = try_open(roots[r], debuglink + 1, NULL, 0, 0, debuginfo_file_name);
			if (fd >= 0)
				return fd;
			continue;
		}
		if (n > 0 && n <= 64) {
			int k = snprintf(rel, sizeof(rel), DEBUG_DIR "/.build-id/%02x/", bid[0]);

			for (int i = 1; i < n && k < (int)sizeof(rel) - 8; i++)
				k += snprintf(rel + k, sizeof(rel) - (size_t)k, "%02x", bid[i]);
			snprintf(rel + k, sizeof(rel) - (size_t)k, ".debug");
			if ((fd = try_open(roots[r], rel, bid, n, 0, debuginfo_file_name)) >= 0)
				return fd;
		}
		if (debuglink && plain_name(debuglink) && inner && inner[0] == '/') {
			const char *slash = strrchr(inner, '/');
			int dl = (int)(slash - inner);

			if (snprintf(rel, sizeof(rel), DEBUG_DIR "%.*s/%s", dl, inner, debuglink) <
				(int)sizeof(rel) &&
			    (fd = try_open(roots[r], rel, bid, n, crc, debuginfo_file_name)) >= 0)
				return fd;
		}
	}
	if (n > 0 && n <= 64) {
		char *path = NULL;
		int fd = gs_sym_debuginfod_find(bid, n, modname, &path);
		struct stat st;

		if (fd >= 0 && (fstat(fd, &st) || !matches(fd, &st, bid, n, 0))) {
			close(fd);
			fd = -1;
			gs_sym_debuginfod_refused();
		}
		if (fd >= 0 && debuginfo_file_name)
			*debuginfo_file_name = path;
		else
			free(path);
		return fd;
	}
	return -1;
}
