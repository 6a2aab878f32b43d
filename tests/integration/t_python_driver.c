/* SPDX-License-Identifier: MIT */
/*
 * Test driver for the Python walker, independent of the CLI: samples a
 * process tree through the sampler API (bpf/sampler.h) with the walker
 * configured by gs_py_discover, follows fork/exec like the session must,
 * and prints one line per sample:
 *     TGID TID COMM FLAGS N_PY|root;...;leaf
 * where each frame is "qualname@file:line" (file = basename).  FLAGS is the
 * gs_cpu_sample flags in hex.  Also prints "# walk_ns ..." when run with -b
 * (BPF run-time stats).  Usage:
 *   t_python_driver -p PID [-d SECS] [-F HZ] [-r READYFILE] [-b] [-n]
 * -b prints BPF run counts and average ns per program run; -n samples
 * without the Python walker (baseline for the walker's cost).
 * Stops after SECS or when PID exits.  Built by tests/integration/t_python_*.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "bpf/sampler.h"
#include "gpusample/profile.h"
#include "symbolizer/python.h"

struct sample {
	uint32_t tgid, tid;
	uint16_t flags, n;
	char comm[16];
	struct gs_py_frame *f;
};

struct pending { uint32_t tgid; double until; };

static struct {
	struct gs_sampler *s;
	struct gs_py *py;
	struct sample *v;
	size_t n, cap;
	uint32_t next_cfg;
	struct pending pend[256];
	int n_pend;
	uint32_t root;
	bool root_gone;
	bool no_python; /* -n: sample without the walker (cost baseline) */
} g;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 0 done (python or not), -EAGAIN retry later. */
static int setup_python(uint32_t tgid)
{
	struct gs_py_cfg cfg;
	struct gs_py_info info;
	char msg[512];
	int err = gs_py_discover(g.py, tgid, &cfg, &info, msg, sizeof(msg));
	struct gs_target t = { .flags = GS_TARGET_FOLLOW_CHILDREN, .root_tgid = g.root };

	if (g.no_python) {
		gs_sampler_add_target(g.s, tgid, &t);
		return 0;
	}
	if (err == -ENOENT || err == -EAGAIN)
		return -EAGAIN;
	if (err) {
		fprintf(stderr, "note: %s\n", msg);
		gs_sampler_add_target(g.s, tgid, &t);
		return 0;
	}
	t.py_cfg_id = ++g.next_cfg;
	if (gs_sampler_set_py_cfg(g.s, t.py_cfg_id, &cfg) || gs_sampler_add_target(g.s, tgid, &t)) {
		fprintf(stderr, "cannot configure pid %u\n", tgid);
		return 0;
	}
	fprintf(stderr, "# pid %u: CPython %s (%s) key %d 1stblock 0x%x cfg %u\n", tgid, info.version,
		info.path, cfg.tss_key, cfg.tls_1stblock, t.py_cfg_id);
	return 0;
}

static void want_python(uint32_t tgid, double secs)
{
	if (setup_python(tgid) == -EAGAIN && g.n_pend < 256)
		g.pend[g.n_pend++] = (struct pending){ tgid, now() + secs };
}

static void retry_pending(void)
{
	for (int i = 0; i < g.n_pend;) {
		if (setup_python(g.pend[i].tgid) != -EAGAIN || now() > g.pend[i].until) {
			g.pend[i] = g.pend[--g.n_pend];
			continue;
		}
		i++;
	}
}

static int on_record(void *ctx, const struct gs_rec_hdr *h)
{
	if (h->type == GS_REC_PROC_EVENT) {
		const struct gs_proc_event *e = (const void *)h;

		if (e->kind == GS_PROC_FORK) {
			/* Parent known: share its state (BPF copied its py_cfg_id).
			 * Parent still pending (exec'd moments ago, e.g. a
			 * forkserver): discover the child on its own too. */
			bool pending = false;

			for (int i = 0; i < g.n_pend; i++)
				pending |= g.pend[i].tgid == e->ppid;
			gs_py_fork(g.py, e->ppid, e->tgid);
			if (pending)
				want_python(e->tgid, 5);
		}
		else if (e->kind == GS_PROC_EXEC) {
			gs_py_exec(g.py, e->tgid);
			want_python(e->tgid, 5);
		} else if (e->kind == GS_PROC_EXIT) {
			gs_py_exit(g.py, e->tgid);
			if (e->tgid == g.root)
				g.root_gone = true;
		}
		return 0;
	}
	if (h->type != GS_REC_CPU_SAMPLE)
		return 0;
	const struct gs_cpu_sample *s = (const void *)h;
	const struct gs_py_frame *pf = (const void *)(s->frames + s->n_kernel + s->n_user);

	if (g.n == g.cap) {
		g.cap = g.cap ? g.cap * 2 : 4096;
		g.v = realloc(g.v, g.cap * sizeof(*g.v));
		if (!g.v)
			return -ENOMEM;
	}
	struct sample *x = &g.v[g.n++];

	x->tgid = s->tgid;
	x->tid = s->tid;
	x->flags = s->flags;
	x->n = s->n_python;
	memcpy(x->comm, s->comm, 16);
	x->comm[15] = 0;
	for (char *c = x->comm; *c; c++)
		if (*c == ' ' || *c == '|' || *c == ';')
			*c = '_';
	x->f = malloc(sizeof(*pf) * (x->n ? x->n : 1));
	memcpy(x->f, pf, sizeof(*pf) * x->n);
	gs_py_note_frames(g.py, s->tgid, pf, s->n_python);
	return 0;
}

static volatile sig_atomic_t stop;
static void on_sig(int sig) { stop = 1; }

static void print_frame(struct gs_profile *p, uint32_t loc)
{
	const struct gs_location *l = gs_profile_location(p, loc);
	const struct gs_line *ln = &p->lines[l->first_line];
	const struct gs_function *fn = gs_profile_function(p, ln->function);
	const char *file = gs_profile_str(p, fn->file), *b = strrchr(file, '/');

	printf("%s@%s:%lld", gs_profile_str(p, fn->name), b ? b + 1 : file, (long long)ln->line);
}

int main(int argc, char **argv)
{
	struct gs_sampler_opts o = { .frequency_hz = 99, .kernel_stacks = false, .follow_children = true };
	const char *ready = NULL;
	double secs = 10;
	bool bench = false;
	char err[512];
	int c;

	while ((c = getopt(argc, argv, "p:d:F:r:bn")) != -1) {
		switch (c) {
		case 'p': g.root = atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'F': o.frequency_hz = atoi(optarg); break;
		case 'r': ready = optarg; break;
		case 'b': bench = true; break;
		case 'n': g.no_python = true; break;
		default: return 2;
		}
	}
	if (!g.root)
		return 2;
	struct gs_profile prof;

	gs_profile_init(&prof);
	g.py = gs_py_new(&prof);
	if (gs_sampler_open(&o, &g.s, err, sizeof(err))) {
		fprintf(stderr, "sampler: %s\n", err);
		return 1;
	}
	int bfd = -1;

	if (bench)
		bfd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	want_python(g.root, 5);
	if (gs_sampler_start(g.s, err, sizeof(err))) {
		fprintf(stderr, "start: %s\n", err);
		return 1;
	}
	if (ready)
		close(open(ready, O_WRONLY | O_CREAT, 0644));
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	double end = now() + secs;

	while (!stop && now() < end && !g.root_gone) {
		gs_sampler_poll(g.s, 100, on_record, NULL);
		retry_pending();
	}
	if (bench) {
		struct gs_sampler_stats st0;

		gs_sampler_stats(g.s, &st0);
		printf("# target_samples %llu\n", (unsigned long long)st0.samples);
		int fds[16], n = gs_sampler_prog_fds(g.s, fds, 16);

		for (int i = 0; i < n && fds[i] >= 0; i++) {
			struct bpf_prog_info info = {};
			__u32 len = sizeof(info);

			if (!bpf_obj_get_info_by_fd(fds[i], &info, &len) && info.run_cnt)
				printf("# prog %s run_cnt %llu avg_ns %llu total_ns %llu\n", info.name,
				       (unsigned long long)info.run_cnt,
				       (unsigned long long)(info.run_time_ns / info.run_cnt),
				       (unsigned long long)info.run_time_ns);
		}
		if (bfd >= 0)
			close(bfd);
	}
	gs_sampler_stop(g.s);
	gs_sampler_poll(g.s, 0, on_record, NULL);
	struct gs_sampler_stats st;

	gs_sampler_stats(g.s, &st);
	fprintf(stderr, "# samples %llu lost %llu py_errors %llu py_truncated %llu\n",
		(unsigned long long)st.samples, (unsigned long long)st.lost,
		(unsigned long long)st.py_errors, (unsigned long long)st.py_truncated);
	for (size_t i = 0; i < g.n; i++) {
		struct sample *x = &g.v[i];

		printf("%u %u %s %x %u|", x->tgid, x->tid, x->comm, x->flags, x->n);
		if (x->flags & GS_CPU_PY_TRUNC) {
			print_frame(&prof, gs_py_truncated_location(g.py));
			if (x->n)
				putchar(';');
		}
		for (int k = x->n - 1; k >= 0; k--) {
			print_frame(&prof, gs_py_location(g.py, x->tgid, &x->f[k]));
			if (k)
				putchar(';');
		}
		putchar('\n');
	}
	gs_sampler_close(g.s);
	gs_py_free(g.py);
	gs_profile_free(&prof);
	return 0;
}
