/* SPDX-License-Identifier: MIT */
/*
 * The file of a harness whose input is [8-byte little-endian file size]
 * [file bytes]: the bytes at offset 0 of a memfd then made that size (at
 * most 8 GiB, never less than the bytes), a hole past them, as a hostile
 * job's sparse files are.  Returns the fd, -1 for an input under 8 bytes;
 * aborts when the memfd cannot be made (not a finding of the code under
 * test, a broken harness).
 */
#ifndef GS_FUZZ_SPARSE_MEMFD_H
#define GS_FUZZ_SPARSE_MEMFD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GS_FUZZ_MAX_SPARSE (8ull << 30)

static inline int gs_fuzz_sparse_memfd(const uint8_t *data, size_t size, const char *name)
{
	uint64_t want = 0;
	int fd;

	if (size < 8)
		return -1;
	memcpy(&want, data, 8);
	data += 8;
	size -= 8;
	want %= GS_FUZZ_MAX_SPARSE;
	if (want < size)
		want = size;
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if ((size && pwrite(fd, data, size, 0) != (ssize_t)size) || ftruncate(fd, (off_t)want))
		abort();
	return fd;
}

#endif
