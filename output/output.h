/* SPDX-License-Identifier: MIT */
/*
 * Writers: profile model -> pprof (gzipped profile.proto, hand-written
 * encoder), speedscope JSON, folded stacks, terminal report; and a pprof
 * reader for `gpusample report FILE.pb.gz`.
 *
 * Output files are created with O_CREAT|O_TRUNC|O_NOFOLLOW|O_CLOEXEC, mode
 * 0644: gpusample runs as root, so a symlink at the output path is refused
 * (ELOOP), never followed.  Errors: 0 or a negative errno, with a one-line
 * message in err (what failed, and what to do).
 */
#ifndef GS_OUTPUT_H
#define GS_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "gpusample/profile.h"

/* Open path for writing as described above; returns fd or -errno. */
int gs_output_open(const char *path, char *err, size_t errlen);

/* Serialized, uncompressed profile.proto bytes (for tests and the gzip
 * writer).  *buf is malloc'ed; caller frees. */
int gs_pprof_encode(const struct gs_profile *p, uint8_t **buf, size_t *len);
int gs_write_pprof(const struct gs_profile *p, const char *path, char *err, size_t errlen);
/* Read a gpusample pprof file (gzip or plain) back into a model. */
int gs_read_pprof(const char *path, struct gs_profile *p, char *err, size_t errlen);

/* One time-ordered "sampled" profile per CPU thread, one per GPU device. */
int gs_write_speedscope(const struct gs_profile *p, const char *path, char *err, size_t errlen);

/* Brendan Gregg folded stacks: root;...;leaf COUNT.  which = GS_FOLDED_CPU
 * (samples/count) or GS_FOLDED_GPU (gpu_samples + not_issued, [stall] leaf). */
enum gs_folded_kind { GS_FOLDED_CPU, GS_FOLDED_GPU };
int gs_write_folded(const struct gs_profile *p, enum gs_folded_kind which,
		    const char *path, char *err, size_t errlen);
/* Escape one frame name for folded output (';' and newlines replaced). */
void gs_folded_escape(const char *in, char *out, size_t outlen);

struct gs_report_opts {
	unsigned top;   /* rows per table, default 15 */
	bool color;
};
int gs_write_report(const struct gs_profile *p, const struct gs_report_opts *o, FILE *out);

#endif
