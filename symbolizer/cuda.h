/* SPDX-License-Identifier: MIT */
/*
 * GPU PC symbolization: cubins, kernel functions, SASS pcOffsets and stall
 * reasons turned into profile-model entries.
 *
 * Cubins: the GPU agent reports each loaded module (CUPTI MODULE_LOADED) with
 * its cubinCrc; the host copies the bytes out of the target and hands them to
 * gs_cuda_add_cubin().  A PC record names (cubinCrc, mangled function name,
 * pcOffset); gs_cuda_location() turns that into one pprof Location:
 *   - Mapping: one per cubin, build_id = CRC as 16 hex digits, file = the
 *     module's origin when known else "cubin:<crc hex>", start 0, limit =
 *     cubin size (1 when the bytes were never seen), has_functions set,
 *     has_lines once any PC of it resolved to a source line.
 *   - Function: name = demangled kernel (libiberty, parameters kept),
 *     system_name = the mangled name when it differs, file = the .cu file of
 *     the resolved line (so `pprof -lines` prints kernel file.cu:N).
 *   - Location: kind GS_FRAME_GPU_PC, address = pcOffset (function-relative,
 *     as CUPTI reports it), one Line {kernel, source line or 0}.
 * Source lines come from libcupti's offline cuptiGetSassToSourceCorrelation,
 * which works without a GPU or driver.  A line of 0 or a NULL file means "no
 * line info" whatever the return code (cubins built without -lineinfo return
 * CUPTI_SUCCESS with line 0).  Such kernels are still attributed per function
 * and pcOffset.  Results are cached per (cubin, function, pcOffset).
 *
 * libcupti is dlopen'ed on first need, never linked: gpusample links
 * statically and must run on hosts without CUDA.  gpusample runs as root and
 * a library's constructor runs at dlopen, so only trusted files are loaded
 * (gs_cuda_trusted_lib: root-owned, not group/other-writable, up to /):
 * the --cupti file (gs_cuda_set_cupti), else the toolkit
 * (/usr/local/cuda/{extras/CUPTI/lib64,lib64,targets/x86_64-linux/lib,lib},
 * /usr/local/cuda-*), the distribution's /usr/lib/x86_64-linux-gnu, then
 * system-wide PyTorch wheels (nvidia/cu13/lib, nvidia/cuda_cupti/lib).  Never
 * the libcupti the target maps, nothing under /proc/PID/root, and no
 * environment variable (CUDA_HOME, VIRTUAL_ENV, ... of a sudo caller).  A
 * library without the two offline entry points is skipped (a CUPTI double).
 * Without libcupti everything still works minus source lines (and minus CRC
 * computation for cubins whose CRC the agent did not report).
 *
 * Stall reasons: CUPTI names them "smsp__pcsamp_warps_issue_stalled_<reason>"
 * with a "<reason>_not_issued" twin (a subset count: never add the two), plus
 * two counters, "smsp__pcsamp_sample_count" and
 * "smsp__pcsamp_samples_data_dropped", which are not stall reasons and are
 * excluded.  Indices differ per architecture, so tables are kept per
 * (pid, context) exactly as CUPTI returned them for that context.
 *
 * Errors: 0 or a negative errno.  Resolution never fails on bad input: an
 * unknown cubin or function still gets a location.  Location ids are 0 only
 * on allocation failure.
 */
#ifndef GS_SYMBOLIZER_CUDA_H
#define GS_SYMBOLIZER_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/profile.h"
#include "gpusample/stall.h"

struct gs_cuda;

struct gs_cuda *gs_cuda_new(struct gs_profile *p);
void gs_cuda_free(struct gs_cuda *c);

/* ---- libcupti (offline correlation) ------------------------------------ */

/* Whether root may load the library at path: its real path is a regular
 * file and it and every directory above it are owned by root and not
 * writable by group or others, so no other user can have written or swapped
 * it.  real (real_len bytes) gets the resolved path to load.  0 when
 * trusted; -EPERM (or the stat errno) with a sentence in why otherwise. */
int gs_cuda_trusted_lib(const char *path, char *real, size_t real_len, char *why, size_t len);
/* --cupti PATH: load this libcupti instead of searching ("none": no
 * libcupti, no source lines).  Checked with gs_cuda_trusted_lib() now, so a
 * bad path is refused before sampling starts (why says what is wrong).
 * Only effective before the first load. */
int gs_cuda_set_cupti(struct gs_cuda *c, const char *path, char *why, size_t len);
/* Load libcupti now if not yet tried.  0 when loaded, -ENOENT when none was
 * found (reason in gs_cuda_cupti_info()). */
int gs_cuda_load_cupti(struct gs_cuda *c);
/* Path of the loaded libcupti, or a sentence saying why there is none and
 * what to do.  Never NULL once gs_cuda_load_cupti() ran; NULL before. */
const char *gs_cuda_cupti_info(const struct gs_cuda *c);

/* The cubin key, gs_cubin_hash (records.h): the same full 64-bit hash the
 * agent registers with CUPTI for PC records.  -EINVAL on an empty image. */
int gs_cuda_cubin_crc(struct gs_cuda *c, const void *cubin, size_t len, uint64_t *crc);

/* ---- cubins ------------------------------------------------------------- */

/* Register a cubin image (copied).  crc: as the agent reported it (the value
 * PC records carry); 0 = compute it with libcupti (-ENOENT without).  origin:
 * module name for the Mapping's file, NULL for "cubin:<crc>".  pid: the
 * process that loaded it (informational; the CRC is the key).  Adding a CRC
 * twice keeps the first image.  Must come before the first gs_cuda_location()
 * of that CRC to give it source lines.  *crc_out (may be NULL) gets the key. */
int gs_cuda_add_cubin(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len, uint32_t pid,
		      const char *origin, uint64_t *crc_out);
/* Same without the copy: the caller keeps cubin valid and unchanged until
 * gs_cuda_free() (e.g. bytes held by bpf/gpu_host.c, which can run to
 * hundreds of MB for libtorch_cuda). */
int gs_cuda_add_cubin_borrowed(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len,
			       uint32_t pid, const char *origin, uint64_t *crc_out);
bool gs_cuda_has_cubin(const struct gs_cuda *c, uint64_t crc);
/* The agent announced this cubin (GS_REC_GPU_CUBIN), whether or not its
 * bytes could be kept.  0 or -ENOMEM. */
int gs_cuda_cubin_announced(struct gs_cuda *c, uint64_t crc);
/* Whether PC records of crc come from a cubin that was never announced and
 * is not registered: a module loaded while the agent was dormant (it holds
 * no CUPTI subscription then, and a module's cubin cannot be had later).
 * Such kernels get locations per kernel and pcOffset, without lines. */
bool gs_cuda_cubin_unannounced(const struct gs_cuda *c, uint64_t crc);
/* Distinct kernels (and cubins) located so far from never-announced cubins. */
void gs_cuda_unannounced(const struct gs_cuda *c, uint64_t *kernels, uint64_t *cubins);

/* Functions (STT_FUNC symbols) of a cubin image, read with libelf: name and
 * size in bytes of SASS (valid pcOffsets are [0, size)).  Calls fn for each;
 * a non-zero return from fn stops and is returned. */
int gs_cuda_cubin_functions(const void *cubin, size_t len,
			    int (*fn)(void *ctx, const char *name, uint64_t size), void *ctx);

/* ---- locations ---------------------------------------------------------- */

/* Location id for (cubin CRC, mangled function name, pcOffset); cached.
 * Its source line is looked up right away, or, after
 * gs_cuda_defer_lines(c, true), by gs_cuda_resolve_lines(): the lookup
 * (cuptiGetSassToSourceCorrelation, 0.6-2.7 ms per PC on a 7 MB cubin) then
 * stays out of the loop that reads the ring buffer.  Cubins without line
 * sections are never looked up (checked once per cubin). */
uint32_t gs_cuda_location(struct gs_cuda *c, uint64_t crc, const char *function,
			  uint64_t pc_offset);
/* The same for a PC record of process pid, under the caps below (pid 0:
 * gs_cuda_location's).  Kernel names and PC offsets come from the target:
 * a new kernel (cubin CRC, mangled name) past GS_CUDA_KERNELS_* or the name
 * bytes past GS_CUDA_NAME_BYTES_*, or a new location past
 * GS_CUDA_LOCATIONS_*, is not made (nothing interned) and the PC gets the
 * one "[other kernels]" location, counted (gs_cuda_cap_losses).  A real
 * job has thousands of kernels (libtorch_cuda: ~10k) and sampled PCs in
 * the tens of thousands; a hostile one made a new name per PC (issue 24,
 * item 6: 1.36 GB in 25 s).  The first process to make a kernel or
 * location is charged with it. */
#define GS_CUDA_KERNELS_PER_PID    65536u
#define GS_CUDA_KERNELS_TOTAL      262144u
#define GS_CUDA_NAME_BYTES_PER_PID (32ull << 20)
#define GS_CUDA_NAME_BYTES_TOTAL   (128ull << 20)
#define GS_CUDA_LOCATIONS_PER_PID  262144u
#define GS_CUDA_LOCATIONS_TOTAL    1048576u
/* What a location and a kernel (besides its names) are charged to the
 * run's memory budget (util/membudget.h): an estimate of the profile's
 * location, line and function entries and the caches' slots, rounded up. */
#define GS_CUDA_LOCATION_BYTES 160u
#define GS_CUDA_KERNEL_BYTES   256u
/* Stall indices missing from the context's table get "stall_<index>" names
 * up to this many distinct indices, then "stall_other". */
#define GS_CUDA_UNKNOWN_STALLS 1024u
uint32_t gs_cuda_location_pid(struct gs_cuda *c, uint32_t pid, uint64_t crc, const char *function,
			      uint64_t pc_offset);
struct gs_cuda_cap_losses {
	uint64_t kernels;   /* PC records of new kernels past the kernel or name-byte caps */
	uint64_t locations; /* PC records of new locations past the location caps */
};
void gs_cuda_cap_losses(const struct gs_cuda *c, struct gs_cuda_cap_losses *l);
void gs_cuda_defer_lines(struct gs_cuda *c, bool defer);
/* Fill in the source lines of every location made since the last call
 * (deferred mode); the profile's lines and functions change in place,
 * location ids stay.  0 or -ENOMEM. */
int gs_cuda_resolve_lines(struct gs_cuda *c);
/* libcupti gets target bytes (cubins from the agent channel): every lookup
 * runs in a child process with wall_mem more address space than gpusample
 * has (RLIMIT_AS), RLIMIT_CPU, and is killed after wall_ms per batch; the
 * lines it did not give are counted and named in the profile's comments.
 * -EINVAL for a zero time or under 16 MiB. */
#define GS_CUPTI_WALL_MS  30000u
#define GS_CUPTI_WALL_MEM (4ull << 30)
int gs_cuda_set_cupti_limits(struct gs_cuda *c, uint32_t wall_ms, uint64_t mem_bytes);

/* Source line of a pcOffset without touching the profile: *line = 0 and
 * file[0] = 0 when there is none.  -ENOENT: no such cubin or no libcupti;
 * -EINVAL: libcupti rejected the query (unknown function). */
int gs_cuda_source_line(struct gs_cuda *c, uint64_t crc, const char *function, uint64_t pc_offset,
			char *file, size_t file_len, uint32_t *line);

/* ---- stall reasons ------------------------------------------------------ */

/* Short name of a CUPTI stall reason into buf: prefix
 * "smsp__pcsamp_warps_issue_stalled_" and suffix "_not_issued" stripped,
 * e.g. "long_scoreboard".  Names without the prefix are kept as they are
 * (minus "smsp__pcsamp_").  The kind is not decided here: see
 * gpusample/stall.h. */
void gs_cuda_stall_short(const char *name, char *buf, size_t len);

/* Stall table of one context, as the agent sent it: n triples (CUPTI
 * index, GS_GPU_STALL_* flags from the wire, full name); the flags decide
 * each reason's kind (gs_stall_kind).  A second table for the same
 * (pid, context) replaces the first. */
int gs_cuda_add_stall_table(struct gs_cuda *c, uint32_t pid, uint32_t context, int32_t device,
			    size_t n, const uint32_t *indices, const uint32_t *flags,
			    const char *const *names);

/* One PC record's stall reasons as CUPTI gives them (index, samples). */
struct gs_cuda_stall_in {
	uint32_t index;
	uint32_t samples;
};
/* Per short reason: base samples and not-issued samples of one PC. */
struct gs_cuda_stall_out {
	gs_str reason;       /* interned short name in the profile */
	uint64_t samples;    /* base family -> GS_V_GPU_SAMPLES */
	uint64_t not_issued; /* twin -> GS_V_GPU_NOT_ISSUED */
};
/* Fold a PC record's (index, samples) pairs into per-reason values using the
 * table of (pid, context).  Counters are skipped; an index missing from the
 * table (or no table at all) becomes reason "stall_<index>" (base).  out has
 * room for max entries; *n_out gets the count (reasons with both values 0 are
 * left out).  -ENOSPC when out is too small. */
int gs_cuda_fold_stalls(struct gs_cuda *c, uint32_t pid, uint32_t context,
			const struct gs_cuda_stall_in *in, size_t n_in,
			struct gs_cuda_stall_out *out, size_t max, size_t *n_out);

/* ---- device facts and run counters (profile comments) ------------------ */

struct gs_cuda_device_info {
	const char *name;      /* "NVIDIA H200", may be NULL */
	uint32_t sm_clock_khz; /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE */
	uint32_t sm_count;     /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
	uint32_t period_exp;   /* sampling period = 2^period_exp SM cycles; 0 unknown */
	const char *mode;      /* "continuous" / "kernel-serialized", may be NULL */
};
int gs_cuda_set_device(struct gs_cuda *c, uint32_t pid, int32_t device,
		       const struct gs_cuda_device_info *info);
/* Add one GetData drain's counters (CUpti_PCSamplingData totalSamples,
 * droppedSamples, nonUsrKernelsTotalSamples). */
void gs_cuda_add_counts(struct gs_cuda *c, uint32_t pid, int32_t device, uint64_t total,
			uint64_t dropped, uint64_t non_user);
/* Write one comment line per (pid, device) seen: period, SM clock and count,
 * ns per sample, totals, dropped and non-user-kernel samples; plus a line
 * about libcupti when source lines were unavailable. */
int gs_cuda_add_comments(struct gs_cuda *c);

/* ---- wire records (include/gpusample/records.h) -------------------------- */

struct gs_gpu_stall_table;
/* A GS_REC_GPU_STALL_TABLE record of size bytes: adds the table of
 * (gpu.tgid, gpu.ctx_uid) and the device facts it carries (period, mode,
 * SM count and clock).  -EINVAL when the record is malformed. */
int gs_cuda_stall_table_record(struct gs_cuda *c, const struct gs_gpu_stall_table *rec,
			       size_t size);

#endif
