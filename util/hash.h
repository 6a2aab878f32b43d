/* SPDX-License-Identifier: MIT */
/*
 * The one hash function of the host side: a 64-bit finalizer for integer
 * keys (MurmurHash3's fmix64) and FNV-1a folded through it for bytes.
 * Every table (util/hashmap.h and the few that hash records in place)
 * uses these two, so a weak mixer is fixed once.
 *
 * libc only and header-only: the agent (gpu_sampler/) includes it, and the
 * wire hashes of gpusample/records.h (kernel name and cubin identity,
 * computed by the agent and matched by the host) are built from the
 * constants and the FNV-1a below, so both sides share one definition.
 */
#ifndef GS_UTIL_HASH_H
#define GS_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GS_FNV64_OFFSET 0xcbf29ce484222325ULL /* FNV-1a 64: a wire format */
#define GS_FNV64_PRIME  0x100000001b3ULL
#define GS_GOLDEN64     0x9e3779b97f4a7c15ULL /* 2^64 / phi */
#define GS_FMIX64_M1    0xff51afd7ed558ccdULL /* MurmurHash3 fmix64 */
#define GS_FMIX64_M2    0xc4ceb9fe1a85ec53ULL

static inline uint64_t gs_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= GS_FMIX64_M1;
	x ^= x >> 33;
	x *= GS_FMIX64_M2;
	x ^= x >> 33;
	return x;
}

/* FNV-1a 64 of one more byte. */
static inline uint64_t gs_fnv1a_byte(uint64_t h, unsigned char b)
{
	return (h ^ b) * GS_FNV64_PRIME;
}

/* FNV-1a over n bytes, seeded (seed 0: plain FNV-1a 64); callers that
 * index a table mix the result. */
static inline uint64_t gs_hash_bytes(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *b = data;
	uint64_t h = GS_FNV64_OFFSET ^ seed;
	for (size_t i = 0; i < n; i++)
		h = gs_fnv1a_byte(h, b[i]);
	return h;
}

/* FNV-1a over n 64-bit words (a xor-shift folds each product's high bits
 * down: addresses differ in their low bits), seeded; one multiply per word,
 * for long keys such as stacks where per-word gs_hash_combine costs 3x.
 * Callers that index a table mix the result (util/hashmap.h does). */
static inline uint64_t gs_hash_words(const void *words, size_t n, uint64_t seed)
{
	const unsigned char *b = words;
	uint64_t h = GS_FNV64_OFFSET ^ seed;
	for (size_t i = 0; i < n; i++) {
		uint64_t w;
		memcpy(&w, b + i * sizeof(w), sizeof(w)); /* __u64 or uint64_t alike */
		h ^= w;
		h *= GS_FNV64_PRIME;
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
	return gs_mix64(h ^ (w + GS_GOLDEN64 + (h << 6) + (h >> 2)));
}

#endif
