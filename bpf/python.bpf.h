/* SPDX-License-Identifier: MIT */
/* Python frame walker (BPF side).  Owner: Python walker.  Included once by
 * bpf/gpusample.bpf.c after vmlinux.h, bpf helpers and records.h.
 *
 * Contract:
 *   static __always_inline int gs_walk_python(struct task_struct *task,
 *           __u32 py_cfg_id, struct gs_py_frame *out, __u16 *flags);
 * Walks the current thread's Python stack (innermost first) into out[0..n),
 * n <= GS_MAX_PY_FRAMES, sets GS_CPU_PY_TRUNC / GS_CPU_PY_ERR in *flags and
 * returns n (0 when the thread has no Python state).  Defines map py_cfgs
 * (ARRAY of struct gs_py_cfg, key = py_cfg_id).
 * `out` must have room for GS_MAX_PY_FRAMES frames (it is written through a
 * bounded index); `task` is the current task (bpf_get_current_task_btf()).
 *
 * How: the PyThreadState comes from the pthread TSS key through the
 * thread's fsbase (task->thread.fsbase, CO-RE), which also works while the
 * thread has released the GIL (the 3.12+ thread-local is NULL then).  The
 * frame chain is walked in one bpf_loop (kernel 5.17+), no tail calls:
 *   <= 3.10: PyFrameObject f_back chain; f_lasti (3.10: code units -> x2);
 *            every frame is its own eval invocation -> GS_PYF_ENTRY.
 *   3.11:    tstate->cframe->current_frame, _PyInterpreterFrame.previous,
 *            lasti = prev_instr - (code + co_code_adaptive), is_entry.
 *   3.12:    as 3.11; shim frames (owner == FRAME_OWNED_BY_CSTACK) are
 *            skipped and mark the frame below them as the entry frame.
 *   3.13:    tstate->current_frame, instr_ptr; C entry frames (owner CSTACK
 *            or f_executable == Py_None) are skipped like 3.12 shims.
 * Per frame: code pointer, lasti (bytes), checksum gs_py_checksum() of
 * (co_firstlineno, co_argcount), and GS_PYF_BAD_CODE when ob_type is not
 * PyCode_Type (then no checksum).  A read fault stops the walk with
 * GS_CPU_PY_ERR, keeping the frames read so far.
 */
#ifndef GS_PYTHON_BPF_H
#define GS_PYTHON_BPF_H

#include <bpf/bpf_core_read.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct gs_py_cfg);
} py_cfgs SEC(".maps");

#define GS_PY_FRAME_OWNED_BY_CSTACK 3
/* Loop budget: Python frames plus the C entry frames between them. */
#define GS_PY_WALK_STEPS (2 * GS_MAX_PY_FRAMES + 2)

/* Walk counters live in a per-CPU map value, not on the stack: the verifier
 * does not track map contents, so the bpf_loop callback converges after a
 * couple of passes instead of being re-verified once per frame index. */
struct gs_py_walk_state {
	__u64 frame;  /* next frame to visit, 0 = done */
	__u32 n;      /* frames written */
	__u16 flags;  /* GS_CPU_PY_* */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
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

/* One loop step: visit w->frame.  Returns 1 to stop the loop. */
static long gs_py_walk_step(__u32 idx, void *ctx)
{
	struct gs_py_walk *c = ctx;
	const struct gs_py_cfg *cfg = c->cfg;
	struct gs_py_walk_state *w = c->st;
	__u32 ver = cfg->version_hex;
	__u64 frame = w->frame, code = 0, next = 0;
	__u8 owner = 0;
	struct gs_py_frame f = {};

	if (!frame)
		return 1;
	if (gs_py_rd(&code, 8, frame + cfg->fr_code) ||
	    gs_py_rd(&next, 8, frame + cfg->fr_back))
		goto fault;
	if (ver >= 0x030c0000) {
		if (gs_py_rd(&owner, 1, frame + cfg->fr_entry))
			goto fault;
		if (owner == GS_PY_FRAME_OWNED_BY_CSTACK || (cfg->py_none && code == cfg->py_none)) {
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
		__s32 lasti = 0;

		if (gs_py_rd(&lasti, 4, frame + cfg->fr_lasti))
			goto fault;
		if (ver >= 0x030a0000 && lasti >= 0)
			lasti *= 2; /* 3.10 counts code units */
		f.lasti = lasti < 0 ? 0xffffffffu : (__u32)lasti;
		f.flags = GS_PYF_ENTRY;
	} else {
		__u64 ip = 0, first = code + cfg->code_adaptive;

		if (gs_py_rd(&ip, 8, frame + cfg->fr_lasti))
			goto fault;
		f.lasti = ip >= first && ip - first < 0xffffffffull ? (__u32)(ip - first)
								     : 0xffffffffu;
		if (ver < 0x030c0000) {
			__u8 is_entry = 0;

			if (gs_py_rd(&is_entry, 1, frame + cfg->fr_entry))
				goto fault;
			if (is_entry)
				f.flags = GS_PYF_ENTRY;
		}
	}
	{
		__u64 type = 0;
		__s32 firstlineno = 0, argcount = 0;

		if (gs_py_rd(&type, 8, code + 8) || type != cfg->code_type ||
		    gs_py_rd(&firstlineno, 4, code + cfg->code_firstlineno) ||
		    gs_py_rd(&argcount, 4, code + cfg->code_argcount))
			f.flags |= GS_PYF_BAD_CODE;
		else
			f.check = gs_py_bpf_checksum(firstlineno, argcount);
	}
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

static __always_inline int gs_walk_python(struct task_struct *task, __u32 py_cfg_id,
					  struct gs_py_frame *out, __u16 *flags)
{
	const struct gs_py_cfg *cfg;
	struct gs_py_walk w = {};
	struct gs_py_walk_state *st;
	__u64 fsbase, tstate = 0, frame = 0;
	__u32 zero = 0, n;
	__s32 key;

	if (!py_cfg_id)
		return 0;
	cfg = bpf_map_lookup_elem(&py_cfgs, &py_cfg_id);
	if (!cfg || !cfg->version_hex)
		return 0;
	key = cfg->tss_key;
	if (key < 0 || key >= 32) /* beyond glibc's specific_1stblock */
		return 0;
	fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (!fsbase)
		return 0;
	if (gs_py_rd(&tstate, 8, fsbase + cfg->tls_1stblock + (__u64)key * 16 + 8)) {
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
	st = bpf_map_lookup_elem(&py_walk, &zero);
	if (!st)
		return 0;
	st->frame = frame;
	st->n = 0;
	st->flags = 0;
	w.cfg = cfg;
	w.out = out;
	w.st = st;
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

#endif
