/* SPDX-License-Identifier: MIT */
/* The one hash map: see hashmap.h. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/hashmap.h"

static size_t home(const struct gs_hmap *m, uint64_t key)
{
	return (size_t)gs_mix64(key) & (m->cap - 1);
}

/* Store (key, val) in the first empty slot of key's run; its index. */
static size_t place(struct gs_hmap *m, uint64_t key, uint64_t val)
{
	uint64_t h = gs_mix64(key);
	size_t i = h & (m->cap - 1);
	while (m->tags[i])
		i = (i + 1) & (m->cap - 1);
	m->tags[i] = gs_hmap_tag(h);
	m->slots[i] = (struct gs_hmap_slot){ key, val };
	m->n++;
	return i;
}

static int resize(struct gs_hmap *m, size_t ncap)
{
	struct gs_hmap n = { .cap = ncap };
	n.slots = malloc(ncap * sizeof(*n.slots));
	n.tags = calloc(ncap, 1);
	if (!n.slots || !n.tags) {
		free(n.slots);
		free(n.tags);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->tags[i])
			place(&n, m->slots[i].key, m->slots[i].val);
	free(m->slots);
	free(m->tags);
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

uint64_t *gs_hmap_slot(struct gs_hmap *m, uint64_t key, bool *added)
{
	uint64_t *v = gs_hmap_get(m, key);
	if (added)
		*added = !v;
	if (v)
		return v;
	if (gs_hmap_reserve(m, m->n + 1))
		return NULL;
	return &m->slots[place(m, key, 0)].val;
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
	m->tags[i] = 0;
	m->n--;
	for (size_t j = (i + 1) & mask; m->tags[j]; j = (j + 1) & mask) {
		size_t h = home(m, m->slots[j].key);
		/* j's entry may move to i only if its home is not in (i, j]. */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			m->tags[i] = m->tags[j];
			m->tags[j] = 0;
			i = j;
		}
	}
}

bool gs_hmap_del(struct gs_hmap *m, uint64_t key, uint64_t *val)
{
	uint64_t *v = gs_hmap_get(m, key);
	if (!v)
		return false;
	if (val)
		*val = *v;
	/* v is the val member of its slot */
	struct gs_hmap_slot *s =
	    (struct gs_hmap_slot *)((char *)v - offsetof(struct gs_hmap_slot, val));
	remove_at(m, (size_t)(s - m->slots));
	return true;
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
	for (size_t i = home(m, hash); m->tags[i]; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].key == hash && m->slots[i].val == val) {
			remove_at(m, i);
			return true;
		}
	return false;
}

bool gs_hmap_next(const struct gs_hmap *m, size_t *it, uint64_t *key, uint64_t *val)
{
	for (; *it < m->cap; (*it)++)
		if (m->tags[*it]) {
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
	if (m->tags)
		memset(m->tags, 0, m->cap);
	m->n = 0;
}

void gs_hmap_free(struct gs_hmap *m)
{
	free(m->slots);
	free(m->tags);
	memset(m, 0, sizeof(*m));
}
