/* SPDX-License-Identifier: MIT */
/* The one hash map: see hashmap.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/hashmap.h"

static size_t home(const struct gs_hmap *m, uint64_t key)
{
	return (size_t)gs_mix64(key) & (m->cap - 1);
}

static void place(struct gs_hmap *m, uint64_t key, uint64_t val)
{
	size_t i = home(m, key);
	while (m->used[i])
		i = (i + 1) & (m->cap - 1);
	m->used[i] = 1;
	m->slots[i] = (struct gs_hmap_slot){ key, val };
	m->n++;
}

static int resize(struct gs_hmap *m, size_t ncap)
{
	struct gs_hmap n = { .cap = ncap };
	n.slots = malloc(ncap * sizeof(*n.slots));
	n.used = calloc(ncap, 1);
	if (!n.slots || !n.used) {
		free(n.slots);
		free(n.used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i])
			place(&n, m->slots[i].key, m->slots[i].val);
	free(m->slots);
	free(m->used);
	*m = n;
	return 0;
}

int gs_hmap_reserve(struct gs_hmap *m, size_t n)
{
	size_t ncap = m->cap ? m->cap : 16;
	if (n > SIZE_MAX / 4)
		return -ENOMEM;
	while (ncap < 2 * n)
		ncap *= 2;
	return ncap == m->cap ? 0 : resize(m, ncap);
}

/* Slot of key, or cap if absent. */
static size_t find(const struct gs_hmap *m, uint64_t key)
{
	if (!m->cap)
		return 0;
	for (size_t i = home(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (!m->used[i])
			return m->cap;
		if (m->slots[i].key == key)
			return i;
	}
}

uint64_t *gs_hmap_get(const struct gs_hmap *m, uint64_t key)
{
	size_t i = find(m, key);
	return i < m->cap ? &m->slots[i].val : NULL;
}

uint64_t *gs_hmap_slot(struct gs_hmap *m, uint64_t key, bool *added)
{
	uint64_t *v = gs_hmap_get(m, key);
	if (added)
		*added = !v;
	if (v)
		return v;
	if (gs_hmap_reserve(m, m->n + 1))
		return NULL;
	place(m, key, 0);
	return gs_hmap_get(m, key);
}

int gs_hmap_put(struct gs_hmap *m, uint64_t key, uint64_t val)
{
	uint64_t *v = gs_hmap_slot(m, key, NULL);
	if (!v)
		return -ENOMEM;
	*v = val;
	return 0;
}

/* Empty slot i and shift later entries of its probe run back over it. */
static void remove_at(struct gs_hmap *m, size_t i)
{
	size_t mask = m->cap - 1;
	m->used[i] = 0;
	m->n--;
	for (size_t j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
		size_t h = home(m, m->slots[j].key);
		/* j's entry may move to i only if its home is not in (i, j]. */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			m->used[i] = 1;
			m->used[j] = 0;
			i = j;
		}
	}
}

bool gs_hmap_del(struct gs_hmap *m, uint64_t key, uint64_t *val)
{
	size_t i = find(m, key);
	if (!m->cap || i == m->cap)
		return false;
	if (val)
		*val = m->slots[i].val;
	remove_at(m, i);
	return true;
}

uint64_t *gs_hmap_find_by(const struct gs_hmap *m, uint64_t hash,
			  bool (*eq)(const void *ctx, uint64_t val), const void *ctx)
{
	if (!m->cap)
		return NULL;
	for (size_t i = home(m, hash); m->used[i]; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].key == hash && eq(ctx, m->slots[i].val))
			return &m->slots[i].val;
	return NULL;
}

int gs_hmap_add(struct gs_hmap *m, uint64_t hash, uint64_t val)
{
	if (gs_hmap_reserve(m, m->n + 1))
		return -ENOMEM;
	place(m, hash, val);
	return 0;
}

bool gs_hmap_del_entry(struct gs_hmap *m, uint64_t hash, uint64_t val)
{
	if (!m->cap)
		return false;
	for (size_t i = home(m, hash); m->used[i]; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].key == hash && m->slots[i].val == val) {
			remove_at(m, i);
			return true;
		}
	return false;
}

bool gs_hmap_next(const struct gs_hmap *m, size_t *it, uint64_t *key, uint64_t *val)
{
	for (; *it < m->cap; (*it)++)
		if (m->used[*it]) {
			if (key)
				*key = m->slots[*it].key;
			if (val)
				*val = m->slots[*it].val;
			(*it)++;
			return true;
		}
	return false;
}

void gs_hmap_clear(struct gs_hmap *m)
{
	if (m->used)
		memset(m->used, 0, m->cap);
	m->n = 0;
}

void gs_hmap_free(struct gs_hmap *m)
{
	free(m->slots);
	free(m->used);
	memset(m, 0, sizeof(*m));
}
