// SPDX-License-Identifier: MIT
/* gs_elf_inflate_check: the sizes compressed sections claim, summed and
 * capped before libdw inflates them, for both ELF classes and byte orders,
 * SHF_COMPRESSED (zlib, zstd) and GNU .zdebug sections. */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proc/proc.h"

#ifndef ELFCOMPRESS_ZSTD /* glibc before 2.37 */
#define ELFCOMPRESS_ZSTD 2
#endif

struct sec {
	const char *name;
	uint64_t flags;
	uint32_t ch_type; /* SHF_COMPRESSED: the Chdr's; .zdebug: "ZLIB" */
	uint64_t claim;
	uint64_t size;   /* sh_size: the compressed bytes, header included */
	const void *raw; /* else these raw_len bytes are the section */
	size_t raw_len;
};

static bool g_b64 = true, g_msb;

static void put(unsigned char *p, size_t w, uint64_t v)
{
	for (size_t i = 0; i < w; i++)
		p[g_msb ? w - 1 - i : i] = (unsigned char)(v >> (8 * i));
}

/* An ELF file (memfd) with the null section, .shstrtab and secs. */
static int elf_with(const struct sec *secs, size_t n)
{
	static unsigned char img[1 << 16];
	size_t w = g_b64 ? 8 : 4, ehsize = g_b64 ? 64 : 52, shent = g_b64 ? 64 : 40;
	size_t str_at = 256, data_at = 1024, sh_at = 60000, str_len = 1, data = data_at;
	int fd = memfd_create("elf", MFD_CLOEXEC);

	memset(img, 0, sizeof(img));
	memcpy(img, ELFMAG, SELFMAG);
	img[EI_CLASS] = g_b64 ? ELFCLASS64 : ELFCLASS32;
	img[EI_DATA] = g_msb ? ELFDATA2MSB : ELFDATA2LSB;
	img[EI_VERSION] = EV_CURRENT;
	put(img + 16, 2, ET_DYN);
	put(img + (g_b64 ? 40 : 32), w, sh_at);
	put(img + (g_b64 ? 52 : 40), 2, ehsize);
	put(img + (g_b64 ? 58 : 46), 2, shent);
	put(img + (g_b64 ? 60 : 48), 2, n + 2);
	put(img + (g_b64 ? 62 : 50), 2, 1);
	for (size_t i = 0; i < n + 2; i++) {
		unsigned char *sh = img + sh_at + i * shent;
		const char *name = i == 1 ? ".shstrtab" : i ? secs[i - 2].name : "";
		size_t nl = strlen(name);

		if (!i)
			continue;
		memcpy(img + str_at + str_len, name, nl + 1);
		put(sh, 4, str_len);
		str_len += nl + 1;
		if (i == 1) {
			put(sh + 4, 4, SHT_STRTAB);
			continue;
		}
		const struct sec *s = &secs[i - 2];
		unsigned char *d = img + data;

		put(sh + 4, 4, SHT_PROGBITS);
		put(sh + 8, w, s->flags);
		put(sh + 8 + 2 * w, w, data);
		put(sh + 8 + 3 * w, w, s->raw ? s->raw_len : s->size);
		if (s->raw) {
			cr_assert_lt(data + s->raw_len, sh_at);
			memcpy(d, s->raw, s->raw_len);
			data += s->raw_len;
		} else if (s->flags & SHF_COMPRESSED) {
			put(d, 4, s->ch_type);
			put(d + (g_b64 ? 8 : 4), w, s->claim);
		} else {
			memcpy(d, "ZLIB", 4);
			for (int b = 0; b < 8; b++)
				d[4 + b] = (unsigned char)(s->claim >> (8 * (7 - b)));
		}
		data += 32;
	}
	unsigned char *strsh = img + sh_at + shent;
	put(strsh + 8 + 2 * w, w, str_at);
	put(strsh + 8 + 3 * w, w, str_len);
	cr_assert_eq(pwrite(fd, img, sizeof(img), 0), (ssize_t)sizeof(img));
	return fd;
}

static int check(const struct sec *secs, size_t n, uint64_t cap, uint64_t *bytes, const char **why)
{
	int fd = elf_with(secs, n), rc = gs_elf_inflate_check(fd, cap, bytes, why);

	close(fd);
	return rc;
}

#define MiB (1ull << 20)

Test(elf_inflate, claims_summed_by_kind)
{
	const struct sec s[] = {
		{ ".debug_info", SHF_COMPRESSED, ELFCOMPRESS_ZLIB, 1000, 200 },
		{ ".debug_str", SHF_COMPRESSED, ELFCOMPRESS_ZSTD, 3000, 100 },
		{ ".zdebug_line", 0, 0, 500, 100 },
		{ ".debug_abbrev", 0, 0, 1ull << 40, 100 }, /* not compressed: no claim */
	};
	const char *why;
	uint64_t bytes;

	for (int form = 0; form < 4; form++) {
		g_b64 = form & 1;
		g_msb = form & 2;
		cr_assert_eq(check(s, 4, 512 * MiB, &bytes, &why), 0, "form %d: %s", form,
			     why ? why : "");
		/* the claims and the compressed bytes libelf may copy */
		cr_assert_eq(bytes, 4500 + 400, "form %d: %llu", form, (unsigned long long)bytes);
	}
	g_b64 = true;
	g_msb = false;
}

Test(elf_inflate, over_the_cap_refused)
{
	/* zstd has no ratio bound: 3 x 200 MiB from 100 bytes each */
	const struct sec s[] = {
		{ ".debug_info", SHF_COMPRESSED, ELFCOMPRESS_ZSTD, 200 * MiB, 100 },
		{ ".debug_str", SHF_COMPRESSED, ELFCOMPRESS_ZSTD, 200 * MiB, 100 },
		{ ".debug_line", SHF_COMPRESSED, ELFCOMPRESS_ZSTD, 200 * MiB, 100 },
	};
	const char *why;
	uint64_t bytes;

	cr_assert_eq(check(s, 3, 512 * MiB, &bytes, &why), -EFBIG);
	cr_assert(why && strstr(why, "cap"), "%s", why);
	cr_assert_eq(check(s, 2, 512 * MiB, &bytes, &why), 0);
	cr_assert_eq(bytes, 400 * MiB + 200);
}

Test(elf_inflate, impossible_zlib_ratio_refused)
{
	const struct sec zlib[] = { { ".debug_info", SHF_COMPRESSED, ELFCOMPRESS_ZLIB, 1 * MiB,
				      200 } };
	const struct sec gnu[] = { { ".zdebug_info", 0, 0, 1 * MiB, 200 } };
	const char *why;
	uint64_t bytes;

	cr_assert_eq(check(zlib, 1, 512 * MiB, &bytes, &why), -EFBIG);
	cr_assert(why && strstr(why, "deflate"), "%s", why);
	cr_assert_eq(check(gnu, 1, 512 * MiB, &bytes, &why), -EFBIG);
}

/* A sparse compressed section: libelf copies sh_size bytes before it
 * inflates (the fuzzer's malloc(4294967296)). */
Test(elf_inflate, huge_compressed_bytes_counted)
{
	const struct sec s[] = { { ".debug_info", SHF_COMPRESSED, ELFCOMPRESS_ZSTD, 100,
				   4ull << 30 } };
	const char *why;
	uint64_t bytes;

	cr_assert_eq(check(s, 1, 512 * MiB, &bytes, &why), -EFBIG);
}

Test(elf_inflate, header_outside_the_file_refused)
{
	const struct sec s[] = { { ".debug_info", SHF_COMPRESSED, ELFCOMPRESS_ZLIB, 10, 8 } };
	const char *why;
	uint64_t bytes;

	/* sh_size smaller than the Elf64_Chdr */
	cr_assert_eq(check(s, 1, 512 * MiB, &bytes, &why), -EFBIG);
	cr_assert(why && strstr(why, "header"), "%s", why);
}

Test(elf_inflate, not_elf_passes)
{
	int fd = memfd_create("x", MFD_CLOEXEC);
	uint64_t bytes = 1;

	cr_assert_eq(write(fd, "not an ELF file at all, just text", 33), 33);
	cr_assert_eq(gs_elf_inflate_check(fd, 1, &bytes, NULL), 0);
	cr_assert_eq(bytes, 0);
	close(fd);
}

/* .gnu_debugdata has no size header: the xz stream is inflated, counted,
 * and refused past the cap (libdwfl inflates it into a growing buffer). */
Test(elf_inflate, minidebuginfo_inflated_and_counted)
{
	size_t zeros = 64 << 20, cap = 1 << 16, n = 0;
	unsigned char *in = calloc(1, zeros), *xz = malloc(cap);
	const char *why;
	uint64_t bytes;

	cr_assert(in && xz);
	cr_assert_eq(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, in, zeros, xz, &n, cap),
		     LZMA_OK);
	cr_assert_lt(n, 40000, "%zu", n);
	const struct sec s[] = { { ".gnu_debugdata", 0, 0, 0, 0, xz, n } };

	cr_assert_eq(check(s, 1, 512 * MiB, &bytes, &why), 0, "%s", why ? why : "");
	cr_assert_geq(bytes, 2 * zeros, "%llu", (unsigned long long)bytes);
	cr_assert_eq(check(s, 1, 100 * MiB, &bytes, &why), -EFBIG);
	cr_assert(why && strstr(why, "gnu_debugdata"), "%s", why);
	free(in);
	free(xz);
}
