/* SPDX-License-Identifier: MIT */
/*
 * One profiling run: targets -> BPF sampler -> records -> process table and
 * runtimes -> symbolize -> write.  The engine below the command line: it
 * takes its settings in struct gs_options (cli/ fills it from argv) and
 * reports progress through a callback; it never touches the terminal.
 */
#ifndef GS_SESSION_H
#define GS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_MAX_PIDS 64

/* cli/options.c parses --format names in this order (bit i, name i). */
enum gs_format_bits {
	GS_FMT_PPROF = 1 << 0,
	GS_FMT_SPEEDSCOPE = 1 << 1,
	GS_FMT_FOLDED = 1 << 2,
	GS_FMT_TRACE = 1 << 3, /* PREFIX.trace.json */
	GS_FMT_HTML = 1 << 4,  /* PREFIX.html: report and flame graphs in one page */
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
	/* --on-duration: what -d's end does to a launched command; unset = stop
	 * (SIGTERM, as perf record and timeout(1) do to their command) */
	enum { GS_ON_DURATION_UNSET, GS_ON_DURATION_STOP, GS_ON_DURATION_KEEP } on_duration;
	uint32_t gpu_period_log2; /* --gpu-period: CUPTI sampling factor (2^n cycles) */
	bool gpu_serialized;      /* --gpu-serialized: kernel-serialized PC sampling */
	bool offcpu;              /* off-CPU time from sched_switch (--no-offcpu clears) */
	bool gpu_memory;          /* uprobes on libcuda's allocations (--no-gpu-memory clears) */
	bool interp_frames;       /* --interpreter-frames: keep CPython's own frames
				   * between two Python frames (folded by default) */
	uint32_t offcpu_rate;     /* --offcpu-rate: stack walks/s per running thread; 0 = default */
	uint32_t gpu_scratch_mib; /* --gpu-scratch: CUPTI scratch buffer; 0 = agent default */
	uint32_t gpu_hwbuf_mib;   /* --gpu-hwbuf: CUPTI hardware buffer; 0 = CUPTI default */
	const char *cupti;        /* --cupti PATH|none: host-side libcupti (checked at start) */
	uint32_t inject_wait_ms;  /* --inject[=S]: load the agent into a running CPython
				   * 3.14+ job, S to wait for it (ms); 0 = off */
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
/* gs_expand_prefix with this machine's host name, pid and the rank read
 * from process pid's environment (gpusample dump -o). */
int gs_expand_prefix_of(const char *tmpl, uint32_t pid, char *out, size_t outlen, char *err,
			size_t errlen);
/* A dump's files: PREFIX.pb.gz and PREFIX.html (the page counts threads
 * per stack), owned by the sudo caller; no speedscope file, its profiles
 * are timelines and a dump has no time.  Says each path written or each
 * error on stderr; 0, or 1 when a file could not be written. */
struct gs_profile;
int gs_outputs_write_dump(const char *prefix, const struct gs_profile *p);

/* The progress of a run, for the caller to show (cli/progress.c). */
struct gs_session_progress {
	double elapsed_s; /* since sampling started */
	size_t cpu_samples;
	uint64_t lost;              /* samples lost (every cause) */
	uint32_t live_procs, procs; /* processes followed: alive, all */
	const char *gpu;            /* GPU summary, "" when no agent was seen */
	bool final;                 /* the last call of the run */
};

/* Runs a whole session; progress (NULL: none) is called from the session's
 * thread about every poll tick and once with final set.  Returns the
 * process exit status (0 ok, 1 error; in launch mode the command's own
 * failure does not make gpusample fail). */
int gs_session_run(const struct gs_options *o,
		   void (*progress)(const struct gs_session_progress *p));

#endif
