/* SPDX-License-Identifier: MIT */
/*
 * The one growable array of the host side: a doubling realloc for push
 * sites (GS_GROW / GS_PUSH) and the address search over sorted tables
 * (symbols, mappings, perf maps, DWARF ranges, CFI rows), written once
 * instead of at every use.
 */
#ifndef GS_UTIL_VEC_H
#define GS_UTIL_VEC_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Grow *arr (elements of sz bytes, capacity *cap) to hold need elements:
 * the first allocation holds first elements, then the capacity doubles.
 * Returns 0 or -ENOMEM (then *arr and *cap are unchanged). */
static inline int gs_grow_from(void **arr, size_t *cap, size_t need, size_t sz, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : first;
	while (ncap < need)
		ncap *= 2;
	void *n = realloc(*arr, ncap * sz);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

/* The same, starting at 16 elements. */
static inline int gs_grow(void **arr, size_t *cap, size_t need, size_t sz)
{
	return gs_grow_from(arr, cap, need, sz, 16);
}

/* GS_GROW(arr, cap, need): room for need elements in arr (capacity cap, a
 * size_t lvalue).  GS_PUSH(arr, n, cap, v): append v; n and cap are size_t
 * lvalues.  Both evaluate to 0 or -ENOMEM. */
#define GS_GROW(arr, cap, need) gs_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))
#define GS_PUSH(arr, n, cap, v) (GS_GROW(arr, cap, (n) + 1) ? -ENOMEM : ((arr)[(n)++] = (v), 0))

/* In an array of n elements of sz bytes sorted by the uint64_t at byte
 * offset key_off, the number of elements whose key is <= x: element
 * [result - 1] is the last one at or below x (0: none). */
static inline size_t gs_upper_bound_u64(const void *arr, size_t n, size_t sz, size_t key_off,
					uint64_t x)
{
	const char *b = arr;
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;
		memcpy(&k, b + mid * sz + key_off, sizeof(k));
		if (k <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The same over arr[0..n) by its member field (which must be 64-bit). */
#define GS_UPPER_BOUND(arr, n, field, x)                                        \
	((void)sizeof(char[sizeof((arr)->field) == sizeof(uint64_t) ? 1 : -1]), \
	 gs_upper_bound_u64((arr), (n), sizeof(*(arr)), offsetof(__typeof__(*(arr)), field), (x)))

#endif
