/* SPDX-License-Identifier: MIT */
/*
 * Link reaper: BPF links closed on a thread of its own.
 *
 * Closing a uprobe link (bpf_link__destroy) waits in the kernel for a
 * tasks-trace RCU grace period (perf_uprobe_destroy >
 * synchronize_rcu_tasks_trace: 0.3-0.5 s a link on 6.18), so a record loop
 * that closed a process's probes when it exited stopped for seconds.  Links
 * handed to a reaper are closed by its threads, taken in the order they
 * were handed; the caller never waits for a grace period.  One thread
 * closes them one at a time, in that order; several (the session's: 8)
 * close several at once: a DataLoader job re-creating 4 workers every 6
 * steps (2 step links each) left one thread 16 s of closes behind after an
 * 8 s run (each took ~0.13 s there, a few ms on the record loop), 8 threads
 * kept up.
 *
 * Shape: a ring of at most cap pending links.  When it is full, or no
 * thread could start, the caller closes the link itself, inline (counted by
 * cause in gs_link_reaper_stats).  A NULL reaper closes every
 * link inline, so code used without a session keeps working.
 *
 * USDT links: libbpf's USDT link close gives its spec ids back to the BPF
 * object's USDT manager, which bpf_program__attach_usdt uses without a
 * lock.  Hand USDT links with gs_link_reaper_close_usdt (closed one at a
 * time, under the reaper's USDT lock), and hold
 * gs_link_reaper_usdt_lock around each bpf_program__attach_usdt of an
 * object whose links this reaper closes (it waits while a USDT link of that
 * object is being closed; uprobe links never take it).
 *
 * Threading: close, close_usdt, the lock and stats may be called from any
 * thread; free from one thread, after the last close.  Order at teardown:
 * the BPF object the links belong to must outlive gs_link_reaper_free,
 * which waits for every pending close.
 *
 * Errors: 0 or -errno.  Whatever a close call returns, the link is the
 * reaper's (closed or pending): the caller must not use it again.
 */
#ifndef GS_BPF_REAPER_H
#define GS_BPF_REAPER_H

#include <stddef.h>
#include <stdint.h>

struct bpf_link;
struct gs_link_reaper;

#define GS_LINK_REAPER_THREADS 8    /* default */
#define GS_LINK_REAPER_CAP     4096 /* pending links: 22 per GPU process, a few per other */

struct gs_link_reaper_stats {
	uint64_t queued;          /* handed to the thread */
	uint64_t closed;          /* of which closed by it so far */
	uint64_t inline_full;     /* closed by the caller: the ring was full */
	uint64_t inline_nothread; /* closed by the caller: no thread */
	uint64_t max_pending;     /* most links pending at once */
};

/* A reaper of at most cap pending links (0: GS_LINK_REAPER_CAP) and threads
 * threads (0: GS_LINK_REAPER_THREADS) that close each with close_fn (NULL:
 * bpf_link__destroy; tests give their own).  NULL only when out of memory;
 * if no thread could start, the reaper closes inline.  The threads run at
 * the creator's nice, with every signal blocked. */
struct gs_link_reaper *gs_link_reaper_new(size_t cap, size_t threads,
					  void (*close_fn)(struct bpf_link *));
/* Waits for every pending close, stops the thread, frees r (NULL: nothing). */
void gs_link_reaper_free(struct gs_link_reaper *r);

/* Close link (NULL: nothing) on r's thread.  0: pending or closed;
 * -EAGAIN: the ring was full, -ESRCH: no thread (closed inline either way). */
int gs_link_reaper_close(struct gs_link_reaper *r, struct bpf_link *link);
/* The same for a link made by bpf_program__attach_usdt. */
int gs_link_reaper_close_usdt(struct gs_link_reaper *r, struct bpf_link *link);
/* Around bpf_program__attach_usdt (r NULL: nothing). */
void gs_link_reaper_usdt_lock(struct gs_link_reaper *r);
void gs_link_reaper_usdt_unlock(struct gs_link_reaper *r);

void gs_link_reaper_stats(struct gs_link_reaper *r, struct gs_link_reaper_stats *st);

#endif
