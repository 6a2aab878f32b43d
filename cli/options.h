/* SPDX-License-Identifier: MIT */
/* Command-line options of gpusample (cli/ only: nothing below cli/ sees
 * options or the terminal). */
#ifndef GS_CLI_OPTIONS_H
#define GS_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define GS_MAX_PIDS 64

enum gs_format_bits {
	GS_FMT_PPROF = 1 << 0,
	GS_FMT_SPEEDSCOPE = 1 << 1,
	GS_FMT_FOLDED = 1 << 2,
	GS_FMT_TRACE = 1 << 3,  /* PREFIX.trace.json */
};

struct gs_options {
	uint32_t pids[GS_MAX_PIDS]; /* -p, as seen from gpusample's pid namespace */
	int n_pids;
	char **command;        /* launch mode: argv after "--", NULL-terminated */
	double duration_s;     /* -d; 0 = until Ctrl-C / target exit */
	uint32_t frequency_hz; /* -F */
	const char *prefix;    /* -o; NULL = gpusample-<pid> */
	unsigned formats;      /* enum gs_format_bits */
	bool children, kernel, python, cfi, gpu, as_root, quiet, report;
	uint32_t gpu_period_log2;   /* --gpu-period: CUPTI sampling factor (2^n cycles) */
	bool gpu_serialized;        /* --gpu-serialized: kernel-serialized PC sampling */
	const char *report_file;    /* `gpusample report FILE` */
};

/* Parse argv.  Returns 0, 1 when the caller should exit 0 (help/version
 * printed), or -EINVAL after printing a one-line error to stderr. */
int gs_options_parse(struct gs_options *o, int argc, char **argv);
void gs_options_usage(FILE *out);

#endif
