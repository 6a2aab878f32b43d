/* SPDX-License-Identifier: MIT */
/* util/hashmap: random operations checked against a plain array model;
 * util/hash.h: the wire hashes built on it. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "gpusample/records.h"
#include "util/hash.h"
#include "util/hashmap.h"

#define NKEYS 512

Test(hashmap, random_ops_match_model)
{
	struct gs_hmap m = { 0 };
	uint64_t model[NKEYS];
	bool have[NKEYS] = { 0 };
	srand(7);
	for (int op = 0; op < 200000; op++) {
		/* small key space with colliding low bits forces long probe runs */
		uint64_t k = (uint64_t)(rand() % NKEYS) << 20;
		size_t ki = k >> 20;
		switch (rand() % 3) {
		case 0:
			cr_assert_eq(gs_hmap_put(&m, k, (uint64_t)op), 0);
			model[ki] = (uint64_t)op;
			have[ki] = true;
			break;
		case 1: {
			uint64_t v = 0;
			bool was = gs_hmap_del(&m, k, &v);
			cr_assert_eq(was, have[ki]);
			if (was)
				cr_assert_eq(v, model[ki]);
			have[ki] = false;
			break;
		}
		default: {
			uint64_t *v = gs_hmap_get(&m, k);
			cr_assert_eq(v != NULL, have[ki]);
			if (v)
				cr_assert_eq(*v, model[ki]);
		}
		}
	}
	size_t n = 0, it = 0;
	uint64_t k, v;
	while (gs_hmap_next(&m, &it, &k, &v)) {
		cr_assert(have[k >> 20]);
		cr_assert_eq(v, model[k >> 20]);
		n++;
	}
	size_t want = 0;
	for (int i = 0; i < NKEYS; i++)
		want += have[i];
	cr_assert_eq(n, want);
	cr_assert_eq(m.n, want);
	/* after the churn each occupied slot's tag still belongs to its key
	 * (backward shift moves tags with slots), and empty slots are 0 */
	size_t occupied = 0;
	for (size_t i = 0; i < m.cap; i++) {
		if (m.tags[i])
			cr_assert_eq(m.tags[i], gs_hmap_tag(gs_mix64(m.slots[i].key)), "slot %zu",
				     i);
		occupied += m.tags[i] != 0;
	}
	cr_assert_eq(occupied, want);
	gs_hmap_free(&m);
}

static bool eq_mod(const void *ctx, uint64_t val)
{
	return val % 1000 == *(const uint64_t *)ctx;
}

Test(hashmap, index_with_equal_hashes)
{
	struct gs_hmap m = { 0 };
	/* every entry has hash 42: lookups must tell them apart by eq() */
	for (uint64_t i = 0; i < 100; i++)
		cr_assert_eq(gs_hmap_add(&m, 42, i * 1000 + i), 0);
	for (uint64_t i = 0; i < 100; i++) {
		uint64_t *v = gs_hmap_find_by(&m, 42, eq_mod, &i);
		cr_assert_not_null(v);
		cr_assert_eq(*v, i * 1000 + i);
	}
	uint64_t absent = 500;
	cr_assert_null(gs_hmap_find_by(&m, 42, eq_mod, &absent));
	cr_assert(gs_hmap_del_entry(&m, 42, 7 * 1000 + 7));
	uint64_t seven = 7;
	cr_assert_null(gs_hmap_find_by(&m, 42, eq_mod, &seven));
	cr_assert_eq(m.n, 99);
	gs_hmap_free(&m);
}

Test(hashmap, slot_counts_and_clear)
{
	struct gs_hmap m = { 0 };
	cr_assert_null(gs_hmap_get(&m, 1));
	cr_assert_not(gs_hmap_del(&m, 1, NULL));
	for (int r = 0; r < 3; r++)
		for (uint64_t k = 0; k < 1000; k++) {
			bool added;
			uint64_t *c = gs_hmap_slot(&m, k, &added);
			cr_assert_not_null(c);
			cr_assert_eq(added, r == 0);
			++*c;
		}
	cr_assert_eq(*gs_hmap_get(&m, 999), 3);
	cr_assert_leq(m.n * 2, m.cap);
	gs_hmap_clear(&m);
	cr_assert_eq(m.n, 0);
	cr_assert_null(gs_hmap_get(&m, 999));
	gs_hmap_free(&m);
}

/* The wire hashes (agent and host compute them apart and must agree) are
 * built on util/hash.h: these values were taken from their definitions
 * before they shared its constants, so any drift shows here. */
Test(hash, wire_hashes_are_pinned)
{
	unsigned char b[37];
	for (int i = 0; i < 37; i++)
		b[i] = (unsigned char)(i * 7 + 1);
	cr_assert_eq(gs_cubin_hash(b, 0), 0xcbe1d9d842d34bd9ull);
	cr_assert_eq(gs_cubin_hash(b, 8), 0x468209db4a5d5a98ull);
	cr_assert_eq(gs_cubin_hash(b, 37), 0xf43a14ed4bd84079ull);
	cr_assert_eq(gs_cubin_hash("foobar", 6), 0x3302b53543342f46ull);
	cr_assert_eq(gs_kernel_name_hash("_Z6kernelPf"), 0x1f843090fd3040d9ull);
	/* FNV-1a 64 test vectors: seed 0 is the plain hash */
	cr_assert_eq(gs_hash_bytes("", 0, 0), 0xcbf29ce484222325ull);
	cr_assert_eq(gs_hash_bytes("a", 1, 0), 0xaf63dc4c8601ec8cull);
	cr_assert_eq(gs_hash_bytes("foobar", 6, 0), 0x85944171f73967e8ull);
}
