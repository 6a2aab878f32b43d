/* SPDX-License-Identifier: MIT */
/*
 * The one hash map of the host side: 64-bit keys to 64-bit values, open
 * addressing with linear probing, a power-of-two capacity kept at most half
 * full, deletion by backward shift (no tombstones, so lookups never slow
 * down after churn).  Keys are placed by gs_mix64 (util/hash.h).
 *
 * Two ways to use it:
 *  - keyed: the key is the identity (a tgid, an address, a (pid, tid)
 *    packed into 64 bits): gs_hmap_get / gs_hmap_put / gs_hmap_slot /
 *    gs_hmap_del;
 *  - an index over records stored elsewhere (strings, functions, stacks):
 *    the key is the record's hash, the value its index, and equal hashes
 *    may repeat: gs_hmap_find_by walks the entries with that hash and asks
 *    the caller's eq(); gs_hmap_add adds one more.
 * A map is zero-initialized ({0}) and allocates on first insert.  Errors:
 * -ENOMEM (the map is unchanged).  Not thread-safe.
 */
#ifndef GS_UTIL_HASHMAP_H
#define GS_UTIL_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/hash.h"

struct gs_hmap_slot {
	uint64_t key;
	uint64_t val;
};

struct gs_hmap {
	struct gs_hmap_slot *slots;
	uint8_t *tags; /* one byte per slot: 0 = empty, else gs_hmap_tag() */
	size_t cap;    /* 0 or a power of two */
	size_t n;      /* occupied slots */
};

/* The tag of a key whose mixed value is h: its top 7 bits, never 0 (the
 * home slot comes from the low bits). */
static inline uint8_t gs_hmap_tag(uint64_t h)
{
	return (uint8_t)(0x80 | h >> 57);
}

/* Room for n entries without rehashing.  0 or -ENOMEM. */
int gs_hmap_reserve(struct gs_hmap *m, size_t n);

/* The value stored under key, or NULL. */
static inline uint64_t *gs_hmap_get(const struct gs_hmap *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	uint64_t h = gs_mix64(key);
	uint8_t t = gs_hmap_tag(h);
	for (size_t i = h & (m->cap - 1); m->tags[i]; i = (i + 1) & (m->cap - 1))
		if (m->tags[i] == t && m->slots[i].key == key)
			return &m->slots[i].val;
	return NULL;
}

/* Store val under key (replacing).  0 or -ENOMEM. */
int gs_hmap_put(struct gs_hmap *m, uint64_t key, uint64_t val);

/* The value under key, inserted as 0 if absent (*added says which); NULL
 * on -ENOMEM.  The pointer is valid until the next insert. */
uint64_t *gs_hmap_slot(struct gs_hmap *m, uint64_t key, bool *added);

/* Remove key; its value in *val when val is not NULL.  true if it was there. */
bool gs_hmap_del(struct gs_hmap *m, uint64_t key, uint64_t *val);

/* Index use: the first value whose entry has this hash and eq(ctx, value);
 * NULL if none. */
static inline uint64_t *gs_hmap_find_by(const struct gs_hmap *m, uint64_t hash,
					bool (*eq)(const void *ctx, uint64_t val), const void *ctx)
{
	if (!m->cap)
		return NULL;
	uint64_t h = gs_mix64(hash);
	uint8_t t = gs_hmap_tag(h);
	for (size_t i = h & (m->cap - 1); m->tags[i]; i = (i + 1) & (m->cap - 1))
		if (m->tags[i] == t && m->slots[i].key == hash && eq(ctx, m->slots[i].val))
			return &m->slots[i].val;
	return NULL;
}

/* Index use: one more entry (hash, val), even if hash is present.  0 or
 * -ENOMEM. */
int gs_hmap_add(struct gs_hmap *m, uint64_t hash, uint64_t val);

/* Index use: remove the entry (hash, val).  true if it was there. */
bool gs_hmap_del_entry(struct gs_hmap *m, uint64_t hash, uint64_t val);

/* Iterate: start *it at 0; each call yields one entry until false.  The
 * map must not change during a walk except through gs_hmap_del of the entry
 * just yielded, which is not allowed either: collect keys, then delete. */
bool gs_hmap_next(const struct gs_hmap *m, size_t *it, uint64_t *key, uint64_t *val);

/* Drop every entry, keep the memory. */
void gs_hmap_clear(struct gs_hmap *m);

/* Free the memory; the map is {0} again. */
void gs_hmap_free(struct gs_hmap *m);

#endif
