// SPDX-License-Identifier: MIT
/*
 * Output writers at scale (bench/outputs.sh runs it; figures in
 * bench/results_outputs.md).  Builds a synthetic profile model through the
 * public API (include/gpusample/profile.h) that looks like a long PyTorch
 * training run, then times one writer on it and prints one line:
 *
 *   writer=speedscope samples=5000000 stacks=4000 ... model_rss_mb=...
 *   peak_rss_mb=... write_s=... bytes=... build_cpu_s=... write_cpu_s=...
 *
 * One writer per process, so peak_rss_mb (getrusage ru_maxrss) is that
 * writer's peak over the model's (model_rss_mb, read before writing).
 *
 * The model: T threads (default 8: a main thread, 4 DataLoader worker
 * processes, pin_memory and 2 intra-op threads), S distinct stacks (default
 * 4000) of 20-40 frames: Python frames ("qualname (file:line)", one
 * location per line) interleaved with the interpreter's native eval frame
 * over native libtorch frames, grown as a tree (each new stack keeps a
 * prefix of an earlier one of its thread and changes the last ~6 frames),
 * so neighbours share prefixes as real stacks do.  Per thread, a walk over
 * its stacks at 99 Hz: each visit lasts a geometric number of samples with
 * mean R (-r, the stack persistence; 1 = a new stack every sample; default
 * 1.2, what a real 99 Hz run of tests/workloads/train_torch.py with
 * off-CPU sampling shows: about one run per sample), the next stack is a
 * tree neighbour 80% of the time, and a fraction B (-b, default 0.3) of
 * visits is followed by an off-CPU sample (blocked in poll/futex, or
 * runnable) of 5-100 ms.  Deterministic (fixed seed).
 *
 * Usage: outputs [-n SAMPLES] [-s STACKS] [-t THREADS] [-r RUN] [-b BLOCKED] -w WRITER -o PATH
 * WRITER: pprof, speedscope, folded, trace, report, html, none (model only).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gpusample/profile.h"
#include "output/output.h"
#include "util/clock.h"

#define N_PY_FUNCS     600
#define N_NATIVE_FUNCS 3000
#define MAX_DEPTH      40

struct model {
	uint64_t rng;
	uint32_t py_map, so_map, k_map;
	uint32_t n_py_locs, n_nat_locs, n_k_locs;
	uint32_t *py_locs, *nat_locs, *k_locs, eval_loc;
};

static uint32_t rnd(struct model *m, uint32_t n)
{
	m->rng ^= m->rng << 13; /* xorshift64: deterministic, cheap */
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return (uint32_t)(m->rng % n);
}

static double rnd01(struct model *m)
{
	return rnd(m, 1u << 30) / (double)(1u << 30);
}

static int add_locations(struct gs_profile *p, struct model *m)
{
	char name[128], file[128];
	struct gs_mapping py = { .file = gs_profile_intern(p, "[python]"),
				 .has_functions = true,
				 .has_filenames = true,
				 .has_lines = true };
	struct gs_mapping so = { .start = 0x7f0000000000,
				 .limit = 0x7f0004000000,
				 .file = gs_profile_intern(p, "/usr/lib/libtorch_cpu.so"),
				 .build_id = gs_profile_intern(p, "4f2e9ab1c0d3"),
				 .has_functions = true };
	struct gs_mapping k = { .file = gs_profile_intern(p, "[kernel.kallsyms]"),
				.has_functions = true };
	m->py_map = gs_profile_add_mapping(p, &py);
	m->so_map = gs_profile_add_mapping(p, &so);
	m->k_map = gs_profile_add_mapping(p, &k);
	m->py_locs = calloc(N_PY_FUNCS * 5, sizeof(uint32_t));
	m->nat_locs = calloc(N_NATIVE_FUNCS, sizeof(uint32_t));
	m->k_locs = calloc(16, sizeof(uint32_t));
	if (!m->py_locs || !m->nat_locs || !m->k_locs)
		return -ENOMEM;
	for (uint32_t f = 0; f < N_PY_FUNCS; f++) { /* 5 sampled lines per function */
		snprintf(name, sizeof(name), "Module%u.forward_part_%u", f / 7, f);
		snprintf(file, sizeof(file),
			 "/opt/venv/lib/python3.11/site-packages/torch/nn/mod%u.py", f / 20);
		struct gs_function fn = { .name = gs_profile_intern(p, name),
					  .file = gs_profile_intern(p, file),
					  .start_line = 10 + f };
		uint32_t id = gs_profile_add_function(p, &fn);
		for (uint32_t l = 0; l < 5; l++) {
			struct gs_line ln = { .function = id, .line = 12 + f + l * 3 };
			m->py_locs[m->n_py_locs++] =
			    gs_profile_add_location(p, m->py_map, 0, GS_FRAME_PYTHON, &ln, 1);
		}
	}
	for (uint32_t f = 0; f < N_NATIVE_FUNCS; f++) {
		snprintf(name, sizeof(name),
			 "at::native::(anonymous namespace)::cpu_kernel_%u<float>(at::Tensor&)", f);
		struct gs_function fn = { .name = gs_profile_intern(p, name) };
		uint32_t id = gs_profile_add_function(p, &fn), n = 1;
		struct gs_line ln[2] = { { .function = id } };
		if (f % 5 == 0 && f) { /* every fifth has the one before inlined */
			ln[0].function = id - 1;
			ln[1].function = id;
			n = 2;
		}
		m->nat_locs[m->n_nat_locs++] = gs_profile_add_location(
		    p, m->so_map, 0x7f0000001000 + f * 0x40, GS_FRAME_NATIVE, ln, n);
	}
	static const char *const kfn[] = { "do_syscall_64",    "__x64_sys_poll", "do_sys_poll",
					   "schedule",         "futex_wait",     "__x64_sys_futex",
					   "entry_SYSCALL_64", "do_futex" };
	for (uint32_t i = 0; i < 8; i++) {
		struct gs_function fn = { .name = gs_profile_intern(p, kfn[i]) };
		struct gs_line ln = { .function = gs_profile_add_function(p, &fn) };
		m->k_locs[m->n_k_locs++] = gs_profile_add_location(
		    p, m->k_map, 0xffffffff81000000 + i * 0x100, GS_FRAME_KERNEL, &ln, 1);
	}
	struct gs_function ev = { .name = gs_profile_intern(p, "_PyEval_EvalFrameDefault") };
	struct gs_line evl = { .function = gs_profile_add_function(p, &ev) };
	m->eval_loc = gs_profile_add_location(p, m->so_map, 0x7f0003000000, GS_FRAME_NATIVE, &evl,
					      1);
	return 0;
}

/* Frame at depth d (root = 0) of a stack whose Python part is py_depth deep. */
static uint32_t frame_at(struct model *m, uint32_t d, uint32_t py_depth)
{
	if (d < py_depth)
		return d % 2 ? m->eval_loc : m->py_locs[rnd(m, m->n_py_locs)];
	return m->nat_locs[rnd(m, m->n_nat_locs)];
}

/* Stacks of thread t: a tree grown from one root path.  root_first[] holds
 * them root first, MAX_DEPTH each; *len their lengths. */
static void grow_stacks(struct model *m, uint32_t *rf, uint32_t *len, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t target = 20 + rnd(m, 21), py = 8 + 2 * rnd(m, 5), keep = 0;
		uint32_t *s = rf + (size_t)i * MAX_DEPTH;
		if (i) {
			uint32_t pi = i - 1 - rnd(m, i < 4 ? i : 4), plen = len[pi];
			const uint32_t *parent = rf + (size_t)pi * MAX_DEPTH;
			keep = plen > 6 ? plen - 1 - rnd(m, 6) : 0;
			if (keep > target)
				keep = target;
			memcpy(s, parent, keep * sizeof(*s));
		}
		for (uint32_t d = keep; d < target; d++)
			s[d] = frame_at(m, d, py);
		len[i] = target;
	}
}

static int add_stacks(struct gs_profile *p, struct model *m, uint32_t n, uint32_t **ids)
{
	uint32_t *rf = malloc(sizeof(uint32_t) * MAX_DEPTH * n),
		 *len = malloc(sizeof(uint32_t) * n);
	*ids = malloc(sizeof(uint32_t) * n);
	if (!rf || !len || !*ids)
		return -ENOMEM;
	grow_stacks(m, rf, len, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t leaf_first[MAX_DEPTH + 3], k = 0;
		if (i % 10 == 9) { /* a blocking stack: kernel frames under it */
			leaf_first[k++] = m->k_locs[3];
			leaf_first[k++] = m->k_locs[i % 20 == 19 ? 4 : 2];
			leaf_first[k++] = m->k_locs[0];
		}
		for (uint32_t d = len[i]; d-- > 0;)
			leaf_first[k++] = rf[(size_t)i * MAX_DEPTH + d];
		int64_t id = gs_profile_add_stack(p, leaf_first, k);
		if (id < 0)
			return (int)id;
		(*ids)[i] = (uint32_t)id;
	}
	free(rf);
	free(len);
	return 0;
}

struct opts {
	size_t n_samples;
	uint32_t n_stacks, n_threads;
	double run, blocked;
	const char *writer, *out;
};

static int add_samples(struct gs_profile *p, struct model *m, const struct opts *o,
		       const uint32_t *stacks)
{
	static const char *const roles[] = { "main",
					     "dataloader_worker",
					     "dataloader_worker",
					     "dataloader_worker",
					     "dataloader_worker",
					     "pin_memory",
					     "intra_op",
					     "intra_op" };
	uint32_t per = o->n_stacks / o->n_threads;
	gs_str host = gs_profile_intern(p, "node7"), running = gs_profile_intern(p, "running");
	gs_str blocked = gs_profile_intern(p, "blocked"),
	       runnable = gs_profile_intern(p, "runnable");
	gs_str comm = gs_profile_intern(p, "python3"),
	       worker = gs_profile_intern(p, "pt_data_worker");
	for (uint32_t t = 0; t < o->n_threads; t++) {
		bool proc = t >= 1 && t <= 4; /* a worker process */
		uint32_t pid = proc ? 2000 + t : 1000, tid = proc ? pid : t ? 1000 + t : 1000;
		struct gs_sample s = { 0 };
		struct gs_sample_ctx s_c = { .pid = pid,
					     .tid = tid,
					     .thread_name = proc ? worker : comm,
					     .process_role =
						 gs_profile_intern(p, proc ? "dataloader" : "main"),
					     .cuda_device = -1,
					     .num_set = 1u << GS_NL_RANK };
		s_c.str_labels[GS_SL_HOST] = host;
		s_c.str_labels[GS_SL_THREAD_ROLE] = gs_profile_intern(p, roles[t % 8]);
		size_t n = o->n_samples / o->n_threads + (t < o->n_samples % o->n_threads);
		uint64_t now = rnd(m, (uint32_t)p->period_ns);
		uint32_t cur = rnd(m, per);
		for (size_t i = 0; i < n;) {
			uint32_t visit = 1;
			while (rnd01(m) > 1.0 / o->run)
				visit++; /* geometric, mean run */
			for (uint32_t v = 0; v < visit && i < n;
			     v++, i++, now += (uint64_t)p->period_ns) {
				s.stack = stacks[t * per + cur];
				s.time_ns = now;
				s.values[GS_V_SAMPLES] = 1;
				s.values[GS_V_CPU_NS] = p->period_ns;
				s.values[GS_V_OFFCPU_NS] = s.values[GS_V_WALL_NS] = 0;
				s_c.str_labels[GS_SL_THREAD_STATE] = running;
				if (gs_profile_add_sample(p, &s, &s_c))
					return -ENOMEM;
			}
			if (i < n &&
			    rnd01(m) < o->blocked) { /* blocked (or runnable) until the next tick */
				uint32_t b = (cur - cur % 10 + 9) % per;
				uint64_t dur = 5000000 + rnd(m, 95000000);
				s.stack = stacks[t * per + (b < per ? b : per - 1)];
				s.time_ns = now;
				s.values[GS_V_SAMPLES] = s.values[GS_V_CPU_NS] =
				    s.values[GS_V_WALL_NS] = 0;
				s.values[GS_V_OFFCPU_NS] = (int64_t)dur;
				s_c.str_labels[GS_SL_THREAD_STATE] = rnd(m, 10) ? blocked
										: runnable;
				if (gs_profile_add_sample(p, &s, &s_c))
					return -ENOMEM;
				i++;
				now += dur;
			}
			cur = rnd(m, 5) ? (cur + 1 + rnd(m, 3)) % per : rnd(m, per);
		}
		if (now > p->duration_nanos)
			p->duration_nanos = now;
	}
	return 0;
}

static int build(struct gs_profile *p, const struct opts *o)
{
	struct model m = { .rng = 0x9e3779b97f4a7c15ULL };
	uint32_t *stacks = NULL;
	p->frequency_hz = 99;
	p->period_ns = 1000000000 / 99;
	p->time_nanos = 1764600000000000000ULL;
	gs_profile_add_comment(p, "gpusample " GS_VERSION);
	struct gs_process main_p = { .pid = 1000,
				     .comm = gs_profile_intern(p, "python3"),
				     .role = gs_profile_intern(p, "main") };
	gs_profile_add_process(p, &main_p);
	for (uint32_t t = 1; t <= 4; t++) {
		struct gs_process w = { .pid = 2000 + t,
					.ppid = 1000,
					.comm = gs_profile_intern(p, "pt_data_worker"),
					.role = gs_profile_intern(p, "dataloader") };
		gs_profile_add_process(p, &w);
	}
	int rc = add_locations(p, &m);
	rc = rc ? rc : add_stacks(p, &m, o->n_stacks, &stacks);
	rc = rc ? rc : add_samples(p, &m, o, stacks);
	free(stacks);
	free(m.py_locs);
	free(m.nat_locs);
	free(m.k_locs);
	return rc;
}

static double max_rss_mb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024.0;
}

/* CPU seconds this process used so far: unlike the wall times, what other
 * load on the host takes does not count here. */
static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The terminal report, as the session prints it at stop (top 15). */
static int write_report(const struct gs_profile *p, const char *path, char *err, size_t errlen)
{
	struct gs_report_opts ro = { .top = 15 };
	FILE *f = fopen(path, "w");
	int rc;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	rc = gs_write_report(p, &ro, f);
	if (fclose(f) && !rc)
		rc = -EIO;
	if (rc)
		snprintf(err, errlen, "report: %s", strerror(-rc));
	return rc;
}

static int write_one(const struct gs_profile *p, const struct opts *o, char *err, size_t errlen)
{
	if (!strcmp(o->writer, "pprof"))
		return gs_write_pprof(p, o->out, err, errlen);
	if (!strcmp(o->writer, "speedscope"))
		return gs_write_speedscope(p, o->out, err, errlen);
	if (!strcmp(o->writer, "folded"))
		return gs_write_folded(p, GS_FOLDED_CPU, o->out, err, errlen);
	if (!strcmp(o->writer, "trace"))
		return gs_write_trace(p, o->out, err, errlen);
	if (!strcmp(o->writer, "report"))
		return write_report(p, o->out, err, errlen);
	if (!strcmp(o->writer, "html"))
		return gs_write_html(p, o->out, err, errlen);
	if (!strcmp(o->writer, "none"))
		return 0;
	snprintf(err, errlen,
		 "unknown writer %s (pprof, speedscope, folded, trace, report, html, none)",
		 o->writer);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.n_samples = 5000000, .n_stacks = 4000, .n_threads = 8, .run = 1.2, .blocked = 0.3
	};
	int c;
	while ((c = getopt(argc, argv, "n:s:t:r:b:w:o:")) != -1) {
		switch (c) {
		case 'n':
			o.n_samples = strtoull(optarg, NULL, 0);
			break;
		case 's':
			o.n_stacks = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 't':
			o.n_threads = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			o.run = strtod(optarg, NULL);
			break;
		case 'b':
			o.blocked = strtod(optarg, NULL);
			break;
		case 'w':
			o.writer = optarg;
			break;
		case 'o':
			o.out = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!o.writer || !o.out || o.n_threads == 0 || o.n_threads > 8 ||
	    o.n_stacks < 10 * o.n_threads || o.run < 1.0 || o.blocked < 0 || o.blocked > 1) {
		fprintf(stderr,
			"usage: %s [-n SAMPLES] [-s STACKS >= 10*THREADS] [-t THREADS 1-8] [-r RUN "
			">= 1] [-b BLOCKED 0-1] "
			"-w pprof|speedscope|folded|trace|report|html|none -o PATH\n",
			argv[0]);
		return 2;
	}
	struct gs_profile p;
	gs_profile_init(&p);
	uint64_t t0 = gs_mono_ns();
	double c0 = cpu_s();
	if (build(&p, &o)) {
		fprintf(stderr, "outputs: out of memory building the model\n");
		return 1;
	}
	uint64_t t1 = gs_mono_ns();
	double c1 = cpu_s();
	double model_rss = max_rss_mb();
	char err[512] = "";
	int rc = write_one(&p, &o, err, sizeof(err));
	uint64_t t2 = gs_mono_ns();
	double c2 = cpu_s();
	if (rc) {
		fprintf(stderr, "outputs: %s\n", err);
		return 1;
	}
	FILE *f = fopen(o.out, "r");
	long bytes = 0;
	if (f) {
		fseek(f, 0, SEEK_END);
		bytes = ftell(f);
		fclose(f);
	}
	printf("writer=%s samples=%zu stacks=%u frames=%u threads=%u run=%.1f blocked=%.2f "
	       "build_s=%.2f model_rss_mb=%.0f "
	       "peak_rss_mb=%.0f write_s=%.2f bytes=%ld build_cpu_s=%.2f write_cpu_s=%.2f\n",
	       o.writer, p.n_samples, p.n_stacks, p.n_locations, o.n_threads, o.run, o.blocked,
	       (t1 - t0) / 1e9, model_rss, max_rss_mb(), (t2 - t1) / 1e9, bytes, c1 - c0, c2 - c1);
	gs_profile_free(&p);
	return 0;
}
