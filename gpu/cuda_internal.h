/* SPDX-License-Identifier: MIT */
/*
 * Internal to gpu/cuda.c, gpu/join.c and their unit tests:
 *  - mirrors of the two offline CUPTI parameter structs, so the core builds
 *    without CUDA headers (tests/unit/test_cuda.c checks them against the
 *    real cupti_pcsampling.h when it is installed);
 *  - an open-addressing hash map from a key of three u64 words to a u32
 *    value.  Exact keys (no collisions folded together); grows at 50% load.
 */
#ifndef GS_CUDA_INTERNAL_H
#define GS_CUDA_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "util/hash.h"
#include "util/hashmap.h"
#include "util/vec.h" /* gs_grow */

/* CUpti_GetSassToSourceCorrelationParams (cupti_pcsampling.h, CUDA 13.0;
 * unchanged since CUDA 11.3). */
struct gs_cupti_sass_params {
	size_t size;
	const void *cubin;
	const char *functionName;
	size_t cubinSize;
	uint32_t lineNumber;
	uint64_t pcOffset;
	char *fileName; /* malloc'ed by CUPTI; caller frees */
	char *dirName;  /* malloc'ed by CUPTI; caller frees */
};
/* CUpti_GetCubinCrcParams */
struct gs_cupti_crc_params {
	size_t size;
	size_t cubinSize;
	const void *cubin;
	uint64_t cubinCrc;
};
typedef int (*gs_cupti_sass_fn)(struct gs_cupti_sass_params *);
typedef int (*gs_cupti_crc_fn)(struct gs_cupti_crc_params *);

/* A map from a key of three 64-bit words to a 32-bit value: the entries in
 * an array, found through the one hash map (util/hashmap.h) in index use.
 * Zero-initialized; errors -ENOMEM. */
struct gs_kmap_ent {
	uint64_t a, b, c;
	uint32_t v;
};

struct gs_kmap {
	struct gs_kmap_ent *e;
	size_t n, cap;
	struct gs_hmap index; /* gs_kmap_hash -> index in e */
};

struct gs_kmap_key {
	const struct gs_kmap *m;
	uint64_t a, b, c;
};

static inline uint64_t gs_kmap_hash(uint64_t a, uint64_t b, uint64_t c)
{
	return gs_hash_combine(gs_hash_combine(gs_mix64(a), b), c);
}

static inline bool gs_kmap_eq(const void *ctx, uint64_t i)
{
	const struct gs_kmap_key *k = ctx;
	const struct gs_kmap_ent *e = &k->m->e[i];
	return e->a == k->a && e->b == k->b && e->c == k->c;
}

static inline struct gs_kmap_ent *gs_kmap_find(const struct gs_kmap *m, uint64_t a, uint64_t b,
					       uint64_t c, uint64_t h)
{
	struct gs_kmap_key k = { m, a, b, c };
	/* hashes rarely collide: check the first entry under h inline */
	const uint64_t *i = gs_hmap_get(&m->index, h);
	if (i && !gs_kmap_eq(&k, *i))
		i = gs_hmap_find_by(&m->index, h, gs_kmap_eq, &k);
	return i ? &m->e[*i] : NULL;
}

/* Value for the key, or false when absent. */
static inline bool gs_kmap_get(const struct gs_kmap *m, uint64_t a, uint64_t b, uint64_t c,
			       uint32_t *v)
{
	const struct gs_kmap_ent *e = gs_kmap_find(m, a, b, c, gs_kmap_hash(a, b, c));
	if (e)
		*v = e->v;
	return e != NULL;
}

/* Store v under the key (replacing).  0 or -ENOMEM (the map is unchanged). */
static inline int gs_kmap_put(struct gs_kmap *m, uint64_t a, uint64_t b, uint64_t c, uint32_t v)
{
	uint64_t h = gs_kmap_hash(a, b, c);
	struct gs_kmap_ent *e = gs_kmap_find(m, a, b, c, h);
	if (e) {
		e->v = v;
		return 0;
	}
	if (GS_GROW(m->e, m->cap, m->n + 1) || gs_hmap_add(&m->index, h, m->n))
		return -ENOMEM;
	m->e[m->n++] = (struct gs_kmap_ent){ a, b, c, v };
	return 0;
}

static inline void gs_kmap_free(struct gs_kmap *m)
{
	free(m->e);
	gs_hmap_free(&m->index);
	memset(m, 0, sizeof(*m));
}

#endif
