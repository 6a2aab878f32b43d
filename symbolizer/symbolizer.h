/* SPDX-License-Identifier: MIT */
/*
 * Native and kernel symbolization into the profile model.
 *
 * Processes: gs_sym_add_process() snapshots /proc/PID/maps at first sight and
 * on exec, and opens every file-backed executable mapping right away (through
 * /proc/PID/map_files/START-END, else /proc/PID/root/PATH), so a process that
 * exits before the end of the run still symbolizes.  Modules (ELF + DWARF via
 * libdwfl) are cached by build-id (or dev:inode when there is none) and shared
 * by every process that maps them.  A fork child shares its parent's snapshot
 * until it execs.  Addresses outside any snapshot trigger one re-read of the
 * maps while the process lives (dlopen after attach).
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
 *  - Maps re-read: a miss in a live process re-reads its maps and perf map
 *    at most once a second; mappings that disappeared (dlclose) are kept.
 *  - gs_sym_has_process: true once a snapshot exists (also after exit).  A
 *    process whose maps cannot be read is remembered without a snapshot; its
 *    addresses become "[unknown]" without re-reading /proc each time.
 *  - Not thread-safe: one thread owns a gs_symbolizer.
 */
#ifndef GS_SYMBOLIZER_H
#define GS_SYMBOLIZER_H

#include <stdbool.h>
#include <stdint.h>
#include "gpusample/profile.h"
#include "gpusample/records.h"

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

/* Snapshot maps of tgid (first sight, or again after exec).  -ESRCH if the
 * process is gone. */
int gs_sym_add_process(struct gs_symbolizer *s, uint32_t tgid);
/* child shares parent's snapshot (same address space after fork). */
int gs_sym_fork(struct gs_symbolizer *s, uint32_t parent, uint32_t child);
int gs_sym_exec(struct gs_symbolizer *s, uint32_t tgid);
/* Re-read tgid's maps now (same image: mappings gone since stay known, so
 * earlier samples still resolve), e.g. once libraries are known to have
 * been loaded.  Misses re-read on their own, at most once a second. */
int gs_sym_refresh(struct gs_symbolizer *s, uint32_t tgid);
void gs_sym_exit(struct gs_symbolizer *s, uint32_t tgid);
bool gs_sym_has_process(struct gs_symbolizer *s, uint32_t tgid);
/* The symbolizer as a handler of the process table (proc/proc.h): attach
 * gs_sym_add_process at first sight and gs_sym_exec after an exec, fork
 * gs_sym_fork (gs_sym_add_process for a parent it has no snapshot of),
 * detach at exit gs_sym_exit, report the note on libraries left without
 * an fd by the ELF cache's bound. */
struct gs_proc_handler;
void gs_sym_proc_handler(struct gs_symbolizer *s, struct gs_proc_handler *h);
/* Keep the snapshots in the slots of t (proc/proc.h), id being the
 * handler's registration id, instead of a table of its own: before the
 * first process (-EBUSY after); t must outlive every gs_sym_* call but
 * gs_sym_free. */
struct gs_proc_table;
int gs_sym_bind(struct gs_symbolizer *s, struct gs_proc_table *t, int id);

/* Location id for a user address of tgid.  is_return_addr: the address is a
 * return address (every frame but the leaf), so look up addr-1. */
uint32_t gs_sym_native(struct gs_symbolizer *s, uint32_t tgid, uint64_t addr, bool is_return_addr);
/* Location id for a kernel text address. */
uint32_t gs_sym_kernel(struct gs_symbolizer *s, uint64_t addr);

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

/* One recorded CPU stack (the frame runs of a struct gs_cpu_sample, leaf
 * first: records.h) of process tgid, symbolized (symbolizer/cpustack.c):
 * kernel frames first, then the native user frames merged with the Python
 * frames (gs_py_merge, python.h; py NULL or n_python 0: native only), then
 * truncated_loc when flags has GS_CPU_USER_TRUNC (0: none).  The profiling
 * session and `gpusample dump` both take their stacks through here.
 * Python frames' code objects must have been noted (gs_py_note_frames).
 * Writes out[0..return) and returns the count, or -ENOSPC when cap is too
 * small (n_kernel + n_user + n_python + 2 always fits). */
struct gs_py;
struct gs_cpu_stack {
	uint32_t tgid;
	uint16_t flags; /* GS_CPU_* */
	const __u64 *kernel, *user;
	uint32_t n_kernel, n_user;
	const struct gs_py_frame *py;
	uint32_t n_python;
};
int gs_sym_cpu_stack(struct gs_symbolizer *sym, struct gs_py *py, const struct gs_cpu_stack *r,
		     bool interp_frames, uint32_t truncated_loc, uint32_t *out, uint32_t cap);

/* Demangle a C++ (Itanium) name; returns malloc'ed string or NULL (not
 * "_Z..." or not valid).  A "@@VERSION" suffix is kept after the result. */
char *gs_demangle(const char *mangled);

/* Thread roles (symbolizer/thread_roles.c, one table): label every CPU and
 * off-CPU sample (cuda_device < 0) of a thread with GS_SL_THREAD_ROLE, one
 * of gs_thread_role_name[].  A thread's role comes from its frames: per
 * sample the root-most frame that matches a row of the table, the role with
 * most such samples winning; the thread whose tid is its process's tgid is
 * "main" unless it runs the DataLoader worker loop; a thread matching no row
 * falls back to its name (comm), then "other".  Returns 0 or -ENOMEM. */
enum gs_thread_role {
	GS_TR_OTHER = 0,
	GS_TR_MAIN,
	GS_TR_DATALOADER_WORKER,
	GS_TR_PIN_MEMORY,
	GS_TR_QUEUE_FEEDER,
	GS_TR_AUTOGRAD,
	GS_TR_INTRA_OP,
	GS_TR_COLLECTIVE,
	GS_NTHREAD_ROLES
};
extern const char *const gs_thread_role_name[GS_NTHREAD_ROLES];
int gs_thread_roles(struct gs_profile *p);

#endif
