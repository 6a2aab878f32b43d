/* SPDX-License-Identifier: MIT */
/*
 * Private to native/cfi_rows.c (the row builder) and native/cfi.c (the BPF maps):
 * what the two halves share.  Not a public contract.
 */
#ifndef GS_BPF_CFI_INT_H
#define GS_BPF_CFI_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpusample/records.h"
#include "native/native.h"
#include "util/hashmap.h"

/* Distinct rules, ids in order of first sight: a table's local rules while
 * it is built, and the global ids of gs_cfi_rules in native/cfi.c. */
struct gs_cfi_rule_set {
	struct gs_cfi_rule *rules;
	uint32_t n, cap;
	struct gs_hmap ids; /* the rule's 8 bytes -> its id */
};

/* Id of r in s (added when new); <0 on ENOMEM. */
int64_t gs_cfi_rule_set_id(struct gs_cfi_rule_set *s, const struct gs_cfi_rule *r);
void gs_cfi_rule_set_free(struct gs_cfi_rule_set *s);

/* The time one object's table may take (native/cfi_rows.c has the other bounds). */
#define GS_CFI_BUILD_MAX_NS (30ull * 1000000000ull)

struct gs_cfi_build_limits {
	uint64_t deadline_ns;      /* CLOCK_MONOTONIC; stop there, keep the rows so far */
	const atomic_bool *cancel; /* NULL or: give up (gs_cfi_close) */
	_Atomic uint64_t *rows;    /* NULL or: progress for the session */
};

/* gs_cfi_table_build under lim (the builder thread adds cancel and
 * progress); libdw: the reference builder.  fd < 0: open path. */
int gs_cfi_table_build_bounded(const char *path, int fd, struct gs_cfi_table *t,
			       const struct gs_cfi_build_limits *lim, bool libdw);

#endif
