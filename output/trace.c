// SPDX-License-Identifier: MIT
/*
 * Chrome trace-event JSON (`--format trace`, PREFIX.trace.json) for Perfetto
 * UI and chrome://tracing (speedscope's importer mis-nests it).  Trace Event Format:
 * JSON object {"traceEvents":[...], "displayTimeUnit", "otherData"}; "ts"
 * and "dur" in microseconds from the profile start, slices on a 125 ns grid
 * (3 exact decimals, see grid()).
 *
 * Per process a process_name (comm, role, rank) and process_sort_index
 * (main processes first); per thread a thread_name (comm).  Per thread, on
 * the wall-clock axis of output/timeline.c:
 *   - state slices ("X", cat "state"): name running / runnable / blocked,
 *     args category (output/walltime.c) and, when blocked, wait (the
 *     leaf-most user-space frame); one slice per contiguous stretch of one
 *     state and category;
 *   - inside each, its stack as nested "X" slices (cat "stack"), root
 *     outermost, one slice per frame for as long as consecutive samples
 *     share it (a flame chart over time).  Where a stack has Python
 *     frames, the interpreter's native frames between them are left out
 *     (the speedscope and pprof files keep them): the Python frames, then
 *     at most 16 frames below the leaf-most one (the call that waits:
 *     ffi, cuStreamSynchronize, poll, the kernel).  A parent is written before its
 *     children, which never outlast it, so equal ts/dur nest in file order
 *     as the format's readers expect.
 * Training steps (gs_profile_label_steps): per process, a track "steps
 * (thread TID)" with one slice per step and its phases nested
 * (step_track).
 * A blocked stretch whose waker thread is known (waker_tid label) gets a
 * flow arrow ("s" / "f", cat "waker") from the waker's track to the
 * wakee's at the stretch's end.
 * GPU PC-sample batches: instant events ("i", thread scope) on a track
 * "GPU<n> PC samples" of the launching process, name = kernel, args
 * samples, stall reason and launch site.
 * Counter tracks ("C" events) of p->counters: each process's GPU memory
 * (device bytes live through the driver, session/memory.c) over time.
 *
 * Bounding for long runs: adjacent identical samples are merged first (one
 * slice per stretch, not per sample); at most max_events events
 * (GS_TRACE_MAX_EVENTS) are written: when the full trace would be larger,
 * one counting pass (frame slices per depth) picks the deepest stack depth
 * (16, 8, 4, 2, 1, 0 frames under each state slice) that fits, recorded
 * as otherData.stack_depth next to otherData.max_events;
 * if even state slices alone do not fit, events past the cap are dropped
 * (threads in order, main process and main thread first) and counted in
 * otherData.dropped_events with a note, never silently.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"

#define MAX_DF_PER_LOC 66
#define GPU_TID_BASE   0x40000000u /* synthetic tids of the GPU tracks */
#define STEP_TID       0x50000000u /* synthetic tid of a process's step track */
#define COUNT_DEPTHS   17          /* depths counted apart: 0..15, then the rest */

struct tr {
	const struct gs_profile *p;
	struct gs_wbuf *w;
	size_t max_events, n_events, dropped;
	bool counting;                /* a pass that only counts events */
	uint32_t depth_limit;         /* stack frames under a state slice */
	uint64_t opens[COUNT_DEPTHS]; /* counting: frame slices at depth d (the last: deeper) */
	/* stack -> root-first display frames (cached) */
	struct gs_dframe *pool;
	size_t n_pool, cap_pool;
	size_t *off;
	uint32_t *len;
	/* one thread's merged runs; per run, frames shared with the one before
	 * and the next run sharing fewer (segment_frames) */
	struct run *runs;
	uint32_t *lcp, *nxt;
	size_t *ends, cap_ends;      /* per depth: the run a frame slice ends before */
	uint8_t *cat;                /* per (stack, state): category, 0xff = not yet */
	bool *steps_done;            /* per p->steps: its slice written (step_track) */
	struct gs_hmap pid_of;       /* tid -> pid, of the CPU contexts (waker flows) */
	uint64_t flows;              /* flow ids given */
	struct gs_tl_lanes lanes;    /* exited workers merged by slot (timeline.c) */
	uint32_t lane_pid, lane_tid; /* the lane being written: its events' pid, tid */
};

struct run {
	uint64_t start, end;
	uint32_t sample; /* first sample of the run */
	uint8_t state;   /* enum st */
	uint8_t cat;     /* enum gs_wall_cat */
};

enum st { ST_RUNNING, ST_RUNNABLE, ST_BLOCKED };
static const char *const st_name[] = { "running", "runnable", "blocked" };

static enum st state_of(const struct gs_profile *p, const struct gs_sample *s)
{
	gs_str l = gs_profile_ctx(p, s)->str_labels[GS_SL_THREAD_STATE];
	if (s->values[GS_V_OFFCPU_NS] <= 0)
		return ST_RUNNING;
	return l && !strcmp(gs_profile_str(p, l), "runnable") ? ST_RUNNABLE : ST_BLOCKED;
}

/* Drop the native frames between Python frames (root-first f[0..n)),
 * keeping at most 16 below the leaf-most Python frame; returns the count. */
static uint32_t keep_python_frames(struct gs_dframe *f, uint32_t n)
{
	uint32_t last = n, k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (f[i].type == GS_DF_PYLINE)
			last = i;
	if (last == n)
		return n;
	for (uint32_t i = 0; i < n; i++)
		if (f[i].type == GS_DF_PYLINE || (i > last && i <= last + 16))
			f[k++] = f[i];
	return k;
}

static int stack_dframes(struct tr *t, uint32_t st, const struct gs_dframe **out, uint32_t *n)
{
	if (t->off[st] == SIZE_MAX) {
		const struct gs_stack *k = &t->p->stacks[st];
		size_t start = t->n_pool;
		for (uint32_t i = k->n; i-- > 0;) { /* stored leaf first */
			if (t->cap_pool - t->n_pool < MAX_DF_PER_LOC) {
				size_t nc = t->cap_pool ? t->cap_pool * 2 : 4096;
				struct gs_dframe *np = realloc(t->pool, nc * sizeof(*np));
				if (!np)
					return -ENOMEM;
				t->pool = np;
				t->cap_pool = nc;
			}
			t->n_pool += gs_location_dframes(t->p, t->p->stack_locs[k->first + i],
							 t->pool + t->n_pool, MAX_DF_PER_LOC);
		}
		t->off[st] = start;
		t->len[st] = t->n_pool > start ? keep_python_frames(t->pool + start,
								    (uint32_t)(t->n_pool - start))
					       : 0; /* the pool is NULL until a frame */
	}
	*n = t->len[st];
	*out = *n ? t->pool + t->off[st] : NULL;
	return 0;
}

/* ---- JSON pieces ---------------------------------------------------------- */


static void put_us(struct gs_wbuf *w, uint64_t ns)
{
	char b[32];
	snprintf(b, sizeof(b), "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
	gs_wbuf_puts(w, b);
}

/* Start an event: ,{"ph":"X","pid":P,"tid":T,"name": ... (false if over the cap). */
static bool event_head(struct tr *t, const char *ph, uint32_t pid, uint32_t tid)
{
	if (t->counting) {
		t->n_events++;
		return false;
	}
	if (t->n_events >= t->max_events) {
		t->dropped++;
		return false;
	}
	struct gs_wbuf *w = t->w;
	gs_wbuf_puts(w, t->n_events++ ? ",\n{\"ph\":\"" : "\n{\"ph\":\"");
	gs_wbuf_puts(w, ph);
	gs_wbuf_puts(w, "\",\"pid\":");
	gs_wbuf_u64(w, pid);
	gs_wbuf_puts(w, ",\"tid\":");
	gs_wbuf_u64(w, tid);
	gs_wbuf_puts(w, ",\"name\":");
	return true;
}

/* Slice bounds on a 125 ns grid: multiples of 1/8 us print exactly in 3
 * decimals and are exact doubles, so ts + dur, added in doubles as the
 * readers do, is exactly the end.  With ns-exact decimals the sum could
 * land one ulp past the parent's end (186467.557 + 9573.197 >
 * 196040.754) and a child ending with its parent seemed to outlast it:
 * readers mis-nested the stack (speedscope: "Tried to end ... Doing nothing
 * instead").  Rounding is monotonic, so nesting and order are kept. */
static uint64_t grid(uint64_t ns)
{
	return (ns + 62) / 125 * 125;
}

static void put_span(struct gs_wbuf *w, const char *cat, uint64_t start, uint64_t end)
{
	gs_wbuf_puts(w, ",\"cat\":\"");
	gs_wbuf_puts(w, cat);
	gs_wbuf_puts(w, "\",\"ts\":");
	put_us(w, grid(start));
	gs_wbuf_puts(w, ",\"dur\":");
	put_us(w, grid(end) - grid(start));
}

static void meta(struct tr *t, const char *what, uint32_t pid, uint32_t tid, const char *key,
		 const char *sval, int64_t ival)
{
	if (!event_head(t, "M", pid, tid))
		return;
	gs_json_str(t->w, what);
	gs_wbuf_puts(t->w, ",\"args\":{\"");
	gs_wbuf_puts(t->w, key);
	gs_wbuf_puts(t->w, "\":");
	if (sval)
		gs_json_str(t->w, sval);
	else
		gs_wbuf_i64(t->w, ival);
	gs_wbuf_puts(t->w, "}}");
}

/* ---- names ------------------------------------------------------------------ */

static void process_names(struct tr *t, const uint32_t *idx, size_t n)
{
	const struct gs_profile *p = t->p;
	uint32_t last = UINT32_MAX;
	int64_t order = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gs_sample *s = &p->samples[idx[i]];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		uint32_t merged, pid = (uint32_t)(gs_tl_lane(&t->lanes, p, s, &merged) >> 32);
		if (pid == last)
			continue;
		last = pid;
		if (merged && pid != sc->pid) /* merged workers lie in their parent */
			continue;
		const struct gs_process *pr = gs_find_process(p, sc->pid);
		const char *comm = pr && pr->comm    ? gs_profile_str(p, pr->comm)
				   : sc->thread_name ? gs_profile_str(p, sc->thread_name)
						     : "?";
		const char *role = sc->process_role ? gs_profile_str(p, sc->process_role)
				   : pr && pr->role ? gs_profile_str(p, pr->role)
						    : NULL;
		char name[256];
		int k = snprintf(name, sizeof(name), "%s", comm);
		if (role && k > 0 && (size_t)k < sizeof(name))
			k += snprintf(name + k, sizeof(name) - (size_t)k, " (%s)", role);
		if ((sc->num_set & (1u << GS_NL_RANK)) && k > 0 && (size_t)k < sizeof(name))
			snprintf(name + k, sizeof(name) - (size_t)k, " rank %" PRId64,
				 sc->num_labels[GS_NL_RANK]);
		meta(t, "process_name", sc->pid, 0, "name", name, 0);
		meta(t, "process_sort_index", sc->pid, 0, "sort_index", NULL, order++);
	}
}

/* ---- one thread --------------------------------------------------------- */

/* Merge contiguous items of one (stack, state) into runs; returns count. */
static size_t make_runs(struct tr *t, const struct gs_tl_item *it, size_t n)
{
	const struct gs_profile *p = t->p;
	size_t nr = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gs_sample *s = &p->samples[it[i].sample];
		enum st st = state_of(p, s);
		struct run *prev = nr ? &t->runs[nr - 1] : NULL;
		if (prev && prev->end == it[i].start && prev->state == st &&
		    p->samples[prev->sample].stack == s->stack) {
			prev->end = it[i].end;
			continue;
		}
		uint8_t *cat = &t->cat[(size_t)s->stack * 3 + st];
		if (*cat == 0xff) {
			int c = gs_wall_classify(p, s);
			*cat = (uint8_t)(c < 0 ? 0 : c);
		}
		t->runs[nr++] = (struct run){ .start = it[i].start,
					      .end = it[i].end,
					      .sample = it[i].sample,
					      .state = (uint8_t)st,
					      .cat = *cat };
	}
	return nr;
}

static void state_slice(struct tr *t, const struct run *r, uint64_t end)
{
	const struct gs_sample *s = &t->p->samples[r->sample];
	char wait[256];
	/* under 125 ns: nothing on the grid (its frames neither) */
	if (grid(end) == grid(r->start) || !event_head(t, "X", t->lane_pid, t->lane_tid))
		return;
	gs_json_str(t->w, st_name[r->state]);
	put_span(t->w, "state", r->start, end);
	gs_wbuf_puts(t->w, ",\"args\":{\"category\":");
	gs_json_str(t->w, gs_wall_cat_name[r->cat]);
	if (r->state == ST_BLOCKED) {
		gs_wbuf_puts(t->w, ",\"wait\":");
		gs_json_str(t->w, gs_wait_name(t->p, s->stack, wait, sizeof(wait)));
	}
	gs_wbuf_puts(t->w, "}}");
}

static void frame_slice(struct tr *t, const struct gs_dframe *f, uint64_t start, uint64_t end)
{
	char name[512];
	if (grid(end) == grid(start) || !event_head(t, "X", t->lane_pid, t->lane_tid))
		return;
	gs_json_str(t->w, gs_dframe_name(t->p, f, name, sizeof(name)));
	put_span(t->w, "stack", start, end);
	gs_wbuf_putc(t->w, '}');
}

static const struct gs_dframe *run_frames(struct tr *t, size_t i, uint32_t *n)
{
	uint32_t st = t->p->samples[t->runs[i].sample].stack;
	*n = t->len[st] < t->depth_limit ? t->len[st] : t->depth_limit;
	return *n ? t->pool + t->off[st] : NULL;
}

/* Frames of run i shared with run i - 1 (limited to depth_limit). */
static uint32_t common_frames(struct tr *t, size_t i)
{
	uint32_t nf, n_prev, c = 0;
	const struct gs_dframe *f = run_frames(t, i, &nf);
	const struct gs_dframe *prev = run_frames(t, i - 1, &n_prev);
	while (c < nf && c < n_prev && gs_dframe_eq(&f[c], &prev[c]))
		c++;
	return c;
}

/* Runs [b, e) are one state segment: frames as nested slices; a frame at
 * depth d opened at run i lasts until the first later run j sharing at
 * most d frames with the run before it (lcp[j] <= d).  nxt[j] (the first
 * k > j with lcp[k] < lcp[j]) lets that search skip every run in
 * between, so a segment costs its frames, not frames times runs. */
static int segment_frames(struct tr *t, const struct gs_sample *s0, size_t b, size_t e)
{
	const struct gs_profile *p = t->p;
	uint32_t *lcp = t->lcp, *nxt = t->nxt;
	for (size_t i = b; i < e; i++) { /* fill the cache first: the pool may move */
		const struct gs_dframe *f;
		uint32_t nf;
		if (stack_dframes(t, p->samples[t->runs[i].sample].stack, &f, &nf))
			return -ENOMEM;
	}
	for (size_t i = b; i < e; i++)
		lcp[i] = i > b ? common_frames(t, i) : 0;
	for (size_t j = e; j-- > b;) {
		size_t k = j + 1;
		while (k < e && lcp[k] >= lcp[j])
			k = nxt[k];
		nxt[j] = (uint32_t)k;
	}
	for (size_t i = b; i < e; i++) {
		uint32_t nf;
		const struct gs_dframe *f = run_frames(t, i, &nf);
		if (t->counting) { /* a frame at depth d opens here whatever the limit */
			for (uint32_t d = lcp[i]; d < nf; d++)
				t->opens[d < COUNT_DEPTHS - 1 ? d : COUNT_DEPTHS - 1]++;
			continue;
		}
		if (nf > lcp[i] && GS_GROW(t->ends, t->cap_ends, nf))
			return -ENOMEM;
		size_t j = i + 1;
		for (uint32_t d = nf; d-- > lcp[i];) { /* deepest first: ends only move later */
			while (j < e && lcp[j] > d)
				j = nxt[j];
			t->ends[d] = j;
		}
		for (uint32_t d = lcp[i]; d < nf; d++) /* parents first */
			frame_slice(t, &f[d], t->runs[i].start, t->runs[t->ends[d] - 1].end);
	}
	return 0;
}

/* A blocked sample whose wait names its waker thread (waker_tid,
 * session/wakers.c), the last part of its wait: a flow arrow from the
 * waker's track to the wakee's at the sample's end (the wakeup), "s" on the
 * waker bound to its slice there, "f" with "bp":"e" on the wakee bound to
 * the slice ending there. */
static void waker_flow(struct tr *t, const struct gs_tl_item *it)
{
	const struct gs_sample *s = &t->p->samples[it->sample];
	const struct gs_sample_ctx *c = gs_profile_ctx(t->p, s);
	uint32_t wtid = (uint32_t)c->num_labels[GS_NL_WAKER_TID];
	const uint64_t *wpid = gs_hmap_get(&t->pid_of, wtid), *lane;
	uint64_t at = grid(it->end), id = t->flows + 1, from;

	if (state_of(t->p, s) != ST_BLOCKED || !(c->num_set & (1u << GS_NL_WAKER_TID)) || !wpid ||
	    at < 125)
		return;
	if (!t->counting && t->n_events + 2 > t->max_events) {
		t->dropped += 2; /* both or neither */
		return;
	}
	/* the waker's track: its lane when it is a merged worker's thread */
	from = *wpid << 32 | wtid;
	if ((lane = gs_hmap_get(&t->lanes.of, from)))
		from = *lane;
	if (!event_head(t, "s", (uint32_t)(from >> 32), (uint32_t)from)) {
		event_head(t, "f", t->lane_pid, t->lane_tid); /* counting: counted too */
		return;
	}
	t->flows++;
	gs_json_str(t->w, "woken by");
	gs_wbuf_puts(t->w, ",\"cat\":\"waker\",\"id\":");
	gs_wbuf_u64(t->w, id);
	gs_wbuf_puts(t->w, ",\"ts\":");
	put_us(t->w, at - 125); /* inside the waker's slice, before the wakee's end */
	gs_wbuf_puts(t->w, "}");
	if (!event_head(t, "f", t->lane_pid, t->lane_tid))
		return;
	gs_json_str(t->w, "woken by");
	gs_wbuf_puts(t->w, ",\"cat\":\"waker\",\"bp\":\"e\",\"id\":");
	gs_wbuf_u64(t->w, id);
	gs_wbuf_puts(t->w, ",\"ts\":");
	put_us(t->w, at);
	gs_wbuf_puts(t->w, "}");
}

/* tid -> pid of every thread with CPU contexts (a waker's track). */
static int map_threads(struct tr *t)
{
	for (uint32_t i = 0; i < t->p->n_ctxs; i++) {
		const struct gs_sample_ctx *c = &t->p->ctxs[i];
		uint64_t *v;

		if (c->cuda_device >= 0 || !c->tid)
			continue;
		if (!(v = gs_hmap_slot(&t->pid_of, c->tid, NULL)))
			return -ENOMEM;
		*v = c->pid;
	}
	return 0;
}

static int write_thread(struct tr *t, const struct gs_tl_item *it, size_t n)
{
	const struct gs_profile *p = t->p;
	const struct gs_sample *s0 = &p->samples[it[0].sample];
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, s0);
	uint64_t lane = gs_tl_lane(&t->lanes, p, s0, NULL);
	char name[256];
	bool merged = gs_tl_lane_name(&t->lanes, p, s0, name, sizeof(name));
	t->lane_pid = (uint32_t)(lane >> 32);
	t->lane_tid = (uint32_t)lane;
	meta(t, "thread_name", t->lane_pid, t->lane_tid, "name",
	     merged            ? name
	     : sc->thread_name ? gs_profile_str(p, sc->thread_name)
			       : "?",
	     0);
	meta(t, "thread_sort_index", t->lane_pid, t->lane_tid, "sort_index", NULL,
	     t->lane_tid == t->lane_pid ? 0 : t->lane_tid & ~GS_TL_LANE_TID);
	size_t nr = make_runs(t, it, n);
	/* the parts one wait is shared by (session/wakers.c) have its start */
	for (size_t i = 0; i < n; i++)
		if (i + 1 == n ||
		    p->samples[it[i + 1].sample].time_ns != p->samples[it[i].sample].time_ns)
			waker_flow(t, &it[i]);
	for (size_t b = 0; b < nr;) {
		size_t e = b + 1;
		while (e < nr && t->runs[e].start == t->runs[e - 1].end &&
		       t->runs[e].state == t->runs[b].state && t->runs[e].cat == t->runs[b].cat)
			e++;
		state_slice(t, &t->runs[b], t->runs[e - 1].end);
		int rc = segment_frames(t, s0, b, e);
		if (rc)
			return rc;
		b = e;
	}
	return 0;
}

/* ---- GPU batches -------------------------------------------------------- */

static void gpu_events(struct tr *t)
{
	const struct gs_profile *p = t->p;
	char name[512], site[512];
	bool named[64] = { false };
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *c = gs_profile_ctx(p, s);
		if (c->cuda_device < 0 || s->values[GS_V_GPU_SAMPLES] <= 0)
			continue;
		uint32_t tid = GPU_TID_BASE + (uint32_t)(c->cuda_device & 63);
		if (!named[c->cuda_device & 63]) {
			named[c->cuda_device & 63] = true;
			snprintf(name, sizeof(name), "GPU%d PC samples", c->cuda_device);
			meta(t, "thread_name", c->pid, tid, "name", name, 0);
		}
		const struct gs_stack *st = &p->stacks[s->stack];
		struct gs_dframe df[MAX_DF_PER_LOC];
		snprintf(name, sizeof(name), "[GPU] ?");
		snprintf(site, sizeof(site), "?");
		for (uint32_t k = 0; k < st->n;
		     k++) { /* leaf first: kernel, then the launch site */
			uint32_t lid = p->stack_locs[st->first + k];
			const struct gs_location *l = gs_profile_location(p, lid);
			size_t nd = gs_location_dframes(p, lid, df, MAX_DF_PER_LOC);
			if (l->kind == GS_FRAME_GPU_PC && nd)
				gs_dframe_name(p, &df[0], name, sizeof(name));
			else if (l->kind == GS_FRAME_PYTHON && nd) {
				gs_dframe_name(p, &df[nd - 1], site, sizeof(site));
				break;
			}
		}
		if (!event_head(t, "i", c->pid, tid))
			continue;
		gs_json_str(t->w, name);
		gs_wbuf_puts(t->w, ",\"cat\":\"gpu\",\"s\":\"t\",\"ts\":");
		put_us(t->w, s->time_ns);
		gs_wbuf_puts(t->w, ",\"args\":{\"samples\":");
		gs_wbuf_i64(t->w, s->values[GS_V_GPU_SAMPLES]);
		gs_wbuf_puts(t->w, ",\"stall_reason\":");
		gs_json_str(t->w, c->cuda_stall_reason ? gs_profile_str(p, c->cuda_stall_reason)
						       : "unknown");
		gs_wbuf_puts(t->w, ",\"launch_site\":");
		gs_json_str(t->w, site);
		gs_wbuf_puts(t->w, "}}");
	}
}

/* ---- training steps ----------------------------------------------------- */

/* Per process with steps, a track "steps (thread TID)" next to the thread
 * whose marks made them: one slice "step N" per step over the time its
 * samples are labelled with it (args wall_us: mark to mark, absent for the
 * first step, whose start was not seen), and inside it the step's phases:
 * each stretch of that thread's timeline (items, laid out as its state
 * slices are) in one phase, cut to the step.  items NULL: the thread has
 * no laid-out samples, steps only. */
static void step_slice(struct tr *t, const struct gs_step *st)
{
	char name[32];

	if (!event_head(t, "X", st->pid, STEP_TID))
		return;
	snprintf(name, sizeof(name), "step %u", st->number);
	gs_json_str(t->w, name);
	put_span(t->w, "step", st->start_ns, st->end_ns);
	gs_wbuf_puts(t->w, ",\"args\":{\"step\":");
	gs_wbuf_u64(t->w, st->number);
	if (st->wall_ns) {
		gs_wbuf_puts(t->w, ",\"wall_us\":");
		put_us(t->w, st->wall_ns);
	}
	gs_wbuf_puts(t->w, "}}");
}

static gs_str phase_of(const struct gs_profile *p, const struct gs_tl_item *it)
{
	return gs_profile_ctx(p, &p->samples[it->sample])->str_labels[GS_SL_PHASE];
}

/* The phases of step st from items[*j..n) (*j: the first item that may
 * reach into it, advanced for the next step). */
static void phase_slices(struct tr *t, const struct gs_step *st, const struct gs_tl_item *items,
			 size_t n, size_t *j)
{
	const struct gs_profile *p = t->p;
	size_t k;

	while (*j < n && items[*j].end <= st->start_ns)
		(*j)++;
	for (k = *j; k < n && items[k].start < st->end_ns;) {
		gs_str ph = phase_of(p, &items[k]);
		uint64_t s0 = items[k].start > st->start_ns ? items[k].start : st->start_ns;
		uint64_t e0 = items[k].end;

		for (k++; k < n && items[k].start <= e0 && items[k].start < st->end_ns &&
			  phase_of(p, &items[k]) == ph;
		     k++)
			e0 = items[k].end > e0 ? items[k].end : e0;
		if (e0 > st->end_ns)
			e0 = st->end_ns;
		if (!ph || e0 <= s0 || !event_head(t, "X", st->pid, STEP_TID))
			continue;
		gs_json_str(t->w, gs_profile_str(p, ph));
		put_span(t->w, "phase", s0, e0);
		gs_wbuf_puts(t->w, "}");
	}
	while (k > *j && items[k - 1].end > st->end_ns)
		k--; /* an item reaching past the step starts the next one */
	*j = k;
}

/* The steps of (pid, tid), once: done[] marks p->steps already written. */
static void step_track(struct tr *t, uint32_t pid, uint32_t tid, const struct gs_tl_item *items,
		       size_t n)
{
	const struct gs_profile *p = t->p;
	bool named = false;
	size_t j = 0;
	char name[64];

	for (size_t i = 0; i < p->n_steps; i++) {
		const struct gs_step *st = &p->steps[i];

		if (st->pid != pid || st->tid != tid || t->steps_done[i])
			continue;
		if (!named) {
			snprintf(name, sizeof(name), "steps (thread %u)", tid);
			meta(t, "thread_name", pid, STEP_TID, "name", name, 0);
			named = true;
		}
		t->steps_done[i] = true;
		step_slice(t, st);
		if (items)
			phase_slices(t, st, items, n, &j);
	}
}

/* ---- entry ---------------------------------------------------------------- */

/* Counter tracks ("C" events, one track per process and counter name,
 * args {"bytes": N}): N holds from ts until the next point. */
static void counter_events(struct tr *t)
{
	const struct gs_profile *p = t->p;

	for (size_t i = 0; i < p->n_counters; i++) {
		const struct gs_counter_point *c = &p->counters[i];

		if (!event_head(t, "C", c->pid, 0))
			continue;
		gs_json_str(t->w, gs_profile_str(p, c->name));
		gs_wbuf_puts(t->w, ",\"ts\":");
		put_us(t->w, grid(c->time_ns));
		gs_wbuf_puts(t->w, ",\"args\":{\"bytes\":");
		gs_wbuf_i64(t->w, c->value);
		gs_wbuf_puts(t->w, "}}");
	}
}

/* Every event (or, counting, their number in t->n_events). */
static int emit_all(struct tr *t, const uint32_t *idx, size_t n, struct gs_tl_item *items)
{
	const struct gs_profile *p = t->p;
	int rc = 0;
	memset(t->steps_done, 0, p->n_steps * sizeof(*t->steps_done)); /* each pass */
	process_names(t, idx, n);
	for (size_t b = 0; b < n && !rc;) {
		size_t e = gs_timeline_thread_end(p, &t->lanes, idx, b, n);
		gs_timeline_layout(p, idx + b, e - b, items);
		rc = write_thread(t, items, e - b);
		if (p->n_steps) {
			const struct gs_sample_ctx *c = gs_profile_ctx(p, &p->samples[idx[b]]);

			step_track(t, c->pid, c->tid, items, e - b);
		}
		b = e;
	}
	gpu_events(t);
	for (size_t i = 0; i < p->n_steps; i++) /* threads without laid-out samples */
		step_track(t, p->steps[i].pid, p->steps[i].tid, NULL, 0);
	counter_events(t);
	return rc;
}

/* The deepest stack depth whose trace fits max_events (0 if none does).
 * One counting pass: whether a frame slice opens at depth d does not
 * depend on the limit, so the events at limit D are the others plus the
 * frame slices counted at depths below D. */
static int pick_depth(struct tr *t, const uint32_t *idx, size_t n, struct gs_tl_item *items)
{
	static const uint32_t depths[] = { UINT32_MAX, 16, 8, 4, 2, 1, 0 };
	t->counting = true;
	t->depth_limit = UINT32_MAX;
	t->n_events = 0;
	memset(t->opens, 0, sizeof(t->opens));
	int rc = emit_all(t, idx, n, items);
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		uint64_t events = t->n_events;
		for (uint32_t d = 0; d < COUNT_DEPTHS && d < depths[i]; d++)
			events += t->opens[d];
		t->depth_limit = depths[i];
		if (events <= t->max_events)
			break;
	}
	t->counting = false;
	t->n_events = 0;
	return rc;
}

static int write_all(struct tr *t)
{
	const struct gs_profile *p = t->p;
	uint32_t *idx;
	size_t n;
	int rc = gs_tl_lanes_build(p, &t->lanes);
	rc = rc ? rc : gs_timeline_order(p, &t->lanes, &idx, &n);
	if (rc)
		return rc;
	struct gs_tl_item *items = malloc(sizeof(*items) * (n + 1));
	t->runs = malloc(sizeof(*t->runs) * (n + 1));
	t->lcp = malloc(sizeof(*t->lcp) * (n + 1));
	t->nxt = malloc(sizeof(*t->nxt) * (n + 1));
	if (!items || !t->runs || !t->lcp || !t->nxt || n >= UINT32_MAX) {
		rc = -ENOMEM;
		goto out;
	}
	rc = pick_depth(t, idx, n, items);
	gs_wbuf_puts(t->w, "{\"traceEvents\":[");
	rc = rc ? rc : emit_all(t, idx, n, items);
	gs_wbuf_puts(
	    t->w,
	    "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"exporter\":\"gpusample@" GS_VERSION
	    "\",\"events\":");
	gs_wbuf_u64(t->w, t->n_events);
	gs_wbuf_puts(t->w, ",\"max_events\":");
	gs_wbuf_u64(t->w, t->max_events);
	gs_wbuf_puts(t->w, ",\"dropped_events\":");
	gs_wbuf_u64(t->w, t->dropped);
	if (t->depth_limit != UINT32_MAX) {
		gs_wbuf_puts(t->w, ",\"stack_depth\":");
		gs_wbuf_u64(t->w, t->depth_limit);
	}
	if (t->dropped)
		gs_wbuf_puts(t->w, ",\"note\":\"event cap reached: later threads, GPU batches and "
				   "counter tracks are incomplete; the pprof and speedscope files "
				   "have every sample\"");
	else if (t->depth_limit != UINT32_MAX)
		gs_wbuf_puts(
		    t->w,
		    ",\"note\":\"event cap: stacks cut to stack_depth frames under each state "
		    "slice; the pprof and speedscope files have them whole\"");
	gs_wbuf_puts(t->w, "}}\n");
out:
	free(idx);
	free(items);
	return rc;
}

static int trace_body(void *ctx, struct gs_wbuf *w)
{
	struct tr *t = ctx;
	t->w = w;
	return write_all(t);
}

int gs_write_trace_capped(const struct gs_profile *p, const char *path, size_t max_events,
			  char *err, size_t errlen)
{
	struct tr t = { .p = p, .max_events = max_events };
	t.off = malloc(sizeof(*t.off) * (p->n_stacks + 1));
	t.len = malloc(sizeof(*t.len) * (p->n_stacks + 1));
	t.cat = malloc((size_t)(p->n_stacks + 1) * 3);
	t.steps_done = calloc(p->n_steps + 1, sizeof(*t.steps_done));
	int rc;
	if (!t.off || !t.len || !t.cat || !t.steps_done) {
		rc = gs_output_fail(err, errlen, -ENOMEM, "cannot write", path);
		goto out;
	}
	memset(t.off, 0xff, sizeof(*t.off) * (p->n_stacks + 1));
	memset(t.cat, 0xff, (size_t)(p->n_stacks + 1) * 3);
	if ((rc = map_threads(&t))) {
		rc = gs_output_fail(err, errlen, rc, "cannot write", path);
		goto out;
	}
	rc = gs_write_buffered(path, trace_body, &t, err, errlen);
out:
	free(t.pool);
	free(t.off);
	free(t.len);
	free(t.runs);
	free(t.lcp);
	free(t.nxt);
	free(t.ends);
	free(t.cat);
	free(t.steps_done);
	gs_hmap_free(&t.pid_of);
	gs_tl_lanes_free(&t.lanes);
	return rc;
}

int gs_write_trace(const struct gs_profile *p, const char *path, char *err, size_t errlen)
{
	return gs_write_trace_capped(p, path, GS_TRACE_MAX_EVENTS, err, errlen);
}
