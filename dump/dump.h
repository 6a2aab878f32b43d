/* SPDX-License-Identifier: MIT */
/*
 * `gpusample dump`: every thread's stack of a set of processes, now, for a
 * job that hangs.  For each thread: its scheduler state (running, runnable,
 * blocked, and the kernel function it waits in), its kernel stack, its
 * native user stack and its Python stack, merged as in a profile, with the
 * process role, thread role and rank.  The result is a struct gs_profile
 * with one sample per thread (samples = 1), so the profile writers (pprof)
 * and the report's frame tables serve it unchanged; gs_dump_print renders
 * it as text grouped by rank, identical stacks folded with a count, and a
 * summary of which collective each rank's main thread is in.
 *
 * How, without touching the target (no ptrace stop, no signal, no wake-up):
 *  - threads, scheduler state, kernel stack and the user registers the
 *    kernel saved on the thread's last entry come from a BPF task iterator
 *    (bpf/taskregs.h); a thread on a CPU right now has no saved user
 *    registers that are current, so it gets its state and kernel stack only
 *    (a dump of a hung job finds nearly every thread blocked);
 *  - the native stack is walked in user space from those registers with
 *    the .eh_frame rows the BPF unwinder uses (bpf/cfi.h
 *    gs_cfi_table_build / gs_cfi_rule_step), reading the target's stack with
 *    proc/'s remote-memory reader;
 *  - the Python stack is walked in user space with the walker
 *    configuration of discovery (struct gs_py_cfg: thread state through
 *    the thread's fsbase and the TSS key, as the BPF walker does), giving
 *    the same struct gs_py_frame records, symbolized and merged by
 *    python/python.h as a profile's are;
 *  - without the task iterator (a kernel without BTF or iter/task),
 *    /proc/PID/task/TID/{stat,syscall,stack}: the state, the stack and
 *    instruction pointer of a thread in a system call (no frame pointer:
 *    RBP-based frames stop the walk) and kernel function names; no Python
 *    stacks (no fsbase).
 * Bounds: at most GS_DUMP_MAX_THREADS threads, every remote read bounded,
 * unwind tables built once per ELF object (their own bounds: bpf/cfi.h).
 */
#ifndef GS_DUMP_H
#define GS_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpusample/profile.h"
#include "gpusample/records.h"

#define GS_DUMP_MAX_THREADS 16384 /* x ~1.1 KiB of registers and kernel stack */

struct gs_dump_target {
	uint32_t tgid, ppid;
	bool is_root; /* named with -p */
};

struct gs_dump_opts {
	const struct gs_dump_target *procs;
	size_t n_procs;
	bool native;        /* walk native user stacks */
	bool python;        /* walk Python stacks */
	bool interp_frames; /* keep the interpreter's frames between Python ones */
	bool force_proc;    /* skip the task iterator (tests of the fallback) */
	/* SIGINT/SIGTERM/SIGHUP stop the slow symbolization (debug-link CRCs,
	 * debuginfod) instead of ending the process; a profile note says so */
	bool catch_stops;
};

struct gs_dump_stats {
	uint32_t processes, threads;
	uint32_t on_cpu;        /* threads running on a CPU: no user stack */
	uint32_t native_failed; /* threads whose native walk got no frame */
	uint32_t dropped;       /* threads past GS_DUMP_MAX_THREADS, not shown */
	uint64_t elapsed_ns;    /* the whole collection, symbolization included */
	char source[160];       /* how registers were read, for the header line */
};

/* Fill prof (initialised by the caller, empty) with one sample per thread
 * of o->procs.  Labels: pid, tid, thread_name, process_role ("main" for a
 * -p process or one with a rank, "dataloader" for a DataLoader worker,
 * else "other"), thread_state ("running", "runnable", "blocked",
 * "stopped", "zombie"), thread_role, the rank labels; a comment
 * "dump: source" says how the registers were read.  Processes that exit
 * meanwhile are skipped.  0, or -errno with a line in err (-ENOMEM, -EPERM
 * without the privileges). */
int gs_dump_collect(const struct gs_dump_opts *o, struct gs_profile *prof, struct gs_dump_stats *st,
		    char *err, size_t errlen);

/* Text of a collected dump: a header line, the cross-rank summary (when
 * some process has a rank), one line per thread (group) "at a glance"
 * (state, what it waits on, the innermost frame of the job's own Python
 * code), then per process (by rank, then pid) its threads, identical
 * (stack, state) folded with a count and their tids, stacks leaf first
 * with files and lines.  Names are escaped for the terminal.  0 or -errno
 * (-ENOMEM). */
int gs_dump_print(const struct gs_profile *prof, const struct gs_dump_stats *st, FILE *out);

/* The raw stacks of every thread of tgids[0..n) now, not symbolized: the
 * frame runs of a CPU sample (gpusample/records.h), for a caller with its
 * own symbolizer.  The sampling session takes the stacks of threads asleep
 * when its window opens from here (session/offcpu.c), so a wait that began
 * before gpusample attached has its user stack too.  Only the task
 * iterator's path: -ENOTSUP (err says why) where it cannot load, and the
 * caller falls back to what it had.  fn is called per thread, its
 * pointers valid during the call; its non-zero value stops the walk and is
 * returned. */
struct gs_py_cfg;
struct gs_elf_cache;
struct gs_dump_raw {
	uint32_t tgid, tid;
	char state; /* 'R' on a CPU, 'r' runnable, 'S' blocked, 'T' stopped */
	char comm[16];
	uint16_t flags; /* GS_CPU_* */
	const __u64 *kernel, *user;
	uint32_t n_kernel, n_user;
	const struct gs_py_frame *py;
	uint32_t n_python;
};
struct gs_dump_walk_src {
	struct gs_elf_cache *elf; /* ELF objects (the symbolizer's cache) */
	/* The Python walker configuration of tgid, NULL for none. */
	const struct gs_py_cfg *(*py_cfg)(void *ctx, uint32_t tgid);
	void *ctx;
};
int gs_dump_walk(const uint32_t *tgids, size_t n, const struct gs_dump_walk_src *src,
		 int (*fn)(void *ctx, const struct gs_dump_raw *r), void *fn_ctx, char *err,
		 size_t errlen);

#endif
