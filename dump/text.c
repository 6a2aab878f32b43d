/* SPDX-License-Identifier: MIT */
/*
 * gs_dump_print (dump.h): a dump as text.  One line per thread at a glance,
 * then processes by rank, then pid;
 * in each, the threads whose (stack, state, role) are the same folded into
 * one entry with their count and tids (py-spy's --native dump folds the
 * same way); stacks leaf first.  Above them, for a distributed job, which
 * collective each rank's main thread waits in and which ranks are
 * elsewhere: the straggler of a hang.  Collectives are told by the wall
 * classifier's table (output/output.h gs_wall_frame_cat), so the dump and
 * the report agree on what a collective is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump.h"
#include "output/output.h"
#include "util/vec.h"

static const char *esc(const char *s, char *buf, size_t len)
{
	gs_term_escape(s ? s : "", buf, len);
	return buf;
}

static const char *str(const struct gs_profile *p, gs_str s)
{
	return gs_profile_str(p, s);
}

static int64_t rank_of(const struct gs_sample_ctx *x)
{
	return (x->num_set & (1u << GS_NL_RANK)) ? x->num_labels[GS_NL_RANK] : -1;
}

/* Samples in print order: rank (unranked last), pid, main thread first,
 * then (stack, state, role) groups by their first tid. */
static int by_order(const void *a, const void *b, void *arg)
{
	const struct gs_profile *p = arg;
	const struct gs_sample *sa = &p->samples[*(const uint32_t *)a];
	const struct gs_sample *sb = &p->samples[*(const uint32_t *)b];
	const struct gs_sample_ctx *xa = gs_profile_ctx(p, sa), *xb = gs_profile_ctx(p, sb);
	uint64_t ra = (uint64_t)rank_of(xa), rb = (uint64_t)rank_of(xb); /* -1 sorts last */

	if (ra != rb)
		return ra < rb ? -1 : 1;
	if (xa->pid != xb->pid)
		return xa->pid < xb->pid ? -1 : 1;
	if ((xa->tid == xa->pid) != (xb->tid == xb->pid))
		return xa->tid == xa->pid ? -1 : 1;
	return xa->tid < xb->tid ? -1 : xa->tid > xb->tid;
}

/* The function of a location's outermost line (its own, not an inlined
 * callee's), 0 when it has none. */
static uint32_t loc_fn(const struct gs_profile *p, uint32_t loc, uint32_t line)
{
	const struct gs_location *l = gs_profile_location(p, loc);

	return line < l->n_lines ? p->lines[l->first_line + line].function : 0;
}

static void print_frame(const struct gs_profile *p, uint32_t loc, FILE *out)
{
	const struct gs_location *l = gs_profile_location(p, loc);
	char b1[512], b2[512];

	for (uint32_t i = 0; i < l->n_lines; i++) {
		const struct gs_line *ln = &p->lines[l->first_line + i];
		const struct gs_function *f = gs_profile_function(p, ln->function);

		fprintf(out, "      %s", esc(str(p, f->name), b1, sizeof(b1)));
		if (f->file && ln->line > 0)
			fprintf(out, " (%s:%lld)", esc(str(p, f->file), b2, sizeof(b2)),
				(long long)ln->line);
		else if (f->file)
			fprintf(out, " (%s)", esc(str(p, f->file), b2, sizeof(b2)));
		if (l->kind == GS_FRAME_KERNEL)
			fputs(" [kernel]", out);
		if (i + 1 < l->n_lines)
			fputs(" [inlined]", out);
		fputc('\n', out);
	}
	if (!l->n_lines)
		fprintf(out, "      0x%llx\n", (unsigned long long)l->address);
}

/* Scheduler functions a sleeping task's stack starts with: the wait is the
 * first kernel frame below them. */
static bool is_sched_fn(const char *n)
{
	static const char *const pre[] = { "__switch_to", "__schedule", "schedule",
					   "preempt_schedule", "io_schedule" };

	for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
		if (!strncmp(n, pre[i], strlen(pre[i])))
			return true;
	return false;
}

/* The kernel function the thread waits in, NULL without kernel frames. */
static const char *kernel_wait(const struct gs_profile *p, uint32_t stack)
{
	const struct gs_stack *s = &p->stacks[stack];

	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t loc = p->stack_locs[s->first + i], fn;

		if (gs_profile_location(p, loc)->kind != GS_FRAME_KERNEL)
			return NULL;
		fn = loc_fn(p, loc, gs_profile_location(p, loc)->n_lines - 1);
		if (fn && !is_sched_fn(str(p, gs_profile_function(p, fn)->name)))
			return str(p, gs_profile_function(p, fn)->name);
	}
	return NULL;
}

static bool same_group(const struct gs_profile *p, const struct gs_sample *a,
		       const struct gs_sample *b)
{
	const struct gs_sample_ctx *xa = gs_profile_ctx(p, a), *xb = gs_profile_ctx(p, b);

	return a->stack == b->stack && xa->pid == xb->pid &&
	       xa->str_labels[GS_SL_THREAD_STATE] == xb->str_labels[GS_SL_THREAD_STATE] &&
	       xa->str_labels[GS_SL_THREAD_ROLE] == xb->str_labels[GS_SL_THREAD_ROLE] &&
	       xa->tid != xa->pid && xb->tid != xb->pid;
}

static void print_group(const struct gs_profile *p, const uint32_t *idx, size_t n, FILE *out)
{
	const struct gs_sample *s = &p->samples[idx[0]];
	const struct gs_sample_ctx *x = gs_profile_ctx(p, s);
	const char *wait = kernel_wait(p, s->stack);
	const char *state = str(p, x->str_labels[GS_SL_THREAD_STATE]);
	char b1[128], b2[128];

	if (n == 1)
		fprintf(out, "  thread %u", x->tid);
	else
		fprintf(out, "  %zu threads", n);
	fprintf(out, " \"%s\" %s, %s", esc(str(p, x->thread_name), b1, sizeof(b1)),
		x->str_labels[GS_SL_THREAD_ROLE] ? str(p, x->str_labels[GS_SL_THREAD_ROLE])
						 : "other",
		state[0] ? state : "unknown");
	if (wait && strcmp(state, "running"))
		fprintf(out, " in %s", esc(wait, b2, sizeof(b2)));
	fputc('\n', out);
	if (n > 1) {
		fputs("    tids", out);
		for (size_t i = 0; i < n && i < 32; i++)
			fprintf(out, " %u", gs_profile_ctx(p, &p->samples[idx[i]])->tid);
		fputs(n > 32 ? " ...\n" : "\n", out);
	}
	const struct gs_stack *st = &p->stacks[s->stack];

	if (!st->n)
		fputs("      (no stack)\n", out);
	for (uint32_t i = 0; i < st->n; i++)
		print_frame(p, p->stack_locs[st->first + i], out);
}

static void print_process(const struct gs_profile *p, const struct gs_sample_ctx *x, FILE *out)
{
	char b[64];
	int64_t r = rank_of(x);

	fprintf(out, "\nprocess %u \"%s\" %s", x->pid, esc(str(p, x->thread_name), b, sizeof(b)),
		str(p, x->process_role));
	if (r >= 0)
		fprintf(out, ", rank %lld", (long long)r);
	if (x->num_set & (1u << GS_NL_LOCAL_RANK))
		fprintf(out, " (local rank %lld)", (long long)x->num_labels[GS_NL_LOCAL_RANK]);
	fputc('\n', out);
}

/* ---- the cross-rank summary ------------------------------------------------ */

/* Where a rank's main thread is: the root-most collective frame (the API
 * call: all_reduce, barrier), else the leaf-most Python frame, else the
 * leaf-most user frame. */
struct where {
	int64_t rank;
	bool collective;
	uint32_t loc, line; /* the frame that names it (line: index in its inline chain) */
	int cat;            /* wall category of the stack, -1 unknown */
};

static struct where where_of(const struct gs_profile *p, const struct gs_sample *s)
{
	const struct gs_stack *st = &p->stacks[s->stack];
	struct where w = { .rank = rank_of(gs_profile_ctx(p, s)), .cat = -1 };
	uint32_t py = 0, user = 0;

	for (uint32_t i = 0; i < st->n; i++) {
		uint32_t loc = p->stack_locs[st->first + i];
		const struct gs_location *l = gs_profile_location(p, loc);

		for (uint32_t k = 0; k < l->n_lines; k++) {
			uint32_t fn = p->lines[l->first_line + k].function;

			if (gs_wall_frame_cat(p, fn, l->kind) == GS_WALL_COLLECTIVE &&
			    (l->kind == GS_FRAME_PYTHON || !w.collective || !w.loc ||
			     gs_profile_location(p, w.loc)->kind != GS_FRAME_PYTHON)) {
				w.collective = true;
				w.loc = loc;
				w.line = k;
			}
		}
		if (!py && l->kind == GS_FRAME_PYTHON)
			py = loc;
		if (!user && l->kind != GS_FRAME_KERNEL)
			user = loc;
	}
	if (!w.collective) {
		w.loc = py ? py : user;
		w.line = 0;
	}
	w.cat = gs_wall_classify(p, s);
	return w;
}

static void where_name(const struct gs_profile *p, const struct where *w, char *out, size_t len)
{
	char b1[256], b2[256];

	if (!w->loc || !gs_profile_location(p, w->loc)->n_lines) {
		snprintf(out, len, "no user stack");
		return;
	}
	const struct gs_location *l = gs_profile_location(p, w->loc);
	const struct gs_line *ln = &p->lines[l->first_line + w->line];
	const struct gs_function *f = gs_profile_function(p, ln->function);

	if (f->file && ln->line > 0)
		snprintf(out, len, "%s (%s:%lld)", esc(str(p, f->name), b1, sizeof(b1)),
			 esc(str(p, f->file), b2, sizeof(b2)), (long long)ln->line);
	else
		snprintf(out, len, "%s", esc(str(p, f->name), b1, sizeof(b1)));
}

static void print_summary(const struct gs_profile *p, const uint32_t *idx, size_t n, FILE *out)
{
	struct where *w = NULL;
	size_t nw = 0, cap = 0, in_coll = 0;
	char name[600];

	for (size_t i = 0; i < n; i++) {
		const struct gs_sample *s = &p->samples[idx[i]];
		const struct gs_sample_ctx *x = gs_profile_ctx(p, s);

		if (rank_of(x) < 0 || x->tid != x->pid || !x->process_role ||
		    strcmp(str(p, x->process_role), "main"))
			continue;
		if (GS_PUSH(w, nw, cap, where_of(p, s)))
			break;
		in_coll += w[nw - 1].collective;
	}
	if (!nw) {
		free(w);
		return;
	}
	fprintf(out, "\nranks: %zu main threads, %zu in a collective, %zu not\n", nw, in_coll,
		nw - in_coll);
	for (size_t i = 0; i < nw; i++) {
		where_name(p, &w[i], name, sizeof(name));
		fprintf(out, "  rank %lld: %s %s", (long long)w[i].rank,
			w[i].collective ? "in collective" : "NOT in a collective, in", name);
		if (!w[i].collective && w[i].cat >= 0)
			fprintf(out, " [%s]", gs_wall_cat_name[w[i].cat]);
		fputc('\n', out);
	}
	if (in_coll && in_coll < nw) {
		fputs("  => not in the collective the others wait in:", out);
		for (size_t i = 0; i < nw; i++)
			if (!w[i].collective)
				fprintf(out, " rank %lld", (long long)w[i].rank);
		fputc('\n', out);
	}
	free(w);
}

/* ---- threads at a glance ----------------------------------------------------- */

/* What a blocked thread waits on, in a word: the wall classifier's
 * category where it has one, else the Python library it waits in, else
 * the kernel's wait. */
static const char *wait_kind(const struct gs_profile *p, const struct gs_sample *s,
			     const char *pylib)
{
	static const struct {
		const char *needle, *kind;
	} libs[] = { { "/queue.py", "queue" },
		     { "/queues.py", "queue" },
		     { "/threading.py", "lock" },
		     { "/connection.py", "I/O" },
		     { "/socket.py", "I/O" },
		     { "/selectors.py", "I/O" },
		     { "/subprocess.py", "child process" } },
	  kern[] = { { "futex", "lock" },       { "pipe", "I/O" },
		     { "sock", "I/O" },         { "unix_stream", "I/O" },
		     { "tcp", "I/O" },          { "poll", "I/O" },
		     { "select", "I/O" },       { "do_wait", "child process" },
		     { "sigsuspend", "signal" } };
	const char *kw = kernel_wait(p, s->stack);

	switch (gs_wall_classify(p, s)) {
	case GS_WALL_INPUT:
		return "DataLoader";
	case GS_WALL_CUDA_SYNC:
		return "CUDA sync";
	case GS_WALL_COLLECTIVE:
		return "collective";
	case GS_WALL_GIL:
		return "GIL";
	case GS_WALL_SLEEP:
		return "sleep";
	}
	for (size_t i = 0; pylib && i < sizeof(libs) / sizeof(libs[0]); i++)
		if (strstr(pylib, libs[i].needle))
			return libs[i].kind;
	for (size_t i = 0; kw && i < sizeof(kern) / sizeof(kern[0]); i++)
		if (strstr(kw, kern[i].needle))
			return kern[i].kind;
	return kw ? kw : "-";
}

/* One line per group of folded threads: who, state, what it waits on and
 * the innermost frame of the job's own Python code. */
static void print_glance(const struct gs_profile *p, const uint32_t *grp, const size_t *gstart,
			 size_t ngroups, FILE *out)
{
	char b1[64], b2[128], tids[32], where[600];

	fprintf(out,
		"\nthreads at a glance (stacks below):\n  %-7s %-11s %-16s %-18s %-9s %-13s %s\n",
		"pid", "tid", "name", "thread role", "state", "waits on", "innermost Python frame");
	for (size_t g = 0; g < ngroups; g++) {
		const struct gs_sample *s = &p->samples[grp[gstart[g]]];
		const struct gs_sample_ctx *x = gs_profile_ctx(p, s);
		size_t n = gstart[g + 1] - gstart[g];
		const char *state = str(p, x->str_labels[GS_SL_THREAD_STATE]), *lib;
		struct where w = { .loc = gs_stack_user_python(p, s->stack, &lib) };

		if (n == 1)
			snprintf(tids, sizeof(tids), "%u", x->tid);
		else
			snprintf(tids, sizeof(tids), "%u +%zu", x->tid, n - 1);
		if (w.loc)
			where_name(p, &w, where, sizeof(where));
		else
			snprintf(where, sizeof(where), "-");
		fprintf(out, "  %-7u %-11s %-16s %-18s %-9s %-13s %s\n", x->pid, tids,
			esc(str(p, x->thread_name), b1, sizeof(b1)),
			x->str_labels[GS_SL_THREAD_ROLE] ? str(p, x->str_labels[GS_SL_THREAD_ROLE])
							 : "other",
			state[0] ? state : "unknown",
			strcmp(state, "blocked") ? "-" : esc(wait_kind(p, s, lib), b2, sizeof(b2)),
			where);
	}
}

int gs_dump_print(const struct gs_profile *p, const struct gs_dump_stats *st, FILE *out)
{
	uint32_t *idx = malloc((p->n_samples ? p->n_samples : 1) * sizeof(*idx));
	uint32_t last_pid = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, p->n_samples, sizeof(*idx), by_order, (void *)p);
	fprintf(out,
		"gpusample dump: %u process%s, %u thread%s in %.3f s (registers from the %s)\n",
		st->processes, st->processes == 1 ? "" : "es", st->threads,
		st->threads == 1 ? "" : "s", (double)st->elapsed_ns / 1e9, st->source);
	if (st->dropped)
		fprintf(out, "%u threads past the bound of %u not shown\n", st->dropped,
			GS_DUMP_MAX_THREADS);
	if (st->on_cpu)
		fprintf(out, "%u thread%s on a CPU: kernel stack and state only\n", st->on_cpu,
			st->on_cpu == 1 ? " was" : "s were");
	print_summary(p, idx, p->n_samples, out);
	size_t one = p->n_samples ? p->n_samples : 1, ngroups = 0;
	bool *done = calloc(one, 1);
	uint32_t *grp = malloc(one * sizeof(*grp));
	size_t *gstart = malloc((one + 1) * sizeof(*gstart)), ng = 0;

	if (!done || !grp || !gstart) {
		free(done);
		free(grp);
		free(gstart);
		free(idx);
		return -ENOMEM;
	}
	/* groups in print order: grp[gstart[g] .. gstart[g + 1]) */
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[idx[i]];

		if (done[i])
			continue;
		gstart[ngroups++] = ng;
		for (size_t k = i; k < p->n_samples; k++) {
			const struct gs_sample *o = &p->samples[idx[k]];

			if (gs_profile_ctx(p, o)->pid != gs_profile_ctx(p, s)->pid)
				break;
			if (!done[k] && (k == i || same_group(p, s, o))) {
				done[k] = true;
				grp[ng++] = idx[k];
			}
		}
	}
	gstart[ngroups] = ng;
	if (ngroups)
		print_glance(p, grp, gstart, ngroups, out);
	for (size_t g = 0; g < ngroups; g++) {
		const struct gs_sample_ctx *x = gs_profile_ctx(p, &p->samples[grp[gstart[g]]]);

		if (x->pid != last_pid) {
			print_process(p, x, out);
			last_pid = x->pid;
		}
		print_group(p, grp + gstart[g], gstart[g + 1] - gstart[g], out);
	}
	free(gstart);
	free(done);
	free(grp);
	free(idx);
	return 0;
}
