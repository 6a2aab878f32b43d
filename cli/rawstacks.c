/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/rawstacks.h"
#include "util/hash.h"
#include "util/vec.h"

void gs_rawstacks_init(struct gs_rawstacks *t)
{
	memset(t, 0, sizeof(*t));
}

void gs_rawstacks_free(struct gs_rawstacks *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->items[i].frames);
	free(t->items);
	gs_hmap_free(&t->index);
	memset(t, 0, sizeof(*t));
}

static size_t n_words(const struct gs_cpu_sample *s)
{
	return (size_t)s->n_kernel + s->n_user + 2u * s->n_python;
}

/* A candidate stack to compare against stored items. */
struct probe {
	const struct gs_rawstacks *t;
	const struct gs_cpu_sample *s;
	uint16_t flags;
};

static bool same(const void *ctx, uint64_t idx)
{
	const struct probe *q = ctx;
	const struct gs_rawstack *r = &q->t->items[idx];
	const struct gs_cpu_sample *s = q->s;

	return r->tgid == s->tgid && r->flags == q->flags && r->n_kernel == s->n_kernel &&
	       r->n_user == s->n_user && r->n_python == s->n_python &&
	       !memcmp(r->frames, s->frames, n_words(s) * sizeof(uint64_t));
}

static int append(struct gs_rawstacks *t, const struct gs_cpu_sample *s, uint16_t flags)
{
	size_t words = n_words(s);
	struct gs_rawstack *r;

	if (gs_grow_from((void **)&t->items, &t->cap, t->n + 1, sizeof(*t->items), 1024))
		return -ENOMEM;
	r = &t->items[t->n];
	r->frames = malloc(words ? words * sizeof(uint64_t) : 1);
	if (!r->frames)
		return -ENOMEM;
	memcpy(r->frames, s->frames, words * sizeof(uint64_t));
	r->tgid = s->tgid;
	r->flags = flags;
	r->n_kernel = s->n_kernel;
	r->n_user = s->n_user;
	r->n_python = s->n_python;
	return (int)t->n++;
}

/* The stack's hash: its shape, then every frame word. */
static uint64_t stack_hash(const struct gs_cpu_sample *s, uint16_t flags)
{
	uint64_t shape = ((uint64_t)s->tgid << 32) ^ ((uint64_t)flags << 48) ^
			 ((uint64_t)s->n_kernel << 24) ^ ((uint64_t)s->n_user << 16) ^ s->n_python;

	return gs_hash_words(s->frames, n_words(s), shape);
}

int64_t gs_rawstacks_intern(struct gs_rawstacks *t, const struct gs_cpu_sample *s, uint16_t flags,
			    bool *is_new)
{
	uint64_t h = stack_hash(s, flags);
	struct probe q = { t, s, flags };
	const uint64_t *found = gs_hmap_get(&t->index, h);
	int idx;

	if (found && !same(&q, *found)) /* a hash collision: walk them all */
		found = gs_hmap_find_by(&t->index, h, same, &q);
	if (found) {
		*is_new = false;
		return (int64_t)*found;
	}
	idx = append(t, s, flags);
	if (idx < 0)
		return idx;
	if (gs_hmap_add(&t->index, h, (uint64_t)idx)) {
		free(t->items[--t->n].frames);
		return -ENOMEM;
	}
	*is_new = true;
	return idx;
}
