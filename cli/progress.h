/* SPDX-License-Identifier: MIT */
/* The progress line on stderr (only when stderr is a terminal). */
#ifndef GS_CLI_PROGRESS_H
#define GS_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void gs_progress_set_gpu(const char *summary); /* "" when no GPU agent seen */
void gs_progress_line(double elapsed_s, size_t cpu_samples, uint64_t lost, uint32_t live_procs,
		      uint32_t all_procs, bool final);

#endif
