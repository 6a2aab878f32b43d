// SPDX-License-Identifier: MIT
/*
 * The profile model (include/gpusample/profile.h): interned strings, deduped
 * functions and stacks, growable arrays.
 *
 * Hash tables are open-addressed arrays of (index + 1), 0 = empty, kept at
 * most half full, so a lookup is one or two probes; the keys live in the
 * model arrays themselves.  Sized for >= 1M samples, ~100k locations.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusample/profile.h"
#include "output/internal.h"

const char *const gs_value_type[GS_NVALUES] = {
	"samples", "cpu", "offcpu", "gpu_samples", "gpu_samples_not_issued", "wall",
};
const char *const gs_value_unit[GS_NVALUES] = {
	"count", "nanoseconds", "nanoseconds", "count", "count", "nanoseconds",
};
const char *const gs_str_label_key[GS_NSTR_LABELS] = {
	[GS_SL_THREAD_STATE] = "thread_state",
	[GS_SL_THREAD_ROLE] = "thread_role",
	[GS_SL_HOST] = "host",
};
const char *const gs_num_label_key[GS_NNUM_LABELS] = {
	[GS_NL_RANK] = "rank",
	[GS_NL_LOCAL_RANK] = "local_rank",
	[GS_NL_WORLD_SIZE] = "world_size",
	[GS_NL_NODE_RANK] = "node_rank",
};

static char gs_empty_string[1];

/* Grow *arr (element size sz) so that it holds at least need elements. */
static int grow(void **arr, uint32_t *cap, size_t need, size_t sz)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? (size_t)*cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		return -ENOMEM;
	void *n = realloc(*arr, ncap * sz);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = (uint32_t)ncap;
	return 0;
}

#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

void gs_profile_init(struct gs_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->default_sample_type = GS_V_CPU_NS;
	if (GROW(p->strings, p->cap_strings, 1) == 0) {
		p->strings[0] = gs_empty_string;
		p->n_strings = 1;
	}
}

void gs_profile_free(struct gs_profile *p)
{
	for (uint32_t i = 1; i < p->n_strings; i++)
		free(p->strings[i]);
	free(p->strings);
	free(p->str_hash);
	free(p->mappings);
	free(p->functions);
	free(p->fn_hash);
	free(p->lines);
	free(p->locations);
	free(p->stack_locs);
	free(p->stacks);
	free(p->stack_hash);
	free(p->samples);
	free(p->processes);
	free(p->comments);
	free(p->notes);
	memset(p, 0, sizeof(*p));
}

/* ---- generic index hash ------------------------------------------------- */

/* Grow table *tab (capacity *cap, a power of two) to hold n + 1 entries at
 * most half full, re-inserting entries first..n-1 hashed with hashfn. */
static int rehash(uint32_t **tab, uint32_t *cap, uint32_t first, uint32_t n,
		  uint64_t (*hashfn)(const void *ctx, uint32_t i), const void *ctx)
{
	uint32_t ncap = *cap ? *cap : 1024;
	while ((uint64_t)(n + 1) * 2 > ncap)
		ncap *= 2;
	if (ncap == *cap && *tab)
		return 0;
	uint32_t *t = calloc(ncap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (uint32_t i = first; i < n; i++) {
		uint32_t h = (uint32_t)hashfn(ctx, i) & (ncap - 1);
		while (t[h])
			h = (h + 1) & (ncap - 1);
		t[h] = i + 1;
	}
	free(*tab);
	*tab = t;
	*cap = ncap;
	return 0;
}

/* ---- strings ------------------------------------------------------------ */

static uint64_t str_hash(const char *s)
{
	return gs_mix64(gs_hash_bytes(s, strlen(s), 0));
}

static uint64_t str_hash_i(const void *ctx, uint32_t i)
{
	const struct gs_profile *p = ctx;
	return str_hash(p->strings[i]);
}

int64_t gs_profile_find_str(const struct gs_profile *p, const char *s)
{
	if (!s || !*s)
		return 0;
	if (!p->str_hash)
		return -1;
	uint32_t mask = p->str_hash_cap - 1;
	for (uint32_t h = (uint32_t)str_hash(s) & mask;; h = (h + 1) & mask) {
		uint32_t e = p->str_hash[h];
		if (!e)
			return -1;
		if (strcmp(p->strings[e - 1], s) == 0)
			return e - 1;
	}
}

gs_str gs_profile_intern(struct gs_profile *p, const char *s)
{
	if (!s || !*s)
		return 0;
	if (!p->strings && GROW(p->strings, p->cap_strings, 1) == 0) {
		p->strings[0] = gs_empty_string;
		p->n_strings = 1;
	}
	if (!p->strings)
		return (gs_str)-1;
	int64_t f = gs_profile_find_str(p, s);
	if (f >= 0)
		return (gs_str)f;
	if ((uint64_t)(p->n_strings + 1) * 2 > p->str_hash_cap &&
	    rehash(&p->str_hash, &p->str_hash_cap, 1, p->n_strings, str_hash_i, p))
		return (gs_str)-1;
	if (GROW(p->strings, p->cap_strings, (size_t)p->n_strings + 1))
		return (gs_str)-1;
	char *copy = strdup(s);
	if (!copy)
		return (gs_str)-1;
	uint32_t idx = p->n_strings++;
	p->strings[idx] = copy;
	uint32_t mask = p->str_hash_cap - 1;
	uint32_t h = (uint32_t)str_hash(s) & mask;
	while (p->str_hash[h])
		h = (h + 1) & mask;
	p->str_hash[h] = idx + 1;
	return idx;
}

/* ---- mappings, functions, locations ------------------------------------- */

uint32_t gs_profile_add_mapping(struct gs_profile *p, const struct gs_mapping *m)
{
	if (GROW(p->mappings, p->cap_mappings, (size_t)p->n_mappings + 1))
		return 0;
	p->mappings[p->n_mappings++] = *m;
	return p->n_mappings;
}

static uint64_t fn_hash(const struct gs_function *f)
{
	uint64_t h = gs_mix64(f->name ^ ((uint64_t)f->system_name << 32));
	return gs_mix64(h ^ f->file ^ ((uint64_t)f->start_line << 24));
}

static uint64_t fn_hash_i(const void *ctx, uint32_t i)
{
	const struct gs_profile *p = ctx;
	return fn_hash(&p->functions[i]);
}

uint32_t gs_profile_add_function(struct gs_profile *p, const struct gs_function *f)
{
	if (p->fn_hash) {
		uint32_t mask = p->fn_hash_cap - 1;
		for (uint32_t h = (uint32_t)fn_hash(f) & mask; p->fn_hash[h]; h = (h + 1) & mask) {
			const struct gs_function *g = &p->functions[p->fn_hash[h] - 1];
			if (g->name == f->name && g->system_name == f->system_name &&
			    g->file == f->file && g->start_line == f->start_line)
				return p->fn_hash[h];
		}
	}
	if ((uint64_t)(p->n_functions + 1) * 2 > p->fn_hash_cap &&
	    rehash(&p->fn_hash, &p->fn_hash_cap, 0, p->n_functions, fn_hash_i, p))
		return 0;
	if (GROW(p->functions, p->cap_functions, (size_t)p->n_functions + 1))
		return 0;
	p->functions[p->n_functions++] = *f;
	uint32_t mask = p->fn_hash_cap - 1;
	uint32_t h = (uint32_t)fn_hash(f) & mask;
	while (p->fn_hash[h])
		h = (h + 1) & mask;
	p->fn_hash[h] = p->n_functions;
	return p->n_functions;
}

uint32_t gs_profile_add_location(struct gs_profile *p, uint32_t mapping, uint64_t address,
				 enum gs_frame_kind kind, const struct gs_line *lines,
				 uint32_t n_lines)
{
	if (GROW(p->locations, p->cap_locations, (size_t)p->n_locations + 1) ||
	    GROW(p->lines, p->cap_lines, (size_t)p->n_lines + n_lines))
		return 0;
	struct gs_location *l = &p->locations[p->n_locations++];
	l->mapping = mapping;
	l->address = address;
	l->kind = (uint8_t)kind;
	l->first_line = p->n_lines;
	l->n_lines = n_lines;
	if (n_lines)
		memcpy(&p->lines[p->n_lines], lines, n_lines * sizeof(*lines));
	p->n_lines += n_lines;
	return p->n_locations;
}

/* ---- stacks ------------------------------------------------------------- */

static uint64_t locs_hash(const uint32_t *locs, uint32_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ locs[i]) * 0x100000001b3ULL + (h >> 29);
	return gs_mix64(h);
}

static uint64_t stack_hash_i(const void *ctx, uint32_t i)
{
	const struct gs_profile *p = ctx;
	return locs_hash(&p->stack_locs[p->stacks[i].first], p->stacks[i].n);
}

int64_t gs_profile_add_stack(struct gs_profile *p, const uint32_t *locs, uint32_t n)
{
	uint64_t hv = locs_hash(locs, n);
	if (p->stack_hash) {
		uint32_t mask = p->stack_hash_cap - 1;
		for (uint32_t h = (uint32_t)hv & mask; p->stack_hash[h]; h = (h + 1) & mask) {
			const struct gs_stack *s = &p->stacks[p->stack_hash[h] - 1];
			if (s->n == n && (n == 0 || memcmp(&p->stack_locs[s->first], locs,
							   n * sizeof(*locs)) == 0))
				return p->stack_hash[h] - 1;
		}
	}
	if ((uint64_t)(p->n_stacks + 1) * 2 > p->stack_hash_cap &&
	    rehash(&p->stack_hash, &p->stack_hash_cap, 0, p->n_stacks, stack_hash_i, p))
		return -ENOMEM;
	if (GROW(p->stacks, p->cap_stacks, (size_t)p->n_stacks + 1) ||
	    GROW(p->stack_locs, p->cap_stack_locs, (size_t)p->n_stack_locs + n))
		return -ENOMEM;
	struct gs_stack *s = &p->stacks[p->n_stacks++];
	s->first = p->n_stack_locs;
	s->n = n;
	if (n)
		memcpy(&p->stack_locs[s->first], locs, n * sizeof(*locs));
	p->n_stack_locs += n;
	uint32_t mask = p->stack_hash_cap - 1;
	uint32_t h = (uint32_t)hv & mask;
	while (p->stack_hash[h])
		h = (h + 1) & mask;
	p->stack_hash[h] = p->n_stacks;
	return p->n_stacks - 1;
}

/* ---- samples, processes, comments --------------------------------------- */

int gs_profile_add_sample(struct gs_profile *p, const struct gs_sample *s)
{
	if (p->n_samples == p->cap_samples) {
		size_t ncap = p->cap_samples ? p->cap_samples * 2 : 1024;
		void *n = realloc(p->samples, ncap * sizeof(*p->samples));
		if (!n)
			return -ENOMEM;
		p->samples = n;
		p->cap_samples = ncap;
	}
	struct gs_sample *d = &p->samples[p->n_samples++];
	*d = *s;
	if (!d->values[GS_V_WALL_NS])
		d->values[GS_V_WALL_NS] = d->values[GS_V_CPU_NS] + d->values[GS_V_OFFCPU_NS];
	return 0;
}

int gs_profile_add_process(struct gs_profile *p, const struct gs_process *proc)
{
	if (GROW(p->processes, p->cap_processes, (size_t)p->n_processes + 1))
		return -ENOMEM;
	p->processes[p->n_processes++] = *proc;
	return 0;
}

static int add_fmt(struct gs_profile *p, gs_str **arr, uint32_t *n, uint32_t *cap, const char *fmt,
		   va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		return -ENOMEM;
	gs_str id = gs_profile_intern(p, s);
	free(s);
	if (id == (gs_str)-1 || grow((void **)arr, cap, (size_t)*n + 1, sizeof(**arr)))
		return -ENOMEM;
	(*arr)[(*n)++] = id;
	return 0;
}

int gs_profile_add_comment(struct gs_profile *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = add_fmt(p, &p->comments, &p->n_comments, &p->cap_comments, fmt, ap);
	va_end(ap);
	return rc;
}

int gs_profile_add_note(struct gs_profile *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = add_fmt(p, &p->notes, &p->n_notes, &p->cap_notes, fmt, ap);
	va_end(ap);
	return rc;
}
