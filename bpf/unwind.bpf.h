/* SPDX-License-Identifier: MIT */
/* Native user-stack unwinder (BPF side).  Owner: CFI unwinder.  Included once
 * by bpf/gpusample.bpf.c (after vmlinux.h, bpf_helpers.h, bpf_core_read.h and
 * gpusample/records.h).
 *
 * Contract:
 *   static __always_inline struct gs_unwind_state *gs_unwind_begin(void *ctx,
 *           __u32 tgid, __u32 level, __u16 *flags, bool compat);
 * walks the current thread's user stack into this CPU's struct
 * gs_unwind_state number `level` (a per-CPU map value, level <
 * GS_NEST_MAX, see common.bpf.h: the caller owns that level until it has
 * copied the frames): ips[0..n) return addresses, leaf = interrupted user
 * PC first, n <= GS_MAX_USER_FRAMES (read it back from the map value and
 * bound it before sizing a copy), err = enum gs_unwind_err.  Sets
 * GS_CPU_USER_CFI in *flags when CFI rows were used and GS_CPU_USER_TRUNC
 * when the walk hit GS_MAX_USER_FRAMES.  Returns NULL for a bad level.
 * ctx is the program context (perf event or uprobe) for bpf_get_stack.
 * Callers: gs_fill_stack (bpf/gpusample.bpf.c) and the test driver
 * tests/cfi/cfi_probe.bpf.c.
 *
 * How: processes that user space registered in gs_cfi_procs (native/cfi.c,
 * gs_cfi_add_process) are walked with .eh_frame rows (bpf/cfi.h): per frame,
 * a binary search over the process's sorted mappings, a page-index lookup
 * and a short binary search over that object's rows (all three skipped when
 * the PC is in this CPU's cache, gs_pc_cache), then CFA / return address
 * (CFA-8) / saved RBP read from the user stack through a window of
 * GS_UNWIND_WIN bytes (one probe read serves the frames inside it).  PCs without a row (JIT code, objects without
 * .eh_frame, gaps between FDEs) take one frame-pointer step.  A PC outside
 * every known mapping (JIT code in anonymous memory, such as oneDNN's
 * kernels, which keep neither a table nor a frame pointer), or in an object
 * whose table is still being built (GS_CFI_TABLE_PENDING), takes the
 * frame-pointer step only when its result validates as a return address
 * (gs_unwind_is_ret); otherwise the stack is scanned upwards from SP, 8
 * words per loop step, at most GS_UNWIND_SCAN_CHUNKS steps per walk, for
 * the first word that validates: the caller's PC, its SP right above that
 * word (RBP unknown: only RSP-based rules continue), then CFI again.  Such
 * samples get GS_CPU_USER_SCAN.  The walk starts
 * from the task's user registers (bpf_task_pt_regs), so samples that
 * interrupted the kernel still get the user stack.  Processes without an
 * entry, or every process while gs_unwind_fp_only is set, use bpf_get_stack
 * (frame pointers only; that is also the cost baseline).
 *
 * The walk runs in bpf_loop (kernel 5.17+), one callback per frame, inside
 * the global function gs_unwind_cfi; kernels before bpf_loop run the same
 * step from a bounded loop (gs_unwind_cfi_compat, the programs
 * gs_*_compat).
 *
 * Verification cost, and why the code is shaped this way.  Every program
 * must verify in at most 200k processed instructions on every kernel the
 * project supports (5.10 to 7.x: scripts/kernel-matrix.sh, t_bpf_verify),
 * a fifth of the verifier's 1M limit, because the count moves between
 * kernel releases by more than anyone would guess: 6.18.44 counted 13
 * times what 6.18.0 did for the same gs_sample.  The rules that keep it
 * there:
 *  - Anything with a loop or many branches is a global function taking
 *    scalars only (gs_cfi_map_index, gs_cfi_row_rule, gs_unwind_cfi,
 *    gs_unwind_step_g, gs_py_step_g, gs_py_walk_compat): the verifier checks
 *    it once per program with unknown arguments, whatever the states its
 *    callers reach it with.  Pointer arguments are out: 5.10 accepts only
 *    scalars and the context, and 6.1 cannot prove them non-null.
 *  - Walk state lives in per-CPU map values, not on the stack: the
 *    verifier does not track map contents, so a loop body converges in a
 *    pass or two instead of being re-verified per frame index.
 *  - Values whose bounds the verifier would otherwise carry into every path
 *    are bounced through a map value or an empty asm (see gs_cfi_row_rule,
 *    gs_cfi_find_mapping): clang otherwise re-derives a test the verifier
 *    of an older kernel cannot follow.
 *  - A bounded loop (compat) calls a global step function: its iterations
 *    cost a few instructions each.
 * Measured (clang 14, 2 CPUs; processed instructions of gs_sample,
 * gs_off_switch, gs_gpu_launch): 5.10 compat 44k/47k/31k; 6.1 44k/54k/23k;
 * 6.12 33k/38k/20k; 7.2 14k/17k/8k; 6.18.44 75k/72k/60k (compat 31k/36k/
 * 28k), with the rule arithmetic in bpf/cfi.h's gs_cfi_cfa/gs_cfi_rbp (7.2
 * counted 66k/69k/60k and 6.18.44 85k/82k/70k with the switch inline here).
 * Before these rules: 1M+ (refused) on 6.18.44 and 7.2.
 * Keep it that way: no pointers or caller state into the global functions,
 * no loop counters whose address is taken (the verifier then loses the
 * bound and explodes).
 */
#ifndef GS_UNWIND_BPF_H
#define GS_UNWIND_BPF_H

#include "cfi.h"
#include "common.bpf.h"

/* Inner maps are created by user space per table with max_entries = its
 * chunks of GS_CFI_CHUNK entries (bpf/cfi.h). */
struct gs_cfi_chunk {
	struct gs_cfi_row e[GS_CFI_CHUNK]; /* page-index entries are row-sized */
};

struct gs_cfi_rows_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	/* sizes, not __type: clang 14 emits the row struct as a BTF FWD here */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct gs_cfi_chunk));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, GS_CFI_MAX_TABLES);
	__type(key, __u32);
	__array(values, struct gs_cfi_rows_map);
} gs_cfi_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GS_CFI_MAX_RULES);
	__type(key, __u32);
	__type(value, struct gs_cfi_rule);
} gs_cfi_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GS_CFI_MAX_PROCS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct gs_cfi_proc);
} gs_cfi_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gs_cfi_miss_key);
	__type(value, __u64);
} gs_cfi_miss SEC(".maps");

/* Set from user space (skel->bss->gs_unwind_fp_only) to measure the
 * frame-pointer baseline or to honour --no-cfi. */
volatile __u32 gs_unwind_fp_only;

/* Stack words are read through a window: GS_UNWIND_WIN bytes, aligned, so
 * a window never crosses a page and faults only where the word itself
 * would.  A bpf_probe_read_user costs ~160 ns whatever its size up to a few
 * hundred bytes (measured, bench/results_bpfcost.md), and consecutive
 * frames mostly lie in one window: a walk pays a few window reads instead
 * of one read per frame.  A whole page: the training loop's 41 frames
 * span ~10 KiB of stack, 4 page reads (~0.5 us each) instead of 11-13 of
 * 1 KiB (~0.27 us each). */
#define GS_UNWIND_WIN 4096

/* The walk's state and output.  It lives in a per-CPU map value, not on the
 * stack: the verifier does not track map contents, so the per-frame bpf_loop
 * callback converges after a pass or two instead of being re-verified once
 * per frame index (a stack struct cost 300-450k verified instructions). */
struct gs_unwind_state {
	__u64 pc, sp, bp;
	__u32 n;          /* frames written to ips */
	__u16 err;        /* enum gs_unwind_err */
	__u8 exact;       /* pc is exact (leaf, or resumed after a signal frame) */
	__u8 bp_ok;       /* bp holds this frame's real RBP */
	__u8 cfi;         /* at least one row used */
	__u8 scan;        /* 1: scanning the stack from scan_at; 2: found, fix RBP */
	__u8 scanned;     /* a caller was found by a scan */
	__u8 scan_chunks; /* scan steps left for this walk */
	__u8 pad[4];
	__u32 tgid, gen; /* the walk's process and its gs_cfi_proc.gen */
	__u64 scan_at;
	__u64 scan_buf[8];
	__u64 win_base;                /* user address of win[0]; 0 = empty */
	__u8 win[GS_UNWIND_WIN + 16];  /* + 16: reads at a masked offset stay inside */
	__u64 ips[GS_MAX_USER_FRAMES]; /* leaf first */
};
#define GS_UNWIND_SCAN_CHUNKS 255 /* x 8 words: 16 KiB of stack per walk */

/* One state per nesting level (GS_NEST_MAX, common.bpf.h): a perf_event
 * sample can interrupt a uprobe/USDT handler that is unwinding on the same
 * CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GS_NEST_MAX);
	__type(key, __u32);
	__type(value, struct gs_unwind_state);
} gs_unwind_st SEC(".maps");

/* A cache per CPU of lookup PC -> what the tables say there, direct-mapped
 * and tagged with gs_cfi_proc.gen (unique per content of a process's
 * mappings, so entries of another process or of an older layout miss).
 * A hit replaces the mapping search and the row search (one or two
 * inner-map helper calls for the chunks, bpf/cfi.h): on the bench VM a hit
 * step costs ~0.26 us, a miss ~1-2 us (bench/results_bpfcost.md); a training
 * loop's stacks repeat the same return addresses sample after sample
 * (88% hits there).  Only final answers are kept: a
 * built table's rule or its gap (frame-pointer step), or an object without
 * a table; pending tables, JIT code and unknown memory take the full path.
 * Only nesting level 0 uses it, so a walk that interrupts another on this
 * CPU never sees an entry half written.  One plain ARRAY element per CPU
 * (key = CPU number; the loader sets max_entries to the possible CPUs,
 * CPUs beyond it go without): a PERCPU_ARRAY allocates each of its
 * elements apart, so every hit paid a cold load of the element's pointer
 * before the entry itself. */
#define GS_PCC_SLOTS 4096 /* power of 2; 24 bytes each, per CPU */
enum gs_pcc_kind { GS_PCC_RULE = 0, GS_PCC_FP = 1 };
struct gs_pcc_ent {
	__u64 pc;
	__u32 gen;  /* 0: empty */
	__u32 kind; /* enum gs_pcc_kind */
	struct gs_cfi_rule rule;
};

struct gs_pcc {
	struct gs_pcc_ent e[GS_PCC_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set by the loader: one per possible CPU */
	__type(key, __u32);
	__type(value, struct gs_pcc);
} gs_pc_cache SEC(".maps");

/* Slot of (pc, gen): Fibonacci hashing (BPF cannot include util/hash.h:
 * it needs libc headers). */
static __always_inline __u32 gs_pcc_slot(__u64 pc, __u32 gen)
{
	return ((pc ^ ((__u64)gen << 47)) * 0x9e3779b97f4a7c15ull) >> (64 - 12);
}
_Static_assert(GS_PCC_SLOTS == 1 << 12, "slot bits");

/* bpf_loop context: constant over the walk. */
struct gs_unwind_walk {
	struct gs_unwind_state *w;
	struct gs_cfi_proc *proc;
	struct gs_pcc *pcc; /* this CPU's cache at level 0 (and proc->gen != 0), else NULL */
	__u32 tgid;
	__u32 gen;
};

/* Index in the process's mappings of the one that contains pc, or -1.  A
 * global function with scalar arguments only (it looks the process up
 * itself, one hash lookup): the verifier checks it once per program,
 * whatever its callers' states.  Inlined into the per-frame callback, the
 * search's bounds were tied to the callback's state and the verifier walked
 * its paths with exact values: 6.18.44 and 7.2 ran into the 1M-instruction
 * limit there.  Pointer arguments would save the lookup, but 5.10 takes
 * only scalars and context in global functions, and 6.1 cannot prove a
 * pointer argument non-null. */
__noinline int gs_cfi_map_index(__u32 tgid, __u64 pc)
{
	struct gs_cfi_proc *proc = bpf_map_lookup_elem(&gs_cfi_procs, &tgid);
	__u32 lo = 0, hi, i;

	if (!proc)
		return -1;
	hi = proc->n;
	if (hi > GS_CFI_MAX_MAPPINGS)
		return -1;
	for (i = 0; i < GS_CFI_MAP_SEARCH; i++) {
		__u32 mid;

		if (lo >= hi)
			break;
		mid = (lo + hi) / 2;
		if (pc < proc->m[mid & (GS_CFI_MAX_MAPPINGS - 1)].start)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == 0)
		return -1;
	lo = (lo - 1) & (GS_CFI_MAX_MAPPINGS - 1);
	if (pc >= proc->m[lo].end)
		return -1;
	return lo;
}

/* Mapping of proc (the process tgid's entry) that contains pc, or NULL. */
static __always_inline struct gs_cfi_mapping *gs_cfi_find_mapping(struct gs_cfi_proc *proc,
								  __u32 tgid, __u64 pc)
{
	struct gs_cfi_mapping *m = NULL;
	int i = gs_cfi_map_index(tgid, pc);

	if (i >= 0)
		m = &proc->m[i & (GS_CFI_MAX_MAPPINGS - 1)];
	/* Opaque to clang: otherwise it turns the callers' `!m` into a second
	 * test of i < 0, and 6.1's verifier, which does not carry a signed
	 * bound over from the first test, then follows a NULL m. */
	asm volatile("" : "+r"(m));
	return m;
}

/* The row search's probe index, bounced through a map value (see
 * gs_cfi_row_rule); one per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gs_cfi_probe SEC(".maps");

/* Rule id in effect at ELF address rel in the table, or -1 (no row / gap).
 * Entries come a chunk at a time (bpf/cfi.h): a lookup in an inner map is a
 * helper call (the verifier inlines array lookups only for maps it knows),
 * so the search first narrows the row range to one chunk, probing chunk
 * boundaries (mostly none: a page's rows rarely straddle one), then
 * searches inside that chunk with plain loads: one or two lookups per
 * search instead of one per step.  Invariant of both loops: rows below lo
 * start at or before rel, rows from hi on after it; rule is that of the
 * row lo - 1 once lo has moved.  A global function (scalars in, a scalar
 * out): verified once per program, whatever its two callers' states. */
__noinline int gs_cfi_row_rule(__u32 table_id, __u32 n_pages, __u64 rel)
{
	void *rows = bpf_map_lookup_elem(&gs_cfi_tables, &table_id);
	struct gs_cfi_page *page;
	struct gs_cfi_chunk *ch;
	struct gs_cfi_row *row;
	__u32 lo, hi, i, first, rule = 0, key, idx, *probe;

	key = 0;
	probe = bpf_map_lookup_elem(&gs_cfi_probe, &key);
	if (!probe || !rows || rel > 0xffffffffULL || (rel >> GS_CFI_PAGE_SHIFT) >= n_pages)
		return -1;
	/* Keys are separate variables: a loop counter whose address is taken
	 * lives on the stack, where the verifier loses its value and then
	 * cannot see the loop end. */
	idx = (__u32)(rel >> GS_CFI_PAGE_SHIFT);
	key = idx >> GS_CFI_CHUNK_SHIFT;
	ch = bpf_map_lookup_elem(rows, &key);
	if (!ch)
		return -1;
	page = (struct gs_cfi_page *)&ch->e[idx & (GS_CFI_CHUNK - 1)];
	first = lo = page->lo;
	hi = page->hi;
	for (i = 0; i < GS_CFI_ROW_SEARCH; i++) {
		__u32 b;

		if (lo >= hi || lo >> GS_CFI_CHUNK_SHIFT == (hi - 1) >> GS_CFI_CHUNK_SHIFT)
			break;
		/* a chunk's first entry strictly inside (lo, hi) */
		b = (lo + (hi - lo) / 2) & ~(GS_CFI_CHUNK - 1);
		if (b <= lo)
			b = (lo | (GS_CFI_CHUNK - 1)) + 1;
		key = b >> GS_CFI_CHUNK_SHIFT;
		ch = bpf_map_lookup_elem(rows, &key);
		if (!ch)
			return -1;
		if (rel < ch->e[0].pc) {
			hi = b;
		} else {
			lo = b + 1;
			rule = ch->e[0].rule;
		}
	}
	if (lo < hi) {
		if (lo >> GS_CFI_CHUNK_SHIFT != (hi - 1) >> GS_CFI_CHUNK_SHIFT)
			return -1; /* not narrowed within the step bound: never */
		key = lo >> GS_CFI_CHUNK_SHIFT;
		ch = bpf_map_lookup_elem(rows, &key);
		if (!ch)
			return -1;
	}
	for (i = 0; i <= GS_CFI_CHUNK_SHIFT; i++) {
		__u32 mid;

		if (lo >= hi)
			break;
		mid = lo + (hi - lo) / 2;
		/* The index goes through the map value: an offset loaded from
		 * there is a fresh unknown, so the verifier's precision
		 * tracking stops at it instead of marking lo and hi precise,
		 * which would make every search path a state of its own. */
		*(volatile __u32 *)probe = mid & (GS_CFI_CHUNK - 1);
		row = &ch->e[*(volatile __u32 *)probe & (GS_CFI_CHUNK - 1)];
		if (rel < row->pc) {
			hi = mid;
		} else {
			lo = mid + 1;
			rule = row->rule;
		}
	}
	if (lo == first || lo < hi)
		return -1; /* before the first row; or not converged: never */
	return rule & 0x7fffffff;
}

/* Rule in effect at ELF address rel in the table, or NULL (no row / gap). */
static __always_inline struct gs_cfi_rule *gs_cfi_find_rule(__u32 table_id, __u32 n_pages,
							    __u64 rel)
{
	int id = gs_cfi_row_rule(table_id, n_pages, rel);
	__u32 key = id;

	if (id < 0)
		return NULL;
	return bpf_map_lookup_elem(&gs_cfi_rules, &key);
}

static __always_inline int gs_read_user_u64(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (const void *)addr);
}

/* Two adjacent stack words in one read: {saved RBP, return address}. */
static __always_inline int gs_read_user_pair(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, 2 * sizeof(*dst), (const void *)addr);
}

/* size (8 or 16) bytes of the walked thread's stack at addr into dst,
 * through the window of w; 0 or a negative errno. */
static __always_inline int gs_stack_read(struct gs_unwind_state *w, __u64 *dst, __u64 addr,
					 __u32 size)
{
	__u64 base = addr & ~(__u64)(GS_UNWIND_WIN - 1), off = addr - base;

	if (off > GS_UNWIND_WIN - size) /* straddles the window's end */
		return bpf_probe_read_user(dst, size, (const void *)addr);
	if (base != w->win_base) {
		w->win_base = 0;
		if (bpf_probe_read_user(w->win, GS_UNWIND_WIN, (const void *)base))
			return -14; /* EFAULT: the word's page is not readable */
		w->win_base = base;
	}
	off &= GS_UNWIND_WIN - 1;
	dst[0] = *(__u64 *)(w->win + off);
	if (size > 8)
		dst[1] = *(__u64 *)(w->win + off + 8);
	return 0;
}

/* Stop the walk with err. */
static __always_inline long gs_unwind_stop(struct gs_unwind_state *w, __u16 err)
{
	w->err = err;
	return 1;
}

/* One frame-pointer step: [bp] = caller's RBP, [bp+8] = return address. */
static __always_inline long gs_unwind_fp_step(struct gs_unwind_state *w)
{
	__u64 fr[2]; /* saved RBP, return address */

	if (!w->bp_ok || w->bp < w->sp || (w->bp & 7))
		return gs_unwind_stop(w, GS_UNWIND_NO_TABLE);
	if (gs_stack_read(w, fr, w->bp, 16))
		return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
	if (fr[1] == 0)
		return 1; /* outermost frame */
	w->sp = w->bp + 16;
	w->bp = fr[0];
	w->pc = fr[1];
	w->exact = 0;
	return 0;
}

/* A signal trampoline frame: rt_sigframe at sp, saved rsp at +cfa_off, rip
 * right after it, rbp at +rbp_off. */
static __always_inline long gs_unwind_signal(struct gs_unwind_state *w, const struct gs_cfi_rule *r)
{
	__u64 sprip[2], nbp;

	if (gs_read_user_pair(sprip, w->sp + (__s64)r->cfa_off) ||
	    gs_read_user_u64(&nbp, w->sp + (__s64)r->rbp_off))
		return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
	w->sp = sprip[0];
	w->bp = nbp;
	w->bp_ok = 1;
	w->pc = sprip[1];
	w->exact = 1; /* the interrupted PC, not a return address */
	return sprip[1] == 0;
}

/* One CFI step with rule r; returns 1 to stop the walk.  The rule's
 * arithmetic is bpf/cfi.h's (gs_cfi_cfa, gs_cfi_rbp), shared with the
 * user-space walk of dump/walk.c; this function only reads. */
static __always_inline long gs_unwind_cfi_step(struct gs_unwind_state *w,
					       const struct gs_cfi_rule *r)
{
	__u64 cfa, at, fr[2]; /* fr: saved RBP (when at CFA-16), return address */
	__u8 rbp_type = r->rbp_type;
	__s64 rbp_off = r->rbp_off;

	switch (gs_cfi_cfa(r, w->pc, w->sp, w->bp, w->bp_ok, &cfa)) {
	case GS_CFI_VALUE:
		break;
	case GS_CFI_LOAD:
		if (gs_stack_read(w, &cfa, cfa, 8))
			return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
		break;
	case GS_CFI_SIG:
		return gs_unwind_signal(w, r);
	case GS_CFI_STOP:
		return 1;
	default:
		return gs_unwind_stop(w, GS_UNWIND_BAD_RULE);
	}

	/* The caller's frame is above this one. */
	if (cfa <= w->sp)
		return gs_unwind_stop(w, GS_UNWIND_BAD_RULE);
	if (rbp_type == GS_RBP_CFA && rbp_off == -16) {
		/* push rbp right after the call (most frames): one read */
		if (gs_stack_read(w, fr, cfa - 16, 16))
			return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
	} else {
		if (gs_stack_read(w, &fr[1], cfa - 8, 8))
			return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
		switch (gs_cfi_rbp(r, cfa, w->bp, w->bp_ok, &at)) {
		case GS_CFI_VALUE:
			fr[0] = at;
			break;
		case GS_CFI_LOAD:
			if (gs_stack_read(w, &fr[0], at, 8))
				return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
			break;
		case GS_CFI_BAD:
			return gs_unwind_stop(w, GS_UNWIND_BAD_RULE);
		default:
			fr[0] = at; /* unknown in the caller */
			w->bp_ok = 0;
			break;
		}
	}
	if (rbp_type == GS_RBP_CFA)
		w->bp_ok = 1;
	w->bp = fr[0];
	w->sp = cfa;
	w->pc = fr[1];
	w->exact = 0;
	return fr[1] == 0; /* 0 return address: outermost frame */
}

/* Length of the `call r/m64` (ff /2) whose ModRM byte is modrm (and SIB
 * byte sib), prefixes not counted; 0 when modrm is not /2. */
static __always_inline __u32 gs_call_ff_len(__u8 modrm, __u8 sib)
{
	__u8 mod = modrm >> 6, rm = modrm & 7;

	if ((modrm & 0x38) != 0x10)
		return 0;
	if (mod == 3)
		return 2;
	if (mod == 1)
		return rm == 4 ? 4 : 3;
	if (mod == 2)
		return rm == 4 ? 7 : 6;
	if (rm == 4)
		return (sib & 7) == 5 ? 7 : 3;
	return rm == 5 ? 6 : 2;
}

/* Is v a return address: inside a mapping with an unwind table (built or
 * pending), right after a call instruction (e8 rel32, or ff /2 of any
 * length)?  Reads the 8 code bytes before v. */
static __always_inline bool gs_unwind_is_ret(struct gs_cfi_proc *proc, __u32 tgid, __u64 v)
{
	struct gs_cfi_mapping *m;
	__u8 b[8];

	if (v < 8)
		return false;
	m = gs_cfi_find_mapping(proc, tgid, v - 1);
	if (!m || !m->table_id || m->table_id == GS_CFI_TABLE_ANON || v - 8 < m->start)
		return false;
	if (bpf_probe_read_user(b, sizeof(b), (const void *)(v - 8)))
		return false;
	if (b[3] == 0xe8)
		return true;
	return (b[6] == 0xff && gs_call_ff_len(b[7], 0) == 2) ||
	       (b[5] == 0xff && gs_call_ff_len(b[6], b[7]) == 3) ||
	       (b[4] == 0xff && gs_call_ff_len(b[5], b[6]) == 4) ||
	       (b[2] == 0xff && gs_call_ff_len(b[3], b[4]) == 6) ||
	       (b[1] == 0xff && gs_call_ff_len(b[2], b[3]) == 7);
}

/* One scan step: 8 stack words from scan_at.  Returns 1 to stop the walk. */
static __always_inline long gs_unwind_scan_step(struct gs_unwind_walk *c, struct gs_unwind_state *w)
{
	__u64 at = w->scan_at;

	if (!w->scan_chunks)
		return gs_unwind_stop(w, GS_UNWIND_NO_TABLE);
	w->scan_chunks--;
	if (bpf_probe_read_user(w->scan_buf, sizeof(w->scan_buf), (const void *)at))
		return gs_unwind_stop(w, GS_UNWIND_READ_FAULT);
	for (__u32 j = 0; j < 8; j++) {
		__u64 v = w->scan_buf[j];

		if (!gs_unwind_is_ret(c->proc, c->tgid, v))
			continue;
		w->pc = v;
		w->sp = at + 8 * j + 8;
		w->exact = 0;
		w->scan = 2;
		w->scanned = 1;
		return 0;
	}
	w->scan_at = at + sizeof(w->scan_buf);
	return 0;
}

/* RBP-based caller rule with CFA = guess + off: does it lead to a return
 * address? */
static __always_inline bool gs_unwind_bp_fits(struct gs_cfi_proc *proc, __u32 tgid,
					      struct gs_unwind_state *w, __u64 guess, __s32 off)
{
	__u64 cfa = guess + (__s64)off, ret;

	return guess && !(guess & 7) && cfa > w->sp && cfa - w->sp < (1u << 20) &&
	       !gs_read_user_u64(&ret, cfa - 8) && gs_unwind_is_ret(proc, tgid, ret);
}

/* After a scan found the caller: its RBP is unknown.  When the caller's rule
 * needs it, try the register as it is (JIT code that leaves RBP alone), the
 * slot right below the return address (a preamble that pushes RBP first and
 * then uses it as a general register: oneDNN 3.x, whose AVX-512 kernels
 * load an offset into it) and the slot two words below (one that pushes
 * RBX, then RBP: oneDNN 2.x), each only if the rule then yields a return
 * address.  Else RBP stays unknown (RSP-based rules still work). */
static __always_inline long gs_unwind_scan_bp(struct gs_unwind_walk *c, struct gs_unwind_state *w)
{
	struct gs_cfi_mapping *m = gs_cfi_find_mapping(c->proc, c->tgid, w->pc - 1);
	struct gs_cfi_rule *r = NULL;
	__u64 saved = 0;

	w->scan = 0;
	w->bp_ok = 0;
	if (m && m->table_id && m->table_id != GS_CFI_TABLE_PENDING &&
	    m->table_id != GS_CFI_TABLE_ANON)
		r = gs_cfi_find_rule(m->table_id, m->n_pages, w->pc - 1 - m->bias);
	if (!r || r->cfa_type != GS_CFA_RBP)
		return 0;
	if (gs_unwind_bp_fits(c->proc, c->tgid, w, w->bp, r->cfa_off)) {
		w->bp_ok = 1;
		return 0;
	}
	for (__u32 below = 16; below <= 24; below += 8) {
		if (!gs_read_user_u64(&saved, w->sp - below) &&
		    gs_unwind_bp_fits(c->proc, c->tgid, w, saved, r->cfa_off)) {
			w->bp = saved;
			w->bp_ok = 1;
			return 0;
		}
	}
	return 0;
}

/* pc lies in anonymous executable memory (JIT code) or outside every known
 * mapping (mapped since the last maps read): a frame-pointer step if its
 * result validates, else start a scan. */
static __always_inline long gs_unwind_unmapped(struct gs_unwind_walk *c, struct gs_unwind_state *w)
{
	__u64 fr[2]; /* saved RBP, return address */

	if (w->bp_ok && w->bp >= w->sp && !(w->bp & 7) && w->bp - w->sp < (1u << 20) &&
	    !gs_read_user_pair(fr, w->bp) && gs_unwind_is_ret(c->proc, c->tgid, fr[1])) {
		w->sp = w->bp + 16;
		w->bp = fr[0];
		w->pc = fr[1];
		w->exact = 0;
		return 0;
	}
	w->scan = 1;
	w->scan_at = w->sp & ~7ull;
	return 0;
}

static long gs_unwind_step(__u32 i, void *arg)
{
	struct gs_unwind_walk *c = arg;
	struct gs_unwind_state *w = c->w;
	struct gs_cfi_mapping *m;
	struct gs_cfi_rule *r = NULL;
	struct gs_pcc_ent *ce = NULL;
	__u64 lookup;
	__u32 n = w->n;

	if (w->scan == 2)
		return gs_unwind_scan_bp(c, w);
	if (w->scan)
		return gs_unwind_scan_step(c, w);
	if (n >= GS_MAX_USER_FRAMES)
		return gs_unwind_stop(w, GS_UNWIND_DEPTH);
	w->ips[n] = w->pc;
	w->n = n + 1;

	/* Return addresses point after the call: look up the call itself. */
	lookup = w->exact ? w->pc : w->pc - 1;
	if (c->pcc) {
		ce = &c->pcc->e[gs_pcc_slot(lookup, c->gen) & (GS_PCC_SLOTS - 1)];
		if (ce->pc == lookup && ce->gen == c->gen) {
			if (ce->kind == GS_PCC_FP)
				return gs_unwind_fp_step(w);
			w->cfi = 1;
			return gs_unwind_cfi_step(w, &ce->rule);
		}
	}
	m = gs_cfi_find_mapping(c->proc, c->tgid, lookup);
	if (!m || m->table_id == GS_CFI_TABLE_PENDING) {
		struct gs_cfi_miss_key k = { .tgid = c->tgid, .start = m ? m->start : 0 };
		__u64 now = bpf_ktime_get_ns();

		/* A known object whose table is still pending, or code mapped
		 * since the last maps read (dlopen): wake user space now rather
		 * than at its next 200 ms tick, so the table exists a few ms
		 * later.  Once per key (NOEXIST): user space deletes a key when
		 * it served it (an unknown-memory key of a process whose maps
		 * re-reads back off stays until the next re-read). */
		if (!bpf_map_update_elem(&gs_cfi_miss, &k, &now, BPF_NOEXIST)) {
#ifdef GS_WAKE_RINGBUF /* the includer's ring buffer map, if any */
			struct gs_rec_hdr wake = { .type = GS_REC_WAKEUP,
						   .version = GS_RECORDS_VERSION,
						   .size = sizeof(wake),
						   .ktime_ns = now };

			bpf_ringbuf_output(&GS_WAKE_RINGBUF, &wake, sizeof(wake),
					   BPF_RB_FORCE_WAKEUP);
#endif
		}
		/* Pending: the object's code is there but its rows are not (a
		 * just-mapped library running its constructors, a big one being
		 * built): a frame-pointer step taken blindly stops most of these
		 * walks (distribution libraries keep no frame pointers), so the
		 * validated step or scan of unknown code, until the table lands. */
		return gs_unwind_unmapped(c, w);
	} else if (m->table_id == GS_CFI_TABLE_ANON) {
		return gs_unwind_unmapped(c, w);
	} else if (m->table_id) {
		r = gs_cfi_find_rule(m->table_id, m->n_pages, lookup - m->bias);
	}
	if (ce && m && m->table_id != GS_CFI_TABLE_PENDING) { /* final (see gs_pc_cache) */
		ce->pc = lookup;
		ce->gen = c->gen;
		ce->kind = !r || r->cfa_type == GS_CFA_NONE ? GS_PCC_FP : GS_PCC_RULE;
		if (r)
			ce->rule = *r;
	}
	if (!r || r->cfa_type == GS_CFA_NONE)
		return gs_unwind_fp_step(w);
	w->cfi = 1;
	return gs_unwind_cfi_step(w, r);
}

#define GS_UNWIND_USE_FP (-2)
#define GS_UNWIND_STEPS  (GS_MAX_USER_FRAMES + 1 + 2 * GS_UNWIND_SCAN_CHUNKS)

/* Start a walk in w from the user registers pc, sp, bp; false when there
 * is no user stack (kernel thread). */
static __always_inline bool gs_unwind_init(struct gs_unwind_state *w, __u32 tgid, __u32 gen,
					   __u64 pc, __u64 sp, __u64 bp, __u64 cs)
{
	w->n = 0;
	w->err = GS_UNWIND_OK;
	w->cfi = 0;
	w->scan = 0;
	w->scanned = 0;
	w->scan_chunks = GS_UNWIND_SCAN_CHUNKS;
	w->win_base = 0; /* never a window of another walk */
	w->tgid = tgid;
	w->gen = gen;
	if (!pc || (cs & 3) != 3)
		return false; /* kernel thread: no user stack */
	w->pc = pc;
	w->sp = sp;
	w->bp = bp;
	w->exact = 1;
	w->bp_ok = 1;
	return true;
}

/* The process's CFI entry and the walk state of level: 1, or
 * GS_UNWIND_USE_FP (no entry, or CFI off), or 0 (no state). */
static __always_inline int gs_unwind_prep(__u32 tgid, __u32 level, struct gs_cfi_proc **proc,
					  struct gs_unwind_state **w)
{
	if (gs_unwind_fp_only)
		return GS_UNWIND_USE_FP;
	*proc = bpf_map_lookup_elem(&gs_cfi_procs, &tgid);
	if (!*proc)
		return GS_UNWIND_USE_FP;
	*w = bpf_map_lookup_elem(&gs_unwind_st, &level);
	return *w ? 1 : 0;
}

/* This CPU's PC cache for a walk at level with tag gen, or NULL (only level
 * 0 uses it, see gs_pc_cache). */
static __always_inline struct gs_pcc *gs_unwind_pcc(__u32 level, __u32 gen)
{
	__u32 cpu;

	if (level != 0 || !gen)
		return NULL;
	cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&gs_pc_cache, &cpu);
}

/*
 * The CFI walk of the current thread's user stack into state `level` of
 * gs_unwind_st.  A global (non-static) function: the verifier checks it once
 * per program, on its own, with unknown scalar arguments, whatever the
 * caller's state; callers see only a scalar result.  Returns the number of
 * frames (also in the state's n; err set there), or GS_UNWIND_USE_FP when
 * the process has no CFI entry (or CFI is off): use frame pointers then.
 */
__noinline int gs_unwind_cfi(__u32 tgid, __u32 level)
{
	struct gs_unwind_walk c = {};
	struct gs_unwind_state *w;
	struct gs_cfi_proc *proc;
	struct pt_regs *regs;
	int rc = gs_unwind_prep(tgid, level, &proc, &w);

	if (rc <= 0)
		return rc;
	/* User registers as saved on kernel entry: right whether the sample
	 * interrupted user or kernel mode (the perf regs are kernel regs then). */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs) {
		w->n = 0;
		w->err = GS_UNWIND_READ_FAULT;
		return 0;
	}
	/* Direct loads (a BTF pointer): four probe reads less per sample. */
	if (!gs_unwind_init(w, tgid, proc->gen, regs->ip, regs->sp, regs->bp,
			    *(volatile __u64 *)((void *)regs + GS_PT_REGS_CS_OFF)))
		return 0;
	c.w = w;
	c.proc = proc;
	c.tgid = tgid;
	c.gen = proc->gen;
	c.pcc = gs_unwind_pcc(level, c.gen);
	bpf_loop(GS_UNWIND_STEPS, gs_unwind_step, &c, 0);
	return w->n;
}

/* ---- kernels before bpf_loop (5.17) ----------------------------------------
 * 5.10-5.16 (Ubuntu 22.04's 5.15, RHEL 9's 5.14, Debian 11's 5.10) have no
 * bpf_loop, no bpf_task_pt_regs (5.15) and no bpf_get_current_task_btf
 * (5.11).  The compat walk runs the same per-frame step from a bounded loop.
 * The step is a global function (scalars in, the walk's state in its map
 * value), so the verifier checks it once and the loop around it costs a few
 * instructions per iteration, not a copy of the step each: about the same
 * verifier cost as the bpf_loop walk.  The object also must not mention
 * bpf_loop in these programs at all: 5.10 refuses the callback reference
 * (a BPF_PSEUDO_FUNC load) before it verifies anything, so the compat
 * programs are separate programs of the object (gs_*_compat), and the
 * loader loads one set (bpf/sampler.c). */

/* x86-64's THREAD_SIZE (PAGE_SIZE << 2; KASAN kernels double it: the
 * loader sets it from the kernel's config).  The user registers saved on
 * kernel entry lie at the top of the task's kernel stack (task_pt_regs();
 * no padding above them on x86-64 before FRED, 6.9). */
const volatile __u32 gs_thread_size = 16384;
#define GS_PT_REGS_WORDS 21 /* struct pt_regs: r15 ... ss */

/* One step of the compat walk at level: what gs_unwind_step does in the
 * bpf_loop walk; 1 stops the walk. */
__noinline int gs_unwind_step_g(__u32 level)
{
	struct gs_unwind_walk c = {};
	struct gs_unwind_state *w = bpf_map_lookup_elem(&gs_unwind_st, &level);

	if (!w)
		return 1;
	c.tgid = w->tgid;
	c.proc = bpf_map_lookup_elem(&gs_cfi_procs, &c.tgid);
	if (!c.proc)
		return gs_unwind_stop(w, GS_UNWIND_NO_TABLE); /* exited meanwhile */
	c.w = w;
	c.gen = w->gen;
	c.pcc = gs_unwind_pcc(level, c.gen);
	return gs_unwind_step(0, &c);
}

__noinline int gs_unwind_cfi_compat(__u32 tgid, __u32 level)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct gs_unwind_state *w;
	struct gs_cfi_proc *proc;
	__u64 *regs;
	void *stack;
	int rc = gs_unwind_prep(tgid, level, &proc, &w);

	if (rc <= 0)
		return rc;
	/* Read into the stack window, not onto the BPF stack (the call chain
	 * from the sched_switch program would pass its 512 bytes); the window
	 * is emptied again by gs_unwind_init. */
	regs = (__u64 *)w->win;
	stack = BPF_CORE_READ(task, stack);
	if (!stack || bpf_probe_read_kernel(regs, GS_PT_REGS_WORDS * 8,
					    stack + gs_thread_size - GS_PT_REGS_WORDS * 8)) {
		w->n = 0;
		w->err = GS_UNWIND_READ_FAULT;
		return 0;
	}
	/* r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs
	 * flags sp ss (the ptrace ABI's order) */
	if (!gs_unwind_init(w, tgid, proc->gen, regs[16], regs[19], regs[4], regs[17]))
		return 0;
	for (__u32 i = 0; i < GS_UNWIND_STEPS; i++)
		if (gs_unwind_step_g(level))
			break;
	return w->n;
}

/*
 * Unwind the current thread's user stack into this CPU's gs_unwind_state
 * number `level`: ips[0..n) (leaf = interrupted user PC first), n <=
 * GS_MAX_USER_FRAMES, err = enum gs_unwind_err.  ORs GS_CPU_USER_TRUNC /
 * GS_CPU_USER_CFI into *flags.  Returns the state, or NULL for a level
 * outside the map.  compat (a constant): the walk for kernels before
 * bpf_loop (gs_unwind_cfi_compat).
 */
static __always_inline struct gs_unwind_state *gs_unwind_begin(void *ctx, __u32 tgid, __u32 level,
							       __u16 *flags, bool compat)
{
	struct gs_unwind_state *w = bpf_map_lookup_elem(&gs_unwind_st, &level);
	long n;

	if (!w)
		return NULL;
	n = compat ? gs_unwind_cfi_compat(tgid, level) : gs_unwind_cfi(tgid, level);
	if (n == GS_UNWIND_USE_FP) {
		/* frame pointers only: the kernel's walk (the cost baseline) */
		n = bpf_get_stack(ctx, w->ips, GS_MAX_FP_FRAMES * sizeof(__u64), BPF_F_USER_STACK);
		w->cfi = 0;
		if (n < 0) {
			w->n = 0;
			w->err = GS_UNWIND_READ_FAULT;
		} else {
			n /= sizeof(__u64);
			w->n = n;
			w->err = n >= GS_MAX_FP_FRAMES ? GS_UNWIND_DEPTH : GS_UNWIND_OK;
		}
	}
	if (w->err == GS_UNWIND_DEPTH)
		*flags |= GS_CPU_USER_TRUNC;
	if (w->cfi)
		*flags |= GS_CPU_USER_CFI;
	if (w->cfi && w->scanned)
		*flags |= GS_CPU_USER_SCAN;
	return w;
}

#endif
