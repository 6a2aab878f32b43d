// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: compressed debug sections (gs_elf_inflate_check).  A
 * hostile job's library claims GiBs inflated per SHF_COMPRESSED (zlib,
 * zstd) or GNU .zdebug section; libdw inflates each whole at its claim, so
 * gpusample sums the claims from the headers first and refuses a file over
 * its cap.  The input is [8-byte little-endian file size][file bytes],
 * written at offset 0 of a memfd made that size (at most 8 GiB: a hole, as
 * the attack's sparse files were).  A file the check lets through is opened
 * with libelf and every compressed section inflated as libdw does
 * (elf_compress, elf_compress_gnu): what libelf inflated must not pass the
 * sum the check reported (the oracle: the check saw every section libelf
 * inflates), and -malloc_limit_mb/-rss_limit_mb turn an allocation past the
 * cap into a finding (the check's own inflating of .gnu_debugdata xz streams
 * included).  Seeds: fuzz/gen_compressed_sections_seeds.sh.
 */
#include <gelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/sparse_memfd.h"
#include "proc/proc.h"

#define CAP (256ull << 20)

/* Bytes libelf inflated for fd's compressed sections, as libdw asks. */
static uint64_t inflate_all(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx = 0;
	uint64_t sum = 0;

	if (!e)
		return 0;
	if (elf_getshdrstrndx(e, &shstrndx))
		shstrndx = 0;
	for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
		GElf_Shdr sh;
		const char *name;
		int rc = -1;

		if (!gelf_getshdr(s, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = shstrndx ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
		if (sh.sh_flags & SHF_COMPRESSED)
			rc = elf_compress(s, 0, 0);
		else if (name && !strncmp(name, ".zdebug", 7))
			rc = elf_compress_gnu(s, 0, 0);
		Elf_Data *d = rc == 1 ? elf_getdata(s, NULL) : NULL;
		if (d)
			sum += d->d_size;
	}
	elf_end(e);
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t claimed = 0;
	const char *why = NULL;

	if (elf_version(EV_CURRENT) == EV_NONE)
		abort();
	int fd = gs_fuzz_sparse_memfd(data, size, "fuzz_inflate");
	if (fd < 0)
		return 0;
	if (gs_elf_inflate_check(fd, CAP, &claimed, &why) == 0) {
		if (claimed > CAP || inflate_all(fd) > claimed)
			abort(); /* libelf inflated a section the check did not count */
	} else if (!why) {
		abort(); /* a refusal always says why */
	}
	close(fd);
	return 0;
}
