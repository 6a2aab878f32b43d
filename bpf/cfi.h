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

#ifndef __VMLINUX_H__
/* ---- user space ------------------------------------------------------------
 * Lifecycle (the session, cli/):
 *   gs_sampler_open(...)                       loads the BPF object
 *   gs_cfi_open(bpf_object, &cfi, err, len)    finds the gs_cfi_* maps
 *   for every target process at first sight, after exec and on fork:
 *       gs_cfi_add_process(cfi, tgid)          (fork: gs_cfi_fork is cheaper)
 *   in the poll loop (every 100-250 ms):
 *       gs_cfi_refresh(cfi)                    builds tables BPF asked for (lazy
 *                                              mode) and re-reads maps of
 *                                              processes whose PCs hit unknown
 *                                              mappings (dlopen)
 * Eager (default): gs_cfi_add_process builds every mapped object's table
 * before it returns (torch: ~300 objects, seconds).  Lazy
 * (gs_cfi_set_lazy): objects get a table the first time a sample walks
 * through them; with the async builder (gs_cfi_set_async) every object a
 * maps read finds is queued at once instead (nothing waits for it), small
 * ones first and one a sample walked through ahead of those.  Until its
 * table is loaded an object's frames take a validated frame-pointer step
 * or a stack scan (bpf/unwind.bpf.h), so the first ms of a just-mapped
 * library have shorter or approximate stacks.
 *   on GS_PROC_EXIT: gs_cfi_remove_process(cfi, tgid)
 *   gs_cfi_stats(cfi, &st) for the closing figures; gs_cfi_close(cfi).
 * Tables are kept per object of proc/'s ELF cache (build-id, else
 * dev:inode), so every process and fork child mapping one library shares
 * one table.
 * Not thread-safe: call from the session thread (async mode keeps its
 * thread to itself). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bpf_object;
struct gs_cfi;

/* One object's rows, built in user space (also used by the unit tests). */
struct gs_cfi_table {
	struct gs_cfi_row *rows; /* sorted by pc, merged */
	uint32_t n_rows;
	struct gs_cfi_rule *rules; /* local rule ids used by rows (before global dedupe) */
	uint32_t n_rules;
	uint32_t n_fdes;
	uint32_t n_expr;          /* rows marked GS_CFA_EXPR */
	uint32_t n_plt, n_signal; /* rows marked PLT / SIGNAL */
	uint32_t truncated;       /* 1: a bound (rows, time) was hit: rows cover the
				    * FDEs read so far, the rest falls back to frame
				    * pointers */
};

/* Build rows from the .eh_frame of the ELF file at path (or of fd when
 * fd >= 0; path then only names it in errors).  The file is read with
 * pread (a file that shrinks meanwhile is an error, never SIGBUS) and
 * bounded: .eh_frame above 256 MiB is -EFBIG; past 8M rows or 30 s the
 * table stops there (t->truncated).  -ENOENT: no .eh_frame; -EINVAL: not an
 * x86-64 ELF; -ENOMEM. */
int gs_cfi_table_build(const char *path, int fd, struct gs_cfi_table *t);
/* The same table through libdw's dwarf_cfi_addrframe, one call per row
 * (quadratic in an FDE's rows): the reference the linear builder is tested
 * against (tests/unit/test_cfi.c), not for use on target files. */
int gs_cfi_table_build_libdw(const char *path, int fd, struct gs_cfi_table *t);
void gs_cfi_table_free(struct gs_cfi_table *t);
/* Row in effect at ELF address pc (NULL if none or a GS_CFA_NONE gap). */
const struct gs_cfi_rule *gs_cfi_table_lookup(const struct gs_cfi_table *t, uint64_t pc);

struct gs_cfi_stats {
	uint32_t tables;      /* distinct objects loaded */
	uint32_t procs;       /* processes in gs_cfi_procs */
	uint32_t rules;       /* distinct rules */
	uint64_t rows;        /* rows over all tables */
	uint64_t bpf_bytes;   /* kernel memory of the tables (rows + rules) */
	uint64_t build_ns;    /* wall time spent building tables */
	uint32_t no_eh_frame; /* objects without usable CFI (frame pointers) */
	uint32_t errors;      /* objects that failed to open or load */
	uint32_t refreshes;   /* process maps re-read after misses */
	uint32_t truncated;   /* tables cut at their bound (rows, time) */
	uint32_t over_budget; /* objects refused a table: bpf_bytes would pass budget */
	uint64_t budget;      /* gs_cfi_set_budget's */
};

/* Kernel memory of the CFI tables' BPF maps (rows maps + the rules array),
 * all objects together: an object whose table would pass it gets none
 * (frame pointers there), counted in over_budget and named in the profile.
 * Each object's page index spans its rows (first to last pc), not 0 to its
 * highest address, so a real object costs its rows plus 8 B per 4 KiB of
 * code. */
#define GS_CFI_BPF_BUDGET (512ull << 20)
struct gs_cfi;
void gs_cfi_set_budget(struct gs_cfi *cfi, uint64_t bytes);

/* Async building (the session): tables are built by a thread of their own
 * (signals blocked; scheduling set by gs_cfi_builder_sched), so a huge or crafted object never blocks the
 * caller's loop.  gs_cfi_add_process / gs_cfi_refresh then only queue work;
 * mappings stay GS_CFI_TABLE_PENDING until gs_cfi_refresh finds the table
 * built, loads it and republishes the processes that wait for it.
 * gs_cfi_build_process waits for the queue to drain.  0 or -errno. */
int gs_cfi_set_async(struct gs_cfi *cfi);
/* Scheduling of the async thread: SCHED_RR priority 1 (rt) or SCHED_OTHER,
 * and a nice value (the session's choice: cli/attach.c). */
void gs_cfi_builder_sched(struct gs_cfi *cfi, bool rt, int nice);
struct gs_cfi_progress {
	uint32_t queued;   /* objects queued over the run */
	uint32_t pending;  /* of those, not yet loaded by gs_cfi_refresh */
	uint64_t rows;     /* rows so far of the object being built */
	char current[160]; /* the object being built now, "" when idle */
};
void gs_cfi_progress(struct gs_cfi *cfi, struct gs_cfi_progress *p);

/* Find the gs_cfi_* maps in a loaded BPF object (the sampler's:
 * gs_sampler_skel(s)->obj).  err gets a one-line reason. */
int gs_cfi_open(struct bpf_object *obj, struct gs_cfi **out, char *err, size_t errlen);
/* Open target files through elf (proc/proc.h; a reference is taken)
 * instead of the cache of its own gs_cfi_open made: the symbolizer's
 * (gs_sym_elf_cache), so each library is opened once, one fd for both.
 * Before the first process is added: -EBUSY after. */
struct gs_elf_cache;
int gs_cfi_set_elf_cache(struct gs_cfi *cfi, struct gs_elf_cache *elf);
/* Read /proc/tgid/maps, build or reuse tables, write gs_cfi_procs[tgid].
 * -ESRCH if the process is gone.  Objects without CFI get table 0. */
int gs_cfi_add_process(struct gs_cfi *cfi, uint32_t tgid);
/* Same, but builds every table now whatever the lazy setting: for a
 * process whose next stacks must be complete at once (a GPU process right
 * before its agent arms: launch stacks run through the agent, libcupti and
 * libcuda). */
int gs_cfi_build_process(struct gs_cfi *cfi, uint32_t tgid);
/* child shares parent's mappings (fork without exec); falls back to
 * gs_cfi_add_process when the parent is unknown. */
int gs_cfi_fork(struct gs_cfi *cfi, uint32_t parent, uint32_t child);
void gs_cfi_remove_process(struct gs_cfi *cfi, uint32_t tgid);
/* Serve gs_cfi_miss: build the tables BPF asked for; re-read the maps of
 * processes with PCs outside every known mapping (at most once per process
 * per 100 ms).  Returns the number of processes updated or <0. */
int gs_cfi_refresh(struct gs_cfi *cfi);
void gs_cfi_stats(struct gs_cfi *cfi, struct gs_cfi_stats *st);
/* Async: whether tables are queued, being built or built but not yet
 * loaded (gs_cfi_refresh loads them): the session then calls
 * gs_cfi_refresh every GS_CFI_POLL_MS instead of at its tick. */
bool gs_cfi_busy(struct gs_cfi *cfi);
#define GS_CFI_POLL_MS 5
/* Build tables on first use instead of in gs_cfi_add_process. */
void gs_cfi_set_lazy(struct gs_cfi *cfi, bool on);
/* Verbose progress (one line per table built) to stderr. */
void gs_cfi_set_verbose(struct gs_cfi *cfi, bool on);
void gs_cfi_close(struct gs_cfi *cfi);
/* The CFI tables as a handler of the process table (proc/proc.h): attach
 * (first sight, exec) gs_cfi_add_process, fork gs_cfi_fork, detach at
 * exit gs_cfi_remove_process, tick gs_cfi_refresh. */
struct gs_proc_handler;
void gs_cfi_proc_handler(struct gs_cfi *cfi, struct gs_proc_handler *h);
/* Keep per-process state in the slots of t (proc/proc.h), id being the CFI
 * handler's registration id, instead of a table of its own: before the
 * first process (-EBUSY after); t must outlive cfi's use of processes. */
struct gs_proc_table;
int gs_cfi_bind(struct gs_cfi *cfi, struct gs_proc_table *t, int id);
#endif

#endif
