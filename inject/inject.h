/* SPDX-License-Identifier: MIT */
/*
 * Loading the GPU agent into a running CPython 3.14+ job that was started
 * without it (gpusample -p PID --inject), through CPython's remote
 * debugging attachment protocol (PEP 768, what sys.remote_exec uses;
 * CPython docs, "Remote debugging attachment protocol",
 * Doc/howto/remote_debugging.rst):
 *
 *   1. the target's _Py_DebugOffsets (at the start of _PyRuntime) give the
 *      interpreter, its main thread state and, in their debugger_support
 *      section, where the request goes: the thread state's
 *      remote_debugger_support {int32 debugger_pending_call; char
 *      debugger_script_path[debugger_script_path_size]} and its
 *      eval_breaker; the interpreter's config.remote_debug
 *      (remote_debugging_enabled) says whether the process allows it;
 *   2. the script path is written into debugger_script_path, then
 *      debugger_pending_call = 1, then _PY_EVAL_PLEASE_STOP_BIT (1 << 5 in
 *      3.14 and 3.15, Include/internal/pycore_ceval.h) is set in
 *      eval_breaker;
 *   3. at its next eval-breaker check the main thread clears the pending
 *      flag and runs the script (_PyRunRemoteDebugger), so a flag read back
 *      as 0 means the request was taken.
 * Every offset is read from the target and bounded by the sizes the same
 * table gives; the word index of each field in _Py_DebugOffsets is known
 * per minor version (3.14, 3.15), and a newer version is refused (a write
 * is never made on a guessed layout).  Writes use gs_proc_mem_write
 * (process_vm_writev; no ptrace stop).  The eval_breaker bit is set by
 * writing its one byte back (CPython's own client writes the whole word):
 * a bit another thread of the job sets between the read and the write is
 * lost, as with CPython's client; the interpreter sets those bits again.
 *
 * Only into a process its user could ptrace itself (access.c: the same
 * real/effective/saved/fs uids and gids, dumpable, no capability the user
 * lacks), checked before staging, before the request and after it.
 *
 * The script and the agent live in a fresh directory in the TARGET's root
 * (the path is resolved by the job, possibly chrooted or in a container):
 * /tmp, else /var/tmp, else /dev/shm of /proc/PID/root, each opened with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
 * and used only when root owns it and nobody else can rename entries in it
 * (not group/other-writable, or sticky), it is not mounted noexec (the
 * agent is mapped executable), and it is the job's own temporary
 * directory, not another tree bound there (stage.c, own_tmp).  The
 * directory ".gpusample-inject-XXXXXXXX" (random) is made by mkdirat
 * (never follows a link), root-owned, 0755; the agent is copied from
 * gpusample's own root-owned file (not group/other-writable, opened without
 * following links) as 0644, the script written 0644.  The script imports
 * only modules built into the interpreter (nothing from the job's
 * sys.path), goes on only while gpusample (or its watchdog) holds an OFD
 * write lock on the script, and loads the agent by its absolute path with
 * _imp.create_dynamic, whose PyInit_libgpusample_agent calls
 * InitializeInjection (which the CUDA driver calls in a prepared job);
 * nothing of the target decides what runs or from where.  A forked child
 * with the job's uid, gids and root checks that it can read both files
 * before the request is written.  A watchdog child, forked before the
 * request, does the cleanup at detach when gpusample is SIGKILLed
 * (withdraw, files, lock file).
 *
 * Session wiring (session/gpu.c):
 *   gs_inject_start(&req, &j, msg, len)   once per target root whose
 *                                        CPython is known and whose agent is
 *                                        not mapped
 *   gs_inject_poll(j, now_ms, msg, len)   every tick until not PENDING
 *   gs_inject_abandon(j)                  the process exec'd or exited: no
 *                                        write into it again
 *   gs_inject_withdraw_in(j, child)       the process forked while pending
 *   gs_inject_end(j)                      at detach: a request not taken is
 *                                        withdrawn (pending flag back to 0,
 *                                        if the process still is the image
 *                                        written to), the staged files and
 *                                        directory removed, j freed
 * One injection per process at a time, across gpusample instances: an
 * flock on /run/gpusample/inject.PID, held from start to end (a lock won
 * on a file unlinked meanwhile is taken again on the new one).
 *
 * Errors: 0 or -errno; msg gets one line naming the cause and what to do.
 */
#ifndef GS_INJECT_INJECT_H
#define GS_INJECT_INJECT_H

#include <stddef.h>
#include <stdint.h>

struct gs_inject;

struct gs_inject_req {
	uint32_t tgid;
	uint64_t runtime;     /* &_PyRuntime in tgid (Python discovery found it) */
	uint32_t version_hex; /* PY_VERSION_HEX of that interpreter */
	const char *agent;    /* gpusample's own agent (gs_gpu_agent_path) */
	uint32_t wait_ms;     /* how long the interpreter has to take the request */
	uint64_t now_ms;      /* CLOCK_MONOTONIC ms at start */
};

enum gs_inject_state {
	GS_INJECT_PENDING = 0, /* written, not taken yet */
	GS_INJECT_RAN,         /* the interpreter took it: the script ran */
	GS_INJECT_TIMEOUT,     /* not taken within wait_ms: withdrawn */
	GS_INJECT_GONE,        /* the process exited or exec'd first */
};

/* Where the request goes in one interpreter (absolute addresses in tgid). */
struct gs_pyexec_target {
	uint64_t runtime, interp, tstate;
	uint64_t enabled; /* int32 config.remote_debug */
	uint64_t breaker; /* uintptr eval_breaker */
	uint64_t pending; /* int32 debugger_pending_call */
	uint64_t path;    /* char debugger_script_path[path_size] */
	uint32_t path_size;
	uint64_t threads_main; /* &interp->threads.main, to re-check identity */
};

/* The minor versions whose _Py_DebugOffsets layout is known (3.14, 3.15). */
#define GS_PYEXEC_MINOR_MIN  14
#define GS_PYEXEC_MINOR_LAST 15

/* Read and check the debug offsets of the interpreter at runtime in tgid
 * and fill t.  0; -ENOTSUP (older than 3.14, newer than the layouts known,
 * free-threaded); -EPROTO (cookie, version or an offset out of bounds);
 * -EPERM (remote debugging disabled in the process); -EBUSY (a request of
 * someone else is pending); -EAGAIN (no main thread state yet); -ESRCH or
 * another -errno of the read.  msg: one line. */
int gs_pyexec_locate(uint32_t tgid, uint64_t runtime, uint32_t version_hex,
		     struct gs_pyexec_target *t, char *msg, size_t len);
/* Write the request for script (an absolute path in the target's root,
 * shorter than t->path_size).  0 or -errno (msg says which write failed). */
int gs_pyexec_request(uint32_t tgid, const struct gs_pyexec_target *t, const char *script,
		      char *msg, size_t len);
/* 1: still pending, 0: taken, -ESTALE: the process no longer is the image
 * t was read from (exec), -ESRCH: gone. */
int gs_pyexec_pending(uint32_t tgid, const struct gs_pyexec_target *t);
/* Withdraw a request not taken yet (pending flag back to 0).  1: withdrawn,
 * 0: already taken; -ESTALE / -ESRCH as gs_pyexec_pending (nothing
 * written), or -errno of the write. */
int gs_pyexec_withdraw(uint32_t tgid, const struct gs_pyexec_target *t);

/* Stage the files and write the request.  0: *out pending; else a negative
 * errno, msg says why (nothing is left behind): -ENOTSUP / -EPROTO /
 * -EPERM / -EBUSY / -EAGAIN as gs_pyexec_locate (-EPERM also: the job's
 * user could not ptrace tgid), -EALREADY another
 * gpusample is injecting into tgid, -EACCES the job's user cannot read the
 * staged files, -EXDEV no safe directory in the target's root. */
int gs_inject_start(const struct gs_inject_req *r, struct gs_inject **out, char *msg, size_t len);
/* State after now_ms; msg gets a line when it changed to RAN, TIMEOUT or
 * GONE (empty otherwise). */
enum gs_inject_state gs_inject_poll(struct gs_inject *j, uint64_t now_ms, char *msg, size_t len);
void gs_inject_abandon(struct gs_inject *j);
/* A fork child of the process copied its pending request: withdraw it
 * there too (when child still is that image; best effort: a child whose
 * main thread took it first loads an agent of its own). */
void gs_inject_withdraw_in(struct gs_inject *j, uint32_t child);
/* The script path in the target ("/tmp/.gpusample-inject-XXXXXXXX/..."). */
const char *gs_inject_script(const struct gs_inject *j);
void gs_inject_end(struct gs_inject *j);

#endif
