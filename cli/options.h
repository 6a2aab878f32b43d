/* SPDX-License-Identifier: MIT */
/* Command-line options of gpusample (cli/ only: nothing below cli/ sees
 * options or the terminal). */
#ifndef GS_CLI_OPTIONS_H
#define GS_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GS_MAX_PIDS 64

enum gs_format_bits {
	GS_FMT_PPROF = 1 << 0,
	GS_FMT_SPEEDSCOPE = 1 << 1,
	GS_FMT_FOLDED = 1 << 2,
	GS_FMT_TRACE = 1 << 3, /* PREFIX.trace.json */
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
	uint32_t gpu_period_log2; /* --gpu-period: CUPTI sampling factor (2^n cycles) */
	bool gpu_serialized;      /* --gpu-serialized: kernel-serialized PC sampling */
	bool offcpu;              /* off-CPU time from sched_switch (--no-offcpu clears) */
	bool interp_frames;       /* --interpreter-frames: keep CPython's own frames
				   * between two Python frames (folded by default) */
	uint32_t offcpu_rate;     /* --offcpu-rate: stack walks/s per running thread; 0 = default */
	uint32_t gpu_scratch_mib; /* --gpu-scratch: CUPTI scratch buffer; 0 = agent default */
	uint32_t gpu_hwbuf_mib;   /* --gpu-hwbuf: CUPTI hardware buffer; 0 = CUPTI default */
	const char *cupti;        /* --cupti PATH|none: host-side libcupti (checked at start) */
	uint32_t inject_wait_ms;  /* --inject[=S]: load the agent into a running CPython
				   * 3.14+ job, S to wait for it (ms); 0 = off */
	char **report_files;      /* `gpusample report FILE...` */
	int n_report_files;
	const char *merge_out; /* `gpusample merge OUT IN...` */
	char **merge_in;
	int n_merge_in;
	bool check; /* `gpusample check` */
	bool dump;  /* `gpusample dump -p PID...` */
};

/* -o PREFIX templates: %h = host name (characters other than letters,
 * digits, '.', '_' and '-' become '_'), %p = pid of the profiled root (the
 * launched command, or the first -p PID), %r = its rank (RANK, else
 * OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID), %% = '%'.  rank < 0 = not
 * known: a %r template is then refused.  Returns 0, -EINVAL (unknown escape
 * or unknown rank; err says which) or -ENAMETOOLONG (out too small). */
struct gs_prefix_vars {
	const char *host;
	uint32_t pid;
	int64_t rank;
};
int gs_expand_prefix(const char *tmpl, const struct gs_prefix_vars *v, char *out, size_t outlen,
		     char *err, size_t errlen);

/* Parse argv.  Returns 0, 1 when the caller should exit 0 (help/version
 * printed), or -EINVAL after printing a one-line error to stderr. */
int gs_options_parse(struct gs_options *o, int argc, char **argv);
void gs_options_usage(FILE *out);

#endif
