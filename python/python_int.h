/* SPDX-License-Identifier: MIT */
/*
 * Private to python/python.c (discovery, address spaces) and
 * python/python_code.c (the code-object cache, locations): the state
 * both halves read.  Not a public contract.
 */
#ifndef GS_SYMBOLIZER_PYTHON_INT_H
#define GS_SYMBOLIZER_PYTHON_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "proc/proc.h"
#include "util/hashmap.h"
#include "python/python.h"

/* ---------------------------------------------------------------------------
 * State: an address space (a process and its fork children until exec) owns
 * the interpreter layout and the code-object cache.
 */
struct py_layout {
	uint32_t version_hex;
	uint16_t co_argcount, co_firstlineno, co_filename, co_name, co_qualname, co_table;
	uint16_t ascii_size, compact_size; /* sizeof(PyASCIIObject), PyCompactUnicodeObject */
	/* str length and state, bytes ob_size and ob_sval: 16, 32, 16, 32 in
	 * every version so far; 3.13+ take them from _Py_DebugOffsets */
	uint16_t str_length, str_state, bytes_size, bytes_sval;
	uint64_t code_type;
	struct gs_py_range eval[GS_PY_EVAL_RANGES]; /* runtime; hi == 0: absent */
};

struct py_code {
	uint32_t function;    /* function id in the profile, 0 = not made yet */
	uint32_t version_hex; /* of the interpreter it came from (line table format) */
	int32_t firstlineno;
	char *qualname, *filename;
	uint8_t *table;
	uint32_t table_len;
};

struct py_space {
	int refs;
	struct py_layout lay;
	struct gs_hmap codes; /* (check << 48 | code) -> struct py_code* */
	uint32_t *pids;       /* processes sharing it, newest last (read order) */
	uint32_t n_pids, cap_pids;
};

/* One process's spaces, in its slot of the process table. */
struct py_proc {
	struct py_space *sp;      /* its address space now; NULL: none */
	struct py_space *retired; /* the one it had before its last exec */
	/* Discovery (python/plugin.c): */
	uint8_t state;        /* enum gs_py_state */
	uint32_t cfg_id;      /* BPF py_cfgs id, 0 = none */
	uint64_t first_try;   /* CLOCK_MONOTONIC ns of the first discovery try */
	uint64_t runtime;     /* &_PyRuntime once found */
	uint32_t version_hex; /* its PY_VERSION_HEX */
	char name[64];        /* "CPython 3.11.7", "unsupported Python" or "" */
};

struct gs_py {
	struct gs_profile *p;
	struct gs_proc_slots slots; /* struct py_proc of each process (gs_py_bind) */
	struct gs_hmap locs;        /* function << 32 | line -> location id */
	uint32_t mapping;           /* [python] mapping id */
	uint32_t unknown_fn, trunc_loc;
	struct gs_py_stats st;
	struct gs_py_host host;                /* as a plug-in (gs_py_plugin) */
	struct gs_py_cfg cfgs[GS_PY_MAX_CFGS]; /* ids 1..n_cfgs, deduplicated */
	uint32_t n_cfgs;
};

static inline struct py_proc *proc_of(struct gs_py *py, uint32_t tgid, bool create)
{
	return gs_proc_slots_get(&py->slots, tgid, create);
}

static inline struct py_space *space_of(struct gs_py *py, uint32_t tgid)
{
	struct py_proc *pp = proc_of(py, tgid, false);

	return pp ? pp->sp : NULL;
}

static inline struct py_space *retired_of(struct gs_py *py, uint32_t tgid)
{
	struct py_proc *pp = proc_of(py, tgid, false);

	return pp ? pp->retired : NULL;
}

/* Target memory. */
static inline int rd(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	return gs_proc_mem_read(pid, addr, buf, len, NULL);
}

/* Where one interpreter keeps what the readers use (python.c): a hand
 * table for 3.8-3.12, _Py_DebugOffsets for 3.13+. */
struct py_table {
	uint32_t minor;
	uint16_t ts_frame, cframe_current, fr_back, fr_code, fr_lasti, fr_entry;
	uint16_t co_argcount, co_firstlineno, co_filename, co_name, co_qualname, co_table;
	uint16_t code_size; /* PyCode_Type.tp_basicsize = co_code_adaptive (3.11+) */
	uint16_t ascii_size, compact_size;
	uint16_t tss_off; /* _PyRuntime offset of autoTSSkey (Py_tss_t) when the
			   * PyGILState_GetThisThreadState decode fails */
	uint16_t str_length, str_state, bytes_size, bytes_sval;
	uint16_t interp_head; /* _PyRuntime.interpreters.head (3.13+) */
};

/* 3.13+: fill t from the _Py_DebugOffsets at runtime in pid's memory
 * (cookie, version, free-threading and every offset checked and bounded).
 * 0, with note set when the version is newer than the layouts known; else
 * a negative errno with a line in msg (-EAGAIN unreadable, -EPROTO
 * malformed, -ENOTSUP free-threaded).  Used by discovery and the unit
 * tests. */
int gs_py_debug_offsets(uint32_t pid, uint64_t runtime, uint32_t version_hex, struct py_table *t,
			char *note, size_t notelen, char *msg, size_t msglen);

/* Free a cached code object (NULL: a remembered read failure). */
void gs_py_code_free(struct py_code *c);

#endif
