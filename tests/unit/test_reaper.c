/* SPDX-License-Identifier: MIT */
/* bpf/reaper: links closed on its thread in order, free waits for every
 * pending close, a full ring or no thread closes inline (counted), USDT
 * closes wait for the USDT lock.  The links are tokens: the close function
 * is the test's, so no BPF is needed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sched.h>
#include <time.h>

#include "bpf/reaper.h"

#define MAXC 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static uintptr_t order[MAXC];
static int n_closed, n_entered;
static bool gate_open;
static pthread_t main_thread;

static struct bpf_link *tok(uintptr_t i)
{
	return (struct bpf_link *)i;
}

static void reset(bool open)
{
	n_closed = n_entered = 0;
	gate_open = open;
	main_thread = pthread_self();
}

/* The reaper's thread waits at the gate, as a close waits for a grace
 * period; a close made by the test's own thread (inline) never does. */
static void gated_close(struct bpf_link *l)
{
	pthread_mutex_lock(&mu);
	n_entered++;
	pthread_cond_broadcast(&cv);
	while (!gate_open && !pthread_equal(pthread_self(), main_thread))
		pthread_cond_wait(&cv, &mu);
	if (n_closed < MAXC)
		order[n_closed] = (uintptr_t)l;
	n_closed++;
	pthread_mutex_unlock(&mu);
}

static void open_gate(void)
{
	pthread_mutex_lock(&mu);
	gate_open = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_entered(int n)
{
	pthread_mutex_lock(&mu);
	while (n_entered < n)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static int closed_now(void)
{
	int n;

	pthread_mutex_lock(&mu);
	n = n_closed;
	pthread_mutex_unlock(&mu);
	return n;
}

/* r's counts once its thread closed `closed` links (polled: the count
 * follows the close function's return). */
static struct gs_link_reaper_stats stats_after(struct gs_link_reaper *r, uint64_t closed)
{
	struct gs_link_reaper_stats st;

	for (gs_link_reaper_stats(r, &st); st.closed < closed; gs_link_reaper_stats(r, &st))
		sched_yield();
	return st;
}

Test(reaper, closes_in_the_order_given)
{
	struct gs_link_reaper *r = gs_link_reaper_new(64, 1, gated_close);
	struct gs_link_reaper_stats st;

	reset(true);
	cr_assert_not_null(r);
	for (uintptr_t i = 1; i <= 50; i++)
		cr_assert_eq(gs_link_reaper_close(r, tok(i)), 0);
	cr_assert_eq(gs_link_reaper_close(r, NULL), 0, "a NULL link is nothing to close");
	gs_link_reaper_stats(r, &st);
	cr_assert_eq(st.queued, 50);
	cr_assert_eq(st.inline_full + st.inline_nothread, 0);
	gs_link_reaper_free(r);
	cr_assert_eq(n_closed, 50);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(order[i], (uintptr_t)i + 1, "close %d was link %zu", i,
			     (size_t)order[i]);
}

/* The caller is back before any close ends; free returns only after all. */
static void *open_later(void *arg)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	open_gate();
	return NULL;
}

Test(reaper, free_waits_for_pending_closes)
{
	struct gs_link_reaper *r = gs_link_reaper_new(8, 4, gated_close);
	struct gs_link_reaper_stats st;
	pthread_t t;

	reset(false);
	for (uintptr_t i = 1; i <= 5; i++)
		cr_assert_eq(gs_link_reaper_close(r, tok(i)), 0);
	wait_entered(1); /* the first close is under way, at the gate */
	cr_assert_eq(closed_now(), 0, "the caller waited for a close");
	gs_link_reaper_stats(r, &st);
	cr_assert_eq(st.closed, 0);
	cr_assert_eq(pthread_create(&t, NULL, open_later, NULL), 0);
	gs_link_reaper_free(r);
	cr_assert_eq(closed_now(), 5, "free returned with closes pending");
	pthread_join(t, NULL);
}

Test(reaper, full_ring_closes_inline_and_counts)
{
	struct gs_link_reaper *r = gs_link_reaper_new(2, 1, gated_close);
	struct gs_link_reaper_stats st;

	reset(false);
	cr_assert_eq(gs_link_reaper_close(r, tok(1)), 0);
	wait_entered(1); /* link 1 closing, the ring empty */
	cr_assert_eq(gs_link_reaper_close(r, tok(2)), 0);
	cr_assert_eq(gs_link_reaper_close(r, tok(3)), 0);
	cr_assert_eq(gs_link_reaper_close(r, tok(4)), -EAGAIN, "a full ring must close inline");
	cr_assert_eq(closed_now(), 1, "link 4 was not closed by the caller");
	cr_assert_eq(order[0], 4);
	open_gate();
	st = stats_after(r, 3);
	cr_assert(st.queued == 3 && st.closed == 3 && st.inline_full == 1 &&
		      st.inline_nothread == 0 && st.max_pending == 2,
		  "counts: %llu queued, %llu closed, %llu inline (full), %llu inline (no "
		  "thread), %llu pending at most",
		  (unsigned long long)st.queued, (unsigned long long)st.closed,
		  (unsigned long long)st.inline_full, (unsigned long long)st.inline_nothread,
		  (unsigned long long)st.max_pending);
	gs_link_reaper_free(r);
	cr_assert_eq(n_closed, 4);
	cr_assert_eq(order[1], 1);
	cr_assert_eq(order[2], 2);
	cr_assert_eq(order[3], 3);
}

Test(reaper, stats_count_every_close)
{
	struct gs_link_reaper *r = gs_link_reaper_new(0, 0, gated_close);
	struct gs_link_reaper_stats st;

	reset(true);
	for (uintptr_t i = 1; i <= 100; i++)
		cr_assert_eq(gs_link_reaper_close(r, tok(i)), 0);
	st = stats_after(r, 100);
	cr_assert_eq(closed_now(), 100);
	cr_assert(st.queued == 100 && st.closed == 100 && st.max_pending >= 1 &&
		  st.max_pending <= 100 && st.inline_full + st.inline_nothread == 0);
	gs_link_reaper_free(r);
	gs_link_reaper_stats(NULL, &st);
	cr_assert_eq(st.queued + st.closed, 0, "no reaper, no counts");
}

/* A USDT link is not closed while the caller holds the USDT lock (libbpf's
 * USDT manager is changed by both the attach and the close). */
Test(reaper, usdt_close_waits_for_the_lock)
{
	struct gs_link_reaper *r = gs_link_reaper_new(8, 4, gated_close);
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	reset(true);
	gs_link_reaper_usdt_lock(r);
	cr_assert_eq(gs_link_reaper_close_usdt(r, tok(7)), 0);
	nanosleep(&ts, NULL);
	cr_assert_eq(closed_now(), 0, "a USDT link was closed under the attach's lock");
	gs_link_reaper_usdt_unlock(r);
	cr_assert_eq(gs_link_reaper_close(r, tok(8)), 0);
	gs_link_reaper_free(r);
	cr_assert_eq(n_closed, 2);
	cr_assert(order[0] + order[1] == 15 && order[0] * order[1] == 56, "not links 7 and 8");
}
