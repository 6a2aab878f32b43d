// SPDX-License-Identifier: MIT
/*
 * pprof writer: hand-written protobuf encoder for profile.proto
 * (perftools.profiles, tests/unit/golden/profile.proto) with gzip framing;
 * field numbers and gpusample's private GsMeta message: pprof_proto.h; the
 * reader (gpusample report, merge): pprof_read.c.
 *
 * Rules (reference/output_formats.md §1, §5.3): string_table[0] = "" and
 * no duplicates; mapping/location/function ids are the model's 1-based ids;
 * location_id leaf first, inline Lines callee first; system_name only when it
 * differs from name; numeric labels always carry num_unit (else 0 vanishes);
 * time_nanos written once; every Sample has one value per sample_type.
 * Samples with identical (stack, labels) are aggregated into one pprof
 * Sample with summed values; per-sample timestamps only feed speedscope.
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
#include "output/pprof_proto.h"

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
	pb_varint(w, PB_KEY(field, wt));
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

/* Contexts are interned, so (stack, context index) is the whole key. */
static uint64_t sample_key_hash(const struct gs_sample *s)
{
	return gs_mix64(s->stack ^ ((uint64_t)s->ctx << 32));
}

static bool sample_key_eq(const struct gs_sample *a, const struct gs_sample *b)
{
	return a->stack == b->stack && a->ctx == b->ctx;
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
	pb_i64(m, PB_VALUE_TYPE_TYPE, type);
	pb_i64(m, PB_VALUE_TYPE_UNIT, unit);
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
	put_varint(w, PB_KEY(PB_SAMPLE_LABEL, WT_LEN));
	put_varint(w, n);
	put_varint(w, PB_KEY(PB_LABEL_KEY, WT_VARINT));
	put_varint(w, (uint64_t)key);
	if (str) {
		put_varint(w, PB_KEY(PB_LABEL_STR, WT_VARINT));
		put_varint(w, (uint64_t)str);
	}
	if (num) {
		put_varint(w, PB_KEY(PB_LABEL_NUM, WT_VARINT));
		put_varint(w, (uint64_t)num);
	}
	if (unit) {
		put_varint(w, PB_KEY(PB_LABEL_NUM_UNIT, WT_VARINT));
		put_varint(w, (uint64_t)unit);
	}
}

struct label {
	int64_t key, str, num, unit;
};

/* The labels of one pprof Sample; numeric ones carry num_unit so that 0
 * survives, empty strings are left out (pprof drops them anyway). */
static int sample_labels(const struct enc *e, const struct gs_sample_ctx *s, struct label *l)
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
	const uint32_t *locs = gs_profile_stack_locs(p, st);
	struct label l[8 + GS_NSTR_LABELS + GS_NNUM_LABELS];
	int nl = sample_labels(e, gs_profile_ctx(p, s), l);
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
	put_varint(w, PB_KEY(PB_PROFILE_SAMPLE, WT_LEN));
	put_varint(w, total);
	if (loc_len) { /* location_id, packed, leaf first (the model's order) */
		put_varint(w, PB_KEY(PB_SAMPLE_LOCATION_ID, WT_LEN));
		put_varint(w, loc_len);
		for (uint32_t i = 0; i < st->n; i++)
			put_varint(w, locs[i]);
		if (root)
			put_varint(w, root);
	}
	put_varint(w, PB_KEY(PB_SAMPLE_VALUE, WT_LEN)); /* packed, one per sample_type */
	put_varint(w, val_len);
	for (int v = 0; v < GS_NVALUES; v++)
		put_varint(w, (uint64_t)g->values[v]);
	for (int i = 0; i < nl; i++)
		put_label(w, l[i].key, l[i].str, l[i].num, l[i].unit);
}

/* The profiled program among the mappings: 3 = its file name starts with
 * the main process's comm (comm is cut to 15 chars: "python3" for
 * python3.11), 2 = an executable (no ".so" in its name: not ld.so or
 * libc, which a launched command maps first), 1 = any other real file,
 * 0 = [kernel.kallsyms], [python], cubin:... */
static int program_rank(const char *f, const char *comm)
{
	if (f[0] != '/')
		return 0;
	const char *base = strrchr(f, '/') + 1;
	if (comm && comm[0] && !strncmp(base, comm, strlen(comm)))
		return 3;
	return strstr(base, ".so") ? 1 : 2;
}

static uint32_t main_mapping(const struct gs_profile *p)
{
	const struct gs_process *mp = p->n_processes ? &p->processes[0] : NULL;
	for (uint32_t i = 0; i < p->n_processes; i++)
		if (p->processes[i].role &&
		    !strcmp(gs_profile_str(p, p->processes[i].role), "main")) {
			mp = &p->processes[i];
			break;
		}
	const char *comm = mp && mp->comm ? gs_profile_str(p, mp->comm) : NULL;
	uint32_t best = 0;
	int best_rank = 0;
	for (uint32_t i = 0; i < p->n_mappings; i++) {
		int r = program_rank(gs_profile_str(p, p->mappings[i].file), comm);
		if (r > best_rank) {
			best_rank = r;
			best = i + 1;
		}
	}
	return best;
}

static void emit_mapping(struct pb *w, struct pb *m, const struct gs_mapping *mp, uint32_t id)
{
	m->n = 0;
	pb_u64(m, PB_MAPPING_ID, id);
	pb_u64(m, PB_MAPPING_MEMORY_START, mp->start);
	pb_u64(m, PB_MAPPING_MEMORY_LIMIT, mp->limit);
	pb_u64(m, PB_MAPPING_FILE_OFFSET, mp->offset);
	pb_i64(m, PB_MAPPING_FILENAME, mp->file);
	pb_i64(m, PB_MAPPING_BUILD_ID, mp->build_id);
	pb_u64(m, PB_MAPPING_HAS_FUNCTIONS, mp->has_functions);
	pb_u64(m, PB_MAPPING_HAS_FILENAMES, mp->has_filenames);
	pb_u64(m, PB_MAPPING_HAS_LINE_NUMBERS, mp->has_lines);
	pb_u64(m, PB_MAPPING_HAS_INLINE_FRAMES, mp->has_inlines);
	pb_msg(w, PB_PROFILE_MAPPING, m);
}

static void emit_location(struct pb *w, struct pb *m, struct pb *lm, const struct gs_profile *p,
			  uint32_t id)
{
	const struct gs_location *l = gs_profile_location(p, id);
	m->n = 0;
	pb_u64(m, PB_LOCATION_ID, id);
	pb_u64(m, PB_LOCATION_MAPPING_ID, l->mapping);
	pb_u64(m, PB_LOCATION_ADDRESS, l->address);
	for (uint32_t i = 0; i < l->n_lines; i++) { /* callee first, as stored */
		const struct gs_line *ln = &p->lines[l->first_line + i];
		lm->n = 0;
		pb_u64(lm, PB_LINE_FUNCTION_ID, ln->function);
		pb_i64(lm, PB_LINE_LINE, ln->line);
		pb_msg(m, PB_LOCATION_LINE, lm);
	}
	pb_msg(w, PB_PROFILE_LOCATION, m);
}

static void emit_function(struct pb *w, struct pb *m, const struct enc *e, uint32_t id)
{
	const struct gs_function *f = gs_profile_function(e->p, id);
	m->n = 0;
	pb_u64(m, PB_FUNCTION_ID, id);
	pb_i64(m, PB_FUNCTION_NAME, f->name ? f->name : e->x[XS_UNKNOWN]);
	/* pprof demangles (and mangles "<module>") when system_name == name */
	if (f->system_name && f->system_name != f->name)
		pb_i64(m, PB_FUNCTION_SYSTEM_NAME, f->system_name);
	pb_i64(m, PB_FUNCTION_FILENAME, f->file);
	pb_i64(m, PB_FUNCTION_START_LINE, f->start_line);
	pb_msg(w, PB_PROFILE_FUNCTION, m);
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

static void emit_steps(struct pb *m, struct pb *sub, const struct gs_profile *p)
{
	for (size_t i = 0; i < p->n_steps; i++) {
		const struct gs_step *st = &p->steps[i];

		/* the scalar fields by number, 1 to PB_STEP_END_NS */
		const uint64_t v[] = {
			[PB_STEP_PID] = st->pid,
			[PB_STEP_TID] = st->tid,
			[PB_STEP_NUMBER] = st->number,
			[PB_STEP_BACKWARDS] = st->backwards,
			[PB_STEP_BY_OPTIMIZER] = st->by_optimizer,
			[PB_STEP_MARK_NS] = st->mark_ns,
			[PB_STEP_WALL_NS] = st->wall_ns,
			[PB_STEP_START_NS] = st->start_ns,
			[PB_STEP_END_NS] = st->end_ns,
		};

		sub->n = 0;
		for (uint32_t f = PB_STEP_PID; f <= PB_STEP_END_NS; f++)
			pb_u64(sub, f, v[f]);
		emit_packed(sub, PB_STEP_PHASE_NS, st->phase_ns, GS_STEP_PHASES);
		pb_msg(m, PB_META_STEP, sub);
	}
}

static void emit_meta(struct pb *w, struct pb *m, struct pb *sub, const struct gs_profile *p)
{
	m->n = 0;
	pb_u64(m, PB_META_VERSION, PB_META_VERSION_1);
	pb_u64(m, PB_META_FREQUENCY_HZ, p->frequency_hz);
	pb_u64(m, PB_META_LOST_SAMPLES, p->lost_samples);
	for (uint32_t i = 0; i < p->n_processes; i++) {
		const struct gs_process *pr = &p->processes[i];
		sub->n = 0;
		pb_u64(sub, PB_PROCESS_PID, pr->pid);
		pb_u64(sub, PB_PROCESS_PPID, pr->ppid);
		pb_i64(sub, PB_PROCESS_COMM, pr->comm);
		pb_i64(sub, PB_PROCESS_ROLE, pr->role);
		pb_i64(sub, PB_PROCESS_PYTHON, pr->python);
		pb_i64(sub, PB_PROCESS_GPU, pr->gpu);
		pb_u64(sub, PB_PROCESS_CPU_SAMPLES, pr->cpu_samples);
		pb_u64(sub, PB_PROCESS_EXITED, pr->exited);
		pb_u64(sub, PB_PROCESS_NS_PID, pr->ns_pid);
		pb_msg(m, PB_META_PROCESS, sub);
	}
	size_t nk = p->n_notes > p->n_locations ? p->n_notes : p->n_locations;
	uint64_t *v = malloc((nk ? nk : 1) * sizeof(*v));
	if (!v) {
		w->err = -ENOMEM;
		return;
	}
	for (uint32_t i = 0; i < p->n_notes; i++)
		v[i] = p->notes[i];
	emit_packed(m, PB_META_NOTE, v, p->n_notes);
	for (uint32_t i = 0; i < p->n_locations; i++)
		v[i] = p->locations[i].kind;
	emit_packed(m, PB_META_LOCATION_KIND, v, p->n_locations);
	free(v);
	emit_steps(m, sub, p);
	pb_msg(w, PB_PROFILE_GS_META, m);
}

/* The process root frame of each aggregated CPU sample with a role. */
static int process_frames(struct enc *e, const struct agg *aggs, size_t n_aggs)
{
	const struct gs_profile *p = e->p;
	uint32_t cap = 0;

	if (!(e->agg_pf = calloc(n_aggs ? n_aggs : 1, sizeof(*e->agg_pf))))
		return -ENOMEM;
	for (size_t i = 0; i < n_aggs; i++) {
		const struct gs_sample_ctx *s = gs_profile_ctx(p, &p->samples[aggs[i].rep]);
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

/* Their Locations (after the model's), or their Functions. */
static void emit_process_frames(struct pb *w, struct pb *m, struct pb *lm, const struct enc *e,
				uint32_t field)
{
	const struct gs_profile *p = e->p;

	for (uint32_t k = 0; k < e->n_pf; k++) {
		m->n = 0;
		if (field == PB_PROFILE_LOCATION) {
			pb_u64(m, PB_LOCATION_ID, p->n_locations + 1 + k);
			lm->n = 0;
			pb_u64(lm, PB_LINE_FUNCTION_ID, p->n_functions + 1 + k);
			pb_msg(m, PB_LOCATION_LINE, lm);
		} else {
			pb_u64(m, PB_FUNCTION_ID, p->n_functions + 1 + k);
			pb_i64(m, PB_FUNCTION_NAME, p->n_strings + e->n_extra + k);
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

	for (int v = 0; v < GS_NVALUES; v++)
		emit_value_type(&w, &m, PB_PROFILE_SAMPLE_TYPE, e.x[XS_TYPE0 + v],
				e.x[XS_UNIT0 + v]);
	if (p->process_frames && process_frames(&e, aggs, n_aggs))
		w.err = -ENOMEM;
	for (size_t i = 0; i < n_aggs; i++)
		emit_sample(&w, &e, &aggs[i], i);
	free(aggs);
	free(e.agg_pf);
	/* pprof takes the first Mapping message as the main
	 * binary ("File:" in its header): lead with the profiled program
	 * (main_mapping), not ld.so, [kernel.kallsyms] or [python].  Ids are
	 * unchanged. */
	uint32_t main_map = main_mapping(p);

	if (main_map)
		emit_mapping(&w, &m, &p->mappings[main_map - 1], main_map);
	for (uint32_t i = 0; i < p->n_mappings; i++)
		if (i + 1 != main_map)
			emit_mapping(&w, &m, &p->mappings[i], i + 1);
	for (uint32_t i = 1; i <= p->n_locations; i++)
		emit_location(&w, &m, &sub, p, i);
	emit_process_frames(&w, &m, &sub, &e, PB_PROFILE_LOCATION);
	for (uint32_t i = 1; i <= p->n_functions; i++)
		emit_function(&w, &m, &e, i);
	emit_process_frames(&w, &m, &sub, &e, PB_PROFILE_FUNCTION);
	/* string_table[0] = "" written explicitly */
	for (uint32_t i = 0; i < p->n_strings; i++)
		pb_utf8(&w, PB_PROFILE_STRING_TABLE, p->strings[i]);
	for (uint32_t i = 0; i < e.n_extra; i++)
		pb_bytes(&w, PB_PROFILE_STRING_TABLE, e.extra[i], strlen(e.extra[i]));
	for (uint32_t i = 0; i < e.n_pf; i++)
		pb_bytes(&w, PB_PROFILE_STRING_TABLE, e.pf[i].name, strlen(e.pf[i].name));
	free(e.pf);
	/* once: a second one means concatenation */
	pb_i64(&w, PB_PROFILE_TIME_NANOS, (int64_t)p->time_nanos);
	pb_i64(&w, PB_PROFILE_DURATION_NANOS, (int64_t)p->duration_nanos);
	emit_value_type(&w, &m, PB_PROFILE_PERIOD_TYPE, e.x[XS_CPU], e.x[XS_NANOSECONDS]);
	pb_i64(&w, PB_PROFILE_PERIOD, p->period_ns);
	if (p->n_comments) {
		uint64_t *c = malloc(p->n_comments * sizeof(*c));
		if (!c) {
			w.err = -ENOMEM;
		} else {
			for (uint32_t i = 0; i < p->n_comments; i++)
				c[i] = p->comments[i];
			emit_packed(&w, PB_PROFILE_COMMENT, c, p->n_comments);
			free(c);
		}
	}
	unsigned dst = p->default_sample_type < GS_NVALUES ? p->default_sample_type : GS_V_CPU_NS;
	pb_i64(&w, PB_PROFILE_DEFAULT_SAMPLE_TYPE, e.x[XS_TYPE0 + dst]);
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
