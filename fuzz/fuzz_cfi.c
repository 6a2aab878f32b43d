// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: the CFI table builder (native/cfi_rows.c) on crafted ELF
 * objects, the way a hostile job can hand them to gpusample (a library it
 * maps).  An input starting with "\x7fELF" is the whole file; anything else
 * is taken as the contents of .eh_frame and wrapped into a minimal x86-64
 * ELF (so mutations go to the CFI, not to ELF headers).  The table must be
 * sorted and every lookup must land on a row or NULL.
 */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpusample/records.h"
#include "native/native.h"

static const char shstrtab[] = "\0.eh_frame\0.shstrtab";

/* ELF header, .eh_frame at vaddr 0x1000 (file offset 0x40), .shstrtab, then
 * section headers [null, .eh_frame, .shstrtab]. */
static size_t wrap_eh_frame(const uint8_t *eh, size_t n, uint8_t **out)
{
	size_t off_eh = sizeof(Elf64_Ehdr), off_str = off_eh + n;
	size_t off_sh = (off_str + sizeof(shstrtab) + 7) & ~(size_t)7;
	size_t total = off_sh + 3 * sizeof(Elf64_Shdr);
	uint8_t *b = calloc(1, total);
	Elf64_Ehdr *h = (Elf64_Ehdr *)b;
	Elf64_Shdr *sh;

	if (!b)
		return 0;
	memcpy(h->e_ident, ELFMAG, SELFMAG);
	h->e_ident[EI_CLASS] = ELFCLASS64;
	h->e_ident[EI_DATA] = ELFDATA2LSB;
	h->e_ident[EI_VERSION] = EV_CURRENT;
	h->e_type = ET_DYN;
	h->e_machine = EM_X86_64;
	h->e_version = EV_CURRENT;
	h->e_ehsize = sizeof(Elf64_Ehdr);
	h->e_shoff = off_sh;
	h->e_shentsize = sizeof(Elf64_Shdr);
	h->e_shnum = 3;
	h->e_shstrndx = 2;
	memcpy(b + off_eh, eh, n);
	memcpy(b + off_str, shstrtab, sizeof(shstrtab));
	sh = (Elf64_Shdr *)(b + off_sh);
	sh[1] = (Elf64_Shdr){ .sh_name = 1,
			      .sh_type = SHT_PROGBITS,
			      .sh_flags = SHF_ALLOC,
			      .sh_addr = 0x1000,
			      .sh_offset = off_eh,
			      .sh_size = n,
			      .sh_addralign = 8 };
	sh[2] = (Elf64_Shdr){ .sh_name = 11,
			      .sh_type = SHT_STRTAB,
			      .sh_offset = off_str,
			      .sh_size = sizeof(shstrtab),
			      .sh_addralign = 1 };
	*out = b;
	return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	uint8_t *file = (uint8_t *)data, *wrapped = NULL;
	size_t n = size;
	struct gs_cfi_table t;

	if (fd < 0 && (fd = memfd_create("fuzz_cfi", 0)) < 0)
		abort();
	if (size < 4 || memcmp(data, ELFMAG, SELFMAG)) {
		n = wrap_eh_frame(data, size, &wrapped);
		file = wrapped;
	}
	if (ftruncate(fd, 0) || pwrite(fd, file, n, 0) != (ssize_t)n)
		abort();
	if (gs_cfi_table_build("fuzz", fd, &t) == 0) {
		for (uint32_t i = 1; i < t.n_rows; i++)
			if (t.rows[i - 1].pc >= t.rows[i].pc)
				abort(); /* rows must be strictly sorted */
		for (uint32_t i = 0; i < t.n_rows; i++) {
			if (t.rows[i].rule >= t.n_rules)
				abort();
			gs_cfi_table_lookup(&t, t.rows[i].pc);
		}
		gs_cfi_table_lookup(&t, 0);
		gs_cfi_table_lookup(&t, UINT64_MAX);
		gs_cfi_table_free(&t);
	}
	free(wrapped);
	return 0;
}
