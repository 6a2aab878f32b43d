/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/options.h"
#include "util/escape.h"
#include "util/log.h"

void gs_options_usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: gpusample [options] -p PID[,PID...]      attach to running processes\n"
	    "       gpusample [options] -- CMD [ARGS...]      launch CMD and profile it\n"
	    "       gpusample report FILE.pb.gz [FILE...]     print the report of saved profiles "
	    "(merged)\n"
	    "       gpusample report --html OUT.html FILE.pb.gz [FILE...]\n"
	    "                                                 write it as a page with flame "
	    "graphs\n"
	    "       gpusample merge OUT.pb.gz IN.pb.gz...     merge profiles of one version (e.g. "
	    "per host)\n"
	    "       gpusample dump -p PID[,PID...]            every thread's stack now (hung "
	    "jobs):\n"
	    "                                                 state, kernel, native and "
	    "Python frames\n"
	    "       gpusample check                           load the BPF programs, print the "
	    "kernel's\n"
	    "                                                 features and each program's "
	    "verifier cost\n"
	    "\n"
	    "Samples every thread of the target process tree (CPU: eBPF, mixed Python +\n"
	    "native + kernel stacks; GPU: CUPTI PC sampling through the gpusample agent)\n"
	    "and writes one profile.  Needs root (sudo).\n"
	    "\n"
	    "Options:\n"
	    "  -p, --pid PID[,PID...]  processes to attach to (their children are followed)\n"
	    "  -d, --duration SECONDS  stop after SECONDS (or 90s, 5m, 1h; default: until Ctrl-C "
	    "or exit)\n"
	    "  -F, --frequency HZ      CPU samples per second per CPU (default 99)\n"
	    "  -o, --output PREFIX     output prefix (default gpusample-%%p; %%h = host name,\n"
	    "                          %%p = pid, %%r = rank from RANK/SLURM_PROCID, %%%% = %%): "
	    "writes\n"
	    "                          PREFIX.html, PREFIX.pb.gz, PREFIX.speedscope.json (and\n"
	    "                          with folded: PREFIX.cpu.folded, PREFIX.gpu.folded; with\n"
	    "                          trace: PREFIX.trace.json)\n"
	    "      --format LIST       comma list of html,pprof,speedscope,folded,trace\n"
	    "                          (default html,pprof,speedscope; html = the report and\n"
	    "                          flame graphs in one self-contained page for any\n"
	    "                          browser; trace = Chrome trace-event JSON for Perfetto\n"
	    "                          UI / chrome://tracing)\n"
	    "      --no-children       do not follow child processes\n"
	    "      --no-kernel         do not record kernel stacks\n"
	    "      --no-python         do not walk Python frames\n"
	    "      --interpreter-frames  keep the interpreter's own frames between two Python\n"
	    "                          frames (_PyEval_EvalFrameDefault, PyObject_Vectorcall;\n"
	    "                          folded by default)\n"
	    "      --no-cfi            unwind native stacks with frame pointers only\n"
	    "      --no-gpu            do not attach to the GPU agent\n"
	    "      --no-gpu-memory     no uprobes on the CUDA driver's allocations (GPU memory)\n"
	    "      --no-offcpu         do not record off-CPU time (sched_switch)\n"
	    "      --offcpu-rate N     off-CPU stacks per second and thread, at most (default\n"
	    "                          25; a fifth of it for threads that only wait, after\n"
	    "                          their first 64); off-CPU time is exact whatever N\n"
	    "      --gpu-period N      GPU PC sampling period, 2^N SM cycles (5..31, default 18)\n"
	    "      --gpu-serialized    kernel-serialized GPU sampling (exact launch join, slower)\n"
	    "      --gpu-scratch MIB   CUPTI scratch buffer for PC records (default 16; grows on "
	    "overflow)\n"
	    "      --gpu-hwbuf MIB     CUPTI hardware buffer in device memory (default 128, at "
	    "most 1/4 of free)\n"
	    "      --cupti PATH        libcupti for GPU source lines (root-owned, not "
	    "group/other-\n"
	    "                          writable; default: the CUDA toolkit's; none: no lines)\n"
	    "      --inject[=S]        -p PID: load the GPU agent into a running CPython 3.14+\n"
	    "                          job started without it (PEP 768 remote exec); its main\n"
	    "                          thread has S seconds to run the request (default 10)\n"
	    "      --as-root           launch mode: run CMD as root instead of the sudo user\n"
	    "      --on-duration=stop|keep  launch mode, when -d ends: SIGTERM CMD and wait\n"
	    "                          up to 10 s for it (stop, the default), or leave it running\n"
	    "  -q, --quiet             do not print the report\n"
	    "  -h, --help              this help\n"
	    "      --version           print the version\n"
	    "\n"
	    "View: open PREFIX.html in any browser (report and flame graphs, offline), or\n"
	    "go tool pprof -http=: PREFIX.pb.gz, or PREFIX.speedscope.json in speedscope.\n");
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
			gs_log("bad PID '%s': give a positive process id, e.g. -p 1234\n", tok);
			free(dup);
			return -EINVAL;
		}
		if (o->n_pids == GS_MAX_PIDS) {
			gs_log("at most %d PIDs with -p\n", GS_MAX_PIDS);
			free(dup);
			return -EINVAL;
		}
		o->pids[o->n_pids++] = (uint32_t)v;
	}
	free(dup);
	if (o->n_pids == 0) {
		gs_log("-p needs a PID\n");
		return -EINVAL;
	}
	return 0;
}

/* Names in the order of enum gs_format_bits: name i is bit 1 << i. */
static int parse_formats(struct gs_options *o, const char *arg)
{
	static const char *const names[] = { "pprof", "speedscope", "folded", "trace", "html" };
	char *dup = strdup(arg);
	size_t i;

	if (!dup)
		return -ENOMEM;
	o->formats = 0;
	for (char *rest = dup, *tok; (tok = strsep(&rest, ","));) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]) && strcmp(tok, names[i]); i++)
			;
		if (i == sizeof(names) / sizeof(names[0])) {
			gs_log(
			    "%s format '%s' in '%s' (a comma-separated list of pprof, speedscope, "
			    "folded, trace, html)\n",
			    *tok ? "unknown" : "empty", tok, arg);
			free(dup);
			return -EINVAL;
		}
		o->formats |= 1u << i;
	}
	free(dup);
	return o->formats ? 0 : -EINVAL;
}

/* An option ("-q") among file words: "cannot read -q" would not say so. */
static bool has_option(char **words)
{
	for (; *words; words++)
		if ((*words)[0] == '-' && (*words)[1])
			return true;
	return false;
}

static int parse_number(const char *what, const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (*arg == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
		gs_log("bad %s '%s' (expected %g..%g)\n", what, arg, lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* A whole number in [lo, hi]; one line on error naming the option and unit. */
static int parse_whole(const char *opt, const char *arg, uint32_t lo, uint32_t hi, const char *unit,
		       uint32_t *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (*arg == '\0' || *end != '\0' || !(v >= lo && v <= hi) || v != (uint32_t)v) {
		gs_log("bad %s '%s' (a whole number of %s, %u..%u)\n", opt, arg, unit, lo, hi);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* -d SECONDS, or with a unit as people type it: 90s, 5m, 1h. */
static int parse_duration(struct gs_options *o, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	double scale = !*end               ? 1
		       : !strcmp(end, "s") ? 1
		       : !strcmp(end, "m") ? 60
		       : !strcmp(end, "h") ? 3600
					   : 0;

	v *= scale;
	if (end == arg || !scale || !(v >= 0.001 && v <= 31536000)) {
		gs_log("bad duration '%s': -d takes seconds (-d 30), or a number with s, m or h "
		       "(-d 5m), up to a year\n",
		       arg);
		return -EINVAL;
	}
	o->duration_s = v;
	return 0;
}

enum {
	OPT_FORMAT = 256,
	OPT_NO_CHILDREN,
	OPT_NO_KERNEL,
	OPT_NO_PYTHON,
	OPT_NO_CFI,
	OPT_NO_GPU,
	OPT_GPU_PERIOD,
	OPT_GPU_SERIALIZED,
	OPT_AS_ROOT,
	OPT_VERSION,
	OPT_NO_OFFCPU,
	OPT_NO_GPU_MEMORY,
	OPT_OFFCPU_RATE,
	OPT_CUPTI,
	OPT_GPU_SCRATCH,
	OPT_GPU_HWBUF,
	OPT_INTERP_FRAMES,
	OPT_INJECT,
	OPT_ON_DURATION,
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
	{ "interpreter-frames", no_argument, NULL, OPT_INTERP_FRAMES },
	{ "no-cfi", no_argument, NULL, OPT_NO_CFI },
	{ "no-gpu", no_argument, NULL, OPT_NO_GPU },
	{ "no-offcpu", no_argument, NULL, OPT_NO_OFFCPU },
	{ "no-gpu-memory", no_argument, NULL, OPT_NO_GPU_MEMORY },
	{ "offcpu-rate", required_argument, NULL, OPT_OFFCPU_RATE },
	{ "gpu-period", required_argument, NULL, OPT_GPU_PERIOD },
	{ "gpu-serialized", no_argument, NULL, OPT_GPU_SERIALIZED },
	{ "as-root", no_argument, NULL, OPT_AS_ROOT },
	{ "on-duration", required_argument, NULL, OPT_ON_DURATION },
	{ "cupti", required_argument, NULL, OPT_CUPTI },
	{ "gpu-scratch", required_argument, NULL, OPT_GPU_SCRATCH },
	{ "gpu-hwbuf", required_argument, NULL, OPT_GPU_HWBUF },
	{ "inject", optional_argument, NULL, OPT_INJECT },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ 0 },
};

static void set_defaults(struct gs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->frequency_hz = 99;
	o->formats = GS_FMT_PPROF | GS_FMT_SPEEDSCOPE | GS_FMT_HTML;
	o->children = o->kernel = o->python = o->cfi = o->gpu = o->report = true;
	o->gpu_period_log2 = 18;
	o->offcpu = true;
	o->gpu_memory = true;
}

static int handle_opt(struct gs_options *o, int c, char *arg)
{
	double v;

	switch (c) {
	case 'p':
		return parse_pids(o, arg);
	case 'd':
		return parse_duration(o, arg);
	case 'F':
		/* Upper bound checked against perf_event_max_sample_rate later. */
		return parse_whole("-F", arg, 1, 1000000000, "Hz", &o->frequency_hz);
	case 'o': {
		/* Catch a bad escape now, not after a long run. */
		struct gs_prefix_vars probe = { .host = "h", .pid = 1, .rank = 0 };
		char out[PATH_MAX], err[256];

		if (gs_expand_prefix(arg, &probe, out, sizeof(out), err, sizeof(err))) {
			gs_log("%s\n", err);
			return -EINVAL;
		}
		/* -o prof.pb.gz means the prefix prof (prof.pb.gz.pb.gz otherwise) */
		size_t n = strlen(arg);
		if (n > 6 && !strcmp(arg + n - 6, ".pb.gz"))
			arg[n - 6] = '\0';
		o->prefix = arg;
		return 0;
	}
	case OPT_FORMAT:
		return parse_formats(o, arg);
	case OPT_NO_CHILDREN:
		o->children = false;
		return 0;
	case OPT_NO_KERNEL:
		o->kernel = false;
		return 0;
	case OPT_NO_PYTHON:
		o->python = false;
		return 0;
	case OPT_INTERP_FRAMES:
		o->interp_frames = true;
		return 0;
	case OPT_NO_CFI:
		o->cfi = false;
		return 0;
	case OPT_NO_GPU:
		o->gpu = false;
		return 0;
	case OPT_NO_OFFCPU:
		o->offcpu = false;
		return 0;
	case OPT_NO_GPU_MEMORY:
		o->gpu_memory = false;
		return 0;
	case OPT_INJECT:
		if (!arg) {
			o->inject_wait_ms = 10000;
			return 0;
		}
		if (parse_number("--inject", arg, 0.1, 3600, &v))
			return -EINVAL;
		o->inject_wait_ms = (uint32_t)(v * 1000);
		return 0;
	case OPT_OFFCPU_RATE:
		return parse_whole("--offcpu-rate", arg, 1, 10000, "stacks per second",
				   &o->offcpu_rate);
	case OPT_GPU_PERIOD:
		return parse_whole("--gpu-period", arg, 5, 31, "log2 cycles", &o->gpu_period_log2);
	case OPT_GPU_SERIALIZED:
		o->gpu_serialized = true;
		return 0;
	case OPT_AS_ROOT:
		o->as_root = true;
		return 0;
	case OPT_ON_DURATION:
		if (strcmp(arg, "stop") && strcmp(arg, "keep")) {
			gs_log("bad --on-duration '%s': stop (SIGTERM the launched command when -d "
			       "ends) or keep (leave it running)\n",
			       arg);
			return -EINVAL;
		}
		o->on_duration = !strcmp(arg, "keep") ? GS_ON_DURATION_KEEP : GS_ON_DURATION_STOP;
		return 0;
	case OPT_CUPTI:
		o->cupti = arg;
		return 0;
	case OPT_GPU_SCRATCH:
	case OPT_GPU_HWBUF:
		return parse_whole(c == OPT_GPU_SCRATCH ? "--gpu-scratch" : "--gpu-hwbuf", arg, 1,
				   4096, "MiB",
				   c == OPT_GPU_SCRATCH ? &o->gpu_scratch_mib : &o->gpu_hwbuf_mib);
	case 'q':
		o->report = false;
		return 0;
	case 'h':
		gs_options_usage(stdout);
		return 1;
	case OPT_VERSION:
		printf("gpusample %s\n", GS_VERSION);
		return 1;
	default:
		gs_log_more("Try 'gpusample --help'.\n");
		return -EINVAL;
	}
}

/* The options `gpusample dump` uses; the others (-d, --format, -q, GPU, off-CPU)
 * mean something to a sampling run only: a dump must not quietly ignore them. */
static bool dump_takes(int c)
{
	return c == 'p' || c == 'o' || c == 'h' || c == OPT_NO_CHILDREN || c == OPT_NO_PYTHON ||
	       c == OPT_NO_CFI || c == OPT_INTERP_FRAMES || c == OPT_VERSION || c == '?';
}

/* "-d" or "--format" for option c, as the user may have typed it. */
static const char *opt_name(int c)
{
	static char name[40];
	const struct option *l = long_opts;

	while (l->name && l->val != c)
		l++;
	if (c < 128 || !l->name)
		snprintf(name, sizeof(name), "-%c", c);
	else
		snprintf(name, sizeof(name), "--%s", l->name);
	return name;
}

/* An executable regular file named name in a PATH directory (as execvp
 * would find it; the command runs with this environment). */
static bool on_path(const char *name)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	for (const char *d = path && *path ? path : "/usr/local/bin:/usr/bin:/bin"; d;) {
		const char *end = strchr(d, ':');
		int n = end ? (int)(end - d) : (int)strlen(d);
		struct stat st;

		if (snprintf(buf, sizeof(buf), "%.*s/%s", n ? n : 1, n ? d : ".", name) <
			(int)sizeof(buf) &&
		    !stat(buf, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0111))
			return true;
		d = end ? end + 1 : NULL;
	}
	return false;
}

/* Words after the options with -p given: most often `-p $(pgrep ...)`
 * that found several processes. */
static int extra_words(char **w)
{
	char words[256] = "", one[64];

	for (int i = 0; w[i] && strlen(words) < 180; i++) {
		gs_term_escape(w[i], one, sizeof(one));
		snprintf(words + strlen(words), sizeof(words) - strlen(words), "%s%s", i ? " " : "",
			 one);
	}
	gs_log("unexpected argument(s) after the options: '%s' (several PIDs go in one -p, "
	       "comma-separated: -p A,B; a command to launch goes after --, without -p)\n",
	       words);
	return -EINVAL;
}

int gs_options_parse(struct gs_cli *cli, int argc, char **argv)
{
	struct gs_options *o = &cli->run;
	int c, rc;

	memset(cli, 0, sizeof(*cli));
	set_defaults(o);
	if (argc >= 2 && !strcmp(argv[1], "report")) {
		int first = 2;

		if (argc >= 3 && !strcmp(argv[2], "--html")) {
			cli->report_html = argc >= 4 ? argv[3] : NULL;
			first = 4;
		}
		if (argc <= first || has_option(&argv[first]) ||
		    (first == 4 && (!*argv[3] || argv[3][0] == '-'))) {
			gs_log("usage: gpusample report [--html OUT.html] FILE.pb.gz "
			       "[FILE.pb.gz...]\n");
			return -EINVAL;
		}
		cli->report_files = &argv[first];
		cli->n_report_files = argc - first;
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "check")) {
		if (argc != 2) {
			gs_log("usage: gpusample check\n");
			return -EINVAL;
		}
		cli->check = true;
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "merge")) {
		if (argc < 4 || has_option(&argv[2])) {
			gs_log("usage: gpusample merge OUT.pb.gz IN.pb.gz [IN.pb.gz...] (no "
			       "options)\n");
			return -EINVAL;
		}
		cli->merge_out = argv[2];
		cli->merge_in = &argv[3];
		cli->n_merge_in = argc - 3;
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "dump")) {
		cli->dump = true;
		argv++;
		argc--;
	}
	/* getopt's own messages name argv[0]: "gpusample", not the path */
	argv[0] = cli->dump ? "gpusample dump" : "gpusample";
	/* '+': stop at the first non-option so "-- CMD -x" reaches CMD intact. */
	while ((c = getopt_long(argc, argv, "+p:d:F:o:qh", long_opts, NULL)) != -1) {
		if (cli->dump && !dump_takes(c)) {
			gs_log("dump takes one stack per thread now: %s is for sampling "
			       "(gpusample -p PID -d SECONDS); dump takes -p, -o, --no-children, "
			       "--no-python, --no-cfi, --interpreter-frames\n",
			       opt_name(c));
			return -EINVAL;
		}
		rc = handle_opt(o, c, optarg);
		if (rc)
			return rc;
	}
	if (optind < argc)
		o->command = &argv[optind];
	if (cli->dump && (o->command || !o->n_pids)) {
		gs_log("usage: gpusample dump -p PID[,PID...] [-o PREFIX] [--no-children] "
		       "[--no-python] [--no-cfi] [--interpreter-frames]\n");
		return -EINVAL;
	}
	if (o->n_pids && o->command) {
		if (strcmp(argv[optind - 1], "--")) /* words left over, no -- typed */
			return extra_words(&argv[optind]);
		gs_log("give either -p PID or -- CMD, not both\n");
		return -EINVAL;
	}
	if (o->command && !strchr(o->command[0], '/') && !on_path(o->command[0])) {
		char cmd[256];

		/* `gpusample reprot x` would launch "reprot": refuse before sampling */
		gs_term_escape(o->command[0], cmd, sizeof(cmd));
		if (optind && !strcmp(argv[optind - 1], "--"))
			gs_log("%s: not found on PATH (give its path, or check its name)\n", cmd);
		else
			gs_log("%s: not found on PATH (gpusample's own commands are report, merge, "
			       "check and dump; a command to profile goes after --)\n",
			       cmd);
		return -ENOENT;
	}
	if (!o->n_pids && !o->command) {
		gs_log("nothing to profile: give -p PID or -- CMD (see --help)\n");
		return -EINVAL;
	}
	if (o->on_duration && !o->command) {
		gs_log("--on-duration is for launch mode (-- CMD); a -p job is never stopped\n");
		return -EINVAL;
	}
	if (o->inject_wait_ms && (o->command || !o->gpu || !o->python)) {
		gs_log("--inject is for -p PID with GPU sampling and Python on (launch mode loads "
		       "the agent itself; --no-gpu and --no-python turn off what it needs)\n");
		return -EINVAL;
	}
	if (o->frequency_hz > 10000) /* each sample walks three stacks in BPF */
		gs_log("note: at -F %u the sampling takes a large share of every CPU the job runs "
		       "on: the job slows and its time split shifts (99-999 Hz is the usual)\n",
		       o->frequency_hz);
	return 0;
}
