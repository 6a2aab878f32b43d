// SPDX-License-Identifier: MIT
/*
 * cfi_probe: test driver for the CFI unwinder, independent of the CLI.
 * Samples a process (and its fork children) with cpu-clock perf events,
 * unwinds user stacks with bpf/unwind.bpf.h and tables from native/cfi.c,
 * symbolizes with libdwfl while the target is alive and prints folded stacks
 * (root first, "a;b;c count") on stdout; figures on stderr.
 *
 *   cfi_probe [-d SECS] [-w SECS] [-F HZ] [--fp-only] [--no-tables] [--lazy] [-m] [-v] (-p PID | -- CMD...)
 *
 * --fp-only: frame-pointer walk (bpf_get_stack) for the baseline cost.
 * --no-tables: processes not registered (same path as --fp-only, per process).
 * --lazy: tables built on first use (gs_cfi_set_lazy) instead of up front.
 * -m: print frames as module`symbol.
 * -w SECS: sample but drop results for SECS first (lazy tables warm up).
 * Figures (stderr, "key value" lines): samples, unwind errors by reason,
 * BPF run time per sample (bpf_enable_stats), table count/rows/bytes/build ms.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <elfutils/libdwfl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gpusample/records.h"
#include "native/native.h"
#include "cfi_probe.skel.h"

struct probe_sample {
	uint32_t tgid, tid;
	uint16_t err, flags;
	uint32_t n;
	uint64_t ips[GS_MAX_USER_FRAMES];
};

struct stack {
	uint32_t tgid, n, err;
	uint64_t ips[GS_MAX_USER_FRAMES];
	uint64_t count;
};

static struct stack *stacks;
static size_t n_stacks, cap_stacks;
static uint64_t n_samples, n_cfi_flag, n_trunc, n_in_kernel;
static struct gs_cfi *cfi;
static bool use_tables = true;
static bool with_modules; /* -m: frames as module`symbol */
static bool warming;      /* -w: samples dropped while set */

static int on_sample(void *ctx, void *data, size_t size)
{
	const struct probe_sample *s = data;
	uint32_t n = s->n > GS_MAX_USER_FRAMES ? GS_MAX_USER_FRAMES : s->n;

	if (warming)
		return 0;
	n_samples++;
	n_cfi_flag += !!(s->flags & GS_CPU_USER_CFI);
	n_trunc += !!(s->flags & GS_CPU_USER_TRUNC);
	n_in_kernel += !!(s->flags & GS_CPU_IN_KERNEL);
	for (size_t i = 0; i < n_stacks; i++)
		if (stacks[i].tgid == s->tgid && stacks[i].n == n && stacks[i].err == s->err &&
		    !memcmp(stacks[i].ips, s->ips, n * sizeof(uint64_t))) {
			stacks[i].count++;
			return 0;
		}
	if (n_stacks == cap_stacks) {
		cap_stacks = cap_stacks ? cap_stacks * 2 : 1024;
		stacks = realloc(stacks, cap_stacks * sizeof(*stacks));
		if (!stacks)
			return -ENOMEM;
	}
	stacks[n_stacks].tgid = s->tgid;
	stacks[n_stacks].n = n;
	stacks[n_stacks].err = s->err;
	memcpy(stacks[n_stacks].ips, s->ips, n * sizeof(uint64_t));
	stacks[n_stacks].count = 1;
	n_stacks++;
	return 0;
}

/* ---- symbolization (libdwfl, per tgid) ---- */
static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

struct sym_proc {
	uint32_t tgid;
	Dwfl *dwfl;
};
static struct sym_proc sym_procs[256];
static int n_sym_procs;

static Dwfl *dwfl_for(uint32_t tgid)
{
	for (int i = 0; i < n_sym_procs; i++)
		if (sym_procs[i].tgid == tgid)
			return sym_procs[i].dwfl;
	if (n_sym_procs == 256)
		return NULL;
	Dwfl *d = dwfl_begin(&dwfl_cbs);
	if (d) {
		dwfl_report_begin(d);
		if (dwfl_linux_proc_report(d, (pid_t)tgid) != 0) {
			dwfl_end(d);
			d = NULL;
		} else {
			dwfl_report_end(d, NULL, NULL);
		}
	}
	sym_procs[n_sym_procs].tgid = tgid;
	sym_procs[n_sym_procs].dwfl = d;
	n_sym_procs++;
	return d;
}

static void print_frame(Dwfl *d, uint64_t addr, bool ret)
{
	Dwfl_Module *m = d ? dwfl_addrmodule(d, ret ? addr - 1 : addr) : NULL;
	const char *name = m ? dwfl_module_addrname(m, ret ? addr - 1 : addr) : NULL;

	if (name && with_modules) {
		const char *mn = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
		const char *slash = mn ? strrchr(mn, '/') : NULL;

		printf("%s`%s", slash ? slash + 1 : (mn ? mn : "?"), name);
	} else if (name) {
		fputs(name, stdout);
	} else if (m) {
		Dwarf_Addr base;
		const char *mn = dwfl_module_info(m, NULL, &base, NULL, NULL, NULL, NULL, NULL);
		const char *slash = mn ? strrchr(mn, '/') : NULL;

		printf("%s+0x%" PRIx64, slash ? slash + 1 : (mn ? mn : "?"), addr - base);
	} else {
		printf("[unknown]");
	}
}

static void print_folded(void)
{
	for (size_t i = 0; i < n_stacks; i++) {
		static const char *why[] = { "", "no_table", "read_fault", "bad_rule", "depth" };
		Dwfl *d = dwfl_for(stacks[i].tgid);

		/* an unwind that stopped early gets a synthetic root frame */
		if (stacks[i].err && stacks[i].err < GS_UNWIND_NR)
			printf("[unwind_%s];", why[stacks[i].err]);
		for (uint32_t j = stacks[i].n; j-- > 0;) {
			print_frame(d, stacks[i].ips[j], j > 0);
			putchar(j ? ';' : ' ');
		}
		if (!stacks[i].n)
			printf("[no user stack] ");
		printf("%" PRIu64 "\n", stacks[i].count);
	}
}

static volatile sig_atomic_t stop;
static void on_sig(int sig)
{
	stop = 1;
}

static int open_cpu_events(struct cfi_probe_bpf *skel, int hz, struct bpf_link ***links, int *nl)
{
	int ncpu = libbpf_num_possible_cpus();

	*links = calloc(ncpu, sizeof(**links));
	*nl = 0;
	for (int cpu = 0; cpu < ncpu; cpu++) {
		struct perf_event_attr a = {
			.type = PERF_TYPE_SOFTWARE,
			.size = sizeof(a),
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_freq = hz,
			.freq = 1,
		};
		int fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0)
			continue; /* offline CPU */
		(*links)[*nl] = bpf_program__attach_perf_event(skel->progs.probe_sample, fd);
		if (!(*links)[*nl]) {
			fprintf(stderr, "cfi_probe: attach perf event on cpu %d failed\n", cpu);
			close(fd);
			return -1;
		}
		(*nl)++;
	}
	return *nl ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "fp-only", no_argument, NULL, 'f' },
		{ "no-tables", no_argument, NULL, 'n' },
		{ "lazy", no_argument, NULL, 'l' },
		{ 0 },
	};
	double secs = 5, warmup = 0;
	int hz = 99, opt, pid = 0, nl = 0, stats_fd;
	bool fp_only = false, verbose = false, launched = false, lazy = false;
	struct cfi_probe_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	char err[256];
	uint32_t one = 1;

	while ((opt = getopt_long(argc, argv, "+d:F:p:vmw:", lo, NULL)) != -1) {
		switch (opt) {
		case 'd':
			secs = atof(optarg);
			break;
		case 'F':
			hz = atoi(optarg);
			break;
		case 'p':
			pid = atoi(optarg);
			break;
		case 'v':
			verbose = true;
			break;
		case 'm':
			with_modules = true;
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		case 'f':
			fp_only = true;
			break;
		case 'n':
			use_tables = false;
			break;
		case 'l':
			lazy = true;
			break;
		default:
			return 2;
		}
	}
	if (!pid && optind >= argc) {
		fprintf(stderr, "usage: cfi_probe [-d SECS] [-F HZ] [--fp-only] [--no-tables] (-p "
				"PID | -- CMD...)\n");
		return 2;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	skel = cfi_probe_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "cfi_probe: loading the BPF object failed (run as root; see libbpf "
				"messages)\n");
		return 1;
	}
	skel->bss->gs_unwind_fp_only = fp_only;
	if (gs_cfi_open(skel->obj, &cfi, err, sizeof(err))) {
		fprintf(stderr, "cfi_probe: %s\n", err);
		return 1;
	}
	gs_cfi_set_verbose(cfi, verbose);
	gs_cfi_set_lazy(cfi, lazy);
	if (cfi_probe_bpf__attach(skel)) {
		fprintf(stderr, "cfi_probe: attaching the fork tracepoint failed\n");
		return 1;
	}
	if (!pid) {
		pid = fork();
		if (pid == 0) {
			execvp(argv[optind], argv + optind);
			_exit(127);
		}
		launched = true;
		usleep(300000); /* let it map its libraries; dlopen later is refreshed */
	}
	bpf_map_update_elem(bpf_map__fd(skel->maps.probe_targets), &pid, &one, BPF_ANY);
	if (use_tables) {
		uint64_t t0 = (uint64_t)clock();
		int rc = gs_cfi_add_process(cfi, (uint32_t)pid);

		if (rc)
			fprintf(stderr, "cfi_probe: gs_cfi_add_process(%d): %s\n", pid,
				strerror(-rc));
		fprintf(stderr, "add_process_cpu_ms %.1f\n",
			((uint64_t)clock() - t0) * 1000.0 / CLOCKS_PER_SEC);
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.probe_events), on_sample, NULL, NULL);
	if (!rb || open_cpu_events(skel, hz, &links, &nl)) {
		fprintf(stderr,
			"cfi_probe: perf events / ring buffer setup failed (root needed)\n");
		return 1;
	}
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	warming = warmup > 0;
	for (;;) {
		double el;

		ring_buffer__poll(rb, 100);
		if (use_tables)
			gs_cfi_refresh(cfi);
		clock_gettime(CLOCK_MONOTONIC, &t);
		el = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
		if (warming && el >= warmup) {
			ring_buffer__consume(rb); /* drop what queued during warm-up */
			skel->bss->probe_unwind_ns = skel->bss->probe_unwind_cnt =
			    skel->bss->probe_frames = 0;
			memset(skel->bss->probe_err, 0, sizeof(skel->bss->probe_err));
			warming = false;
		}
		if (stop || el >= secs + warmup)
			break;
		if (launched && waitpid(pid, NULL, WNOHANG) == pid) {
			launched = false;
			break;
		}
	}
	for (int i = 0; i < nl; i++)
		bpf_link__destroy(links[i]);
	free(links);
	ring_buffer__consume(rb);

	/* figures */
	struct bpf_prog_info info = { 0 };
	__u32 ilen = sizeof(info);
	bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.probe_sample), &info, &ilen);
	struct gs_cfi_stats cs;
	gs_cfi_stats(cfi, &cs);
	fprintf(stderr, "samples %" PRIu64 "\n", n_samples);
	fprintf(stderr,
		"samples_cfi %" PRIu64 "\nsamples_truncated %" PRIu64 "\nsamples_in_kernel %" PRIu64
		"\n",
		n_cfi_flag, n_trunc, n_in_kernel);
	static const char *names[] = { "ok", "no_table", "read_fault", "bad_rule", "depth" };
	for (int i = 0; i < GS_UNWIND_NR; i++)
		fprintf(stderr, "unwind_%s %llu\n", names[i],
			(unsigned long long)skel->bss->probe_err[i]);
	fprintf(stderr, "lost %llu\n", (unsigned long long)skel->bss->probe_lost);
	if (stats_fd >= 0 && info.run_cnt)
		fprintf(stderr, "bpf_run_cnt %llu\nbpf_ns_per_run %.0f\n",
			(unsigned long long)info.run_cnt, (double)info.run_time_ns / info.run_cnt);
	if (skel->bss->probe_unwind_cnt)
		fprintf(stderr, "unwind_ns_per_sample %.0f\nframes_per_sample %.1f\n",
			(double)skel->bss->probe_unwind_ns / skel->bss->probe_unwind_cnt,
			(double)skel->bss->probe_frames / skel->bss->probe_unwind_cnt);
	fprintf(stderr,
		"tables %u\nrows %" PRIu64 "\nrules %u\nbpf_table_bytes %" PRIu64
		"\nbuild_ms %.1f\nno_eh_frame %u\nerrors %u\nrefreshes %u\n",
		cs.tables, cs.rows, cs.rules, cs.bpf_bytes, cs.build_ns / 1e6, cs.no_eh_frame,
		cs.errors, cs.refreshes);
	print_folded();
	fflush(stdout);
	if (launched) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	ring_buffer__free(rb);
	gs_cfi_close(cfi);
	cfi_probe_bpf__destroy(skel);
	return 0;
}
