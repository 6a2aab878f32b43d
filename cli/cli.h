/* SPDX-License-Identifier: MIT */
/* The commands of gpusample besides a profiling run (session/session.h). */
#ifndef GS_CLI_H
#define GS_CLI_H

#include "cli/options.h"

/* cli/profiles.c.  `gpusample report FILE...`: read profiles back (several
 * are merged into one view) and print the report, or with html (not NULL)
 * write it to that path as the HTML page of a run (gs_write_html);
 * returns the exit status. */
int gs_report_files(char **paths, int n, const char *html);
/* `gpusample merge OUT IN...`: merge profiles of one version into OUT. */
int gs_merge_files(const char *out, char **in, int n);
/* cli/dump.c.  `gpusample dump -p PID...`: every thread's stack now
 * (dump/dump.h), as text on stdout and, with -o PREFIX, PREFIX.pb.gz and
 * PREFIX.speedscope.json; returns the exit status. */
int gs_dump_main(const struct gs_options *o);
/* cli/check.c.  `gpusample check`: load every BPF program, print the
 * kernel, the probed features ("feature NAME yes|no") and each program's
 * verifier cost ("program NAME INSNS"); 0 when they load, else 1. */
int gs_check_bpf(void);

#endif
