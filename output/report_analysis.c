// SPDX-License-Identifier: MIT
/*
 * The numbers of the terminal report (see report_int.h): CPU totals, top
 * functions by self and total, threads and processes, and the GPU counts by
 * kernel, stall reason, line and launch site.  No text: output/report.c
 * renders them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "output/report_int.h"
#include "util/hash.h"
#include "util/hashmap.h"
#include "util/vec.h"

static bool is_cpu(const struct gs_profile *p, const struct gs_sample *s)
{
	return gs_profile_ctx(p, s)->cuda_device < 0;
}

/* ---- functions ---------------------------------------------------------- */

static int cmp_self(const void *a, const void *b)
{
	const struct gs_rpt_fn *x = a, *y = b;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return x->fn < y->fn ? -1 : 1;
}

static int cmp_total(const void *a, const void *b)
{
	const struct gs_rpt_fn *x = a, *y = b;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return x->fn < y->fn ? -1 : 1;
}

/* What a frame is to the tables (see report_int.h).  FR_LIBC: code of a
 * stripped libc without a symbol, a root (__libc_start_call_main) when only
 * roots are outward of it. */
enum { FR_PLAIN, FR_SKID, FR_ROOT, FR_INTERP, FR_LIBC };

/* Kernel frames where a timer sample lands because interrupts were just
 * re-enabled: with a software clock event (cpu-clock: no PMU, as on most
 * VMs) the sampling interrupt waits for interrupts to be on again, so the
 * time of the code that ran with them off shows up at the point that turns
 * them back on.  That code is the caller's, so the tables give the sample
 * to the caller.  pvm_irq_enable / native_irq_enable / xen_irq_enable
 * (paravirt ops), __raw_callee_save_* (their register-saving thunks), and
 * the spin-lock releases that restore the interrupt flag. */
static bool ends_with(const char *s, const char *tail)
{
	size_t l = strlen(s), t = strlen(tail);

	return l > t && !strcmp(s + l - t, tail);
}

static bool is_skid_name(const char *n)
{
	return ends_with(n, "_irq_enable") || !strncmp(n, "__raw_callee_save_", 18) ||
	       (!strncmp(n, "_raw_", 5) && ends_with(n, "_unlock_irqrestore"));
}

/* Thread roots and interpreter start-up: on nearly every stack, they say
 * nothing about where time goes. */
static bool is_root_name(const char *n)
{
	static const char *const names[] = {
		"_start",
		"__libc_start_main",
		"__libc_start_main_impl",
		"__libc_start_call_main",
		"start_thread",
		"clone",
		"clone3",
		"__clone",
		"__clone3",
		"__clone_internal",
		"thread_start",
		"ret_from_fork",
		"ret_from_fork_asm",
		"Py_BytesMain",
		"Py_RunMain",
		"Py_Main",
		"PyEval_EvalCode",
		"_PyRun_SimpleFileObject",
		"_PyRun_AnyFileObject",
		"PyRun_SimpleFileExFlags",
		"PyRun_AnyFileExFlags",
		"pymain_run_python",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(n, names[i]))
			return true;
	return !strncmp(n, "[process ", 9);
}

/* Plumbing: frames between a thread's start and the job's own code that are
 * on nearly every stack of their threads and whose total is their callees'
 * (the script's module, multiprocessing's and threading's start-up, the
 * DataLoader worker's loop and fetcher, the parent's frames a forked worker
 * inherits, nn.Module's call wrappers, the interpreter's native call
 * machinery).  "Top functions by total" leaves them out so that its rows
 * name the job's functions; their self time stays in "by self".  A Python
 * frame matches by the last part of its qualified name and the end of its
 * file's path ("" any file); a native one (file NULL) by its name.  README's
 * "Reading the report" lists them: keep the two in step. */
static const struct known_frame {
	const char *name, *file;
} plumbing[] = {
	{ "<module>", "" },
	{ "_bootstrap", "multiprocessing/process.py" },
	{ "run", "multiprocessing/process.py" },
	{ "start", "multiprocessing/process.py" },
	{ "_Popen", "multiprocessing/context.py" },
	{ "__init__", "multiprocessing/popen_fork.py" },
	{ "_launch", "multiprocessing/popen_fork.py" },
	{ "spawn_main", "multiprocessing/spawn.py" },
	{ "_main", "multiprocessing/spawn.py" },
	{ "_bootstrap", "threading.py" },
	{ "_bootstrap_inner", "threading.py" },
	{ "run", "threading.py" },
	{ "_worker_loop", "torch/utils/data/_utils/worker.py" },
	{ "fetch", "torch/utils/data/_utils/fetch.py" },
	{ "<listcomp>", "torch/utils/data/_utils/fetch.py" },
	{ "__iter__", "torch/utils/data/dataloader.py" },
	{ "_get_iterator", "torch/utils/data/dataloader.py" },
	{ "__init__", "torch/utils/data/dataloader.py" },
	{ "_call_impl", "torch/nn/modules/module.py" },
	{ "_wrapped_call_impl", "torch/nn/modules/module.py" },
	{ "_PyEval_EvalFrameDefault", NULL },
	{ "_PyEval_EvalFrame", NULL },
	{ "_PyEval_Vector", NULL },
	{ "_PyFunction_Vectorcall", NULL },
	{ "PyObject_Vectorcall", NULL },
	{ "_PyObject_VectorcallTstate", NULL },
	{ "PyObject_Call", NULL },
	{ "_PyObject_Call", NULL },
	{ "_PyObject_MakeTpCall", NULL },
	{ "PyVectorcall_Call", NULL },
	{ "cfunction_call", NULL },
	{ "method_vectorcall", NULL },
	{ "slot_tp_call", NULL },
};

/* Whether function fn (frame kind `kind`) is a plumbing frame. */
static bool is_plumbing(const struct gs_profile *p, uint32_t fn, uint8_t kind)
{
	const struct gs_function *f = gs_profile_function(p, fn);
	const char *n = f->name ? gs_profile_str(p, f->name) : "";
	const char *file = f->file ? gs_profile_str(p, f->file) : "";
	const char *dot = kind == GS_FRAME_PYTHON ? strrchr(n, '.') : NULL;

	n = dot ? dot + 1 : n;
	for (size_t i = 0; i < sizeof(plumbing) / sizeof(plumbing[0]); i++) {
		const char *kf = plumbing[i].file;
		size_t fl = kf ? strlen(kf) : 0, l = strlen(file);

		if (strcmp(n, plumbing[i].name) || !kf != (kind != GS_FRAME_PYTHON))
			continue;
		if (!kf || (l >= fl && !strcmp(file + l - fl, kf) &&
			    (l == fl || !fl || file[l - fl - 1] == '/')))
			return true;
	}
	return false;
}

/* python3.11, libpython3.11.so.1.0: the interpreter's own file. */
static bool is_python_file(const char *file)
{
	const char *b = strrchr(file, '/');

	b = b ? b + 1 : file;
	return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

/* "libtorch_cpu.so.1.13.0+0x4f1ee8a": a function without a symbol. */
static bool is_unnamed_fn(const struct gs_profile *p, uint32_t fn)
{
	const char *n = gs_profile_str(p, gs_profile_function(p, fn)->name), *x = strstr(n, "+0x");

	return x && !strpbrk(n, " (:<") && x[3] &&
	       strspn(x + 3, "0123456789abcdef") == strlen(x + 3);
}

/* The library of unnamed function fn: its name's length before "+0x". */
static size_t lib_len(const struct gs_profile *p, uint32_t fn)
{
	const char *n = gs_profile_str(p, gs_profile_function(p, fn)->name);

	return (size_t)(strstr(n, "+0x") - n);
}

/* Row of unnamed code row takes unnamed function fn: it keeps one of them,
 * or GS_RPT_LIBS once they come from two libraries. */
static void add_unnamed(const struct gs_profile *p, struct gs_rpt_fn *row, uint32_t fn)
{
	size_t a, b;

	if (!row->unnamed) {
		row->unnamed = fn;
		return;
	}
	if (row->unnamed == GS_RPT_LIBS)
		return;
	a = lib_len(p, row->unnamed);
	b = lib_len(p, fn);
	if (a != b || strncmp(gs_profile_str(p, gs_profile_function(p, row->unnamed)->name),
			      gs_profile_str(p, gs_profile_function(p, fn)->name), a))
		row->unnamed = GS_RPT_LIBS;
}

static uint32_t loc_fn(const struct gs_profile *p, uint32_t lid)
{
	const struct gs_location *l = gs_profile_location(p, lid);

	return l->n_lines ? p->lines[l->first_line].function : 0;
}

/* libc.so.6: the C library's file. */
static bool is_libc_file(const char *file)
{
	const char *b = strrchr(file, '/');

	return !strncmp(b ? b + 1 : file, "libc.so", 7);
}

/* Per location: FR_SKID (kernel), FR_ROOT (by name), FR_INTERP (a native
 * frame of the interpreter's file), FR_LIBC (libc code without a symbol),
 * else FR_PLAIN. */
static uint8_t *classify_locations(const struct gs_profile *p)
{
	uint8_t *c = calloc(p->n_locations + 1, 1);

	for (uint32_t lid = 1; c && lid <= p->n_locations; lid++) {
		const struct gs_location *l = gs_profile_location(p, lid);
		uint32_t fn = loc_fn(p, lid);
		const char *n = fn ? gs_profile_str(p, gs_profile_function(p, fn)->name) : "";

		if (l->kind == GS_FRAME_KERNEL && is_skid_name(n))
			c[lid] = FR_SKID;
		else if (l->kind != GS_FRAME_PYTHON && is_root_name(n))
			c[lid] = FR_ROOT;
		else if (l->kind == GS_FRAME_NATIVE && l->mapping && l->mapping <= p->n_mappings &&
			 is_python_file(gs_profile_str(p, p->mappings[l->mapping - 1].file)))
			c[lid] = FR_INTERP;
		else if (l->kind == GS_FRAME_NATIVE && l->mapping && l->mapping <= p->n_mappings &&
			 (!fn || is_unnamed_fn(p, fn)) &&
			 is_libc_file(gs_profile_str(p, p->mappings[l->mapping - 1].file)))
			c[lid] = FR_LIBC;
	}
	return c;
}

/* Row of function fn at frame i of stack locs[0..n): a function without a
 * symbol goes to the row of unnamed code under its nearest named caller
 * (found above i; for an extension's function not the interpreter's call
 * machinery, which would name every extension function alike, but the
 * Python frame above it), when there is one. */
static size_t fn_row(const struct gs_profile *p, const uint8_t *cls, const uint32_t *locs,
		     uint32_t n, uint32_t i, uint32_t fn)
{
	if (!is_unnamed_fn(p, fn))
		return fn;
	for (uint32_t j = i + 1; j < n; j++) {
		uint32_t cf = loc_fn(p, locs[j]);

		if (cls[locs[j]] == FR_ROOT)
			break;
		if (cf && (cls[locs[j]] == FR_PLAIN || cls[locs[j]] == cls[locs[i]]) &&
		    !is_unnamed_fn(p, cf))
			return (size_t)p->n_functions + p->n_locations + cf;
	}
	return fn;
}

/* c samples of row at Python line `line` into lines, keyed by (row, table
 * (0 self, 1 total), line).  0 or -ENOMEM. */
static int count_line(struct gs_hmap *lines, size_t row, unsigned table, int64_t line, int64_t c)
{
	bool added;
	uint64_t *v;

	if (line <= 0 || line > UINT32_MAX || row >= (size_t)1 << 31)
		return 0;
	v = gs_hmap_slot(lines, (uint64_t)row << 33 | (uint64_t)table << 32 | (uint64_t)line,
			 &added);
	if (!v)
		return -ENOMEM;
	*v += (uint64_t)c;
	return 0;
}

struct counts {
	const struct gs_profile *p;
	const uint8_t *cls;
	struct gs_rpt_fn *rows;
	uint32_t *stamp;
	struct gs_hmap lines; /* count_line's */
};

/* Frame i of stack st (c samples) into its rows; leaf: the frame that gets
 * the self samples. */
static int count_frame(struct counts *x, uint32_t st, uint32_t i, uint32_t leaf, int64_t c)
{
	const struct gs_profile *p = x->p;
	const struct gs_stack *s = &p->stacks[st];
	const uint32_t *locs = gs_profile_stack_locs(p, s);
	const struct gs_location *l = gs_profile_location(p, locs[i]);
	bool py = l->kind == GS_FRAME_PYTHON;
	int rc = 0;

	if (!l->n_lines) {
		size_t row = (size_t)p->n_functions + locs[i];

		x->rows[row].self += i == leaf ? c : 0;
		if (x->stamp[row] != st + 1) {
			x->stamp[row] = st + 1;
			x->rows[row].total += c;
		}
	}
	for (uint32_t k = 0; k < l->n_lines && !rc; k++) {
		const struct gs_line *ln = &p->lines[l->first_line + k];
		size_t row = fn_row(p, x->cls, locs, s->n, i, ln->function);

		if (row != ln->function)
			add_unnamed(p, &x->rows[row], ln->function);
		if (i == leaf && !k) {
			x->rows[row].self += c;
			rc = py ? count_line(&x->lines, row, 0, ln->line, c) : 0;
		}
		if (!rc && x->stamp[row] != st + 1) { /* once per stack (recursion) */
			x->stamp[row] = st + 1;
			x->rows[row].total += c;
			rc = py ? count_line(&x->lines, row, 1, ln->line, c) : 0;
		}
	}
	return rc;
}

/* Stack st's c samples into the rows.  The tables read the stacks as a
 * reader would: skid frames give their samples to their caller; thread roots
 * (and libc code without a symbol outward of everything else: a stripped
 * __libc_start_call_main) are left out, and so are the interpreter's own
 * frames unless the interpreter itself is the work (the leaf-most user
 * frames, kernel frames aside: the GC, a dict resize): root-ward of them
 * they are start-up or call machinery (_PyObject_MakeTpCall into a torch
 * op) whose totals say nothing the Python frames do not. */
static int count_stack(struct counts *x, uint32_t st, int64_t c)
{
	const struct gs_profile *p = x->p;
	const struct gs_stack *s = &p->stacks[st];
	const uint32_t *locs = gs_profile_stack_locs(p, s);
	const uint8_t *cls = x->cls;
	uint32_t leaf = 0, work = 0, end = s->n; /* interpreter frames below work count */
	int rc = 0;

	while (leaf + 1 < s->n && cls[locs[leaf]] == FR_SKID)
		leaf++;
	while (work < s->n && (cls[locs[work]] == FR_INTERP ||
			       gs_profile_location(p, locs[work])->kind == GS_FRAME_KERNEL))
		work++;
	while (end > leaf + 1 && (cls[locs[end - 1]] == FR_ROOT || cls[locs[end - 1]] == FR_LIBC))
		end--;
	for (uint32_t i = leaf; i < end && !rc; i++) {
		uint8_t k = cls[locs[i]];

		if (k != FR_SKID && k != FR_ROOT && !(k == FR_INTERP && i >= work))
			rc = count_frame(x, st, i, leaf, c);
	}
	return rc;
}

/* Each row's hottest line per table from x->lines (ties: the lower line). */
static void hottest_lines(struct counts *x)
{
	uint64_t key, n;

	for (size_t it = 0; gs_hmap_next(&x->lines, &it, &key, &n);) {
		struct gs_rpt_fn *row = &x->rows[key >> 33];
		int64_t line = (int64_t)(uint32_t)key;
		int64_t *best = key >> 32 & 1 ? &row->total_line : &row->self_line;
		int64_t *best_n = key >> 32 & 1 ? &row->total_line_n : &row->self_line_n;

		if ((int64_t)n > *best_n || ((int64_t)n == *best_n && line < *best)) {
			*best = line;
			*best_n = (int64_t)n;
		}
	}
}

/* Self and total CPU of every function with samples into rows (indexed by
 * function id, then by address-only location past n_functions, then by
 * "unnamed code under function" past n_functions + n_locations), with
 * their hottest lines.  0 or -ENOMEM. */
static int count_functions(const struct gs_profile *p, const int64_t *stack_cpu, const uint8_t *cls,
			   struct gs_rpt_fn *rows, uint32_t *stamp)
{
	struct counts x = { .p = p, .cls = cls, .rows = rows, .stamp = stamp };
	int rc = 0;

	for (uint32_t st = 0; st < p->n_stacks && !rc; st++)
		if (stack_cpu[st] > 0 && p->stacks[st].n)
			rc = count_stack(&x, st, stack_cpu[st]);
	if (!rc)
		hottest_lines(&x);
	gs_hmap_free(&x.lines);
	return rc;
}

/* The rows with samples, rows[1..n_rows) compacted in place: *n of them;
 * into *total those that are no plumbing frame. */
static int compact_rows(struct gs_rpt *r, struct gs_rpt_fn *rows, size_t n_rows, size_t *n,
			size_t *n_total)
{
	const struct gs_profile *p = r->p;

	*n = *n_total = 0;
	for (uint32_t id = 1; id < n_rows; id++)
		if (rows[id].total) {
			rows[*n] = rows[id];
			rows[(*n)++].fn = id;
		}
	r->by_total = malloc((*n ? *n : 1) * sizeof(*rows));
	if (!r->by_total)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++)
		if (rows[i].fn > p->n_functions ||
		    !is_plumbing(p, rows[i].fn, r->fn_kind[rows[i].fn]))
			r->by_total[(*n_total)++] = rows[i];
	return 0;
}

static int top_functions(struct gs_rpt *r, const int64_t *stack_cpu)
{
	const struct gs_profile *p = r->p;
	/* rows 1..n_functions: functions; then one per address-only location
	 * (no symbol), so their self time is not lost; then one per function
	 * for the unnamed code under it */
	size_t n_rows = (size_t)p->n_functions * 2 + p->n_locations + 1, n;
	struct gs_rpt_fn *rows = calloc(n_rows, sizeof(*rows));
	uint32_t *stamp = calloc(n_rows, sizeof(*stamp));
	uint8_t *cls = classify_locations(p);
	int rc = rows && stamp && cls ? count_functions(p, stack_cpu, cls, rows, stamp) : -ENOMEM;

	free(stamp);
	free(cls);
	r->by_self = rows;
	if (!rc)
		rc = compact_rows(r, rows, n_rows, &n, &r->n_total);
	if (rc)
		return rc;
	r->n_fns = n;
	qsort(r->by_self, n, sizeof(*rows), cmp_self);
	qsort(r->by_total, r->n_total, sizeof(*rows), cmp_total);
	return 0;
}

/* ---- threads and processes ---------------------------------------------- */

static int cmp_thr(const void *a, const void *b)
{
	const struct gs_rpt_thread *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->tid < y->tid ? -1 : 1;
}

/* Threads with CPU samples, found by (pid, tid). */
static struct gs_rpt_thread *collect_threads(const struct gs_profile *p, size_t *n_out)
{
	struct gs_rpt_thread *t = NULL;
	size_t cap = 0, n = 0;
	struct gs_hmap by_tid = { 0 }; /* pid << 32 | tid -> index in t */
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (!is_cpu(p, s) || s->values[GS_V_SAMPLES] <= 0)
			continue;
		bool added;
		uint64_t *k = gs_hmap_slot(&by_tid, (uint64_t)sc->pid << 32 | sc->tid, &added);
		if (!k)
			goto fail;
		if (added) {
			if (GS_GROW(t, cap, n + 1))
				goto fail;
			t[n] = (struct gs_rpt_thread){ .pid = sc->pid,
						       .tid = sc->tid,
						       .name = sc->thread_name,
						       .role = sc->process_role };
			*k = n++;
		}
		t[*k].samples += s->values[GS_V_SAMPLES];
		/* the name it had last, as top shows it: an exec renames the
		 * thread (a launched command, a pyenv shim's bash before python) */
		t[*k].name = sc->thread_name;
	}
	gs_hmap_free(&by_tid);
	*n_out = n;
	return t ? t : calloc(1, sizeof(*t));
fail:
	free(t);
	gs_hmap_free(&by_tid);
	return NULL;
}

static bool exited_worker(const struct gs_profile *p, const struct gs_process *pr)
{
	return pr->exited && gs_find_process(p, pr->pid) == pr && pr->role &&
	       !strcmp(gs_profile_str(p, pr->role), "dataloader");
}

/* Groups of GS_RPT_GROUP_MIN or more exited workers of one parent. */
static int find_groups(struct gs_rpt *r)
{
	const struct gs_profile *p = r->p;
	struct gs_hmap n_of = { 0 }; /* ppid -> exited workers, then group + 1 */
	size_t cap = 0;
	int rc = 0;
	r->proc_group = calloc(p->n_processes + 1, sizeof(*r->proc_group));
	if (!r->proc_group)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n_processes && !rc; i++) {
		bool added;
		uint64_t *v;
		if (!exited_worker(p, &p->processes[i]))
			continue;
		if ((v = gs_hmap_slot(&n_of, p->processes[i].ppid, &added)))
			++*v;
		else
			rc = -ENOMEM;
	}
	for (uint32_t i = 0; i < p->n_processes && !rc; i++) {
		const struct gs_process *pr = &p->processes[i];
		uint64_t *v = exited_worker(p, pr) ? gs_hmap_get(&n_of, pr->ppid) : NULL;
		if (!v || *v < GS_RPT_GROUP_MIN) /* too few: rows of their own */
			continue;
		if (*v < UINT64_C(1) << 32) { /* first member: a new group */
			struct gs_rpt_group g = { pr->ppid, pr->comm, pr->role, 0, 0, i };
			if ((rc = GS_PUSH(r->groups, r->n_groups, cap, g)))
				break;
			*v = (UINT64_C(1) << 32) | r->n_groups;
		}
		struct gs_rpt_group *g = &r->groups[(uint32_t)*v - 1];
		g->n_procs++;
		g->samples += r->proc_cpu[i];
		r->proc_group[i] = (uint32_t)*v;
	}
	gs_hmap_free(&n_of);
	return rc;
}

/* The threads of grouped processes merged by (group, thread name). */
static int merge_grouped_threads(struct gs_rpt *r)
{
	const struct gs_profile *p = r->p;
	struct gs_hmap row = { 0 }; /* group << 32 | name -> index in threads */
	size_t n = 0;
	int rc = 0;
	for (size_t j = 0; j < r->n_threads && !rc; j++) {
		struct gs_rpt_thread t = r->threads[j];
		const struct gs_process *pr = gs_find_process(p, t.pid);
		uint32_t g = pr ? r->proc_group[pr - p->processes] : 0;
		bool added;
		uint64_t *v = g ? gs_hmap_slot(&row, (uint64_t)g << 32 | t.name, &added) : NULL;
		if (!g) {
			r->threads[n++] = t;
			continue;
		}
		if (!v) {
			rc = -ENOMEM;
			break;
		}
		if (added) {
			*v = n;
			r->threads[n++] =
			    (struct gs_rpt_thread){ .pid = r->groups[g - 1].ppid,
						    .name = t.name,
						    .role = t.role,
						    .n_procs = r->groups[g - 1].n_procs };
		}
		r->threads[*v].samples += t.samples;
		r->threads[*v].n_threads++;
	}
	r->n_threads = n;
	gs_hmap_free(&row);
	return rc;
}

static int threads_and_processes(struct gs_rpt *r)
{
	const struct gs_profile *p = r->p;
	int rc;

	r->threads = collect_threads(p, &r->n_threads);
	r->proc_cpu = calloc(p->n_processes + 1, sizeof(*r->proc_cpu));
	if (!r->threads || !r->proc_cpu)
		return -ENOMEM;
	for (size_t j = 0; j < r->n_threads; j++) {
		const struct gs_process *pr = gs_find_process(p, r->threads[j].pid);
		if (pr)
			r->proc_cpu[pr - p->processes] += r->threads[j].samples;
	}
	if ((rc = find_groups(r)) || (r->n_groups && (rc = merge_grouped_threads(r))))
		return rc;
	qsort(r->threads, r->n_threads, sizeof(*r->threads), cmp_thr);
	return 0;
}

/* ---- GPU ------------------------------------------------------------------ */

struct counter {
	struct gs_rpt_cnt *e;
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
	const struct gs_rpt_cnt *e = &k->c->e[i];
	return e->tag == k->tag && e->kfn == k->kfn && e->a == k->a && e->b == k->b;
}

/* The entry of this key, or NULL.  Hashes rarely collide: the first entry
 * under the hash is checked before the general walk. */
static struct gs_rpt_cnt *cnt_find(const struct counter *c, const struct cnt_key *k, uint64_t h)
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
	struct gs_rpt_cnt *e = cnt_find(c, &key, h);
	if (e) {
		e->v += v;
		e->ni += ni;
		return 0;
	}
	if (GS_GROW(c->e, c->cap, c->n + 1) || gs_hmap_add(&c->index, h, c->n))
		return -ENOMEM;
	c->e[c->n++] = (struct gs_rpt_cnt){ tag, kfn, a, b, v, ni };
	return 0;
}

static int cmp_cnt(const void *x, const void *y)
{
	const struct gs_rpt_cnt *a = x, *b = y;
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

void gs_rpt_cnt_range(const struct gs_rpt *r, uint32_t tag, uint32_t kfn, size_t *b, size_t *e)
{
	size_t lo = 0, hi = r->n_cnt;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct gs_rpt_cnt *m = &r->cnt[mid];
		if (m->tag < tag || (m->tag == tag && m->kfn < kfn))
			lo = mid + 1;
		else
			hi = mid;
	}
	*b = lo;
	while (lo < r->n_cnt && r->cnt[lo].tag == tag && r->cnt[lo].kfn == kfn)
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
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
	return sc->gpu_attribution && !strcmp(gs_profile_str(p, sc->gpu_attribution), "unknown");
}

/* The counts of one GPU sample. */
static int gpu_count(struct gs_rpt *r, struct counter *c, const struct gs_sample *s)
{
	const struct gs_sample_ctx *sc = gs_profile_ctx(r->p, s);
	int64_t v = s->values[GS_V_GPU_SAMPLES], ni = s->values[GS_V_GPU_NOT_ISSUED];
	uint32_t kfn, launch[2];
	const struct gs_line *ll;
	bool unk = is_unknown_launch(r->p, s);
	int rc;

	gpu_sample_keys(r->p, s, &kfn, &ll, launch);
	if (unk)
		r->gpu_unknown += v;
	rc = cnt_add(c, GS_RPT_KERNEL, 0, kfn, 0, v, ni);
	rc = rc ? rc : cnt_add(c, GS_RPT_REASON, kfn, sc->cuda_stall_reason, 0, v, ni);
	rc = rc ? rc : cnt_add(c, GS_RPT_REASON, 0, sc->cuda_stall_reason, 0, v, ni);
	/* line 0: the cubin has no line info for that PC */
	if (ll && ll->line > 0)
		rc = rc ? rc
			: cnt_add(c, GS_RPT_LINE, kfn, ll->function, (uint64_t)ll->line, v, ni);
	return rc ? rc
		  : cnt_add(c, GS_RPT_LAUNCH, kfn, unk ? 0 : launch[0],
			    unk ? GS_RPT_LAUNCH_UNKNOWN : launch[1], v, ni);
}

static int gpu_counts(struct gs_rpt *r)
{
	const struct gs_profile *p = r->p;
	struct counter c = { 0 };
	size_t b, e;
	int rc = 0;

	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (is_cpu(p, s) ||
		    (s->values[GS_V_GPU_SAMPLES] <= 0 && s->values[GS_V_GPU_NOT_ISSUED] <= 0))
			continue;
		rc = gpu_count(r, &c, s);
	}
	gs_hmap_free(&c.index);
	r->cnt = c.e;
	r->n_cnt = c.n;
	if (rc)
		return rc;
	qsort(r->cnt, r->n_cnt, sizeof(*r->cnt), cmp_cnt);
	gs_rpt_cnt_range(r, GS_RPT_REASON, 0, &b, &e);
	if (e > b) {
		r->top_reason = (gs_str)r->cnt[b].a;
		r->top_reason_n = r->cnt[b].v;
	}
	gs_rpt_cnt_range(r, GS_RPT_KERNEL, 0, &b, &e);
	if (e > b)
		r->top_kernel = (uint32_t)r->cnt[b].a;
	return 0;
}

/* ---- entry ---------------------------------------------------------------- */

/* Totals, each stack's CPU samples, and the frame kind of each function. */
static void totals(struct gs_rpt *r, int64_t *stack_cpu)
{
	const struct gs_profile *p = r->p;

	for (uint32_t i = p->n_locations; i > 0; i--) { /* first location wins */
		const struct gs_location *l = gs_profile_location(p, i);
		for (uint32_t k = 0; k < l->n_lines; k++)
			r->fn_kind[p->lines[l->first_line + k].function] = l->kind;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (is_cpu(p, s)) {
			r->cpu_total += s->values[GS_V_SAMPLES];
			stack_cpu[s->stack] += s->values[GS_V_SAMPLES];
		} else {
			r->gpu_total += s->values[GS_V_GPU_SAMPLES];
			r->gpu_ni += s->values[GS_V_GPU_NOT_ISSUED];
		}
	}
}

int gs_rpt_analyze(const struct gs_profile *p, struct gs_rpt *r)
{
	int64_t *stack_cpu = calloc(p->n_stacks + 1, sizeof(*stack_cpu));
	int rc;

	memset(r, 0, sizeof(*r));
	r->p = p;
	r->fn_kind = calloc(p->n_functions + 1, 1);
	if (!stack_cpu || !r->fn_kind) {
		free(stack_cpu);
		return -ENOMEM;
	}
	totals(r, stack_cpu);
	rc = r->cpu_total ? top_functions(r, stack_cpu) : 0;
	free(stack_cpu);
	if (!rc)
		rc = threads_and_processes(r);
	if (!rc && r->gpu_total > 0)
		rc = gpu_counts(r);
	return rc;
}

void gs_rpt_free(struct gs_rpt *r)
{
	free(r->fn_kind);
	free(r->by_self);
	free(r->by_total);
	free(r->threads);
	free(r->proc_cpu);
	free(r->groups);
	free(r->proc_group);
	free(r->cnt);
	memset(r, 0, sizeof(*r));
}
