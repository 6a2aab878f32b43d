/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "util/log.h"

void gs_vlog(const char *fmt, va_list ap)
{
	fputs("gpusample: ", stderr);
	vfprintf(stderr, fmt, ap);
}

void gs_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gs_vlog(fmt, ap);
	va_end(ap);
}

void gs_log_more(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
