/* SPDX-License-Identifier: MIT */
/*
 * proc/: the processes of the target set, as the host sees them through
 * /proc.  One reader of /proc/PID/maps and one remote-memory reader for
 * every component (symbolizer, CFI tables, Python discovery, GPU host),
 * one cache of ELF objects, the ranks of a distributed job read from a
 * process's environment, and the one table of processes (tgid, parent,
 * root, ranks, role) that turns process events into calls of the
 * runtimes' handlers.
 *
 * The target is untrusted: files under /proc/PID are opened without
 * following links, every read is bounded, and nothing read is trusted for
 * a size beyond those bounds.
 */
#ifndef GPUSAMPLE_PROC_H
#define GPUSAMPLE_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <gelf.h>
#include "gpusample/procmaps.h"

/* ---- maps snapshots ------------------------------------------------------ */

/* A snapshot: the mappings in the kernel's order (ascending start), each
 * as include/gpusample/procmaps.h parses a line (path: NULL for anonymous
 * memory, pseudo paths and " (deleted)" kept; it points into text and lives
 * as long as the snapshot).  Reference-counted so that a child shares its
 * parent's after fork.  A job decides how many lines its maps file has
 * (vm.max_map_count, 65530 by default, each); a snapshot keeps at most
 * GS_PROC_MAPS_ANON_MAX lines of anonymous data (no file, no pseudo path,
 * not executable: nothing to symbolize) and GS_PROC_MAPS_MAX_LINES in all;
 * the rest are dropped and counted (dropped, gs_proc_maps_capped).  Its
 * memory (bytes) is charged to the budget (GS_MEM_MAPS). */
struct gs_proc_maps {
	uint32_t tgid;
	size_t n;
	struct gs_maps_line *m;
	char *text;       /* the kept lines' paths; paths point into it */
	size_t bytes;     /* charged to the memory budget */
	uint64_t dropped; /* lines the caps left out */
	unsigned refs;
};

#define GS_PROC_MAPS_ANON_MAX  1024u
#define GS_PROC_MAPS_MAX_LINES 16384u
#define GS_PROC_MAPS_CHUNK     (64u << 10) /* read size; a line is at most ~4200 bytes */
/* Larger maps files are refused (-EFBIG): vm.max_map_count (65530 by
 * default) lines of at most ~4200 bytes stay far below. */
#define GS_PROC_MAPS_MAX_BYTES (256u << 20)

/* Read /proc/tgid/maps (O_NOFOLLOW, O_CLOEXEC; read at most
 * GS_PROC_MAPS_MAX_BYTES; each line parsed by gs_maps_parse_line, lines that
 * do not parse skipped, the caps above applied).  A zombie or a kernel
 * thread gives n == 0.  Returns 0 and *out (refs 1), -ESRCH when the
 * process is gone, -EFBIG, -ENOMEM, -ENOSPC (the memory budget is spent),
 * -EPROTO (a line longer than GS_PROC_MAPS_CHUNK) or another -errno of
 * open/read. */
int gs_proc_maps_read(uint32_t tgid, struct gs_proc_maps **out);
/* Since the start: the snapshots that dropped lines, and the lines dropped. */
void gs_proc_maps_capped(uint64_t *snapshots, uint64_t *lines);
/* The profile's note on those (1, in buf), or 0 when no line was dropped. */
int gs_proc_maps_cap_note(char *buf, size_t len);

/* One more reference (returns s); drop one (frees at 0; NULL is a no-op). */
struct gs_proc_maps *gs_proc_maps_get(struct gs_proc_maps *s);
void gs_proc_maps_put(struct gs_proc_maps *s);

/* The mapping containing addr, or NULL. */
const struct gs_maps_line *gs_proc_maps_find(const struct gs_proc_maps *s, uint64_t addr);

/* The mapping of tgid that contains addr now, asked of the kernel without
 * reading the maps file (PROCMAP_QUERY, Linux 6.11+): 0 and *out (path
 * NULL: not asked for), -ENOENT when no mapping contains addr, -ESRCH when
 * the process is gone, -EOPNOTSUPP when the kernel cannot answer (the
 * caller reads the whole file instead), or another -errno. */
int gs_proc_vma_at(uint32_t tgid, uint64_t addr, struct gs_maps_line *out);

/* The executable mappings of tgid, ascending, asked of the kernel the same
 * way (one query each, no names): their count (at most max), -E2BIG when
 * there are more, -ESRCH, -EOPNOTSUPP or another -errno as gs_proc_vma_at.
 * The kernel's answer leaves out the [vsyscall] page the maps file prints. */
struct gs_proc_range {
	uint64_t start, end;
};
int gs_proc_exec_ranges(uint32_t tgid, struct gs_proc_range *out, size_t max);

/* ---- remote memory ------------------------------------------------------- */

/* One read of the target is at most this long (-E2BIG beyond). */
#define GS_PROC_MEM_MAX_BYTES (1ull << 30)

/* Copy len bytes at addr in tgid into buf: process_vm_readv, and where that
 * is refused or falls short (seccomp, an LSM, a page it cannot fault in),
 * pread of /proc/tgid/mem.  Returns 0 when all len bytes were read; else
 * -ESRCH (the process is gone), -E2BIG (len over the bound), -EFAULT (a
 * short read: *got, when got is not NULL, says how many leading bytes of
 * buf are valid) or another -errno of opening /proc/tgid/mem. */
int gs_proc_mem_read(uint32_t tgid, uint64_t addr, void *buf, size_t len, size_t *got);

/* One write into the target is at most this long (-E2BIG beyond): writes
 * are small fields (agent options, a remote-exec request), never bulk. */
#define GS_PROC_MEM_WRITE_MAX_BYTES (64u << 10)

/* Copy len bytes of buf to addr in tgid with process_vm_writev only: never
 * /proc/tgid/mem, whose writes bypass page protections (a read-only page of
 * the target would be written).  No ptrace stop.  Returns 0 when all len
 * bytes were written; -ESRCH (gone), -E2BIG (len over the bound), -EFAULT
 * (a partial or refused write: an unmapped or read-only page) or another
 * -errno (-EPERM: no access). */
int gs_proc_mem_write(uint32_t tgid, uint64_t addr, const void *buf, size_t len);
/* Call fn for every thread of tgid (the entries of /proc/TGID/task, in
 * directory order; threads born meanwhile may be missed).  0, or -ESRCH
 * when the process is gone, or -errno of opendir. */
/* The kernel functions thread tid of tgid waits in, leaf first, from
 * /proc/TGID/task/TID/stack ("[<0>] do_select+0x65c/0x940" lines: fn gets
 * "do_select"), at most 64 lines of 255 bytes; fn returning non-zero stops
 * the walk.  0, or -errno of the open (a kernel without the file, or not
 * root: -ENOENT / -EACCES). */
int gs_proc_task_kstack(uint32_t tgid, uint32_t tid, int (*fn)(void *ctx, const char *func),
			void *ctx);
int gs_proc_for_each_tid(uint32_t tgid, void (*fn)(void *ctx, uint32_t tgid, uint32_t tid),
			 void *ctx);
/* The value of key ("Tgid:", "NStgid:") in /proc/PID/status, blanks after
 * the key skipped, to the line's end, in out (len bytes, cut to fit).  The
 * kernel writes the file and escapes the task name in it, so no line can be
 * forged.  0, -ENOENT when no line starts with key, -ESRCH when the task is
 * gone, or -errno of the open. */
int gs_proc_status_field(uint32_t pid, const char *key, char *out, size_t len);
/* The same for n keys from one read of the file (one moment of the task):
 * outs[i] (len bytes each) gets keys[i]'s value.  0, -ENOENT when a key has
 * no line, -EINVAL for n over 64, -ESRCH or -errno as above. */
int gs_proc_status_fields(uint32_t pid, size_t n, const char *const keys[], char *const outs[],
			  size_t len);
/* Process id of tgid inside its own pid namespace (the last field of
 * NStgid: what a container's processes see), or tgid itself when the kernel
 * does not show NStgid.  -ESRCH if gone. */
int64_t gs_proc_nstgid(uint32_t tgid);

/* ---- ELF objects ---------------------------------------------------------- */

/* One ELF file mapped by the target set, opened once and shared by every
 * component that reads it (the native symbolizer, the CFI table builder):
 * identical files (same build-id) under other paths or inodes are the same
 * object.  A file without a build-id, or one that could not be opened, is
 * an object of its own keyed by dev:inode. */
struct gs_elf_obj {
	uint32_t id;         /* 0, 1, ... in order of first open: an index for
			    * components' per-object state */
	char key[48];        /* build-id hex, else "dev:inode" */
	char build_id[41];   /* hex, "" if none */
	int fd;              /* owned by the cache; -1: not open (see gs_elf_get) */
	int err;             /* fd -1: why (-errno of the last open; -EMFILE: the
			    * fd bound; -ENOEXEC: not ELF, closed at once;
			    * -EFBIG: headers refused, see skipped); else 0 */
	const char *skipped; /* -EFBIG: why (gs_elf_headers_check), else NULL */
	Elf *elf;            /* ELF_C_READ on fd (pread: a file that shrinks is
			    * a read error, not SIGBUS); NULL if fd < 0 or not ELF */
	GElf_Phdr *loads;    /* the PT_LOAD program headers */
	size_t n_loads;
	char *path;        /* as first seen in /proc/PID/maps */
	uint64_t dev, ino; /* as first seen */
};

struct gs_elf_cache;

/* Bound on the fds the cache keeps: RLIMIT_NOFILE's soft limit less
 * GS_ELF_FD_RESERVE for everything else gpusample opens (BPF maps and
 * programs, perf events, ring buffers, outputs), at least GS_ELF_FD_MIN.
 * The limit is never raised.  libdwfl's own opens (a dup per module, debug
 * files) are transient: it maps the file and closes the fd. */
#define GS_ELF_FD_RESERVE 256
#define GS_ELF_FD_MIN     32

struct gs_elf_stats {
	size_t objects;  /* distinct objects */
	size_t open_fds; /* fds held now (<= max_fds) */
	size_t max_fds;
	size_t fd_refused; /* objects left without an fd by that bound */
	size_t skipped;    /* objects whose ELF headers failed gs_elf_headers_check */
	const struct gs_elf_obj *first_skipped; /* its path and why, for the report */
};

/* A new cache (references: 1), NULL on ENOMEM or when libelf is unusable. */
struct gs_elf_cache *gs_elf_cache_new(void);
/* One more reference (returns c); drop one: at 0 every fd is closed. */
struct gs_elf_cache *gs_elf_cache_ref(struct gs_elf_cache *c);
void gs_elf_cache_put(struct gs_elf_cache *c);

/* The object already opened for the file dev:ino, or NULL (opens nothing). */
struct gs_elf_obj *gs_elf_find(const struct gs_elf_cache *c, uint64_t dev, uint64_t ino);

/* The object for a file mapped at path (as maps prints it) with dev:ino:
 * the cached one, else open_paths are tried in order (O_RDONLY|O_CLOEXEC:
 * /proc/PID/map_files/START-END, then /proc/PID/root/PATH, so the file is
 * the one the target maps, seen in its mount namespace), the build-id and
 * PT_LOADs read by pread, and an object with the same build-id reused.  A
 * file that cannot be opened, or is opened beyond the fd bound, yields an
 * object with fd -1 (its build-id and PT_LOADs still read in the second
 * case).  Returns 0 and *out, or -ENOMEM. */
int gs_elf_get(struct gs_elf_cache *c, const char *path, const char *const *open_paths,
	       size_t n_open, uint64_t dev, uint64_t ino, struct gs_elf_obj **out);

/* ELF vaddr of a file offset (PT_LOAD math; a page-aligned mapping offset
 * below an unaligned p_offset still matches); false if in no PT_LOAD. */
bool gs_elf_off_to_vaddr(const struct gs_elf_obj *o, uint64_t off, uint64_t *vaddr);

void gs_elf_stats(const struct gs_elf_cache *c, struct gs_elf_stats *st);

/* Does o carry a USDT probe (a .note.stapsdt note, owner "stapsdt") of
 * this provider?  How a runtime recognises its own library whatever the
 * file is called.  Reads at most GS_ELF_NOTES_MAX bytes of notes by pread.
 * Returns 1 yes, 0 no (also for an object without fd), -EIO on a
 * malformed note section. */
#define GS_ELF_NOTES_MAX (1u << 20)
int gs_elf_usdt_provider(const struct gs_elf_obj *o, const char *provider);

/* gs_elf_get for mapping l of tgid (the file seen through
 * /proc/tgid/map_files, then /proc/tgid/root): the cached object when
 * dev:inode is known.  0 and *out, -ENOMEM, -EINVAL for an anonymous l. */
int gs_elf_get_mapped(struct gs_elf_cache *c, uint32_t tgid, const struct gs_maps_line *l,
		      struct gs_elf_obj **out);
/* A read-only fd (O_CLOEXEC, O_NONBLOCK) of the very file mapping l of tgid
 * maps, opened as gs_elf_get_mapped does (map_files, then the target's root)
 * and kept only when it is a regular file with l's dev:inode: a link the
 * target planted on the path cannot send us to another file.  The caller
 * closes it.  -EINVAL for an anonymous l, -ESTALE when only other files
 * opened, else -errno of the last open. */
int gs_proc_open_mapped(uint32_t tgid, const struct gs_maps_line *l);

/* ELF headers checked by pread before libelf or libdw sees the file:
 * libelf allocates per section and program header the header claims, and
 * the extended forms (e_shnum 0: section 0's sh_size; e_phnum PN_XNUM:
 * section 0's sh_info) claim up to 2^32 of them from a 24 KB sparse file
 * (13 GB of RSS).  Each table must lie within the file's size, within what
 * it holds on disk (st_blocks, plus 64 KiB), and under these caps (real
 * objects: tens of each).  0 (also for a file that is not ELF: libelf's
 * call), or -EFBIG and *why (a static string) for a bomb. */
#define GS_ELF_PHNUM_MAX 4096u
#define GS_ELF_SHNUM_MAX 65536u
int gs_elf_headers_check(int fd, const char **why);

/* Memory that inflating fd's compressed sections would take (proc/
 * elf_inflate.c), read by pread before libelf or libdw sees the file:
 * libdw inflates each compressed debug section whole, into a buffer of the
 * size its header claims (SHF_COMPRESSED: the Elf32/Elf64_Chdr's ch_size,
 * zlib or zstd; a GNU ".zdebug*" section: its "ZLIB" header's size), so a
 * 2 MB file can claim GiBs; libelf may copy the compressed bytes first
 * (sh_size).  *bytes is the sum of both over the compressed sections.
 * Returns 0 when it is at most cap (also for a file that is not ELF),
 * -EFBIG and *why (a static string) when gs_elf_headers_check refuses the
 * file, a claim passes cap or is impossible (a zlib section claiming more
 * than 1032 times its size, a header outside the file).  A ".gnu_debugdata"
 * section (xz; libdwfl inflates it into a growing buffer when the file has
 * no .symtab, and no header says its size) is inflated here into a scratch
 * buffer first, counting, with a decoder of at most GS_ELF_XZ_MEMLIMIT
 * bytes: twice its output plus the decoder's memory are counted. */
#define GS_ELF_XZ_MEMLIMIT (128ull << 20)
int gs_elf_inflate_check(int fd, uint64_t cap, uint64_t *bytes, const char **why);

struct stat;
/* Open path read-only (O_CLOEXEC, O_NONBLOCK) only if it leads to a regular
 * file: it is looked at through an O_PATH descriptor first (extra_flags:
 * e.g. O_NOFOLLOW), so no device, FIFO or socket a link points to is ever
 * opened, then reopened through that descriptor (the same inode).  *st is
 * the file's.  Returns the fd, -EPERM for anything but a regular file, or
 * -errno of the open. */
int gs_open_regular(const char *path, int extra_flags, struct stat *st);
/* The same for path resolved by openat2 from dirfd under resolve (RESOLVE_*
 * flags: RESOLVE_IN_ROOT keeps every link and ".." inside dirfd's tree). */
int gs_open_regular_at(int dirfd, const char *path, int extra_flags, uint64_t resolve,
		       struct stat *st);

/* ---- ranks from the environment ---------------------------------------- */

/* Ranks of a distributed job, from a process's environment.  Each field is
 * -1 when unknown.  Sources, in precedence order (the first one set wins,
 * field by field): torch.distributed's launcher (RANK, LOCAL_RANK,
 * WORLD_SIZE, GROUP_RANK), Open MPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK,
 * _SIZE), PMI (PMI_RANK, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_LOCALID,
 * SLURM_NTASKS, SLURM_NODEID).  src[] says which source gave each field:
 * torchrun under srun leaves SLURM_PROCID in every worker, so the launcher
 * (Slurm rank only) and its workers (RANK) stay apart. */
enum gs_rank_src { GS_RANK_NONE = 0, GS_RANK_TORCH, GS_RANK_OMPI, GS_RANK_PMI, GS_RANK_SLURM };
struct gs_rank_env {
	int64_t rank, local_rank, world_size, node_rank;
	uint8_t src[4]; /* enum gs_rank_src of each field above, in order */
};
#define GS_RANK_ENV_UNKNOWN ((struct gs_rank_env){ -1, -1, -1, -1, { 0 } })
/* Apply one "KEY=VALUE" entry of len bytes (not NUL-terminated) to r.
 * Values must be plain decimals 0..INT32_MAX, anything else is ignored. */
void gs_rank_env_entry(struct gs_rank_env *r, const char *kv, size_t len);
/* Parse a NUL-separated environment block of n bytes (as /proc/PID/environ). */
void gs_rank_env_parse(struct gs_rank_env *r, const char *buf, size_t n);
/* Read /proc/PID/environ (opened with O_NOFOLLOW, at most 1 MiB read: the
 * target is untrusted).  r is GS_RANK_ENV_UNKNOWN when the file cannot be
 * read (a process that hides it is simply unlabelled); returns 0 or -errno. */
int gs_proc_rank_env(uint32_t pid, struct gs_rank_env *r);
/* Whether a process with ranks r heads its rank: it has a rank, and its
 * parent (NULL: none among the targets) does not carry the same one from
 * the same source (forkserver, resource tracker and DataLoader children
 * inherit RANK).  The rule behind the "main" process role, in the profile
 * and in a dump; every ancestor of a head is a launcher. */
bool gs_rank_head(const struct gs_rank_env *r, const struct gs_rank_env *parent);

/* ---- the process table and its handlers ------------------------------------ */

/* A runtime (the native symbolizer, the CFI tables, Python, the GPU agent)
 * follows the processes of the run through this interface; the table calls
 * each registered handler in the order of registration (detach: in reverse
 * order), with the handler's own ctx.  Any op may be NULL.
 *  probe(o)        is this ELF object mine (libpython, the GPU agent by its
 *                  USDT notes)?  1 yes, 0 no, <0 -errno (taken as no).
 *                  Asked once per object of the ELF cache.
 *  attach(p, o, l) a new image of p: at first sight (p->image 0) and after
 *                  each exec (p->image n).  Called once with o and l NULL for
 *                  the process itself, then -- for a handler with probe --
 *                  once for each object it claimed, with its offset-0
 *                  mapping l (valid during the call).
 *  fork(pa, ch)    ch was forked by pa (NULL: the parent is not in the
 *                  table); ch shares pa's maps snapshot.
 *  detach(p, exec) p's image is gone: it exited (exec false; p->exited set,
 *                  the entry and its slots stay for the samples it left),
 *                  or is replaced by an exec (attach follows).
 *  retire(p)       p exited and every stack it left is symbolized
 *                  (gs_proc_table_retire): drop what only symbolizing its
 *                  addresses needed (maps snapshots); what the profile's
 *                  end needs (counts, names) stays.
 *  maps_changed(p, ch)  proc/ re-read p's maps (gs_proc_maps_reread) and
 *                  they differ from p->maps before the read (ch->added,
 *                  ch->removed: the mappings only in the new, only in the
 *                  old snapshot); p->maps is the new snapshot.  Also called
 *                  after a GS_MAPS_NOW re-read that found nothing new (the
 *                  caller wants the snapshot used now: ch->why says so).
 *                  Not at attach (p->maps is read before attach) nor fork.
 *  tick()          from the session's poll loop (every 50 ms).
 *  report(prof)    at the end: profile comments and notes.
 *  release(p)      the table is freed: drop p's slot.
 * attach and fork return 0 or -errno; an error is the handler's to report
 * (the other handlers are still called). */
struct gs_profile;
struct gs_proc;

/* Why a handler asks proc/ to re-read a process's maps, and so which rule
 * decides whether the maps file is read now (proc/ keeps each process's
 * back-off: the maps of a job are parsed no more often than these allow,
 * whoever asks). */
enum gs_maps_why {
	/* A PC outside every executable mapping of the snapshot (a CFI miss).
	 * Re-read unless the kernel's executable ranges (PROCMAP_QUERY, one
	 * query each) are the snapshot's.  Backs off while re-reads find no
	 * new file-backed code: GS_MAPS_MISS_MIN_NS doubling up to
	 * GS_MAPS_MISS_MAX_NS, GS_MAPS_MISS_SLOW_NS at least after the
	 * process's first GS_MAPS_FAST_FINDS re-reads that found some. */
	GS_MAPS_CODE_MISS = 1,
	/* An address the snapshot cannot resolve (a symbolizer miss at addr):
	 * re-read when the kernel's mapping at addr is not the snapshot's, at
	 * most once per GS_MAPS_ADDR_MIN_NS per process. */
	GS_MAPS_ADDR_MISS,
	/* The snapshot is about to be used whole (tables loaded, mappings to
	 * republish): re-read only if the executable ranges changed. */
	GS_MAPS_CHECK,
	/* Libraries are known to have been mapped (an interpreter found late,
	 * a GPU agent about to arm): re-read now. */
	GS_MAPS_NOW,
};
/* Or'ed into why: every table of the process is wanted now, not when a
 * sample first walks through its object (launch stacks must be whole at
 * once).  Passed on in ch->why. */
#define GS_MAPS_BUILD_ALL 0x100u
#define GS_MAPS_WHY(w)    ((w)&0xffu)

#define GS_MAPS_MISS_MIN_NS  10000000ull   /* 10 ms: ld.so maps libraries ms apart */
#define GS_MAPS_MISS_MAX_NS  5000000000ull /* 5 s */
#define GS_MAPS_FAST_FINDS   256u          /* then a job maps new code all the time */
#define GS_MAPS_MISS_SLOW_NS 100000000ull  /* 100 ms */
#define GS_MAPS_ADDR_MIN_NS  1000000000ull /* 1 s */

/* The difference of two snapshots of a process, in address order: each
 * pointer into the old (removed) or new (added) snapshot, valid during the
 * maps_changed call.  A mapping is the same when start, end, offset,
 * device, inode, exec permission and path are. */
struct gs_proc_maps_change {
	unsigned why; /* the request's enum gs_maps_why | flags */
	const struct gs_maps_line *const *added;
	size_t n_added;
	const struct gs_maps_line *const *removed;
	size_t n_removed;
};

struct gs_proc_handler {
	const char *name; /* "cfi", "python", ... for messages */
	void *ctx;
	int (*probe)(void *ctx, const struct gs_elf_obj *o);
	int (*attach)(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
		      const struct gs_maps_line *l);
	int (*fork)(void *ctx, struct gs_proc *parent, struct gs_proc *child);
	void (*detach)(void *ctx, struct gs_proc *p, bool exec);
	void (*maps_changed)(void *ctx, struct gs_proc *p, const struct gs_proc_maps_change *ch);
	void (*tick)(void *ctx);
	void (*report)(void *ctx, struct gs_profile *prof);
	void (*release)(void *ctx, struct gs_proc *p);
	void (*retire)(void *ctx, struct gs_proc *p);
};

#define GS_PROC_MAX_HANDLERS 16

/* One process of the run (a tgid), from first sight to the end of the run. */
struct gs_proc {
	uint32_t tgid, ppid;
	uint32_t root;  /* the tgid of the target root it descends from (itself
			 * when it has no parent in the table) */
	uint32_t image; /* 0 as first seen, n after its n-th exec */
	bool exited;
	/* From /proc/PID/environ at first sight and after each exec; a fork
	 * child, and a process whose environment cannot be read at first
	 * sight, has its parent's (the same environment). */
	struct gs_rank_env ranks;
	uint8_t role;   /* enum gs_proc_role: the session decides it */
	bool announced; /* a process event reached the handlers (not only
			 * gs_proc_table_slot's creation) */
	/* The maps as of the last read (attach, gs_proc_maps_reread), shared
	 * with the parent after fork; NULL before the first read, when no
	 * handler probes or takes maps_changed, or when unreadable. */
	struct gs_proc_maps *maps;
	void *slot[GS_PROC_MAX_HANDLERS]; /* per handler, by registration id */
	struct gs_proc_threads *threads;  /* its threads (proc/threads.c), NULL until one */
};

/* What a process is to the job, for labels: the session decides (a root,
 * what a wrapper runs, a rank's head; DataLoader workers by thread name or
 * stack) and keeps it here. */
enum gs_proc_role { GS_ROLE_OTHER = 0, GS_ROLE_MAIN, GS_ROLE_DATALOADER };
/* "other", "main", "dataloader" ("other" for an unknown value). */
const char *gs_proc_role_name(uint8_t role);

/* The role rule over one job's processes (proc/roles.c says it; the
 * session and `gpusample dump` both use it).  v[0..n) in the order the
 * processes were first seen; in: tgid, ppid, is_root (a target root), CPU
 * samples (0 when unknown: then no wrapper rule), ranks and the role so far
 * (GS_ROLE_DATALOADER stays); out: role, and GS_RANK_ENV_UNKNOWN ranks for
 * a launcher.  0 or -ENOMEM (v unchanged but partly). */
struct gs_role_proc {
	uint32_t tgid, ppid;
	bool is_root;
	uint64_t cpu_samples;
	struct gs_rank_env ranks;
	uint8_t role;
};
int gs_proc_assign_roles(struct gs_role_proc *v, size_t n);

struct gs_proc_table;

/* A new table; elf (a reference is taken; NULL: no probing) is the cache
 * probe and attach see objects from.  NULL on ENOMEM. */
struct gs_proc_table *gs_proc_table_new(struct gs_elf_cache *elf);
/* release every slot, then free the table (NULL is a no-op). */
void gs_proc_table_free(struct gs_proc_table *t);

/* Register h (copied) before the first process is added; returns its id
 * (the index of its slot), -ENOSPC past GS_PROC_MAX_HANDLERS, -EBUSY once
 * processes exist. */
int gs_proc_register(struct gs_proc_table *t, const struct gs_proc_handler *h);

/* The entry of tgid, or NULL. */
struct gs_proc *gs_proc_get(const struct gs_proc_table *t, uint32_t tgid);
/* Entries in order of first sight: i < gs_proc_count; NULL past the end. */
size_t gs_proc_count(const struct gs_proc_table *t);
struct gs_proc *gs_proc_at(const struct gs_proc_table *t, size_t i);

/* Process events.  seen: first sight (a target, a descendant found at
 * attach, a sampled tgid without fork record) -> attach; a known tgid is
 * returned as is; the ranks are read before attach.  fork: a new entry
 * sharing the parent's root, ranks and maps -> fork (a child already seen
 * by its samples takes the parent's maps and gets fork too: the record is
 * the better truth).  exec: detach(exec), the ranks read again (unknown
 * when unreadable: the new image's environment is not the parent's), then
 * attach (first sight first when unknown).  exit: detach (unknown:
 * nothing).
 * Return the entry, NULL on ENOMEM. */
struct gs_proc *gs_proc_table_seen(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid);
struct gs_proc *gs_proc_table_fork(struct gs_proc_table *t, uint32_t ppid, uint32_t child);
struct gs_proc *gs_proc_table_exec(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid);
void gs_proc_table_exit(struct gs_proc_table *t, uint32_t tgid);
/* tgid exited and its caller symbolized every stack it left: each
 * handler's retire (in reverse order), then the entry's maps snapshot is
 * dropped (p->maps NULL).  A long run whose DataLoader re-creates its
 * workers every epoch keeps, per exited worker, only its entry, threads
 * and slots' small state.  0; -ENOENT: no announced entry; -EBUSY: alive
 * (a pid handed out again). */
int gs_proc_table_retire(struct gs_proc_table *t, uint32_t tgid);
/* tgid's entry, made without calling any handler when new (as
 * gs_proc_table_slot does) with ppid as its parent: for a component that
 * sets up its own state before the first process event announces the
 * entry.  An entry not yet announced takes ppid as its parent (and its
 * root and inherited ranks); an announced one is returned as is.  NULL on
 * ENOMEM. */
struct gs_proc *gs_proc_table_add(struct gs_proc_table *t, uint32_t tgid, uint32_t ppid);
/* The slot of handler id in tgid's entry, for a component that keeps its
 * per-process state there and learns of a process on its own (a GPU
 * record, a lookup before the session announced it): with create, an
 * entry is made without calling any handler -- its first process event
 * (seen, fork, exec) still reaches them all.  NULL: no such entry (or
 * ENOMEM, or id not registered). */
void **gs_proc_table_slot(struct gs_proc_table *t, uint32_t tgid, int id, bool create);

/* A component's per-process states: one zeroed block of size bytes per
 * process, in the process's slot of the session's table once bound, else
 * of a table of its own (a test, a tool using the component alone: one
 * handler that does nothing).  all[0..n) lists them in order of creation
 * (a dropped one's place taken by the last), for walks and for freeing.
 *  init: the own table (0, -ENOMEM);  bind: the session's table t and the
 *  component's handler id (drops the own table; before the first state:
 *  -EBUSY after);  get: tgid's state, made when create (NULL: none, or
 *  ENOMEM);  drop: free tgid's state;  fini: free every state (after the
 *  component freed what they point to) and the own table. */
struct gs_proc_slots {
	struct gs_proc_table *t;
	int id;
	bool own;
	size_t size;
	void **all;
	size_t n, cap;
};
int gs_proc_slots_init(struct gs_proc_slots *s, const char *name, size_t size);
int gs_proc_slots_bind(struct gs_proc_slots *s, struct gs_proc_table *t, int id);
void *gs_proc_slots_get(struct gs_proc_slots *s, uint32_t tgid, bool create);
void gs_proc_slots_drop(struct gs_proc_slots *s, uint32_t tgid);
void gs_proc_slots_fini(struct gs_proc_slots *s);
/* Ask proc/ to re-read tgid's maps, for why (enum gs_maps_why, with
 * GS_MAPS_BUILD_ALL or'ed in as needed): when why's rule allows, the maps
 * are read, diffed against p->maps and, if they differ (or why is
 * GS_MAPS_NOW), every handler's maps_changed is called.  A process whose
 * maps are being announced already (a handler asking from maps_changed)
 * is not read again.  Returns 1: read and the handlers told; 0: nothing to
 * read (the rule found the snapshot current: the caller uses p->maps);
 * -EAGAIN: backing off, ask again later; -ESRCH: no such entry, exited,
 * or gone (an empty maps file: a zombie); -ENOMEM or -errno of the read. */
int gs_proc_maps_reread(struct gs_proc_table *t, uint32_t tgid, unsigned why, uint64_t addr);

/* gs_proc_slots_init with h as the own table's handler (its maps_changed,
 * for a component used alone that asks gs_proc_maps_reread of that table). */
int gs_proc_slots_init_handler(struct gs_proc_slots *s, const struct gs_proc_handler *h,
			       size_t size);

/* Every handler's tick / report. */
void gs_proc_table_tick(struct gs_proc_table *t);
void gs_proc_table_report(struct gs_proc_table *t, struct gs_profile *prof);

/* ---- threads (proc/threads.c) -------------------------------------------- */

/* A thread's off-CPU accounting (session/offcpu.c): the exact split of its
 * window into on-CPU, blocked and runnable ns, the sampled interval still
 * open, and the stack it slept in before the window (if taken). */
struct gs_thread_offcpu {
	uint64_t exact[3];  /* ns: on-CPU, blocked, runnable */
	int64_t pend_stack; /* stack of the open sampled interval (offcpu.c's encoding), -1 none */
	uint32_t pend_seq, pend_p;
	uint64_t pend_out;  /* CLOCK_MONOTONIC ns the open interval began */
	int64_t pend_waker; /* the wakeup that ended it (session/wakers.c), -1 none */
	int64_t seed_raw;   /* raw stack of the wait begun before the window, -1 none */
	uint64_t seed_runs; /* schedstat's times-run when it was taken */
	uint64_t mark;      /* CLOCK_MONOTONIC ns its accounted time reaches, 0 none yet */
	bool accounted;     /* off-CPU records (or the window's edges) reached it */
	bool rem_given;     /* its first CPU sample took the on-CPU division's remainder */
};

/* Votes a thread's samples cast for its role, one counter per enum
 * gs_thread_role (symbolizer/symbolizer.h, which checks the size). */
#define GS_THREAD_NVOTES 8

/* One thread (tgid, tid) of a process in the table: made when it is first
 * seen (a CPU sample, an off-CPU record, a kernel launch, a stack taken at
 * the start), kept to the end of the run at a stable address.  What the
 * samples of the thread need to be built whole lives here, so no pass
 * edits samples afterwards (but the role: see gs_thread_roles_apply). */
struct gs_thread {
	uint32_t tgid, tid;
	/* Its name as the profile's string id (gs_str), 0 unknown: from its
	 * last off-CPU stack record (or /proc at the start), else from its
	 * first CPU sample. */
	uint32_t comm;
	uint64_t cpu_samples; /* timer samples taken of it */
	/* Role votes: per role, the samples added so far whose stack says
	 * that role (symbolizer/thread_roles.c), and the thread name of the
	 * last of them (gs_str; the role's fallback). */
	uint32_t role_votes[GS_THREAD_NVOTES];
	uint32_t vote_comm;
	struct gs_thread_offcpu off;
};

/* tid of tgid: found, or (get) made when new -- tgid's entry too, made as
 * gs_proc_table_add does when the table has none.  NULL: none (find), or
 * ENOMEM (get).  tid 0 (the idle task) has no entry. */
struct gs_thread *gs_thread_find(const struct gs_proc_table *t, uint32_t tgid, uint32_t tid);
struct gs_thread *gs_thread_get(struct gs_proc_table *t, uint32_t tgid, uint32_t tid);
/* p's threads in order of first sight: i < gs_thread_count(p). */
size_t gs_thread_count(const struct gs_proc *p);
struct gs_thread *gs_thread_at(const struct gs_proc *p, size_t i);
/* Free p's threads (the table does, with p). */
void gs_proc_threads_free(struct gs_proc *p);

#endif
