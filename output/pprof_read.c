// SPDX-License-Identifier: MIT
/*
 * pprof reader (gpusample report FILE, merge): a protobuf decoder for
 * profile.proto and gpusample's GsMeta (pprof_proto.h) into the profile
 * model, gzip or plain, bounded in size and in the totals its readers sum.
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
 * the payload, else empty (a message field of the wrong wire type reads as
 * an empty message, never as an earlier field's payload); for varints,
 * *val. */
static bool rd_field(struct pbr *r, uint32_t *field, int *wt, uint64_t *val, struct pbr *sub)
{
	if (r->err || r->p >= r->end)
		return false;
	*sub = (struct pbr){ 0 };
	uint64_t tag = rd_varint(r);
	*field = (uint32_t)(tag >> 3);
	*wt = (int)(tag & 7);
	switch (*wt) {
	case WT_VARINT:
		*val = rd_varint(r);
		break;
	case WT_I64:
		if (r->end - r->p < 8)
			r->err = -EBADMSG;
		else
			r->p += 8;
		break;
	case WT_I32:
		if (r->end - r->p < 4)
			r->err = -EBADMSG;
		else
			r->p += 4;
		break;
	case WT_LEN: {
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

/* uint64 file id -> model id, sized by the first pass's count of the
 * messages that put ids, so a put never allocates. */
struct idmap {
	struct gs_hmap m;
};

static int idmap_init(struct idmap *m, size_t n)
{
	m->m = (struct gs_hmap){ 0 };
	return gs_hmap_reserve(&m->m, n + 1);
}

static void idmap_free(struct idmap *m)
{
	gs_hmap_free(&m->m);
}

static void idmap_put(struct idmap *m, uint64_t k, uint32_t v)
{
	if (k)
		(void)gs_hmap_put(&m->m, k, v);
}

static uint32_t idmap_get(const struct idmap *m, uint64_t k)
{
	const uint64_t *v = k ? gs_hmap_get(&m->m, k) : NULL;
	return v ? (uint32_t)*v : 0;
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
	size_t bad_steps; /* GsStep messages out of order, dropped */
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
		d->n_maps += f == PB_PROFILE_MAPPING;
		d->n_locs += f == PB_PROFILE_LOCATION;
		d->n_fns += f == PB_PROFILE_FUNCTION;
		if (f != PB_PROFILE_STRING_TABLE || wt != WT_LEN)
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

/* A step's phase_ns: at most GS_STEP_PHASES values; n counts them all. */
struct phases {
	uint64_t v[GS_STEP_PHASES];
	size_t n;
};

static void phases_push(void *ctx, uint64_t x)
{
	struct phases *ph = ctx;

	if (ph->n < GS_STEP_PHASES)
		ph->v[ph->n] = x;
	ph->n++;
}

/* One GsStep.  Kept only in order (a process's steps numbered 1, 2, ...
 * after its previous one, as the writer keeps them): the report takes a
 * run of one pid's steps for one process. */
static void dec_step(struct dec *d, struct pbr sub)
{
	struct gs_profile *p = d->p;
	struct phases ph = { 0 };
	uint64_t x[PB_STEP_END_NS + 1] = { 0 }; /* the scalar fields by number */
	struct pbr s2;
	uint32_t f;
	int wt;
	uint64_t v;

	while (rd_field(&sub, &f, &wt, &v, &s2)) {
		if (f == PB_STEP_PHASE_NS)
			rd_repeated(wt, v, &s2, phases_push, &ph);
		else if (f <= PB_STEP_END_NS && wt == WT_VARINT)
			x[f] = v;
	}
	/* 32-bit fields cut as the writer never writes them wider */
	struct gs_step st = {
		.pid = (uint32_t)x[PB_STEP_PID],
		.tid = (uint32_t)x[PB_STEP_TID],
		.number = (uint32_t)x[PB_STEP_NUMBER],
		.backwards = (uint32_t)x[PB_STEP_BACKWARDS],
		.by_optimizer = x[PB_STEP_BY_OPTIMIZER] != 0,
		.mark_ns = x[PB_STEP_MARK_NS],
		.wall_ns = x[PB_STEP_WALL_NS],
		.start_ns = x[PB_STEP_START_NS],
		.end_ns = x[PB_STEP_END_NS],
	};
	memcpy(st.phase_ns, ph.v, sizeof(st.phase_ns));
	const struct gs_step *prev = p->n_steps ? &p->steps[p->n_steps - 1] : NULL;
	bool next = prev && prev->pid == st.pid ? st.number == prev->number + 1 : st.number == 1;

	if (sub.err || !next || ph.n > GS_STEP_PHASES) {
		d->bad_steps++;
		return;
	}
	if (GS_GROW(p->steps, p->cap_steps, p->n_steps + 1))
		d->bad_steps++; /* the report goes on without it */
	else
		p->steps[p->n_steps++] = st;
}

static void dec_meta(struct dec *d, struct pbr m)
{
	struct pbr sub;
	uint32_t f;
	int wt;
	uint64_t v;
	d->have_meta = true;
	while (rd_field(&m, &f, &wt, &v, &sub)) {
		if (f == PB_META_FREQUENCY_HZ)
			d->freq = (uint32_t)v;
		else if (f == PB_META_LOST_SAMPLES)
			d->lost = v;
		else if (f == PB_META_NOTE)
			rd_repeated(wt, v, &sub, u64vec_push, &d->notes);
		else if (f == PB_META_LOCATION_KIND)
			rd_repeated(wt, v, &sub, u64vec_push, &d->kinds);
		else if (f == PB_META_STEP && wt == WT_LEN)
			dec_step(d, sub);
		else if (f == PB_META_PROCESS && wt == WT_LEN) {
			struct gs_process pr = { 0 };
			struct pbr s2;
			while (rd_field(&sub, &f, &wt, &v, &s2)) {
				switch (f) {
				case PB_PROCESS_PID:
					pr.pid = (uint32_t)v;
					break;
				case PB_PROCESS_PPID:
					pr.ppid = (uint32_t)v;
					break;
				case PB_PROCESS_COMM:
					pr.comm = dstr(d, v);
					break;
				case PB_PROCESS_ROLE:
					pr.role = dstr(d, v);
					break;
				case PB_PROCESS_PYTHON:
					pr.python = dstr(d, v);
					break;
				case PB_PROCESS_GPU:
					pr.gpu = dstr(d, v);
					break;
				case PB_PROCESS_CPU_SAMPLES:
					pr.cpu_samples = v;
					break;
				case PB_PROCESS_EXITED:
					pr.exited = v != 0;
					break;
				case PB_PROCESS_NS_PID:
					pr.ns_pid = (uint32_t)v;
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
		case PB_PROFILE_SAMPLE_TYPE: {
			uint64_t type = 0;
			while (rd_field(&sub, &g, &wt2, &v2, &s2))
				if (g == PB_VALUE_TYPE_TYPE)
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
		case PB_PROFILE_MAPPING: {
			struct gs_mapping m = { 0 };
			uint64_t id = 0;
			while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
				switch (g) {
				case PB_MAPPING_ID:
					id = v2;
					break;
				case PB_MAPPING_MEMORY_START:
					m.start = v2;
					break;
				case PB_MAPPING_MEMORY_LIMIT:
					m.limit = v2;
					break;
				case PB_MAPPING_FILE_OFFSET:
					m.offset = v2;
					break;
				case PB_MAPPING_FILENAME:
					m.file = dstr(d, v2);
					break;
				case PB_MAPPING_BUILD_ID:
					m.build_id = dstr(d, v2);
					break;
				case PB_MAPPING_HAS_FUNCTIONS:
					m.has_functions = v2;
					break;
				case PB_MAPPING_HAS_FILENAMES:
					m.has_filenames = v2;
					break;
				case PB_MAPPING_HAS_LINE_NUMBERS:
					m.has_lines = v2;
					break;
				case PB_MAPPING_HAS_INLINE_FRAMES:
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
		case PB_PROFILE_FUNCTION: {
			struct gs_function fn = { 0 };
			uint64_t id = 0;
			while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
				switch (g) {
				case PB_FUNCTION_ID:
					id = v2;
					break;
				case PB_FUNCTION_NAME:
					fn.name = dstr(d, v2);
					break;
				case PB_FUNCTION_SYSTEM_NAME:
					fn.system_name = dstr(d, v2);
					break;
				case PB_FUNCTION_FILENAME:
					fn.file = dstr(d, v2);
					break;
				case PB_FUNCTION_START_LINE:
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
		case PB_PROFILE_TIME_NANOS:
			p->time_nanos = v;
			break;
		case PB_PROFILE_DURATION_NANOS:
			p->duration_nanos = v;
			break;
		case PB_PROFILE_PERIOD:
			p->period_ns = (int64_t)v;
			break;
		case PB_PROFILE_COMMENT: {
			struct u64vec c = { 0 };
			rd_repeated(wt, v, &sub, u64vec_push, &c);
			for (size_t i = 0; i < c.n; i++)
				gs_profile_add_comment(p, "%s", gs_profile_str(p, dstr(d, c.v[i])));
			free(c.v);
			break;
		}
		case PB_PROFILE_DEFAULT_SAMPLE_TYPE:
			for (int i = 0; i < GS_NVALUES; i++)
				if (strcmp(gs_profile_str(p, dstr(d, v)), gs_value_type[i]) == 0)
					p->default_sample_type = (enum gs_value)i;
			break;
		case PB_PROFILE_GS_META:
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

/* A process root frame written by the encoder (PROC_FRAME_PREFIX, pprof_proto.h). */
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
		if (f != PB_PROFILE_LOCATION || wt != WT_LEN)
			continue;
		uint64_t id = 0, address = 0;
		uint32_t mapping = 0, n = 0;
		while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
			if (g == PB_LOCATION_ID)
				id = v2;
			else if (g == PB_LOCATION_MAPPING_ID &&
				 !(mapping = idmap_get(&d->maps, v2)) && v2)
				return -EBADMSG; /* mapping_id without a Mapping */
			else if (g == PB_LOCATION_ADDRESS)
				address = v2;
			else if (g == PB_LOCATION_LINE && wt2 == WT_LEN && n < 64) {
				lines[n] = (struct gs_line){ 0 };
				while (rd_field(&s2, &h, &wt3, &v3, &s3)) {
					if (h == PB_LINE_FUNCTION_ID &&
					    !(lines[n].function = idmap_get(&d->fns, v3)))
						return -EBADMSG; /* function_id without a Function */
					else if (h == PB_LINE_LINE)
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
			    struct gs_sample_ctx *s)
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

static void dec_label(struct dec *d, struct pbr m, struct gs_sample_ctx *s)
{
	struct pbr sub;
	uint32_t f;
	int wt;
	uint64_t v, key = 0, str = 0, num = 0;
	while (rd_field(&m, &f, &wt, &v, &sub)) {
		if (f == PB_LABEL_KEY)
			key = v;
		else if (f == PB_LABEL_STR)
			str = v;
		else if (f == PB_LABEL_NUM)
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
		if (f != PB_PROFILE_SAMPLE || wt != WT_LEN)
			continue;
		struct gs_sample s = { 0 };
		struct gs_sample_ctx c = { .cuda_device = -1 };
		locs.n = vals.n = 0;
		while (rd_field(&sub, &g, &wt2, &v2, &s2)) {
			if (g == PB_SAMPLE_LOCATION_ID)
				rd_repeated(wt2, v2, &s2, u64vec_push, &locs);
			else if (g == PB_SAMPLE_VALUE)
				rd_repeated(wt2, v2, &s2, u64vec_push, &vals);
			else if (g == PB_SAMPLE_LABEL && wt2 == WT_LEN)
				dec_label(d, s2, &c);
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
			rc = gs_profile_add_sample(d->p, &s, &c);
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
		const struct gs_sample_ctx *c = gs_profile_ctx(p, s);
		if (c->cuda_device >= 0 || (!c->pid && !c->tid))
			continue;
		struct gs_process *pr = (struct gs_process *)gs_find_process(p, c->pid);
		if (!pr) {
			struct gs_process np = { .pid = c->pid,
						 .comm = c->thread_name,
						 .role = c->process_role };
			if (gs_profile_add_process(p, &np))
				return -ENOMEM;
			pr = &p->processes[p->n_processes - 1];
		}
		if (c->tid == c->pid && c->thread_name)
			pr->comm = c->thread_name;
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
	if (d->bad_steps)
		gs_profile_add_note(p,
				    "steps: %zu of the file's training steps malformed or out of "
				    "order, left out of the Steps section (a damaged file?)",
				    d->bad_steps);
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
