/* SPDX-License-Identifier: MIT */
/*
 * What inflating an ELF file's compressed sections would allocate, read by
 * pread from the headers alone, before libelf or libdw sees the file.
 *
 * libdw inflates every compressed debug section whole when it opens a
 * file's DWARF (and libdwfl a compressed .symtab when it reads symbols),
 * into a buffer of the size the section's header claims: an
 * SHF_COMPRESSED section's Elf32_Chdr/Elf64_Chdr ch_size (zlib or zstd),
 * or a GNU ".zdebug*" section's "ZLIB" + 8-byte big-endian size, after a
 * copy of the compressed bytes (sh_size) in libelf's read mode.  Those are
 * the memory at stake, so they are what is summed and capped.
 *
 * libdwfl also inflates a stripped file's ".gnu_debugdata" (MiniDebugInfo:
 * an xz-compressed ELF with a .symtab) when the file has no .symtab, into a
 * buffer it grows as the stream goes, with no limit: a 156 KB section of
 * xz'ed zeros took gpusample to 1.1 GB.  No header says that size, so the
 * stream is inflated here first, into a scratch buffer, counting: past the
 * cap, or past a decoder needing more than GS_ELF_XZ_MEMLIMIT, it is
 * refused; else twice its size (libdwfl's buffer doubles) and the decoder's
 * memory are counted.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <elf.h>
#include <lzma.h>
#include <stdlib.h>
#include "proc/proc.h"

/* deflate's best ratio: a 258-byte match in about two bits. */
#define ZLIB_MAX_RATIO 1032u

struct elf_form {
	bool b64, msb;
};

static uint64_t get(const unsigned char *p, size_t w, bool msb)
{
	uint64_t v = 0;

	for (size_t i = 0; i < w; i++)
		v |= (uint64_t)p[msb ? w - 1 - i : i] << (8 * i);
	return v;
}

/* The facts of one section header that matter here. */
struct shdr {
	uint32_t name, type;
	uint64_t flags, offset, size;
};

static void shdr_parse(const unsigned char *p, struct elf_form f, struct shdr *s)
{
	size_t w = f.b64 ? 8 : 4;

	s->name = (uint32_t)get(p, 4, f.msb);
	s->type = (uint32_t)get(p + 4, 4, f.msb);
	s->flags = get(p + 8, w, f.msb);
	/* sh_addr, then sh_offset, sh_size */
	s->offset = get(p + 8 + 2 * w, w, f.msb);
	s->size = get(p + 8 + 3 * w, w, f.msb);
}

/* What inflating section s would allocate: 0 when s is not compressed,
 * else the claim and the compressed bytes; -EFBIG with *why for a claim no compressor
 * could meet or a header outside the file. */
static int64_t claim(int fd, struct elf_form f, const struct shdr *s, bool gnu_name,
		     const char **why)
{
	unsigned char h[24];
	size_t hsize = f.b64 ? 24 : 12;
	uint64_t size;
	uint32_t type;

	if (s->type == SHT_NOBITS)
		return 0;
	if (s->flags & SHF_COMPRESSED) {
		if (s->size < hsize || pread(fd, h, hsize, (off_t)s->offset) != (ssize_t)hsize) {
			*why = "compressed section header outside the file";
			return -EFBIG;
		}
		type = (uint32_t)get(h, 4, f.msb);
		size = f.b64 ? get(h + 8, 8, f.msb) : get(h + 4, 4, f.msb);
	} else if (gnu_name) {
		hsize = 12;
		if (s->size < hsize || pread(fd, h, hsize, (off_t)s->offset) != (ssize_t)hsize ||
		    memcmp(h, "ZLIB", 4))
			return 0; /* libdw leaves it as it is */
		type = ELFCOMPRESS_ZLIB;
		size = get(h + 4, 8, true);
	} else {
		return 0;
	}
	/* zstd has no such bound (RLE blocks): the caps alone hold it */
	if (type == ELFCOMPRESS_ZLIB && size / ZLIB_MAX_RATIO > s->size) {
		*why = "a zlib section claims more than deflate can expand to";
		return -EFBIG;
	}
	/* libelf may copy the compressed bytes too (read mode, or an
	 * unaligned mapping) before it inflates them */
	if (size > (uint64_t)INT64_MAX / 2 || s->size > (uint64_t)INT64_MAX / 2) {
		*why = "a compressed section claims an impossible size";
		return -EFBIG;
	}
	return (int64_t)(size + s->size);
}

/* Section s's name starts with prefix (n bytes, its NUL included when the
 * whole name must match; names read from shstrtab). */
static bool name_is(int fd, const struct shdr *strtab, uint32_t name, const char *prefix, size_t n)
{
	char got[32];

	if (!strtab || n > sizeof(got) || name >= strtab->size || strtab->size - name < n)
		return false;
	return pread(fd, got, n, (off_t)(strtab->offset + name)) == (ssize_t)n &&
	       !memcmp(got, prefix, n);
}

/* What libdwfl's inflating of the xz stream in section s would take
 * (bytes), or -EFBIG with *why past left or a decoder over its limit. */
static int64_t xz_claim(int fd, const struct shdr *s, uint64_t left, const char **why)
{
	enum { IN = 65536, OUT = 1 << 20 };
	lzma_stream z = LZMA_STREAM_INIT;
	unsigned char *in = malloc(IN), *out = malloc(OUT);
	uint64_t off = 0, used;
	lzma_ret r = LZMA_OK;

	if (!in || !out || lzma_stream_decoder(&z, GS_ELF_XZ_MEMLIMIT, 0) != LZMA_OK) {
		free(in);
		free(out);
		*why = "no memory to check a .gnu_debugdata stream";
		return -EFBIG;
	}
	while (r == LZMA_OK && 2 * z.total_out <= left) {
		if (!z.avail_in && off < s->size) {
			size_t n = s->size - off < IN ? (size_t)(s->size - off) : IN;
			ssize_t got = pread(fd, in, n, (off_t)(s->offset + off));

			if (got <= 0)
				break; /* libdwfl's read fails there too */
			z.next_in = in;
			z.avail_in = (size_t)got;
			off += (uint64_t)got;
		}
		z.next_out = out;
		z.avail_out = OUT;
		r = lzma_code(&z, off < s->size ? LZMA_RUN : LZMA_FINISH);
	}
	used = 2 * z.total_out + lzma_memusage(&z);
	lzma_end(&z);
	free(in);
	free(out);
	if (r == LZMA_MEMLIMIT_ERROR || used > left) {
		*why = r == LZMA_MEMLIMIT_ERROR ? "a .gnu_debugdata stream needs a large decoder"
						: ".gnu_debugdata inflates past the per-file cap";
		return -EFBIG;
	}
	return (int64_t)used;
}

int gs_elf_inflate_check(int fd, uint64_t cap, uint64_t *bytes, const char **why)
{
	unsigned char h[64], sh[64];
	const char *dummy;
	struct shdr strtab, s;
	bool have_strtab = false;

	why = why ? why : &dummy;
	*why = NULL;
	*bytes = 0;
	if (gs_elf_headers_check(fd, why))
		return -EFBIG;
	if (pread(fd, h, sizeof(h), 0) < 52 || memcmp(h, ELFMAG, SELFMAG))
		return 0; /* not ELF: libelf reads nothing of it */
	struct elf_form f = { h[EI_CLASS] == ELFCLASS64, h[EI_DATA] == ELFDATA2MSB };
	size_t w = f.b64 ? 8 : 4, half = f.b64 ? 54 : 42;
	uint64_t shoff = get(h + (f.b64 ? 40 : 32), w, f.msb);
	uint64_t shnum = get(h + half + 6, 2, f.msb);
	uint64_t strndx = get(h + half + 8, 2, f.msb);
	size_t min_sh = f.b64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);

	/* as libelf reads the table: at e_shoff even when that is 0, entries
	 * sizeof(Shdr) apart whatever e_shentsize says */
	if (!shoff && !shnum)
		return 0; /* no section table */
	if (pread(fd, sh, min_sh, (off_t)shoff) != (ssize_t)min_sh)
		return 0;
	shdr_parse(sh, f, &s);
	if (shnum == 0) /* the extended forms (headers_check bounded them) */
		shnum = s.size;
	if (strndx == SHN_XINDEX)
		strndx = get(sh + (f.b64 ? 40 : 24), 4, f.msb); /* sh_link */
	if (strndx && strndx < shnum &&
	    pread(fd, sh, min_sh, (off_t)(shoff + strndx * min_sh)) == (ssize_t)min_sh) {
		shdr_parse(sh, f, &strtab);
		have_strtab = strtab.type == SHT_STRTAB;
	}
	for (uint64_t i = 1; i < shnum; i++) {
		if (pread(fd, sh, min_sh, (off_t)(shoff + i * min_sh)) != (ssize_t)min_sh)
			break; /* libelf refuses a cut table too */
		shdr_parse(sh, f, &s);
		const struct shdr *names = have_strtab ? &strtab : NULL;
		int64_t c;

		if (s.type != SHT_NOBITS && !(s.flags & SHF_COMPRESSED) &&
		    name_is(fd, names, s.name, ".gnu_debugdata", sizeof(".gnu_debugdata")))
			c = xz_claim(fd, &s, cap - *bytes, why);
		else
			c = claim(fd, f, &s, name_is(fd, names, s.name, ".zdebug", 7), why);

		if (c < 0)
			return (int)c;
		*bytes += (uint64_t)c;
		if (*bytes > cap) {
			*why = "compressed sections claim more than the per-file cap";
			return -EFBIG;
		}
	}
	return 0;
}
