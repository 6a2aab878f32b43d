/* SPDX-License-Identifier: MIT */
/* BPF links closed on a thread of their own (see reaper.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <bpf/libbpf.h>

#include "bpf/reaper.h"

struct pending {
	struct bpf_link *link;
	bool usdt;
};

struct gs_link_reaper {
	pthread_mutex_t mu;      /* the ring, the flags, the counts */
	pthread_cond_t more;     /* a link was queued, or stopping */
	pthread_mutex_t usdt_mu; /* libbpf's USDT manager (reaper.h) */
	pthread_t *thread;
	size_t n_threads, want_threads;
	int nice; /* the creator's */
	bool stopping;
	void (*close_fn)(struct bpf_link *);
	struct pending *ring;
	size_t cap, head, n;
	struct gs_link_reaper_stats st;
};

static void destroy(struct bpf_link *link)
{
	bpf_link__destroy(link);
}

static void close_one(struct gs_link_reaper *r, struct pending p)
{
	if (p.usdt)
		pthread_mutex_lock(&r->usdt_mu);
	r->close_fn(p.link);
	if (p.usdt)
		pthread_mutex_unlock(&r->usdt_mu);
}

/* Pending links taken in order; after stopping is set, until none is left. */
static void *run(void *arg)
{
	struct gs_link_reaper *r = arg;

	/* gpusample's threads share its nice (session/attach.c); on Linux
	 * this sets the calling thread's alone. */
	setpriority(PRIO_PROCESS, 0, r->nice);
	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct pending p;

		while (!r->n && !r->stopping)
			pthread_cond_wait(&r->more, &r->mu);
		if (!r->n)
			break;
		p = r->ring[r->head];
		r->head = (r->head + 1) % r->cap;
		r->n--;
		pthread_mutex_unlock(&r->mu);
		close_one(r, p);
		pthread_mutex_lock(&r->mu);
		r->st.closed++;
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* The threads take no signal: they stay with the session's threads (a
 * Ctrl-C must interrupt the record loop's poll).  They run at their
 * creator's nice, which SCHED_RESET_ON_FORK would otherwise drop to 0. */
static void start(struct gs_link_reaper *r)
{
	sigset_t all, old;

	errno = 0;
	r->nice = getpriority(PRIO_PROCESS, 0);
	if (errno)
		r->nice = 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; r->n_threads < r->want_threads; r->n_threads++) {
		if (pthread_create(&r->thread[r->n_threads], NULL, run, r))
			break;
		pthread_setname_np(r->thread[r->n_threads], "gs-reaper");
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

struct gs_link_reaper *gs_link_reaper_new(size_t cap, size_t threads,
					  void (*close_fn)(struct bpf_link *))
{
	struct gs_link_reaper *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->cap = cap ? cap : GS_LINK_REAPER_CAP;
	r->want_threads = threads ? threads : GS_LINK_REAPER_THREADS;
	r->ring = calloc(r->cap, sizeof(*r->ring));
	r->thread = calloc(r->want_threads, sizeof(*r->thread));
	if (!r->ring || !r->thread) {
		free(r->ring);
		free(r->thread);
		free(r);
		return NULL;
	}
	r->close_fn = close_fn ? close_fn : destroy;
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->usdt_mu, NULL);
	pthread_cond_init(&r->more, NULL);
	start(r);
	return r;
}

void gs_link_reaper_free(struct gs_link_reaper *r)
{
	if (!r)
		return;
	if (r->n_threads) {
		pthread_mutex_lock(&r->mu);
		r->stopping = true;
		pthread_cond_broadcast(&r->more);
		pthread_mutex_unlock(&r->mu);
		for (size_t i = 0; i < r->n_threads; i++)
			pthread_join(r->thread[i], NULL);
	}
	pthread_cond_destroy(&r->more);
	pthread_mutex_destroy(&r->usdt_mu);
	pthread_mutex_destroy(&r->mu);
	free(r->ring);
	free(r->thread);
	free(r);
}

/* Queue p: 0, or -EAGAIN (full) / -ESRCH (no thread) and nothing queued. */
static int enqueue(struct gs_link_reaper *r, struct pending p)
{
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	if (!r->n_threads || r->stopping) {
		r->st.inline_nothread++;
		rc = -ESRCH;
	} else if (r->n == r->cap) {
		r->st.inline_full++;
		rc = -EAGAIN;
	} else {
		r->ring[(r->head + r->n) % r->cap] = p;
		r->n++;
		r->st.queued++;
		if (r->n > r->st.max_pending)
			r->st.max_pending = r->n;
		pthread_cond_signal(&r->more);
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int hand(struct gs_link_reaper *r, struct bpf_link *link, bool usdt)
{
	struct pending p = { .link = link, .usdt = usdt };
	int rc;

	if (!link)
		return 0;
	if (!r) {
		destroy(link);
		return 0;
	}
	rc = enqueue(r, p);
	if (rc)
		close_one(r, p);
	return rc;
}

int gs_link_reaper_close(struct gs_link_reaper *r, struct bpf_link *link)
{
	return hand(r, link, false);
}

int gs_link_reaper_close_usdt(struct gs_link_reaper *r, struct bpf_link *link)
{
	return hand(r, link, true);
}

void gs_link_reaper_usdt_lock(struct gs_link_reaper *r)
{
	if (r)
		pthread_mutex_lock(&r->usdt_mu);
}

void gs_link_reaper_usdt_unlock(struct gs_link_reaper *r)
{
	if (r)
		pthread_mutex_unlock(&r->usdt_mu);
}

void gs_link_reaper_stats(struct gs_link_reaper *r, struct gs_link_reaper_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	*st = r->st;
	pthread_mutex_unlock(&r->mu);
}
