/* SPDX-License-Identifier: MIT */
/*
 * sampler_driver: drive the CPU sampler alone (no symbolizer, no output)
 * against one PID and print what arrived, plus the BPF programs' own cost.
 *
 *   sampler_driver [-F HZ] [-d SECS] [-K] [-r RINGBUF_BYTES] [-n] PID
 *     -K  no kernel stacks      -n  no polling until the end (drop test)
 *
 * Output (one "key value" per line, for scripts):
 *   records, samples, proc_events, fork, exec, exit, lost, unwind_err_N,
 *   samples_with_user, samples_with_kernel, avg_user_frames,
 *   and for each loaded program with kernel.bpf_stats_enabled=1:
 *   prog NAME run_cnt N run_time_ns N ns_per_run N
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/sampler.h"

struct counts {
	unsigned long records, samples, proc[4], with_user, with_kernel, user_frames;
};

static volatile sig_atomic_t stop;

static void on_sig(int sig)
{
	(void)sig;
	stop = 1;
}

static int on_record(void *ctx, const struct gs_rec_hdr *h)
{
	struct counts *c = ctx;

	c->records++;
	if (h->type == GS_REC_CPU_SAMPLE) {
		const struct gs_cpu_sample *s = (const void *)h;

		c->samples++;
		c->with_user += s->n_user > 0;
		c->with_kernel += s->n_kernel > 0;
		c->user_frames += s->n_user;
	} else if (h->type == GS_REC_PROC_EVENT) {
		const struct gs_proc_event *e = (const void *)h;

		if (e->kind < 4)
			c->proc[e->kind]++;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void print_prog_costs(struct gs_sampler *s)
{
	int fds[32], n = gs_sampler_prog_fds(s, fds, 32);

	for (int i = 0; i < n; i++) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(fds[i], &info, &len))
			continue;
		printf("prog %s run_cnt %llu run_time_ns %llu ns_per_run %.0f xlated_bytes %u "
		       "verified_insns %u\n",
		       info.name, (unsigned long long)info.run_cnt,
		       (unsigned long long)info.run_time_ns,
		       info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0.0,
		       info.xlated_prog_len, info.verified_insns);
	}
}

int main(int argc, char **argv)
{
	struct gs_sampler_opts o = { .frequency_hz = 99, .kernel_stacks = true,
				     .follow_children = true };
	struct gs_sampler_stats st;
	struct gs_sampler *s;
	struct counts c = { 0 };
	double secs = 2, t0;
	bool no_poll = false;
	char err[512];
	int opt, rc;

	while ((opt = getopt(argc, argv, "F:d:Kr:n")) != -1) {
		switch (opt) {
		case 'F': o.frequency_hz = atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'K': o.kernel_stacks = false; break;
		case 'r': o.ringbuf_bytes = strtoul(optarg, NULL, 0); break;
		case 'n': no_poll = true; break;
		default: fprintf(stderr, "usage: %s [-F HZ] [-d SECS] [-K] [-r BYTES] [-n] PID\n", argv[0]); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: %s [-F HZ] [-d SECS] [-K] [-r BYTES] [-n] PID\n", argv[0]);
		return 2;
	}
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	t0 = now_s();
	if ((rc = gs_sampler_open(&o, &s, err, sizeof(err)))) {
		fprintf(stderr, "sampler_driver: %s\n", err);
		return 1;
	}
	printf("load_s %.2f\n", now_s() - t0);
	struct gs_target t = { .flags = GS_TARGET_FOLLOW_CHILDREN, .root_tgid = atoi(argv[optind]) };
	if ((rc = gs_sampler_add_target(s, t.root_tgid, &t)) ||
	    (rc = gs_sampler_start(s, err, sizeof(err)))) {
		fprintf(stderr, "sampler_driver: %s (%d)\n", rc ? err : "", rc);
		gs_sampler_close(s);
		return 1;
	}
	for (double end = now_s() + secs; !stop && now_s() < end;) {
		if (no_poll)
			usleep(50000);
		else if ((rc = gs_sampler_poll(s, 200, on_record, &c)) < 0)
			break;
	}
	gs_sampler_stop(s);
	while (gs_sampler_poll(s, 0, on_record, &c) > 0)
		;
	gs_sampler_stats(s, &st);
	printf("records %lu\nsamples %lu\nbpf_samples %llu\nproc_events %llu\nfork %lu\nexec %lu\n"
	       "exit %lu\nlost %llu\n",
	       c.records, c.samples, (unsigned long long)st.samples,
	       (unsigned long long)st.proc_events, c.proc[GS_PROC_FORK], c.proc[GS_PROC_EXEC],
	       c.proc[GS_PROC_EXIT], (unsigned long long)st.lost);
	for (int i = 0; i < GS_UNWIND_NR; i++)
		printf("unwind_err_%d %llu\n", i, (unsigned long long)st.unwind_err[i]);
	printf("py_errors %llu\npy_truncated %llu\nsamples_with_user %lu\nsamples_with_kernel %lu\n"
	       "avg_user_frames %.1f\n",
	       (unsigned long long)st.py_errors, (unsigned long long)st.py_truncated, c.with_user,
	       c.with_kernel, c.samples ? (double)c.user_frames / c.samples : 0.0);
	print_prog_costs(s);
	gs_sampler_close(s);
	return 0;
}
