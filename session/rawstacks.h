/* SPDX-License-Identifier: MIT */
/* Deduplicated raw stacks as recorded by BPF (before symbolization): one
 * entry per distinct (tgid, kernel ips, user ips, Python frames, flags).
 * Symbolization then runs once per distinct stack, not once per sample. */
#ifndef GS_CLI_RAWSTACKS_H
#define GS_CLI_RAWSTACKS_H

#include <stdbool.h>
#include <stdint.h>
#include "gpusample/records_codec.h"
#include "util/hashmap.h"

struct gs_rawstack {
	uint32_t tgid;
	uint16_t flags; /* GS_CPU_* that affect the stack shape */
	uint8_t n_kernel, n_user;
	uint16_t n_python;
	uint32_t settled; /* profile stack + 1 once symbolized early (its
			   * process retired), 0 before; frames are then NULL */
	__u64 *frames;    /* kernel ips, user ips, then Python frames (2 u64 each) */
};

struct gs_rawstacks {
	struct gs_rawstack *items;
	uint32_t n;
	size_t cap;
	struct gs_hmap index; /* stack hash -> item index */
};

void gs_rawstacks_init(struct gs_rawstacks *t);
void gs_rawstacks_free(struct gs_rawstacks *t);
/* The stack of a decoded CPU sample (its view's frame runs): returns the
 * stack index (>= 0) or -ENOMEM; *is_new tells whether it was first seen
 * now. */
int64_t gs_rawstacks_intern(struct gs_rawstacks *t, const struct gs_rec_cpu_view *v, uint16_t flags,
			    bool *is_new);

/* Stack idx symbolized as profile stack `stack` (its process exited): its
 * frames are freed and a later identical stack of the same tgid (the pid
 * handed out again) is a new entry. */
void gs_rawstacks_settle(struct gs_rawstacks *t, uint32_t idx, uint32_t stack);

static inline const struct gs_py_frame *gs_rawstack_py(const struct gs_rawstack *r)
{
	return (const struct gs_py_frame *)(r->frames + r->n_kernel + r->n_user);
}

#endif
