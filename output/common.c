// SPDX-License-Identifier: MIT
/*
 * Shared by the writers: safe output files, a buffered fd writer, JSON
 * string escaping, and display frames (output/internal.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/internal.h"
#include "output/output.h"

/* ---- output files --------------------------------------------------------
 * gpusample runs as root and often writes into directories other users can
 * write to (/tmp, a shared project dir, the job's working directory).  So:
 * the file is created fresh (O_CREAT|O_EXCL|O_NOFOLLOW) under a temporary
 * name in the target directory, given to the invoking user with fchown on
 * the descriptor, and renamed into place only at the end.  Whatever already
 * sits at the path is replaced only if it is a regular file, not hard-linked,
 * owned by that same user (an earlier profile); anything else (another user's
 * file, a FIFO, a directory, a device, a symlink) is refused. */

static uid_t g_owner_uid = (uid_t)-1;
static gid_t g_owner_gid = (gid_t)-1;

void gs_output_set_owner(uid_t uid, gid_t gid)
{
	g_owner_uid = uid;
	g_owner_gid = gid;
}

static uid_t owner_uid(void)
{
	return g_owner_uid == (uid_t)-1 ? geteuid() : g_owner_uid;
}

struct outfile {
	int fd, dirfd;
	bool replace; /* a file of ours was there at open: exchange it */
	bool named;   /* tmp names it (else O_TMPFILE: no name until linkat) */
	dev_t old_dev, dev;
	ino_t old_ino, ino; /* old: the file replaced; dev:ino: ours (fd's) */
	char base[256], tmp[272];
	char path[PATH_MAX];
};

#define GS_MAX_OPEN_OUTPUTS 8
static struct outfile g_out[GS_MAX_OPEN_OUTPUTS];

/* Split path into a directory fd and the last component. */
static int open_parent(const char *path, char *base, size_t baselen, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *b = slash ? slash + 1 : path;
	int fd;

	if (!*b || !strcmp(b, ".") || !strcmp(b, "..")) {
		snprintf(err, errlen,
			 "%s names a directory, not a file (give a file name or "
			 "prefix, e.g. -o %s%sprofile)",
			 path, path, slash && !slash[1] ? "" : "/");
		return -EISDIR;
	}
	if (strlen(b) >= baselen) {
		snprintf(err, errlen, "%s: file name too long (choose a shorter -o)", path);
		return -ENAMETOOLONG;
	}
	snprintf(base, baselen, "%s", b);
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;

		snprintf(err, errlen,
			 "cannot write %s: directory %s: %s (create it or choose "
			 "another -o)",
			 path, dir, strerror(-rc));
		return rc;
	}
	return fd;
}

/* May whatever is at base be replaced?  0 = nothing there, 1 = a file of
 * ours (its identity in *st), <0 = refuse (err says why). */
static int check_existing(int dirfd, const char *base, const char *path, struct stat *st, char *err,
			  size_t errlen)
{
	const char *what;

	if (fstatat(dirfd, base, st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot check %s: %s", path, strerror(errno));
		return -errno;
	}
	if (S_ISREG(st->st_mode) && st->st_uid == owner_uid() && st->st_nlink == 1)
		return 1;
	what = S_ISLNK(st->st_mode)    ? "a symlink (symbolic link), never followed as root"
	       : S_ISDIR(st->st_mode)  ? "a directory"
	       : S_ISFIFO(st->st_mode) ? "a FIFO"
	       : S_ISSOCK(st->st_mode) ? "a socket"
	       : !S_ISREG(st->st_mode) ? "a device"
	       : st->st_nlink != 1     ? "a file with other hard links"
				       : "a file owned by another user";
	snprintf(err, errlen,
		 "%s exists and is %s (uid %u); gpusample only replaces its own "
		 "regular files: remove it or choose another -o",
		 path, what, (unsigned)st->st_uid);
	return S_ISDIR(st->st_mode) ? -EISDIR : S_ISLNK(st->st_mode) ? -ELOOP : -EEXIST;
}

/* Create the file.  With nothing at base, an O_TMPFILE: it has no name
 * until linkat puts it at base, so the target's user, who may own the
 * directory, has nothing to swap.  Else (or where the file system has no
 * O_TMPFILE) a fresh temporary next to base, ".base.XXXXXX", checked by
 * identity before and after it is renamed (publish). */
static int create_tmp(struct outfile *o, char *err, size_t errlen)
{
	struct stat st;

	o->named = false;
	if (!o->replace)
		o->fd = openat(o->dirfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0644);
	for (int tries = 0; o->fd < 0 && tries < 16; tries++) {
		uint32_t r;

		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint32_t)gs_mix64((uint64_t)getpid() << 8 | (uint64_t)tries);
		snprintf(o->tmp, sizeof(o->tmp), ".%.200s.%08x", o->base, r);
		o->fd = openat(o->dirfd, o->tmp,
			       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		o->named = o->fd >= 0;
		if (o->fd < 0 && errno != EEXIST)
			break;
	}
	if (o->fd >= 0 && !fstat(o->fd, &st)) {
		o->dev = st.st_dev;
		o->ino = st.st_ino;
		return 0;
	}
	int rc = -errno;
	snprintf(err, errlen,
		 "cannot create %s: %s (check the directory is writable, or "
		 "choose another -o)",
		 o->path, strerror(-rc));
	return rc;
}

/* Is the entry name in dirfd our file (not a link, FIFO or another file
 * swapped in for it)? */
static bool is_ours(const struct outfile *o, const char *name)
{
	struct stat st;

	return !fstatat(o->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
	       st.st_dev == o->dev && st.st_ino == o->ino;
}

/* Remove our temporary: only by its name while it is still ours. */
static void drop_tmp(struct outfile *o)
{
	if (o->named)
		unlinkat(o->dirfd, o->tmp, 0);
}

static int prepare_output(struct outfile *o, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	snprintf(o->path, sizeof(o->path), "%s", path);
	o->dirfd = open_parent(path, o->base, sizeof(o->base), err, errlen);
	if (o->dirfd < 0)
		return o->dirfd;
	rc = check_existing(o->dirfd, o->base, path, &st, err, errlen);
	if (rc < 0)
		goto fail;
	o->replace = rc == 1;
	o->old_dev = st.st_dev;
	o->old_ino = st.st_ino;
	if ((rc = create_tmp(o, err, errlen)))
		goto fail;
	/* On the descriptor, never by path: the name can be swapped under us. */
	if (g_owner_uid != (uid_t)-1 && geteuid() == 0 && fchown(o->fd, g_owner_uid, g_owner_gid)) {
		rc = -errno;
		snprintf(err, errlen, "cannot give %s to uid %u: %s", path, (unsigned)g_owner_uid,
			 strerror(-rc));
		goto fail;
	}
	return 0;
fail:
	if (o->fd >= 0) {
		close(o->fd);
		drop_tmp(o);
	}
	close(o->dirfd);
	o->fd = o->dirfd = -1;
	return rc;
}

int gs_output_check(const char *path, char *err, size_t errlen)
{
	struct outfile o;
	int rc = prepare_output(&o, path, err, errlen);

	if (rc)
		return rc;
	close(o.fd);
	drop_tmp(&o);
	close(o.dirfd);
	return 0;
}

int gs_output_open(const char *path, char *err, size_t errlen)
{
	struct outfile *o = NULL;
	int rc;

	for (int i = 0; i < GS_MAX_OPEN_OUTPUTS && !o; i++)
		if (!g_out[i].path[0])
			o = &g_out[i];
	if (!o) {
		snprintf(err, errlen, "too many output files open at once");
		return -EMFILE;
	}
	rc = prepare_output(o, path, err, errlen);
	if (rc) {
		o->path[0] = 0;
		return rc;
	}
	return o->fd;
}

/* Move the finished file to its name.  Nothing there: the link or rename
 * must not replace anything that appeared meanwhile.  Our old file there:
 * exchange, then make sure what came out is the file checked at open.  In
 * every case what ends up at base must be our file (dev:inode of fd): the
 * temporary's name is in a directory the target's user may own, and a
 * link or FIFO swapped in for it was renamed into place and reported as
 * written (issue 24).  -ESTALE then, and nothing of theirs left at base. */
static int publish(struct outfile *o)
{
	struct stat st;
	char self[40];

	if (!o->named) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", o->fd);
		return linkat(AT_FDCWD, self, o->dirfd, o->base, AT_SYMLINK_FOLLOW) ? -errno : 0;
	}
	if (!is_ours(o, o->tmp))
		return -ESTALE; /* swapped before the rename: not moved */
	if (!o->replace) {
		if (renameat2(o->dirfd, o->tmp, o->dirfd, o->base, RENAME_NOREPLACE)) {
			if (errno != EINVAL)
				return -errno;
			/* no RENAME_NOREPLACE here (NFS): link fails if the name exists */
			if (linkat(o->dirfd, o->tmp, o->dirfd, o->base, 0))
				return -errno;
			unlinkat(o->dirfd, o->tmp, 0);
		}
		if (is_ours(o, o->base))
			return 0;
		/* swapped between the check and the rename: the name was free
		 * (NOREPLACE), what we moved there is theirs; unlinkat never
		 * follows it */
		unlinkat(o->dirfd, o->base, 0);
		return -ESTALE;
	}
	if (renameat2(o->dirfd, o->tmp, o->dirfd, o->base, RENAME_EXCHANGE))
		return errno == EINVAL
			   ? (renameat(o->dirfd, o->tmp, o->dirfd, o->base) ? -errno : 0)
			   : -errno;
	if (fstatat(o->dirfd, o->tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == o->old_dev &&
	    st.st_ino == o->old_ino && is_ours(o, o->base)) {
		unlinkat(o->dirfd, o->tmp, 0);
		return 0;
	}
	/* Someone else's file was swapped in after the check: put it back. */
	renameat2(o->dirfd, o->tmp, o->dirfd, o->base, RENAME_EXCHANGE);
	return is_ours(o, o->tmp) ? -EEXIST : -ESTALE;
}

int gs_output_close(int fd, int rc, char *err, size_t errlen)
{
	struct outfile *o = NULL;

	for (int i = 0; i < GS_MAX_OPEN_OUTPUTS && !o; i++)
		if (g_out[i].path[0] && g_out[i].fd == fd)
			o = &g_out[i];
	if (!o) {
		close(fd);
		return rc ? rc : -EBADF;
	}
	/* an O_TMPFILE is linked through its descriptor: before the close */
	int linked = !rc && !o->named ? publish(o) : 1;

	if (close(fd) && !rc) {
		rc = -errno;
		if (!linked && is_ours(o, o->base)) /* not written after all */
			unlinkat(o->dirfd, o->base, 0);
	}
	if (!rc && (rc = o->named ? publish(o) : linked) && err)
		snprintf(err, errlen,
			 "cannot put the profile at %s: %s (the path %s meanwhile; "
			 "choose another -o)",
			 o->path, strerror(-rc),
			 rc == -EEXIST   ? "was taken by someone else"
			 : rc == -ESTALE ? "or its temporary was swapped by someone else"
					 : "could not be replaced");
	else if (rc && err)
		gs_output_fail(err, errlen, rc, "cannot write", o->path);
	if (rc && o->named && is_ours(o, o->tmp))
		unlinkat(o->dirfd, o->tmp, 0);
	close(o->dirfd);
	o->path[0] = 0;
	return rc;
}

int gs_output_fail(char *err, size_t errlen, int rc, const char *what, const char *path)
{
	if (err)
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(rc < 0 ? -rc : rc));
	return rc < 0 ? rc : -rc;
}

/* ---- buffered writer ---------------------------------------------------- */

void gs_wbuf_init(struct gs_wbuf *w, int fd)
{
	w->fd = fd;
	w->err = 0;
	w->n = 0;
}

int gs_wbuf_flush(struct gs_wbuf *w)
{
	size_t off = 0;
	while (off < w->n && !w->err) {
		ssize_t r = write(w->fd, w->buf + off, w->n - off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			w->err = -errno;
		} else {
			off += (size_t)r;
		}
	}
	w->n = 0;
	return w->err;
}

void gs_wbuf_put(struct gs_wbuf *w, const void *s, size_t n)
{
	const char *c = s;
	while (n) {
		if (w->n == sizeof(w->buf))
			gs_wbuf_flush(w);
		size_t k = sizeof(w->buf) - w->n;
		if (k > n)
			k = n;
		memcpy(w->buf + w->n, c, k);
		w->n += k;
		c += k;
		n -= k;
	}
}

void gs_wbuf_puts(struct gs_wbuf *w, const char *s)
{
	gs_wbuf_put(w, s, strlen(s));
}

void gs_wbuf_putc(struct gs_wbuf *w, char c)
{
	if (w->n == sizeof(w->buf))
		gs_wbuf_flush(w);
	w->buf[w->n++] = c;
}

void gs_wbuf_u64(struct gs_wbuf *w, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	gs_wbuf_put(w, tmp + i, sizeof(tmp) - (size_t)i);
}

void gs_wbuf_i64(struct gs_wbuf *w, int64_t v)
{
	if (v < 0) {
		gs_wbuf_putc(w, '-');
		gs_wbuf_u64(w, (uint64_t)0 - (uint64_t)v);
	} else {
		gs_wbuf_u64(w, (uint64_t)v);
	}
}

/* ---- JSON escaping ------------------------------------------------------ */


/* Emit the escaped form through a callback-free two-target writer. */
struct esc_out {
	struct gs_wbuf *w;
	char *buf;
	size_t len, cap;
};

static void esc_put(struct esc_out *o, const char *s, size_t n)
{
	if (o->w) {
		gs_wbuf_put(o->w, s, n);
		return;
	}
	if (o->len + n + 1 > o->cap) /* drop whole pieces that don't fit */
		return;
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = 0;
}

static void json_escape(struct esc_out *o, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	while (*s) {
		const unsigned char *run = s;
		int n;
		/* copy runs of plain characters in one go */
		while (*s >= 0x20 && *s != '"' && *s != '\\' && (n = gs_utf8_len(s)) > 0)
			s += n;
		if (s > run)
			esc_put(o, (const char *)run, (size_t)(s - run));
		if (!*s)
			break;
		char tmp[8];
		switch (*s) {
		case '"':
			esc_put(o, "\\\"", 2);
			break;
		case '\\':
			esc_put(o, "\\\\", 2);
			break;
		case '\n':
			esc_put(o, "\\n", 2);
			break;
		case '\r':
			esc_put(o, "\\r", 2);
			break;
		case '\t':
			esc_put(o, "\\t", 2);
			break;
		case '\b':
			esc_put(o, "\\b", 2);
			break;
		case '\f':
			esc_put(o, "\\f", 2);
			break;
		default:
			if (*s < 0x20) {
				snprintf(tmp, sizeof(tmp), "\\u%04x", *s);
				esc_put(o, tmp, 6);
			} else {
				esc_put(o, "\\ufffd", 6); /* invalid UTF-8 byte */
			}
		}
		s++;
	}
}

void gs_json_escape(struct gs_wbuf *w, const char *s)
{
	struct esc_out o = { .w = w };
	json_escape(&o, s);
}

size_t gs_json_escape_buf(const char *s, char *out, size_t outlen)
{
	struct esc_out o = { .buf = out, .cap = outlen };
	if (outlen)
		out[0] = 0;
	json_escape(&o, s);
	return o.len;
}

int gs_term_view_init(struct gs_term_view *v, const struct gs_profile *p)
{
	memset(v, 0, sizeof(*v));
	v->p = p;
	for (uint32_t i = 0; i < p->n_strings; i++) {
		const char *str = p->strings[i];
		size_t cap;

		if (!str || !gs_term_needs_escape(str))
			continue;
		if (!v->strings) {
			v->view = *p;
			v->strings = malloc(p->n_strings * sizeof(*v->strings));
			v->owned = calloc(p->n_strings, sizeof(*v->owned));
			if (!v->strings || !v->owned) {
				gs_term_view_free(v);
				return -ENOMEM;
			}
			memcpy(v->strings, p->strings, p->n_strings * sizeof(*v->strings));
			v->view.strings = v->strings;
			v->p = &v->view;
		}
		cap = strlen(str) * 6 + 1; /* worst case: every byte a \xNN or \uXXXX */
		if (!(v->owned[i] = malloc(cap))) {
			gs_term_view_free(v);
			return -ENOMEM;
		}
		gs_term_escape(str, v->owned[i], cap);
		v->strings[i] = v->owned[i];
	}
	return 0;
}

void gs_term_view_free(struct gs_term_view *v)
{
	for (uint32_t i = 0; v->owned && i < v->view.n_strings; i++)
		free(v->owned[i]);
	free(v->owned);
	free(v->strings);
	memset(v, 0, sizeof(*v));
}

/* ---- names -------------------------------------------------------------- */

const char *gs_short_path(const char *path)
{
	static const char *const anchors[] = { "/site-packages/", "/dist-packages/" };
	if (!path)
		return NULL;
	for (size_t i = 0; i < sizeof(anchors) / sizeof(anchors[0]); i++) {
		const char *a = strstr(path, anchors[i]);
		if (a)
			return a + strlen(anchors[i]);
	}
	/* .../lib/python3.11/foo.py -> foo.py (stdlib) */
	const char *a = strstr(path, "/lib/python");
	if (a) {
		const char *slash = strchr(a + strlen("/lib/python"), '/');
		if (slash)
			return slash + 1;
	}
	return path;
}

const char *gs_short_cxx_name(const char *name, char *buf, size_t len)
{
	if (!len)
		return buf;
	size_t end = strlen(name);
	bool had_params = false;
	if (name[0] == '[') { /* pseudo names: "[unknown python]", "[vdso]" */
		snprintf(buf, len, "%s", name);
		return buf;
	}
	/* drop trailing " const" and the parameter list "(...)" */
	while (end && name[end - 1] == ' ')
		end--;
	if (end >= 6 && strncmp(name + end - 6, " const", 6) == 0)
		end -= 6;
	if (end && name[end - 1] == ')') {
		int depth = 0;
		for (size_t i = end; i-- > 0;) {
			if (name[i] == ')')
				depth++;
			else if (name[i] == '(' && --depth == 0) {
				if (i > 0) {
					end = i;
					had_params = true;
				}
				break;
			}
		}
	}
	/* copy without template arguments; a space outside <> and () ends a
	 * return type ("void ns::k<int>" -> "ns::k") */
	size_t o = 0;
	int tdepth = 0, pdepth = 0;
	for (size_t i = 0; i < end; i++) {
		char c = name[i];
		if (tdepth == 0 && pdepth == 0 && strncmp(name + i, "operator", 8) == 0) {
			/* operator<, operator() ...: keep the rest verbatim */
			for (; i < end && o + 1 < len; i++)
				buf[o++] = name[i];
			break;
		}
		if (c == '<') {
			tdepth++;
			continue;
		}
		if (c == '>' && tdepth) {
			tdepth--;
			continue;
		}
		if (tdepth)
			continue;
		if (c == '(')
			pdepth++;
		else if (c == ')' && pdepth)
			pdepth--;
		if (c == ' ' && pdepth == 0 && had_params) {
			o = 0; /* a full signature: everything so far was a return type */
			continue;
		}
		if (o + 1 < len)
			buf[o++] = c;
	}
	buf[o] = 0;
	if (!o) /* nothing sensible left: keep the original */
		snprintf(buf, len, "%s", name);
	return buf;
}

const struct gs_process *gs_find_process(const struct gs_profile *p, uint32_t pid)
{
	/* later entries win (exec replaced comm): the index keeps the last */
	const uint64_t *i = gs_hmap_get(&p->proc_index, pid);
	return i && *i < p->n_processes ? &p->processes[*i] : NULL;
}

/* ---- display frames ----------------------------------------------------- */

size_t gs_location_dframes(const struct gs_profile *p, uint32_t loc_id, struct gs_dframe *out,
			   size_t max)
{
	const struct gs_location *loc = gs_profile_location(p, loc_id);
	const struct gs_line *lines = &p->lines[loc->first_line];
	size_t n = 0;
	if (!max)
		return 0;
	if (loc->n_lines == 0) {
		out[n++] = (struct gs_dframe){ .type = GS_DF_ADDR,
					       .loc = loc_id,
					       .kernel = loc->kind == GS_FRAME_KERNEL };
		return n;
	}
	if (loc->kind == GS_FRAME_GPU_PC) {
		/* [GPU] kernel (outermost line's function), inlined device
		 * functions, then the leaf source line. */
		const struct gs_line *k = &lines[loc->n_lines - 1];
		out[n++] = (struct gs_dframe){ .type = GS_DF_GPU_KERNEL, .fn = k->function };
		for (uint32_t i = loc->n_lines - 1; i-- > 0 && n < max;)
			out[n++] = (struct gs_dframe){ .type = GS_DF_GPU_INLINE,
						       .fn = lines[i].function };
		if (lines[0].line > 0 && n < max)
			out[n++] = (struct gs_dframe){ .type = GS_DF_GPU_LINE,
						       .fn = lines[0].function,
						       .line = lines[0].line };
		return n;
	}
	/* inline chain: lines[] is callee first, display is caller first */
	for (uint32_t i = loc->n_lines; i-- > 0 && n < max;) {
		struct gs_dframe f = { .fn = lines[i].function,
				       .kernel = loc->kind == GS_FRAME_KERNEL };
		if (loc->kind == GS_FRAME_PYTHON) {
			f.type = GS_DF_PYLINE;
			f.line = lines[i].line;
		} else {
			f.type = GS_DF_FUNC;
		}
		out[n++] = f;
	}
	return n;
}

static const char *basename_of(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

const char *gs_dframe_name(const struct gs_profile *p, const struct gs_dframe *f, char *buf,
			   size_t len)
{
	const struct gs_function *fn = NULL;
	if (f->type != GS_DF_ADDR && f->type != GS_DF_STALL && f->fn)
		fn = gs_profile_function(p, f->fn);
	const char *name = fn && fn->name ? gs_profile_str(p, fn->name) : "[unknown]";
	const char *file = fn && fn->file ? gs_profile_str(p, fn->file) : NULL;
	char tmp[512];

	switch (f->type) {
	case GS_DF_PYLINE:
		if (file && f->line > 0)
			snprintf(buf, len, "%s (%s:%" PRId64 ")", name, gs_short_path(file),
				 f->line);
		else if (file)
			snprintf(buf, len, "%s (%s)", name, gs_short_path(file));
		else
			snprintf(buf, len, "%s", name);
		break;
	case GS_DF_GPU_KERNEL:
		snprintf(buf, len, "[GPU] %s", gs_short_cxx_name(name, tmp, sizeof(tmp)));
		break;
	case GS_DF_GPU_INLINE:
		snprintf(buf, len, "%s", gs_short_cxx_name(name, tmp, sizeof(tmp)));
		break;
	case GS_DF_GPU_LINE:
		snprintf(buf, len, "%s:%" PRId64, file ? basename_of(file) : "?", f->line);
		break;
	case GS_DF_STALL:
		snprintf(buf, len, "[stall] %s", f->fn ? gs_profile_str(p, f->fn) : "unknown");
		break;
	case GS_DF_ADDR: {
		const struct gs_location *l = gs_profile_location(p, f->loc);
		const struct gs_mapping *m = l->mapping ? &p->mappings[l->mapping - 1] : NULL;
		if (m && m->file)
			snprintf(buf, len, "%s+0x%" PRIx64, basename_of(gs_profile_str(p, m->file)),
				 l->address - m->start + m->offset);
		else
			snprintf(buf, len, "0x%" PRIx64, l->address);
		break;
	}
	default:
		snprintf(buf, len, "%s", name);
	}
	return buf;
}

const char *gs_dframe_file(const struct gs_profile *p, const struct gs_dframe *f)
{
	if (f->type == GS_DF_ADDR || f->type == GS_DF_STALL || !f->fn)
		return NULL;
	const struct gs_function *fn = gs_profile_function(p, f->fn);
	return fn->file ? gs_profile_str(p, fn->file) : NULL;
}

int64_t gs_dframe_line(const struct gs_profile *p, const struct gs_dframe *f)
{
	if (f->type == GS_DF_PYLINE || f->type == GS_DF_GPU_LINE)
		return f->line;
	if (f->type == GS_DF_ADDR || f->type == GS_DF_STALL || !f->fn)
		return 0;
	return gs_profile_function(p, f->fn)->start_line;
}

uint64_t gs_dframe_hash(const struct gs_dframe *f)
{
	uint64_t h = gs_mix64(((uint64_t)f->type << 56) ^ ((uint64_t)f->kernel << 48) ^ f->fn);
	return gs_mix64(h ^ (uint64_t)f->line ^ ((uint64_t)f->loc << 32));
}

int gs_dframe_eq(const struct gs_dframe *a, const struct gs_dframe *b)
{
	return a->type == b->type && a->kernel == b->kernel && a->fn == b->fn &&
	       a->line == b->line && a->loc == b->loc;
}

void gs_json_str(struct gs_wbuf *w, const char *s)
{
	gs_wbuf_putc(w, '"');
	gs_json_escape(w, s);
	gs_wbuf_putc(w, '"');
}

int gs_write_buffered(const char *path, int (*body)(void *ctx, struct gs_wbuf *w), void *ctx,
		      char *err, size_t errlen)
{
	struct gs_wbuf *w = malloc(sizeof(*w));
	if (!w)
		return gs_output_fail(err, errlen, -ENOMEM, "cannot write", path);
	int fd = gs_output_open(path, err, errlen);
	if (fd < 0) {
		free(w);
		return fd;
	}
	gs_wbuf_init(w, fd);
	int rc = body(ctx, w);
	int frc = gs_wbuf_flush(w);
	rc = gs_output_close(fd, rc ? rc : frc, err, errlen);
	free(w);
	return rc;
}

/* ---- the job's own Python code ------------------------------------------- */

/* Not the interpreter's library, an installed package or a frozen module. */
static bool is_user_file(const char *f)
{
	return f && f[0] && f[0] != '<' && !strstr(f, "/lib/python") && !strstr(f, "-packages/");
}

uint32_t gs_stack_user_python(const struct gs_profile *p, uint32_t stack, const char **file)
{
	const struct gs_stack *st = &p->stacks[stack];
	uint32_t first = 0;
	const char *dummy;

	file = file ? file : &dummy;
	*file = NULL;
	for (uint32_t i = 0; i < st->n; i++) {
		uint32_t loc = p->stack_locs[st->first + i];
		const struct gs_location *l = gs_profile_location(p, loc);
		const char *f;

		if (l->kind != GS_FRAME_PYTHON || !l->n_lines)
			continue;
		f = gs_profile_str(p,
				   gs_profile_function(p, p->lines[l->first_line].function)->file);
		if (!first) {
			first = loc;
			*file = f;
		}
		if (is_user_file(f))
			return loc;
	}
	return first;
}
