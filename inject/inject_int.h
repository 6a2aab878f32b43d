/* SPDX-License-Identifier: MIT */
/* Private to inject/: the one message helper of its files. */
#ifndef GS_INJECT_INJECT_INT_H
#define GS_INJECT_INJECT_INT_H

#include <stddef.h>

/* Format one line into msg (when msg and len) and return err. */
int gs_inject_say(char *msg, size_t len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
