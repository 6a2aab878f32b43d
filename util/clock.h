/* SPDX-License-Identifier: MIT */
/*
 * The clock helper: nanoseconds of a POSIX clock.  CLOCK_MONOTONIC is the
 * clock BPF's bpf_ktime_get_ns reads, so host and BPF times compare.
 */
#ifndef GS_UTIL_CLOCK_H
#define GS_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gs_now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gs_mono_ns(void)
{
	return gs_now_ns(CLOCK_MONOTONIC);
}

/* Seconds of CLOCK_MONOTONIC, for deadlines kept as doubles. */
static inline double gs_mono_s(void)
{
	return (double)gs_mono_ns() / 1e9;
}

#endif
