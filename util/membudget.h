/* SPDX-License-Identifier: MIT */
/*
 * One budget for the memory a target can make gpusample use.
 *
 * A profiled job decides how much some of gpusample's stores grow: the
 * perf maps it writes, the unwind tables of the libraries it maps (BPF map
 * memory: the kernel's, not counted in gpusample's RSS), the kernel names
 * and PC locations its GPU agent reports, the debug sections of its
 * libraries and debug files that libdw inflates.  Each store keeps its own cap
 * (per file, per object, per process: one job cannot take another's share)
 * and, before it grows, charges this budget, shared by all of them, so no
 * mix of attacks adds up past it.  A refused charge is counted here by kind;
 * the store drops what it could not keep, counts it its own way and the run
 * goes on.
 *
 * Units: bytes.  Process-wide, thread-safe.  The default is
 * GS_MEM_BUDGET_DEFAULT; GS_MEM_BUDGET_MB in the environment (read at the
 * first charge) or gs_mem_set_budget() sets another.
 */
#ifndef GS_UTIL_MEMBUDGET_H
#define GS_UTIL_MEMBUDGET_H

#include <stdint.h>

#define GS_MEM_BUDGET_DEFAULT (1ull << 30)

enum gs_mem_kind {
	GS_MEM_PERF_MAPS,  /* parsed perf maps (native/perfmap.c) */
	GS_MEM_CFI_TABLES, /* unwind tables in BPF maps, kernel memory (native/cfi.c) */
	GS_MEM_GPU_STORES, /* kernel names and PC locations (gpu/cuda.c) */
	GS_MEM_MAPS,       /* maps snapshots (proc/maps.c) */
	GS_MEM_DEBUG_DATA, /* compressed debug sections libdw inflates (native/debuginfo.c) */
	GS_MEM_KINDS,
};

struct gs_mem_stats {
	uint64_t budget, used, peak;
	uint64_t used_by[GS_MEM_KINDS];
	uint64_t refused[GS_MEM_KINDS]; /* charges refused, by kind */
};

/* 0 when bytes fit (they are now in use), -ENOSPC when they would pass the
 * budget (nothing charged; counted). */
int gs_mem_charge(enum gs_mem_kind kind, uint64_t bytes);
/* Give back what a charge took (a store freed it). */
void gs_mem_release(enum gs_mem_kind kind, uint64_t bytes);
/* Bytes that a charge can still take now. */
uint64_t gs_mem_left(void);
/* Set the budget (bytes); returns the previous one. */
uint64_t gs_mem_set_budget(uint64_t bytes);
void gs_mem_stats(struct gs_mem_stats *st);
/* "perf maps", "unwind tables", "GPU stores", "maps snapshots", "debug sections" */
const char *gs_mem_kind_name(enum gs_mem_kind kind);

#endif
