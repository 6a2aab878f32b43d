/* SPDX-License-Identifier: MIT */
/*
 * Uprobes on the CUDA driver's memory entry points (gpu/gpumem.h lists
 * them), in every process of the run that maps libcuda.so.1, with or
 * without the GPU agent.  A process-table handler: a process is probed when
 * its libcuda is first seen (at attach, after an exec, when a re-read of
 * its maps finds it: the tick re-checks unprobed processes every
 * GS_GPUMEM_RESCAN_NS at first, backing off to GS_GPUMEM_RESCAN_MAX_NS), and
 * a fork child of a probed process is probed too.
 *
 * Trust: the libcuda a process maps is probed only when its path passes
 * gs_cuda_trusted_lib (root-owned, not writable by group or others, up to
 * /) and that path is the mapped file (dev:inode); the probes go into the
 * mapped file itself (/proc/PID/map_files).  A file without the entry
 * points gets none (counted per symbol).
 *
 * Errors: 0 or -errno; a process that cannot be probed is noted in the
 * report (gs_gpumem_probe_notes), never an error of the run.
 */
#ifndef GS_GPU_GPUMEM_PROBE_H
#define GS_GPU_GPUMEM_PROBE_H

#include <stdint.h>
#include <gelf.h>
#include "gpu/gpumem.h"

struct bpf_program;
struct gs_elf_cache;
struct gs_link_reaper;
struct gs_proc_table;
struct gs_proc_handler;
struct gs_profile;

#define GS_GPUMEM_RESCAN_NS     250000000ull  /* 250 ms */
#define GS_GPUMEM_RESCAN_MAX_NS 4000000000ull /* 4 s */

struct gs_gpumem_probe;

/* enter: gs_mem_enter (or its compat twin), ret: gs_mem_return, free:
 * gs_mem_free (bpf/gpumem.bpf.h); elf: the session's ELF cache (a
 * reference is taken); reaper: closes a process's 22 links off the
 * caller's thread (bpf/reaper.h; NULL: inline), not owned, it must outlive
 * g. */
struct gs_gpumem_probe *gs_gpumem_probe_new(struct bpf_program *enter, struct bpf_program *ret,
					    struct bpf_program *free, struct gs_elf_cache *elf,
					    struct gs_link_reaper *reaper);
void gs_gpumem_probe_free(struct gs_gpumem_probe *g);
/* Detach every process's probes (at the end of the run, so that their
 * closes overlap what follows); nothing is probed after. */
void gs_gpumem_probe_detach(struct gs_gpumem_probe *g);
/* The handler to register with the session's table, then the id it got. */
void gs_gpumem_probe_handler(struct gs_gpumem_probe *g, struct gs_proc_handler *h);
int gs_gpumem_probe_bind(struct gs_gpumem_probe *g, struct gs_proc_table *t, int id);

/* The entry point at ip in tgid (the ip of a gs_mem_call or gs_mem_free
 * record), or -ENOENT. */
int gs_gpumem_probe_fn(struct gs_gpumem_probe *g, uint32_t tgid, uint64_t ip);

/* Notes for the report: processes whose libcuda was refused or could not
 * be probed, and why; a comment per probed process with the entry points
 * its libcuda exports. */
void gs_gpumem_probe_notes(struct gs_gpumem_probe *g, struct gs_profile *prof);
/* Processes probed so far. */
unsigned gs_gpumem_probe_count(const struct gs_gpumem_probe *g);

/* The entry points' addresses in the ELF object o, relative to the start
 * of its first PT_LOAD's page (add the start of its offset-0 mapping), and
 * their file offsets (where uprobes go): 0 for a symbol o does not export.
 * Returns how many were found, or -errno. */
int gs_gpumem_symbols(Elf *elf, const GElf_Phdr *loads, size_t n_loads, uint64_t rel[GS_MEMFN_NR],
		      uint64_t off[GS_MEMFN_NR]);

#endif
