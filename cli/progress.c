/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/progress.h"

static char gpu_summary[128];

void gs_progress_set_gpu(const char *summary)
{
	snprintf(gpu_summary, sizeof(gpu_summary), "%s", summary ? summary : "");
}

void gs_progress_line(double elapsed_s, size_t cpu_samples, uint64_t lost, uint32_t live_procs,
		      uint32_t all_procs, bool final)
{
	static int tty = -1;

	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	/* \r + erase-line keeps one line updated in place. */
	fprintf(stderr,
		"\r\033[Kgpusample: %.1f s | cpu samples %zu | lost %llu | processes %u/%u%s%s%s",
		elapsed_s, cpu_samples, (unsigned long long)lost, live_procs, all_procs,
		gpu_summary[0] ? " | " : "", gpu_summary, final ? "\n" : "");
	fflush(stderr);
}
