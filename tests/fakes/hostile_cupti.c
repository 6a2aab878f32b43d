// SPDX-License-Identifier: MIT
/* A libcupti whose SASS-to-source call does what the real one did with a
 * mutated cubin (issue 24): it blocks every signal it can and allocates
 * forever.  Only the wall around libcupti (gpu/cuda.c) ends it. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

__attribute__((visibility("default"))) int cuptiGetSassToSourceCorrelation(void *params)
{
	sigset_t all;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		char *m = malloc(64 << 20);

		if (m)
			memset(m, 1, 64 << 20);
	}
}

__attribute__((visibility("default"))) int cuptiGetCubinCrc(void *params)
{
	return 1;
}
