/* SPDX-License-Identifier: MIT */
/*
 * GPU memory by CPU stack, from the CUDA driver's allocation entry points
 * (uprobes on libcuda.so.1: bpf/gpumem.bpf.h, gpu/gpumem_probe.c).
 *
 * Two parts:
 *  - the entry points: names, what their arguments mean, which memory they
 *    take or give back (gs_gpumem_fn_*);
 *  - the live set (struct gs_gpumem): per process the allocations that are
 *    live (address or handle -> bytes, stack), live bytes by stack, the
 *    peak and the live bytes by stack at the peak, bytes allocated by stack
 *    in the window, the out-of-memory answers with their stacks, and the
 *    live bytes over time.  Pure bookkeeping: no BPF, no driver calls.
 *
 * Units: bytes; times CLOCK_MONOTONIC ns; a stack is the caller's index
 * (the profile's stack id), opaque here.  Every value comes from the
 * target (sizes, addresses, handles): nothing is trusted, memory is capped
 * (GS_GPUMEM_LIVE_MAX entries in all, GS_GPUMEM_STACKS_MAX stacks per
 * process), and what a cap or a lie costs is counted in struct
 * gs_gpumem_losses.  Errors: -ENOMEM, -EINVAL.
 */
#ifndef GS_GPU_GPUMEM_H
#define GS_GPU_GPUMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The memory an entry point takes or gives back. */
enum gs_gpumem_space {
	GS_GPUMEM_DEVICE = 0, /* device (and managed) memory by address */
	GS_GPUMEM_PHYS = 1,   /* physical device memory by handle (cuMemCreate) */
	GS_GPUMEM_PINNED = 2, /* page-locked host memory by address */
	GS_GPUMEM_NSPACE = 3,
};

enum gs_gpumem_fn {
	GS_MEMFN_ALLOC,         /* cuMemAlloc_v2(CUdeviceptr *, size_t) */
	GS_MEMFN_ALLOC_PITCH,   /* cuMemAllocPitch_v2(CUdeviceptr *, size_t *pitch, w, h, elem) */
	GS_MEMFN_ALLOC_MANAGED, /* cuMemAllocManaged(CUdeviceptr *, size_t, flags) */
	GS_MEMFN_ALLOC_ASYNC,   /* cuMemAllocAsync(CUdeviceptr *, size_t, stream) */
	GS_MEMFN_ALLOC_POOL_ASYNC, /* cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, pool, stream) */
	GS_MEMFN_CREATE,           /* cuMemCreate(handle *, size_t, prop *, flags) */
	GS_MEMFN_ALLOC_HOST,       /* cuMemAllocHost_v2(void **, size_t) */
	GS_MEMFN_HOST_ALLOC,       /* cuMemHostAlloc(void **, size_t, flags) */
	GS_MEMFN_FREE,             /* cuMemFree_v2(CUdeviceptr) */
	GS_MEMFN_FREE_ASYNC,       /* cuMemFreeAsync(CUdeviceptr, stream) */
	GS_MEMFN_RELEASE,          /* cuMemRelease(handle) */
	GS_MEMFN_FREE_HOST,        /* cuMemFreeHost(void *) */
	GS_MEMFN_MAP,              /* cuMemMap(ptr, size, offset, handle, flags): counted */
	GS_MEMFN_UNMAP,            /* cuMemUnmap(ptr, size): counted */
	GS_MEMFN_NR,
};

struct gs_gpumem_fn_info {
	const char *name;           /* the exported symbol */
	bool alloc;                 /* entry + return probes, stack (else a free-like
				     * entry probe, no stack) */
	enum gs_gpumem_space space; /* what it takes or gives back */
	bool counted_only;          /* cuMemMap / cuMemUnmap: no live-set change */
};
const struct gs_gpumem_fn_info *gs_gpumem_fn_info(enum gs_gpumem_fn fn);

/* The bytes an allocation asked for, from its raw entry arguments and, for
 * cuMemAllocPitch_v2, the pitch read at return (aux): 0 when they do not
 * make a size (pitch * height overflows, a size past GS_GPUMEM_SIZE_MAX). */
#define GS_GPUMEM_SIZE_MAX (1ull << 48) /* 256 TiB: more is a forged size */
uint64_t gs_gpumem_call_size(enum gs_gpumem_fn fn, const uint64_t args[4], uint64_t aux);

/* CUresult of an allocation the device could not satisfy. */
#define GS_CUDA_ERROR_OUT_OF_MEMORY 2

#define GS_GPUMEM_LIVE_MAX     (1u << 20) /* live allocations tracked, all processes */
#define GS_GPUMEM_STACKS_MAX   4096u      /* distinct stacks per process (more: under one) */
#define GS_GPUMEM_OOM_KEEP     8u         /* out-of-memory answers kept per process */
#define GS_GPUMEM_SERIES_MAX   2048u      /* points of live bytes over time per process */
#define GS_GPUMEM_INFLIGHT_MAX 64u        /* allocation calls between entry and return */
/* The stack id the allocations of a process past GS_GPUMEM_STACKS_MAX are
 * counted under. */
#define GS_GPUMEM_STACK_OTHER UINT32_MAX

struct gs_gpumem_stack_bytes {
	uint32_t stack;
	uint32_t pad;
	uint64_t bytes, count;
};

struct gs_gpumem_oom {
	uint64_t t_ns;
	uint64_t size;      /* asked for */
	uint64_t live;      /* device bytes live then (GS_GPUMEM_DEVICE + _PHYS) */
	uint32_t stack, fn; /* enum gs_gpumem_fn */
};

struct gs_gpumem_point {
	uint64_t t_ns, bytes; /* device bytes live from t_ns on */
};

/* What caps and lies cost, by cause. */
struct gs_gpumem_losses {
	uint64_t unknown_frees; /* a free of an address or handle not live (allocated
				 * before the attach, or forged) */
	uint64_t reused;        /* an allocation at an address still live: the old
				 * one is taken as freed */
	uint64_t capped;        /* allocations not tracked: GS_GPUMEM_LIVE_MAX */
	uint64_t bad_size;      /* allocations with a size of 0 or past
				 * GS_GPUMEM_SIZE_MAX, not tracked */
	uint64_t unmatched;     /* a return without its call, a call whose return
				 * never came, a success without its address */
};

/* One process's memory.  Arrays are the map's: valid until its next change. */
struct gs_gpumem_proc {
	uint32_t tgid;
	bool exited;
	uint64_t live[GS_GPUMEM_NSPACE];
	uint64_t peak[GS_GPUMEM_NSPACE]; /* each space's own peak */
	uint64_t peak_device;            /* device bytes (DEVICE + PHYS) at their peak */
	uint64_t peak_ns;                /* when it was first reached */
	uint64_t allocs, alloc_bytes;    /* successful allocations in the window */
	uint64_t frees, maps, unmaps;
	uint64_t failed; /* allocations that failed otherwise (bad arguments...) */
	uint64_t ooms;   /* out-of-memory answers (the first GS_GPUMEM_OOM_KEEP kept) */
	struct gs_gpumem_oom oom[GS_GPUMEM_OOM_KEEP];
	struct gs_gpumem_losses lost;
};

struct gs_gpumem;
struct gs_proc_table;

/* A live set with a process table of its own; bind: keep the processes'
 * states in the slots of the session's table t instead (id: a handler
 * registered for it; before the first call). */
struct gs_gpumem *gs_gpumem_new(void);
int gs_gpumem_bind(struct gs_gpumem *m, struct gs_proc_table *t, int id);
void gs_gpumem_free(struct gs_gpumem *m);

/* The driver's calls as the uprobes see them (records.h gs_mem_*): an
 * allocation entered (its raw arguments and the caller's stack), its
 * return (paired by thread and entry time; -ENOENT when no such call is in
 * flight: counted), a free-like call.  Each is applied to the live set as
 * the functions below do. */
int gs_gpumem_call(struct gs_gpumem *m, uint32_t tgid, uint32_t tid, uint64_t call_ns,
		   enum gs_gpumem_fn fn, const uint64_t args[4], uint32_t stack);
struct gs_gpumem_ret {
	uint32_t tid;
	int32_t result;      /* CUresult */
	uint64_t call_ns;    /* the call's entry time, as given to gs_gpumem_call */
	uint64_t t_ns;       /* the return's time */
	uint64_t out, aux;   /* the out-parameter and *args[1] after the call */
	bool out_ok, aux_ok; /* whether they could be read */
};
int gs_gpumem_return(struct gs_gpumem *m, uint32_t tgid, const struct gs_gpumem_ret *r);
int gs_gpumem_free_call(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_fn fn,
			const uint64_t args[2], uint64_t t_ns);

/* A successful allocation of size bytes at addr (an address, or a handle
 * for GS_GPUMEM_PHYS) in tgid from stack.  0 (also when it is only
 * counted: see losses), -ENOMEM. */
int gs_gpumem_alloc(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_space sp, uint64_t addr,
		    uint64_t size, uint32_t stack, uint64_t t_ns);
/* addr was given back.  0, -ENOENT (not live: counted), -ENOMEM. */
int gs_gpumem_release(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_space sp, uint64_t addr,
		      uint64_t t_ns);
/* An allocation answered CUDA_ERROR_OUT_OF_MEMORY. */
int gs_gpumem_oom(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_fn fn, uint64_t size,
		  uint32_t stack, uint64_t t_ns);
/* cuMemMap / cuMemUnmap: counted. */
int gs_gpumem_count(struct gs_gpumem *m, uint32_t tgid, enum gs_gpumem_fn fn);
/* tgid exited: its live set is what it held at exit (kept for the
 * profile's inuse values), nothing more changes it. */
void gs_gpumem_exit(struct gs_gpumem *m, uint32_t tgid);

/* Processes in order of first sight; NULL past the end. */
size_t gs_gpumem_nprocs(const struct gs_gpumem *m);
const struct gs_gpumem_proc *gs_gpumem_proc_at(const struct gs_gpumem *m, size_t i);

/* Device bytes (DEVICE + PHYS) by stack of process i: live now (or at its
 * exit), live at its peak, allocated in the window (count: allocations).
 * *n entries, largest bytes first; the array is the map's until its next
 * change. 0, -ENOMEM. */
enum gs_gpumem_view { GS_GPUMEM_LIVE, GS_GPUMEM_AT_PEAK, GS_GPUMEM_ALLOCATED };
int gs_gpumem_by_stack(struct gs_gpumem *m, size_t i, enum gs_gpumem_view v,
		       const struct gs_gpumem_stack_bytes **out, size_t *n);
/* Device bytes live over time of process i (at most GS_GPUMEM_SERIES_MAX
 * points: a long run keeps every other point when full, peaks kept). */
const struct gs_gpumem_point *gs_gpumem_series(const struct gs_gpumem *m, size_t i, size_t *n);

#endif
