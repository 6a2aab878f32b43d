// SPDX-License-Identifier: MIT
/*
 * Output paths of a session, checked before sampling starts (docs/SECURITY.md):
 * a run must never end with nowhere to write, and root must never write
 * through or over something the caller or the target's user did not mean.
 * The file creation rules themselves live in output/common.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/session_int.h"
#include "output/output.h"
#include "util/log.h"

/* A decimal id from SUDO_UID / SUDO_GID; -1 if absent or not a number. */
static long sudo_id(const char *name)
{
	const char *v = getenv(name);
	char *end;
	long id;

	if (!v || !*v)
		return -1;
	errno = 0;
	id = strtol(v, &end, 10);
	if (errno || *end || id < 0 || id >= (long)UINT32_MAX)
		return -1;
	return id;
}

void gs_outputs_set_owner(void)
{
	long uid = sudo_id("SUDO_UID"), gid = sudo_id("SUDO_GID");

	/* Files written as root under sudo belong to the user who asked. */
	if (geteuid() == 0 && uid >= 0 && gid >= 0)
		gs_output_set_owner((uid_t)uid, (gid_t)gid);
}

const struct gs_out_file gs_out_files[GS_N_OUT_FILES] = {
	{ GS_FMT_PPROF, ".pb.gz" },       { GS_FMT_SPEEDSCOPE, ".speedscope.json" },
	{ GS_FMT_FOLDED, ".cpu.folded" }, { GS_FMT_FOLDED, ".gpu.folded" },
	{ GS_FMT_TRACE, ".trace.json" },  { GS_FMT_HTML, ".html" },
};

/* "-o dir/" or "-o dir" for an existing directory would write hidden
 * dir/.pb.gz files or siblings nobody looks for: ask for a file prefix. */
static int check_prefix(const char *prefix)
{
	struct stat st;
	size_t n = strlen(prefix);

	if (!n || prefix[n - 1] == '/' || (!stat(prefix, &st) && S_ISDIR(st.st_mode))) {
		gs_log("-o %s is a directory; -o takes a file prefix "
		       "(e.g. -o %s%sprofile writes %s%sprofile.pb.gz)\n",
		       prefix, prefix, n && prefix[n - 1] == '/' ? "" : "/", prefix,
		       n && prefix[n - 1] == '/' ? "" : "/");
		return -EISDIR;
	}
	return 0;
}

int gs_outputs_check(const struct session *s)
{
	char path[PATH_MAX + 32], err[PATH_MAX + 200];

	if (check_prefix(s->out.prefix))
		return -EINVAL;
	for (size_t i = 0; i < GS_N_OUT_FILES; i++) {
		if (!(s->o->formats & gs_out_files[i].fmt))
			continue;
		snprintf(path, sizeof(path), "%s%s", s->out.prefix, gs_out_files[i].suffix);
		if (gs_output_check(path, err, sizeof(err))) {
			gs_log("%s\n", err);
			return -EINVAL;
		}
	}
	return 0;
}

/* PREFIX is -o with %h %p %r already expanded (session.h). */
int gs_outputs_write_dump(const char *prefix, const struct gs_profile *p)
{
	static const struct {
		const char *suffix;
		int (*write)(const struct gs_profile *p, const char *path, char *err, size_t len);
	} w[] = { { ".pb.gz", gs_write_pprof }, { ".html", gs_write_html } };
	char path[PATH_MAX + 16], err[512];
	int rc = 0;

	gs_outputs_set_owner();
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", prefix, w[i].suffix);
		if (w[i].write(p, path, err, sizeof(err))) {
			gs_log("%s\n", err);
			rc = 1;
		} else {
			fprintf(stderr, "gpusample: wrote %s\n", path);
		}
	}
	return rc;
}
