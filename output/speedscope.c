// SPDX-License-Identifier: MIT
/*
 * speedscope JSON writer (https://www.speedscope.app/file-format-schema.json,
 * reference/output_formats.md §3.1, §5.4).
 *
 * One shared frame table; one "sampled" profile per CPU thread, all on one
 * wall-clock axis: startValue 0 = the profile start, endValue = its end (ns,
 * the same for every thread), samples laid out by output/timeline.c with
 * empty samples for the stretches where the thread was not seen, so Time
 * Order is a real timeline.  Off-CPU stretches end in a "[blocked] WAIT"
 * frame (WAIT = the leaf-most user-space frame, e.g. "[blocked] poll") or
 * "[runnable]" (waiting for a CPU) under their stack.  One "sampled"
 * profile per GPU device, unit "none", weight = GPU PC samples (base stall
 * family), stacks ending in "[GPU] kernel" -> inlined device functions ->
 * "file.cu:line" -> "[stall] reason".  Frames: native functions once per
 * function (file and start line when known); Python frames once per line,
 * "qualname (file:line)", because speedscope shows names, not lines.
 *
 * Size for long runs (bench/outputs.sh, bench/results_outputs.md): the
 * file grows with stack changes, not with samples.  A run of adjacent
 * samples whose written frames are the same (not only the same stack: two
 * stacks that differ only in addresses inside one native function print
 * alike) is one sample whose weight is the run's length; frames are
 * numbered by how many runs use them, so the hottest frames have the
 * shortest indices; each distinct frame list is rendered to text once.
 * Memory: per stack and frame, plus the sample order (4 bytes a sample) and
 * one thread's layout at a time (laid out twice: once to count, once to
 * write), never a copy of all samples.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"

#define MAX_DF_PER_LOC 66
#define NO_FRAME       UINT32_MAX

/* The frames written after a CPU sample's stack: none, "[blocked] WAIT",
 * "[runnable]". */
enum { V_CPU, V_BLOCKED, V_RUNNABLE, N_VARIANTS };

/* Time steps of the long-run policy: runs merged by key within each step
 * of the thread's timeline (in first-seen order), the finest step whose
 * file fits GS_SPEEDSCOPE_MAX_BYTES; the last one merges a whole thread. */
#define MS 1000000ULL
static const uint64_t step_ns[] = { 0,           10 * MS,      30 * MS,      100 * MS,
				    300 * MS,    1000 * MS,    3000 * MS,    10000 * MS,
				    30000 * MS,  60000 * MS,   120000 * MS,  300000 * MS,
				    600000 * MS, 1800000 * MS, 3600000 * MS, UINT64_MAX };
#define N_STEPS (sizeof(step_ns) / sizeof(step_ns[0]))

/* What a run writes: a canonical stack and its state frame.  Numbered
 * densely as first seen (key_of[stack * N_VARIANTS + variant]). */
struct key {
	uint32_t stack, lab;         /* lab: state frame or NO_FRAME */
	uint32_t text_off, text_len; /* its "[i,j,k" text; UINT32_MAX = not yet */
	uint32_t entries[N_STEPS];   /* samples it is written as at step i */
	uint32_t stamp[N_STEPS];     /* the last step (serial) it was seen in */
};

struct ss {
	const struct gs_profile *p;
	/* frame table, in first-seen order; rank[] = index written */
	struct gs_dframe *frames;
	size_t n_frames, cap_frames;
	struct gs_hmap fmap; /* gs_dframe_hash -> frame index */
	uint64_t *uses;      /* per frame: runs (GPU: entries) using it */
	size_t cap_uses;
	uint32_t *rank;
	/* stack -> root-first frame indices (cached; UINT32_MAX = not yet);
	 * stacks that print alike share canon[] (the first such stack) */
	uint32_t *stack_off, *stack_len, *canon;
	uint32_t *flist;
	size_t n_flist, cap_flist;
	struct gs_hmap smap; /* hash of a frame list -> stack */
	/* "[blocked] WAIT" / "[runnable]" frames: type SS_LABEL, fn = index */
	char **labels;
	size_t n_labels, cap_labels;
	uint32_t *blocked_label; /* per stack: frame index, NO_FRAME = not yet */
	uint32_t runnable_label;
	/* run keys (gap: the empty sample), and their texts */
	struct key *keys, gap;
	size_t n_keys, cap_keys;
	uint32_t *key_of;
	uint32_t serial[N_STEPS];     /* counting: steps seen so far, all threads */
	uint64_t bucket_end[N_STEPS]; /* counting: where the current one ends */
	int64_t runnable_str;         /* gs_str of "runnable", -1 if absent */
	uint64_t *weights;            /* writing: one thread's, in order */
	size_t n_weights, cap_weights;
	char *text;
	size_t n_text, cap_text;
	struct gs_tl_item *items;  /* one thread's layout */
	size_t *bounds, n_threads; /* thread t: order[bounds[t] .. bounds[t + 1]) */
	size_t max_bytes;          /* budget of the threads' samples */
	struct gs_tl_lanes lanes;  /* exited workers merged by slot (timeline.c) */
};

#define SS_LABEL 0xfe /* gs_dframe.type of a label frame */

struct frame_eq_ctx {
	const struct ss *s;
	const struct gs_dframe *f;
};

static bool frame_eq(const void *ctx, uint64_t v)
{
	const struct frame_eq_ctx *c = ctx;
	return gs_dframe_eq(&c->s->frames[v], c->f);
}

static int frame_index(struct ss *s, const struct gs_dframe *f, uint32_t *out)
{
	uint64_t h = gs_dframe_hash(f);
	struct frame_eq_ctx c = { s, f };
	uint64_t *v = gs_hmap_find_by(&s->fmap, h, frame_eq, &c);
	if (v) {
		*out = (uint32_t)*v;
		return 0;
	}
	if (s->n_frames >= UINT32_MAX - 1 || GS_GROW(s->uses, s->cap_uses, s->n_frames + 1) ||
	    gs_hmap_add(&s->fmap, h, s->n_frames) ||
	    GS_PUSH(s->frames, s->n_frames, s->cap_frames, *f))
		return -ENOMEM;
	s->uses[s->n_frames - 1] = 0;
	*out = (uint32_t)(s->n_frames - 1);
	return 0;
}

struct list_eq_ctx {
	const struct ss *s;
	const uint32_t *fr;
	uint32_t n;
};

static bool list_eq(const void *ctx, uint64_t st)
{
	const struct list_eq_ctx *c = ctx;
	return c->s->stack_len[st] == c->n &&
	       (!c->n || !memcmp(&c->s->flist[c->s->stack_off[st]], c->fr, c->n * sizeof(*c->fr)));
}

/* Frames of stack st appended at flist[start..]: keep them, or point st at
 * an earlier stack with the same list. */
static int set_canon(struct ss *s, uint32_t st, size_t start)
{
	uint32_t n = (uint32_t)(s->n_flist - start);
	const uint32_t *fr = n ? &s->flist[start] : NULL; /* flist is NULL until a frame */
	uint64_t h = gs_hash_bytes(fr, n * sizeof(uint32_t), n);
	struct list_eq_ctx c = { s, fr, n };
	uint64_t *v = gs_hmap_find_by(&s->smap, h, list_eq, &c);
	if (v) {
		s->canon[st] = (uint32_t)*v;
		s->stack_off[st] = s->stack_off[*v];
		s->n_flist = start;
	} else {
		if (gs_hmap_add(&s->smap, h, st))
			return -ENOMEM;
		s->canon[st] = st;
		s->stack_off[st] = (uint32_t)start;
	}
	s->stack_len[st] = n;
	return 0;
}

/* Root-first frame indices of stack st (cached). */
static int stack_frames(struct ss *s, uint32_t st, const uint32_t **out, uint32_t *n)
{
	if (s->stack_off[st] == UINT32_MAX) {
		const struct gs_stack *k = &s->p->stacks[st];
		const uint32_t *locs = gs_profile_stack_locs(s->p, k);
		size_t start = s->n_flist;
		struct gs_dframe df[MAX_DF_PER_LOC];
		for (uint32_t i = k->n; i-- > 0;) { /* stored leaf first */
			size_t nd = gs_location_dframes(s->p, locs[i], df, MAX_DF_PER_LOC);
			for (size_t j = 0; j < nd; j++) {
				uint32_t idx;
				if (frame_index(s, &df[j], &idx) ||
				    GS_PUSH(s->flist, s->n_flist, s->cap_flist, idx))
					return -ENOMEM;
			}
		}
		if (s->n_flist >= UINT32_MAX || set_canon(s, st, start))
			return -ENOMEM;
	}
	*n = s->stack_len[st];
	*out = *n ? &s->flist[s->stack_off[st]] : NULL;
	return 0;
}

/* Frame index of label text (linear: few distinct waits). */
static int label_frame(struct ss *s, const char *text, uint32_t *out)
{
	size_t i = 0;
	while (i < s->n_labels && strcmp(s->labels[i], text))
		i++;
	if (i == s->n_labels) {
		char *d = strdup(text);
		if (!d || GS_PUSH(s->labels, s->n_labels, s->cap_labels, d)) {
			free(d);
			return -ENOMEM;
		}
	}
	struct gs_dframe f = { .type = SS_LABEL, .fn = (uint32_t)i };
	return frame_index(s, &f, out);
}

/* The state frame of variant v under canonical stack c (made on first
 * use). */
static int state_frame(struct ss *s, uint32_t c, int v, uint32_t *lab)
{
	*lab = NO_FRAME;
	if (v == V_RUNNABLE) {
		if (s->runnable_label == NO_FRAME &&
		    label_frame(s, "[runnable]", &s->runnable_label))
			return -ENOMEM;
		*lab = s->runnable_label;
	} else if (v == V_BLOCKED) {
		if (s->blocked_label[c] == NO_FRAME) {
			char buf[300], wait[256];
			snprintf(buf, sizeof(buf), "[blocked] %s",
				 gs_wait_name(s->p, c, wait, sizeof(wait)));
			if (label_frame(s, buf, &s->blocked_label[c]))
				return -ENOMEM;
		}
		*lab = s->blocked_label[c];
	}
	return 0;
}

/* Run key of a CPU sample: its canonical stack and state frame. */
static int sample_key(struct ss *s, const struct gs_sample *sm, uint32_t *key)
{
	uint32_t st = sm->stack;
	int v = sm->values[GS_V_OFFCPU_NS] <= 0 ? V_CPU
		: (int64_t)gs_profile_ctx(s->p, sm)->str_labels[GS_SL_THREAD_STATE] ==
			s->runnable_str
		    ? V_RUNNABLE
		    : V_BLOCKED;
	uint32_t *k = &s->key_of[(size_t)st * N_VARIANTS + (size_t)v];
	if (*k != NO_FRAME) {
		*key = *k;
		return 0;
	}
	const uint32_t *fr;
	uint32_t nf, c, lab;
	if (stack_frames(s, st, &fr, &nf))
		return -ENOMEM;
	c = s->canon[st];
	uint32_t *ck = &s->key_of[(size_t)c * N_VARIANTS + (size_t)v];
	if (*ck == NO_FRAME) { /* the canonical stack's key: made once */
		struct key nk = { .stack = c, .text_off = UINT32_MAX };
		if (state_frame(s, c, v, &lab) || s->n_keys >= NO_FRAME - 1)
			return -ENOMEM;
		nk.lab = lab;
		if (GS_PUSH(s->keys, s->n_keys, s->cap_keys, nk))
			return -ENOMEM;
		*ck = (uint32_t)(s->n_keys - 1);
	}
	*key = *k = *ck;
	return 0;
}

static struct key *key_at(struct ss *s, uint32_t key)
{
	return key == NO_FRAME ? &s->gap : &s->keys[key];
}

/* ---- CPU threads ---------------------------------------------------------- */

static void profile_head(struct gs_wbuf *w, bool *first, const char *name, const char *unit)
{
	gs_wbuf_puts(w, *first ? "\n  {" : ",\n  {");
	*first = false;
	gs_wbuf_puts(w, "\"type\":\"sampled\",\"name\":");
	gs_json_str(w, name);
	gs_wbuf_puts(w, ",\"unit\":\"");
	gs_wbuf_puts(w, unit);
	gs_wbuf_puts(w, "\",\"startValue\":0,\"endValue\":");
}

static void thread_name(const struct gs_profile *p, const struct gs_tl_lanes *l,
			const struct gs_sample *s, char *buf, size_t len)
{
	const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
	if (gs_tl_lane_name(l, p, s, buf, len))
		return;
	const struct gs_process *pr = gs_find_process(p, sc->pid);
	const char *pcomm = pr && pr->comm ? gs_profile_str(p, pr->comm) : NULL;
	const char *tcomm = sc->thread_name ? gs_profile_str(p, sc->thread_name) : NULL;
	const char *role = sc->process_role ? gs_profile_str(p, sc->process_role)
			   : pr && pr->role ? gs_profile_str(p, pr->role)
					    : NULL;
	int n = snprintf(buf, len, "%s pid %u tid %u",
			 pcomm   ? pcomm
			 : tcomm ? tcomm
				 : "?",
			 sc->pid, sc->tid);
	if (tcomm && pcomm && strcmp(tcomm, pcomm) != 0 && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " \"%s\"", tcomm);
	if (role && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " (%s)", role);
}

/* One step of a thread's walk: a run of key (NO_FRAME: an empty sample
 * for a gap) from start, lasting weight ns. */
struct run {
	uint32_t key;
	uint64_t start, weight;
};
typedef int (*run_fn)(struct ss *s, void *ctx, const struct run *r);

/* Items it[0..n) are one thread on the axis [0, axis_end): runs of one key
 * without a gap become one sample, gaps (and the stretch to axis_end)
 * empty ones; fn sees each in order. */
static int walk_runs(struct ss *s, const struct gs_tl_item *it, size_t n, uint64_t axis_end,
		     run_fn fn, void *ctx)
{
	const struct gs_profile *p = s->p;
	uint64_t cursor = 0;
	int rc = 0;
	for (size_t i = 0; i < n && !rc;) {
		struct run r = { .start = it[i].start };
		uint32_t key2;
		if (sample_key(s, &p->samples[it[i].sample], &r.key))
			return -ENOMEM;
		struct run gap = { NO_FRAME, cursor, it[i].start - cursor };
		if (it[i].start > cursor && (rc = fn(s, ctx, &gap)))
			break;
		size_t j = i + 1;
		for (; j < n && it[j].start == it[j - 1].end; j++) {
			if (sample_key(s, &p->samples[it[j].sample], &key2))
				return -ENOMEM;
			if (key2 != r.key)
				break;
		}
		r.weight = it[j - 1].end - it[i].start;
		rc = fn(s, ctx, &r);
		cursor = it[j - 1].end;
		i = j;
	}
	struct run tail = { NO_FRAME, cursor, axis_end - cursor };
	if (!rc && axis_end > cursor)
		rc = fn(s, ctx, &tail);
	return rc;
}

/* Runs of one step, merged by key, handed on to fn at the step's end. */
struct merge {
	run_fn fn;
	void *ctx;
	uint64_t step, end;
	struct run *e;
	size_t n, cap;
	struct gs_hmap index; /* key + 1 -> entry */
};

static int merge_flush(struct ss *s, struct merge *m)
{
	int rc = 0;
	for (size_t i = 0; i < m->n && !rc; i++)
		rc = m->fn(s, m->ctx, &m->e[i]);
	m->n = 0;
	gs_hmap_clear(&m->index);
	return rc;
}

static int merge_run(struct ss *s, void *ctx, const struct run *r)
{
	struct merge *m = ctx;
	int rc = 0;
	if (m->n && r->start >= m->end && (rc = merge_flush(s, m)))
		return rc;
	if (!m->n)
		m->end = m->step == UINT64_MAX ? UINT64_MAX : (r->start / m->step + 1) * m->step;
	bool added;
	uint64_t *v = gs_hmap_slot(&m->index, (uint64_t)r->key + 1, &added);
	if (!v || (added && GS_PUSH(m->e, m->n, m->cap, *r)))
		return -ENOMEM;
	if (added)
		*v = m->n - 1;
	else
		m->e[*v].weight += r->weight;
	return 0;
}

/* walk_runs with runs merged per step (0: as they are). */
static int walk_thread(struct ss *s, const struct gs_tl_item *it, size_t n, uint64_t axis_end,
		       uint64_t step, run_fn fn, void *ctx)
{
	if (!step)
		return walk_runs(s, it, n, axis_end, fn, ctx);
	struct merge m = { .fn = fn, .ctx = ctx, .step = step };
	int rc = walk_runs(s, it, n, axis_end, merge_run, &m);
	rc = rc ? rc : merge_flush(s, &m);
	free(m.e);
	gs_hmap_free(&m.index);
	return rc;
}

/* Counting pass: per key the samples every step writes, and a thread's
 * on-CPU ns (which thread to open first).  Step i's buckets are numbered
 * across threads (serial[i]), so a key's stamp tells whether this bucket
 * already has it. */
static int count_run(struct ss *s, void *ctx, const struct run *r)
{
	struct key *k = key_at(s, r->key);
	k->entries[0]++;
	for (size_t i = 1; i < N_STEPS; i++) {
		if (r->start >= s->bucket_end[i]) { /* runs come in time order */
			s->bucket_end[i] = step_ns[i] == UINT64_MAX
					       ? UINT64_MAX
					       : (r->start / step_ns[i] + 1) * step_ns[i];
			s->serial[i]++;
		}
		if (k->stamp[i] != s->serial[i]) {
			k->stamp[i] = s->serial[i];
			k->entries[i]++;
		}
	}
	if (r->key != NO_FRAME && k->lab == NO_FRAME)
		*(int64_t *)ctx += (int64_t)r->weight;
	return 0;
}

/* The text of key's frame list, "[i,j,k" (written indices), made once. */
static int key_text(struct ss *s, uint32_t key, const char **out, uint32_t *len)
{
	if (key == NO_FRAME) {
		*out = "[";
		*len = 1;
		return 0;
	}
	struct key *k = &s->keys[key];
	if (k->text_off == UINT32_MAX) {
		const uint32_t *fr;
		uint32_t nf;
		char num[16];
		if (stack_frames(s, k->stack, &fr, &nf))
			return -ENOMEM;
		size_t start = s->n_text;
		for (uint32_t i = 0; i <= nf; i++) {
			uint32_t f = i < nf ? fr[i] : k->lab;
			if (f == NO_FRAME)
				break;
			int l = snprintf(num, sizeof(num), "%c%u", i ? ',' : '[', s->rank[f]);
			if (GS_GROW(s->text, s->cap_text, s->n_text + (size_t)l))
				return -ENOMEM;
			memcpy(s->text + s->n_text, num, (size_t)l);
			s->n_text += (size_t)l;
		}
		if (s->n_text == start && GS_PUSH(s->text, s->n_text, s->cap_text, '['))
			return -ENOMEM;
		if (s->n_text > UINT32_MAX)
			return -ENOMEM;
		k->text_off = (uint32_t)start;
		k->text_len = (uint32_t)(s->n_text - start);
	}
	*out = s->text + k->text_off;
	*len = k->text_len;
	return 0;
}

static unsigned digits(uint64_t v)
{
	unsigned d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* Writing pass: samples go out as they come, their weights are kept
 * for the "weights" array that follows. */
static int put_sample(struct ss *s, void *ctx, const struct run *r)
{
	struct gs_wbuf *w = ctx;
	const char *t;
	uint32_t len;
	if (key_text(s, r->key, &t, &len))
		return -ENOMEM;
	if (s->n_weights)
		gs_wbuf_putc(w, ',');
	gs_wbuf_put(w, t, len);
	gs_wbuf_putc(w, ']');
	return GS_PUSH(s->weights, s->n_weights, s->cap_weights, r->weight);
}

/* Thread it[0..n): its samples, then its weights. */
static int write_thread(struct ss *s, struct gs_wbuf *w, bool *first, const struct gs_tl_item *it,
			size_t n, uint64_t axis_end, uint64_t step)
{
	const struct gs_profile *p = s->p;
	char name[256];
	thread_name(p, &s->lanes, &p->samples[it[0].sample], name, sizeof(name));
	profile_head(w, first, name, "nanoseconds");
	gs_wbuf_u64(w, axis_end);
	gs_wbuf_puts(w, ",\"samples\":[");
	s->n_weights = 0;
	int rc = walk_thread(s, it, n, axis_end, step, put_sample, w);
	gs_wbuf_puts(w, "],\"weights\":[");
	for (size_t i = 0; i < s->n_weights; i++) {
		if (i)
			gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, s->weights[i]);
	}
	gs_wbuf_puts(w, "]}");
	return rc;
}

/* ---- GPU devices ---------------------------------------------------------- */

struct gpu_agg {
	uint32_t stack;
	gs_str reason;
	int64_t weight;
};

/* Aggregate device dev's samples by (stack, stall reason). */
static int gpu_aggregate(const struct gs_profile *p, int32_t dev, struct gpu_agg **out,
			 size_t *n_out)
{
	size_t cap = 0, n = 0;
	struct gpu_agg *a = NULL;
	struct gs_hmap m = { 0 }; /* stack | reason << 32 -> index into a */
	int rc = 0;
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (sc->cuda_device != dev || s->values[GS_V_GPU_SAMPLES] <= 0)
			continue;
		bool added;
		uint64_t *v = gs_hmap_slot(&m, s->stack | (uint64_t)sc->cuda_stall_reason << 32,
					   &added);
		struct gpu_agg e = { .stack = s->stack, .reason = sc->cuda_stall_reason };
		if (!v || (added && GS_PUSH(a, n, cap, e))) {
			rc = -ENOMEM;
			break;
		}
		if (added)
			*v = n - 1;
		a[*v].weight += s->values[GS_V_GPU_SAMPLES];
	}
	gs_hmap_free(&m);
	if (rc) {
		free(a);
		return rc;
	}
	*out = a;
	*n_out = n;
	return 0;
}

static int write_gpu(struct ss *s, struct gs_wbuf *w, bool *first, int32_t dev)
{
	struct gpu_agg *a;
	size_t n;
	int rc = gpu_aggregate(s->p, dev, &a, &n);
	if (rc)
		return rc;
	int64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += a[i].weight;
	char name[96];
	snprintf(name, sizeof(name), "GPU%d PC samples (stall reasons)", dev);
	profile_head(w, first, name, "none");
	gs_wbuf_i64(w, total);
	gs_wbuf_puts(w, ",\"samples\":[");
	for (size_t i = 0; i < n && !rc; i++) {
		const uint32_t *fr;
		uint32_t nf, stall;
		struct gs_dframe sf = { .type = GS_DF_STALL, .fn = a[i].reason };
		if (stack_frames(s, a[i].stack, &fr, &nf) || frame_index(s, &sf, &stall)) {
			rc = -ENOMEM;
			break;
		}
		gs_wbuf_puts(w, i ? ",[" : "[");
		for (uint32_t k = 0; k < nf; k++) {
			gs_wbuf_u64(w, s->rank[fr[k]]);
			gs_wbuf_putc(w, ',');
		}
		gs_wbuf_u64(w, s->rank[stall]);
		gs_wbuf_putc(w, ']');
	}
	gs_wbuf_puts(w, "],\"weights\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			gs_wbuf_putc(w, ',');
		gs_wbuf_i64(w, a[i].weight);
	}
	gs_wbuf_puts(w, "]}");
	free(a);
	return rc;
}

static void write_frames(struct ss *s, struct gs_wbuf *w, const uint32_t *order)
{
	char name[1024];
	gs_wbuf_puts(w, "\"shared\":{\"frames\":[");
	for (size_t i = 0; i < s->n_frames; i++) {
		const struct gs_dframe *f = &s->frames[order[i]];
		gs_wbuf_puts(w, i ? ",\n{\"name\":" : "\n{\"name\":");
		if (f->type == SS_LABEL) {
			gs_json_str(w, s->labels[f->fn]);
			gs_wbuf_putc(w, '}');
			continue;
		}
		gs_json_str(w, gs_dframe_name(s->p, f, name, sizeof(name)));
		const char *file = gs_dframe_file(s->p, f);
		int64_t line = gs_dframe_line(s->p, f);
		if (file) {
			gs_wbuf_puts(w, ",\"file\":");
			gs_json_str(w, file);
		}
		if (line > 0) {
			gs_wbuf_puts(w, ",\"line\":");
			gs_wbuf_i64(w, line);
		}
		gs_wbuf_putc(w, '}');
	}
	gs_wbuf_puts(w, "]},\n");
}

/* GPU samples' frames (and stall leaves) exist before the frame table is
 * written; each sample counts as one use. */
static int collect_gpu_frames(struct ss *s)
{
	const struct gs_profile *p = s->p;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *sm = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, sm);
		const uint32_t *fr;
		uint32_t nf, idx;
		if (sc->cuda_device < 0)
			continue;
		struct gs_dframe sf = { .type = GS_DF_STALL, .fn = sc->cuda_stall_reason };
		if (stack_frames(s, sm->stack, &fr, &nf) || frame_index(s, &sf, &idx))
			return -ENOMEM;
		s->uses[idx]++;
		for (uint32_t k = 0; k < nf; k++)
			s->uses[fr[k]]++;
	}
	return 0;
}

static int cmp_uses(const void *a, const void *b, void *uses)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const uint64_t *u = uses;
	if (u[x] != u[y])
		return u[x] > u[y] ? -1 : 1;
	return x < y ? -1 : 1;
}

/* Number the frames by use, most used first: *order[i] is the frame
 * written i-th, rank[f] its inverse. */
static int rank_frames(struct ss *s, uint32_t **order_out)
{
	for (size_t i = 0; i < s->n_keys; i++) {
		const struct key *k = &s->keys[i];
		for (uint32_t j = 0; j < s->stack_len[k->stack]; j++)
			s->uses[s->flist[s->stack_off[k->stack] + j]] += k->entries[0];
		if (k->lab != NO_FRAME)
			s->uses[k->lab] += k->entries[0];
	}
	uint32_t *order = malloc(sizeof(*order) * (s->n_frames + 1));
	s->rank = malloc(sizeof(*s->rank) * (s->n_frames + 1));
	if (!order || !s->rank) {
		free(order);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->n_frames; i++)
		order[i] = i;
	qsort_r(order, s->n_frames, sizeof(*order), cmp_uses, s->uses);
	for (uint32_t i = 0; i < s->n_frames; i++)
		s->rank[order[i]] = i;
	*order_out = order;
	return 0;
}

/* Devices with GPU samples, ascending; returns the count (at most 64). */
static int gpu_devices(const struct gs_profile *p, int32_t devs[64])
{
	int n_devs = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *sm = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, sm);
		if (sc->cuda_device < 0)
			continue;
		bool seen = false;
		for (int d = 0; d < n_devs; d++)
			seen |= devs[d] == sc->cuda_device;
		if (!seen && n_devs < 64)
			devs[n_devs++] = sc->cuda_device;
	}
	for (int a = 1; a < n_devs; a++) /* insertion sort: few devices */
		for (int b = a; b > 0 && devs[b - 1] > devs[b]; b--) {
			int32_t t = devs[b];
			devs[b] = devs[b - 1];
			devs[b - 1] = t;
		}
	return n_devs;
}

/* Thread t's samples: idx[bounds[t] .. bounds[t + 1]), laid out in
 * s->items. */
static size_t layout(struct ss *s, const uint32_t *idx, size_t t)
{
	size_t n = s->bounds[t + 1] - s->bounds[t];
	gs_timeline_layout(s->p, idx + s->bounds[t], n, s->items);
	return n;
}

/* Thread boundaries in the order, and room for the longest one's layout. */
static int find_bounds(struct ss *s, const uint32_t *idx, size_t n_cpu)
{
	size_t most = 1, cap = 0;
	for (size_t b = 0; b < n_cpu;) {
		size_t e = gs_timeline_thread_end(s->p, &s->lanes, idx, b, n_cpu);
		if (GS_PUSH(s->bounds, s->n_threads, cap, b))
			return -ENOMEM;
		most = e - b > most ? e - b : most;
		b = e;
	}
	if (GS_PUSH(s->bounds, s->n_threads, cap, n_cpu))
		return -ENOMEM;
	s->n_threads--;
	s->items = malloc(sizeof(*s->items) * most);
	return s->items ? 0 : -ENOMEM;
}

/* How much thread t (first sample si) is the job's main thread: 2 for the
 * main thread (tid == pid) of a process with role "main", 1 for the main
 * thread of the first process (the launched command or the first -p), else
 * 0.  A user opening the file wants the training loop, not the busiest
 * DataLoader worker or helper thread. */
static int main_rank(const struct gs_profile *p, uint32_t si)
{
	const struct gs_sample_ctx *c = gs_profile_ctx(p, &p->samples[si]);
	if (c->pid != c->tid || !c->pid)
		return 0;
	const struct gs_process *pr = gs_find_process(p, c->pid);
	gs_str role = c->process_role ? c->process_role : pr ? pr->role : 0;
	if (role && !strcmp(gs_profile_str(p, role), "main"))
		return 2;
	return p->n_processes && p->processes[0].pid == c->pid;
}

/* Counting pass over every thread: the axis end, runs per key, and the
 * thread to open on (*best, its index among the threads): the main thread
 * of the main process (main_rank), the one most on a CPU among equals. */
static int count_threads(struct ss *s, const uint32_t *idx, uint64_t *axis_end, int *best)
{
	int64_t best_w = -1;
	int best_rank = -1;
	*axis_end = s->p->duration_nanos;
	for (size_t t = 0; t < s->n_threads; t++) { /* the end first: every thread runs to it */
		size_t n = layout(s, idx, t);
		if (s->items[n - 1].end > *axis_end)
			*axis_end = s->items[n - 1].end;
	}
	*best = 0;
	for (size_t t = 0; t < s->n_threads; t++) {
		int64_t busy = 0;
		memset(s->bucket_end, 0, sizeof(s->bucket_end)); /* a new thread: new buckets */
		if (walk_runs(s, s->items, layout(s, idx, t), *axis_end, count_run, &busy))
			return -ENOMEM;
		int rank = main_rank(s->p, idx[s->bounds[t]]);
		if (rank > best_rank || (rank == best_rank && busy > best_w)) {
			best_rank = rank;
			best_w = busy;
			*best = (int)t;
		}
	}
	return 0;
}

/* The finest step whose samples and weights fit in budget bytes; the
 * coarsest step when none does.  A sample costs its frames' text, "],",
 * ',' and a weight of at most digits(axis_end) digits. */
static int choose_step(struct ss *s, uint64_t axis_end, size_t budget, size_t *step)
{
	uint64_t bytes[N_STEPS] = { 0 };
	unsigned wd = digits(axis_end) + 3;
	for (size_t i = 0; i <= s->n_keys; i++) {
		const char *t;
		uint32_t len;
		uint32_t key = i < s->n_keys ? (uint32_t)i : NO_FRAME;
		const struct key *k = key_at(s, key);
		if (key_text(s, key, &t, &len))
			return -ENOMEM;
		for (size_t j = 0; j < N_STEPS; j++)
			bytes[j] += (uint64_t)k->entries[j] * (len + wd);
	}
	for (*step = 0; *step + 1 < N_STEPS && bytes[*step] > budget; ++*step)
		;
	return 0;
}

static void file_head(const struct gs_profile *p, struct gs_wbuf *w, size_t step)
{
	char name[384];
	const struct gs_process *main_p = p->n_processes ? &p->processes[0] : NULL;
	gs_wbuf_puts(w, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n");
	gs_wbuf_puts(w, "\"exporter\":\"gpusample@" GS_VERSION "\",\n\"name\":");
	if (main_p && main_p->comm)
		snprintf(name, sizeof(name), "gpusample: %s (pid %u)",
			 gs_profile_str(p, main_p->comm), main_p->pid);
	else
		snprintf(name, sizeof(name), "gpusample profile");
	if (step) { /* say so where speedscope shows it: the title */
		size_t k = strlen(name);
		if (step_ns[step] == UINT64_MAX)
			snprintf(name + k, sizeof(name) - k,
				 " [long run: each thread's samples merged by stack, "
				 "no time order]");
		else
			snprintf(name + k, sizeof(name) - k,
				 " [long run: time order in %g s steps, samples "
				 "merged by stack within each]",
				 step_ns[step] / 1e9);
	}
	gs_json_str(w, name);
	gs_wbuf_puts(w, ",\n");
}

static int write_all_json(struct ss *s, struct gs_wbuf *w)
{
	const struct gs_profile *p = s->p;
	size_t n_cpu = 0;
	uint32_t *idx, *order = NULL;
	uint64_t axis_end;
	int32_t devs[64];
	size_t step = 0;
	int best, n_prof = 0, n_devs = gpu_devices(p, devs);
	int rc = gs_tl_lanes_build(p, &s->lanes);
	rc = rc ? rc : gs_timeline_order(p, &s->lanes, &idx, &n_cpu);
	if (rc)
		return rc;
	rc = find_bounds(s, idx, n_cpu);
	rc = rc ? rc : count_threads(s, idx, &axis_end, &best);
	rc = rc ? rc : collect_gpu_frames(s);
	rc = rc ? rc : rank_frames(s, &order);
	rc = rc ? rc : choose_step(s, axis_end, s->max_bytes, &step);
	if (rc)
		goto out;
	file_head(p, w, step);
	write_frames(s, w, order);
	gs_wbuf_puts(w, "\"profiles\":[");
	bool first = true;
	for (size_t t = 0; t < s->n_threads && !rc; t++, n_prof++)
		rc = write_thread(s, w, &first, s->items, layout(s, idx, t), axis_end,
				  step_ns[step]);
	int first_gpu = n_prof;
	for (int d = 0; d < n_devs && !rc; d++, n_prof++)
		rc = write_gpu(s, w, &first, devs[d]);
	/* open the GPU view when GPU data is the default, else the thread most
	 * on a CPU */
	bool gpu_default = p->default_sample_type == GS_V_GPU_SAMPLES ||
			   p->default_sample_type == GS_V_GPU_NOT_ISSUED;
	int active = n_devs && (gpu_default || n_cpu == 0) ? first_gpu : best;
	gs_wbuf_puts(w, "\n]");
	if (n_prof) {
		gs_wbuf_puts(w, ",\n\"activeProfileIndex\":");
		gs_wbuf_u64(w, (uint64_t)active);
	}
	gs_wbuf_puts(w, "}\n");
out:
	free(idx);
	free(order);
	return rc;
}

static int speedscope_body(void *ctx, struct gs_wbuf *w)
{
	return write_all_json(ctx, w);
}

/* Per-stack tables, all "not yet". */
static int alloc_stack_tables(struct ss *s, size_t n)
{
	s->stack_off = malloc(sizeof(uint32_t) * n);
	s->stack_len = malloc(sizeof(uint32_t) * n);
	s->canon = malloc(sizeof(uint32_t) * n);
	s->blocked_label = malloc(sizeof(uint32_t) * n);
	s->key_of = malloc(sizeof(uint32_t) * n * N_VARIANTS);
	if (!s->stack_off || !s->stack_len || !s->canon || !s->blocked_label || !s->key_of)
		return -ENOMEM;
	memset(s->stack_off, 0xff, sizeof(uint32_t) * n);
	memset(s->blocked_label, 0xff, sizeof(uint32_t) * n);
	memset(s->key_of, 0xff, sizeof(uint32_t) * n * N_VARIANTS);
	return 0;
}

static void ss_free(struct ss *s)
{
	free(s->frames);
	gs_hmap_free(&s->fmap);
	gs_hmap_free(&s->smap);
	free(s->uses);
	free(s->rank);
	free(s->stack_off);
	free(s->stack_len);
	free(s->canon);
	free(s->flist);
	for (size_t i = 0; i < s->n_labels; i++)
		free(s->labels[i]);
	free(s->labels);
	free(s->blocked_label);
	free(s->keys);
	free(s->key_of);
	free(s->weights);
	free(s->text);
	free(s->items);
	free(s->bounds);
	gs_tl_lanes_free(&s->lanes);
}

int gs_write_speedscope_capped(const struct gs_profile *p, const char *path, size_t max_bytes,
			       char *err, size_t errlen)
{
	struct ss s = { .p = p,
			.runnable_label = NO_FRAME,
			.max_bytes = max_bytes,
			.runnable_str = gs_profile_find_str(p, "runnable") };
	int rc = alloc_stack_tables(&s, (size_t)p->n_stacks + 1);
	if (rc)
		rc = gs_output_fail(err, errlen, rc, "cannot write", path);
	else
		rc = gs_write_buffered(path, speedscope_body, &s, err, errlen);
	ss_free(&s);
	return rc;
}

int gs_write_speedscope(const struct gs_profile *p, const char *path, char *err, size_t errlen)
{
	return gs_write_speedscope_capped(p, path, GS_SPEEDSCOPE_MAX_BYTES, err, errlen);
}
