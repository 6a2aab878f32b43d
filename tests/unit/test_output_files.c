// SPDX-License-Identifier: MIT
/* Output file creation (output/common.c): never write through, over or into
 * something gpusample did not create. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/output.h"
#include "output_fixture.h"

FX_TMPDIR_SUITE(outfiles, "outfiles");

static void put(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(s, f);
	fclose(f);
}

static void assert_content(const char *path, const char *want)
{
	char *got = fx_read_file(path, NULL);
	cr_assert_not_null(got, "%s", path);
	cr_assert_str_eq(got, want, "%s", path);
	free(got);
}

/* No ".name.XXXXXXXX" temporaries are left behind. */
static void assert_no_temporaries(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		cr_assert(e->d_name[0] != '.' || !strcmp(e->d_name, ".") ||
			      !strcmp(e->d_name, ".."),
			  "temporary %s left behind", e->d_name);
	closedir(d);
}

static int write_str(const char *path, const char *s, char *err, size_t len)
{
	int fd = gs_output_open(path, err, len);
	if (fd < 0)
		return fd;
	int rc = write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : -EIO;
	return gs_output_close(fd, rc, err, len);
}

Test(outfiles, creates_and_replaces_own_file)
{
	char p[128], err[512] = "";
	snprintf(p, sizeof(p), "%s/a.txt", tmpdir);
	cr_assert_eq(write_str(p, "one", err, sizeof(err)), 0, "%s", err);
	assert_content(p, "one");
	cr_assert_eq(write_str(p, "two", err, sizeof(err)), 0, "%s", err);
	assert_content(p, "two");
	assert_no_temporaries();
}

Test(outfiles, nothing_visible_until_close)
{
	char p[128], err[512] = "";
	snprintf(p, sizeof(p), "%s/b.txt", tmpdir);
	int fd = gs_output_open(p, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	cr_assert_neq(access(p, F_OK), 0, "the name appears only when the file is complete");
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(gs_output_close(fd, -EIO, err, sizeof(err)), -EIO);
	cr_assert_neq(access(p, F_OK), 0, "a failed write publishes nothing");
	assert_no_temporaries();
}

Test(outfiles, refuses_fifo_directory_and_links)
{
	char p[128], err[512] = "";
	snprintf(p, sizeof(p), "%s/fifo", tmpdir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	cr_assert_eq(gs_output_check(p, err, sizeof(err)), -EEXIST);
	cr_assert_not_null(strstr(err, "FIFO"), "%s", err);
	cr_assert_eq(gs_output_open(p, err, sizeof(err)), -EEXIST);

	snprintf(p, sizeof(p), "%s/dir", tmpdir);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(gs_output_check(p, err, sizeof(err)), -EISDIR);
	cr_assert_not_null(strstr(err, "directory"), "%s", err);

	snprintf(p, sizeof(p), "%s/", tmpdir);
	cr_assert_eq(gs_output_check(p, err, sizeof(err)), -EISDIR);

	char a[128], b[128];
	snprintf(a, sizeof(a), "%s/orig", tmpdir);
	snprintf(b, sizeof(b), "%s/hardlink", tmpdir);
	put(a, "keep");
	cr_assert_eq(link(a, b), 0);
	cr_assert_eq(write_str(b, "x", err, sizeof(err)), -EEXIST);
	cr_assert_not_null(strstr(err, "hard links"), "%s", err);
	assert_content(a, "keep");
	unlink(b);
	unlink(a);
	snprintf(p, sizeof(p), "%s/fifo", tmpdir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/dir", tmpdir);
	rmdir(p);
	assert_no_temporaries();
}

Test(outfiles, uncreatable_path_is_refused_early)
{
	char err[512] = "";
	cr_assert_lt(gs_output_check("/proc/no-such-dir/x.pb.gz", err, sizeof(err)), 0);
	cr_assert_not_null(strstr(err, "cannot write"), "%s", err);
	cr_assert_lt(gs_output_check("/proc/self/x.pb.gz", err, sizeof(err)), 0);
}

/* A file planted at the path after the check is never replaced. */
Test(outfiles, race_file_appears_after_open)
{
	char p[128], err[512] = "";
	snprintf(p, sizeof(p), "%s/c.txt", tmpdir);
	int fd = gs_output_open(p, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	put(p, "planted");
	cr_assert_eq(write(fd, "ours", 4), 4);
	cr_assert_eq(gs_output_close(fd, 0, err, sizeof(err)), -EEXIST);
	cr_assert_not_null(strstr(err, "someone else"), "%s", err);
	assert_content(p, "planted");
	unlink(p);
	assert_no_temporaries();
}

/* Our old file swapped for another one between open and close: the other
 * one stays where it was, unchanged. */
Test(outfiles, race_file_swapped_after_open)
{
	char p[128], q[128], err[512] = "";
	snprintf(p, sizeof(p), "%s/d.txt", tmpdir);
	snprintf(q, sizeof(q), "%s/other", tmpdir);
	put(p, "old");
	int fd = gs_output_open(p, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	put(q, "planted");
	cr_assert_eq(rename(q, p), 0);
	cr_assert_eq(write(fd, "ours", 4), 4);
	cr_assert_eq(gs_output_close(fd, 0, err, sizeof(err)), -EEXIST);
	assert_content(p, "planted");
	unlink(p);
	assert_no_temporaries();
}

/* The name of the one ".base.XXXXXXXX" temporary in tmpdir, "" if none. */
static void find_tmp(char *out, size_t n)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;

	out[0] = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			snprintf(out, n, "%s/%s", tmpdir, e->d_name);
	closedir(d);
}

/* Issue 24: with nothing at the path, the file has no name while it is
 * written (O_TMPFILE): the directory's owner has nothing to swap. */
Test(outfiles, new_file_has_no_name_to_swap)
{
	char p[128], err[512] = "";
	snprintf(p, sizeof(p), "%s/e.txt", tmpdir);
	int fd = gs_output_open(p, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	assert_no_temporaries();
	cr_assert_eq(write(fd, "ours", 4), 4);
	cr_assert_eq(gs_output_close(fd, 0, err, sizeof(err)), 0, "%s", err);
	assert_content(p, "ours");
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISREG(st.st_mode) && st.st_nlink == 1);
	unlink(p);
}

/* Issue 24: replacing an earlier profile goes through a named temporary;
 * a symlink (to a root file) or a FIFO swapped in for it is never moved to
 * the path, and the close fails: no "wrote" for what is not ours. */
Test(outfiles, swapped_temporary_never_published)
{
	char p[128], victim[128], tmp[600], err[512] = "";
	snprintf(p, sizeof(p), "%s/f.txt", tmpdir);
	snprintf(victim, sizeof(victim), "%s/victim", tmpdir);
	put(victim, "root's");
	for (int fifo = 0; fifo < 2; fifo++) {
		put(p, "old");
		int fd = gs_output_open(p, err, sizeof(err));
		cr_assert_geq(fd, 0, "%s", err);
		find_tmp(tmp, sizeof(tmp));
		cr_assert(tmp[0], "a temporary while replacing");
		cr_assert_eq(unlink(tmp), 0);
		cr_assert_eq(fifo ? mkfifo(tmp, 0644) : symlink(victim, tmp), 0);
		cr_assert_eq(write(fd, "ours", 4), 4);
		cr_assert_neq(gs_output_close(fd, 0, err, sizeof(err)), 0, "reported written");
		cr_assert_not_null(strstr(err, "swapped"), "%s", err);
		struct stat st;
		cr_assert_eq(lstat(p, &st), 0);
		cr_assert(S_ISREG(st.st_mode), "the swapped-in object is at the path");
		assert_content(p, "old");
		assert_content(victim, "root's");
		unlink(tmp);
	}
	unlink(p);
	unlink(victim);
}

static int folded_cpu(const struct gs_profile *p, const char *path, char *err, size_t len)
{
	return gs_write_folded(p, GS_FOLDED_CPU, path, err, len);
}

/* Every writer opens through gs_output_open: none writes through a link
 * planted at its path (the link and its target stay as they were). */
Test(outfiles, every_writer_refuses_a_link)
{
	static const struct {
		const char *name;
		int (*write)(const struct gs_profile *, const char *, char *, size_t);
	} w[] = { { "pprof", gs_write_pprof },
		  { "speedscope", gs_write_speedscope },
		  { "trace", gs_write_trace },
		  { "folded", folded_cpu } };
	char target[128], link[128], err[256];
	struct gs_profile p;

	gs_profile_init(&p);
	snprintf(target, sizeof(target), "%s/target", tmpdir);
	put(target, "keep");
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		snprintf(link, sizeof(link), "%s/out.%s", tmpdir, w[i].name);
		cr_assert_eq(symlink(target, link), 0);
		err[0] = 0;
		cr_assert_lt(w[i].write(&p, link, err, sizeof(err)), 0, "%s", w[i].name);
		cr_assert_not_null(strstr(err, "symbolic link"), "%s: %s", w[i].name, err);
		assert_content(target, "keep");
		struct stat st;
		cr_assert_eq(lstat(link, &st), 0);
		cr_assert(S_ISLNK(st.st_mode), "%s replaced the link", w[i].name);
	}
	gs_profile_free(&p);
}
