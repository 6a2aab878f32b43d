// SPDX-License-Identifier: MIT
/*
 * The report's "Where the time goes" section and its verdict: for the main
 * thread of every training process (process_role "main"; labelled with its
 * rank when samples carry one) a wall-clock split over the categories of
 * gs_wall_split (output/walltime.c), each with seconds, % and its top stack;
 * for DataLoader workers busy / blocked / starved; then one verdict per
 * main thread naming the dominant category and the usual remedy.  CPU
 * starvation (runnable) is never called blocked.  A profile without
 * off-CPU data (--no-offcpu, an older gpusample) gets an on-CPU-only split
 * that says so.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/escape.h"
#include "util/hashmap.h"
#include "util/vec.h"

struct who {
	uint32_t pid; /* tgid (main thread: tid == pid) */
	gs_str comm;
	int64_t rank; /* -1 if unknown */
	bool has_rank;
};

/* Who took the CPUs while the job waited for one (session/machine.c's comment
 * and the job's own threads): known = the comment was there. */
struct machine {
	bool known;
	unsigned n_cpus;
	double outside;    /* cores taken by processes outside the job */
	char top[480];     /* "name 1.80 (pid P: command), name 0.02 (...)" */
	double demand;     /* cores the job's threads wanted: on-CPU + runnable */
	unsigned busy_thr; /* job threads on-CPU or runnable half the time or more */
};

struct wall_ctx {
	const struct gs_profile *p;
	FILE *out;
	bool color;
	bool offcpu; /* the profile has off-CPU samples */
	int off_rec; /* off-CPU recording: 1 on, 0 off (--no-offcpu), -1 unknown */
	/* Every DataLoader worker process, in order of its first sample; a
	 * loop that re-creates its workers each epoch has thousands. */
	struct worker *workers;
	size_t n_workers, cap_workers;
	struct gs_hmap worker_of_pid; /* pid -> index in workers */
	unsigned n_mains;
	struct machine mach;
};

/* A worker process and the span of its CPU timer samples (ns from the
 * profile's start: its first and last), which tell its generation. */
struct worker {
	uint32_t pid, ppid;
	uint64_t first_ns, last_ns;
};

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static bool is_cpu(const struct gs_profile *p, const struct gs_sample *s)
{
	return gs_profile_ctx(p, s)->cuda_device < 0;
}

static const char *role_of(const struct gs_profile *p, const struct gs_sample *s)
{
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
	if (sc->process_role)
		return gs_profile_str(p, sc->process_role);
	const struct gs_process *pr = gs_find_process(p, sc->pid);
	return pr && pr->role ? gs_profile_str(p, pr->role) : "";
}

static bool has_offcpu(const struct gs_profile *p)
{
	for (size_t i = 0; i < p->n_samples; i++)
		if (is_cpu(p, &p->samples[i]) && p->samples[i].values[GS_V_OFFCPU_NS] > 0)
			return true;
	return false;
}

/* Whether off-CPU time was recorded, from the comment session/offcpu.c writes:
 * a profile without off-CPU samples is not necessarily a --no-offcpu one (a
 * process that exits within the first tens of ms leaves none).  -1: no such
 * comment (an older gpusample). */
static int offcpu_recording(const struct gs_profile *p)
{
	for (uint32_t i = 0; i < p->n_comments; i++) {
		const char *c = gs_profile_str(p, p->comments[i]);
		if (!strncmp(c, "off-CPU: off", 12))
			return 0;
		if (!strncmp(c, "off-CPU: sched_switch", 21))
			return 1;
	}
	return -1;
}

/* The machine comment, then the job's demand from its CPU samples. */
static int machine_of(const struct gs_profile *p, struct machine *m)
{
	for (uint32_t i = 0; i < p->n_comments && !m->known; i++) {
		const char *c = gs_profile_str(p, p->comments[i]);
		const char *l = strchr(c, '('), *r = strrchr(c, ')');
		if (sscanf(c, "machine CPU: %u CPUs; outside the job %lf cores", &m->n_cpus,
			   &m->outside) != 2 ||
		    !l || !r || r < l)
			continue;
		m->known = true;
		snprintf(m->top, sizeof(m->top), "%.*s", (int)(r - l - 1), l + 1);
	}
	if (!m->known || !p->duration_nanos)
		return 0;
	struct gs_hmap thr = { 0 }; /* (pid << 32 | tid) -> ns on-CPU or runnable */
	int64_t runnable = gs_profile_find_str(p, "runnable");
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (!is_cpu(p, s) || !sc->pid)
			continue;
		int64_t off = s->values[GS_V_OFFCPU_NS] > 0 ? s->values[GS_V_OFFCPU_NS] : 0;
		int64_t want = gs_wall_ns(p, s) - off;
		if (runnable >= 0 && sc->str_labels[GS_SL_THREAD_STATE] == (gs_str)runnable)
			want += off;
		bool added;
		uint64_t *v = gs_hmap_slot(&thr, (uint64_t)sc->pid << 32 | sc->tid, &added);
		if (!v) {
			gs_hmap_free(&thr);
			return -ENOMEM;
		}
		*v += want > 0 ? (uint64_t)want : 0;
	}
	uint64_t key, val, sum = 0;
	for (size_t it = 0; gs_hmap_next(&thr, &it, &key, &val);) {
		sum += val;
		m->busy_thr += 2 * val >= p->duration_nanos;
	}
	m->demand = (double)sum / (double)p->duration_nanos;
	gs_hmap_free(&thr);
	return 0;
}

/* Starvation caused by the neighbours: they took at least half a core,
 * and more than the job asked beyond the cores (its own oversubscription). */
static bool starved_by_others(const struct machine *m)
{
	return m->known && m->outside >= 0.5 && m->outside > m->demand - (double)m->n_cpus;
}

/* The job's own oversubscription: its threads want (on a CPU or waiting
 * for one) more cores than the machine has; one thread never does. */
static bool oversubscribed(const struct machine *m)
{
	return m->known && m->demand > (double)m->n_cpus;
}

/* Who took the cores while the job was runnable: the neighbours (with
 * pids and commands) or the job's own busy threads; "" when the profile
 * has no machine comment. */
static void cores_taken_by(const struct machine *m, char *buf, size_t len)
{
	if (starved_by_others(m))
		snprintf(buf, len, "other processes took %.2f of the %u cores: %s", m->outside,
			 m->n_cpus, m->top);
	else if (m->known)
		snprintf(buf, len,
			 "the job's own %u busy threads wanted %.1f of the %u cores (other "
			 "processes took %.2f)",
			 m->busy_thr, m->demand, m->n_cpus, m->outside);
	else
		buf[0] = 0;
}

/* ---- who is who --------------------------------------------------------- */

/* A function of torch.utils.data's worker loop: torch does not rename
 * worker processes, so their stacks tell. */
static bool worker_fn(const struct gs_profile *p, uint32_t fn)
{
	const struct gs_function *f = gs_profile_function(p, fn);
	const char *n = gs_profile_str(p, f->name);
	return !strcmp(n, "_worker_loop") && strstr(gs_profile_str(p, f->file), "utils/data/");
}

static bool stack_has_worker_loop(const struct gs_profile *p, uint32_t st)
{
	const struct gs_stack *s = &p->stacks[st];
	for (uint32_t i = 0; i < s->n; i++) {
		const struct gs_location *l = gs_profile_location(p, p->stack_locs[s->first + i]);
		for (uint32_t k = 0; k < l->n_lines; k++) {
			uint32_t fn = p->lines[l->first_line + k].function;
			if (fn && fn <= p->n_functions && l->kind == GS_FRAME_PYTHON &&
			    worker_fn(p, fn))
				return true;
		}
	}
	return false;
}

/* The index of pid's worker entry, or -1: not a worker. */
static int64_t worker_index(const struct wall_ctx *w, uint32_t pid)
{
	const uint64_t *v = gs_hmap_get(&w->worker_of_pid, pid);

	return v ? (int64_t)*v : -1;
}

static bool is_worker_role(const char *role)
{
	return !strcmp(role, "dataloader") || !strcmp(role, "dataloader_worker") ||
	       !strcmp(role, "worker");
}

/* Every worker (by role or by a _worker_loop frame), then the span of
 * each one's samples.  0 or -ENOMEM. */
static int find_workers(struct wall_ctx *w)
{
	const struct gs_profile *p = w->p;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (!is_cpu(p, s) || worker_index(w, sc->pid) >= 0)
			continue;
		if (!is_worker_role(role_of(p, s)) && !stack_has_worker_loop(p, s->stack))
			continue;
		const struct gs_process *pr = gs_find_process(p, sc->pid);
		struct worker x = { sc->pid, pr ? pr->ppid : 0, UINT64_MAX, 0 };
		if (GS_PUSH(w->workers, w->n_workers, w->cap_workers, x) ||
		    gs_hmap_put(&w->worker_of_pid, sc->pid, w->n_workers - 1))
			return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_samples && w->n_workers; i++) {
		const struct gs_sample *s = &p->samples[i];
		/* timer ticks only: off-CPU samples carry time folded from a
		 * thread's whole run (the unsampled remainder) */
		int64_t k = is_cpu(p, s) && s->values[GS_V_SAMPLES] > 0
				? worker_index(w, gs_profile_ctx(p, s)->pid)
				: -1;
		if (k < 0)
			continue;
		struct worker *x = &w->workers[k];
		x->first_ns = s->time_ns < x->first_ns ? s->time_ns : x->first_ns;
		x->last_ns = s->time_ns > x->last_ns ? s->time_ns : x->last_ns;
	}
	return 0;
}

/* The main threads of the training processes, in order of discovery. */
struct mains {
	struct who *v;
	size_t n, cap;
	struct gs_hmap of_pid; /* pid -> 1: known */
};

static int add_main(struct mains *m, const struct gs_profile *p, uint32_t pid, gs_str comm)
{
	bool added;
	uint64_t *k = gs_hmap_slot(&m->of_pid, pid, &added);
	if (!k)
		return -ENOMEM;
	if (!added)
		return 0;
	const struct gs_process *pr = gs_find_process(p, pid);
	struct who x = { .pid = pid, .comm = pr && pr->comm ? pr->comm : comm, .rank = -1 };
	for (size_t i = 0; i < p->n_samples; i++) { /* rank label of its samples */
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (sc->pid == pid && (sc->num_set & (1u << GS_NL_RANK))) {
			x.rank = sc->num_labels[GS_NL_RANK];
			x.has_rank = true;
			break;
		}
	}
	return GS_PUSH(m->v, m->n, m->cap, x);
}

/* Every process with role "main" (process table, then sample labels);
 * without any, the first process, else the first sampled non-worker.
 * 0 or -ENOMEM. */
static int find_mains(struct wall_ctx *w, struct mains *m)
{
	const struct gs_profile *p = w->p;
	int rc = 0;
	for (uint32_t i = 0; i < p->n_processes && !rc; i++) {
		const struct gs_process *pr = &p->processes[i];
		if (pr->role && !strcmp(gs_profile_str(p, pr->role), "main"))
			rc = add_main(m, p, pr->pid, pr->comm);
	}
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (is_cpu(p, s) && sc->process_role &&
		    !strcmp(gs_profile_str(p, sc->process_role), "main"))
			rc = add_main(m, p, sc->pid, sc->thread_name);
	}
	if (!rc && !m->n && p->n_processes)
		rc = add_main(m, p, p->processes[0].pid, p->processes[0].comm);
	for (size_t i = 0; i < p->n_samples && !m->n && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (is_cpu(p, s) && s->values[GS_V_SAMPLES] > 0 && sc->pid &&
		    worker_index(w, sc->pid) < 0)
			rc = add_main(m, p, sc->pid, sc->thread_name);
	}
	return rc;
}

/* ---- one readable line per stack ------------------------------------------ */

static const char *basename_of(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Frame name for a one-line stack: Python "qualname (file.py:line)",
 * native short C++ name, kernel "name [k]"; control bytes replaced. */
static void frame_short(const struct gs_profile *p, const struct gs_dframe *f, uint8_t kind,
			char *buf, size_t len)
{
	const struct gs_function *fn = f->type == GS_DF_FUNC || f->type == GS_DF_PYLINE
					   ? gs_profile_function(p, f->fn)
					   : NULL;
	char tmp[512];
	if (fn && f->type == GS_DF_PYLINE && fn->file)
		snprintf(buf, len, "%s (%s:%" PRId64 ")", gs_profile_str(p, fn->name),
			 basename_of(gs_profile_str(p, fn->file)), f->line);
	else if (fn && kind == GS_FRAME_KERNEL)
		snprintf(buf, len, "%s [k]", gs_profile_str(p, fn->name));
	else if (fn)
		snprintf(buf, len, "%s",
			 gs_short_cxx_name(gs_profile_str(p, fn->name), tmp, sizeof(tmp)));
	else
		gs_dframe_name(p, f, buf, len);
}

struct pick {
	struct gs_dframe f;
	uint8_t kind;
};

/* The frames worth a glance, root to leaf: the frame that put the time in
 * category cat (the leaf-most one the table matches: _next_data,
 * cudaStreamSynchronize, take_gil), the 3 leaf-most Python frames (2 when
 * that frame is an outer Python one) and the leaf-most user-space native
 * frame below them (the call that waits: poll, futex); no Python: the 3
 * leaf-most native frames; nothing in user space: the 2 leaf-most kernel
 * frames.  out has room for 5. */
static size_t pick_frames(const struct gs_profile *p, uint32_t st, int cat, struct pick *out)
{
	const struct gs_stack *s = &p->stacks[st];
	size_t n_py = 0, n_nat = 0, n_k = 0, n = 0, py_at_match = 0;
	struct pick py[3], nat[3], k[2], match = { 0 }; /* leaf first */
	struct gs_dframe df[66];
	for (uint32_t i = 0; i < s->n; i++) { /* leaf first */
		uint32_t lid = p->stack_locs[s->first + i];
		const struct gs_location *l = gs_profile_location(p, lid);
		size_t nd = gs_location_dframes(p, lid, df, 66);
		for (size_t j = nd; j-- > 0;) { /* callee first */
			struct pick x = { df[j], l->kind };
			bool fn = df[j].type == GS_DF_FUNC || df[j].type == GS_DF_PYLINE;
			if (!match.f.type && cat >= 0 && fn && l->kind != GS_FRAME_KERNEL &&
			    gs_wall_frame_cat(p, df[j].fn, l->kind) == cat) {
				match = x;
				py_at_match = n_py;
			}
			if (l->kind == GS_FRAME_PYTHON && n_py < 3)
				py[n_py++] = x;
			else if (l->kind == GS_FRAME_NATIVE && n_nat < 3 && !n_py)
				nat[n_nat++] = x;
			else if (l->kind == GS_FRAME_KERNEL && n_k < 2)
				k[n_k++] = x;
		}
	}
	bool match_py = match.f.type && match.kind == GS_FRAME_PYTHON;
	bool outer = match_py && py_at_match >= 2; /* not among the 2 leaf-most */
	if (outer) {
		out[n++] = match;
		n_py = n_py > 2 ? 2 : n_py;
	}
	for (size_t i = n_py; i-- > 0;)
		out[n++] = py[i];
	if (match.f.type && !match_py && (!n_nat || !gs_dframe_eq(&match.f, &nat[0].f)))
		out[n++] = match;
	if (n_py && n_nat)
		out[n++] = nat[0]; /* the leaf-most native, below the Python frames */
	if (n_py || n)
		return n;
	struct pick *src = n_nat ? nat : k;
	size_t m = n_nat ? n_nat : n_k;
	for (size_t i = m; i-- > 0;)
		out[n++] = src[i];
	return n;
}

/* "a (x.py:3) > b (y.py:9) > poll" in at most len - 1 chars: frames are
 * dropped from the root side ("... > ") until it fits, then cut. */
static void short_stack(const struct gs_profile *p, uint32_t st, int cat, char *buf, size_t len)
{
	struct pick pk[5];
	size_t n = st < p->n_stacks ? pick_frames(p, st, cat, pk) : 0;
	char name[5][256];
	for (size_t i = 0; i < n; i++)
		frame_short(p, &pk[i].f, pk[i].kind, name[i], sizeof(name[i]));
	for (size_t from = 0; from < n; from++) {
		size_t need = from ? 6 : 0;
		for (size_t i = from; i < n; i++)
			need += strlen(name[i]) + (i > from ? 3 : 0);
		if (need < len || from == n - 1) {
			size_t used = (size_t)snprintf(buf, len, "%s", from ? "... > " : "");
			for (size_t i = from; i < n && used < len; i++)
				used += (size_t)snprintf(buf + used, len - used, "%s%s",
							 i > from ? " > " : "", name[i]);
			return;
		}
	}
	snprintf(buf, len, "-");
}

/* ---- the split -------------------------------------------------------------- */

struct thread_key {
	uint32_t pid, tid;
};

static bool keep_thread(const struct gs_sample *s, const struct gs_sample_ctx *c, void *ctx)
{
	const struct thread_key *k = ctx;
	return c->pid == k->pid && c->tid == k->tid;
}

static void who_name(const struct wall_ctx *w, const struct who *m, char *buf, size_t len)
{
	char comm[64];
	snprintf(comm, sizeof(comm), "%s", m->comm ? gs_profile_str(w->p, m->comm) : "?");
	if (m->has_rank)
		snprintf(buf, len, "rank %" PRId64 " main thread (%s pid %u)", m->rank, comm,
			 m->pid);
	else
		snprintf(buf, len, "main thread (%s pid %u)", comm, m->pid);
}

/* The main thread's name says Python ("python", "python3.14", ...). */
static bool is_python_comm(const struct wall_ctx *w, const struct who *m)
{
	return m->comm && !strncmp(gs_profile_str(w->p, m->comm), "python", 6);
}

/* Under 5 ms a time prints as "0.00 s": a row that says nothing, and a
 * thread with no more wall time than that gives nothing to conclude. */
#define GS_WALL_SHOWN_NS 5000000ULL

static void fmt_s(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, ns >= 10000000000ULL ? "%.1f s" : "%.2f s", (double)ns / 1e9);
}

/* What the thread was doing while it waited for a CPU, largest first:
 * "      while in: input wait 12.0%, compute 3.1%" (shares of the total). */
static void print_starved_in(struct wall_ctx *w, const struct gs_wall_split *x)
{
	bool done[GS_NWALL_CATS] = { false };
	fprintf(w->out, "      while in:");
	for (int k = 0; k < GS_NWALL_CATS; k++) {
		int best = -1;
		for (int c = 0; c < GS_NWALL_CATS; c++)
			if (!done[c] && x->starved_in[c] &&
			    (best < 0 || x->starved_in[c] > x->starved_in[best]))
				best = c;
		if (best < 0)
			break;
		done[best] = true;
		fprintf(w->out, "%s %s %.1f%%", k ? "," : "", gs_wall_cat_name[best],
			pct(x->starved_in[best], x->total_ns));
	}
	fprintf(w->out, "\n");
}

/* The stacks after the top one, each with its own time, at most 2 lines of
 * 0.5% or more:
 * "      also      0.30 s  30.0%  stack".  Stacks that read the same once
 * shortened are one line (their times added); one that reads as the top
 * one is left out (the category's line has its time). */
static void print_more_stacks(struct wall_ctx *w, const struct gs_wall_split *x, int c)
{
	char text[GS_WALL_TOP][200], a[32];
	uint64_t ns[GS_WALL_TOP];
	int n = 0;

	short_stack(w->p, x->top_stacks[c][0], c, text[0], sizeof(text[0]));
	for (int k = 1; k < GS_WALL_TOP && x->top_stacks[c][k] != UINT32_MAX; k++) {
		int j = 0;

		short_stack(w->p, x->top_stacks[c][k], c, text[n + 1], sizeof(text[n + 1]));
		while (j <= n && strcmp(text[j], text[n + 1]))
			j++;
		if (j == 0)
			continue;
		if (j <= n) {
			ns[j] += x->top_ns[c][k];
			continue;
		}
		ns[++n] = x->top_ns[c][k];
	}
	for (int k = 1; k <= n && k <= 2; k++) {
		int best = k; /* sums can reorder the lines */

		for (int j = k + 1; j <= n; j++)
			if (ns[j] > ns[best])
				best = j;
		if (best != k) {
			char t[200];
			uint64_t v = ns[k];

			memcpy(t, text[k], sizeof(t));
			memcpy(text[k], text[best], sizeof(t));
			memcpy(text[best], t, sizeof(t));
			ns[k] = ns[best];
			ns[best] = v;
		}
		if (ns[k] * 200 < x->total_ns || ns[k] < GS_WALL_SHOWN_NS) /* says nothing */
			break;
		fmt_s(a, sizeof(a), ns[k]);
		fprintf(w->out, "      %-14s %9s %5.1f%%  %s\n", k == 1 ? "also" : "", a,
			pct(ns[k], x->total_ns), text[k]);
	}
}

/* Who ended the main thread's waits (the waker labels of its blocked
 * off-CPU samples, session/wakers.c), per wait category: the texts with
 * the most time, their role and share of the category. */
#define GS_WAKE_SHOWN 3
struct waker_sum {
	gs_str role, text;
	uint64_t ns;
};
struct wakers_of {
	struct waker_sum v[GS_NWALL_CATS][16];
	int n[GS_NWALL_CATS];
};

static bool wakers_collect(const struct gs_profile *p, const struct who *m, struct wakers_of *o)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		gs_str role = sc->str_labels[GS_SL_WAKER_ROLE], text = sc->str_labels[GS_SL_WAKER];
		int c, k;

		if (!role || sc->pid != m->pid || sc->tid != m->pid ||
		    s->values[GS_V_OFFCPU_NS] <= 0 || (c = gs_wall_classify(p, s)) < 0)
			continue;
		for (k = 0; k < o->n[c] && (o->v[c][k].role != role || o->v[c][k].text != text);
		     k++)
			;
		if (k == o->n[c]) {
			if (k == 16)
				continue; /* the 17th distinct waker of one category: too small to show */
			o->v[c][o->n[c]++] = (struct waker_sum){ role, text, 0 };
		}
		o->v[c][k].ns += (uint64_t)s->values[GS_V_OFFCPU_NS];
	}
	return true;
}

/* "      woken by   92.0%  dataloader_worker: f (a.py:3) > decode (a.py:9)" */
static void print_wakers(struct wall_ctx *w, struct wakers_of *o, int c, uint64_t cat_ns)
{
	for (int k = 0; k < GS_WAKE_SHOWN; k++) {
		int best = -1;
		char text[300], *q, esc[600];

		for (int j = 0; j < o->n[c]; j++)
			if (o->v[c][j].ns && (best < 0 || o->v[c][j].ns > o->v[c][best].ns))
				best = j;
		if (best < 0 || o->v[c][best].ns * 20 < cat_ns) /* under 5%: says nothing */
			return;
		snprintf(text, sizeof(text), "%s: %s", gs_profile_str(w->p, o->v[c][best].role),
			 gs_profile_str(w->p, o->v[c][best].text));
		gs_term_escape(text, esc, sizeof(esc));
		fprintf(w->out, "      %-14s %9s %5.1f%%  ", k ? "" : "woken by", "",
			pct(o->v[c][best].ns, cat_ns));
		for (q = esc; *q; q++) /* the label's frames, root first */
			fputs(*q == ';' ? " > " : (char[2]){ *q, 0 }, w->out);
		fputc('\n', w->out);
		o->v[c][best].ns = 0;
	}
}

static void print_split(struct wall_ctx *w, const struct who *m, const struct gs_wall_split *x)
{
	struct wakers_of *wk = NULL;
	char name[128], a[32], b[32], stack[200];
	who_name(w, m, name, sizeof(name));
	fmt_s(a, sizeof(a), x->total_ns);
	fmt_s(b, sizeof(b), w->p->duration_nanos);
	if (x->total_ns < GS_WALL_SHOWN_NS) {
		fprintf(w->out,
			"  %s: no wall time in this profile (under 0.01 s; profile %s): nothing "
			"to conclude about it\n",
			name, b);
		return;
	}
	if (w->offcpu)
		fprintf(w->out, "  %s: %s of wall time (profile %s)\n", name, a, b);
	else if (w->off_rec == 1)
		fprintf(w->out,
			"  %s: %s on-CPU of %s; on-CPU only: off-CPU time was recorded but none "
			"was seen (the run or the process was too short), so waits do not show\n",
			name, a, b);
	else
		fprintf(w->out,
			"  %s: %s on-CPU of %s; on-CPU only: this profile has no off-CPU data "
			"(--no-offcpu or an older gpusample), so waits do not show\n",
			name, a, b);
	for (int c = 0; c < GS_NWALL_CATS; c++) {
		if (x->ns[c] < GS_WALL_SHOWN_NS)
			continue;
		fmt_s(a, sizeof(a), x->ns[c]);
		short_stack(w->p, x->top_stack[c], c, stack, sizeof(stack));
		fprintf(w->out, "    %-16s %9s %5.1f%%  %s\n", gs_wall_cat_name[c], a,
			pct(x->ns[c], x->total_ns), stack);
		if (c == GS_WALL_STARVED) {
			char by[600];

			print_starved_in(w, x);
			cores_taken_by(&w->mach, by, sizeof(by));
			if (by[0])
				fprintf(w->out, "      taken by: %s\n", by);
		}
		if (c == GS_WALL_OTHER_BLOCKED)
			print_more_stacks(w, x, c);
		if (c != GS_WALL_COMPUTE && c != GS_WALL_STARVED && w->offcpu &&
		    (wk || ((wk = malloc(sizeof(*wk))) && wakers_collect(w->p, m, wk))))
			print_wakers(w, wk, c, x->ns[c]);
	}
	free(wk);
}

/* The worker belongs to main_pid: its parent, or any worker when there is
 * one main. */
static bool worker_of(const struct wall_ctx *w, size_t i, uint32_t main_pid, unsigned n_mains)
{
	return n_mains == 1 || w->workers[i].ppid == main_pid;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_first(const void *a, const void *b)
{
	const struct worker *x = *(const struct worker *const *)a,
			    *y = *(const struct worker *const *)b;
	return x->first_ns < y->first_ns ? -1 : x->first_ns > y->first_ns;
}

/* How main_pid's workers came: *n processes, at most *at_once of them at
 * a time (their sample spans overlapping), so in *gens generations of
 * *at_once (a DataLoader without persistent_workers makes one per epoch;
 * counted so, not from gaps between spans: a worker of a short epoch may
 * stop ticking before its sibling's first tick).  0 or -ENOMEM. */
static int generations(const struct wall_ctx *w, uint32_t main_pid, unsigned n_mains, size_t *n,
		       size_t *gens, size_t *at_once)
{
	const struct worker **v = malloc((w->n_workers + 1) * sizeof(*v));
	uint64_t *ends = malloc((w->n_workers + 1) * sizeof(*ends));
	size_t live = 0, nv = 0;
	*n = *gens = *at_once = 0;
	if (!v || !ends) {
		free(v);
		free(ends);
		return -ENOMEM;
	}
	for (size_t i = 0; i < w->n_workers; i++) {
		if (!worker_of(w, i, main_pid, n_mains))
			continue;
		(*n)++;
		if (w->workers[i].first_ns <= w->workers[i].last_ns) /* no tick: no span */
			v[nv++] = &w->workers[i];
	}
	/* A pid the kernel handed out again (pid_max wraps over hours of
	 * churn) joins two lives into one long span: spans past 4 times the
	 * median are left out of the count at a time. */
	for (size_t i = 0; i < nv; i++)
		ends[i] = v[i]->last_ns - v[i]->first_ns;
	qsort(ends, nv, sizeof(*ends), cmp_u64);
	uint64_t longest = nv ? 4 * ends[nv / 2] + 1 : 0;
	qsort(v, nv, sizeof(*v), cmp_first);
	for (size_t i = 0; i < nv; i++) {
		if (v[i]->last_ns - v[i]->first_ns > longest)
			continue;
		/* the live ones: those whose span reaches this start (ends[] kept
		 * small: spans that ended are dropped as they are met) */
		size_t k = 0;
		for (size_t j = 0; j < live; j++)
			if (ends[j] >= v[i]->first_ns)
				ends[k++] = ends[j];
		live = k;
		ends[live++] = v[i]->last_ns;
		*at_once = live > *at_once ? live : *at_once;
	}
	*gens = *at_once ? (*n + *at_once - 1) / *at_once : 1;
	free(v);
	free(ends);
	return 0;
}

/* What the workers of one main process did: their main threads' on-CPU
 * time (busy), blocked and runnable (starved) off-CPU time, and where
 * their CPU went: the innermost Python frame of their on-CPU samples,
 * the busiest function (hot_fn, a function id; 0 = none) and its busiest
 * line. */
struct worker_stats {
	size_t n, gens, at_once;
	uint64_t busy, blocked, starved;
	uint32_t hot_fn;
	int64_t hot_line;
	uint64_t hot_ns, hot_line_ns, cpu_ns; /* cpu_ns: all their on-CPU time */
};

/* The innermost Python frame of stack st: its function id and line. */
static uint32_t innermost_py(const struct gs_profile *p, uint32_t st, int64_t *line)
{
	const struct gs_stack *s = &p->stacks[st];

	for (uint32_t i = 0; i < s->n; i++) {
		const struct gs_location *l = gs_profile_location(p, p->stack_locs[s->first + i]);
		if (l->kind == GS_FRAME_PYTHON && l->n_lines) {
			*line = p->lines[l->first_line].line;
			return p->lines[l->first_line].function;
		}
	}
	return 0;
}

/* The busiest key of m (most ns, then the lower key); 0 when empty. */
static uint64_t busiest(const struct gs_hmap *m, uint64_t *ns)
{
	uint64_t key, val, best = 0;

	*ns = 0;
	for (size_t it = 0; gs_hmap_next(m, &it, &key, &val);)
		if (val > *ns || (val == *ns && key < best)) {
			best = key;
			*ns = val;
		}
	return best;
}

/* Adds the on-CPU ns of one worker sample to its function and line. */
static int add_hot(const struct gs_profile *p, const struct gs_sample *s, uint64_t ns,
		   struct gs_hmap *fns, struct gs_hmap *lines)
{
	int64_t line = 0;
	uint32_t fn = s->stack < p->n_stacks ? innermost_py(p, s->stack, &line) : 0;
	uint64_t *v;
	bool added;

	if (!fn || !ns)
		return 0;
	if (!(v = gs_hmap_slot(fns, fn, &added)))
		return -ENOMEM;
	*v += ns;
	if (!(v = gs_hmap_slot(lines, (uint64_t)fn << 32 | (uint32_t)line, &added)))
		return -ENOMEM;
	*v += ns;
	return 0;
}

static int worker_stats(const struct wall_ctx *w, uint32_t main_pid, unsigned n_mains,
			struct worker_stats *ws)
{
	const struct gs_profile *p = w->p;
	struct gs_hmap fns = { 0 }, lines = { 0 };
	int rc = 0;

	memset(ws, 0, sizeof(*ws));
	if (generations(w, main_pid, n_mains, &ws->n, &ws->gens, &ws->at_once))
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples && ws->n && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (!is_cpu(p, s))
			continue;
		int64_t k = worker_index(w, sc->pid);
		if (k < 0 || !worker_of(w, (size_t)k, main_pid, n_mains))
			continue;
		int64_t off = s->values[GS_V_OFFCPU_NS] > 0 ? s->values[GS_V_OFFCPU_NS] : 0;
		uint64_t on = (uint64_t)(gs_wall_ns(p, s) - off);
		ws->cpu_ns += on;
		rc = add_hot(p, s, on, &fns, &lines);
		if (sc->pid != sc->tid)
			continue;
		const char *st = gs_profile_str(p, sc->str_labels[GS_SL_THREAD_STATE]);
		ws->busy += on;
		if (!strcmp(st, "runnable"))
			ws->starved += (uint64_t)off;
		else
			ws->blocked += (uint64_t)off;
	}
	ws->hot_fn = (uint32_t)busiest(&fns, &ws->hot_ns);
	if (ws->hot_fn) { /* its busiest line */
		struct gs_hmap mine = { 0 };
		uint64_t key, val, *v;
		bool added;

		for (size_t it = 0; !rc && gs_hmap_next(&lines, &it, &key, &val);)
			if (key >> 32 == ws->hot_fn) {
				if (!(v = gs_hmap_slot(&mine, key, &added)))
					rc = -ENOMEM;
				else
					*v = val;
			}
		ws->hot_line = (int64_t)(uint32_t)busiest(&mine, &ws->hot_line_ns);
		gs_hmap_free(&mine);
	}
	gs_hmap_free(&fns);
	gs_hmap_free(&lines);
	return rc;
}

/* Busy / blocked / starved of the workers of main_pid (worker_stats).
 * 0 or -ENOMEM. */
static int print_workers(struct wall_ctx *w, uint32_t main_pid, unsigned n_mains)
{
	const struct gs_profile *p = w->p;
	struct worker_stats ws;
	if (worker_stats(w, main_pid, n_mains, &ws))
		return -ENOMEM;
	size_t n = ws.n, gens = ws.gens, at_once = ws.at_once;
	uint64_t busy = ws.busy, blocked = ws.blocked, starved = ws.starved;
	if (!n)
		return 0;
	uint64_t tot = busy + blocked + starved;
	char a[32], who[96];
	fmt_s(a, sizeof(a), busy);
	if (gens > 1) /* re-created: the average is over the workers at a time */
		snprintf(who, sizeof(who), "%zu processes over %zu epochs, %zu at a time", n, gens,
			 at_once);
	else
		snprintf(who, sizeof(who), "%zu process%s", n, n == 1 ? "" : "es");
	if (w->offcpu)
		fprintf(w->out,
			"  DataLoader workers (%s): busy %.1f%% (%s on-CPU), blocked %.1f%%, "
			"starved %.1f%% (runnable, waiting for a CPU)\n",
			who, pct(busy, tot), a, pct(blocked, tot), pct(starved, tot));
	else
		fprintf(w->out,
			"  DataLoader workers (%s): %s on-CPU, %.0f%% busy on average "
			"(on-CPU only)\n",
			who, a, pct(busy, (uint64_t)p->duration_nanos * (gens > 1 ? at_once : n)));
	return 0;
}

/* ---- verdict ------------------------------------------------------------------ */

static const char *const remedy[GS_NWALL_CATS] = {
	[GS_WALL_COMPUTE] =
	    "CPU-bound: it computes (Python, op dispatch, host math); profile the top "
	    "functions above, or move work to the GPU",
	[GS_WALL_INPUT] =
	    "input-bound: it waits for DataLoader batches; raise num_workers, set "
	    "pin_memory=True and persistent_workers=True, make __getitem__/collate_fn cheaper",
	[GS_WALL_CUDA_SYNC] =
	    "GPU-sync-bound: it waits for the GPU in synchronize calls; make fewer host "
	    "syncs (.item(), .cpu(), printing a loss every step, torch.cuda.synchronize), "
	    "or the GPU itself is the bottleneck (see the GPU section)",
	[GS_WALL_COLLECTIVE] =
	    "collective-bound: it waits in torch.distributed collectives (allreduce, "
	    "barrier); a slower rank (straggler) or the interconnect holds it back; compare "
	    "the ranks, overlap communication with compute",
	[GS_WALL_GIL] =
	    "GIL-bound: it waits for the GIL held by other threads of the process; move that "
	    "work to processes (DataLoader workers) or native code",
	[GS_WALL_STARVED] =
	    "CPU-starved: it is runnable but waits for a CPU (not blocked); the machine "
	    "runs more busy threads than it has cores: use fewer threads/processes than "
	    "cores (torch.set_num_threads, OMP_NUM_THREADS, num_workers) or more cores",
	[GS_WALL_SLEEP] =
	    "mostly sleeping: it sits in time.sleep/nanosleep on purpose (a rate limit, a "
	    "polling loop)",
	[GS_WALL_OTHER_BLOCKED] =
	    "blocked in other waits (I/O, locks, queues, select); see its top stack",
};

/* Threads of process pid with thread_role intra_op_pool (torch's intra-op
 * pool: torch.set_num_threads above 1), counted by tid up to 64. */
static unsigned intra_op_threads(const struct gs_profile *p, uint32_t pid)
{
	uint32_t seen[64];
	unsigned n = 0;
	int64_t role = gs_profile_find_str(p, "intra_op_pool");

	for (size_t i = 0; role >= 0 && i < p->n_samples && n < 64; i++) {
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, &p->samples[i]);
		unsigned k = 0;

		if (sc->pid != pid || sc->str_labels[GS_SL_THREAD_ROLE] != (gs_str)role)
			continue;
		while (k < n && seen[k] != sc->tid)
			k++;
		if (k == n)
			seen[n++] = sc->tid;
	}
	return n;
}

/* What to cut when the job oversubscribes its cores: only settings the
 * job has not already made (no intra-op pool: torch.set_num_threads is
 * already 1, so naming it would be no advice). */
static const char *fewer_threads_advice(const struct wall_ctx *w, const struct who *m,
					const struct gs_wall_split *x, char *buf, size_t len)
{
	unsigned intra = intra_op_threads(w->p, m->pid);
	bool input = pct(x->ns[GS_WALL_INPUT], x->total_ns) >= 10.0;
	size_t nw = 0;

	for (size_t i = 0; i < w->n_workers; i++)
		nw += worker_of(w, i, m->pid, w->n_mains);
	if (intra)
		snprintf(buf, len,
			 "use fewer threads than cores (torch.set_num_threads: %u now, "
			 "OMP_NUM_THREADS)%s or more cores%s",
			 intra + 1, input || !nw ? "" : ", fewer DataLoader workers",
			 input ? "; keep the DataLoader workers: the loop also waits for input"
			       : "");
	else if (nw && !input)
		snprintf(buf, len,
			 "use fewer threads/processes than cores: fewer DataLoader workers "
			 "(num_workers: %zu seen; the main process already computes on one "
			 "thread) or more cores",
			 nw);
	else
		snprintf(buf, len,
			 "use fewer threads/processes than cores (the main process already "
			 "computes on one thread: torch.set_num_threads is no help) or more "
			 "cores%s",
			 input ? "; keep the DataLoader workers: the loop also waits for input"
			       : "");
	return buf;
}

/* A job that uses CUDA: GPU samples, a GPU agent armed in one of its
 * processes, or host syncs with the GPU. */
static bool is_cuda_job(const struct wall_ctx *w, const struct gs_wall_split *x)
{
	const struct gs_profile *p = w->p;

	if (x->ns[GS_WALL_CUDA_SYNC])
		return true;
	for (uint32_t i = 0; i < p->n_processes; i++)
		if (p->processes[i].gpu)
			return true;
	for (size_t i = 0; i < p->n_samples; i++)
		if (!is_cpu(p, &p->samples[i]))
			return true;
	return false;
}

/* "SyntheticImages.decode (slow_input.py:26)": the workers' hot function
 * at its busiest line. */
static void hot_code(const struct gs_profile *p, const struct worker_stats *ws, char *buf,
		     size_t len)
{
	const struct gs_function *f = gs_profile_function(p, ws->hot_fn);
	const char *file = gs_profile_str(p, f->file), *base = strrchr(file, '/');

	snprintf(buf, len, "%s (%s:%lld)", gs_profile_str(p, f->name), base ? base + 1 : file,
		 (long long)ws->hot_line);
}

/* The input-bound verdict from the evidence: what the workers did (busy,
 * blocked, starved), where their CPU went, the cores left free; advice
 * that fits it (no more workers when they wait for a CPU; pin_memory only
 * for a CUDA job; persistent_workers only when they are re-created). */
static void print_input_advice(struct wall_ctx *w, const struct who *m,
			       const struct gs_wall_split *x, const char *a)
{
	const struct machine *mc = &w->mach;
	double free_cores = mc->known ? (double)mc->n_cpus - mc->demand - mc->outside : -1;
	struct worker_stats ws;
	char hot[300] = "", cheaper[340];
	bool cuda = is_cuda_job(w, x);

	fprintf(w->out,
		"%s %.0f%% of the main thread's wall time (%s): input-bound: it waits for "
		"DataLoader batches",
		gs_wall_cat_name[GS_WALL_INPUT], pct(x->ns[GS_WALL_INPUT], x->total_ns), a);
	if (worker_stats(w, m->pid, w->n_mains, &ws) || !ws.n) {
		fprintf(w->out,
			" (no DataLoader worker process seen: with num_workers=0 the main thread "
			"makes every batch itself); ");
		if (free_cores >= 1.0)
			fprintf(w->out, "set num_workers (%.1f cores are free), ", free_cores);
		fprintf(w->out, "make __getitem__/collate_fn cheaper%s",
			cuda ? ", set pin_memory=True" : "");
		return;
	}
	uint64_t tot = ws.busy + ws.blocked + ws.starved;
	fprintf(w->out,
		"; its %zu DataLoader worker process%s: busy %.0f%%, blocked %.0f%%, starved "
		"%.0f%% (waiting for a CPU)",
		ws.n, ws.n == 1 ? "" : "es", pct(ws.busy, tot), pct(ws.blocked, tot),
		pct(ws.starved, tot));
	if (ws.hot_fn && ws.cpu_ns) {
		hot_code(w->p, &ws, hot, sizeof(hot));
		fprintf(w->out, "; their CPU goes to %s (%.0f%%)", hot, pct(ws.hot_ns, ws.cpu_ns));
		snprintf(cheaper, sizeof(cheaper), "make %s cheaper",
			 gs_profile_str(w->p, gs_profile_function(w->p, ws.hot_fn)->name));
	} else {
		snprintf(cheaper, sizeof(cheaper), "make __getitem__/collate_fn cheaper");
	}
	fprintf(w->out, "; ");
	if (4 * ws.starved >= tot && free_cores < 1.0)
		fprintf(w->out,
			"more workers will not help: they wait for a CPU; %s or give the "
			"job more cores",
			cheaper);
	else if (2 * ws.busy >= tot && free_cores >= 0 && free_cores < 1.0)
		fprintf(w->out, "no core is free for more workers: %s", cheaper);
	else if (2 * ws.busy >= tot && free_cores >= 1.0)
		fprintf(w->out, "raise num_workers (%.1f cores are free), %s", free_cores, cheaper);
	else if (2 * ws.busy >= tot)
		fprintf(w->out, "raise num_workers if cores are free, %s", cheaper);
	else
		fprintf(w->out,
			"they are mostly blocked (reading files, queues): more workers overlap "
			"that wait: raise num_workers; %s",
			cheaper);
	if (ws.gens > 1)
		fprintf(w->out, "; set persistent_workers=True (re-created %zu times)", ws.gens);
	if (cuda)
		fprintf(w->out, "; set pin_memory=True");
}

static void print_verdict(struct wall_ctx *w, const struct who *m, const struct gs_wall_split *x,
			  bool label)
{
	char name[128], lead[160], a[32], advice[300];
	if (x->total_ns < GS_WALL_SHOWN_NS)
		return; /* its split said there is nothing to conclude */
	who_name(w, m, name, sizeof(name));
	snprintf(lead, sizeof(lead), label ? "Verdict (%s):" : "Verdict:", name);
	fprintf(w->out, w->color ? "\n\033[1m%s\033[0m " : "\n%s ", lead);
	if (w->offcpu && !x->python_ns && is_python_comm(w, m)) {
		/* Input, sync and collective waits are told by their Python
		 * frames: without them every wait reads as "other blocking". */
		fprintf(w->out,
			"no Python frames from this Python process (see the notes for why): "
			"the split above classifies native frames only and cannot tell input "
			"wait, CUDA sync or collective waits from other blocking; no verdict.\n");
		return;
	}
	int best = 0, second = -1;
	for (int c = 1; c < GS_NWALL_CATS; c++)
		if (x->ns[c] > x->ns[best])
			best = c;
	for (int c = 0; c < GS_NWALL_CATS; c++)
		if (c != best && x->ns[c] && (second < 0 || x->ns[c] > x->ns[second]))
			second = c;
	fmt_s(a, sizeof(a), x->ns[best]);
	if (!w->offcpu && w->off_rec == 1)
		fprintf(w->out,
			"on-CPU only (no off-CPU time was seen, waits do not show; profile a "
			"longer run for a wall-clock verdict): of its on-CPU time %.0f%% (%s) is "
			"%s.\n",
			pct(x->ns[best], x->total_ns), a, gs_wall_cat_name[best]);
	else if (!w->offcpu)
		fprintf(w->out,
			"on-CPU only (no off-CPU data, waits do not show; run without --no-offcpu "
			"for a wall-clock verdict): of its on-CPU time %.0f%% (%s) is %s.\n",
			pct(x->ns[best], x->total_ns), a, gs_wall_cat_name[best]);
	else if (best == GS_WALL_STARVED && starved_by_others(&w->mach))
		fprintf(
		    w->out,
		    "%s %.0f%% of the main thread's wall time (%s): CPU-starved by other "
		    "processes on this machine: they took %.2f of its %u cores (%s) while the "
		    "job ran %u busy thread%s; fewer threads in the job would not help: give it "
		    "cores of its own (or lower the others' priority)",
		    gs_wall_cat_name[best], pct(x->ns[best], x->total_ns), a, w->mach.outside,
		    w->mach.n_cpus, w->mach.top, w->mach.busy_thr,
		    w->mach.busy_thr == 1 ? "" : "s");
	else if (best == GS_WALL_STARVED && oversubscribed(&w->mach))
		fprintf(w->out,
			"%s %.0f%% of the main thread's wall time (%s): CPU-starved: the job "
			"oversubscribes its cores: %u busy threads wanted %.1f cores of %u (other "
			"processes took %.2f); %s",
			gs_wall_cat_name[best], pct(x->ns[best], x->total_ns), a, w->mach.busy_thr,
			w->mach.demand, w->mach.n_cpus, w->mach.outside,
			fewer_threads_advice(w, m, x, advice, sizeof(advice)));
	else if (best == GS_WALL_INPUT && w->offcpu)
		print_input_advice(w, m, x, a);
	else
		fprintf(w->out, "%s %.0f%% of the main thread's wall time (%s): %s",
			gs_wall_cat_name[best], pct(x->ns[best], x->total_ns), a, remedy[best]);
	if (w->offcpu)
		fprintf(w->out, ".\n");
	if (w->offcpu && second >= 0 && pct(x->ns[second], x->total_ns) >= 10.0) {
		char by[600] = "";

		if (second == GS_WALL_STARVED)
			cores_taken_by(&w->mach, by, sizeof(by));
		fprintf(w->out, "  Next: %s %.0f%%%s%s.\n", gs_wall_cat_name[second],
			pct(x->ns[second], x->total_ns), by[0] ? ": " : "", by);
	}
}

int gs_report_wall(const struct gs_profile *p, FILE *out, bool color, const char *gpu_line)
{
	struct wall_ctx w = { .p = p,
			      .out = out,
			      .color = color,
			      .offcpu = has_offcpu(p),
			      .off_rec = offcpu_recording(p) };
	struct mains m = { 0 };
	struct gs_wall_split *x = NULL;
	int rc = find_workers(&w);
	if (!rc)
		rc = machine_of(p, &w.mach);
	if (!rc)
		rc = find_mains(&w, &m);
	if (!rc && !(x = calloc(m.n + 1, sizeof(*x))))
		rc = -ENOMEM;
	if (rc)
		goto out;
	unsigned n = (unsigned)m.n;
	w.n_mains = n;
	fprintf(out, color ? "\n\033[1m%s\033[0m\n" : "\n%s\n", "Where the time goes");
	for (unsigned i = 0; i < n && !rc; i++) {
		struct thread_key k = { m.v[i].pid, m.v[i].pid };
		rc = gs_wall_split(p, keep_thread, &k, &x[i]);
		if (!rc) {
			print_split(&w, &m.v[i], &x[i]);
			rc = print_workers(&w, m.v[i].pid, n);
		}
	}
	if (!n)
		fprintf(out, "  no main thread found\n");
	if (gpu_line)
		fprintf(out, "  %s\n", gpu_line);
	for (unsigned i = 0; i < n && !rc; i++)
		print_verdict(&w, &m.v[i], &x[i], n > 1);
	if (!n)
		fprintf(out, color ? "\n\033[1mVerdict:\033[0m %s\n" : "\nVerdict: %s\n",
			"No CPU samples from the main thread: nothing to conclude about it.");
out:
	free(m.v);
	gs_hmap_free(&m.of_pid);
	free(w.workers);
	gs_hmap_free(&w.worker_of_pid);
	free(x);
	return rc;
}

void gs_report_short_stack(const struct gs_profile *p, uint32_t st, int cat, char *buf, size_t len)
{
	short_stack(p, st, cat, buf, len);
}
