/* SPDX-License-Identifier: MIT */
/*
 * CPython support in user space: interpreter discovery (-> struct gs_py_cfg
 * for the BPF walker), code-object symbolization (-> pprof Locations in the
 * `[python]` mapping) and the Python/native stack merge.
 *
 * Supported: CPython 3.8 .. 3.15 on x86-64 glibc, shared libpython or a
 * static python binary, with or without .symtab (the `.PyRuntime` section
 * stands in for a stripped `_PyRuntime`).  3.8-3.12: offsets from tables
 * here; 3.13+: from the target's own _Py_DebugOffsets (so a patch release
 * that moves a field still works, and a newer minor version is tried with a
 * note).  Not supported (-ENOTSUP with a one-line message; native stacks
 * are still recorded): 2.7, 3.0-3.7, free-threaded builds (3.13t, 3.14t),
 * musl.
 *
 * Session wiring (who calls what, when):
 *   py = gs_py_new(profile)                       once, before sampling
 *   gs_py_discover(py, tgid, &cfg, msg, len)      first sight of a process
 *        and after every GS_PROC_EXEC (retry -ENOENT/-EAGAIN on each poll
 *        for ~5 s after an exec: the new image maps libpython and sets up
 *        its runtime a few ms later); on 0: gs_sampler_set_py_cfg(s, id,
 *        &cfg) with a fresh id >= 1 and targets[tgid].py_cfg_id = id;
 *        -ENOENT: not Python (py_cfg_id 0, say nothing); other errors: print
 *        msg once as a note, py_cfg_id 0.
 *   gs_py_fork(py, parent, child)                 on GS_PROC_FORK (the BPF
 *        fork handler already copied the targets entry, py_cfg_id included);
 *        if the parent is itself still waiting for discovery (a forkserver
 *        that forks right after its exec), discover the child too.
 *   gs_py_note_frames(py, tgid, frames, n)        for each NEW raw stack while
 *        the run lasts (reads code objects eagerly: workers may exit soon)
 *   gs_py_exit(py, tgid)                          on GS_PROC_EXIT
 *   gs_py_location(py, tgid, &frame)              at the end, per frame
 *   gs_py_truncated_location(py)                  for GS_CPU_PY_TRUNC
 *   gs_py_eval_ranges(py, tgid, ...)              per stack, at the end, then
 *   gs_py_merge(profile, &stack, out, cap)        (eval activations by address)
 *
 * Reads of the target use process_vm_readv (then /proc/PID/mem); they need
 * the same privileges as the BPF side (root or CAP_SYS_PTRACE).
 *
 * Errors: 0 or a negative errno; messages say what happened and what to do.
 */
#ifndef GS_SYMBOLIZER_PYTHON_H
#define GS_SYMBOLIZER_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/records.h"
#include "gpusample/profile.h"

struct gs_py;

/* Cheap code-object checksum, computed identically by the BPF walker (from
 * co_firstlineno and co_argcount read at sample time) and by user space when
 * it reads the code object: a code object freed and replaced at the same
 * address by another one is then (almost always) told apart. */
static inline uint16_t gs_py_checksum(int32_t firstlineno, int32_t argcount)
{
	uint32_t x = (uint32_t)firstlineno * 0x9e37u ^ (uint32_t)argcount * 0x85ebu;

	return (uint16_t)(x ^ (x >> 16));
}

/* Result of discovery, for the report ("CPython 3.11.7"). */
struct gs_py_info {
	uint32_t version_hex;  /* PY_VERSION_HEX */
	char version[32];      /* "3.11.7" */
	char path[256];        /* ELF holding the interpreter (libpython or exe) */
	uint64_t runtime_addr; /* &_PyRuntime in the target */
};

/* profile: where gs_py_location() adds functions/locations (kept). */
struct gs_py *gs_py_new(struct gs_profile *profile);
void gs_py_free(struct gs_py *py);
/* Keep per-process state (address spaces) in the slots of t
 * (proc/proc.h), id being the Python handler's registration id, instead of
 * a table of its own: before the first process (-EBUSY after); t must
 * outlive every gs_py_* call but gs_py_free. */
struct gs_proc_table;
int gs_py_bind(struct gs_py *py, struct gs_proc_table *t, int id);

/* Find the CPython interpreter of tgid and fill cfg for the BPF walker.
 * 0: found; -ENOENT: no CPython in the process (yet: right after exec the
 * interpreter may not be mapped); -EAGAIN: CPython found but not walkable
 * yet -- not initialized, libpython or libc not fully mapped, the
 * thread-state key not readable as such yet (retry every
 * poll for a few seconds after exec, then report msg); -ENOTSUP: a Python this
 * version cannot walk (msg names it); -EPROTO: offsets failed the start-up
 * cross-check (msg names the build); -ESRCH/-EPERM: process gone / no
 * access.  msg receives one line in every non-zero case but -ENOENT, and
 * on 0 a note for the report when the version is newer than those known
 * (empty otherwise).
 * info may be NULL. */
int gs_py_discover(struct gs_py *py, uint32_t tgid, struct gs_py_cfg *cfg, struct gs_py_info *info,
		   char *msg, size_t msglen);
/* Child shares the parent's interpreter state and code cache (fork: same
 * address space).  No-op when the parent is not a known Python process. */
int gs_py_fork(struct gs_py *py, uint32_t parent, uint32_t child);
/* Image replaced: tgid starts over (call gs_py_discover again for the new
 * image); code objects already read for it stay usable for samples taken
 * before the exec. */
void gs_py_exec(struct gs_py *py, uint32_t tgid);
/* Process gone: cached code objects stay usable. */
void gs_py_exit(struct gs_py *py, uint32_t tgid);

/* ---- Python as a plug-in of the process table (python/plugin.c) ----------
 * Discovery at attach (first sight, after exec) and on every tick until
 * found or DISCOVERY_WINDOW (5 s) after the first try; the walker
 * configurations deduplicated into BPF's py_cfgs (GS_PY_MAX_CFGS, its
 * max_entries); a fork child takes its parent's state.  The plug-in changes
 * BPF state and asks for maps re-reads only through the run's handle: */
#define GS_PY_MAX_CFGS 64
struct gs_py_host {
	void *ctx;
	/* Store configuration id (1..GS_PY_MAX_CFGS) in BPF: 0 or -errno. */
	int (*set_cfg)(void *ctx, uint32_t id, const struct gs_py_cfg *cfg);
	/* tgid's configuration id changed (gs_py_proc_view): rewrite its
	 * BPF targets entry. */
	void (*cfg_changed)(void *ctx, uint32_t tgid);
	/* tgid mapped libpython after its maps were last read (found on a
	 * retry): the runtimes that keep maps must read them again. */
	void (*maps_grew)(void *ctx, uint32_t tgid);
	/* tgid's comm, for notes ("" when unknown; never NULL). */
	const char *(*comm)(void *ctx, uint32_t tgid);
};
struct gs_proc_handler;
/* Fill h with the plug-in's handler (ctx: py); host is copied. */
void gs_py_plugin(struct gs_py *py, const struct gs_py_host *host, struct gs_proc_handler *h);

/* What discovery knows of a process. */
enum gs_py_state { GS_PYS_UNKNOWN = 0, GS_PYS_FOUND, GS_PYS_NONE, GS_PYS_UNSUPPORTED };
struct gs_py_proc {
	uint8_t state;        /* enum gs_py_state */
	uint32_t cfg_id;      /* BPF py_cfgs id, 0 = none */
	uint64_t runtime;     /* &_PyRuntime (state FOUND) */
	uint32_t version_hex; /* PY_VERSION_HEX (state FOUND) */
	const char *name;     /* "CPython 3.11.7", "unsupported Python" or "" */
};
/* 0, or -ENOENT (py NULL, or tgid never seen: *out is UNKNOWN, name ""). */
int gs_py_proc_view(struct gs_py *py, uint32_t tgid, struct gs_py_proc *out);
/* The BPF walker configuration of tgid, or NULL (none, py NULL). */
const struct gs_py_cfg *gs_py_cfg_of(struct gs_py *py, uint32_t tgid);
/* "pid N (comm): why; native stacks only" as a profile note, the
 * consequence said once (reasons often carry it already). */
int gs_py_note_native_only(struct gs_profile *prof, uint32_t pid, const char *comm,
			   const char *why);

/* Read every code object of frames[0..n) not read yet (n may be 0).  Errors
 * are not fatal: unreadable code objects symbolize as "[unknown python]".
 * Returns the number of code objects newly read. */
int gs_py_note_frames(struct gs_py *py, uint32_t tgid, const struct gs_py_frame *frames,
		      uint32_t n);
/* Location id (in the profile given to gs_py_new) for one recorded frame:
 * Function {qualname (co_name before 3.11), co_filename, co_firstlineno},
 * Line {current line from the line table}; 0 only on allocation failure. */
uint32_t gs_py_location(struct gs_py *py, uint32_t tgid, const struct gs_py_frame *frame);
/* What symbolization could not resolve, for the profile's comments. */
struct gs_py_stats {
	uint64_t codes_read;     /* distinct code objects read */
	uint64_t codes_freed;    /* of which read after they were freed (intact) */
	uint64_t codes_failed;   /* distinct code objects unreadable (freed or
				  * reused before they were read, process gone) */
	uint64_t frames;         /* gs_py_location calls (frames of distinct stacks) */
	uint64_t frames_unknown; /* of which "[unknown python]" */
};
void gs_py_get_stats(const struct gs_py *py, struct gs_py_stats *st);

/* The first nwords 8-byte words of the _Py_DebugOffsets at the start of
 * _PyRuntime (runtime: its address in pid), read and checked for every
 * reader of CPython 3.13+'s own layout (frame walking here, PEP 768's
 * debugger fields in inject/): the "xdebugpy" cookie, a version that
 * matches Py_Version's major.minor (version_hex), not free-threaded.  The
 * offsets themselves are the caller's to bound.  0; -EAGAIN (unreadable:
 * the data segment not mapped yet), -EPROTO (no cookie, another version)
 * or -ENOTSUP (free-threaded), with a sentence in msg. */
int gs_py_debug_words(uint32_t pid, uint64_t runtime, uint32_t version_hex, uint64_t *o,
		      size_t nwords, char *msg, size_t msglen);

/* Location of the "[truncated python stack]" marker frame. */
uint32_t gs_py_truncated_location(struct gs_py *py);

/* Line number for a byte offset in a line table, as CPython computes it
 * (PyCode_Addr2Line).  lasti_bytes == UINT32_MAX means "not started yet"
 * and yields firstlineno.  Returns -1 when the table says "no line".
 *   <= 3.9: co_lnotab;  3.10: co_linetable (PEP 626 pairs, offsets in bytes);
 *   3.11+: the location table (varint entries, lengths in code units). */
int gs_py_line_lnotab(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti_bytes);
int gs_py_line_310(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti_bytes);
int gs_py_line_311(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti_bytes);
/* Dispatch on PY_VERSION_HEX. */
int gs_py_addr2line(uint32_t version_hex, const uint8_t *t, size_t len, int firstlineno,
		    uint32_t lasti_bytes);

/* A runtime address range [lo, hi) of one process. */
struct gs_py_range {
	uint64_t lo, hi;
};
#define GS_PY_EVAL_RANGES 2 /* _PyEval_EvalFrameDefault and its .cold part */

/* The eval loop's code in tgid's address space, as discovery found it in
 * the interpreter's ELF (symbol value and size plus the load bias): the
 * function and, where the symbol table names it, its split-off .cold part.
 * Fills out[0..n) and returns n (0: tgid not a known Python process, or
 * the symbol was missing; the merge then falls back to names). */
uint32_t gs_py_eval_ranges(struct gs_py *py, uint32_t tgid, struct gs_py_range *out, uint32_t cap);

/* One sample's stacks, as the merge reads them. */
struct gs_py_stack {
	const uint32_t *native;  /* native user location ids, leaf first */
	const __u64 *native_ips; /* their addresses as recorded (return
				    * addresses above the leaf); NULL: use names */
	uint32_t n_native;
	const uint32_t *py_locs;             /* Python location ids, leaf first */
	const struct gs_py_frame *py_frames; /* the raw frame behind each py_locs[i] */
	uint32_t n_py;
	uint32_t trunc_loc;             /* "[truncated python stack]", 0 = none */
	bool py_partial;                /* GS_CPU_PY_ERR: the Python walk stopped early */
	const struct gs_py_range *eval; /* gs_py_eval_ranges of the process */
	uint32_t n_eval;                /* 0: recognise eval frames by name */
	bool interp_frames;             /* keep the interpreter's own frames
					 * between two Python frames */
};

/*
 * Merge one sample's Python frames into its native user stack.
 * Python frames form groups: a frame with GS_PYF_ENTRY closes one C-level
 * eval invocation (the BPF walker sets it on every frame for <= 3.10, on
 * the frame below each C entry frame for 3.11+).  Each native frame in the
 * eval loop is one activation: its address lies in s->eval (else, without
 * ranges, its function is _PyEval_EvalFrameDefault, its .cold part or
 * PyEval_EvalFrameEx).  Group k is spliced in place of activation k:
 *  - counted from the ROOT when the Python chain is complete (its root-most
 *    frame is an entry, no truncation or read fault) and there are at least
 *    as many activations as groups: the extra activations are then the
 *    leaf-most ones (an eval call that has not pushed its frame yet, or one
 *    that is returning), which keep their native frame;
 *  - counted from the LEAF otherwise (the native walk stopped short of the
 *    root, or the Python walk did): groups left over go right after the
 *    last spliced position (or above all native frames when none was
 *    spliced, e.g. libpython without an unwind table yet), so that the
 *    native leaf frames stay below the whole Python stack.
 * Python frames are never dropped.  trunc_loc goes after the root-most
 * Python frame.  Kernel frames are not part of this: the caller puts them
 * leaf-most.
 * Then, unless s->interp_frames, the interpreter's own native frames that
 * lie between two Python frames of the result (_PyObject_MakeTpCall,
 * PyObject_Vectorcall, eval activations left unspliced, "python3.11+0x..."
 * helpers) are dropped, as py-spy's native mode does: the Python frames
 * already say what ran there.  An interpreter frame is one in the mapping
 * of an eval activation of this stack, or in a file named python* or
 * libpython*.  Frames root-ward of the root-most Python frame (start-up:
 * _start, Py_BytesMain, PyEval_EvalCode) and leaf-ward of the leaf-most
 * (native code called from Python) stay, as does every frame of another
 * file (an extension calling back into Python).
 * Writes leaf-first location ids into out[0..cap) and returns the count, or
 * -ENOSPC when cap is too small (cap >= n_native + n_py + 1 always fits).
 */
int gs_py_merge(const struct gs_profile *p, const struct gs_py_stack *s, uint32_t *out,
		uint32_t cap);
/* True when location id loc (native) is in the CPython eval loop (by name). */
bool gs_py_is_eval_location(const struct gs_profile *p, uint32_t loc);

#endif
