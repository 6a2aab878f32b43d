/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <unistd.h>

#include "cli/progress.h"

void gs_progress_show(const struct gs_session_progress *p)
{
	static int tty = -1;

	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	/* \r + erase-line keeps one line updated in place. */
	fprintf(stderr,
		"\r\033[Kgpusample: %.1f s | cpu samples %zu | lost %llu | processes %u/%u%s%s%s",
		p->elapsed_s, p->cpu_samples, (unsigned long long)p->lost, p->live_procs, p->procs,
		p->gpu[0] ? " | " : "", p->gpu, p->final ? "\n" : "");
	fflush(stderr);
}
