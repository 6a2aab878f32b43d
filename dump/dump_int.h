/* SPDX-License-Identifier: MIT */
/* What the files of dump/ share: the user-space walks (walk.c) that
 * collect.c runs per thread, and the text renderer's view (text.c). */
#ifndef GS_DUMP_INT_H
#define GS_DUMP_INT_H

#include <stdint.h>

#include "gpusample/records.h"
#include "proc/proc.h"

/* The native stack of one thread, by .eh_frame rows built per ELF object
 * (cached by object id over the dump), started from its saved registers. */
struct gs_dump_unwinder;
struct gs_dump_unwinder *gs_dump_unwinder_new(struct gs_elf_cache *elf);
void gs_dump_unwinder_free(struct gs_dump_unwinder *u);
/* ips[0..return) leaf first (ip first, return addresses above), at most
 * cap; *err gets enum gs_unwind_err.  maps: the process's snapshot. */
uint32_t gs_dump_unwind(struct gs_dump_unwinder *u, uint32_t tgid, const struct gs_proc_maps *maps,
			__u64 ip, __u64 sp, __u64 bp, bool bp_ok, __u64 *ips, uint32_t cap,
			uint16_t *err);

/* The Python stack of the thread whose fsbase is given, as the BPF walker
 * records it (bpf/python.bpf.h): out[0..return) innermost first, *flags
 * gets GS_CPU_PY_TRUNC / GS_CPU_PY_ERR. */
uint32_t gs_dump_python(uint32_t tgid, const struct gs_py_cfg *cfg, __u64 fsbase,
			struct gs_py_frame *out, uint32_t cap, uint16_t *flags);

#endif
