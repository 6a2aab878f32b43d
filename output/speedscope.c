// SPDX-License-Identifier: MIT
/*
 * speedscope JSON writer (https://www.speedscope.app/file-format-schema.json,
 * reference/output_formats.md §3.1, §5.4).
 *
 * One shared frame table; one "sampled" profile per CPU thread, all on one
 * wall-clock axis: startValue 0 = the profile start, endValue = its end (ns,
 * the same for every thread), samples laid out by output/timeline.c with
 * empty samples for the stretches where the thread was not seen, adjacent
 * identical stacks merged, so Time Order is a real timeline.  Off-CPU
 * stretches end in a "[blocked] WAIT" frame (WAIT = the leaf-most
 * user-space frame, e.g. "[blocked] poll") or "[runnable]" (waiting for a
 * CPU) under their stack.  One "sampled" profile per GPU device,
 * unit "none", weight = GPU PC samples (base stall family), stacks ending in
 * "[GPU] kernel" -> inlined device functions -> "file.cu:line" ->
 * "[stall] reason".  Frames: native functions once per function (file and
 * start line when known); Python frames once per line, "qualname
 * (file:line)", because speedscope shows names, not lines.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/internal.h"
#include "output/output.h"

#define MAX_DF_PER_LOC 66

struct ss {
	const struct gs_profile *p;
	/* frame table */
	struct gs_dframe *frames;
	uint32_t n_frames, cap_frames;
	uint32_t *fhash;
	uint32_t fhash_cap;
	/* stack -> root-first frame indices (cached; UINT32_MAX = not yet) */
	uint32_t *stack_off, *stack_len;
	uint32_t *flist;
	size_t n_flist, cap_flist;
	/* "[blocked] WAIT" / "[runnable]" frames: type SS_LABEL, fn = index */
	char **labels;
	uint32_t n_labels;
	uint32_t *blocked_label; /* per stack: frame index, UINT32_MAX = not yet */
	uint32_t runnable_label;
	struct gs_tl_item *items; /* per CPU sample, in thread/time order */
};

#define SS_LABEL 0xfe /* gs_dframe.type of a label frame */

static int frame_index(struct ss *s, const struct gs_dframe *f, uint32_t *out)
{
	if ((uint64_t)(s->n_frames + 1) * 2 > s->fhash_cap) {
		uint32_t ncap = s->fhash_cap ? s->fhash_cap * 2 : 4096;
		uint32_t *t = calloc(ncap, sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->n_frames; i++) {
			uint32_t h = (uint32_t)gs_dframe_hash(&s->frames[i]) & (ncap - 1);
			while (t[h])
				h = (h + 1) & (ncap - 1);
			t[h] = i + 1;
		}
		free(s->fhash);
		s->fhash = t;
		s->fhash_cap = ncap;
	}
	uint32_t mask = s->fhash_cap - 1, h = (uint32_t)gs_dframe_hash(f) & mask;
	for (; s->fhash[h]; h = (h + 1) & mask) {
		if (gs_dframe_eq(&s->frames[s->fhash[h] - 1], f)) {
			*out = s->fhash[h] - 1;
			return 0;
		}
	}
	if (s->n_frames == s->cap_frames) {
		uint32_t nc = s->cap_frames ? s->cap_frames * 2 : 1024;
		struct gs_dframe *n = realloc(s->frames, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->frames = n;
		s->cap_frames = nc;
	}
	s->frames[s->n_frames] = *f;
	s->fhash[h] = ++s->n_frames;
	*out = s->n_frames - 1;
	return 0;
}

static int flist_push(struct ss *s, uint32_t v)
{
	if (s->n_flist == s->cap_flist) {
		size_t nc = s->cap_flist ? s->cap_flist * 2 : 4096;
		uint32_t *n = realloc(s->flist, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->flist = n;
		s->cap_flist = nc;
	}
	s->flist[s->n_flist++] = v;
	return 0;
}

/* Root-first frame indices of stack st (cached). */
static int stack_frames(struct ss *s, uint32_t st, const uint32_t **out, uint32_t *n)
{
	if (s->stack_off[st] == UINT32_MAX) {
		const struct gs_stack *k = &s->p->stacks[st];
		const uint32_t *locs = &s->p->stack_locs[k->first];
		size_t start = s->n_flist;
		struct gs_dframe df[MAX_DF_PER_LOC];
		for (uint32_t i = k->n; i-- > 0;) { /* stored leaf first */
			size_t nd = gs_location_dframes(s->p, locs[i], df, MAX_DF_PER_LOC);
			for (size_t j = 0; j < nd; j++) {
				uint32_t idx;
				if (frame_index(s, &df[j], &idx) || flist_push(s, idx))
					return -ENOMEM;
			}
		}
		if (s->n_flist > UINT32_MAX)
			return -ENOMEM;
		s->stack_off[st] = (uint32_t)start;
		s->stack_len[st] = (uint32_t)(s->n_flist - start);
	}
	*out = &s->flist[s->stack_off[st]];
	*n = s->stack_len[st];
	return 0;
}

/* Frame index of label text (linear: few distinct waits). */
static int label_frame(struct ss *s, const char *text, uint32_t *out)
{
	uint32_t i = 0;
	while (i < s->n_labels && strcmp(s->labels[i], text))
		i++;
	if (i == s->n_labels) {
		char **n = realloc(s->labels, (s->n_labels + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->labels = n;
		if (!(n[i] = strdup(text)))
			return -ENOMEM;
		s->n_labels++;
	}
	struct gs_dframe f = {.type = SS_LABEL, .fn = i};
	return frame_index(s, &f, out);
}

/* The state frame under an off-CPU sample's stack; UINT32_MAX for CPU
 * samples. */
static int state_frame(struct ss *s, const struct gs_sample *sm, uint32_t *out)
{
	const struct gs_profile *p = s->p;
	gs_str st = sm->str_labels[GS_SL_THREAD_STATE];
	char buf[300], wait[256];
	*out = UINT32_MAX;
	if (sm->values[GS_V_OFFCPU_NS] <= 0)
		return 0;
	if (st && !strcmp(gs_profile_str(p, st), "runnable")) {
		if (s->runnable_label == UINT32_MAX && label_frame(s, "[runnable]", &s->runnable_label))
			return -ENOMEM;
		*out = s->runnable_label;
		return 0;
	}
	if (s->blocked_label[sm->stack] == UINT32_MAX) {
		snprintf(buf, sizeof(buf), "[blocked] %s", gs_wait_name(p, sm->stack, wait, sizeof(wait)));
		if (label_frame(s, buf, &s->blocked_label[sm->stack]))
			return -ENOMEM;
	}
	*out = s->blocked_label[sm->stack];
	return 0;
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

static void thread_name(const struct gs_profile *p, const struct gs_sample *s, char *buf, size_t len)
{
	const struct gs_process *pr = gs_find_process(p, s->pid);
	const char *pcomm = pr && pr->comm ? gs_profile_str(p, pr->comm) : NULL;
	const char *tcomm = s->thread_name ? gs_profile_str(p, s->thread_name) : NULL;
	const char *role = s->process_role ? gs_profile_str(p, s->process_role)
			   : pr && pr->role ? gs_profile_str(p, pr->role) : NULL;
	int n = snprintf(buf, len, "%s pid %u tid %u", pcomm ? pcomm : tcomm ? tcomm : "?", s->pid, s->tid);
	if (tcomm && pcomm && strcmp(tcomm, pcomm) != 0 && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " \"%s\"", tcomm);
	if (role && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " (%s)", role);
}

static void put_frames(struct gs_wbuf *w, const uint32_t *fr, uint32_t nf, uint32_t extra, bool first)
{
	gs_wbuf_puts(w, first ? "[" : ",[");
	for (uint32_t k = 0; k < nf; k++) {
		if (k)
			gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, fr[k]);
	}
	if (extra != UINT32_MAX) {
		if (nf)
			gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, extra);
	}
	gs_wbuf_putc(w, ']');
}

/* Items it[0..n) are one thread on the axis [0, axis_end): runs of one
 * (stack, state frame) without a gap become one sample, gaps empty ones.
 * wt has room for 2n + 1 weights; *busy = its on-CPU ns (which thread to
 * open first). */
static int write_thread(struct ss *s, struct gs_wbuf *w, bool *first, const struct gs_tl_item *it,
			size_t n, uint64_t axis_end, uint64_t *wt, int64_t *busy)
{
	const struct gs_profile *p = s->p;
	char name[256];
	thread_name(p, &p->samples[it[0].sample], name, sizeof(name));
	profile_head(w, first, name, "nanoseconds");
	gs_wbuf_u64(w, axis_end);
	gs_wbuf_puts(w, ",\"samples\":[");
	size_t nw = 0;
	uint64_t cursor = 0;
	*busy = 0;
	for (size_t i = 0; i < n;) {
		const struct gs_sample *x = &p->samples[it[i].sample];
		uint32_t lab, lab2, nf;
		const uint32_t *fr;
		if (state_frame(s, x, &lab) || stack_frames(s, x->stack, &fr, &nf))
			return -ENOMEM;
		if (it[i].start > cursor) {
			gs_wbuf_puts(w, nw ? ",[]" : "[]");
			wt[nw++] = it[i].start - cursor;
		}
		size_t j = i + 1;
		while (j < n && p->samples[it[j].sample].stack == x->stack && it[j].start == it[j - 1].end &&
		       !state_frame(s, &p->samples[it[j].sample], &lab2) && lab2 == lab)
			j++;
		put_frames(w, fr, nf, lab, nw == 0);
		wt[nw++] = it[j - 1].end - it[i].start;
		if (lab == UINT32_MAX)
			*busy += (int64_t)wt[nw - 1];
		cursor = it[j - 1].end;
		i = j;
	}
	if (axis_end > cursor) {
		gs_wbuf_puts(w, nw ? ",[]" : "[]");
		wt[nw++] = axis_end - cursor;
	}
	gs_wbuf_puts(w, "],\"weights\":[");
	for (size_t i = 0; i < nw; i++) {
		if (i)
			gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, wt[i]);
	}
	gs_wbuf_puts(w, "]}");
	return 0;
}

/* ---- GPU devices ---------------------------------------------------------- */

struct gpu_agg {
	uint32_t stack;
	gs_str reason;
	int64_t weight;
};

/* Aggregate device dev's samples by (stack, stall reason). */
static int gpu_aggregate(const struct gs_profile *p, int32_t dev, struct gpu_agg **out, size_t *n_out)
{
	size_t cap, n = 0;
	uint32_t *tab;
	struct gpu_agg *a;
	if (gs_agg_alloc(p->n_samples, sizeof(*a), &tab, &cap, (void **)&a))
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (s->cuda_device != dev || s->values[GS_V_GPU_SAMPLES] <= 0)
			continue;
		size_t h = gs_mix64(s->stack ^ ((uint64_t)s->cuda_stall_reason << 32)) & (cap - 1);
		while (tab[h] && !(a[tab[h] - 1].stack == s->stack && a[tab[h] - 1].reason == s->cuda_stall_reason))
			h = (h + 1) & (cap - 1);
		if (!tab[h]) {
			a[n] = (struct gpu_agg){.stack = s->stack, .reason = s->cuda_stall_reason};
			tab[h] = (uint32_t)++n;
		}
		a[tab[h] - 1].weight += s->values[GS_V_GPU_SAMPLES];
	}
	free(tab);
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
		struct gs_dframe sf = {.type = GS_DF_STALL, .fn = a[i].reason};
		if (stack_frames(s, a[i].stack, &fr, &nf) || frame_index(s, &sf, &stall)) {
			rc = -ENOMEM;
			break;
		}
		gs_wbuf_puts(w, i ? ",[" : "[");
		for (uint32_t k = 0; k < nf; k++) {
			gs_wbuf_u64(w, fr[k]);
			gs_wbuf_putc(w, ',');
		}
		gs_wbuf_u64(w, stall);
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

static void write_frames(struct ss *s, struct gs_wbuf *w)
{
	char name[1024];
	gs_wbuf_puts(w, "\"shared\":{\"frames\":[");
	for (uint32_t i = 0; i < s->n_frames; i++) {
		const struct gs_dframe *f = &s->frames[i];
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

/* The frame table is written before the profiles, so walk every stack
 * (and stall leaf, state frame) once up front; the caches make the second
 * walk free. */
static int collect_frames(struct ss *s)
{
	const struct gs_profile *p = s->p;
	for (size_t i = 0; i < p->n_samples; i++) {
		const uint32_t *fr;
		uint32_t nf, lab;
		if (stack_frames(s, p->samples[i].stack, &fr, &nf) || state_frame(s, &p->samples[i], &lab))
			return -ENOMEM;
		if (p->samples[i].cuda_device >= 0) {
			struct gs_dframe sf = {.type = GS_DF_STALL, .fn = p->samples[i].cuda_stall_reason};
			uint32_t idx;
			if (frame_index(s, &sf, &idx))
				return -ENOMEM;
		}
	}
	return 0;
}

static int write_all_json(struct ss *s, struct gs_wbuf *w)
{
	const struct gs_profile *p = s->p;
	int rc = 0;
	/* CPU samples grouped by thread, in time order, on one axis */
	size_t n_cpu = 0;
	uint32_t *idx;
	uint64_t *wt = NULL;
	if (gs_timeline_order(p, &idx, &n_cpu))
		return -ENOMEM;
	s->items = malloc(sizeof(*s->items) * (n_cpu + 1));
	wt = malloc(sizeof(*wt) * (2 * n_cpu + 1));
	if (!s->items || !wt) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t axis_end = p->duration_nanos;
	for (size_t b = 0; b < n_cpu;) {
		size_t e = gs_timeline_thread_end(p, idx, b, n_cpu);
		gs_timeline_layout(p, idx + b, e - b, s->items + b);
		if (s->items[e - 1].end > axis_end)
			axis_end = s->items[e - 1].end;
		b = e;
	}
	int32_t devs[64];
	int n_devs = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *sm = &p->samples[i];
		if (sm->cuda_device < 0)
			continue;
		bool seen = false;
		for (int d = 0; d < n_devs; d++)
			seen |= devs[d] == sm->cuda_device;
		if (!seen && n_devs < 64)
			devs[n_devs++] = sm->cuda_device;
	}
	for (int a = 1; a < n_devs; a++) /* insertion sort: few devices */
		for (int b = a; b > 0 && devs[b - 1] > devs[b]; b--) {
			int32_t t = devs[b];
			devs[b] = devs[b - 1];
			devs[b - 1] = t;
		}

	rc = collect_frames(s);
	if (rc)
		goto out;
	gs_wbuf_puts(w, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n");
	gs_wbuf_puts(w, "\"exporter\":\"gpusample@" GS_VERSION "\",\n\"name\":");
	char name[256];
	const struct gs_process *main_p = p->n_processes ? &p->processes[0] : NULL;
	if (main_p && main_p->comm)
		snprintf(name, sizeof(name), "gpusample: %s (pid %u)", gs_profile_str(p, main_p->comm), main_p->pid);
	else
		snprintf(name, sizeof(name), "gpusample profile");
	gs_json_str(w, name);
	gs_wbuf_puts(w, ",\n");
	write_frames(s, w);
	gs_wbuf_puts(w, "\"profiles\":[");
	bool first = true;
	int n_prof = 0, best = 0;
	int64_t best_w = -1;
	for (size_t b = 0; b < n_cpu && !rc;) {
		size_t e = gs_timeline_thread_end(p, idx, b, n_cpu);
		int64_t tw = 0;
		rc = write_thread(s, w, &first, s->items + b, e - b, axis_end, wt, &tw);
		if (tw > best_w) {
			best_w = tw;
			best = n_prof;
		}
		n_prof++;
		b = e;
	}
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
	free(wt);
	return rc;
}

static int speedscope_body(void *ctx, struct gs_wbuf *w)
{
	return write_all_json(ctx, w);
}

int gs_write_speedscope(const struct gs_profile *p, const char *path, char *err, size_t errlen)
{
	struct ss s = {.p = p, .runnable_label = UINT32_MAX};
	s.stack_off = malloc(sizeof(uint32_t) * (p->n_stacks + 1));
	s.stack_len = malloc(sizeof(uint32_t) * (p->n_stacks + 1));
	s.blocked_label = malloc(sizeof(uint32_t) * (p->n_stacks + 1));
	int rc;
	if (!s.stack_off || !s.stack_len || !s.blocked_label) {
		rc = gs_output_fail(err, errlen, -ENOMEM, "cannot write", path);
		goto out;
	}
	memset(s.stack_off, 0xff, sizeof(uint32_t) * (p->n_stacks + 1));
	memset(s.blocked_label, 0xff, sizeof(uint32_t) * (p->n_stacks + 1));
	rc = gs_write_buffered(path, speedscope_body, &s, err, errlen);
out:
	free(s.frames);
	free(s.fhash);
	free(s.stack_off);
	free(s.stack_len);
	free(s.flist);
	for (uint32_t i = 0; i < s.n_labels; i++)
		free(s.labels[i]);
	free(s.labels);
	free(s.blocked_label);
	free(s.items);
	return rc;
}
