/* SPDX-License-Identifier: MIT */
/* Command line -> struct gs_options (session/session.h): cli/ only parses;
 * nothing below cli/ sees argv or the terminal. */
#ifndef GS_CLI_OPTIONS_H
#define GS_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "session/session.h"

/* What the command line asks for: a profiling run (run), or one of the
 * other commands. */
struct gs_cli {
	struct gs_options run;
	char **report_files; /* `gpusample report FILE...` */
	int n_report_files;
	const char *report_html; /* `gpusample report --html OUT FILE...` */
	const char *merge_out;   /* `gpusample merge OUT IN...` */
	char **merge_in;
	int n_merge_in;
	bool check; /* `gpusample check` */
	bool dump;  /* `gpusample dump -p PID...`: run holds its -p and flags */
};

/* Parse argv.  Returns 0, 1 when the caller should exit 0 (help/version
 * printed), or -EINVAL after printing a one-line error to stderr. */
int gs_options_parse(struct gs_cli *cli, int argc, char **argv);
void gs_options_usage(FILE *out);

#endif
