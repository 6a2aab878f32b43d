// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: ELF header bombs, by header synthesis rather than by
 * file size.  A hostile job maps a small sparse file whose headers claim
 * 16M sections (e_shnum 0, section 0's sh_size) or 50M program headers
 * (PN_XNUM, section 0's sh_info); libelf allocates per claimed entry, so
 * gpusample checks the headers first (gs_elf_headers_check).  The input is
 * [8-byte little-endian file size][file bytes]: the bytes are written at
 * offset 0 of a memfd that is then made that size (a hole: sparse, as the
 * attack's file was), at most 8 GiB.  Headers the check lets through are
 * opened with libelf exactly as the ELF cache does and every program and
 * section header is read; libFuzzer's -rss_limit_mb/-malloc_limit_mb turn a
 * bomb that got past the check into a finding.
 */
#include <gelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/sparse_memfd.h"
#include "proc/proc.h"


static void read_all_headers(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t n = 0, shstrndx = 0;

	if (!e)
		return;
	if (!elf_getphdrnum(e, &n))
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			(void)gelf_getphdr(e, (int)i, &ph);
		}
	if (elf_getshdrstrndx(e, &shstrndx))
		shstrndx = 0;
	for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
		GElf_Shdr sh;
		if (gelf_getshdr(s, &sh) && shstrndx)
			(void)elf_strptr(e, shstrndx, sh.sh_name);
	}
	elf_end(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why;

	if (elf_version(EV_CURRENT) == EV_NONE)
		abort();
	int fd = gs_fuzz_sparse_memfd(data, size, "fuzz_elf");
	if (fd < 0)
		return 0;
	if (gs_elf_headers_check(fd, &why) == 0)
		read_all_headers(fd);
	else if (!why)
		abort(); /* a refusal always says why */
	close(fd);
	return 0;
}
