/* SPDX-License-Identifier: MIT */
/*
 * Saved profiles: `gpusample report FILE...` and `gpusample merge OUT IN...`.
 * Several files (one per host of a Slurm job, say) are read with
 * gs_read_pprof and merged with gs_profile_merge, so the report covers all
 * of them and a merged file keeps every sample's host and rank labels.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gpusample/profile.h"
#include "output/output.h"
#include "util/log.h"

/* Read and merge paths[0..n) into p (initialised by the caller). */
static int read_merged(char **paths, int n, struct gs_profile *p)
{
	char err[512];

	for (int i = 0; i < n; i++) {
		struct gs_profile one;
		int rc;

		gs_profile_init(&one);
		rc = gs_read_pprof(paths[i], n == 1 ? p : &one, err, sizeof(err));
		if (!rc && n > 1) {
			rc = gs_profile_merge(p, &one, err, sizeof(err));
			if (rc)
				gs_log("%s: %s\n", paths[i], err);
		} else if (rc) {
			gs_log("%s\n", err);
		}
		gs_profile_free(&one);
		if (rc)
			return rc;
	}
	if (n > 1)
		gs_profile_add_comment(p, "merged from %d profiles", n);
	return 0;
}

/* The page of p at path; 0 or 1 after saying why not. */
static int report_html(const struct gs_profile *p, const char *path)
{
	char err[PATH_MAX + 200];

	if (gs_write_html(p, path, err, sizeof(err))) {
		gs_log("%s\n", err);
		return 1;
	}
	gs_log("wrote %s\n", path);
	return 0;
}

int gs_report_files(char **paths, int n, const char *html)
{
	struct gs_profile p;
	struct gs_report_opts ro = { .top = 15, .color = isatty(1) };
	int rc;

	gs_profile_init(&p);
	rc = read_merged(paths, n, &p);
	if (!rc && html) {
		rc = report_html(&p, html);
		gs_profile_free(&p);
		return rc;
	}
	if (!rc && (rc = gs_write_report(&p, &ro, stdout)))
		gs_log("report: %s; the profile files are intact, try again with more memory\n",
		       strerror(-rc));
	gs_profile_free(&p);
	return rc ? 1 : 0;
}

/* One file given twice would count its samples twice: refused, named. */
static bool same_file_twice(char **in, int n)
{
	for (int i = 0; i < n; i++) {
		struct stat a, b;

		if (stat(in[i], &a))
			continue; /* the read says why */
		for (int j = 0; j < i; j++)
			if (!stat(in[j], &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
				gs_log("%s and %s are the same file: its samples would count "
				       "twice\n",
				       in[j], in[i]);
				return true;
			}
	}
	return false;
}

int gs_merge_files(const char *out, char **in, int n)
{
	struct gs_profile p;
	char err[512];
	int rc;

	if (same_file_twice(in, n))
		return 1;
	/* OUT comes first: `merge prof-*.pb.gz` must not replace a profile */
	if (!faccessat(AT_FDCWD, out, F_OK, AT_SYMLINK_NOFOLLOW)) {
		gs_log("%s exists: merge writes a new file (usage: gpusample merge OUT IN...); "
		       "remove it or name another OUT\n",
		       out);
		return 1;
	}
	gs_profile_init(&p);
	rc = read_merged(in, n, &p);
	if (!rc && (rc = gs_write_pprof(&p, out, err, sizeof(err))))
		gs_log("cannot write %s: %s\n", out, err);
	if (!rc) {
		/* what the summary line of a run counts: CPU and GPU PC samples,
		 * not the profile's sample records (off-CPU time, GPU batches) */
		int64_t cpu = 0, gpu = 0;

		for (size_t i = 0; i < p.n_samples; i++) {
			cpu += p.samples[i].values[GS_V_SAMPLES];
			gpu += p.samples[i].values[GS_V_GPU_SAMPLES];
		}
		gs_log("merged %d profile%s (%" PRId64 " CPU samples%s", n, n == 1 ? "" : "s", cpu,
		       gpu ? ", " : "");
		if (gpu)
			gs_log_more("%" PRId64 " GPU PC samples", gpu);
		gs_log_more(") into %s\n", out);
	}
	gs_profile_free(&p);
	return rc ? 1 : 0;
}
