/* SPDX-License-Identifier: MIT */
/* Python frame walker (BPF side).  Owner: Python walker.  Included once by
 * bpf/gpusample.bpf.c after vmlinux.h, bpf helpers and records.h.
 *
 * Contract:
 *   static __always_inline int gs_walk_python(struct task_struct *task,
 *           __u32 py_cfg_id, __u32 level, struct gs_py_frame *out, __u16 *flags,
 *           bool compat);
 * Walks the current thread's Python stack (innermost first) into out[0..n),
 * n <= GS_MAX_PY_FRAMES, sets GS_CPU_PY_TRUNC / GS_CPU_PY_ERR in *flags and
 * returns n (0 when the thread has no Python state).  Defines map py_cfgs
 * (ARRAY of struct gs_py_cfg, key = py_cfg_id).
 * `out` must have room for GS_MAX_PY_FRAMES frames (it is written through a
 * bounded index); `task` is the current task (read with BPF_CORE_READ).
 * `level` (< GS_NEST_MAX, common.bpf.h) picks this CPU's walk state: the
 * caller owns it for the walk (a sample can interrupt a uprobe's walk).
 *
 * How: the PyThreadState comes from the pthread TSS key through the
 * thread's fsbase (task->thread.fsbase, CO-RE), which also works while the
 * thread has released the GIL (the 3.12+ thread-local is NULL then).  The
 * frame chain is walked in one bpf_loop (kernel 5.17+; before it, the same
 * step from a bounded loop, see gs_py_walk_compat), no tail calls:
 *   <= 3.10: PyFrameObject f_back chain; f_lasti (3.10: code units -> x2);
 *            every frame is its own eval invocation -> GS_PYF_ENTRY.
 *   3.11:    tstate->cframe->current_frame, _PyInterpreterFrame.previous,
 *            lasti = prev_instr - (code + co_code_adaptive), is_entry.
 *   3.12:    as 3.11; shim frames (owner == FRAME_OWNED_BY_CSTACK) are
 *            skipped and mark the frame below them as the entry frame.
 *   3.13:    tstate->current_frame, instr_ptr; C entry frames (owner CSTACK
 *            or f_executable == Py_None) are skipped like 3.12 shims.
 *   3.14+:   as 3.13 (offsets from _Py_DebugOffsets); f_executable is a
 *            _PyStackRef whose low bits are tags (pycore_stackref.h), masked
 *            off; the entry frames are owned by FRAME_OWNED_BY_INTERPRETER
 *            (3, CSTACK's old value) or CSTACK (4, 3.14), so every owner
 *            >= 3 is a frame that is not Python code, as in 3.12/3.13.
 * Per frame: code pointer, lasti (bytes), checksum gs_py_checksum() of
 * (co_firstlineno, co_argcount), and GS_PYF_BAD_CODE when ob_type is not
 * PyCode_Type (then no checksum).  At most two bpf_probe_read_user per
 * frame: one window over the frame's header fields (3.11+: an aligned 1 KiB
 * window over the data stack, which serves the frames next to it too), one
 * over the code object's.  A
 * read fault stops the walk with GS_CPU_PY_ERR, keeping the frames read so
 * far.
 */
#ifndef GS_PYTHON_BPF_H
#define GS_PYTHON_BPF_H

#include <bpf/bpf_core_read.h>
#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct gs_py_cfg);
} py_cfgs SEC(".maps");

/* 3.12/3.13 FRAME_OWNED_BY_CSTACK; 3.14+ FRAME_OWNED_BY_INTERPRETER, and
 * 3.14's CSTACK above it: owners from here on are not Python code. */
#define GS_PY_FRAME_OWNED_BY_CSTACK 3
/* Low bits of a frame's code reference: _PyStackRef tags from 3.14 on
 * (Py_TAG_BITS, 1 or 3); always zero in a PyObject pointer (8-aligned), so
 * masking them is right for every version. */
#define GS_PY_REF_TAGS 7ull
/* Loop budget: Python frames plus the C entry frames between them. */
#define GS_PY_WALK_STEPS (2 * GS_MAX_PY_FRAMES + 2)

/* Walk counters live in a per-CPU map value, not on the stack: the verifier
 * does not track map contents, so the bpf_loop callback converges after a
 * couple of passes instead of being re-verified once per frame index.
 * The value also holds the two read windows: each frame costs two
 * bpf_probe_read_user calls (its header fields, its code object's fields)
 * instead of one per field -- the reads, not the arithmetic, are what a
 * sample pays for (about 7 reads per frame before). */
#define GS_PY_WIN 128 /* power of two; frame and code windows fit easily */
/* 3.11+ frames live one after the other in the thread's data stack (the
 * caller's right below; generators' frames are in their objects): their
 * headers are read through an aligned window of GS_PY_FWIN bytes, so one
 * read serves the frames inside it (training loop: Python walk 8.5 -> 6.9
 * us per sample, bench/results_bpfcost.md).  Aligned, it never crosses a
 * page: it faults only where the header read would. */
#define GS_PY_FWIN 1024
struct gs_py_walk_state {
	__u64 frame; /* next frame to visit, 0 = done */
	__u32 n;     /* frames written */
	__u16 flags; /* GS_CPU_* */
	__u16 pad;
	__u32 fr_lo, fr_len; /* frame window [fr_lo, fr_lo + fr_len) */
	__u32 co_lo, co_len; /* code-object window */
	__u8 fbuf[GS_PY_WIN + 8];
	__u8 cbuf[GS_PY_WIN + 8];
	__u64 fwin_base; /* user address of fwin[0]; 0 = empty */
	/* + GS_PY_WIN + 8: fields at a masked offset from any start stay inside */
	__u8 fwin[GS_PY_FWIN + GS_PY_WIN + 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GS_NEST_MAX); /* one per nesting level */
	__type(key, __u32);
	__type(value, struct gs_py_walk_state);
} py_walk SEC(".maps");

struct gs_py_walk {
	const struct gs_py_cfg *cfg;
	struct gs_py_frame *out;
	struct gs_py_walk_state *st;
};

static __always_inline __u16 gs_py_bpf_checksum(__s32 firstlineno, __s32 argcount)
{
	__u32 x = (__u32)firstlineno * 0x9e37u ^ (__u32)argcount * 0x85ebu;

	return (__u16)(x ^ (x >> 16));
}

static __always_inline int gs_py_rd(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

/* Fields out of a window; off is relative to the window start and masked
 * so that the verifier sees a bounded map-value access. */
static __always_inline __u64 gs_py_w64(const __u8 *buf, __u32 off)
{
	return *(const __u64 *)(buf + (off & (GS_PY_WIN - 1)));
}

static __always_inline __u32 gs_py_w32(const __u8 *buf, __u32 off)
{
	return *(const __u32 *)(buf + (off & (GS_PY_WIN - 1)));
}

static __always_inline __u8 gs_py_w8(const __u8 *buf, __u32 off)
{
	return buf[off & (GS_PY_WIN - 1)];
}

/* Windows covering every field the walk reads, from the offsets in cfg.
 * Both lie inside the fixed-size header of their object, so they touch no
 * page that the field-by-field reads would not.  Returns -1 when a window
 * would not fit (never with the offsets python.c knows). */
static __always_inline int gs_py_windows(const struct gs_py_cfg *cfg, struct gs_py_walk_state *st)
{
	__u32 ver = cfg->version_hex;
	__u32 lo = cfg->fr_code, hi = cfg->fr_code + 8;
	__u32 lasti_end = cfg->fr_lasti + (ver < 0x030b0000 ? 4 : 8);

	if (cfg->fr_back < lo)
		lo = cfg->fr_back;
	if (cfg->fr_back + 8 > hi)
		hi = cfg->fr_back + 8;
	if (cfg->fr_lasti < lo)
		lo = cfg->fr_lasti;
	if (lasti_end > hi)
		hi = lasti_end;
	if (ver >= 0x030b0000) {
		if (cfg->fr_entry < lo)
			lo = cfg->fr_entry;
		if (cfg->fr_entry + 1u > hi)
			hi = cfg->fr_entry + 1u;
	}
	st->fr_lo = lo;
	st->fr_len = hi - lo;
	/* code object: ob_type at 8, co_firstlineno, co_argcount (all >= 8) */
	hi = 16;
	if (cfg->code_firstlineno + 4u > hi)
		hi = cfg->code_firstlineno + 4u;
	if (cfg->code_argcount + 4u > hi)
		hi = cfg->code_argcount + 4u;
	st->co_lo = 8;
	st->co_len = hi - 8;
	if (st->fr_len > GS_PY_WIN - 8 || st->co_len > GS_PY_WIN - 8 || cfg->code_firstlineno < 8 ||
	    cfg->code_argcount < 8)
		return -1;
	return 0;
}

/* The len bytes at addr (a frame's header fields), through the frame window
 * (3.11+) or read on their own; NULL on a fault.  Fields are then read at
 * masked offsets (gs_py_w64) from the pointer returned. */
static __always_inline const __u8 *gs_py_frame_buf(struct gs_py_walk_state *w, __u32 ver,
						   __u64 addr, __u32 len)
{
	__u64 base = addr & ~(__u64)(GS_PY_FWIN - 1), off = addr - base;

	if (len > GS_PY_WIN)
		return NULL;
	if (ver < 0x030b0000 || off + len > GS_PY_FWIN) /* a heap object, or straddles */
		return gs_py_rd(w->fbuf, len, addr) ? NULL : w->fbuf;
	if (base != w->fwin_base) {
		w->fwin_base = 0;
		if (gs_py_rd(w->fwin, GS_PY_FWIN, base))
			return NULL;
		w->fwin_base = base;
	}
	return w->fwin + (off & (GS_PY_FWIN - 1));
}

/* One loop step: visit w->frame.  Returns 1 to stop the loop.  Inlined
 * into gs_py_step_g (the compat walk: one call level less keeps its call
 * chain within BPF's 512 bytes of stack); bpf_loop gets an out-of-line
 * copy. */
static __always_inline long gs_py_walk_step(__u32 idx, void *ctx)
{
	struct gs_py_walk *c = ctx;
	const struct gs_py_cfg *cfg = c->cfg;
	struct gs_py_walk_state *w = c->st;
	__u32 ver = cfg->version_hex, lo = w->fr_lo, len = w->fr_len;
	__u64 frame = w->frame, code, next;
	struct gs_py_frame f = {};
	const __u8 *fb;

	if (!frame)
		return 1;
	fb = gs_py_frame_buf(w, ver, frame + lo, len);
	if (!fb)
		goto fault;
	code = gs_py_w64(fb, cfg->fr_code - lo) & ~GS_PY_REF_TAGS;
	next = gs_py_w64(fb, cfg->fr_back - lo);
	if (ver >= 0x030c0000) {
		__u8 owner = gs_py_w8(fb, cfg->fr_entry - lo);

		if (owner >= GS_PY_FRAME_OWNED_BY_CSTACK ||
		    (cfg->py_none && code == cfg->py_none)) {
			/* C entry (shim) frame: the Python frame below it is the
			 * first one of that eval invocation. */
			__u32 last = w->n - 1;

			if (w->n > 0 && last < GS_MAX_PY_FRAMES)
				c->out[last].flags |= GS_PYF_ENTRY;
			w->frame = next;
			return 0;
		}
	}
	if (w->n >= GS_MAX_PY_FRAMES) {
		w->flags |= GS_CPU_PY_TRUNC;
		return 1;
	}
	f.code = code;
	if (ver < 0x030b0000) {
		__s32 lasti = (__s32)gs_py_w32(fb, cfg->fr_lasti - lo);

		if (ver >= 0x030a0000 && lasti >= 0)
			lasti *= 2; /* 3.10 counts code units */
		f.lasti = lasti < 0 ? 0xffffffffu : (__u32)lasti;
		f.flags = GS_PYF_ENTRY;
	} else {
		__u64 ip = gs_py_w64(fb, cfg->fr_lasti - lo), first = code + cfg->code_adaptive;

		f.lasti = ip >= first && ip - first < 0xffffffffull ? (__u32)(ip - first)
								    : 0xffffffffu;
		if (ver < 0x030c0000 && gs_py_w8(fb, cfg->fr_entry - lo))
			f.flags = GS_PYF_ENTRY;
	}
	len = w->co_len;
	if (len > GS_PY_WIN || gs_py_rd(w->cbuf, len, code + w->co_lo) ||
	    gs_py_w64(w->cbuf, 8 - w->co_lo) != cfg->code_type)
		f.flags |= GS_PYF_BAD_CODE;
	else
		f.check =
		    gs_py_bpf_checksum((__s32)gs_py_w32(w->cbuf, cfg->code_firstlineno - w->co_lo),
				       (__s32)gs_py_w32(w->cbuf, cfg->code_argcount - w->co_lo));
	{
		__u32 i = w->n;

		if (i >= GS_MAX_PY_FRAMES)
			return 1;
		c->out[i] = f;
		w->n = i + 1;
	}
	w->frame = next;
	return 0;
fault:
	w->flags |= GS_CPU_PY_ERR;
	return 1;
}

/* ---- kernels before bpf_loop (5.17): see the compat walk in unwind.bpf.h.
 * The same step runs from a bounded loop as a global function, which
 * cannot take the caller's output pointer (5.10 passes only scalars and
 * the context to global functions), so a compat walk writes its frames to
 * py_stage[level] and gs_fill_stack copies them from there. */
struct gs_py_stage {
	struct gs_py_frame f[GS_MAX_PY_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GS_NEST_MAX);
	__type(key, __u32);
	__type(value, struct gs_py_stage);
} py_stage SEC(".maps");

__noinline int gs_py_step_g(__u32 cfg_id, __u32 level)
{
	struct gs_py_walk w = {};

	w.cfg = bpf_map_lookup_elem(&py_cfgs, &cfg_id);
	w.st = bpf_map_lookup_elem(&py_walk, &level);
	w.out = bpf_map_lookup_elem(&py_stage, &level);
	if (!w.cfg || !w.st || !w.out)
		return 1;
	return gs_py_walk_step(0, &w);
}

/* A global function too: the loop is verified once per program, not once
 * per state its caller reaches it with. */
__noinline int gs_py_walk_compat(__u32 cfg_id, __u32 level)
{
	for (__u32 i = 0; i < GS_PY_WALK_STEPS; i++)
		if (gs_py_step_g(cfg_id, level))
			break;
	return 0;
}

/* compat (a constant): walk with gs_py_walk_compat into py_stage[level]
 * instead of bpf_loop into out. */
static __always_inline int gs_walk_python(struct task_struct *task, __u32 py_cfg_id, __u32 level,
					  struct gs_py_frame *out, __u16 *flags, bool compat)
{
	const struct gs_py_cfg *cfg;
	struct gs_py_walk w = {};
	struct gs_py_walk_state *st;
	__u64 fsbase, tstate = 0, frame = 0;
	__u32 n;
	__s32 key;

	if (!py_cfg_id)
		return 0;
	cfg = bpf_map_lookup_elem(&py_cfgs, &py_cfg_id);
	if (!cfg || !cfg->version_hex)
		return 0;
	key = cfg->tss_key;
	if (key != GS_PY_TSS_TLS && (key < 0 || key >= 32)) /* beyond specific_1stblock */
		return 0;
	fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (!fsbase)
		return 0;
	if (gs_py_rd(&tstate, 8,
		     key == GS_PY_TSS_TLS ? fsbase + (__s64)(__s32)cfg->tls_1stblock
					  : fsbase + cfg->tls_1stblock + (__u64)key * 16 + 8)) {
		*flags |= GS_CPU_PY_ERR;
		return 0;
	}
	if (!tstate)
		return 0; /* thread never ran Python */
	if (gs_py_rd(&frame, 8, tstate + cfg->ts_frame))
		goto fault;
	if (cfg->version_hex >= 0x030b0000 && cfg->version_hex < 0x030d0000 && frame &&
	    gs_py_rd(&frame, 8, frame + cfg->cframe_current))
		goto fault;
	st = bpf_map_lookup_elem(&py_walk, &level);
	if (!st)
		return 0;
	if (gs_py_windows(cfg, st)) {
		*flags |= GS_CPU_PY_ERR;
		return 0;
	}
	st->frame = frame;
	st->n = 0;
	st->flags = 0;
	st->fwin_base = 0; /* never a window of another walk */
	w.cfg = cfg;
	w.out = out;
	w.st = st;
	if (compat)
		gs_py_walk_compat(py_cfg_id, level);
	else
		bpf_loop(GS_PY_WALK_STEPS, gs_py_walk_step, &w, 0);
	if (st->frame && !(st->flags & GS_CPU_PY_ERR))
		st->flags |= GS_CPU_PY_TRUNC; /* frame or loop budget spent */
	*flags |= st->flags;
	n = st->n;
	return n > GS_MAX_PY_FRAMES ? GS_MAX_PY_FRAMES : n;
fault:
	*flags |= GS_CPU_PY_ERR;
	return 0;
}

/* Ring-buffer flag for a sample with n_python Python frames: samples of a
 * process younger than GS_PY_YOUNG_NS wake user space at once, which then
 * reads the code objects the stack references (session/runtimes.c).  A fresh
 * spawn worker runs its imports and often its one task within that time,
 * and a module body's code object is freed when its import ends, within
 * milliseconds; other samples wait for the next poll (gs_rb_lazy). */
#define GS_PY_YOUNG_NS (3ull * 1000000000ull)
static __always_inline __u64 gs_py_wakeup_flag(struct task_struct *task, __u32 n_python)
{
	__u64 start;

	if (!n_python)
		return gs_rb_lazy();
	start = BPF_CORE_READ(task, group_leader, start_time); /* CLOCK_MONOTONIC */
	return bpf_ktime_get_ns() - start < GS_PY_YOUNG_NS ? BPF_RB_FORCE_WAKEUP : gs_rb_lazy();
}

#endif
