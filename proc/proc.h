/* SPDX-License-Identifier: MIT */
/*
 * proc/: the processes of the target set, as the host sees them through
 * /proc.  One reader of /proc/PID/maps and one remote-memory reader for
 * every component (symbolizer, CFI tables, Python discovery, GPU host).
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
#include "gpusample/procmaps.h"

/* ---- maps snapshots ------------------------------------------------------ */

/* A snapshot: the mappings in the kernel's order (ascending start), each
 * as include/gpusample/procmaps.h parses a line (path: NULL for anonymous
 * memory, pseudo paths and " (deleted)" kept; it points into text and lives
 * as long as the snapshot).  Reference-counted so that a child shares its
 * parent's after fork. */
struct gs_proc_maps {
	uint32_t tgid;
	size_t n;
	struct gs_maps_line *m;
	char *text;           /* the file as read; paths point into it */
	unsigned refs;
};

/* Larger maps files are refused (-EFBIG): vm.max_map_count (65530 by
 * default) lines of at most ~4200 bytes stay far below. */
#define GS_PROC_MAPS_MAX_BYTES (256u << 20)

/* Read /proc/tgid/maps (O_NOFOLLOW, O_CLOEXEC; read at most
 * GS_PROC_MAPS_MAX_BYTES; each line parsed by gs_maps_parse_line, lines that
 * do not parse skipped).  A zombie or a kernel thread gives n == 0.
 * Returns 0 and *out (refs 1), -ESRCH when the process is gone, -EFBIG,
 * -ENOMEM or another -errno of open/read. */
int gs_proc_maps_read(uint32_t tgid, struct gs_proc_maps **out);

/* One more reference (returns s); drop one (frees at 0; NULL is a no-op). */
struct gs_proc_maps *gs_proc_maps_get(struct gs_proc_maps *s);
void gs_proc_maps_put(struct gs_proc_maps *s);

/* The mapping containing addr, or NULL. */
const struct gs_maps_line *gs_proc_maps_find(const struct gs_proc_maps *s, uint64_t addr);

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

#endif
