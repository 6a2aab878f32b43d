/* SPDX-License-Identifier: MIT */
/*
 * C++ (Itanium ABI) demangling with libiberty's cplus_demangle, linked
 * statically (libiberty.a), so gpusample needs no libstdc++.
 */
#include <stdlib.h>
#include <string.h>
#include <libiberty/demangle.h>
#include "native/native.h"

char *gs_demangle(const char *mangled)
{
	if (!mangled || strncmp(mangled, "_Z", 2))
		return NULL;
	/* Versioned dynamic symbols ("_ZN3foo3barEv@@LIB_1.0") demangle
	 * without the version, which is appended back. */
	const char *at = strchr(mangled, '@');
	char *base = at ? strndup(mangled, (size_t)(at - mangled)) : NULL;
	char *d = cplus_demangle(base ? base : mangled, DMGL_PARAMS | DMGL_ANSI);
	free(base);
	if (!d || !at)
		return d;
	size_t dl = strlen(d), al = strlen(at);
	char *r = realloc(d, dl + al + 1);
	if (!r) {
		free(d);
		return NULL;
	}
	memcpy(r + dl, at, al + 1);
	return r;
}
