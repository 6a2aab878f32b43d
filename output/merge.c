// SPDX-License-Identifier: MIT
/*
 * Merging profiles (`gpusample merge`, `gpusample report A B ...`): one
 * profile per host or per rank becomes one, every sample kept with its
 * labels (host, rank, pid, ...), so totals add up exactly and a viewer can
 * still cut by label.  Everything of src is re-interned into dst: strings,
 * mappings, functions (deduplicated), locations, stacks (deduplicated).
 * Only profiles written by one gpusample version are merged: the model is
 * versioned with the tool, so mixing versions could silently misread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/vec.h"

#define VERSION_COMMENT "gpusample "

const char *gs_profile_comment(const struct gs_profile *p, const char *key)
{
	size_t n = strlen(key);

	for (uint32_t i = 0; i < p->n_comments; i++) {
		const char *c = gs_profile_str(p, p->comments[i]);

		if (!strncmp(c, key, n))
			return c + n;
	}
	return NULL;
}

const char *gs_profile_version(const struct gs_profile *p)
{
	size_t n = strlen(VERSION_COMMENT);

	for (uint32_t i = 0; i < p->n_comments; i++) {
		const char *c = gs_profile_str(p, p->comments[i]);

		if (!strncmp(c, VERSION_COMMENT, n) && c[n] && !strchr(c + n, ' '))
			return c + n;
	}
	return NULL;
}

struct remap {
	struct gs_profile *dst;
	const struct gs_profile *src;
	uint32_t *map_id, *fn_id, *loc_id; /* src id -> dst id, index = src id */
	int err;
};

static gs_str str(struct remap *m, gs_str s)
{
	gs_str d = s ? gs_profile_intern(m->dst, gs_profile_str(m->src, s)) : 0;

	if (d == (gs_str)-1) {
		m->err = -ENOMEM;
		return 0;
	}
	return d;
}

static void merge_mappings(struct remap *m)
{
	for (uint32_t i = 0; i < m->src->n_mappings && !m->err; i++) {
		struct gs_mapping g = m->src->mappings[i];

		g.file = str(m, g.file);
		g.build_id = str(m, g.build_id);
		if (!(m->map_id[i + 1] = gs_profile_add_mapping(m->dst, &g)))
			m->err = -ENOMEM;
	}
}

static void merge_functions(struct remap *m)
{
	for (uint32_t i = 0; i < m->src->n_functions && !m->err; i++) {
		struct gs_function f = m->src->functions[i];

		f.name = str(m, f.name);
		f.system_name = str(m, f.system_name);
		f.file = str(m, f.file);
		if (!(m->fn_id[i + 1] = gs_profile_add_function(m->dst, &f)))
			m->err = -ENOMEM;
	}
}

/* Scratch of at least need elements of sz bytes; sets m->err on failure. */
static void *scratch(struct remap *m, void *buf, size_t *cap, uint32_t need, size_t sz)
{
	if (gs_grow(&buf, cap, need, sz))
		m->err = -ENOMEM;
	return buf;
}

static void merge_locations(struct remap *m)
{
	struct gs_line *lines = NULL;
	size_t cap = 0;

	for (uint32_t i = 0; i < m->src->n_locations && !m->err; i++) {
		const struct gs_location *l = &m->src->locations[i];

		lines = scratch(m, lines, &cap, l->n_lines, sizeof(*lines));
		if (m->err)
			break;
		for (uint32_t k = 0; k < l->n_lines; k++) {
			lines[k] = m->src->lines[l->first_line + k];
			lines[k].function = m->fn_id[lines[k].function];
		}
		m->loc_id[i + 1] = gs_profile_add_location(m->dst, m->map_id[l->mapping],
							   l->address, (enum gs_frame_kind)l->kind,
							   lines, l->n_lines);
		if (!m->loc_id[i + 1])
			m->err = -ENOMEM;
	}
	free(lines);
}

/* src stack index -> dst stack index, into stack_id[]. */
static void merge_stacks(struct remap *m, uint32_t *stack_id)
{
	uint32_t *locs = NULL;
	size_t cap = 0;

	for (uint32_t i = 0; i < m->src->n_stacks && !m->err; i++) {
		const struct gs_stack *st = &m->src->stacks[i];
		int64_t id;

		locs = scratch(m, locs, &cap, st->n, sizeof(*locs));
		if (m->err)
			break;
		for (uint32_t k = 0; k < st->n; k++)
			locs[k] = m->loc_id[m->src->stack_locs[st->first + k]];
		id = gs_profile_add_stack(m->dst, locs, st->n);
		if (id < 0)
			m->err = (int)id;
		else
			stack_id[i] = (uint32_t)id;
	}
	free(locs);
}

/* src context index -> dst context index (strings re-interned). */
static void merge_ctxs(struct remap *m, uint32_t *ctx_id)
{
	for (uint32_t i = 0; i < m->src->n_ctxs && !m->err; i++) {
		struct gs_sample_ctx c = m->src->ctxs[i];
		int64_t id = 0;

		c.thread_name = str(m, c.thread_name);
		c.process_role = str(m, c.process_role);
		c.cuda_stall_reason = str(m, c.cuda_stall_reason);
		c.gpu_attribution = str(m, c.gpu_attribution);
		for (int k = 0; k < GS_NSTR_LABELS; k++)
			c.str_labels[k] = str(m, c.str_labels[k]);
		if (!m->err && (id = gs_profile_add_ctx(m->dst, &c)) < 0)
			m->err = (int)id;
		ctx_id[i] = (uint32_t)id;
	}
}

/* Stacks and contexts, then samples pointing at their new indices. */
static void merge_samples(struct remap *m)
{
	uint32_t *stack_id = calloc(m->src->n_stacks ? m->src->n_stacks : 1, sizeof(*stack_id));
	uint32_t *ctx_id = calloc(m->src->n_ctxs ? m->src->n_ctxs : 1, sizeof(*ctx_id));

	if (!stack_id || !ctx_id)
		m->err = -ENOMEM;
	else {
		merge_stacks(m, stack_id);
		merge_ctxs(m, ctx_id);
	}
	for (size_t i = 0; i < m->src->n_samples && !m->err; i++) {
		struct gs_sample s = m->src->samples[i];

		s.stack = stack_id[s.stack];
		s.ctx = ctx_id[s.ctx];
		if (gs_profile_add_sample(m->dst, &s, NULL))
			m->err = -ENOMEM;
	}
	free(ctx_id);
	free(stack_id);
}

static void merge_processes(struct remap *m)
{
	for (uint32_t i = 0; i < m->src->n_processes && !m->err; i++) {
		struct gs_process g = m->src->processes[i];

		g.comm = str(m, g.comm);
		g.role = str(m, g.role);
		g.python = str(m, g.python);
		g.gpu = str(m, g.gpu);
		if (!m->err && gs_profile_add_process(m->dst, &g))
			m->err = -ENOMEM;
	}
}

/* Training steps, as they are: their times, like the samples', stay
 * relative to their own run's start; the report reads one process's steps
 * as a run of one pid numbered 1, 2, ... */
static void merge_steps(struct remap *m)
{
	if (!m->src->n_steps || m->err)
		return;
	if (GS_GROW(m->dst->steps, m->dst->cap_steps, m->dst->n_steps + m->src->n_steps)) {
		m->err = -ENOMEM;
		return;
	}
	memcpy(m->dst->steps + m->dst->n_steps, m->src->steps,
	       m->src->n_steps * sizeof(*m->src->steps));
	m->dst->n_steps += m->src->n_steps;
}

static bool has_str(const gs_str *v, uint32_t n, gs_str s)
{
	for (uint32_t i = 0; i < n; i++)
		if (v[i] == s)
			return true;
	return false;
}

/* Comments: the first profile's, then what another adds (a comment such as
 * "duration: 3.1 s" is kept once per distinct text).  Notes likewise. */
static void merge_texts(struct remap *m)
{
	for (uint32_t i = 0; i < m->src->n_comments && !m->err; i++) {
		gs_str s = str(m, m->src->comments[i]);

		if (!m->err && !has_str(m->dst->comments, m->dst->n_comments, s))
			m->err = gs_profile_add_comment(m->dst, "%s", gs_profile_str(m->dst, s));
	}
	for (uint32_t i = 0; i < m->src->n_notes && !m->err; i++) {
		gs_str s = str(m, m->src->notes[i]);

		if (!m->err && !has_str(m->dst->notes, m->dst->n_notes, s))
			m->err = gs_profile_add_note(m->dst, "%s", gs_profile_str(m->dst, s));
	}
}

static int view_rank(enum gs_value v)
{
	return v == GS_V_GPU_SAMPLES || v == GS_V_GPU_NOT_ISSUED ? 2 : v == GS_V_WALL_NS;
}

/* Add src's span to dst's runs (kept sorted by start) and make dst's
 * duration the time they cover: overlapping spans (the ranks of one job)
 * count once, separate runs add up (not the gap between them).  0 or
 * -ENOMEM. */
static int add_run_span(struct gs_profile *dst, const struct gs_profile *src)
{
	struct gs_run_span s = { src->time_nanos, src->time_nanos + src->duration_nanos };
	size_t i;
	uint64_t covered = 0, end = 0;

	if (GS_GROW(dst->run_spans, dst->cap_run_spans, dst->n_run_spans + 1))
		return -ENOMEM;
	for (i = dst->n_run_spans; i > 0 && dst->run_spans[i - 1].start > s.start; i--)
		dst->run_spans[i] = dst->run_spans[i - 1];
	dst->run_spans[i] = s;
	dst->n_run_spans++;
	for (i = 0; i < dst->n_run_spans; i++) {
		const struct gs_run_span *r = &dst->run_spans[i];

		if (r->end > end)
			covered += r->end - (r->start > end ? r->start : end);
		end = r->end > end ? r->end : end;
	}
	dst->time_nanos = dst->run_spans[0].start;
	dst->duration_nanos = covered;
	return 0;
}

/* Run facts: the time the runs cover, lost samples summed.  0 or -ENOMEM. */
static int merge_facts(struct gs_profile *dst, const struct gs_profile *src, bool first)
{
	if (first) {
		/* The run facts, field by field: all but the tables. */
		dst->frequency_hz = src->frequency_hz;
		dst->period_ns = src->period_ns;
		dst->default_sample_type = src->default_sample_type;
		dst->lost_samples = src->lost_samples;
		dst->process_frames = src->process_frames;
		return add_run_span(dst, src);
	}
	dst->lost_samples += src->lost_samples;
	dst->process_frames |= src->process_frames;
	/* GPU samples over wall time over CPU time: the richest view wins
	 * whatever the order of the inputs. */
	if (view_rank(src->default_sample_type) > view_rank(dst->default_sample_type))
		dst->default_sample_type = src->default_sample_type;
	return add_run_span(dst, src);
}

int gs_profile_merge(struct gs_profile *dst, const struct gs_profile *src, char *err, size_t errlen)
{
	const char *vd = gs_profile_version(dst), *vs = gs_profile_version(src);
	bool first = dst->n_comments == 0 && dst->n_samples == 0;
	struct remap m = { .dst = dst, .src = src };

	if (gs_profile_comment(src, GS_DUMP_COMMENT)) {
		snprintf(err, errlen,
			 "a dump (one stack per thread at one moment), not a sampled profile: "
			 "merge takes profiles of runs (read a dump with gpusample report)");
		return -EINVAL;
	}
	if (!vs || (!first && !vd)) {
		snprintf(err, errlen,
			 "not a gpusample profile (no \"gpusample VERSION\" comment): "
			 "merge only profiles that gpusample wrote");
		return -EINVAL;
	}
	if (!first && strcmp(vd, vs)) {
		snprintf(err, errlen,
			 "written by gpusample %s, the others by %s: merge profiles of one "
			 "version (profile again, or merge with the gpusample that wrote them)",
			 vs, vd);
		return -EINVAL;
	}
	m.map_id = calloc((size_t)src->n_mappings + 1, sizeof(uint32_t));
	m.fn_id = calloc((size_t)src->n_functions + 1, sizeof(uint32_t));
	m.loc_id = calloc((size_t)src->n_locations + 1, sizeof(uint32_t));
	if (!m.map_id || !m.fn_id || !m.loc_id)
		m.err = -ENOMEM;
	merge_mappings(&m);
	merge_functions(&m);
	merge_locations(&m);
	merge_samples(&m);
	merge_processes(&m);
	merge_steps(&m);
	merge_texts(&m);
	if (!m.err)
		m.err = merge_facts(dst, src, first);
	free(m.map_id);
	free(m.fn_id);
	free(m.loc_id);
	if (m.err)
		snprintf(err, errlen, "merging: %s", strerror(-m.err));
	return m.err;
}
