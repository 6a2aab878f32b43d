// SPDX-License-Identifier: MIT
/*
 * Terminal report: header, top functions (self/total), processes and
 * threads, notes, GPU kernels (stall mix, hottest lines, launching Python
 * line), and "where the time goes": wall-clock splits and verdicts
 * (output/report_wall.c, categories from output/walltime.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"

/* ---- small helpers -------------------------------------------------------- */

struct rpt {
	const struct gs_profile *p;
	FILE *out;
	unsigned top;
	bool color;
	uint8_t *fn_kind;  /* frame kind of each function's first location */
	int64_t cpu_total; /* CPU samples */
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

/* Function display name: Python "qualname (file:start)", else short C++. */
static const char *fn_display(struct rpt *r, uint32_t id, char *buf, size_t len)
{
	const struct gs_profile *p = r->p;
	if (id > p->n_functions) { /* address-only location */
		struct gs_dframe df = { .type = GS_DF_ADDR, .loc = id - p->n_functions };
		return gs_dframe_name(p, &df, buf, len);
	}
	const struct gs_function *f = gs_profile_function(p, id);
	const char *name = f->name ? gs_profile_str(p, f->name) : "[unknown]";
	char tmp[512];
	if (r->fn_kind[id] == GS_FRAME_PYTHON && f->file)
		snprintf(buf, len, "%s (%s:%" PRId64 ")", name,
			 gs_short_path(gs_profile_str(p, f->file)), f->start_line);
	else if (r->fn_kind[id] == GS_FRAME_KERNEL)
		snprintf(buf, len, "%s [kernel]", name);
	else
		snprintf(buf, len, "%s", gs_short_cxx_name(name, tmp, sizeof(tmp)));
	if (strlen(buf) > 90)
		strcpy(buf + 87, "...");
	return buf;
}

static bool is_cpu(const struct gs_sample *s)
{
	return s->cuda_device < 0;
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

static void header(struct rpt *r, int64_t gpu_total)
{
	const struct gs_profile *p = r->p;
	char d[32];
	fmt_ns(d, sizeof(d), (int64_t)p->duration_nanos);
	fprintf(r->out, r->color ? "\033[1mgpusample report\033[0m\n" : "gpusample report\n");
	fprintf(r->out, "  duration %s, %u Hz, %" PRId64 " CPU samples, %" PRIu64 " lost", d,
		p->frequency_hz, r->cpu_total, p->lost_samples);
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

struct fn_row {
	uint32_t fn;
	int64_t self, total;
};

static int cmp_self(const void *a, const void *b)
{
	const struct fn_row *x = a, *y = b;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return x->fn < y->fn ? -1 : 1;
}

static int cmp_total(const void *a, const void *b)
{
	const struct fn_row *x = a, *y = b;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return x->fn < y->fn ? -1 : 1;
}

static int top_functions(struct rpt *r, const int64_t *stack_cpu)
{
	const struct gs_profile *p = r->p;
	/* rows 1..n_functions: functions; then one per address-only location
	 * (no symbol), so their self time is not lost */
	size_t n_rows = (size_t)p->n_functions + p->n_locations + 1;
	struct fn_row *rows = calloc(n_rows, sizeof(*rows));
	uint32_t *stamp = calloc(n_rows, sizeof(*stamp));
	if (!rows || !stamp) {
		free(rows);
		free(stamp);
		return -ENOMEM;
	}
	for (uint32_t st = 0; st < p->n_stacks; st++) {
		int64_t c = stack_cpu[st];
		const struct gs_stack *s = &p->stacks[st];
		if (c <= 0 || !s->n)
			continue;
		const struct gs_location *leaf = gs_profile_location(p, p->stack_locs[s->first]);
		if (leaf->n_lines)
			rows[p->lines[leaf->first_line].function].self += c;
		else
			rows[p->n_functions + p->stack_locs[s->first]].self += c;
		for (uint32_t i = 0; i < s->n; i++) {
			uint32_t lid = p->stack_locs[s->first + i];
			const struct gs_location *l = gs_profile_location(p, lid);
			if (!l->n_lines && stamp[p->n_functions + lid] != st + 1) {
				stamp[p->n_functions + lid] = st + 1;
				rows[p->n_functions + lid].total += c;
			}
			for (uint32_t k = 0; k < l->n_lines; k++) {
				uint32_t fn = p->lines[l->first_line + k].function;
				if (stamp[fn] != st + 1) { /* once per stack (recursion) */
					stamp[fn] = st + 1;
					rows[fn].total += c;
				}
			}
		}
	}
	size_t n = 0;
	for (uint32_t id = 1; id < n_rows; id++)
		if (rows[id].total)
			rows[n++] = (struct fn_row){ id, rows[id].self, rows[id].total };
	char name[256];
	for (int pass = 0; pass < 2 && n; pass++) {
		qsort(rows, n, sizeof(*rows), pass ? cmp_total : cmp_self);
		heading(r, pass ? "Top functions by total CPU (self + callees)"
				: "Top functions by self CPU");
		fprintf(r->out, "  %7s %6s %7s %6s  %s\n", "self", "self%", "total", "total%",
			"function");
		for (size_t i = 0; i < n && i < r->top; i++) {
			if (!pass && !rows[i].self)
				break;
			fprintf(r->out, "  %7" PRId64 " %5.1f%% %7" PRId64 " %5.1f%%  %s\n",
				rows[i].self, pct(rows[i].self, r->cpu_total), rows[i].total,
				pct(rows[i].total, r->cpu_total),
				fn_display(r, rows[i].fn, name, sizeof(name)));
		}
	}
	free(rows);
	free(stamp);
	return 0;
}

struct thr {
	uint32_t pid, tid;
	gs_str name, role;
	int64_t samples;
};

static int cmp_thr(const void *a, const void *b)
{
	const struct thr *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->tid < y->tid ? -1 : 1;
}

/* Threads with CPU samples, found by (pid, tid). */
static struct thr *collect_threads(const struct gs_profile *p, size_t *n_out)
{
	struct thr *t = NULL;
	size_t cap = 0, n = 0;
	struct gs_hmap by_tid = { 0 }; /* pid << 32 | tid -> index in t */
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (!is_cpu(s) || s->values[GS_V_SAMPLES] <= 0)
			continue;
		bool added;
		uint64_t *k = gs_hmap_slot(&by_tid, (uint64_t)s->pid << 32 | s->tid, &added);
		if (!k)
			goto fail;
		if (added) {
			if (GS_GROW(t, cap, n + 1))
				goto fail;
			t[n] = (struct thr){ .pid = s->pid,
					     .tid = s->tid,
					     .name = s->thread_name,
					     .role = s->process_role };
			*k = n++;
		}
		t[*k].samples += s->values[GS_V_SAMPLES];
	}
	gs_hmap_free(&by_tid);
	*n_out = n;
	return t ? t : calloc(1, sizeof(*t));
fail:
	free(t);
	gs_hmap_free(&by_tid);
	return NULL;
}

static void processes_and_threads(struct rpt *r, struct thr *t, size_t n)
{
	const struct gs_profile *p = r->p;
	heading(r, "Processes");
	fprintf(r->out, "  %7s %-16s %-11s %8s %6s  %-16s %s\n", "pid", "comm", "role", "samples",
		"cpu%", "python", "GPU");
	unsigned quiet = 0, shown = 0;
	for (uint32_t i = 0; i < p->n_processes; i++) {
		const struct gs_process *pr = &p->processes[i];
		if (gs_find_process(p, pr->pid) != pr)
			continue; /* superseded by a later entry (exec) */
		int64_t c = 0;
		for (size_t j = 0; j < n; j++)
			if (t[j].pid == pr->pid)
				c += t[j].samples;
		/* short-lived helpers (shell wrappers, readlink) clutter the table */
		if ((!c && !pr->python && !pr->gpu) || shown >= 4 * r->top) {
			quiet++;
			continue;
		}
		shown++;
		fprintf(r->out, "  %7u %-16s %-11s %8" PRId64 " %5.1f%%  %-16s %s%s\n", pr->pid,
			gs_profile_str(p, pr->comm), pr->role ? gs_profile_str(p, pr->role) : "-",
			c, pct(c, r->cpu_total), pr->python ? gs_profile_str(p, pr->python) : "-",
			pr->gpu ? gs_profile_str(p, pr->gpu) : "-", pr->exited ? " (exited)" : "");
	}
	if (quiet)
		fprintf(r->out,
			"  ... %u more processes (no CPU samples, or beyond the first %u)\n", quiet,
			4 * r->top);
	qsort(t, n, sizeof(*t), cmp_thr);
	heading(r, "Threads");
	fprintf(r->out, "  %7s %7s %-16s %-11s %8s %6s\n", "pid", "tid", "thread", "role",
		"samples", "cpu%");
	for (size_t j = 0; j < n && j < r->top; j++)
		fprintf(r->out, "  %7u %7u %-16s %-11s %8" PRId64 " %5.1f%%\n", t[j].pid, t[j].tid,
			t[j].name ? gs_profile_str(p, t[j].name) : "?",
			t[j].role ? gs_profile_str(p, t[j].role) : "-", t[j].samples,
			pct(t[j].samples, r->cpu_total));
	if (n > r->top)
		fprintf(r->out, "  ... %zu more threads\n", n - r->top);
}

/* ---- GPU ------------------------------------------------------------------ */

/* Counter keyed by (tag, kernel function, a, b). */
enum { T_KERNEL = 1, T_REASON, T_LINE, T_LAUNCH };
#define T_LAUNCH_UNKNOWN UINT64_MAX /* b of a T_LAUNCH entry: launch never seen */
struct cnt {
	uint32_t tag, kfn;
	uint64_t a, b;
	int64_t v, ni;
};

struct counter {
	struct cnt *e;
	size_t n, cap;
	struct gs_hmap index; /* cnt_hash -> index in e */
};

static uint64_t cnt_hash(uint32_t tag, uint32_t kfn, uint64_t a, uint64_t b)
{
	return gs_hash_combine(gs_hash_combine((uint64_t)tag << 32 | kfn, a), b);
}

struct cnt_key {
	const struct counter *c;
	uint32_t tag, kfn;
	uint64_t a, b;
};

static bool cnt_eq(const void *ctx, uint64_t i)
{
	const struct cnt_key *k = ctx;
	const struct cnt *e = &k->c->e[i];
	return e->tag == k->tag && e->kfn == k->kfn && e->a == k->a && e->b == k->b;
}

/* The entry of this key, or NULL.  Hashes rarely collide: the first entry
 * under the hash is checked before the general walk. */
static struct cnt *cnt_find(const struct counter *c, const struct cnt_key *k, uint64_t h)
{
	const uint64_t *i = gs_hmap_get(&c->index, h);
	if (i && !cnt_eq(k, *i))
		i = gs_hmap_find_by(&c->index, h, cnt_eq, k);
	return i ? &c->e[*i] : NULL;
}

static int cnt_add(struct counter *c, uint32_t tag, uint32_t kfn, uint64_t a, uint64_t b, int64_t v,
		   int64_t ni)
{
	struct cnt_key key = { c, tag, kfn, a, b };
	uint64_t h = cnt_hash(tag, kfn, a, b);
	struct cnt *e = cnt_find(c, &key, h);
	if (e) {
		e->v += v;
		e->ni += ni;
		return 0;
	}
	if (GS_GROW(c->e, c->cap, c->n + 1) || gs_hmap_add(&c->index, h, c->n))
		return -ENOMEM;
	c->e[c->n++] = (struct cnt){ tag, kfn, a, b, v, ni };
	return 0;
}

static int cmp_cnt(const void *x, const void *y)
{
	const struct cnt *a = x, *b = y;
	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	if (a->kfn != b->kfn)
		return a->kfn < b->kfn ? -1 : 1;
	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return a->b < b->b ? -1 : a->b > b->b;
}

/* Range [*b, *e) of entries with (tag, kfn) in the sorted array. */
static void cnt_range(const struct counter *c, uint32_t tag, uint32_t kfn, size_t *b, size_t *e)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct cnt *m = &c->e[mid];
		if (m->tag < tag || (m->tag == tag && m->kfn < kfn))
			lo = mid + 1;
		else
			hi = mid;
	}
	*b = lo;
	while (lo < c->n && c->e[lo].tag == tag && c->e[lo].kfn == kfn)
		lo++;
	*e = lo;
}

/* The kernel function of a GPU PC location, and its launch site: the
 * first two Python frames above the GPU leaf (innermost first, 0 if none).
 * Two, because the innermost is often a helper shared by every site (a
 * torch.nn.functional wrapper, the app's own launch()), and the caller is
 * what tells the sites apart. */
static void gpu_sample_keys(const struct gs_profile *p, const struct gs_sample *s, uint32_t *kfn,
			    const struct gs_line **leaf_line, uint32_t launch_loc[2])
{
	const struct gs_stack *st = &p->stacks[s->stack];
	*kfn = 0;
	*leaf_line = NULL;
	launch_loc[0] = launch_loc[1] = 0;
	for (uint32_t i = 0; i < st->n; i++) {
		uint32_t lid = p->stack_locs[st->first + i];
		const struct gs_location *l = gs_profile_location(p, lid);
		if (l->kind == GS_FRAME_GPU_PC && !*kfn && l->n_lines) {
			*kfn = p->lines[l->first_line + l->n_lines - 1].function;
			*leaf_line = &p->lines[l->first_line];
		} else if (l->kind == GS_FRAME_PYTHON && l->n_lines) {
			launch_loc[launch_loc[0] ? 1 : 0] = lid;
			if (launch_loc[1])
				return;
		}
	}
}

static bool is_unknown_launch(const struct gs_profile *p, const struct gs_sample *s)
{
	return s->gpu_attribution && !strcmp(gs_profile_str(p, s->gpu_attribution), "unknown");
}

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
static void launch_site_name(const struct gs_profile *p, const struct cnt *l, char *buf, size_t len)
{
	char inner[256], outer[256];

	if (l->b == T_LAUNCH_UNKNOWN) {
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

static int gpu_section(struct rpt *r, int64_t gpu_total, int64_t gpu_ni, uint32_t *top_kernel,
		       gs_str *top_reason, int64_t *top_reason_n)
{
	const struct gs_profile *p = r->p;
	struct counter c = { 0 };
	int64_t unknown = 0;
	int rc = 0;
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		int64_t v = s->values[GS_V_GPU_SAMPLES], ni = s->values[GS_V_GPU_NOT_ISSUED];
		if (is_cpu(s) || (v <= 0 && ni <= 0))
			continue;
		uint32_t kfn, launch[2];
		const struct gs_line *ll;
		bool unk = is_unknown_launch(p, s);
		gpu_sample_keys(p, s, &kfn, &ll, launch);
		if (unk)
			unknown += v;
		rc = cnt_add(&c, T_KERNEL, 0, kfn, 0, v, ni);
		rc = rc ? rc : cnt_add(&c, T_REASON, kfn, s->cuda_stall_reason, 0, v, ni);
		rc = rc ? rc : cnt_add(&c, T_REASON, 0, s->cuda_stall_reason, 0, v, ni);
		/* line 0: the cubin has no line info for that PC */
		if (ll && ll->line > 0)
			rc = rc ? rc
				: cnt_add(&c, T_LINE, kfn, ll->function, (uint64_t)ll->line, v, ni);
		rc = rc ? rc
			: cnt_add(&c, T_LAUNCH, kfn, unk ? 0 : launch[0],
				  unk ? T_LAUNCH_UNKNOWN : launch[1], v, ni);
	}
	if (rc)
		goto out;
	qsort(c.e, c.n, sizeof(*c.e), cmp_cnt);
	char title[160], name[256], tmp[256];
	snprintf(title, sizeof(title), "GPU: %" PRId64 " PC samples (%" PRId64 " not issued)",
		 gpu_total, gpu_ni);
	heading(r, title);
	size_t rb, re;
	cnt_range(&c, T_REASON, 0, &rb, &re);
	fprintf(r->out, "  stall reasons:");
	for (size_t i = rb; i < re && i < rb + 6; i++)
		fprintf(r->out, "%s %s %.1f%%", i == rb ? "" : ",",
			c.e[i].a ? gs_profile_str(p, (gs_str)c.e[i].a) : "unknown",
			pct(c.e[i].v, gpu_total));
	fprintf(r->out, "\n");
	if (unknown)
		fprintf(
		    r->out,
		    "  %" PRId64 " samples (%.1f%%) are under [unknown launch]: their kernels' "
		    "launches were never seen\n  (launched before gpusample attached, or skipped "
		    "by "
		    "1-in-N launch sampling); attach earlier or start the job under gpusample\n",
		    unknown, pct(unknown, gpu_total));
	if (re > rb) {
		*top_reason = (gs_str)c.e[rb].a;
		*top_reason_n = c.e[rb].v;
	}
	heading(r, "Top kernels by GPU samples");
	size_t kb, ke;
	cnt_range(&c, T_KERNEL, 0, &kb, &ke);
	if (ke > kb)
		*top_kernel = (uint32_t)c.e[kb].a;
	for (size_t k = kb; k < ke && k < kb + r->top; k++) {
		uint32_t kfn = (uint32_t)c.e[k].a;
		const char *kname =
		    kfn ? gs_short_cxx_name(gs_profile_str(p, gs_profile_function(p, kfn)->name),
					    tmp, sizeof(tmp))
			: "[unknown kernel]";
		fprintf(r->out, "  %8" PRId64 " %5.1f%%  %s\n", c.e[k].v, pct(c.e[k].v, gpu_total),
			kname);
		size_t b, e;
		cnt_range(&c, T_REASON, kfn, &b, &e);
		fprintf(r->out, "      stalls:");
		for (size_t i = b; i < e && i < b + 3; i++)
			fprintf(r->out, "%s %s %.0f%%", i == b ? "" : ",",
				c.e[i].a ? gs_profile_str(p, (gs_str)c.e[i].a) : "unknown",
				pct(c.e[i].v, c.e[k].v));
		fprintf(r->out, "\n");
		cnt_range(&c, T_LINE, kfn, &b, &e);
		if (e == b && kfn)
			fprintf(r->out, "      hottest lines: none (cubin built without -lineinfo: "
					"kernel-level attribution only)\n");
		if (e > b) {
			fprintf(r->out, "      hottest lines:");
			for (size_t i = b; i < e && i < b + 3; i++) {
				const struct gs_function *f =
				    c.e[i].a ? gs_profile_function(p, (uint32_t)c.e[i].a) : NULL;
				const char *file = f && f->file ? gs_profile_str(p, f->file) : "?";
				const char *slash = strrchr(file, '/');
				fprintf(r->out, "%s %s:%" PRIu64 " %.0f%%", i == b ? "" : ",",
					slash ? slash + 1 : file, c.e[i].b,
					pct(c.e[i].v, c.e[k].v));
			}
			fprintf(r->out, "\n");
		}
		cnt_range(&c, T_LAUNCH, kfn, &b, &e);
		for (size_t i = b; i < e && i < b + 3; i++) {
			launch_site_name(p, &c.e[i], name, sizeof(name));
			fprintf(r->out, "      %s %3.0f%%  %s\n",
				i == b ? "launched from:" : "              ",
				pct(c.e[i].v, c.e[k].v), name);
		}
		if (e - b > 3)
			fprintf(r->out, "                     ... %zu more launch sites\n",
				e - b - 3);
	}
	if (ke - kb > r->top)
		fprintf(r->out, "  ... %zu more kernels\n", ke - kb - r->top);
out:
	free(c.e);
	gs_hmap_free(&c.index);
	return rc;
}

/* ---- where the time goes (output/report_wall.c) --------------------------- */

static int where_time_goes(struct rpt *r, uint32_t top_kernel, gs_str top_reason,
			   int64_t top_reason_n, int64_t gpu_total)
{
	const struct gs_profile *p = r->p;
	char kname[256] = "", line[512];
	if (!gpu_total)
		return gs_report_wall(p, r->out, r->color, NULL);
	if (top_kernel)
		gs_short_cxx_name(gs_profile_str(p, gs_profile_function(p, top_kernel)->name),
				  kname, sizeof(kname));
	snprintf(line, sizeof(line),
		 "GPU compute: %" PRId64 " PC samples; top kernel %s; top stall %s (%.0f%%)",
		 gpu_total, top_kernel ? kname : "[unknown]",
		 top_reason ? gs_profile_str(p, top_reason) : "unknown",
		 pct(top_reason_n, gpu_total));
	return gs_report_wall(p, r->out, r->color, line);
}

/* ---- entry ---------------------------------------------------------------- */

static int write_report(const struct gs_profile *p, const struct gs_report_opts *o, FILE *out)
{
	struct rpt r = {
		.p = p, .out = out, .top = o && o->top ? o->top : 15, .color = o && o->color
	};
	int64_t *stack_cpu = calloc(p->n_stacks + 1, sizeof(*stack_cpu));
	r.fn_kind = calloc(p->n_functions + 1, 1);
	int rc = 0;
	if (!stack_cpu || !r.fn_kind) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = p->n_locations; i > 0; i--) { /* first location wins */
		const struct gs_location *l = gs_profile_location(p, i);
		for (uint32_t k = 0; k < l->n_lines; k++)
			r.fn_kind[p->lines[l->first_line + k].function] = l->kind;
	}
	int64_t gpu_total = 0, gpu_ni = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (is_cpu(s)) {
			r.cpu_total += s->values[GS_V_SAMPLES];
			stack_cpu[s->stack] += s->values[GS_V_SAMPLES];
		} else {
			gpu_total += s->values[GS_V_GPU_SAMPLES];
			gpu_ni += s->values[GS_V_GPU_NOT_ISSUED];
		}
	}
	header(&r, gpu_total);
	if (r.cpu_total)
		rc = top_functions(&r, stack_cpu);
	size_t n_thr = 0;
	struct thr *thr = rc ? NULL : collect_threads(p, &n_thr);
	if (!rc && !thr)
		rc = -ENOMEM;
	if (!rc)
		processes_and_threads(&r, thr, n_thr);
	free(thr);
	if (!rc && p->n_notes) {
		heading(&r, "Notes");
		for (uint32_t i = 0; i < p->n_notes; i++)
			fprintf(out, "  - %s\n", gs_profile_str(p, p->notes[i]));
	}
	uint32_t top_kernel = 0;
	gs_str top_reason = 0;
	int64_t top_reason_n = 0;
	if (!rc && gpu_total > 0)
		rc = gpu_section(&r, gpu_total, gpu_ni, &top_kernel, &top_reason, &top_reason_n);
	if (!rc)
		rc = where_time_goes(&r, top_kernel, top_reason, top_reason_n, gpu_total);
	if (!rc)
		rc = gs_report_ranks(p, out, r.color);
	if (!rc && ferror(out))
		rc = -EIO;
out:
	free(stack_cpu);
	free(r.fn_kind);
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
