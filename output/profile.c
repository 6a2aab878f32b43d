// SPDX-License-Identifier: MIT
/*
 * The profile model (include/gpusample/profile.h): interned strings, deduped
 * functions and stacks, growable arrays.
 *
 * Strings, functions and stacks are indexed by util/hashmap.h (index use:
 * the record's hash -> its index; the records live in the model arrays).
 * Sized for >= 1M samples, ~100k locations.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusample/profile.h"
#include "output/internal.h"

const char *const gs_value_type[GS_NVALUES] = {
	"samples",
	"cpu",
	"offcpu",
	"gpu_samples",
	"gpu_samples_not_issued",
	"wall",
	"gpu_alloc_space",
	"gpu_inuse_space",
};
const char *const gs_value_unit[GS_NVALUES] = {
	"count", "nanoseconds", "nanoseconds", "count", "count", "nanoseconds", "bytes", "bytes",
};
const char *const gs_str_label_key[GS_NSTR_LABELS] = {
	[GS_SL_THREAD_STATE] = "thread_state",
	[GS_SL_THREAD_ROLE] = "thread_role",
	[GS_SL_HOST] = "host",
	[GS_SL_PHASE] = "phase",
	[GS_SL_WAKER_ROLE] = "waker_role",
	[GS_SL_WAKER] = "waker",
};
const char *const gs_num_label_key[GS_NNUM_LABELS] = {
	[GS_NL_RANK] = "rank",
	[GS_NL_LOCAL_RANK] = "local_rank",
	[GS_NL_WORLD_SIZE] = "world_size",
	[GS_NL_NODE_RANK] = "node_rank",
	[GS_NL_STEP] = "step",
	[GS_NL_WAKER_TID] = "waker_tid",
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
	gs_hmap_free(&p->str_index);
	free(p->mappings);
	free(p->functions);
	gs_hmap_free(&p->fn_index);
	free(p->lines);
	free(p->locations);
	free(p->stack_locs);
	free(p->stacks);
	gs_hmap_free(&p->stack_index);
	free(p->ctxs);
	gs_hmap_free(&p->ctx_index);
	gs_hmap_free(&p->proc_index);
	free(p->samples);
	free(p->processes);
	free(p->comments);
	free(p->notes);
	free(p->run_spans);
	free(p->steps);
	free(p->counters);
	memset(p, 0, sizeof(*p));
}

/* ---- strings ------------------------------------------------------------ */

struct str_key {
	const struct gs_profile *p;
	const char *s;
};

static bool str_eq(const void *ctx, uint64_t i)
{
	const struct str_key *k = ctx;
	return strcmp(k->p->strings[i], k->s) == 0;
}

int64_t gs_profile_find_str(const struct gs_profile *p, const char *s)
{
	if (!s || !*s)
		return 0;
	struct str_key k = { p, s };
	const uint64_t *v = gs_hmap_find_by(&p->str_index, gs_hash_str(s), str_eq, &k);
	return v ? (int64_t)*v : -1;
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
	uint64_t h = gs_hash_str(s);
	struct str_key k = { p, s };
	const uint64_t *v = gs_hmap_find_by(&p->str_index, h, str_eq, &k);
	if (v)
		return (gs_str)*v;
	if (p->n_strings == UINT32_MAX - 1 ||
	    GROW(p->strings, p->cap_strings, (size_t)p->n_strings + 1))
		return (gs_str)-1;
	char *copy = strdup(s);
	if (!copy)
		return (gs_str)-1;
	if (gs_hmap_add(&p->str_index, h, p->n_strings)) {
		free(copy);
		return (gs_str)-1;
	}
	p->strings[p->n_strings] = copy;
	return p->n_strings++;
}

/* ---- mappings, functions, locations ------------------------------------- */

uint32_t gs_profile_add_mapping(struct gs_profile *p, const struct gs_mapping *m)
{
	if (GROW(p->mappings, p->cap_mappings, (size_t)p->n_mappings + 1))
		return 0;
	p->mappings[p->n_mappings++] = *m;
	return p->n_mappings;
}

struct fn_key {
	const struct gs_profile *p;
	const struct gs_function *f;
};

static bool fn_eq(const void *ctx, uint64_t i)
{
	const struct fn_key *k = ctx;
	const struct gs_function *g = &k->p->functions[i], *f = k->f;
	return g->name == f->name && g->system_name == f->system_name && g->file == f->file &&
	       g->start_line == f->start_line;
}

uint32_t gs_profile_add_function(struct gs_profile *p, const struct gs_function *f)
{
	uint64_t h = gs_hash_combine(f->name ^ ((uint64_t)f->system_name << 32),
				     f->file ^ ((uint64_t)f->start_line << 32));
	struct fn_key k = { p, f };
	const uint64_t *v = gs_hmap_find_by(&p->fn_index, h, fn_eq, &k);
	if (v)
		return (uint32_t)*v + 1;
	if (p->n_functions == UINT32_MAX - 1 ||
	    GROW(p->functions, p->cap_functions, (size_t)p->n_functions + 1) ||
	    gs_hmap_add(&p->fn_index, h, p->n_functions))
		return 0;
	p->functions[p->n_functions++] = *f;
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

/* Two location ids per word, the odd one last folded in alone. */
static uint64_t locs_hash(const uint32_t *locs, uint32_t n)
{
	uint64_t h = gs_hash_words(locs, n / 2, n);
	return n & 1 ? gs_hash_combine(h, locs[n - 1]) : h;
}

struct stack_key {
	const struct gs_profile *p;
	const uint32_t *locs;
	uint32_t n;
};

static bool stack_eq(const void *ctx, uint64_t i)
{
	const struct stack_key *k = ctx;
	const struct gs_stack *s = &k->p->stacks[i];
	return s->n == k->n && (k->n == 0 || memcmp(&k->p->stack_locs[s->first], k->locs,
						    k->n * sizeof(*k->locs)) == 0);
}

int64_t gs_profile_add_stack(struct gs_profile *p, const uint32_t *locs, uint32_t n)
{
	uint64_t h = locs_hash(locs, n);
	struct stack_key k = { p, locs, n };
	const uint64_t *v = gs_hmap_find_by(&p->stack_index, h, stack_eq, &k);
	if (v)
		return (int64_t)*v;
	if (GROW(p->stacks, p->cap_stacks, (size_t)p->n_stacks + 1) ||
	    GROW(p->stack_locs, p->cap_stack_locs, (size_t)p->n_stack_locs + n) ||
	    gs_hmap_add(&p->stack_index, h, p->n_stacks))
		return -ENOMEM;
	struct gs_stack *s = &p->stacks[p->n_stacks++];
	s->first = p->n_stack_locs;
	s->n = n;
	if (n)
		memcpy(&p->stack_locs[s->first], locs, n * sizeof(*locs));
	p->n_stack_locs += n;
	return p->n_stacks - 1;
}

/* ---- samples, processes, comments --------------------------------------- */

static uint64_t ctx_hash(const struct gs_sample_ctx *c)
{
	uint64_t h = gs_hash_combine(((uint64_t)c->pid << 32) | c->tid, c->thread_name);
	h = gs_hash_combine(h, ((uint64_t)c->process_role << 32) | c->cuda_stall_reason);
	h = gs_hash_combine(h, ((uint64_t)c->gpu_attribution << 32) | (uint32_t)c->cuda_device);
	h = gs_hash_combine(h, c->num_set);
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		h = gs_hash_combine(h, c->str_labels[i]);
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		h = gs_hash_combine(h, (uint64_t)c->num_labels[i]);
	return h;
}

/* Field by field: padding, if a field is ever added, is not compared. */
static bool ctx_same(const struct gs_sample_ctx *a, const struct gs_sample_ctx *b)
{
	if (a->pid != b->pid || a->tid != b->tid || a->thread_name != b->thread_name ||
	    a->process_role != b->process_role || a->cuda_stall_reason != b->cuda_stall_reason ||
	    a->gpu_attribution != b->gpu_attribution || a->cuda_device != b->cuda_device ||
	    a->num_set != b->num_set)
		return false;
	for (int i = 0; i < GS_NSTR_LABELS; i++)
		if (a->str_labels[i] != b->str_labels[i])
			return false;
	for (int i = 0; i < GS_NNUM_LABELS; i++)
		if (a->num_labels[i] != b->num_labels[i])
			return false;
	return true;
}

struct ctx_key {
	const struct gs_profile *p;
	const struct gs_sample_ctx *c;
};

static bool ctx_eq(const void *key, uint64_t i)
{
	const struct ctx_key *k = key;
	return ctx_same(&k->p->ctxs[i], k->c);
}

int64_t gs_profile_add_ctx(struct gs_profile *p, const struct gs_sample_ctx *in)
{
	struct gs_sample_ctx c1 = *in, *c = &c1;

	for (int i = 0; i < GS_NNUM_LABELS; i++) /* an absent label has no value */
		if (!(c->num_set & (1u << i)))
			c->num_labels[i] = 0;
	if (p->last_ctx < p->n_ctxs && ctx_same(&p->ctxs[p->last_ctx], c))
		return p->last_ctx;
	uint64_t h = ctx_hash(c);
	struct ctx_key k = { p, c };
	const uint64_t *v = gs_hmap_find_by(&p->ctx_index, h, ctx_eq, &k);
	if (v)
		return p->last_ctx = (uint32_t)*v;
	if (GROW(p->ctxs, p->cap_ctxs, (size_t)p->n_ctxs + 1) ||
	    gs_hmap_add(&p->ctx_index, h, p->n_ctxs))
		return -ENOMEM;
	p->ctxs[p->n_ctxs] = *c;
	return p->last_ctx = p->n_ctxs++;
}

int gs_profile_add_sample(struct gs_profile *p, const struct gs_sample *s,
			  const struct gs_sample_ctx *c)
{
	int64_t ctx = c ? gs_profile_add_ctx(p, c) : s->ctx;

	if (ctx < 0)
		return (int)ctx;
	if ((uint64_t)ctx >= p->n_ctxs)
		return -EINVAL;
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
	d->ctx = (uint32_t)ctx;
	if (!d->values[GS_V_WALL_NS])
		d->values[GS_V_WALL_NS] = d->values[GS_V_CPU_NS] + d->values[GS_V_OFFCPU_NS];
	return 0;
}

/* Old context index -> new one, filled on first use (UINT32_MAX: not yet). */
static int edit_one(struct gs_profile *p, uint32_t *memo, struct gs_sample *s, gs_ctx_edit_fn edit,
		    void *arg)
{
	uint32_t old = s->ctx;

	if (memo[old] == UINT32_MAX) {
		struct gs_sample_ctx c = p->ctxs[old];
		int64_t id;

		edit(&c, arg);
		if ((id = gs_profile_add_ctx(p, &c)) < 0)
			return (int)id;
		memo[old] = (uint32_t)id;
	}
	s->ctx = memo[old];
	return 0;
}

int gs_profile_edit_ctx(struct gs_profile *p, gs_ctx_pick_fn pick, gs_ctx_edit_fn edit, void *arg)
{
	/* only the contexts that exist now are edited: new ones are results */
	uint32_t n = p->n_ctxs, *memo = malloc((n ? n : 1) * sizeof(*memo));
	int rc = 0;

	if (!memo)
		return -ENOMEM;
	memset(memo, 0xff, (n ? n : 1) * sizeof(*memo));
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		struct gs_sample *s = &p->samples[i];

		if (!pick || pick(s, &p->ctxs[s->ctx], arg))
			rc = edit_one(p, memo, s, edit, arg);
	}
	free(memo);
	return rc;
}

int gs_profile_add_process(struct gs_profile *p, const struct gs_process *proc)
{
	if (GROW(p->processes, p->cap_processes, (size_t)p->n_processes + 1) ||
	    gs_hmap_put(&p->proc_index, proc->pid, p->n_processes))
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

int gs_profile_add_counter(struct gs_profile *p, uint32_t pid, const char *name, uint64_t time_ns,
			   int64_t value)
{
	gs_str n = gs_profile_intern(p, name);

	if (n == (gs_str)-1 || GROW(p->counters, p->cap_counters, p->n_counters + 1))
		return -ENOMEM;
	p->counters[p->n_counters++] =
	    (struct gs_counter_point){ .pid = pid, .name = n, .time_ns = time_ns, .value = value };
	return 0;
}

/* 5M samples of a long run are 320 MB at this size: keep it. */
/* 80 since the two GPU memory values (64 before): 16 MiB more per million
 * samples. */
_Static_assert(sizeof(struct gs_sample) == 80, "struct gs_sample grew");
