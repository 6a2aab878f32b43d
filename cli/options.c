/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

void gs_options_usage(FILE *out)
{
	fprintf(out,
"Usage: gpusample [options] -p PID[,PID...]      attach to running processes\n"
"       gpusample [options] -- CMD [ARGS...]      launch CMD and profile it\n"
"       gpusample report FILE.pb.gz               print the report of a saved profile\n"
"\n"
"Samples every thread of the target process tree (CPU: eBPF, mixed Python +\n"
"native + kernel stacks; GPU: CUPTI PC sampling through the gpusample agent)\n"
"and writes one profile.  Needs root (sudo).\n"
"\n"
"Options:\n"
"  -p, --pid PID[,PID...]  processes to attach to (their children are followed)\n"
"  -d, --duration SECONDS  stop after SECONDS (default: until Ctrl-C or exit)\n"
"  -F, --frequency HZ      CPU samples per second per CPU (default 99)\n"
"  -o, --output PREFIX     output prefix (default gpusample-<pid>): writes\n"
"                          PREFIX.pb.gz, PREFIX.speedscope.json (and with folded:\n"
"                          PREFIX.cpu.folded, PREFIX.gpu.folded; with trace:\n"
"                          PREFIX.trace.json)\n"
"      --format LIST       comma list of pprof,speedscope,folded,trace (default\n"
"                          pprof,speedscope; trace = Chrome trace-event JSON for\n"
"                          Perfetto UI / chrome://tracing)\n"
"      --no-children       do not follow child processes\n"
"      --no-kernel         do not record kernel stacks\n"
"      --no-python         do not walk Python frames\n"
"      --no-cfi            unwind native stacks with frame pointers only\n"
"      --no-gpu            do not attach to the GPU agent\n"
"      --gpu-period N      GPU PC sampling period, 2^N SM cycles (5..31, default 18)\n"
"      --gpu-serialized    kernel-serialized GPU sampling (exact launch join, slower)\n"
"      --as-root           launch mode: run CMD as root instead of the sudo user\n"
"  -q, --quiet             do not print the report\n"
"  -h, --help              this help\n"
"      --version           print the version\n"
"\n"
"View: go tool pprof -http=: PREFIX.pb.gz, or open PREFIX.speedscope.json in speedscope.\n");
}

static int parse_pids(struct gs_options *o, const char *arg)
{
	char *dup = strdup(arg), *save = NULL;

	if (!dup)
		return -ENOMEM;
	for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*tok == '\0' || *end != '\0' || v <= 0 || v > INT_MAX) {
			fprintf(stderr, "gpusample: bad PID '%s': give a positive process id, e.g. -p 1234\n", tok);
			free(dup);
			return -EINVAL;
		}
		if (o->n_pids == GS_MAX_PIDS) {
			fprintf(stderr, "gpusample: at most %d PIDs with -p\n", GS_MAX_PIDS);
			free(dup);
			return -EINVAL;
		}
		o->pids[o->n_pids++] = (uint32_t)v;
	}
	free(dup);
	if (o->n_pids == 0) {
		fprintf(stderr, "gpusample: -p needs a PID\n");
		return -EINVAL;
	}
	return 0;
}

static int parse_formats(struct gs_options *o, const char *arg)
{
	char *dup = strdup(arg), *save = NULL;

	if (!dup)
		return -ENOMEM;
	o->formats = 0;
	for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "pprof"))
			o->formats |= GS_FMT_PPROF;
		else if (!strcmp(tok, "speedscope"))
			o->formats |= GS_FMT_SPEEDSCOPE;
		else if (!strcmp(tok, "folded"))
			o->formats |= GS_FMT_FOLDED;
		else if (!strcmp(tok, "trace"))
			o->formats |= GS_FMT_TRACE;
		else {
			fprintf(stderr, "gpusample: unknown format '%s' (use pprof, speedscope, folded, trace)\n", tok);
			free(dup);
			return -EINVAL;
		}
	}
	free(dup);
	return o->formats ? 0 : -EINVAL;
}

static int parse_number(const char *what, const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (*arg == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
		fprintf(stderr, "gpusample: bad %s '%s' (expected %g..%g)\n", what, arg, lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

enum {
	OPT_FORMAT = 256, OPT_NO_CHILDREN, OPT_NO_KERNEL, OPT_NO_PYTHON, OPT_NO_CFI,
	OPT_NO_GPU, OPT_GPU_PERIOD, OPT_GPU_SERIALIZED, OPT_AS_ROOT, OPT_VERSION,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "duration", required_argument, NULL, 'd' },
	{ "frequency", required_argument, NULL, 'F' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "no-children", no_argument, NULL, OPT_NO_CHILDREN },
	{ "no-kernel", no_argument, NULL, OPT_NO_KERNEL },
	{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
	{ "no-cfi", no_argument, NULL, OPT_NO_CFI },
	{ "no-gpu", no_argument, NULL, OPT_NO_GPU },
	{ "gpu-period", required_argument, NULL, OPT_GPU_PERIOD },
	{ "gpu-serialized", no_argument, NULL, OPT_GPU_SERIALIZED },
	{ "as-root", no_argument, NULL, OPT_AS_ROOT },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ 0 },
};

static void set_defaults(struct gs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->frequency_hz = 99;
	o->formats = GS_FMT_PPROF | GS_FMT_SPEEDSCOPE;
	o->children = o->kernel = o->python = o->cfi = o->gpu = o->report = true;
	o->gpu_period_log2 = 18;
}

static int handle_opt(struct gs_options *o, int c, const char *arg)
{
	double v;

	switch (c) {
	case 'p': return parse_pids(o, arg);
	case 'd':
		if (parse_number("duration", arg, 0.001, 31536000, &v))
			return -EINVAL;
		o->duration_s = v;
		return 0;
	case 'F':
		/* Upper bound checked against perf_event_max_sample_rate later. */
		if (parse_number("frequency", arg, 1, 1e9, &v) || v != (uint32_t)v) {
			fprintf(stderr, "gpusample: -F takes a whole number of Hz >= 1\n");
			return -EINVAL;
		}
		o->frequency_hz = (uint32_t)v;
		return 0;
	case 'o': o->prefix = arg; return 0;
	case OPT_FORMAT: return parse_formats(o, arg);
	case OPT_NO_CHILDREN: o->children = false; return 0;
	case OPT_NO_KERNEL: o->kernel = false; return 0;
	case OPT_NO_PYTHON: o->python = false; return 0;
	case OPT_NO_CFI: o->cfi = false; return 0;
	case OPT_NO_GPU: o->gpu = false; return 0;
	case OPT_GPU_PERIOD:
		if (parse_number("--gpu-period", arg, 5, 31, &v))
			return -EINVAL;
		o->gpu_period_log2 = (uint32_t)v;
		return 0;
	case OPT_GPU_SERIALIZED: o->gpu_serialized = true; return 0;
	case OPT_AS_ROOT: o->as_root = true; return 0;
	case 'q': o->report = false; return 0;
	case 'h': gs_options_usage(stdout); return 1;
	case OPT_VERSION: printf("gpusample %s\n", GS_VERSION); return 1;
	default:
		fprintf(stderr, "Try 'gpusample --help'.\n");
		return -EINVAL;
	}
}

int gs_options_parse(struct gs_options *o, int argc, char **argv)
{
	int c, rc;

	set_defaults(o);
	if (argc >= 2 && !strcmp(argv[1], "report")) {
		if (argc != 3) {
			fprintf(stderr, "gpusample: usage: gpusample report FILE.pb.gz\n");
			return -EINVAL;
		}
		o->report_file = argv[2];
		return 0;
	}
	/* '+': stop at the first non-option so "-- CMD -x" reaches CMD intact. */
	while ((c = getopt_long(argc, argv, "+p:d:F:o:qh", long_opts, NULL)) != -1) {
		rc = handle_opt(o, c, optarg);
		if (rc)
			return rc;
	}
	if (optind < argc)
		o->command = &argv[optind];
	if (o->n_pids && o->command) {
		fprintf(stderr, "gpusample: give either -p PID or -- CMD, not both\n");
		return -EINVAL;
	}
	if (!o->n_pids && !o->command) {
		fprintf(stderr, "gpusample: nothing to profile: give -p PID or -- CMD (see --help)\n");
		return -EINVAL;
	}
	return 0;
}
