/* SPDX-License-Identifier: MIT */
/*
 * PEP 768 remote-exec request into a CPython 3.14+ process (inject.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "inject/inject.h"
#include "inject/inject_int.h"
#include "proc/proc.h"
#include "python/python.h"

#define PY_EVAL_PLEASE_STOP_BIT 0x20u /* _PY_EVAL_PLEASE_STOP_BIT, 1 << 5 */

/* Word index (u64, from the start of _Py_DebugOffsets: cookie 0, version
 * 1, free_threaded 2) of each field used, per layout.  3.14 and 3.15 agree
 * up to the thread state; 3.15 grew the thread state and later sections,
 * so its debugger_support section starts later (checked against the sid
 * root's 3.14.10 and 3.15.2: path size 512, pending at 0, path at 4). */
struct exec_layout {
	uint32_t minor;
	uint8_t rt_size, rt_interp_head;
	uint8_t is_size, is_threads_main;
	uint8_t ts_size;
	uint8_t dbg; /* debugger_support: eval_breaker, remote_debugger_support,
		      * remote_debugging_enabled, debugger_pending_call,
		      * debugger_script_path, debugger_script_path_size */
};

static const struct exec_layout layouts[] = {
	{ 14, 3, 5, 6, 10, 22, 89 },
	{ 15, 3, 5, 6, 10, 22, 105 },
};
#define WORDS 112 /* above every index of layouts */

/* Bounds on what the target says: structs this big or bigger are not a
 * CPython of these versions (3.14: interpreter 220 KiB, thread state 832
 * bytes, path buffer 512). */
#define RUNTIME_MAX  (4u << 20)
#define INTERP_MAX   (4u << 20)
#define TSTATE_MAX   (64u << 10)
#define PATH_MIN     64u
#define PATH_MAX_LEN 4096u

static int rd_u64(uint32_t tgid, uint64_t addr, uint64_t *v)
{
	return gs_proc_mem_read(tgid, addr, v, sizeof(*v), NULL);
}

/* [off, off + size) inside a struct of struct_size bytes. */
static bool inside(uint64_t off, uint64_t size, uint64_t struct_size)
{
	return off < struct_size && size <= struct_size - off;
}

static const struct exec_layout *layout_of(uint32_t minor)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

/* The offsets of o (already read) checked against their structs' sizes. */
static int check_offsets(const uint64_t *o, const struct exec_layout *k, char *msg, size_t len)
{
	const uint64_t *d = o + k->dbg;
	uint64_t rt = o[k->rt_size], is = o[k->is_size], ts = o[k->ts_size];
	uint64_t support = d[1], path_size = d[5];

	if (!rt || rt > RUNTIME_MAX || !is || is > INTERP_MAX || !ts || ts > TSTATE_MAX)
		return gs_inject_say(
		    msg, len, -EPROTO,
		    "_Py_DebugOffsets: struct sizes out of bounds (runtime %" PRIu64
		    ", interpreter %" PRIu64 ", thread state %" PRIu64 ")",
		    rt, is, ts);
	if (path_size < PATH_MIN || path_size > PATH_MAX_LEN)
		return gs_inject_say(msg, len, -EPROTO,
				     "_Py_DebugOffsets: debugger_script_path_size %" PRIu64
				     " out of bounds (%u..%u)",
				     path_size, PATH_MIN, PATH_MAX_LEN);
	if (!inside(o[k->rt_interp_head], 8, rt) || !inside(o[k->is_threads_main], 8, is) ||
	    !inside(d[2], 4, is) || !inside(d[0], 8, ts) || !inside(support, 4, ts) ||
	    !inside(d[3], 4, ts - support) || !inside(d[4], path_size, ts - support))
		return gs_inject_say(
		    msg, len, -EPROTO,
		    "_Py_DebugOffsets: a debugger_support offset lies outside its struct "
		    "(eval_breaker %" PRIu64 ", support %" PRIu64 ", enabled %" PRIu64
		    ", pending %" PRIu64 ", path %" PRIu64 "+%" PRIu64 ")",
		    d[0], support, d[2], d[3], d[4], path_size);
	return 0;
}

/* The debug offsets at runtime: cookie, version and layout checked. */
static int read_offsets(uint32_t tgid, uint64_t runtime, uint32_t version_hex, uint64_t *o,
			const struct exec_layout **k, char *msg, size_t len)
{
	uint32_t major = version_hex >> 24, minor = (version_hex >> 16) & 255;
	int err;

	if (major != 3 || minor < GS_PYEXEC_MINOR_MIN)
		return gs_inject_say(
		    msg, len, -ENOTSUP,
		    "CPython %u.%u has no remote debugging protocol (PEP 768 needs 3.14 "
		    "or newer)",
		    major, minor);
	if (!(*k = layout_of(minor)))
		return gs_inject_say(
		    msg, len, -ENOTSUP,
		    "CPython %u.%u is newer than the layouts known (3.%u to 3.%u): "
		    "gpusample writes into an interpreter only on a layout it knows",
		    major, minor, GS_PYEXEC_MINOR_MIN, GS_PYEXEC_MINOR_LAST);
	if ((err = gs_py_debug_words(tgid, runtime, version_hex, o, WORDS, msg, len)))
		return err;
	return check_offsets(o, *k, msg, len);
}

int gs_pyexec_locate(uint32_t tgid, uint64_t runtime, uint32_t version_hex,
		     struct gs_pyexec_target *t, char *msg, size_t len)
{
	uint64_t o[WORDS];
	const struct exec_layout *k = NULL;
	int32_t enabled, pending;
	int err;

	memset(t, 0, sizeof(*t));
	if ((err = read_offsets(tgid, runtime, version_hex, o, &k, msg, len)))
		return err;
	const uint64_t *d = o + k->dbg;
	t->runtime = runtime;
	if ((err = rd_u64(tgid, runtime + o[k->rt_interp_head], &t->interp)) || !t->interp)
		return gs_inject_say(msg, len, err ? err : -EAGAIN, "no interpreter state (yet)");
	t->threads_main = t->interp + o[k->is_threads_main];
	if ((err = rd_u64(tgid, t->threads_main, &t->tstate)) || !t->tstate)
		return gs_inject_say(msg, len, err ? err : -EAGAIN, "no main thread state (yet)");
	t->enabled = t->interp + d[2];
	t->breaker = t->tstate + d[0];
	t->pending = t->tstate + d[1] + d[3];
	t->path = t->tstate + d[1] + d[4];
	t->path_size = (uint32_t)d[5];
	if ((err = gs_proc_mem_read(tgid, t->enabled, &enabled, sizeof(enabled), NULL)) ||
	    (err = gs_proc_mem_read(tgid, t->pending, &pending, sizeof(pending), NULL)))
		return gs_inject_say(msg, len, err,
				     "cannot read the interpreter's debugger fields (%s)",
				     strerror(-err));
	if (enabled != 1)
		return gs_inject_say(
		    msg, len, -EPERM,
		    "the process disabled remote debugging (PYTHON_DISABLE_REMOTE_DEBUG, "
		    "-X disable-remote-debug, or a Python built --without-remote-debug)");
	if (pending)
		return gs_inject_say(
		    msg, len, -EBUSY,
		    "a remote-exec request of another tool (a debugger, sys.remote_exec) "
		    "is pending in the main thread");
	return 0;
}

int gs_pyexec_request(uint32_t tgid, const struct gs_pyexec_target *t, const char *script,
		      char *msg, size_t len)
{
	size_t n = strlen(script);
	int32_t one = 1;
	uint8_t breaker;
	int err;

	if (n + 1 > t->path_size)
		return gs_inject_say(msg, len, -ENAMETOOLONG,
				     "script path longer than the %u bytes CPython has",
				     t->path_size);
	if ((err = gs_proc_mem_write(tgid, t->path, script, n + 1)))
		return gs_inject_say(msg, len, err, "cannot write the script path (%s)",
				     strerror(-err));
	if ((err = gs_proc_mem_write(tgid, t->pending, &one, sizeof(one))))
		return gs_inject_say(msg, len, err, "cannot set debugger_pending_call (%s)",
				     strerror(-err));
	/* The low byte holds the event bits; x86-64 is little-endian. */
	if ((err = gs_proc_mem_read(tgid, t->breaker, &breaker, 1, NULL)) ||
	    (breaker |= PY_EVAL_PLEASE_STOP_BIT,
	     (err = gs_proc_mem_write(tgid, t->breaker, &breaker, 1)))) {
		gs_pyexec_withdraw(tgid, t);
		return gs_inject_say(msg, len, err, "cannot set the eval-breaker bit (%s)",
				     strerror(-err));
	}
	return 0;
}

/* Still the interpreter t was read from: the cookie at runtime and the
 * main thread state where they were (an exec maps a new image there). */
static int same_image(uint32_t tgid, const struct gs_pyexec_target *t)
{
	char cookie[8];
	uint64_t ts;
	int err;

	if ((err = gs_proc_mem_read(tgid, t->runtime, cookie, sizeof(cookie), NULL)) ||
	    (err = rd_u64(tgid, t->threads_main, &ts)))
		return err == -ESRCH ? -ESRCH : -ESTALE;
	return memcmp(cookie, "xdebugpy", 8) || ts != t->tstate ? -ESTALE : 0;
}

int gs_pyexec_pending(uint32_t tgid, const struct gs_pyexec_target *t)
{
	int32_t v;
	int err = same_image(tgid, t);

	if (err)
		return err;
	if ((err = gs_proc_mem_read(tgid, t->pending, &v, sizeof(v), NULL)))
		return err == -ESRCH ? -ESRCH : -ESTALE;
	return v != 0;
}

int gs_pyexec_withdraw(uint32_t tgid, const struct gs_pyexec_target *t)
{
	int32_t zero = 0;
	int rc = gs_pyexec_pending(tgid, t);

	if (rc <= 0)
		return rc;
	rc = gs_proc_mem_write(tgid, t->pending, &zero, sizeof(zero));
	return rc ? rc : 1;
}
