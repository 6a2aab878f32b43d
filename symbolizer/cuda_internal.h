/* SPDX-License-Identifier: MIT */
/*
 * Internal to symbolizer/cuda.c, symbolizer/join.c and their unit tests:
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

struct gs_kmap_ent {
	uint64_t a, b, c;
	uint32_t v;
	uint32_t used;
};

struct gs_kmap {
	struct gs_kmap_ent *t;
	size_t cap, n; /* cap is 0 or a power of two */
};

static inline uint64_t gs_kmap_hash(uint64_t a, uint64_t b, uint64_t c)
{
	/* splitmix64-style mixing of each word */
	uint64_t h = 0x9e3779b97f4a7c15ull;
	uint64_t w[3] = { a, b, c };
	for (int i = 0; i < 3; i++) {
		uint64_t z = w[i] + h;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		h ^= z ^ (z >> 31);
		h *= 0x100000001b3ull;
	}
	return h;
}

static inline struct gs_kmap_ent *gs_kmap_slot(const struct gs_kmap *m, uint64_t a, uint64_t b,
					       uint64_t c)
{
	size_t i = gs_kmap_hash(a, b, c) & (m->cap - 1);
	for (;;) {
		struct gs_kmap_ent *e = &m->t[i];
		if (!e->used || (e->a == a && e->b == b && e->c == c))
			return e;
		i = (i + 1) & (m->cap - 1);
	}
}

/* Value for the key, or false when absent. */
static inline bool gs_kmap_get(const struct gs_kmap *m, uint64_t a, uint64_t b, uint64_t c,
			       uint32_t *v)
{
	if (!m->cap)
		return false;
	struct gs_kmap_ent *e = gs_kmap_slot(m, a, b, c);
	if (!e->used)
		return false;
	*v = e->v;
	return true;
}

static inline int gs_kmap_put(struct gs_kmap *m, uint64_t a, uint64_t b, uint64_t c, uint32_t v)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		struct gs_kmap_ent *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		struct gs_kmap old = *m;
		m->t = nt;
		m->cap = ncap;
		for (size_t i = 0; i < old.cap; i++)
			if (old.t[i].used)
				*gs_kmap_slot(m, old.t[i].a, old.t[i].b, old.t[i].c) = old.t[i];
		free(old.t);
	}
	struct gs_kmap_ent *e = gs_kmap_slot(m, a, b, c);
	if (!e->used) {
		e->a = a;
		e->b = b;
		e->c = c;
		e->used = 1;
		m->n++;
	}
	e->v = v;
	return 0;
}

static inline void gs_kmap_free(struct gs_kmap *m)
{
	free(m->t);
	m->t = NULL;
	m->cap = m->n = 0;
}

#endif
