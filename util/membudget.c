// SPDX-License-Identifier: MIT
#include "util/membudget.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gs_mem_stats s;
static int configured;

/* Called with mu held. */
static void configure(void)
{
	const char *env = getenv("GS_MEM_BUDGET_MB");
	char *end;

	if (configured)
		return;
	configured = 1;
	s.budget = GS_MEM_BUDGET_DEFAULT;
	if (env && *env) {
		unsigned long long mb = strtoull(env, &end, 10);
		if (!*end && mb > 0 && mb < (1ull << 24))
			s.budget = mb << 20;
	}
}

int gs_mem_charge(enum gs_mem_kind kind, uint64_t bytes)
{
	int err = 0;

	if ((unsigned)kind >= GS_MEM_KINDS)
		return -EINVAL;
	pthread_mutex_lock(&mu);
	configure();
	if (bytes > s.budget - s.used) {
		s.refused[kind]++;
		err = -ENOSPC;
	} else {
		s.used += bytes;
		s.used_by[kind] += bytes;
		if (s.used > s.peak)
			s.peak = s.used;
	}
	pthread_mutex_unlock(&mu);
	return err;
}

void gs_mem_release(enum gs_mem_kind kind, uint64_t bytes)
{
	if ((unsigned)kind >= GS_MEM_KINDS)
		return;
	pthread_mutex_lock(&mu);
	bytes = bytes < s.used_by[kind] ? bytes : s.used_by[kind];
	s.used_by[kind] -= bytes;
	s.used -= bytes;
	pthread_mutex_unlock(&mu);
}

uint64_t gs_mem_left(void)
{
	pthread_mutex_lock(&mu);
	configure();
	uint64_t left = s.budget > s.used ? s.budget - s.used : 0;
	pthread_mutex_unlock(&mu);
	return left;
}

uint64_t gs_mem_set_budget(uint64_t bytes)
{
	pthread_mutex_lock(&mu);
	configure();
	uint64_t old = s.budget;
	s.budget = bytes > s.used ? bytes : s.used; /* what is in use stays */
	pthread_mutex_unlock(&mu);
	return old;
}

void gs_mem_stats(struct gs_mem_stats *st)
{
	pthread_mutex_lock(&mu);
	configure();
	*st = s;
	pthread_mutex_unlock(&mu);
}

const char *gs_mem_kind_name(enum gs_mem_kind kind)
{
	static const char *const names[GS_MEM_KINDS] = { "perf maps", "unwind tables", "GPU stores",
							 "maps snapshots", "debug sections" };
	return (unsigned)kind < GS_MEM_KINDS ? names[kind] : "?";
}
