/* SPDX-License-Identifier: MIT */
/*
 * Terminal escaping of target strings.  Strings from the target
 * (qualnames, file names, comm, thread names, agent status text, library
 * names in progress and debug lines) must not drive the terminal that shows
 * the report or the log.  Escaped: C0 controls, DEL and bytes that are not
 * valid UTF-8 as "\xNN"; C1 controls (U+0080-U+009F) and bidi
 * overrides/isolates as "\uXXXX".  Other valid UTF-8 is kept.  Here, not in
 * output/, because every component that logs a target's string needs it.
 */
#ifndef GS_UTIL_ESCAPE_H
#define GS_UTIL_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1-4), 0 when it is not one. */
int gs_utf8_len(const unsigned char *s);
bool gs_term_needs_escape(const char *s);
/* Escaped s into out (whole escapes only; truncates); returns the length. */
size_t gs_term_escape(const char *s, char *out, size_t outlen);

#endif
