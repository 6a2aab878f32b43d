/* SPDX-License-Identifier: MIT */
/* One profiling run: targets -> BPF sampler -> records -> symbolize -> write.
 * The only place that wires the components together. */
#ifndef GS_CLI_SESSION_H
#define GS_CLI_SESSION_H

#include "cli/options.h"

/* Runs a whole session; returns the process exit status (0 ok, 1 error;
 * in launch mode the command's own failure does not make gpusample fail). */
int gs_session_run(const struct gs_options *o);

/* `gpusample report FILE`: read a profile back and print the report. */
int gs_report_file(const char *path);

#endif
