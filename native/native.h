/* SPDX-License-Identifier: MIT */
/*
 * Native and kernel symbolization into the profile model.
 *
 * Processes: gs_sym_add_process() snapshots proc/'s maps of the process (the
 * process table's, read at first sight and on exec; read then when the table
 * has none) and opens every file-backed executable mapping right away (through
 * /proc/PID/map_files/START-END, else /proc/PID/root/PATH), so a process that
 * exits before the end of the run still symbolizes.  Modules (ELF + DWARF via
 * libdwfl) are cached by build-id (or dev:inode when there is none) and shared
 * by every process that maps them.  A fork child shares its parent's snapshot
 * until it execs.  An address outside the snapshot asks proc/ to re-read the
 * maps while the process lives (dlopen after attach: GS_MAPS_ADDR_MISS).
 *
 * Resolution: each distinct (process snapshot, address) is resolved once and
 * turned into one pprof Location (inline chain as several Lines, callee first)
 * in the profile passed to gs_sym_new(); the location id is cached.
 * Functions: demangled name, mangled name as system_name when it differs,
 * DWARF file and line when present.  Perf maps (/tmp/perf-NSPID.map inside the
 * target's mount namespace) cover JIT code.  Kernel addresses use kallsyms.
 *
 * Errors: 0 or a negative errno; an address that cannot be resolved still
 * gets a location ("[unknown]" or "libfoo.so+0x1234"), never an error.
 *
 * Details (implementation in symbolizer.c, maps.c, native.c, kernel.c,
 * perfmap.c, demangle.c):
 *  - Mappings: one gs_mapping per (file, load bias), shared by every process
 *    that maps the file at the same address (fork children, non-PIE
 *    executables), so a location's runtime address always lies in its
 *    mapping's [start, limit) as pprof expects; pprof merges the per-bias
 *    mappings of one file by build_id.  start/limit/offset are the file's
 *    executable segment.  has_functions / has_filenames / has_lines /
 *    has_inlines are set from what the locations in it actually carry.
 *  - Location address: the runtime address looked up, i.e. addr - 1 for
 *    return addresses (the call instruction), addr for the leaf.
 *  - Fallback names: "libfoo.so+0x1234" where 0x1234 is the ELF virtual
 *    address (what `addr2line -e libfoo.so 0x1234` takes); "[vdso]" etc. for
 *    kernel-provided mappings; "[unknown]" elsewhere (mapping id 0).  Perf-map
 *    (JIT) locations have mapping id 0.
 *  - Kernel: one "[kernel.kallsyms]" mapping for vmlinux and one "[module]"
 *    mapping per kernel module, as perf names them.
 *  - Maps re-read: a miss in a live process asks proc/ (GS_MAPS_ADDR_MISS: at
 *    most once a second, when the kernel's mapping there differs) and takes
 *    proc/'s snapshot when it differs there from ours (another handler's
 *    re-read may have found it already); its perf map is read again at most
 *    once a second; mappings that disappeared (dlclose) are kept.  A
 *    GS_MAPS_NOW re-read (maps_changed) is taken at once.
 *  - gs_sym_has_process: true once a snapshot exists (also after exit).  A
 *    process whose maps cannot be read is remembered without a snapshot; its
 *    addresses become "[unknown]" without re-reading /proc each time.
 *  - Not thread-safe: one thread owns a gs_symbolizer.
 */
#ifndef GS_NATIVE_H
#define GS_NATIVE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "gpusample/profile.h"
#include "gpusample/records.h"
#include "bpf/cfi.h" /* the tables' wire layout */

struct gs_symbolizer;

struct gs_symbolizer *gs_sym_new(struct gs_profile *p);
void gs_sym_free(struct gs_symbolizer *s);
/* The profile given to gs_sym_new. */
struct gs_profile *gs_sym_profile(struct gs_symbolizer *s);
/* proc/'s cache of ELF objects this symbolizer opens files through (one fd
 * per distinct object, bounded as proc/proc.h says): hand it to the CFI
 * builder (gs_cfi_set_elf_cache) so each file is opened once. */
struct gs_elf_cache;
struct gs_elf_cache *gs_sym_elf_cache(struct gs_symbolizer *s);

/* Snapshot maps of tgid (first sight: proc/'s snapshot; exec: read again).
 * -ESRCH if the process is gone. */
int gs_sym_add_process(struct gs_symbolizer *s, uint32_t tgid);
/* child shares parent's snapshot (same address space after fork). */
int gs_sym_fork(struct gs_symbolizer *s, uint32_t parent, uint32_t child);
int gs_sym_exec(struct gs_symbolizer *s, uint32_t tgid);
void gs_sym_exit(struct gs_symbolizer *s, uint32_t tgid);
/* An exited tgid whose stacks are all symbolized: its snapshot is dropped
 * (the last reference frees it and proc/'s maps it holds); its addresses
 * resolve to "[unknown]" from now on.  Alive or unknown: nothing. */
void gs_sym_retire(struct gs_symbolizer *s, uint32_t tgid);
bool gs_sym_has_process(struct gs_symbolizer *s, uint32_t tgid);
/* The symbolizer as a handler of the process table (proc/proc.h): attach
 * a snapshot of the table's maps at first sight and after an exec, fork
 * gs_sym_fork (gs_sym_add_process for a parent it has no snapshot of),
 * detach at exit gs_sym_exit, retire gs_sym_retire, maps_changed as "Maps
 * re-read" above, report
 * the note on libraries left without an fd by the ELF cache's bound. */
struct gs_proc_handler;
void gs_sym_proc_handler(struct gs_symbolizer *s, struct gs_proc_handler *h);
/* The same notes as that handler's report (libraries without an fd, ELF
 * headers skipped, perf maps cut, debug files refused by cause, debuginfod)
 * added to prof, for a caller that runs no process table (dump). */
void gs_sym_report(struct gs_symbolizer *s, struct gs_profile *prof);
/* Keep the snapshots in the slots of t (proc/proc.h), id being the
 * handler's registration id, instead of a table of its own: before the
 * first process (-EBUSY after); t must outlive every gs_sym_* call but
 * gs_sym_free. */
struct gs_proc_table;
int gs_sym_bind(struct gs_symbolizer *s, struct gs_proc_table *t, int id);

/* Location id for a user address of tgid.  is_return_addr: the address is a
 * return address (every frame but the leaf), so look up addr-1. */
uint32_t gs_sym_native(struct gs_symbolizer *s, uint32_t tgid, uint64_t addr, bool is_return_addr);
/* glibc 2.34+'s entry chain is _start -> __libc_start_main ->
 * __libc_start_call_main -> main, the third static: a stripped libc (Debian
 * sid's) leaves it "libc.so.6+0x29f49".  Given the location of its caller
 * (the next frame towards the root), returns a location of the same
 * address named __libc_start_call_main when loc is that unnamed libc frame
 * under __libc_start_main; else loc itself. */
uint32_t gs_sym_entry_frame(struct gs_symbolizer *s, uint32_t loc, uint32_t caller);
/* Location id for a kernel text address.  Kernel addresses stay out of the
 * profile unless asked for (as kernel.kptr_restrict keeps them out of what
 * users read): one location per kernel function, at address 0, its mapping
 * at 0 too.  GS_KERNEL_ADDRESSES=1 in the environment (read by gs_sym_new)
 * or gs_sym_keep_kernel_addresses(s, true) keeps them: one location per
 * address, the mapping's kallsyms range. */
uint32_t gs_sym_kernel(struct gs_symbolizer *s, uint64_t addr);
void gs_sym_keep_kernel_addresses(struct gs_symbolizer *s, bool keep);

/* File backing addr in tgid's snapshot (NULL if none), and the mapping's
 * start/offset; used by Python discovery and the CFI table builder.
 * Returns 0, -ESRCH (process unknown and gone) or -ENOENT (addr is not in a
 * file mapping, also after one re-read).  Works for data segments too
 * (load_bias valid there).  Strings live as long as the snapshot: copy
 * them before the next gs_sym_* call on that process. */
struct gs_sym_mapping_info {
	const char *path;      /* path as in /proc/PID/maps (may end " (deleted)") */
	const char *open_path; /* path that opens the file from this process:
				 * "/proc/self/fd/N" of the symbolizer's own fd,
				 * valid until gs_sym_free even after the target
				 * exits or the file is deleted; NULL if the file
				 * could not be opened */
	uint64_t start, end, offset;
	uint64_t load_bias; /* runtime address - ELF vaddr */
	char build_id[41];  /* hex, "" if none */
};
int gs_sym_mapping_for(struct gs_symbolizer *s, uint32_t tgid, uint64_t addr,
		       struct gs_sym_mapping_info *out);
/* Call fn for each file-backed executable mapping of tgid's snapshot, in
 * address order; a nonzero return from fn stops and is returned. */
int gs_sym_foreach_mapping(struct gs_symbolizer *s, uint32_t tgid,
			   int (*fn)(void *ctx, const struct gs_sym_mapping_info *m), void *ctx);

/* Stop requests for long reads of debug files (a .gnu_debuglink CRC):
 * count is the number of SIGINT/SIGTERM the session got; one arriving
 * after this call (the count grown past its value now) ends the CRC under
 * way and every later one, so the profile is written with what was named
 * so far.  Called again, it watches from then on.  NULL: none. */
void gs_sym_watch_stop(const volatile sig_atomic_t *count);

/* Demangle a C++ (Itanium) name; returns malloc'ed string or NULL (not
 * "_Z..." or not valid).  A "@@VERSION" suffix is kept after the result. */
char *gs_demangle(const char *mangled);

/* ---- CFI unwind tables (native/cfi.c, cfi_rows.c; wire layout: bpf/cfi.h) ---- */
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
 * A GS_MAPS_BUILD_ALL re-read waits for the queue to drain.  0 or -errno. */
int gs_cfi_set_async(struct gs_cfi *cfi);
/* Scheduling of the async thread: SCHED_RR priority 1 (rt) or SCHED_OTHER,
 * and a nice value (the session's choice: session/attach.c). */
void gs_cfi_builder_sched(struct gs_cfi *cfi, bool rt, int nice);
struct gs_cfi_progress {
	uint32_t queued;   /* objects queued over the run */
	uint32_t pending;  /* of those, not yet loaded by gs_cfi_refresh */
	uint64_t rows;     /* rows so far of the object being built */
	char current[160]; /* the object being built now, else one built and
			    * waiting to be loaded (loading), "" when idle */
	bool loading;
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
/* Build or reuse the tables of tgid's mappings in proc/'s snapshot (read
 * now, through gs_proc_maps_reread, when there is none), write
 * gs_cfi_procs[tgid].  -ESRCH if the process is gone.  Objects without CFI
 * get table 0. */
int gs_cfi_add_process(struct gs_cfi *cfi, uint32_t tgid);
/* child shares parent's mappings (fork without exec); falls back to
 * gs_cfi_add_process when the parent is unknown. */
int gs_cfi_fork(struct gs_cfi *cfi, uint32_t parent, uint32_t child);
void gs_cfi_remove_process(struct gs_cfi *cfi, uint32_t tgid);
/* Serve gs_cfi_miss: build the tables BPF asked for; have proc/ re-read
 * the maps of processes with PCs outside every known mapping
 * (GS_MAPS_CODE_MISS: proc/'s back-off).  Returns the number of processes
 * updated or <0. */
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
 * (first sight, exec) publishes the table's snapshot, fork gs_cfi_fork,
 * detach at exit gs_cfi_remove_process, maps_changed publishes the new
 * snapshot (GS_MAPS_BUILD_ALL: every table built now, whatever the lazy
 * setting, and waited for: a GPU process right before its agent arms, whose
 * launch stacks run through the agent, libcupti and libcuda), tick
 * gs_cfi_refresh. */
struct gs_proc_handler;
void gs_cfi_proc_handler(struct gs_cfi *cfi, struct gs_proc_handler *h);
/* Keep per-process state in the slots of t (proc/proc.h), id being the CFI
 * handler's registration id, instead of a table of its own: before the
 * first process (-EBUSY after); t must outlive cfi's use of processes. */
struct gs_proc_table;
int gs_cfi_bind(struct gs_cfi *cfi, struct gs_proc_table *t, int id);

#endif
