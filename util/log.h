/* SPDX-License-Identifier: MIT */
/*
 * The one logging helper: a message for the user on stderr, prefixed
 * "gpusample: ".  fmt carries its own trailing newline (a message may be
 * built from several calls of gs_log_more).  Strings that come from the
 * target must be escaped first (output/output.h gs_term_escape).
 */
#ifndef GS_UTIL_LOG_H
#define GS_UTIL_LOG_H

#include <stdarg.h>

void gs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The rest of a message started with gs_log, without the prefix. */
void gs_log_more(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_vlog(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
