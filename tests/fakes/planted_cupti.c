// SPDX-License-Identifier: MIT
/*
 * A hostile "libcupti" for tests/integration/t_gpu_cupti_trust.sh: what a
 * job's user could plant in the job's own mappings or in CUDA_HOME.  It has
 * the two offline entry points gpusample's host side looks for, and a
 * constructor that, when it runs as root, writes LOADED_AS_ROOT next to
 * itself: that file appearing means gpusample ran the user's code as root.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void planted(void)
{
	Dl_info i;
	char path[4096];

	if (geteuid() != 0 || !dladdr((void *)planted, &i) || !i.dli_fname)
		return;
	snprintf(path, sizeof(path), "%s", i.dli_fname);
	char *slash = strrchr(path, '/');
	if (!slash)
		return;
	snprintf(slash, sizeof(path) - (size_t)(slash - path), "/LOADED_AS_ROOT");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
}

int cuptiGetSassToSourceCorrelation(void *p);
int cuptiGetCubinCrc(void *p);
int cuptiGetSassToSourceCorrelation(void *p)
{
	(void)p;
	return 1;
}
int cuptiGetCubinCrc(void *p)
{
	(void)p;
	return 1;
}
