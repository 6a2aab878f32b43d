/* SPDX-License-Identifier: MIT */
/*
 * CPU sampler tests.  The pure helpers run anywhere; the rest loads the real
 * BPF object and samples tests/workloads/fp_chain (frame pointers), so it
 * needs root and is skipped otherwise.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "bpf/sampler.h"
#include "gpusample/records_codec.h"
#include "gpusample.skel.h"

/* ---- helpers without privileges ---------------------------------------- */

Test(sampler_unit, cpu_list)
{
	bool cpus[16];

	cr_expect_eq(gs_parse_cpu_list("0-3,5,8-9\n", cpus, 16), 7);
	cr_expect(cpus[0] && cpus[3] && cpus[5] && cpus[8] && cpus[9]);
	cr_expect(!cpus[4] && !cpus[6] && !cpus[7] && !cpus[10]);
	cr_expect_eq(gs_parse_cpu_list("0", cpus, 16), 1);
	cr_expect_eq(gs_parse_cpu_list("0-1,1", cpus, 16), 2);
	cr_expect_eq(gs_parse_cpu_list("3-1", cpus, 16), -EINVAL);
	cr_expect_eq(gs_parse_cpu_list("0,x", cpus, 16), -EINVAL);
	cr_expect_eq(gs_parse_cpu_list("0-16", cpus, 16), -ERANGE);
}

Test(sampler_unit, ringbuf_size)
{
	/* default: at least 4 MiB, power of 2, covers 1 s of worst case */
	cr_expect_eq(gs_ringbuf_size(0, 2, 99), 4u << 20);
	uint32_t big = gs_ringbuf_size(0, 128, 99);
	cr_expect_eq(big & (big - 1), 0u);
	cr_expect_geq(big, 128u * 99 * 4096);
	cr_expect_eq(gs_ringbuf_size(0, 4096, 10000), 256u << 20); /* capped */
	cr_expect_eq(gs_ringbuf_size(1, 2, 99), 4096u);            /* page minimum */
	cr_expect_eq(gs_ringbuf_size(5000, 2, 99), 8192u);         /* rounded up */
}

Test(sampler_unit, frequency_out_of_range)
{
	struct gs_sampler_opts o = { .frequency_hz = 100000000, .kernel_stacks = true };
	struct gs_sampler *s = (void *)1;
	char err[256] = "";

	cr_expect_eq(gs_sampler_open(&o, &s, err, sizeof(err)), -EINVAL);
	cr_expect_null(s);
	cr_expect(strstr(err, "perf_event_max_sample_rate"), "message: %s", err);
	o.frequency_hz = 0;
	cr_expect_eq(gs_sampler_open(&o, &s, err, sizeof(err)), -EINVAL);
}

/* ---- real sampling (root) ----------------------------------------------- */

#define MAX_KEEP 20000

struct workload {
	pid_t pid;
	int in_fd; /* its stdin */
	unsigned long main_, a, b, c;
};

struct collect {
	struct gs_cpu_sample **samples;
	int n_samples;
	struct gs_proc_event events[256];
	int n_events;
	uint32_t watch_exit; /* stop once this tgid's EXIT arrives */
	bool done;
};

static void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (BPF + perf events)");
}

static void workload_path(char *buf, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(n, 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0; /* BUILD/tests */
	*strrchr(exe, '/') = 0; /* BUILD */
	snprintf(buf, len, "%s/workloads/fp_chain", exe);
}

static void start_workload(struct workload *w, const char *mode, const char *secs)
{
	char path[4200], line[512];
	int in[2], out[2];
	FILE *f;

	workload_path(path, sizeof(path));
	cr_assert_eq(access(path, X_OK), 0, "build %s first", path);
	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(pipe(out), 0);
	w->pid = fork();
	cr_assert_geq(w->pid, 0);
	if (w->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, "fp_chain", mode, secs, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->in_fd = in[1];
	f = fdopen(out[0], "r");
	cr_assert(fgets(line, sizeof(line), f), "workload printed nothing");
	cr_assert_eq(sscanf(line, "fp_chain main=%lx fp_a=%lx fp_b=%lx fp_c=%lx", &w->main_, &w->a,
			    &w->b, &w->c),
		     4, "bad line: %s", line);
	fclose(f);
}

static void stop_workload(struct workload *w)
{
	kill(w->pid, SIGKILL);
	waitpid(w->pid, NULL, 0);
	close(w->in_fd);
}

static int on_record(void *ctx, const struct gs_rec_hdr *h)
{
	struct collect *c = ctx;

	if (h->type == GS_REC_CPU_SAMPLE && c->n_samples < MAX_KEEP) {
		struct gs_cpu_sample *s = malloc(h->size);

		memcpy(s, h, h->size);
		c->samples[c->n_samples++] = s;
	} else if (h->type == GS_REC_PROC_EVENT && c->n_events < 256) {
		const struct gs_proc_event *e = (const void *)h;

		c->events[c->n_events++] = *e;
		if (c->watch_exit && e->kind == GS_PROC_EXIT && e->tgid == c->watch_exit)
			c->done = true;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void collect_for(struct gs_sampler *s, struct collect *c, double secs)
{
	double end = now_s() + secs;

	while (now_s() < end && !c->done)
		cr_assert_geq(gs_sampler_poll(s, 100, on_record, c), 0);
	gs_sampler_stop(s);
	while (gs_sampler_poll(s, 0, on_record, c) > 0)
		;
}

static struct gs_sampler *open_sampler(uint32_t freq, bool kstacks, uint32_t rb_bytes)
{
	struct gs_sampler_opts o = { .frequency_hz = freq,
				     .kernel_stacks = kstacks,
				     .follow_children = true,
				     .ringbuf_bytes = rb_bytes };
	struct gs_sampler *s = NULL;
	char err[512] = "";
	int rc = gs_sampler_open(&o, &s, err, sizeof(err));

	cr_assert_eq(rc, 0, "gs_sampler_open: %d %s", rc, err);
	return s;
}

static void add_and_start(struct gs_sampler *s, pid_t pid)
{
	struct gs_target t = { .flags = GS_TARGET_FOLLOW_CHILDREN, .root_tgid = pid };
	char err[512] = "";

	cr_assert_eq(gs_sampler_add_target(s, pid, &t), 0);
	cr_assert_eq(gs_sampler_start(s, err, sizeof(err)), 0, "start: %s", err);
}

static void collect_init(struct collect *c)
{
	memset(c, 0, sizeof(*c));
	c->samples = calloc(MAX_KEEP, sizeof(*c->samples));
}

static void collect_free(struct collect *c)
{
	for (int i = 0; i < c->n_samples; i++)
		free(c->samples[i]);
	free(c->samples);
}

static const __u64 *user_ips(const struct gs_cpu_sample *s)
{
	return s->frames + s->n_kernel;
}

static bool in_fn(__u64 ip, unsigned long fn, unsigned long len)
{
	return ip >= fn && ip < fn + len;
}

static void check_header(const struct gs_cpu_sample *s)
{
	size_t want = sizeof(*s) + (s->n_kernel + s->n_user) * 8 +
		      s->n_python * sizeof(struct gs_py_frame);

	struct gs_rec_cpu_view v;

	cr_expect_eq(gs_rec_cpu_sample(&s->hdr, &v), 0, "the codec takes what BPF sends");
	cr_expect_eq(s->origin, GS_ORIGIN_TIMER);
	cr_expect_eq(s->hdr.version, GS_RECORDS_VERSION);
	cr_expect_eq(s->hdr.size, want); /* exact: BPF sends no padding */
	cr_expect_eq(s->hdr.size % 8, 0);
	cr_expect_lt(s->cpu, (uint32_t)libbpf_num_possible_cpus());
}

Test(sampler, fp_chain_user_stacks, .timeout = 30)
{
	struct workload w;
	struct collect c;
	struct gs_sampler_stats st;
	struct gs_sampler *s;
	int full = 0, chain = 0;
	__u64 prev_t = 0;
	bool ordered = true;

	need_root();
	s = open_sampler(199, true, 0); /* loading takes seconds: first */
	start_workload(&w, "spin", "3");
	add_and_start(s, w.pid);
	collect_init(&c);
	collect_for(s, &c, 1.5);
	gs_sampler_stats(s, &st);

	/* 1.5 s of one busy thread at 199 Hz is ~300 samples; CI machines are
	 * shared, so ask for a sixth of that */
	cr_assert_geq(c.n_samples, 50, "only %d samples", c.n_samples);
	cr_expect_geq(st.samples, (uint64_t)c.n_samples);
	cr_expect_eq(st.lost, 0);
	for (int i = 0; i < c.n_samples; i++) {
		const struct gs_cpu_sample *x = c.samples[i];
		const __u64 *u = user_ips(x);

		check_header(x);
		cr_expect_eq(x->tgid, (uint32_t)w.pid);
		cr_expect_eq(x->tid, (uint32_t)w.pid);
		cr_expect_str_eq(x->comm, "fp_chain");
		cr_expect_eq(x->n_python, 0);
		if (x->hdr.ktime_ns < prev_t)
			ordered = false; /* per-CPU order only, but one thread here */
		prev_t = x->hdr.ktime_ns;
		if (x->n_user >= 4)
			full++;
		/* leaf in fp_c, then return addresses into fp_b, fp_a, main */
		if (x->n_user >= 4 && in_fn(u[0], w.c, 0x100) && in_fn(u[1], w.b, 0x40) &&
		    in_fn(u[2], w.a, 0x40) && in_fn(u[3], w.main_, 0x800))
			chain++;
	}
	cr_expect(ordered, "timestamps of one thread went backwards");
	cr_expect_geq(full * 10, c.n_samples * 9, "%d of %d samples have >= 4 user frames", full,
		      c.n_samples);
	cr_expect_geq(chain * 10, c.n_samples * 9, "%d of %d samples unwind c<-b<-a<-main", chain,
		      c.n_samples);
	gs_sampler_close(s);
	collect_free(&c);
	stop_workload(&w);
}

static void kernel_run(bool kstacks, int *n, int *in_kernel, int *with_kstack)
{
	struct workload w;
	struct collect c;
	struct gs_sampler *s;

	s = open_sampler(199, kstacks, 0);
	start_workload(&w, "syscalls", "3");
	add_and_start(s, w.pid);
	collect_init(&c);
	collect_for(s, &c, 1.0);
	*n = c.n_samples;
	*in_kernel = *with_kstack = 0;
	for (int i = 0; i < c.n_samples; i++) {
		const struct gs_cpu_sample *x = c.samples[i];

		check_header(x);
		cr_expect_eq(x->tgid, (uint32_t)w.pid);
		cr_expect_geq(x->n_user, 1, "user stack missing");
		if (x->flags & GS_CPU_IN_KERNEL)
			(*in_kernel)++;
		else
			cr_expect_eq(x->n_kernel, 0, "kernel frames for a user-mode sample");
		if (x->n_kernel > 0) {
			(*with_kstack)++;
			cr_expect_geq(x->frames[0], 0xffff800000000000ull, "not a kernel ip");
		}
	}
	gs_sampler_close(s);
	collect_free(&c);
	stop_workload(&w);
}

Test(sampler, kernel_stacks, .timeout = 30)
{
	int n, in_kernel, with_kstack;

	need_root();
	kernel_run(true, &n, &in_kernel, &with_kstack);
	cr_assert_geq(n, 40, "only %d samples", n);
	/* read(/dev/zero, 1 MiB) spends most of its time clearing user memory */
	cr_expect_geq(in_kernel * 2, n, "%d of %d samples in kernel mode", in_kernel, n);
	cr_expect_geq(with_kstack * 10, in_kernel * 9, "%d of %d kernel-mode samples have a stack",
		      with_kstack, in_kernel);

	kernel_run(false, &n, &in_kernel, &with_kstack);
	cr_assert_geq(n, 40);
	cr_expect_geq(in_kernel * 2, n);
	cr_expect_eq(with_kstack, 0, "kernel stacks recorded although disabled");
}

Test(sampler, threads_and_group_exit, .timeout = 30)
{
	struct workload w;
	struct collect c;
	struct gs_sampler *s;
	int worker = 0, exits = 0;

	need_root();
	s = open_sampler(199, true, 0);
	start_workload(&w, "threads", "1.5");
	add_and_start(s, w.pid);
	collect_init(&c);
	c.watch_exit = w.pid;
	collect_for(s, &c, 5.0);
	for (int i = 0; i < c.n_samples; i++) {
		const struct gs_cpu_sample *x = c.samples[i];

		cr_expect_eq(x->tgid, (uint32_t)w.pid);
		if (x->tid != x->tgid) {
			worker++;
			cr_expect_str_eq(x->comm, "fp_worker");
		} else {
			cr_expect_str_eq(x->comm, "fp_chain");
		}
	}
	for (int i = 0; i < c.n_events; i++)
		if (c.events[i].kind == GS_PROC_EXIT && c.events[i].tgid == (uint32_t)w.pid)
			exits++;
	cr_expect_geq(worker, 10, "%d samples of the worker thread", worker);
	/* the worker's exit must not count as the process's */
	cr_expect_eq(exits, 1, "%d EXIT events for the process", exits);
	{
		__u32 key = w.pid;
		struct gs_target t;

		cr_expect_neq(bpf_map__lookup_elem(gs_sampler_skel(s)->maps.targets, &key,
						   sizeof(key), &t, sizeof(t), 0),
			      0, "targets entry survived the exit");
	}
	gs_sampler_close(s);
	collect_free(&c);
	stop_workload(&w);
}

Test(sampler, fork_exec_exit, .timeout = 30)
{
	struct workload w;
	struct collect c;
	struct gs_sampler_stats st;
	struct gs_sampler *s;
	int child_samples = 0, as_child = 0, as_exec = 0;
	int i_fork = -1, i_exec = -1, i_exit = -1, n_exit = 0;
	uint32_t child = 0;

	need_root();
	s = open_sampler(199, true, 0);
	start_workload(&w, "fork", "5");
	add_and_start(s, w.pid);
	collect_init(&c);
	cr_assert_eq(write(w.in_fd, "x", 1), 1); /* fork now, after start */
	/* stop as soon as a FORK child exits */
	for (double end = now_s() + 5; now_s() < end && !c.done;) {
		cr_assert_geq(gs_sampler_poll(s, 100, on_record, &c), 0);
		for (int i = 0; i < c.n_events && !c.watch_exit; i++)
			if (c.events[i].kind == GS_PROC_FORK)
				c.watch_exit = c.events[i].tgid;
		for (int i = 0; i < c.n_events && c.watch_exit; i++)
			if (c.events[i].kind == GS_PROC_EXIT && c.events[i].tgid == c.watch_exit)
				c.done = true;
	}
	gs_sampler_stop(s);
	while (gs_sampler_poll(s, 0, on_record, &c) > 0)
		;
	gs_sampler_stats(s, &st);

	for (int i = 0; i < c.n_events; i++) {
		const struct gs_proc_event *e = &c.events[i];

		cr_expect_eq(e->hdr.size, sizeof(*e));
		if (e->kind == GS_PROC_FORK && i_fork < 0) {
			i_fork = i;
			child = e->tgid;
			cr_expect_eq(e->ppid, (uint32_t)w.pid);
			cr_expect_str_eq(e->comm, "fp_chain");
		} else if (e->kind == GS_PROC_EXEC && e->tgid == child) {
			i_exec = i;
			cr_expect_str_eq(e->comm, "fp_chain");
		} else if (e->kind == GS_PROC_EXIT && e->tgid == child) {
			i_exit = i;
			n_exit++;
		}
	}
	cr_assert_geq(i_fork, 0, "no FORK event");
	cr_expect_gt(i_exec, i_fork, "EXEC event missing or out of order");
	cr_expect_gt(i_exit, i_exec, "EXIT event missing or out of order");
	cr_expect_eq(n_exit, 1);
	cr_expect_geq(st.proc_events, 3);
	for (int i = 0; i < c.n_samples; i++) {
		const struct gs_cpu_sample *x = c.samples[i];

		if (x->tgid != child)
			continue;
		child_samples++;
		if (!strcmp(x->comm, "fp_child"))
			as_child++;
		else if (!strcmp(x->comm, "fp_chain"))
			as_exec++;
	}
	/* 0.4 s before and 0.4 s after the exec, at 199 Hz */
	cr_expect_geq(as_child, 10, "%d samples of the forked child", as_child);
	cr_expect_geq(as_exec, 10, "%d samples after exec", as_exec);
	cr_expect_eq(child_samples, as_child + as_exec);
	{
		__u32 key = child;
		struct gs_target t;

		cr_expect_neq(bpf_map__lookup_elem(gs_sampler_skel(s)->maps.targets, &key,
						   sizeof(key), &t, sizeof(t), 0),
			      0, "child's targets entry survived its exit");
	}
	gs_sampler_close(s);
	collect_free(&c);
	stop_workload(&w);
}

Test(sampler, lost_when_ring_full, .timeout = 30)
{
	struct workload w;
	struct collect c;
	struct gs_sampler_stats st;
	struct gs_sampler *s;

	need_root();
	s = open_sampler(999, true, 4096); /* one page, never polled */
	start_workload(&w, "spin", "3");
	add_and_start(s, w.pid);
	usleep(500 * 1000);
	gs_sampler_stop(s);
	gs_sampler_stats(s, &st);
	collect_init(&c);
	while (gs_sampler_poll(s, 0, on_record, &c) > 0)
		;
	/* ~500 samples of >= 88 bytes cannot fit in 4 KiB */
	cr_expect_gt(st.lost, 100, "lost %lu", (unsigned long)st.lost);
	cr_expect_gt(c.n_samples, 0);
	cr_expect_lt(c.n_samples, 4096 / 64);
	cr_expect_eq(st.samples, (uint64_t)c.n_samples, "samples %lu, read %d",
		     (unsigned long)st.samples, c.n_samples);
	gs_sampler_close(s);
	collect_free(&c);
	stop_workload(&w);
}
