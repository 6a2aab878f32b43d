/* SPDX-License-Identifier: MIT */
/*
 * The one hash function of the host side: a 64-bit finalizer for integer
 * keys (MurmurHash3's fmix64) and FNV-1a folded through it for bytes.
 * Every table (util/hashmap.h and the few that hash records in place)
 * uses these two, so a weak mixer is fixed once.
 */
#ifndef GS_UTIL_HASH_H
#define GS_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t gs_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* FNV-1a over n bytes, seeded; callers that index a table mix the result. */
static inline uint64_t gs_hash_bytes(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *b = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* FNV-1a over n 64-bit words (a xor-shift folds each product's high bits
 * down: addresses differ in their low bits), seeded; one multiply per word,
 * for long keys such as stacks where per-word gs_hash_combine costs 3x.
 * Callers that index a table mix the result (util/hashmap.h does). */
static inline uint64_t gs_hash_words(const void *words, size_t n, uint64_t seed)
{
	const unsigned char *b = words;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;
	for (size_t i = 0; i < n; i++) {
		uint64_t w;
		memcpy(&w, b + i * sizeof(w), sizeof(w)); /* __u64 or uint64_t alike */
		h ^= w;
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

static inline uint64_t gs_hash_str(const char *s)
{
	return gs_mix64(gs_hash_bytes(s, strlen(s), 0));
}

/* Combine a running hash with one more 64-bit word. */
static inline uint64_t gs_hash_combine(uint64_t h, uint64_t w)
{
	return gs_mix64(h ^ (w + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

#endif
