/* SPDX-License-Identifier: MIT */
/* Native user-stack unwinder (BPF side).  Owner: CFI unwinder.  Included once
 * by bpf/gpusample.bpf.c (after vmlinux.h, bpf_helpers.h, bpf_core_read.h and
 * gpusample/records.h).
 *
 * Contract:
 *   static __always_inline int gs_unwind_user(void *ctx, struct task_struct *task,
 *           __u32 tgid, __u64 *ips, __u16 *err, __u16 *flags);
 * Writes up to GS_MAX_USER_FRAMES return addresses (leaf = interrupted user
 * PC first) into ips and returns the count (verifier-bounded to
 * [0, GS_MAX_USER_FRAMES]); *err = enum gs_unwind_err.
 * ctx is the program context (perf event or uprobe) for bpf_get_stack.
 * ips must point into a map value (per-CPU scratch) with room for
 * GS_MAX_USER_FRAMES entries.  Sets GS_CPU_USER_CFI in *flags when CFI rows
 * were used and GS_CPU_USER_TRUNC when the walk hit GS_MAX_USER_FRAMES.
 *
 * How: processes that user space registered in gs_cfi_procs (bpf/cfi.c,
 * gs_cfi_add_process) are walked with .eh_frame rows (bpf/cfi.h): per frame,
 * a binary search over the process's sorted mappings, a page-index lookup
 * and a short binary search over that object's rows, then CFA / return address (CFA-8) / saved RBP read
 * from the user stack.  PCs without a row (JIT code, objects without
 * .eh_frame, gaps between FDEs) take one frame-pointer step.  The walk starts
 * from the task's user registers (bpf_task_pt_regs), so samples that
 * interrupted the kernel still get the user stack.  Processes without an
 * entry, or every process while gs_unwind_fp_only is set, use bpf_get_stack
 * (frame pointers only; that is also the cost baseline).
 *
 * The walk runs in bpf_loop (kernel 5.17+), one callback per frame.
 */
#ifndef GS_UNWIND_BPF_H
#define GS_UNWIND_BPF_H

#include "cfi.h"

/* Inner maps are created by user space per table with max_entries = rows. */
struct gs_cfi_rows_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	/* sizes, not __type: clang 14 emits the row struct as a BTF FWD here */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct gs_cfi_row));
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

struct gs_unwind_walk {
	__u64 pc, sp, bp;
	__u64 *ips;
	struct gs_cfi_proc *proc;
	__u32 tgid;
	__u32 n;
	__u16 err;
	__u8 exact;  /* pc is exact (leaf, or resumed after a signal frame) */
	__u8 bp_ok;  /* bp holds this frame's real RBP */
	__u8 cfi;    /* at least one row used */
};

/* Mapping of proc that contains pc, or NULL. */
static __always_inline struct gs_cfi_mapping *gs_cfi_find_mapping(struct gs_cfi_proc *proc,
								  __u64 pc)
{
	__u32 lo = 0, hi = proc->n, i;

	/* Bail out rather than clamp: a clamped hi is a constant, and the
	 * verifier would then walk every search path with exact values. */
	if (hi > GS_CFI_MAX_MAPPINGS)
		return NULL;
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
		return NULL;
	lo = (lo - 1) & (GS_CFI_MAX_MAPPINGS - 1);
	if (pc >= proc->m[lo].end)
		return NULL;
	return &proc->m[lo];
}

/* Rule in effect at ELF address rel in the table, or NULL (no row / gap). */
static __always_inline struct gs_cfi_rule *gs_cfi_find_rule(__u32 table_id, __u32 n_pages, __u64 rel)
{
	void *rows = bpf_map_lookup_elem(&gs_cfi_tables, &table_id);
	struct gs_cfi_page *page;
	struct gs_cfi_row *row;
	__u32 lo, hi, i, first, rule;

	if (!rows || rel > 0xffffffffULL || (rel >> GS_CFI_PAGE_SHIFT) >= n_pages)
		return NULL;
	i = rel >> GS_CFI_PAGE_SHIFT;
	page = bpf_map_lookup_elem(rows, &i);
	if (!page)
		return NULL;
	first = lo = page->lo;
	hi = page->hi;
	/* last row with pc <= rel in [lo, hi) */
	for (i = 0; i < GS_CFI_ROW_SEARCH; i++) {
		__u32 mid;

		if (lo >= hi)
			break;
		mid = lo + (hi - lo) / 2;
		row = bpf_map_lookup_elem(rows, &mid);
		if (!row)
			return NULL;
		if (rel < row->pc)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == first)
		return NULL; /* before the first row */
	lo--;
	row = bpf_map_lookup_elem(rows, &lo);
	if (!row)
		return NULL;
	rule = row->rule;
	return bpf_map_lookup_elem(&gs_cfi_rules, &rule);
}

static __always_inline int gs_read_user_u64(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (const void *)addr);
}

/* One frame-pointer step: [bp] = caller's RBP, [bp+8] = return address. */
static __always_inline long gs_unwind_fp_step(struct gs_unwind_walk *w)
{
	__u64 ra, nbp;

	if (!w->bp_ok || w->bp < w->sp || (w->bp & 7)) {
		w->err = GS_UNWIND_NO_TABLE;
		return 1;
	}
	if (gs_read_user_u64(&nbp, w->bp) || gs_read_user_u64(&ra, w->bp + 8)) {
		w->err = GS_UNWIND_READ_FAULT;
		return 1;
	}
	if (ra == 0)
		return 1; /* outermost frame */
	w->sp = w->bp + 16;
	w->bp = nbp;
	w->pc = ra;
	w->exact = 0;
	return 0;
}

static long gs_unwind_step(__u32 i, void *arg)
{
	struct gs_unwind_walk *w = arg;
	struct gs_cfi_mapping *m = NULL;
	struct gs_cfi_rule *r = NULL;
	__u64 cfa, ra, lookup, nbp;
	__u32 n = w->n;

	if (n >= GS_MAX_USER_FRAMES) {
		w->err = GS_UNWIND_DEPTH;
		return 1;
	}
	w->ips[n] = w->pc;
	w->n = n + 1;

	/* Return addresses point after the call: look up the call itself. */
	lookup = w->exact ? w->pc : w->pc - 1;
	if (w->proc) {
		m = gs_cfi_find_mapping(w->proc, lookup);
		if (!m || m->table_id == GS_CFI_TABLE_PENDING) {
			struct gs_cfi_miss_key k = { .tgid = w->tgid, .start = m ? m->start : 0 };
			__u64 now = bpf_ktime_get_ns();

			bpf_map_update_elem(&gs_cfi_miss, &k, &now, BPF_NOEXIST);
		} else if (m->table_id) {
			r = gs_cfi_find_rule(m->table_id, m->n_pages, lookup - m->bias);
		}
	}
	if (!r || r->cfa_type == GS_CFA_NONE)
		return gs_unwind_fp_step(w);

	w->cfi = 1;
	switch (r->cfa_type) {
	case GS_CFA_RSP:
		cfa = w->sp + (__s64)r->cfa_off;
		break;
	case GS_CFA_RBP:
		if (!w->bp_ok) {
			w->err = GS_UNWIND_BAD_RULE;
			return 1;
		}
		cfa = w->bp + (__s64)r->cfa_off;
		break;
	case GS_CFA_DEREF_RBP:
		if (!w->bp_ok) {
			w->err = GS_UNWIND_BAD_RULE;
			return 1;
		}
		if (gs_read_user_u64(&cfa, w->bp + (__s64)r->cfa_off)) {
			w->err = GS_UNWIND_READ_FAULT;
			return 1;
		}
		break;
	case GS_CFA_PLT:
		cfa = w->sp + (__s64)r->cfa_off + ((w->pc & 15) >= (__u64)r->rbp_off ? 8 : 0);
		break;
	case GS_CFA_SIGNAL: {
		/* rt_sigframe at sp: saved rsp at +cfa_off, rip right after it */
		__u64 nsp;

		if (gs_read_user_u64(&nsp, w->sp + (__s64)r->cfa_off) ||
		    gs_read_user_u64(&ra, w->sp + (__s64)r->cfa_off + 8) ||
		    gs_read_user_u64(&nbp, w->sp + (__s64)r->rbp_off)) {
			w->err = GS_UNWIND_READ_FAULT;
			return 1;
		}
		w->sp = nsp;
		w->bp = nbp;
		w->bp_ok = 1;
		w->pc = ra;
		w->exact = 1; /* the interrupted PC, not a return address */
		return ra == 0;
	}
	case GS_CFA_END:
		return 1;
	default: /* GS_CFA_EXPR */
		w->err = GS_UNWIND_BAD_RULE;
		return 1;
	}

	/* The caller's frame is above this one. */
	if (cfa <= w->sp) {
		w->err = GS_UNWIND_BAD_RULE;
		return 1;
	}
	if (gs_read_user_u64(&ra, cfa - 8)) {
		w->err = GS_UNWIND_READ_FAULT;
		return 1;
	}
	switch (r->rbp_type) {
	case GS_RBP_SAME:
		break;
	case GS_RBP_CFA:
		if (gs_read_user_u64(&nbp, cfa + (__s64)r->rbp_off)) {
			w->err = GS_UNWIND_READ_FAULT;
			return 1;
		}
		w->bp = nbp;
		w->bp_ok = 1;
		break;
	case GS_RBP_RBP:
		if (!w->bp_ok || gs_read_user_u64(&nbp, w->bp + (__s64)r->rbp_off)) {
			w->err = w->bp_ok ? GS_UNWIND_READ_FAULT : GS_UNWIND_BAD_RULE;
			return 1;
		}
		w->bp = nbp;
		break;
	default:
		w->bp_ok = 0;
		break;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact = 0;
	return ra == 0; /* 0 return address: outermost frame */
}

static __always_inline int gs_unwind_user(void *ctx, struct task_struct *task, __u32 tgid,
					  __u64 *ips, __u16 *err, __u16 *flags)
{
	struct gs_unwind_walk w = {};
	struct pt_regs *regs;
	long n;

	w.proc = gs_unwind_fp_only ? NULL : bpf_map_lookup_elem(&gs_cfi_procs, &tgid);
	if (!w.proc) {
		n = bpf_get_stack(ctx, ips, GS_MAX_USER_FRAMES * sizeof(__u64), BPF_F_USER_STACK);
		if (n < 0) {
			*err = GS_UNWIND_READ_FAULT;
			return 0;
		}
		n /= sizeof(__u64);
		*err = n >= GS_MAX_USER_FRAMES ? GS_UNWIND_DEPTH : GS_UNWIND_OK;
		if (n >= GS_MAX_USER_FRAMES)
			*flags |= GS_CPU_USER_TRUNC;
		if (n > GS_MAX_USER_FRAMES)
			n = GS_MAX_USER_FRAMES;
		return n;
	}

	/* User registers as saved on kernel entry: right whether the sample
	 * interrupted user or kernel mode (the perf regs are kernel regs then). */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs) {
		*err = GS_UNWIND_READ_FAULT;
		return 0;
	}
	w.pc = BPF_CORE_READ(regs, ip);
	w.sp = BPF_CORE_READ(regs, sp);
	w.bp = BPF_CORE_READ(regs, bp);
	if (!w.pc || (BPF_CORE_READ(regs, cs) & 3) != 3) {
		*err = GS_UNWIND_OK; /* kernel thread: no user stack */
		return 0;
	}
	w.ips = ips;
	w.tgid = tgid;
	w.exact = 1;
	w.bp_ok = 1;
	bpf_loop(GS_MAX_USER_FRAMES + 1, gs_unwind_step, &w, 0);
	*err = w.err;
	if (w.err == GS_UNWIND_DEPTH)
		*flags |= GS_CPU_USER_TRUNC;
	if (w.cfi)
		*flags |= GS_CPU_USER_CFI;
	/* w.n was written in the callback: the verifier does not know its
	 * range here, and callers size copies with it. */
	n = w.n;
	if (n > GS_MAX_USER_FRAMES)
		n = GS_MAX_USER_FRAMES;
	return n;
}

#endif
