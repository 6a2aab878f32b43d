// SPDX-License-Identifier: MIT
/*
 * Terminal report: header, top functions (self/total), processes and
 * threads, notes, GPU kernels (stall mix, hottest lines, launching Python
 * line), and "where the time goes": wall-clock splits and verdicts
 * (output/report_wall.c, categories from output/walltime.c).  This file is
 * the text; the numbers come from output/report_analysis.c (report_int.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "output/report_int.h"
#include "util/hashmap.h"
#include "util/vec.h"

/* ---- small helpers -------------------------------------------------------- */

struct rpt {
	const struct gs_profile *p;
	const struct gs_rpt *a; /* the numbers */
	FILE *out;
	unsigned top;
	bool color;
	bool dump;         /* a `gpusample dump` profile: one stack per thread, no time */
	int64_t cpu_total; /* CPU samples (a dump: threads) */
};

static void heading(struct rpt *r, const char *s)
{
	fprintf(r->out, r->color ? "\n\033[1m%s\033[0m\n" : "\n%s\n", s);
}

static double pct(int64_t a, int64_t b)
{
	return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

static void fmt_ns(char *buf, size_t len, int64_t ns)
{
	if (ns >= 10000000000LL)
		snprintf(buf, len, "%.1f s", (double)ns / 1e9);
	else if (ns >= 1000000000LL)
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	else
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
}

/* Python "qualname (file:line)" at the row's hottest line for the table
 * (its def line when none is known), with that line's share of the
 * column's samples when other lines have some: "decode (data.py:17, 83%)". */
static void py_display(struct rpt *r, const struct gs_function *f, const struct gs_rpt_fn *row,
		       bool total, char *buf, size_t len)
{
	int64_t line = total ? row->total_line : row->self_line;
	int64_t n = total ? row->total_line_n : row->self_line_n,
		all = total ? row->total : row->self;
	char share[16] = "";

	if (n > 0 && n < all)
		snprintf(share, sizeof(share), ", %.0f%%", pct(n, all));
	snprintf(buf, len, "%s (%s:%" PRId64 "%s)", f->name ? gs_profile_str(r->p, f->name) : "?",
		 gs_short_path(gs_profile_str(r->p, f->file)), line > 0 ? line : f->start_line,
		 share);
}

/* Function display name: Python "qualname (file:line)" (py_display; row
 * NULL: the def line), else short C++; unnamed code under a caller (row
 * unnamed, struct gs_rpt_fn) names the library it is in: "caller >
 * libfoo.so.3 [no symbols]". */
static const char *fn_display(struct rpt *r, uint32_t id, const struct gs_rpt_fn *row, bool total,
			      char *buf, size_t len)
{
	uint32_t unnamed = row ? row->unnamed : 0;

	const struct gs_profile *p = r->p;
	if (id > p->n_functions + p->n_locations) {
		char caller[256], more[128];

		if (unnamed && unnamed != GS_RPT_LIBS) {
			const char *n = gs_profile_str(p, gs_profile_function(p, unnamed)->name);
			int lib = (int)(strstr(n, "+0x") - n);

			snprintf(more, sizeof(more), " > %.*s [no symbols]", lib > 60 ? 60 : lib,
				 n);
		} else {
			snprintf(more, sizeof(more), " > [libraries without symbols]");
		}
		fn_display(r, id - p->n_functions - p->n_locations, NULL, false, caller,
			   sizeof(caller));
		if (strlen(caller) + strlen(more) > 90)
			strcpy(caller + 90 - strlen(more) - 3, "...");
		snprintf(buf, len, "%s%s", caller, more);
		return buf;
	}
	if (id > p->n_functions) { /* address-only location */
		struct gs_dframe df = { .type = GS_DF_ADDR, .loc = id - p->n_functions };
		return gs_dframe_name(p, &df, buf, len);
	}
	const struct gs_function *f = gs_profile_function(p, id);
	const char *name = f->name ? gs_profile_str(p, f->name) : "[unknown]";
	char tmp[512];
	if (r->a->fn_kind[id] == GS_FRAME_PYTHON && f->file && row)
		py_display(r, f, row, total, buf, len);
	else if (r->a->fn_kind[id] == GS_FRAME_PYTHON && f->file)
		snprintf(buf, len, "%s (%s:%" PRId64 ")", name,
			 gs_short_path(gs_profile_str(p, f->file)), f->start_line);
	else if (r->a->fn_kind[id] == GS_FRAME_KERNEL)
		snprintf(buf, len, "%s [kernel]", name);
	else
		snprintf(buf, len, "%s", gs_short_cxx_name(name, tmp, sizeof(tmp)));
	if (strlen(buf) > 90)
		strcpy(buf + 87, "...");
	return buf;
}

/* ---- sections --------------------------------------------------------- */

/* The loss counters other than `lost` (which has the line above), when
 * any is not zero: "dropped: py_truncated 12, kstack_errors 3". */
static void dropped(struct rpt *r)
{
	uint64_t v[GS_NCOUNTERS];
	const char *sep = "  dropped: ";
	if (!gs_profile_counters(r->p, v))
		return;
	for (int c = 0; c < GS_NCOUNTERS; c++) {
		if (c == GS_C_lost || !gs_counter_is_loss(c) || !v[c])
			continue;
		fprintf(r->out, "%s%s %" PRIu64, sep, gs_counter_name(c), v[c]);
		sep = ", ";
	}
	if (*sep == ',')
		fputc('\n', r->out);
}

/* The event that sampled the CPUs, from session/session.c's comment ("" when
 * the profile has none: a merged or older file). */
static const char *sample_event(const struct gs_profile *p)
{
	const char *ev = gs_profile_comment(p, "sample event: ");

	return ev ? ev : "";
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Processes among the report's threads (a dump lists no processes). */
static size_t thread_pids(const struct gs_rpt *a)
{
	uint32_t *pid = malloc(sizeof(*pid) * (a->n_threads + 1));
	size_t n = 0;

	if (!pid)
		return 0;
	for (size_t i = 0; i < a->n_threads; i++)
		pid[i] = a->threads[i].pid;
	qsort(pid, a->n_threads, sizeof(*pid), cmp_u32);
	for (size_t i = 0; i < a->n_threads; i++)
		n += !i || pid[i] != pid[i - 1];
	free(pid);
	return n;
}

/* A dump has no time, rate or losses: what it is and what to run instead. */
static void dump_header(struct rpt *r)
{
	size_t np = thread_pids(r->a);

	fprintf(r->out,
		"  a dump: one stack per thread at one moment, %zu thread%s in %zu process%s\n"
		"  (no time: to see where the time goes, sample the job: gpusample -p PID -d 30)\n",
		r->a->n_threads, r->a->n_threads == 1 ? "" : "s", np, np == 1 ? "" : "es");
}

static void header(struct rpt *r, int64_t gpu_total)
{
	const struct gs_profile *p = r->p;
	const char *ev = sample_event(p);
	char d[32];
	fmt_ns(d, sizeof(d), (int64_t)p->duration_nanos);
	fprintf(r->out, r->color ? "\033[1mgpusample report\033[0m\n" : "gpusample report\n");
	if (r->dump) {
		dump_header(r);
		return;
	}
	fprintf(r->out, "  duration %s, %u Hz%s%s, %" PRId64 " CPU samples, %" PRIu64 " lost", d,
		p->frequency_hz, *ev ? " " : "", ev, r->cpu_total, p->lost_samples);
	if (gpu_total)
		fprintf(r->out, ", %" PRId64 " GPU PC samples", gpu_total);
	fprintf(r->out, ", %u process%s\n", p->n_processes, p->n_processes == 1 ? "" : "es");
	if (p->lost_samples && r->cpu_total)
		fprintf(r->out,
			"  note: %.1f%% of CPU samples were lost (ring buffer full); "
			"lower -F or raise the buffer size\n",
			pct((int64_t)p->lost_samples, r->cpu_total + (int64_t)p->lost_samples));
	dropped(r);
}

static void top_functions(struct rpt *r)
{
	char name[256];
	for (int pass = 0; pass < 2 && r->a->n_fns; pass++) {
		const struct gs_rpt_fn *rows = pass ? r->a->by_total : r->a->by_self;
		heading(r, r->dump ? (pass ? "Top functions by threads on whose stack they are"
					   : "Top functions by threads stopped in them")
			   : pass  ? "Top functions by total CPU (self + callees)"
				   : "Top functions by self CPU");
		fprintf(r->out, "  %7s %6s %7s %6s  %s\n", "self", "self%", "total", "total%",
			"function");
		size_t n = pass ? r->a->n_total : r->a->n_fns;

		for (size_t i = 0; i < n && i < r->top; i++) {
			if (!pass && !rows[i].self)
				break;
			fprintf(r->out, "  %7" PRId64 " %5.1f%% %7" PRId64 " %5.1f%%  %s\n",
				rows[i].self, pct(rows[i].self, r->cpu_total), rows[i].total,
				pct(rows[i].total, r->cpu_total),
				fn_display(r, rows[i].fn, &rows[i], pass, name, sizeof(name)));
		}
	}
}

/* A dump's threads by the innermost frame of the job's own Python code,
 * first: the frame tables lead with the kernel's waits (every thread of a
 * hung job sleeps in one). */
struct where_row {
	uint32_t loc;
	int64_t threads;
};

static int by_threads(const void *a, const void *b)
{
	const struct where_row *x = a, *y = b;

	if (x->threads != y->threads)
		return x->threads > y->threads ? -1 : 1;
	return x->loc < y->loc ? -1 : x->loc > y->loc;
}

static int dump_user_frames(struct rpt *r)
{
	const struct gs_profile *p = r->p;
	struct gs_hmap at = { 0 }; /* location -> row index + 1 */
	struct where_row *rows = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		uint32_t loc = gs_stack_user_python(p, p->samples[i].stack, NULL);
		bool added;
		uint64_t *v;

		if (!loc)
			continue;
		if (!(v = gs_hmap_slot(&at, loc, &added)))
			rc = -ENOMEM;
		else if (added && GS_PUSH(rows, n, cap, ((struct where_row){ .loc = loc })))
			rc = -ENOMEM;
		else {
			if (added)
				*v = n;
			rows[*v - 1].threads += p->samples[i].values[GS_V_SAMPLES];
		}
	}
	if (!rc && n) {
		struct gs_dframe f[8];
		char name[256];

		qsort(rows, n, sizeof(*rows), by_threads);
		heading(r, "Threads by their innermost frame in the job's own Python code");
		fprintf(r->out, "  %7s %6s  %s\n", "threads", "%", "frame");
		for (size_t i = 0; i < n && i < r->top; i++) {
			size_t nf = gs_location_dframes(p, rows[i].loc, f, 8);

			fprintf(r->out, "  %7" PRId64 " %5.1f%%  %s\n", rows[i].threads,
				pct(rows[i].threads, r->cpu_total),
				nf ? gs_dframe_name(p, &f[nf - 1], name, sizeof(name)) : "?");
		}
	}
	free(rows);
	gs_hmap_free(&at);
	return rc;
}

static void processes_and_threads(struct rpt *r)
{
	const struct gs_profile *p = r->p;
	const struct gs_rpt_thread *t = r->a->threads;
	size_t n = r->a->n_threads;
	if (r->dump && !p->n_processes)
		goto threads;
	heading(r, "Processes");
	fprintf(r->out, "  %7s %-16s %-11s %8s %6s  %-16s %s\n", "pid", "comm", "role", "samples",
		"cpu%", "python", "GPU");
	unsigned quiet = 0, shown = 0;
	for (uint32_t i = 0; i < p->n_processes; i++) {
		const struct gs_process *pr = &p->processes[i];
		if (gs_find_process(p, pr->pid) != pr)
			continue; /* superseded by a later entry (exec) */
		uint32_t g = r->a->proc_group[i];
		if (g) { /* one row for the group, where its first member was */
			const struct gs_rpt_group *x = &r->a->groups[g - 1];
			if (x->first == i)
				fprintf(
				    r->out,
				    "  %7s %-16s %-11s %8" PRId64 " %5.1f%%  %-16s %s (%u exited "
				    "workers of pid %u)\n",
				    "-", gs_profile_str(p, x->comm),
				    x->role ? gs_profile_str(p, x->role) : "-", x->samples,
				    pct(x->samples, r->cpu_total), "-", "-", x->n_procs, x->ppid);
			continue;
		}
		int64_t c = r->a->proc_cpu[i];
		/* short-lived helpers (shell wrappers, readlink) clutter the table */
		if ((!c && !pr->python && !pr->gpu) || shown >= 4 * r->top) {
			quiet++;
			continue;
		}
		shown++;
		fprintf(r->out, "  %7u %-16s %-11s %8" PRId64 " %5.1f%%  %-16s %s%s", pr->pid,
			gs_profile_str(p, pr->comm), pr->role ? gs_profile_str(p, pr->role) : "-",
			c, pct(c, r->cpu_total), pr->python ? gs_profile_str(p, pr->python) : "-",
			pr->gpu ? gs_profile_str(p, pr->gpu) : "-", pr->exited ? " (exited)" : "");
		/* in a container: the pid its own ps, logs and py-spy show */
		if (pr->ns_pid)
			fprintf(r->out, " (pid %u in its namespace)", pr->ns_pid);
		fputc('\n', r->out);
	}
	if (quiet)
		fprintf(r->out,
			"  ... %u more processes (no CPU samples, or beyond the first %u)\n", quiet,
			4 * r->top);
threads:
	heading(r, "Threads");
	/* a dump: a sample per thread, so no count columns (and no padding) */
	fprintf(r->out, "  %7s %7s %-16s %-*s", "pid", "tid", "thread", r->dump ? 0 : 11, "role");
	fprintf(r->out, r->dump ? "\n" : " %8s %6s\n", "samples", "cpu%");
	for (size_t j = 0; j < n && j < r->top; j++) {
		if (t[j].n_procs) { /* threads of a group of exited workers */
			fprintf(r->out,
				"  %7s %7s %-16s %-11s %8" PRId64
				" %5.1f%%  (%u threads of %u exited "
				"workers of pid %u)\n",
				"-", "-", t[j].name ? gs_profile_str(p, t[j].name) : "?",
				t[j].role ? gs_profile_str(p, t[j].role) : "-", t[j].samples,
				pct(t[j].samples, r->cpu_total), t[j].n_threads, t[j].n_procs,
				t[j].pid);
			continue;
		}
		fprintf(r->out, "  %7u %7u %-16s %-*s", t[j].pid, t[j].tid,
			t[j].name ? gs_profile_str(p, t[j].name) : "?", r->dump ? 0 : 11,
			t[j].role ? gs_profile_str(p, t[j].role) : "-");
		if (r->dump)
			fputc('\n', r->out);
		else
			fprintf(r->out, " %8" PRId64 " %5.1f%%\n", t[j].samples,
				pct(t[j].samples, r->cpu_total));
	}
	if (n > r->top)
		fprintf(r->out, "  ... %zu more threads\n", n - r->top);
}

/* ---- GPU ------------------------------------------------------------------ */

/* "name (file:line)" of a Python location's outermost inlined frame. */
static void py_site_name(const struct gs_profile *p, uint32_t loc, char *buf, size_t len)
{
	struct gs_dframe df[66];
	size_t nd = gs_location_dframes(p, loc, df, 66);

	if (!nd) {
		snprintf(buf, len, "?");
		return;
	}
	gs_dframe_name(p, &df[nd - 1], buf, len);
}

/* One launch site: "launch (app.py:73) <- forward (app.py:86)". */
static void launch_site_name(const struct gs_profile *p, const struct gs_rpt_cnt *l, char *buf,
			     size_t len)
{
	char inner[256], outer[256];

	if (l->b == GS_RPT_LAUNCH_UNKNOWN) {
		snprintf(buf, len, "[unknown launch] (launch never seen; see the notes)");
		return;
	}
	if (!l->a) {
		snprintf(buf, len, "no Python frame (native caller)");
		return;
	}
	py_site_name(p, (uint32_t)l->a, inner, sizeof(inner));
	if (!l->b) {
		snprintf(buf, len, "%s", inner);
		return;
	}
	py_site_name(p, (uint32_t)l->b, outer, sizeof(outer));
	snprintf(buf, len, "%.120s <- %.120s", inner, outer);
}

/* Title, stall reasons over all kernels, and the [unknown launch] share. */
static void gpu_summary(struct rpt *r)
{
	const struct gs_profile *p = r->p;
	const struct gs_rpt *a = r->a;
	const struct gs_rpt_cnt *c = a->cnt;
	char title[160];
	size_t rb, re;

	snprintf(title, sizeof(title), "GPU: %" PRId64 " PC samples (%" PRId64 " not issued)",
		 a->gpu_total, a->gpu_ni);
	heading(r, title);
	gs_rpt_cnt_range(a, GS_RPT_REASON, 0, &rb, &re);
	fprintf(r->out, "  stall reasons:");
	for (size_t i = rb; i < re && i < rb + 6; i++)
		fprintf(r->out, "%s %s %.1f%%", i == rb ? "" : ",",
			c[i].a ? gs_profile_str(p, (gs_str)c[i].a) : "unknown",
			pct(c[i].v, a->gpu_total));
	fprintf(r->out, "\n");
	if (a->gpu_unknown)
		fprintf(
		    r->out,
		    "  %" PRId64 " samples (%.1f%%) are under [unknown launch]: their kernels' "
		    "launches were never seen\n  (launched before gpusample attached, or skipped "
		    "by "
		    "1-in-N launch sampling); attach earlier or start the job under gpusample\n",
		    a->gpu_unknown, pct(a->gpu_unknown, a->gpu_total));
}

/* One kernel's stall mix and hottest lines; k is its GS_RPT_KERNEL entry. */
static void kernel_stalls_lines(struct rpt *r, const struct gs_rpt_cnt *k)
{
	const struct gs_profile *p = r->p;
	const struct gs_rpt_cnt *c = r->a->cnt;
	uint32_t kfn = (uint32_t)k->a;
	size_t b, e;

	gs_rpt_cnt_range(r->a, GS_RPT_REASON, kfn, &b, &e);
	fprintf(r->out, "      stalls:");
	for (size_t i = b; i < e && i < b + 3; i++)
		fprintf(r->out, "%s %s %.0f%%", i == b ? "" : ",",
			c[i].a ? gs_profile_str(p, (gs_str)c[i].a) : "unknown", pct(c[i].v, k->v));
	fprintf(r->out, "\n");
	gs_rpt_cnt_range(r->a, GS_RPT_LINE, kfn, &b, &e);
	if (e == b && kfn)
		fprintf(r->out, "      hottest lines: none (cubin built without -lineinfo: "
				"kernel-level attribution only)\n");
	if (e > b) {
		fprintf(r->out, "      hottest lines:");
		for (size_t i = b; i < e && i < b + 3; i++) {
			const struct gs_function *f = c[i].a
							  ? gs_profile_function(p, (uint32_t)c[i].a)
							  : NULL;
			const char *file = f && f->file ? gs_profile_str(p, f->file) : "?";
			const char *slash = strrchr(file, '/');
			fprintf(r->out, "%s %s:%" PRIu64 " %.0f%%", i == b ? "" : ",",
				slash ? slash + 1 : file, c[i].b, pct(c[i].v, k->v));
		}
		fprintf(r->out, "\n");
	}
}

/* One kernel's launch sites; k is its GS_RPT_KERNEL entry. */
static void kernel_launches(struct rpt *r, const struct gs_rpt_cnt *k)
{
	const struct gs_rpt_cnt *c = r->a->cnt;
	char name[256];
	size_t b, e;

	gs_rpt_cnt_range(r->a, GS_RPT_LAUNCH, (uint32_t)k->a, &b, &e);
	for (size_t i = b; i < e && i < b + 3; i++) {
		launch_site_name(r->p, &c[i], name, sizeof(name));
		fprintf(r->out, "      %s %3.0f%%  %s\n",
			i == b ? "launched from:" : "              ", pct(c[i].v, k->v), name);
	}
	if (e - b > 3)
		fprintf(r->out, "                     ... %zu more launch sites\n", e - b - 3);
}

static void gpu_section(struct rpt *r)
{
	const struct gs_profile *p = r->p;
	const struct gs_rpt *a = r->a;
	char tmp[256];
	size_t kb, ke;

	gpu_summary(r);
	heading(r, "Top kernels by GPU samples");
	gs_rpt_cnt_range(a, GS_RPT_KERNEL, 0, &kb, &ke);
	for (size_t k = kb; k < ke && k < kb + r->top; k++) {
		uint32_t kfn = (uint32_t)a->cnt[k].a;
		const char *kname =
		    kfn ? gs_short_cxx_name(gs_profile_str(p, gs_profile_function(p, kfn)->name),
					    tmp, sizeof(tmp))
			: "[unknown kernel]";
		fprintf(r->out, "  %8" PRId64 " %5.1f%%  %s\n", a->cnt[k].v,
			pct(a->cnt[k].v, a->gpu_total), kname);
		kernel_stalls_lines(r, &a->cnt[k]);
		kernel_launches(r, &a->cnt[k]);
	}
	if (ke - kb > r->top)
		fprintf(r->out, "  ... %zu more kernels\n", ke - kb - r->top);
}

/* ---- where the time goes (output/report_wall.c) --------------------------- */

static int where_time_goes(struct rpt *r)
{
	const struct gs_profile *p = r->p;
	const struct gs_rpt *a = r->a;
	char kname[256] = "", line[512];
	if (!a->gpu_total)
		return gs_report_wall(p, r->out, r->color, NULL);
	if (a->top_kernel)
		gs_short_cxx_name(gs_profile_str(p, gs_profile_function(p, a->top_kernel)->name),
				  kname, sizeof(kname));
	snprintf(line, sizeof(line),
		 "GPU compute: %" PRId64 " PC samples; top kernel %s; top stall %s (%.0f%%)",
		 a->gpu_total, a->top_kernel ? kname : "[unknown]",
		 a->top_reason ? gs_profile_str(p, a->top_reason) : "unknown",
		 pct(a->top_reason_n, a->gpu_total));
	return gs_report_wall(p, r->out, r->color, line);
}

/* The session's GS_MEMORY_COMMENT lines: peaks, what was live at them,
 * out-of-memory answers with their stacks. */
static void memory_section(struct rpt *r)
{
	const size_t plen = strlen(GS_MEMORY_COMMENT);
	bool any = false;

	for (uint32_t i = 0; i < r->p->n_comments; i++) {
		const char *c = gs_profile_str(r->p, r->p->comments[i]);

		if (strncmp(c, GS_MEMORY_COMMENT, plen))
			continue;
		if (!any)
			heading(r, "Memory");
		any = true;
		fprintf(r->out, "  %s\n", c + plen);
	}
}

/* ---- entry ---------------------------------------------------------------- */

static int write_report(const struct gs_profile *p, const struct gs_report_opts *o, FILE *out)
{
	struct gs_rpt a;
	int rc = gs_rpt_analyze(p, &a);
	struct rpt r = { .p = p,
			 .a = &a,
			 .out = out,
			 .top = o && o->top ? o->top : 15,
			 .color = o && o->color,
			 .dump = gs_profile_comment(p, GS_DUMP_COMMENT) != NULL,
			 .cpu_total = a.cpu_total };

	if (rc)
		goto out;
	header(&r, a.gpu_total);
	if (r.dump && (rc = dump_user_frames(&r)))
		goto out;
	top_functions(&r);
	processes_and_threads(&r);
	memory_section(&r);
	if (p->n_notes) {
		heading(&r, "Notes");
		for (uint32_t i = 0; i < p->n_notes; i++)
			fprintf(out, "  - %s\n", gs_profile_str(p, p->notes[i]));
	}
	if (a.gpu_total > 0)
		gpu_section(&r);
	if (r.dump) /* no time to split */
		goto out;
	rc = where_time_goes(&r);
	if (!rc)
		rc = gs_report_ranks(p, out, r.color);
	if (!rc)
		rc = gs_report_steps(p, out, r.color);
	if (!rc && ferror(out))
		rc = -EIO;
out:
	gs_rpt_free(&a);
	return rc;
}

/* Every string from the target reaches the terminal escaped: the report
 * reads a view of the profile whose string table is escaped (output/common.c). */
int gs_write_report(const struct gs_profile *p, const struct gs_report_opts *o, FILE *out)
{
	struct gs_term_view v;
	int rc = gs_term_view_init(&v, p);

	if (!rc)
		rc = write_report(v.p, o, out);
	gs_term_view_free(&v);
	return rc;
}

void gs_report_fmt_ns(char *buf, size_t len, int64_t ns)
{
	fmt_ns(buf, len, ns);
}
