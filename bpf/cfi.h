/* SPDX-License-Identifier: MIT */
/*
 * CFI unwind tables: user space turns each mapped ELF object's .eh_frame into
 * compact rows and loads them into the BPF maps that bpf/unwind.bpf.h walks.
 *
 * Wire layout (shared with BPF; includable from BPF C after vmlinux.h and
 * from user space after gpusample/records.h):
 *
 *   gs_cfi_procs   HASH tgid -> struct gs_cfi_proc: the process's executable
 *                  file mappings, sorted by start, each with the table id of
 *                  its ELF object and the load bias (runtime - ELF vaddr).
 *   gs_cfi_tables  ARRAY_OF_MAPS table id -> inner ARRAY of 8-byte entries:
 *                  first a page index, then struct gs_cfi_row sorted by pc
 *                  (ELF vaddr, 32 bit).  Page entry i (struct gs_cfi_page,
 *                  pages of 2^GS_CFI_PAGE_SHIFT bytes of vaddr from 0) gives
 *                  the row range that can be in effect inside that page, so
 *                  BPF binary-searches ~5 rows instead of all of them.
 *                  The entries are grouped GS_CFI_CHUNK to an array element
 *                  (entry e is in element e / GS_CFI_CHUNK; the flat,
 *                  mmap'ed layout is the same): a lookup in an inner map is
 *                  a helper call the verifier cannot inline, so a row search
 *                  pays one per chunk it touches (mostly one) instead of one
 *                  per step.  Inner maps are created per table with exactly
 *                  the chunks it needs (BPF_F_INNER_MAP), so their size is
 *                  chosen at run time.
 *   gs_cfi_rules   ARRAY rule id -> struct gs_cfi_rule, shared by all tables
 *                  (an object has a few hundred distinct rules; rows stay 8 B).
 *   gs_cfi_miss    HASH struct gs_cfi_miss_key -> ktime: a PC fell in a mapping
 *                  whose table is not built yet (lazy mode: start = that
 *                  mapping's start) or outside every known mapping (start =
 *                  0: dlopen, re-read the maps).  User space (gs_cfi_refresh)
 *                  builds what was asked for and rewrites gs_cfi_procs.
 *
 * A row says: for pc in [row.pc, next row.pc) the caller's frame is found by
 * rule row.rule.  Return address at CFA-8 always (rows whose CFI says
 * otherwise are GS_CFA_EXPR).  A row with GS_CFA_NONE closes a gap between
 * FDEs: no CFI there, BPF falls back to frame pointers.
 */
#ifndef GS_BPF_CFI_H
#define GS_BPF_CFI_H

enum gs_cfa_type {
	GS_CFA_NONE = 0,      /* no CFI covers this pc: frame-pointer fallback */
	GS_CFA_RSP = 1,       /* CFA = RSP + cfa_off */
	GS_CFA_RBP = 2,       /* CFA = RBP + cfa_off */
	GS_CFA_PLT = 3,       /* CFA = RSP + cfa_off + ((RIP & 15) >= rbp_off ? 8 : 0), the
			    * lazy-binding PLT expression emitted by ld; rbp_off holds the
			    * threshold (11 for .plt, 10 for some variants) */
	GS_CFA_SIGNAL = 4,    /* signal trampoline (__restore_rt): registers from the
			    * ucontext at RSP (struct rt_sigframe minus pretcode) */
	GS_CFA_END = 5,       /* return address undefined: outermost frame (_start, clone) */
	GS_CFA_EXPR = 6,      /* any other DWARF expression or register rule: not followed */
	GS_CFA_DEREF_RBP = 7, /* CFA = *(RBP + cfa_off): GCC's stack-realignment (DRAP)
			       * expression DW_OP_breg6 off; DW_OP_deref (AVX kernels) */
};

enum gs_rbp_type {
	GS_RBP_SAME = 0, /* caller's RBP = this frame's RBP (same value / unmentioned) */
	GS_RBP_CFA = 1,  /* caller's RBP saved at CFA + rbp_off */
	GS_RBP_LOST = 2, /* undefined or an expression: unknown in the caller */
	GS_RBP_RBP = 3,  /* caller's RBP saved at RBP + rbp_off (DW_CFA_expression
			    * r6 (DW_OP_breg6 off), with GS_CFA_DEREF_RBP) */
};

struct gs_cfi_rule {
	__s32 cfa_off;
	__s16 rbp_off;
	__u8 cfa_type; /* enum gs_cfa_type */
	__u8 rbp_type; /* enum gs_rbp_type */
};

struct gs_cfi_row {
	__u32 pc;   /* ELF virtual address (st_value space) where the row starts */
	__u32 rule; /* index into gs_cfi_rules */
};

/* ---- the rule semantics, once --------------------------------------------
 * What a rule says about the caller's frame, as pure arithmetic on this
 * frame's registers (no reads): the BPF walk (unwind.bpf.h
 * gs_unwind_cfi_step) and the user-space walk of `gpusample dump`
 * (dump/walk.c) both take their CFA and RBP from here and only do the
 * reads themselves.  The return address is at CFA - 8 for every row. */
#ifdef __VMLINUX_H__
#define GS_CFI_INLINE static __always_inline
#else
#define GS_CFI_INLINE static inline __attribute__((always_inline))
#endif
enum gs_cfi_how {
	GS_CFI_VALUE = 0, /* the value is *at itself */
	GS_CFI_LOAD = 1,  /* the value is the stack word at *at */
	GS_CFI_SIG = 2,   /* CFA: a signal frame (GS_CFA_SIGNAL: registers from the ucontext) */
	GS_CFI_STOP = 3,  /* CFA: outermost frame; RBP: unknown in the caller */
	GS_CFI_BAD = 4,   /* needs this frame's RBP, not known; or a rule not followed */
};

/* The CFA of the frame at pc (exact or return address - 1 makes no
 * difference here), stack pointer sp, frame pointer bp (bp_ok: known). */
GS_CFI_INLINE int gs_cfi_cfa(const struct gs_cfi_rule *r, __u64 pc, __u64 sp, __u64 bp, int bp_ok,
			     __u64 *at)
{
	switch (r->cfa_type) {
	case GS_CFA_RSP:
		*at = sp + (__s64)r->cfa_off;
		return GS_CFI_VALUE;
	case GS_CFA_RBP:
		*at = bp + (__s64)r->cfa_off;
		return bp_ok ? GS_CFI_VALUE : GS_CFI_BAD;
	case GS_CFA_DEREF_RBP:
		*at = bp + (__s64)r->cfa_off;
		return bp_ok ? GS_CFI_LOAD : GS_CFI_BAD;
	case GS_CFA_PLT:
		*at = sp + (__s64)r->cfa_off + ((pc & 15) >= (__u64)r->rbp_off ? 8 : 0);
		return GS_CFI_VALUE;
	case GS_CFA_SIGNAL:
		return GS_CFI_SIG;
	case GS_CFA_END:
		return GS_CFI_STOP;
	default: /* GS_CFA_EXPR */
		return GS_CFI_BAD;
	}
}

/* The caller's RBP once the CFA is known: GS_CFI_VALUE (*at = bp,
 * unchanged), GS_CFI_LOAD (saved at *at), GS_CFI_STOP (unknown in the
 * caller) or GS_CFI_BAD (saved relative to an RBP not known). */
GS_CFI_INLINE int gs_cfi_rbp(const struct gs_cfi_rule *r, __u64 cfa, __u64 bp, int bp_ok, __u64 *at)
{
	switch (r->rbp_type) {
	case GS_RBP_SAME:
		*at = bp;
		return GS_CFI_VALUE;
	case GS_RBP_CFA:
		*at = cfa + (__s64)r->rbp_off;
		return GS_CFI_LOAD;
	case GS_RBP_RBP:
		*at = bp + (__s64)r->rbp_off;
		return bp_ok ? GS_CFI_LOAD : GS_CFI_BAD;
	default:
		*at = bp;
		return GS_CFI_STOP;
	}
}

#define GS_CFI_PAGE_SHIFT 12
/* 8-byte entries (page index, rows) per element of a rows map: one 4 KiB
 * element, so a page's rows (a handful to a few hundred) mostly lie in one. */
#define GS_CFI_CHUNK_SHIFT 9
#define GS_CFI_CHUNK       (1u << GS_CFI_CHUNK_SHIFT)
struct gs_cfi_page {
	__u32 lo; /* array index of the row in effect at the page start */
	__u32 hi; /* one past the last row that starts inside the page */
};

/* One executable file mapping of a process. */
#define GS_CFI_TABLE_PENDING 0xffffffffu /* table_id: not built yet (lazy mode) */
#define GS_CFI_TABLE_ANON \
	0xfffffffeu /* table_id: anonymous executable memory (JIT
					  * code: neither a table nor, often, a frame
					  * pointer): validated FP step or stack scan */

struct gs_cfi_mapping {
	__u64 start, end; /* runtime [start, end) */
	__u64 bias;       /* runtime address - ELF vaddr */
	__u32 table_id;   /* gs_cfi_tables index; 0 = no table (frame pointers);
			   * GS_CFI_TABLE_PENDING = ask user space for it;
			   * GS_CFI_TABLE_ANON = JIT code (see unwind.bpf.h) */
	__u32 n_pages;    /* page-index entries at the head of that table */
};

struct gs_cfi_miss_key {
	__u32 tgid;
	__u32 pad;
	__u64 start; /* mapping start, 0 = PC outside every known mapping */
};

#define GS_CFI_MAX_MAPPINGS 1024  /* executable mappings per process (torch: ~400) */
#define GS_CFI_MAX_TABLES   4096  /* distinct ELF objects over the run */
#define GS_CFI_MAX_RULES    65536 /* distinct rules over the run */
#define GS_CFI_MAX_PROCS    8192
#define GS_CFI_ROW_SEARCH   26 /* binary-search steps: up to 2^26 rows per object */
#define GS_CFI_MAP_SEARCH   11 /* binary-search steps over GS_CFI_MAX_MAPPINGS */

struct gs_cfi_proc {
	__u32 n;   /* valid entries of m, sorted by start, non-overlapping */
	__u32 gen; /* names this content of m (never 0 from user space; a new
		    * value at every rewrite, a fork child's copy keeps its
		    * parent's): tags the BPF side's per-CPU cache of PC -> rule
		    * (unwind.bpf.h), so a rewrite (exec, dlopen, a table built)
		    * retires what was cached for the old layout; 0 = no cache */
	struct gs_cfi_mapping m[GS_CFI_MAX_MAPPINGS];
};


#endif
