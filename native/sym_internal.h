/* SPDX-License-Identifier: MIT */
/*
 * Private to symbolizer/{symbolizer,maps,native,kernel,perfmap,demangle}.c
 * and tests/unit/test_symbolizer.c.  Not a public contract.
 *
 * Shapes:
 *  - gs_sym_module: one ELF file (shared by every process mapping it), kept
 *    open (fd + libdwfl Dwfl) until gs_sym_free so that processes that exit or
 *    files that are deleted still symbolize.  Keyed by build-id, else dev:inode.
 *  - gs_sym_snapshot: one /proc/PID/maps reading (+ its perf map), refcounted
 *    because fork children share their parent's until they exec.
 */
#ifndef GS_SYM_INTERNAL_H
#define GS_SYM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <elfutils/libdwfl.h>
#include "gpusample/profile.h"
#include "proc/proc.h"
#include "util/vec.h"

/* ---- modules (native.c) ------------------------------------------------ */

struct gs_sym_bias_map {
	uint64_t bias;
	uint32_t mapping_id;
};

#define GS_SYM_MAX_GROUPS 64
struct gs_sym_creds {
	bool known;
	uid_t uid;
	gid_t gid;
	gid_t groups[GS_SYM_MAX_GROUPS];
	int n_groups;
};

struct gs_sym_module {
	struct gs_elf_obj *obj; /* proc/'s, shared with the CFI builder */
	const char *key;        /* obj's: build-id hex or "dev:inode" */
	char build_id[41];      /* hex, "" if none */
	char *path;             /* path as first seen in maps */
	char *file_name;        /* where libdwfl looks for .gnu_debuglink files */
	const char *base;       /* basename of path, points into path */
	char open_path[40];     /* "/proc/self/fd/N" while the symbolizer lives */
	int fd;                 /* obj's (the cache owns it); libdwfl gets a dup */
	uint64_t dev, ino;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	uint64_t dwfl_bias;     /* dwfl address = ELF vaddr + dwfl_bias */
	const GElf_Phdr *loads; /* obj's PT_LOAD headers */
	size_t n_loads;
	/* sorted function symbols (ELF vaddr), built on first lookup */
	struct gs_sym_elfsym *syms;
	size_t n_syms;
	bool syms_loaded;
	/* DWARF function-range index per CU touched, sorted by CU offset */
	struct gs_sym_cu **cus;
	size_t n_cus;
	/* CU ranges when the file has no .debug_aranges (struct cu_range) */
	void *cu_ranges;
	size_t n_cu_ranges;
	bool cu_ranges_built;
	/* one profile mapping per load bias */
	struct gs_sym_bias_map *maps;
	size_t n_maps;
	bool broken; /* SIGBUS while reading it (file shrank): never touched again */
	/* debug data: the job's user (first process; !known after another
	 * user's: world-readable files only), and what libdw may inflate */
	struct gs_sym_creds creds;
	bool creds_mixed;
	bool no_dwarf;            /* its own compressed sections refused: libdw never sees it */
	unsigned debug_refused;   /* causes of refusal counted for it (debuginfo.c) */
	bool debuginfod_asked;    /* the servers were asked for its debug file */
	Elf *dynsym_elf;          /* no_dwarf: its .dynsym's names live here (native.c) */
	uint64_t inflate_charged; /* bytes charged to the memory budget */
};

/* guard.c: run fn(arg); a SIGBUS inside (a mapped file that shrank) makes
 * it return -EFAULT instead of killing gpusample.  State fn was changing is
 * left as it was at the fault: mark the object broken and leave it alone. */
int gs_sym_guarded(int (*fn)(void *), void *arg);

/* debuginfo.c: libdwfl's find_debuginfo, looking only under /usr/lib/debug
 * of the target's root and the host's (never next to the library; a
 * .gnu_debuglink name only under the target's own root).  The module's
 * libdwfl userdata is its gs_sym_module (module_open_dwfl sets it). */
int gs_sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **debuginfo_file_name);

/* Bounds on the debug data a target's files make libdw hold, per file: the
 * sizes its compressed sections claim inflated (gs_elf_inflate_check), and
 * a .gnu_debuglink file's size (its CRC reads it whole; a larger one is
 * refused unread).  All debuglink CRCs of a run together get
 * GS_DEBUGLINK_CRC_S seconds. */
#define GS_DEBUG_INFLATE_MAX (512ull << 20)
/* A module refused to libdw keeps its .dynsym names: the table and its
 * strings, read whole by libelf, at most this each (bytes). */
#define GS_SYM_DYNSYM_MAX  (64u << 20)
#define GS_DEBUG_FILE_MAX  (1ull << 30)
#define GS_DEBUGLINK_CRC_S 10
/* debuginfo.c: may libdw read fd (the module's file or a debug file, name
 * for the note)?  Its compressed sections' claims are checked against
 * GS_DEBUG_INFLATE_MAX and charged to the run's memory budget
 * (GS_MEM_DEBUG_DATA), added to m->inflate_charged (gs_sym_debug_release
 * gives them back when m is freed).  0, or -EFBIG / -ENOSPC (counted for
 * the note: libdw must not see the file). */
int gs_sym_debug_admit(struct gs_sym_module *m, int fd, const char *name);
void gs_sym_debug_release(struct gs_sym_module *m);
/* The job's user as /proc/PID/status shows it (real uid, gid, groups):
 * whose debug files may be read for its modules. */
int gs_sym_creds_read(uint32_t tgid, struct gs_sym_creds *c);
/* A module seen in a process with creds c: the first process's are kept;
 * another user's makes the module public-only (world-readable debug files). */
void gs_sym_module_creds(struct gs_sym_module *m, const struct gs_sym_creds *c);
/* A stop was asked (gs_sym_watch_stop): long debug-file work (a CRC, a
 * debuginfod transfer) ends and no new one starts. */
bool gs_sym_stop_asked(void);
/* The notes on debug files refused (size, compressed sections, budget,
 * unreadable by the job's user, CRC bound or interrupted). */
void gs_sym_debug_report(struct gs_profile *prof);

/* debuginfod.c: the debug file of build-id bid (n bytes) from the servers in
 * DEBUGINFOD_URLS, through a root-owned cache, within one time budget per
 * run and a size limit per file.  An fd (and *path, malloc'ed) or -1.
 * modname names the module in the report's note. */
#define GS_DEBUGINFOD_CACHE_PARENT "/var/cache/gpusample"
#define GS_DEBUGINFOD_CACHE        GS_DEBUGINFOD_CACHE_PARENT "/debuginfod"
#define GS_DEBUGINFOD_BUDGET_S     10
#define GS_DEBUGINFOD_MAX_BYTES    (1ULL << 30)
/* The cache's bound (bytes on disk, all build-ids; GS_DEBUGINFOD_CACHE_MB in
 * the environment sets another), and how many build-id directories are
 * looked at when pruning it. */
#define GS_DEBUGINFOD_CACHE_BYTES   (4ULL << 30)
#define GS_DEBUGINFOD_CACHE_ENTRIES 4096
int gs_sym_debuginfod_find(const unsigned char *bid, int n, const char *modname, char **path);
/* The file found (at path, in the cache) failed debuginfo.c's checks (why:
 * a static string): count it as refused and delete it from the cache, so
 * no later run reads it without asking. */
void gs_sym_debuginfod_refused(const char *path, const char *why);
/* The profile note: what was fetched, missed, refused, and the budget. */
void gs_sym_debuginfod_report(struct gs_profile *prof);

struct gs_sym_elfsym {
	uint64_t addr, size;
	const char *name; /* owned by libelf (string table of the module) */
};

struct gs_sym_modcache;
/* elf: proc/'s cache to share (a reference is taken), NULL for a new one. */
struct gs_sym_modcache *gs_sym_modcache_new(struct gs_elf_cache *elf);
struct gs_elf_cache *gs_sym_modcache_elf(struct gs_sym_modcache *c);
void gs_sym_modcache_free(struct gs_sym_modcache *c);
/* Module for a file seen in a process.  open_paths are tried in order
 * (map_files, then root/path); file_name is the name libdwfl uses to look
 * for .gnu_debuglink files.  Returns NULL only on ENOMEM; a file that cannot
 * be opened yields a module with fd < 0 (fallback names only). */
struct gs_sym_module *gs_sym_module_get(struct gs_sym_modcache *c, const char *path,
					const char *const *open_paths, size_t n_open,
					const char *file_name, uint64_t dev, uint64_t ino);
size_t gs_sym_modcache_count(const struct gs_sym_modcache *c);

/* ELF vaddr of a file offset (PT_LOAD math); false if in no PT_LOAD. */
bool gs_sym_module_off_to_vaddr(const struct gs_sym_module *m, uint64_t file_off, uint64_t *vaddr);

/* Resolution of one ELF vaddr: inline chain, callee first. */
#define GS_SYM_MAX_INLINE 32
struct gs_sym_frame {
	char *name;         /* demangled or plain, malloc'ed */
	char *system_name;  /* mangled, malloc'ed, NULL unless it differs */
	char *file;         /* function's source file, malloc'ed or NULL */
	int64_t start_line; /* declaration line, 0 if unknown */
	int64_t line;       /* line in this frame, 0 if unknown */
};
struct gs_sym_result {
	struct gs_sym_frame f[GS_SYM_MAX_INLINE];
	int n; /* 0 = nothing found */
	bool from_symtab, has_dwarf;
};
/* Fill r for ELF vaddr of m.  Returns 0 (n may be 0) or -ENOMEM. */
int gs_sym_module_resolve(struct gs_sym_module *m, uint64_t vaddr, struct gs_sym_result *r);
/* Start (ELF vaddr) of the .eh_frame FDE covering vaddr: the function's
 * entry even where the symbol was stripped.  -ENOENT without CFI there. */
int gs_sym_module_function_start(struct gs_sym_module *m, uint64_t vaddr, uint64_t *start);
void gs_sym_result_clear(struct gs_sym_result *r);
/* Tests: resolve inline chains with dwarf_getscopes instead of the per-CU
 * index (the two must agree). */
extern bool gs_sym_no_cu_index;

/* ---- maps snapshots (maps.c) -------------------------------------------- */

struct gs_sym_map {
	uint64_t start, end, offset;
	uint64_t dev, ino;
	uint64_t load_bias;        /* runtime - ELF vaddr (valid if mod && has_bias) */
	const char *path;          /* NULL for anonymous mappings; in raw's text
				  * unless own_path (kept from an older snapshot) */
	struct gs_sym_module *mod; /* NULL unless the file has an exec mapping */
	bool exec, has_bias, own_path;
};

struct gs_perfmap_entry {
	uint64_t start, size;
	char *name;
};
struct gs_perfmap_file;
struct gs_perfmap {
	struct gs_perfmap_entry *e; /* the shared parse's when shared != NULL */
	size_t n;
	struct gs_perfmap_file *shared; /* gs_perfmap_read: one parse per file */
	/* the file this was read from, to tell whether it changed since */
	bool seen;
	uint64_t dev, ino, size;
	int64_t mtime_ns;
};

struct gs_sym_snapshot {
	int refs;
	uint32_t id;             /* unique per symbolizer */
	uint32_t tgid;           /* process it was made for (its perf map) */
	struct gs_sym_map *maps; /* sorted by start */
	size_t n;
	struct gs_perfmap perf;
	char perf_path[96];       /* where perf was read from; "" if unknown */
	struct gs_proc_maps *raw; /* as read by proc/; owns the paths */
};

/* A snapshot of tgid from raw (proc/'s; a reference is taken, and raw may
 * be the parent's after fork), tgid's perf map read, modules opened.
 * -ESRCH for an empty raw (a zombie). */
int gs_sym_snapshot_make(struct gs_sym_modcache *c, uint32_t tgid, uint32_t id,
			 struct gs_proc_maps *raw, struct gs_sym_snapshot **out);
void gs_sym_snapshot_put(struct gs_sym_snapshot *s);
const struct gs_sym_map *gs_sym_snapshot_find(const struct gs_sym_snapshot *s, uint64_t addr);

/* ---- perf maps (perfmap.c) ---------------------------------------------- */

/* The target writes its perf map: what we take of it is bounded, per file
 * (bytes read, regions kept) and over all files (memory of the parsed
 * regions, every process and symbolizer together). */
#define GS_PERFMAP_MAX_BYTES   (64u << 20)
#define GS_PERFMAP_MAX_ENTRIES (1u << 20)
#define GS_PERFMAP_TOTAL_BYTES (256u << 20)
/* Parse "START SIZE name" lines (hex); sorted by start.  Lines over 1 KiB
 * are skipped, reading stops after GS_PERFMAP_MAX_BYTES, entries beyond
 * GS_PERFMAP_MAX_ENTRIES are dropped.  read: the file at path only when it
 * is a regular file (no link at its end: gs_open_regular) owned by owner
 * (the process's uid) or root, else -EPERM.  0 or -errno (-ENOENT when the file does not exist). */
int gs_perfmap_read(const char *path, uid_t owner, struct gs_perfmap *pm);
int gs_perfmap_parse(FILE *f, struct gs_perfmap *pm);
/* read shares one parse among every reader of one file identity (dev,
 * inode, size, mtime: hard links and fork children alike) and charges it
 * to a process-wide budget of parsed memory (GS_PERFMAP_TOTAL_BYTES): past
 * it a map is cut (its first regions kept) or, with nothing left, not read
 * (pm empty, 0 returned); both counted here for the report. */
struct gs_perfmap_stats {
	size_t files;   /* distinct files parsed */
	size_t shared;  /* reads answered by a parse already held */
	size_t cut;     /* files cut at the budget */
	size_t refused; /* files not read: budget spent */
	size_t bytes;   /* parsed memory held now */
	size_t peak;    /* and at most */
	char first[96]; /* the first file cut or refused */
};
void gs_perfmap_stats(struct gs_perfmap_stats *st);
/* Tests: a smaller budget; returns the previous one. */
size_t gs_perfmap_set_budget(size_t bytes);
void gs_perfmap_free(struct gs_perfmap *pm);
const struct gs_perfmap_entry *gs_perfmap_find(const struct gs_perfmap *pm, uint64_t addr);
/* Whether path is still the file pm was read from, unchanged (same file,
 * size and mtime; the link itself is looked at, never followed), or still
 * absent. */
bool gs_perfmap_unchanged(const struct gs_perfmap *pm, const char *path);
/* "/proc/TGID/root/tmp/perf-NSTGID.map" into buf. */
int gs_perfmap_path(uint32_t tgid, char *buf, size_t len);

/* ---- kernel (kernel.c) -------------------------------------------------- */

struct gs_ksym {
	uint64_t addr;
	char *name;
	uint32_t module; /* 0 = vmlinux */
	bool global;     /* T/W, not t/w */
};
struct gs_kallsyms {
	struct gs_ksym *s;
	size_t n;
	char **modules; /* modules[0] = NULL (vmlinux), then module names */
	size_t n_modules, cap_modules;
	bool loaded, all_zero;
};
int gs_kallsyms_load(struct gs_kallsyms *k, const char *path);
void gs_kallsyms_free(struct gs_kallsyms *k);
/* Symbol at or below addr, NULL if below the first one. */
const struct gs_ksym *gs_kallsyms_find(const struct gs_kallsyms *k, uint64_t addr);

#endif
