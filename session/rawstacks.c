/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "session/rawstacks.h"
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

/* A view's frame words in the order stored: kernel ips, user ips, then
 * Python frames (2 words each). */
struct run {
	const void *at;
	size_t words;
};
static void runs_of(const struct gs_rec_cpu_view *v, struct run r[3])
{
	r[0] = (struct run){ v->kernel, v->n_kernel };
	r[1] = (struct run){ v->user, v->n_user };
	r[2] = (struct run){ v->py, 2u * (size_t)v->n_python };
}

/* A candidate stack to compare against stored items. */
struct probe {
	const struct gs_rawstacks *t;
	const struct gs_rec_cpu_view *v;
	uint16_t flags;
};

static bool same(const void *ctx, uint64_t idx)
{
	const struct probe *q = ctx;
	const struct gs_rawstack *r = &q->t->items[idx];
	const struct gs_rec_cpu_view *v = q->v;
	const __u64 *at = r->frames;
	struct run run[3];

	if (r->settled || r->tgid != v->s->tgid || r->flags != q->flags ||
	    r->n_kernel != v->n_kernel || r->n_user != v->n_user || r->n_python != v->n_python)
		return false;
	runs_of(v, run);
	for (int i = 0; i < 3; at += run[i].words, i++)
		if (memcmp(at, run[i].at, run[i].words * sizeof(uint64_t)))
			return false;
	return true;
}

static int append(struct gs_rawstacks *t, const struct gs_rec_cpu_view *v, uint16_t flags)
{
	size_t words = (size_t)v->n_kernel + v->n_user + 2u * v->n_python;
	struct gs_rawstack *r;
	struct run run[3];
	__u64 *at;

	if (gs_grow_from((void **)&t->items, &t->cap, t->n + 1, sizeof(*t->items), 1024))
		return -ENOMEM;
	r = &t->items[t->n];
	r->frames = malloc(words ? words * sizeof(uint64_t) : 1);
	if (!r->frames)
		return -ENOMEM;
	runs_of(v, run);
	at = r->frames;
	for (int i = 0; i < 3; at += run[i].words, i++)
		memcpy(at, run[i].at, run[i].words * sizeof(uint64_t));
	r->tgid = v->s->tgid;
	r->flags = flags;
	r->n_kernel = (uint8_t)v->n_kernel;
	r->n_user = (uint8_t)v->n_user;
	r->n_python = (uint16_t)v->n_python;
	r->settled = 0;
	return (int)t->n++;
}

/* The stack's hash: its shape, then every frame word, run after run. */
static uint64_t stack_hash(const struct gs_rec_cpu_view *v, uint16_t flags)
{
	uint64_t h = ((uint64_t)v->s->tgid << 32) ^ ((uint64_t)flags << 48) ^
		     ((uint64_t)v->n_kernel << 24) ^ ((uint64_t)v->n_user << 16) ^ v->n_python;
	struct run run[3];

	runs_of(v, run);
	for (int i = 0; i < 3; i++)
		h = gs_hash_words(run[i].at, run[i].words, h);
	return h;
}

int64_t gs_rawstacks_intern(struct gs_rawstacks *t, const struct gs_rec_cpu_view *v, uint16_t flags,
			    bool *is_new)
{
	uint64_t h = stack_hash(v, flags);
	struct probe q = { t, v, flags };
	const uint64_t *found = gs_hmap_get(&t->index, h);
	int idx;

	if (found && !same(&q, *found)) /* a hash collision: walk them all */
		found = gs_hmap_find_by(&t->index, h, same, &q);
	if (found) {
		*is_new = false;
		return (int64_t)*found;
	}
	idx = append(t, v, flags);
	if (idx < 0)
		return idx;
	if (gs_hmap_add(&t->index, h, (uint64_t)idx)) {
		free(t->items[--t->n].frames);
		return -ENOMEM;
	}
	*is_new = true;
	return idx;
}

void gs_rawstacks_settle(struct gs_rawstacks *t, uint32_t idx, uint32_t stack)
{
	struct gs_rawstack *r = &t->items[idx];

	free(r->frames);
	r->frames = NULL;
	r->settled = stack + 1;
}
