// SPDX-License-Identifier: MIT
/*
 * pprof writer: hand-written protobuf encoder for profile.proto
 * (perftools.profiles, tests/unit/golden/profile.proto) with gzip framing.
 *
 * Rules (reference/output_formats.md §1, §5.3): string_table[0] = "" and
 * no duplicates; mapping/location/function ids are the model's 1-based ids;
 * location_id leaf first, inline Lines callee first; system_name only when it
 * differs from name; numeric labels always carry num_unit (else 0 vanishes);
 * time_nanos written once; every Sample has one value per sample_type.
 * Samples with identical (stack, labels) are aggregated into one pprof
 * Sample with summed values; per-sample timestamps only feed speedscope.
 *
 * gpusample also writes a private message in Profile field
 * GS_PPROF_META_FIELD (unknown to, and skipped by, pprof and speedscope) so
 * that `gpusample report FILE.pb.gz` gets back what profile.proto has no
 * place for:
 *   message GsMeta {
 *     uint32 version = 1;          // 1
 *     uint32 frequency_hz = 2;
 *     uint64 lost_samples = 3;
 *     repeated GsProcess process = 4;
 *     repeated int64 note = 5;     // string indices (packed)
 *     repeated uint32 location_kind = 6; // enum gs_frame_kind per Location (packed)
 *   }
 *   message GsProcess { uint32 pid = 1; uint32 ppid = 2; int64 comm = 3;
 *     int64 role = 4; int64 python = 5; int64 gpu = 6; uint64 cpu_samples = 7;
 *     bool exited = 8; }            // strings as string-table indices
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "output/internal.h"
#include "util/hashmap.h"
#include "util/vec.h"
#include "output/output.h"

#define GS_PPROF_META_FIELD 4751

enum { WT_VARINT = 0, WT_LEN = 2 };

/* ---- protobuf writer ---------------------------------------------------- */

struct pb {
	uint8_t *b;
	size_t n, cap;
	int err;
};

static int pb_reserve(struct pb *w, size_t k)
{
	if (w->n + k <= w->cap)
		return 0;
	size_t ncap = w->cap ? w->cap : 4096;
	while (ncap < w->n + k)
		ncap *= 2;
	uint8_t *nb = realloc(w->b, ncap);
	if (!nb) {
		w->err = -ENOMEM;
		return -ENOMEM;
	}
	w->b = nb;
	w->cap = ncap;
	return 0;
}

static inline size_t varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Caller has reserved 10 bytes. */
static inline void put_varint(struct pb *w, uint64_t v)
{
	uint8_t *o = w->b + w->n;
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	w->n = (size_t)(o - w->b);
}

static inline void pb_varint(struct pb *w, uint64_t v)
{
	if (pb_reserve(w, 10) == 0)
		put_varint(w, v);
}

static inline void pb_tag(struct pb *w, uint32_t field, int wt)
{
	pb_varint(w, ((uint64_t)field << 3) | (uint64_t)wt);
}

/* Scalars: proto3 omits zero values. */
static inline void pb_u64(struct pb *w, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	pb_tag(w, field, WT_VARINT);
	pb_varint(w, v);
}

static inline void pb_i64(struct pb *w, uint32_t field, int64_t v)
{
	pb_u64(w, field, (uint64_t)v); /* negative: 10-byte two's complement */
}

static void pb_bytes(struct pb *w, uint32_t field, const void *data, size_t n)
{
	pb_tag(w, field, WT_LEN);
	pb_varint(w, n);
	if (pb_reserve(w, n) == 0) {
		memcpy(w->b + w->n, data, n);
		w->n += n;
	}
}

/* A string field: profile.proto strings are UTF-8 and viewers decode them
 * so; strings read from the target may not be.  Invalid bytes become U+FFFD
 * (only strings that need it are copied). */
static void pb_utf8(struct pb *w, uint32_t field, const char *s)
{
	size_t n = strlen(s), bad = 0;
	for (size_t k = 0; k < n;) {
		int l = gs_utf8_len((const unsigned char *)s + k);
		bad += !l;
		k += l ? (size_t)l : 1;
	}
	if (!bad) {
		pb_bytes(w, field, s, n);
		return;
	}
	char *c = malloc(n + 2 * bad + 1);
	if (!c) {
		w->err = -ENOMEM;
		return;
	}
	size_t o = 0;
	for (size_t k = 0; k < n;) {
		int l = gs_utf8_len((const unsigned char *)s + k);
		if (l) {
			memcpy(c + o, s + k, (size_t)l);
			o += (size_t)l;
			k += (size_t)l;
		} else {
			memcpy(c + o, "\xef\xbf\xbd", 3);
			o += 3;
			k++;
		}
	}
	pb_bytes(w, field, c, o);
	free(c);
}

static void pb_msg(struct pb *w, uint32_t field, const struct pb *m)
{
	if (m->err)
		w->err = m->err;
	pb_bytes(w, field, m->b, m->n);
}

/* ---- strings the encoder adds to the model's table ---------------------- */

enum xstr {
	XS_PID,
	XS_TID,
	XS_THREAD_NAME,
	XS_PROCESS_ROLE,
	XS_STALL,
	XS_DEVICE_KEY,
	XS_DEVICE_UNIT,
	XS_ATTRIBUTION,
	XS_CPU,
	XS_NANOSECONDS,
	XS_UNKNOWN,
	XS_TYPE0,
	XS_UNIT0 = XS_TYPE0 + GS_NVALUES,
	XS_SLABEL0 = XS_UNIT0 + GS_NVALUES,
	XS_NLABEL0 = XS_SLABEL0 + GS_NSTR_LABELS,
	XS_N = XS_NLABEL0 + GS_NNUM_LABELS
};

/* Process root frames (profile.process_frames): CPU samples get a
 * synthetic root Location "[process ROLE]" so that every pprof view shows
 * the main process and its DataLoader workers as separate trees without
 * -tagroot.  Role only, no pid or rank: a merge of 512 ranks stays three
 * trees, and fleet backends aggregate across runs (ranks are labels).  The
 * encoder adds them after the model's locations, functions and strings;
 * the reader drops them again (and sets process_frames). */
#define PROC_FRAME_PREFIX "[process "
struct pframe {
	gs_str role;
	char name[96];
};

struct enc {
	const struct gs_profile *p;
	int64_t x[XS_N];         /* string index of each extra string */
	const char *extra[XS_N]; /* strings appended after the model's */
	uint32_t n_extra;
	struct pframe *pf; /* process root frames, n_pf of them */
	uint32_t n_pf;
	uint32_t *agg_pf; /* per aggregated sample: pf index + 1, 0 = none */
};

static void extra_strings(struct enc *e)
{
	const char *want[XS_N] = {
		[XS_PID] = "pid",
		[XS_TID] = "tid",
		[XS_THREAD_NAME] = "thread_name",
		[XS_PROCESS_ROLE] = "process_role",
		[XS_STALL] = "cuda_stall_reason",
		[XS_DEVICE_KEY] = "cuda_device",
		[XS_DEVICE_UNIT] = "device",
		[XS_ATTRIBUTION] = "gpu_attribution",
		[XS_CPU] = "cpu",
		[XS_NANOSECONDS] = "nanoseconds",
		[XS_UNKNOWN] = "[unknown]",
	};
	for (int i = 0; i < GS_NVALUES; i++) {
		want[XS_TYPE0 + i] = gs_value_type[i];
		want[XS_UNIT0 + i] = gs_value_unit[i];
	}
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		want[XS_SLABEL0 + i] = gs_str_label_key[i];
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		want[XS_NLABEL0 + i] = gs_num_label_key[i];
	for (int i = 0; i < XS_N; i++) {
		int64_t idx = gs_profile_find_str(e->p, want[i]);
		for (uint32_t k = 0; idx < 0 && k < e->n_extra; k++)
			if (strcmp(e->extra[k], want[i]) == 0)
				idx = e->p->n_strings + k;
		if (idx < 0) {
			idx = e->p->n_strings + e->n_extra;
			e->extra[e->n_extra++] = want[i];
		}
		e->x[i] = idx;
	}
}

/* ---- sample aggregation ------------------------------------------------- */

struct agg {
	uint32_t rep; /* index of the first sample with this (stack, labels) */
	int64_t values[GS_NVALUES];
};

static uint64_t sample_key_hash(const struct gs_sample *s)
{
	uint64_t h = gs_mix64(s->stack ^ ((uint64_t)s->pid << 32));
	h = gs_mix64(h ^ s->tid ^ ((uint64_t)s->thread_name << 32));
	h = gs_mix64(h ^ s->process_role ^ ((uint64_t)s->cuda_stall_reason << 32));
	h = gs_mix64(h ^ s->gpu_attribution ^ ((uint64_t)(uint32_t)s->cuda_device << 32));
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		h = gs_mix64(h ^ s->str_labels[i]);
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		if (s->num_set & (1u << i))
			h = gs_mix64(h ^ (uint64_t)s->num_labels[i] ^ ((uint64_t)(i + 1) << 56));
	return h;
}

static bool extra_labels_eq(const struct gs_sample *a, const struct gs_sample *b)
{
	if (a->num_set != b->num_set)
		return false;
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		if (a->str_labels[i] != b->str_labels[i])
			return false;
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		if ((a->num_set & (1u << i)) && a->num_labels[i] != b->num_labels[i])
			return false;
	return true;
}

static bool sample_key_eq(const struct gs_sample *a, const struct gs_sample *b)
{
	return a->stack == b->stack && a->pid == b->pid && a->tid == b->tid &&
	       a->thread_name == b->thread_name && a->process_role == b->process_role &&
	       a->cuda_stall_reason == b->cuda_stall_reason &&
	       a->gpu_attribution == b->gpu_attribution && a->cuda_device == b->cuda_device &&
	       extra_labels_eq(a, b);
}

struct agg_eq_ctx {
	const struct gs_profile *p;
	const struct agg *a;
	const struct gs_sample *s;
};

static bool agg_eq(const void *ctx, uint64_t v)
{
	const struct agg_eq_ctx *c = ctx;
	return sample_key_eq(&c->p->samples[c->a[v].rep], c->s);
}

/* Aggregate in first-appearance order (deterministic output).  The index
 * grows with the aggregates, not the samples, and a sample like the one
 * before it (the same thread still in the same stack) skips the lookup:
 * at 5M samples of 100k stacks the lookups' cache misses were the
 * writer's time. */
static int aggregate(const struct gs_profile *p, struct agg **out, size_t *n_out)
{
	struct gs_hmap index = { 0 };
	struct agg *a = NULL;
	size_t n = 0, cap = 0, g = SIZE_MAX;
	int rc = 0;
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (g == SIZE_MAX || !sample_key_eq(&p->samples[i - 1], s)) {
			uint64_t h = sample_key_hash(s);
			struct agg_eq_ctx c = { p, a, s };
			uint64_t *v = gs_hmap_find_by(&index, h, agg_eq, &c);
			struct agg nw = { .rep = (uint32_t)i };
			if (v)
				g = *v;
			else if (!(rc = GS_PUSH(a, n, cap, nw)))
				rc = gs_hmap_add(&index, h, g = n - 1);
		}
		for (int k = 0; k < GS_NVALUES && !rc; k++)
			a[g].values[k] += s->values[k];
	}
	gs_hmap_free(&index);
	if (rc) {
		free(a);
		return rc;
	}
	*out = a;
	*n_out = n;
	return 0;
}

/* ---- message emitters --------------------------------------------------- */

static void emit_value_type(struct pb *w, struct pb *m, uint32_t field, int64_t type, int64_t unit)
{
	m->n = 0;
	pb_i64(m, 1, type);
	pb_i64(m, 2, unit);
	pb_msg(w, field, m);
}

/* Labels are written straight into the Sample: sizes are known up front,
 * which avoids a scratch copy per label (1M samples x 4 labels). */
static inline size_t label_size(int64_t key, int64_t str, int64_t num, int64_t unit)
{
	size_t n = 1 + varint_size((uint64_t)key);
	if (str)
		n += 1 + varint_size((uint64_t)str);
	if (num)
		n += 1 + varint_size((uint64_t)num);
	if (unit)
		n += 1 + varint_size((uint64_t)unit);
	return n;
}

/* Caller has reserved label_size() + 11 bytes. */
static inline void put_label(struct pb *w, int64_t key, int64_t str, int64_t num, int64_t unit)
{
	size_t n = label_size(key, str, num, unit);
	put_varint(w, (3 << 3) | WT_LEN);
	put_varint(w, n);
	put_varint(w, (1 << 3) | WT_VARINT);
	put_varint(w, (uint64_t)key);
	if (str) {
		put_varint(w, (2 << 3) | WT_VARINT);
		put_varint(w, (uint64_t)str);
	}
	if (num) {
		put_varint(w, (3 << 3) | WT_VARINT);
		put_varint(w, (uint64_t)num);
	}
	if (unit) {
		put_varint(w, (4 << 3) | WT_VARINT);
		put_varint(w, (uint64_t)unit);
	}
}

struct label {
	int64_t key, str, num, unit;
};

/* The labels of one pprof Sample; numeric ones carry num_unit so that 0
 * survives, empty strings are left out (pprof drops them anyway). */
static int sample_labels(const struct enc *e, const struct gs_sample *s, struct label *l)
{
	int n = 0;
	bool gpu = s->cuda_device >= 0;
	l[n++] = (struct label){ e->x[XS_PID], 0, s->pid, e->x[XS_PID] };
	if (!gpu || s->tid)
		l[n++] = (struct label){ e->x[XS_TID], 0, s->tid, e->x[XS_TID] };
	if (s->thread_name)
		l[n++] = (struct label){ e->x[XS_THREAD_NAME], s->thread_name, 0, 0 };
	if (s->process_role)
		l[n++] = (struct label){ e->x[XS_PROCESS_ROLE], s->process_role, 0, 0 };
	if (s->cuda_stall_reason)
		l[n++] = (struct label){ e->x[XS_STALL], s->cuda_stall_reason, 0, 0 };
	if (gpu)
		l[n++] = (struct label){ e->x[XS_DEVICE_KEY], 0, s->cuda_device,
					 e->x[XS_DEVICE_UNIT] };
	if (s->gpu_attribution)
		l[n++] = (struct label){ e->x[XS_ATTRIBUTION], s->gpu_attribution, 0, 0 };
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		if (s->str_labels[i])
			l[n++] = (struct label){ e->x[XS_SLABEL0 + i], s->str_labels[i], 0, 0 };
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		if (s->num_set & (1u << i)) /* num_unit = key, so a 0 survives */
			l[n++] = (struct label){ e->x[XS_NLABEL0 + i], 0, s->num_labels[i],
						 e->x[XS_NLABEL0 + i] };
	return n;
}

static void emit_sample(struct pb *w, const struct enc *e, const struct agg *g, size_t ai)
{
	const struct gs_profile *p = e->p;
	const struct gs_sample *s = &p->samples[g->rep];
	const struct gs_stack *st = &p->stacks[s->stack];
	const uint32_t *locs = &p->stack_locs[st->first];
	struct label l[8 + GS_NSTR_LABELS + GS_NNUM_LABELS];
	int nl = sample_labels(e, s, l);
	uint32_t root = e->agg_pf && e->agg_pf[ai] ? p->n_locations + e->agg_pf[ai] : 0;

	size_t loc_len = root ? varint_size(root) : 0, val_len = 0, total = 0;
	for (uint32_t i = 0; i < st->n; i++)
		loc_len += varint_size(locs[i]);
	for (int v = 0; v < GS_NVALUES; v++)
		val_len += varint_size((uint64_t)g->values[v]);
	if (loc_len)
		total += 1 + varint_size(loc_len) + loc_len;
	total += 1 + varint_size(val_len) + val_len;
	for (int i = 0; i < nl; i++) {
		size_t n = label_size(l[i].key, l[i].str, l[i].num, l[i].unit);
		total += 1 + varint_size(n) + n;
	}
	if (pb_reserve(w, total + 11))
		return;
	put_varint(w, (2 << 3) | WT_LEN);
	put_varint(w, total);
	if (loc_len) { /* 1: location_id, packed, leaf first (the model's order) */
		put_varint(w, (1 << 3) | WT_LEN);
		put_varint(w, loc_len);
		for (uint32_t i = 0; i < st->n; i++)
			put_varint(w, locs[i]);
		if (root)
			put_varint(w, root);
	}
	put_varint(w, (2 << 3) | WT_LEN); /* 2: value, packed, one per sample_type */
	put_varint(w, val_len);
	for (int v = 0; v < GS_NVALUES; v++)
		put_varint(w, (uint64_t)g->values[v]);
	for (int i = 0; i < nl; i++) /* 3: label */
		put_label(w, l[i].key, l[i].str, l[i].num, l[i].unit);
}

static uint32_t main_mapping(const struct gs_profile *p)
{
	for (uint32_t i = 0; i < p->n_mappings; i++) {
		const char *f = gs_profile_str(p, p->mappings[i].file);

		if (f[0] == '/')
			return i + 1;
	}
	return 0;
}

static void emit_mapping(struct pb *w, struct pb *m, const struct gs_mapping *mp, uint32_t id)
{
	m->n = 0;
	pb_u64(m, 1, id);
	pb_u64(m, 2, mp->start);
	pb_u64(m, 3, mp->limit);
	pb_u64(m, 4, mp->offset);
	pb_i64(m, 5, mp->file);
	pb_i64(m, 6, mp->build_id);
	pb_u64(m, 7, mp->has_functions);
	pb_u64(m, 8, mp->has_filenames);
	pb_u64(m, 9, mp->has_lines);
	pb_u64(m, 10, mp->has_inlines);
	pb_msg(w, 3, m);
}

static void emit_location(struct pb *w, struct pb *m, struct pb *lm, const struct gs_profile *p,
			  uint32_t id)
{
	const struct gs_location *l = gs_profile_location(p, id);
	m->n = 0;
	pb_u64(m, 1, id);
	pb_u64(m, 2, l->mapping);
	pb_u64(m, 3, l->address);
	for (uint32_t i = 0; i < l->n_lines; i++) { /* callee first, as stored */
		const struct gs_line *ln = &p->lines[l->first_line + i];
		lm->n = 0;
		pb_u64(lm, 1, ln->function);
		pb_i64(lm, 2, ln->line);
		pb_msg(m, 4, lm);
	}
	pb_msg(w, 4, m);
}

static void emit_function(struct pb *w, struct pb *m, const struct enc *e, uint32_t id)
{
	const struct gs_function *f = gs_profile_function(e->p, id);
	m->n = 0;
	pb_u64(m, 1, id);
	pb_i64(m, 2, f->name ? f->name : e->x[XS_UNKNOWN]);
	/* pprof demangles (and mangles "<module>") when system_name == name */
	if (f->system_name && f->system_name != f->name)
		pb_i64(m, 3, f->system_name);
	pb_i64(m, 4, f->file);
	pb_i64(m, 5, f->start_line);
	pb_msg(w, 5, m);
}

static void emit_packed(struct pb *w, uint32_t field, const uint64_t *v, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += varint_size(v[i]);
	if (!n)
		return;
	pb_tag(w, field, WT_LEN);
	pb_varint(w, len);
	if (pb_reserve(w, len) == 0)
		for (size_t i = 0; i < n; i++)
			put_varint(w, v[i]);
}

static void emit_meta(struct pb *w, struct pb *m, struct pb *sub, const struct gs_profile *p)
{
	m->n = 0;
	pb_u64(m, 1, 1);
	pb_u64(m, 2, p->frequency_hz);
	pb_u64(m, 3, p->lost_samples);
	for (uint32_t i = 0; i < p->n_processes; i++) {
		const struct gs_process *pr = &p->processes[i];
		sub->n = 0;
		pb_u64(sub, 1, pr->pid);
		pb_u64(sub, 2, pr->ppid);
		pb_i64(sub, 3, pr->comm);
		pb_i64(sub, 4, pr->role);
		pb_i64(sub, 5, pr->python);
		pb_i64(sub, 6, pr->gpu);
		pb_u64(sub, 7, pr->cpu_samples);
		pb_u64(sub, 8, pr->exited);
		pb_msg(m, 4, sub);
	}
	size_t nk = p->n_notes > p->n_locations ? p->n_notes : p->n_locations;
	uint64_t *v = malloc((nk ? nk : 1) * sizeof(*v));
	if (!v) {
		w->err = -ENOMEM;
		return;
	}
	for (uint32_t i = 0; i < p->n_notes; i++)
		v[i] = p->notes[i];
	emit_packed(m, 5, v, p->n_notes);
	for (uint32_t i = 0; i < p->n_locations; i++)
		v[i] = p->locations[i].kind;
	emit_packed(m, 6, v, p->n_locations);
	free(v);
	pb_msg(w, GS_PPROF_META_FIELD, m);
}

/* The process root frame of each aggregated CPU sample with a role. */
static int process_frames(struct enc *e, const struct agg *aggs, size_t n_aggs)
{
	const struct gs_profile *p = e->p;
	uint32_t cap = 0;

	if (!(e->agg_pf = calloc(n_aggs ? n_aggs : 1, sizeof(*e->agg_pf))))
		return -ENOMEM;
	for (size_t i = 0; i < n_aggs; i++) {
		const struct gs_sample *s = &p->samples[aggs[i].rep];
		uint32_t k = 0;

		if (s->cuda_device >= 0 || !s->process_role)
			continue;
		while (k < e->n_pf && e->pf[k].role != s->process_role)
			k++;
		if (k == e->n_pf) {
			if (k == cap) {
				void *n = realloc(e->pf,
						  (cap = cap ? cap * 2 : 8) * sizeof(*e->pf));
				if (!n)
					return -ENOMEM;
				e->pf = n;
			}
			e->pf[k] = (struct pframe){ .role = s->process_role };
			snprintf(e->pf[k].name, sizeof(e->pf[k].name), "%s%.80s]",
				 PROC_FRAME_PREFIX, gs_profile_str(p, s->process_role));
			e->n_pf++;
		}
		e->agg_pf[i] = k + 1;
	}
	return 0;
}

/* field 4: their Locations (after the model's), 5: their Functions. */
static void emit_process_frames(struct pb *w, struct pb *m, struct pb *lm, const struct enc *e,
				uint32_t field)
{
	const struct gs_profile *p = e->p;

	for (uint32_t k = 0; k < e->n_pf; k++) {
		m->n = 0;
		if (field == 4) {
			pb_u64(m, 1, p->n_locations + 1 + k);
			lm->n = 0;
			pb_u64(lm, 1, p->n_functions + 1 + k);
			pb_msg(m, 4, lm);
		} else {
			pb_u64(m, 1, p->n_functions + 1 + k);
			pb_i64(m, 2, p->n_strings + e->n_extra + k);
		}
		pb_msg(w, field, m);
	}
}

int gs_pprof_encode(const struct gs_profile *p, uint8_t **buf, size_t *len)
{
	struct enc e = { .p = p };
	struct pb w = { 0 }, m = { 0 }, sub = { 0 };
	struct agg *aggs = NULL;
	size_t n_aggs = 0;
	int rc;

	extra_strings(&e);
	rc = aggregate(p, &aggs, &n_aggs);
	if (rc)
		return rc;
	pb_reserve(&w, 64 + n_aggs * 48 + (size_t)p->n_locations * 24);

	for (int v = 0; v < GS_NVALUES; v++) /* 1: sample_type */
		emit_value_type(&w, &m, 1, e.x[XS_TYPE0 + v], e.x[XS_UNIT0 + v]);
	if (p->process_frames && process_frames(&e, aggs, n_aggs))
		w.err = -ENOMEM;
	for (size_t i = 0; i < n_aggs; i++) /* 2: sample */
		emit_sample(&w, &e, &aggs[i], i);
	free(aggs);
	free(e.agg_pf);
	/* 3: mapping.  pprof takes the first Mapping message as the main
	 * binary ("File:" in its header): lead with the first real file, not
	 * [kernel.kallsyms] or [python].  Ids are unchanged. */
	uint32_t main_map = main_mapping(p);

	if (main_map)
		emit_mapping(&w, &m, &p->mappings[main_map - 1], main_map);
	for (uint32_t i = 0; i < p->n_mappings; i++)
		if (i + 1 != main_map)
			emit_mapping(&w, &m, &p->mappings[i], i + 1);
	for (uint32_t i = 1; i <= p->n_locations; i++) /* 4: location */
		emit_location(&w, &m, &sub, p, i);
	emit_process_frames(&w, &m, &sub, &e, 4);
	for (uint32_t i = 1; i <= p->n_functions; i++) /* 5: function */
		emit_function(&w, &m, &e, i);
	emit_process_frames(&w, &m, &sub, &e, 5);
	/* 6: string_table; [0] = "" written explicitly */
	for (uint32_t i = 0; i < p->n_strings; i++)
		pb_utf8(&w, 6, p->strings[i]);
	for (uint32_t i = 0; i < e.n_extra; i++)
		pb_bytes(&w, 6, e.extra[i], strlen(e.extra[i]));
	for (uint32_t i = 0; i < e.n_pf; i++)
		pb_bytes(&w, 6, e.pf[i].name, strlen(e.pf[i].name));
	free(e.pf);
	pb_i64(&w, 9, (int64_t)p->time_nanos); /* once: a second one means concatenation */
	pb_i64(&w, 10, (int64_t)p->duration_nanos);
	emit_value_type(&w, &m, 11, e.x[XS_CPU], e.x[XS_NANOSECONDS]);
	pb_i64(&w, 12, p->period_ns);
	if (p->n_comments) {
		uint64_t *c = malloc(p->n_comments * sizeof(*c));
		if (!c) {
			w.err = -ENOMEM;
		} else {
			for (uint32_t i = 0; i < p->n_comments; i++)
				c[i] = p->comments[i];
			emit_packed(&w, 13, c, p->n_comments);
			free(c);
		}
	}
	unsigned dst = p->default_sample_type < GS_NVALUES ? p->default_sample_type : GS_V_CPU_NS;
	pb_i64(&w, 14, e.x[XS_TYPE0 + dst]);
	emit_meta(&w, &m, &sub, p);

	free(m.b);
	free(sub.b);
	if (w.err || m.err || sub.err) {
		free(w.b);
		return -ENOMEM;
	}
	*buf = w.b;
	*len = w.n;
	return 0;
}

/* ---- gzip writer -------------------------------------------------------- */

static int write_all(int fd, const void *b, size_t n)
{
	const uint8_t *c = b;
	while (n) {
		ssize_t r = write(fd, c, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* gzip framing (windowBits 15+16): pprof rejects zlib framing.  Best speed,
 * like Go's runtime/pprof: multi-MB profiles compress ~5x either way. */
static int gzip_to_fd(int fd, const uint8_t *data, size_t len)
{
	z_stream z = { 0 };
	uint8_t out[1 << 16];
	int rc = 0;
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)data;
	int flush = Z_NO_FLUSH;
	do {
		size_t chunk = len - (size_t)(z.next_in - data);
		if (chunk > (1u << 30))
			chunk = 1u << 30;
		z.avail_in = (uInt)chunk;
		flush = (size_t)(z.next_in - data) + chunk == len ? Z_FINISH : Z_NO_FLUSH;
		do {
			z.next_out = out;
			z.avail_out = sizeof(out);
			int zr = deflate(&z, flush);
			if (zr == Z_STREAM_ERROR) {
				rc = -EIO;
				break;
			}
			rc = write_all(fd, out, sizeof(out) - z.avail_out);
		} while (!rc && z.avail_out == 0);
	} while (!rc && flush != Z_FINISH);
	deflateEnd(&z);
	return rc;
}

int gs_write_pprof(const struct gs_profile *p, const char *path, char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = gs_pprof_encode(p, &buf, &len);
	if (rc)
		return gs_output_fail(err, errlen, rc, "cannot encode pprof profile for", path);
	int fd = gs_output_open(path, err, errlen);
	if (fd < 0) {
		free(buf);
		return fd;
	}
	rc = gzip_to_fd(fd, buf, len);
	free(buf);
	return gs_output_close(fd, rc, err, errlen);
}

/* ---- reader ------------------------------------------------------------- */

struct pbr {
	const uint8_t *p, *end;
	int err;
};

static uint64_t rd_varint(struct pbr *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end) {
			r->err = -EBADMSG;
			return 0;
		}
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->err = -EBADMSG;
	return 0;
}

/* Next field: returns false at the end (or on error); for WT_LEN, *sub is
 * the payload; for varints, *val. */
static bool rd_field(struct pbr *r, uint32_t *field, int *wt, uint64_t *val, struct pbr *sub)
{
	if (r->err || r->p >= r->end)
		return false;
	uint64_t tag = rd_varint(r);
	*field = (uint32_t)(tag >> 3);
	*wt = (int)(tag & 7);
	switch (*wt) {
	case 0:
		*val = rd_varint(r);
		break;
	case 1:
		if (r->end - r->p < 8)
			r->err = -EBADMSG;
		else
			r->p += 8;
		break;
	case 5:
		if (r->end - r->p < 4)
			r->err = -EBADMSG;
		else
			r->p += 4;
		break;
	case 2: {
		uint64_t n = rd_varint(r);
		if (r->err || n > (uint64_t)(r->end - r->p)) {
			r->err = -EBADMSG;
			break;
		}
		*sub = (struct pbr){ .p = r->p, .end = r->p + n };
		r->p += n;
		break;
	}
	default:
		r->err = -EBADMSG;
	}
	return !r->err;
}

/* Repeated scalar, packed (WT_LEN) or not: call fn for each value. */
static void rd_repeated(int wt, uint64_t val, struct pbr *sub, void (*fn)(void *, uint64_t),
			void *ctx)
{
	if (wt == WT_VARINT) {
		fn(ctx, val);
		return;
	}
	while (wt == WT_LEN && sub->p < sub->end && !sub->err)
		fn(ctx, rd_varint(sub));
}

struct u64vec {
	uint64_t *v;
	size_t n, cap;
	int err;
};

static void u64vec_push(void *ctx, uint64_t x)
{
	struct u64vec *a = ctx;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		uint64_t *nv = realloc(a->v, nc * sizeof(*nv));
		if (!nv) {
			a->err = -ENOMEM;
			return;
		}
		a->v = nv;
		a->cap = nc;
	}
	a->v[a->n++] = x;
}

/* uint64 file id -> model id */
struct idmap {
	uint64_t *key;
	uint32_t *val;
	size_t cap;
};

static int idmap_init(struct idmap *m, size_t n)
{
	m->cap = 64;
	while (m->cap < n * 2 + 2)
		m->cap *= 2;
	m->key = calloc(m->cap, sizeof(*m->key));
	m->val = calloc(m->cap, sizeof(*m->val));
	return m->key && m->val ? 0 : -ENOMEM;
}

static void idmap_free(struct idmap *m)
{
	free(m->key);
	free(m->val);
}

static void idmap_put(struct idmap *m, uint64_t k, uint32_t v)
{
	if (!k)
		return;
	size_t h = gs_mix64(k) & (m->cap - 1);
	while (m->key[h] && m->key[h] != k)
		h = (h + 1) & (m->cap - 1);
	m->key[h] = k;
	m->val[h] = v;
}

static uint32_t idmap_get(const struct idmap *m, uint64_t k)
{
	if (!k)
		return 0;
	size_t h = gs_mix64(k) & (m->cap - 1);
	while (m->key[h]) {
		if (m->key[h] == k)
			return m->val[h];
		h = (h + 1) & (m->cap - 1);
	}
	return 0;
}

struct dec {
	struct gs_profile *p;
	struct pbr whole;
	gs_str *str; /* file string index -> model gs_str */
	size_t n_str;
	struct idmap maps, fns, locs;
	int col[16]; /* file sample column -> enum gs_value, -1 = ignored */
	int n_cols;
	struct u64vec kinds, notes;
	size_t n_maps, n_fns, n_locs; /* counted in the first pass */
	uint32_t freq;
	uint64_t lost;
	bool have_meta;
};

static gs_str dstr(const struct dec *d, uint64_t i)
{
	return i < d->n_str ? d->str[i] : 0;
}

static int dec_strings(struct dec *d)
{
	struct pbr r = d->whole, sub;
	uint32_t f;
	int wt;
	uint64_t v;
	size_t cap = 0;
	while (rd_field(&r, &f, &wt, &v, &sub)) {
		d->n_maps += f == 3;
		d->n_locs += f == 4;
		d->n_fns += f == 5;
		if (f != 6 || wt != WT_LEN)
			continue;
		if (d->n_str == cap) {
			cap = cap ? cap * 2 : 1024;
			gs_str *n = realloc(d->str, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			d->str = n;
		}
		size_t len = (size_t)(sub.end - sub.p);
		char *tmp = malloc(len + 1);
		if (!tmp)
			return -ENOMEM;
		memcpy(tmp, sub.p, len);
		tmp[len] = 0;
		gs_str s = gs_profile_intern(d->p, tmp);
		free(tmp);
		if (s == (gs_str)-1)
			return -ENOMEM;
		d->str[d->n_str++] = s;
	}
	if (r.err)
		return r.err;
	if (d->n_str == 0 || d->str[0] != 0)
		return -EBADMSG; /* string_table[0] must be "" */
	return 0;
}

static void dec_meta(struct dec *d, struct pbr m)
{
	struct pbr sub;
	uint32_t f;
	int wt;
	uint64_t v;
	d->have_meta = true;
	while (rd_field(&m, &f, &wt, &v, &sub)) {
		if (f == 2)
			d->freq = (uint32_t)v;
		else if (f == 3)
			d->lost = v;
		else if (f == 5)
			rd_repeated(wt, v, &sub, u64vec_push, &d->notes);
		else if (f == 6)
			rd_repeated(wt, v, &sub, u64vec_push, &d->kinds);
		else if (f == 4 && wt == WT_LEN) {
			struct gs_process pr = { 0 };
			struct pbr s2;
			while (rd_field(&sub, &f, &wt, &v, &s2)) {
				switch (f) {
				case 1:
					pr.pid = (uint32_t)v;
					break;
				case 2:
					pr.ppid = (uint32_t)v;
					break;
				case 3:
					pr.comm = dstr(d, v);
					break;
				case 4:
					pr.role = dstr(d, v);
					break;
				case 5:
					pr.python = dstr(d, v);
					break;
				case 6:
					pr.gpu = dstr(d, v);
					break;
				case 7:
					pr.cpu_samples = v;
					break;
				case 8:
					pr.exited = v != 0;
					break;
				}
			}
			gs_profile_add_process(d->p, &pr);
		}
	}
}

/* Pass over Profile's scalar fields, sample types, mappings, functions. */
static int dec_tables(struct dec *d)
{
	struct pbr r = d->whole, sub, s2;
	uint32_t f, g;
	int wt, wt2;
	uint64_t v, v2;
	struct gs_profile *p = d->p;
	while (rd_field(&r, &f, &wt, &v, &sub)) {
		switch (f) {
		case 1: { /* sample_type */
			uint64_t type = 0;
			while (rd_field(&sub, &g, &wt2, &v2, &s2))
				if (g == 1)
					type = v2;
			int col = -1;
			for (int i = 0; i < GS_NVALUES; i++)
				if (strcmp(gs_profile_str(p, dstr(d, type)), gs_value_type[i]) == 0)
					col = i;
			if (d->n_cols < (int)(sizeof(d->col) / sizeof(d->col[0])))
				d->col[d->n_cols] = col;
			d->n_cols++;
			break;
		}
		case 3: { /* mapping */
			struct gs_mapping m = { 0 };
			uint64_t id = 0;
			while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
				switch (g) {
				case 1:
					id = v2;
					break;
				case 2:
					m.start = v2;
					break;
				case 3:
					m.limit = v2;
					break;
				case 4:
					m.offset = v2;
					break;
				case 5:
					m.file = dstr(d, v2);
					break;
				case 6:
					m.build_id = dstr(d, v2);
					break;
				case 7:
					m.has_functions = v2;
					break;
				case 8:
					m.has_filenames = v2;
					break;
				case 9:
					m.has_lines = v2;
					break;
				case 10:
					m.has_inlines = v2;
					break;
				}
			}
			uint32_t mid = gs_profile_add_mapping(p, &m);
			if (!mid)
				return -ENOMEM;
			idmap_put(&d->maps, id, mid);
			break;
		}
		case 5: { /* function */
			struct gs_function fn = { 0 };
			uint64_t id = 0;
			while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
				switch (g) {
				case 1:
					id = v2;
					break;
				case 2:
					fn.name = dstr(d, v2);
					break;
				case 3:
					fn.system_name = dstr(d, v2);
					break;
				case 4:
					fn.file = dstr(d, v2);
					break;
				case 5:
					fn.start_line = (int64_t)v2;
					break;
				}
			}
			uint32_t fid = gs_profile_add_function(p, &fn);
			if (!fid)
				return -ENOMEM;
			idmap_put(&d->fns, id, fid);
			break;
		}
		case 9:
			p->time_nanos = v;
			break;
		case 10:
			p->duration_nanos = v;
			break;
		case 12:
			p->period_ns = (int64_t)v;
			break;
		case 13: {
			struct u64vec c = { 0 };
			rd_repeated(wt, v, &sub, u64vec_push, &c);
			for (size_t i = 0; i < c.n; i++)
				gs_profile_add_comment(p, "%s", gs_profile_str(p, dstr(d, c.v[i])));
			free(c.v);
			break;
		}
		case 14:
			for (int i = 0; i < GS_NVALUES; i++)
				if (strcmp(gs_profile_str(p, dstr(d, v)), gs_value_type[i]) == 0)
					p->default_sample_type = (enum gs_value)i;
			break;
		case GS_PPROF_META_FIELD:
			dec_meta(d, sub);
			break;
		}
	}
	return r.err;
}

/* Frame kind of a location when the file has no gpusample meta. */
static enum gs_frame_kind guess_kind(const struct gs_profile *p, uint32_t mapping)
{
	if (!mapping)
		return GS_FRAME_NATIVE;
	const char *f = gs_profile_str(p, p->mappings[mapping - 1].file);
	if (strcmp(f, "[python]") == 0)
		return GS_FRAME_PYTHON;
	if (strncmp(f, "[kernel", 7) == 0)
		return GS_FRAME_KERNEL;
	if (strncmp(f, "cubin", 5) == 0 || strstr(f, ".cubin"))
		return GS_FRAME_GPU_PC;
	return f[0] == '[' && strcmp(f, "[vdso]") != 0 ? GS_FRAME_SPECIAL : GS_FRAME_NATIVE;
}

/* A process root frame written by the encoder (see struct pframe). */
#define PROC_FRAME_LOC UINT32_MAX
static bool is_process_frame(const struct gs_profile *p, uint32_t fn)
{
	const char *name = gs_profile_str(p, gs_profile_function(p, fn)->name);
	size_t n = strlen(name);

	return !strncmp(name, PROC_FRAME_PREFIX, strlen(PROC_FRAME_PREFIX)) && name[n - 1] == ']';
}

static int dec_locations(struct dec *d)
{
	struct pbr r = d->whole, sub, s2, s3;
	uint32_t f, g, h;
	int wt, wt2, wt3;
	uint64_t v, v2, v3;
	struct gs_line lines[64];
	size_t idx = 0;
	while (rd_field(&r, &f, &wt, &v, &sub)) {
		if (f != 4 || wt != WT_LEN)
			continue;
		uint64_t id = 0, address = 0;
		uint32_t mapping = 0, n = 0;
		while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
			if (g == 1)
				id = v2;
			else if (g == 2 && !(mapping = idmap_get(&d->maps, v2)) && v2)
				return -EBADMSG; /* mapping_id without a Mapping */
			else if (g == 3)
				address = v2;
			else if (g == 4 && wt2 == WT_LEN && n < 64) {
				lines[n] = (struct gs_line){ 0 };
				while (rd_field(&s2, &h, &wt3, &v3, &s3)) {
					if (h == 1 && !(lines[n].function = idmap_get(&d->fns, v3)))
						return -EBADMSG; /* function_id without a Function */
					else if (h == 2)
						lines[n].line = (int64_t)v3;
				}
				if (!lines[n].function)
					return -EBADMSG;
				n++;
			}
		}
		if (sub.err)
			return sub.err;
		if (!mapping && n == 1 && is_process_frame(d->p, lines[0].function)) {
			idmap_put(&d->locs, id, PROC_FRAME_LOC);
			d->p->process_frames = true;
			idx++;
			continue;
		}
		enum gs_frame_kind kind = idx < d->kinds.n ? (enum gs_frame_kind)d->kinds.v[idx]
							   : guess_kind(d->p, mapping);
		uint32_t lid = gs_profile_add_location(d->p, mapping, address, kind, lines, n);
		if (!lid)
			return -ENOMEM;
		idmap_put(&d->locs, id, lid);
		idx++;
	}
	return r.err;
}

static void dec_extra_label(struct dec *d, const char *k, uint64_t str, uint64_t num,
			    struct gs_sample *s)
{
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		if (!strcmp(k, gs_str_label_key[i])) {
			s->str_labels[i] = dstr(d, str);
			return;
		}
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		if (!strcmp(k, gs_num_label_key[i])) {
			s->num_labels[i] = (int64_t)num;
			s->num_set |= 1u << i;
			return;
		}
}

static void dec_label(struct dec *d, struct pbr m, struct gs_sample *s)
{
	struct pbr sub;
	uint32_t f;
	int wt;
	uint64_t v, key = 0, str = 0, num = 0;
	while (rd_field(&m, &f, &wt, &v, &sub)) {
		if (f == 1)
			key = v;
		else if (f == 2)
			str = v;
		else if (f == 3)
			num = v;
	}
	const char *k = gs_profile_str(d->p, dstr(d, key));
	if (!strcmp(k, "pid"))
		s->pid = (uint32_t)num;
	else if (!strcmp(k, "tid"))
		s->tid = (uint32_t)num;
	else if (!strcmp(k, "cuda_device"))
		s->cuda_device = (int32_t)num;
	else if (!strcmp(k, "thread_name"))
		s->thread_name = dstr(d, str);
	else if (!strcmp(k, "process_role"))
		s->process_role = dstr(d, str);
	else if (!strcmp(k, "cuda_stall_reason"))
		s->cuda_stall_reason = dstr(d, str);
	else if (!strcmp(k, "gpu_attribution"))
		s->gpu_attribution = dstr(d, str);
	else
		dec_extra_label(d, k, str, num, s);
}

#define GS_PPROF_MAX_TOTAL ((int64_t)1 << 61) /* see check_totals */

static int dec_samples(struct dec *d)
{
	struct pbr r = d->whole, sub, s2;
	uint32_t f, g;
	int wt, wt2;
	uint64_t v, v2;
	struct u64vec locs = { 0 }, vals = { 0 };
	uint32_t *ids = NULL;
	size_t ids_cap = 0;
	int rc = 0;
	while (!rc && rd_field(&r, &f, &wt, &v, &sub)) {
		if (f != 2 || wt != WT_LEN)
			continue;
		struct gs_sample s = { .cuda_device = -1 };
		locs.n = vals.n = 0;
		while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
			if (g == 1)
				rd_repeated(wt2, v2, &s2, u64vec_push, &locs);
			else if (g == 2)
				rd_repeated(wt2, v2, &s2, u64vec_push, &vals);
			else if (g == 3 && wt2 == WT_LEN)
				dec_label(d, s2, &s);
		}
		if (sub.err || s2.err || locs.err || vals.err) {
			rc = locs.err ? locs.err : vals.err ? vals.err : -EBADMSG;
			break;
		}
		if (locs.n > ids_cap) {
			ids_cap = locs.n * 2;
			uint32_t *n = realloc(ids, ids_cap * sizeof(*n));
			if (!n) {
				rc = -ENOMEM;
				break;
			}
			ids = n;
		}
		size_t nid = 0;
		for (size_t i = 0; i < locs.n; i++) {
			ids[nid] = idmap_get(&d->locs, locs.v[i]);
			if (!ids[nid])
				rc = -EBADMSG; /* location_id without a Location */
			if (ids[nid] != PROC_FRAME_LOC)
				nid++;
		}
		int64_t st = gs_profile_add_stack(d->p, ids, (uint32_t)nid);
		if (st < 0)
			rc = (int)st;
		s.stack = (uint32_t)st;
		for (size_t i = 0; i < vals.n && i < (size_t)d->n_cols && i < 16; i++) {
			int64_t x = (int64_t)vals.v[i];

			if (x < -GS_PPROF_MAX_TOTAL || x > GS_PPROF_MAX_TOTAL)
				rc = -EOVERFLOW; /* before gs_profile_add_sample adds columns up */
			else if (d->col[i] >= 0)
				s.values[d->col[i]] = x;
		}
		if (!rc)
			rc = gs_profile_add_sample(d->p, &s);
	}
	free(locs.v);
	free(vals.v);
	free(ids);
	return rc ? rc : r.err;
}

/* Files without gpusample meta: one process per pid seen in labels. */
static int derive_processes(struct gs_profile *p)
{
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		if (s->cuda_device >= 0 || (!s->pid && !s->tid))
			continue;
		struct gs_process *pr = (struct gs_process *)gs_find_process(p, s->pid);
		if (!pr) {
			struct gs_process np = { .pid = s->pid,
						 .comm = s->thread_name,
						 .role = s->process_role };
			if (gs_profile_add_process(p, &np))
				return -ENOMEM;
			pr = &p->processes[p->n_processes - 1];
		}
		if (s->tid == s->pid && s->thread_name)
			pr->comm = s->thread_name;
		pr->cpu_samples += (uint64_t)s->values[GS_V_SAMPLES];
	}
	return 0;
}

/* Values from the file are summed by every reader (report, merge): refuse
 * files whose columns add up past 2^61 in magnitude (73 years of
 * nanoseconds), so no sum over any subset of samples can overflow; the same
 * for sample counts times the period (period_ns at most 2^40). */

static int check_totals(const struct gs_profile *p)
{
	int64_t tot[GS_NVALUES] = { 0 };

	/* readers compute samples * period_ns (CPU time of sample counts) */
	if (p->period_ns < 0 || p->period_ns > ((int64_t)1 << 40))
		return -EOVERFLOW;

	for (size_t i = 0; i < p->n_samples; i++)
		for (int v = 0; v < GS_NVALUES; v++) {
			int64_t x = p->samples[i].values[v];

			if (x < -GS_PPROF_MAX_TOTAL || x > GS_PPROF_MAX_TOTAL)
				return -EOVERFLOW;
			tot[v] += x < 0 ? -x : x;
			if (tot[v] > GS_PPROF_MAX_TOTAL)
				return -EOVERFLOW;
		}
	if (p->period_ns && tot[GS_V_SAMPLES] > GS_PPROF_MAX_TOTAL / p->period_ns)
		return -EOVERFLOW;
	return 0;
}

static int decode(struct dec *d)
{
	int rc = dec_strings(d);
	if (rc)
		return rc;
	if (idmap_init(&d->maps, d->n_maps) || idmap_init(&d->fns, d->n_fns) ||
	    idmap_init(&d->locs, d->n_locs))
		return -ENOMEM;
	rc = dec_tables(d);
	if (!rc)
		rc = dec_locations(d);
	if (!rc)
		rc = dec_samples(d);
	if (!rc)
		rc = check_totals(d->p);
	if (rc)
		return rc;
	struct gs_profile *p = d->p;
	p->frequency_hz = d->freq            ? d->freq
			  : p->period_ns > 0 ? (uint32_t)(1000000000 / p->period_ns)
					     : 0;
	p->lost_samples = d->lost;
	for (size_t i = 0; i < d->notes.n; i++)
		gs_profile_add_note(p, "%s", gs_profile_str(p, dstr(d, d->notes.v[i])));
	return d->have_meta ? 0 : derive_processes(p);
}

/* A profile is read whole into memory, so its size is capped, compressed
 * or not: a 1 MiB gzip bomb inflated to 1 GB (and 37 s) before this. */
#define GS_PPROF_MAX_BYTES ((size_t)256 << 20)

/* Read the whole file, gunzipping gzip (or zlib) data.  -EFBIG past
 * GS_PPROF_MAX_BYTES. */
static int slurp(const char *path, uint8_t **out, size_t *out_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int rc = errno ? -errno : -EINVAL;
		close(fd);
		return rc;
	}
	if ((uint64_t)st.st_size > GS_PPROF_MAX_BYTES) {
		close(fd);
		return -EFBIG;
	}
	size_t n = (size_t)st.st_size, off = 0;
	uint8_t *raw = malloc(n ? n : 1);
	if (!raw) {
		close(fd);
		return -ENOMEM;
	}
	while (off < n) {
		ssize_t r = read(fd, raw + off, n - off);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		off += (size_t)r;
	}
	close(fd);
	n = off;
	if (n < 2 || raw[0] != 0x1f || raw[1] != 0x8b) {
		*out = raw;
		*out_len = n;
		return 0;
	}
	z_stream z = { 0 };
	if (inflateInit2(&z, 15 + 32) != Z_OK) {
		free(raw);
		return -ENOMEM;
	}
	size_t cap = n < GS_PPROF_MAX_BYTES / 4 ? n * 4 + 4096 : GS_PPROF_MAX_BYTES, len = 0;
	uint8_t *buf = malloc(cap);
	int zr = Z_OK, rc = 0;
	z.next_in = raw;
	z.avail_in = (uInt)n;
	while (buf && zr != Z_STREAM_END) {
		if (len == cap) {
			if (cap >= GS_PPROF_MAX_BYTES) {
				rc = -EFBIG;
				break;
			}
			size_t nc = cap * 2 < GS_PPROF_MAX_BYTES ? cap * 2 : GS_PPROF_MAX_BYTES;
			uint8_t *nb = realloc(buf, nc);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap = nc;
		}
		z.next_out = buf + len;
		z.avail_out = (uInt)(cap - len > (1u << 30) ? (1u << 30) : cap - len);
		uInt before = z.avail_out;
		zr = inflate(&z, Z_NO_FLUSH);
		len += before - z.avail_out;
		if (zr != Z_OK && zr != Z_STREAM_END) {
			rc = zr == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
			break;
		}
		if (zr == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
			rc = -EBADMSG; /* truncated */
			break;
		}
	}
	inflateEnd(&z);
	free(raw);
	if (!buf)
		rc = -ENOMEM;
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

int gs_read_pprof(const char *path, struct gs_profile *p, char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = slurp(path, &buf, &len);
	if (rc) {
		if (err && rc == -EFBIG)
			snprintf(err, errlen,
				 "cannot read %s: it is (or decompresses to) more than %zu MiB, "
				 "gpusample's limit for one profile; is it really a pprof profile?",
				 path, GS_PPROF_MAX_BYTES >> 20);
		else if (err)
			snprintf(err, errlen, "cannot read %s: %s", path,
				 rc == -EBADMSG ? "corrupt gzip data" : strerror(-rc));
		return rc;
	}
	struct dec d = { .p = p, .whole = { .p = buf, .end = buf + len } };
	for (int i = 0; i < 16; i++)
		d.col[i] = -1;
	rc = decode(&d);
	free(buf);
	free(d.str);
	idmap_free(&d.maps);
	idmap_free(&d.fns);
	idmap_free(&d.locs);
	free(d.kinds.v);
	free(d.notes.v);
	if (rc && err)
		snprintf(err, errlen, "cannot read %s: %s", path,
			 rc == -EBADMSG ? "not a valid pprof profile (profile.proto, gzip or plain)"
			 : rc == -EOVERFLOW ? "sample values add up past 2^61: not a real profile"
					    : strerror(-rc));
	return rc;
}
