/* SPDX-License-Identifier: MIT */
/* The progress line on stderr (only when stderr is a terminal). */
#ifndef GS_CLI_PROGRESS_H
#define GS_CLI_PROGRESS_H

#include "session/session.h"

/* Draw p as the one progress line (\r, erase line; a newline when final). */
void gs_progress_show(const struct gs_session_progress *p);

#endif
