/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/rawstacks.h"

void gs_rawstacks_init(struct gs_rawstacks *t)
{
	memset(t, 0, sizeof(*t));
}

void gs_rawstacks_free(struct gs_rawstacks *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->items[i].frames);
	free(t->items);
	free(t->slots);
	free(t->hashes);
	memset(t, 0, sizeof(*t));
}

/* FNV-1a over 64-bit words with a final mix: fast and good enough for
 * addresses, which differ in their low bits. */
static uint64_t hash_words(uint64_t h, const __u64 *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= w[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

static size_t n_words(const struct gs_cpu_sample *s)
{
	return (size_t)s->n_kernel + s->n_user + 2u * s->n_python;
}

static bool same(const struct gs_rawstack *r, const struct gs_cpu_sample *s, uint16_t flags)
{
	return r->tgid == s->tgid && r->flags == flags && r->n_kernel == s->n_kernel &&
	       r->n_user == s->n_user && r->n_python == s->n_python &&
	       !memcmp(r->frames, s->frames, n_words(s) * sizeof(uint64_t));
}

static int grow_slots(struct gs_rawstacks *t)
{
	uint32_t n = t->n_slots ? t->n_slots * 2 : 1024;
	uint32_t *slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t j = t->hashes[i] & (n - 1);

		while (slots[j])
			j = (j + 1) & (n - 1);
		slots[j] = i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->n_slots = n;
	return 0;
}

static int append(struct gs_rawstacks *t, const struct gs_cpu_sample *s, uint16_t flags, uint64_t h)
{
	size_t words = n_words(s);
	struct gs_rawstack *r;

	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		void *items = realloc(t->items, cap * sizeof(*t->items));
		void *hashes = items ? realloc(t->hashes, cap * sizeof(*t->hashes)) : NULL;

		if (items)
			t->items = items;
		if (!items || !hashes)
			return -ENOMEM;
		t->hashes = hashes;
		t->cap = cap;
	}
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
	t->hashes[t->n] = h;
	return (int)t->n++;
}

int64_t gs_rawstacks_intern(struct gs_rawstacks *t, const struct gs_cpu_sample *s,
			    uint16_t flags, bool *is_new)
{
	uint64_t shape = ((uint64_t)s->tgid << 32) ^ ((uint64_t)flags << 48) ^
			 ((uint64_t)s->n_kernel << 24) ^ ((uint64_t)s->n_user << 16) ^ s->n_python;
	uint64_t h = hash_words(0xcbf29ce484222325ULL ^ shape, s->frames, n_words(s));
	uint32_t j;
	int idx;

	if ((t->n + 1) * 2 > t->n_slots && grow_slots(t))
		return -ENOMEM;
	for (j = h & (t->n_slots - 1); t->slots[j]; j = (j + 1) & (t->n_slots - 1)) {
		uint32_t i = t->slots[j] - 1;

		if (t->hashes[i] == h && same(&t->items[i], s, flags)) {
			*is_new = false;
			return i;
		}
	}
	idx = append(t, s, flags, h);
	if (idx < 0)
		return idx;
	t->slots[j] = (uint32_t)idx + 1;
	*is_new = true;
	return idx;
}
