// SPDX-License-Identifier: MIT
/* Files of the target that shrink while gpusample reads them (issue 12):
 * an error for that object, never SIGBUS.  The target's user can truncate a
 * library it mapped (its own venv's libtorch) at any moment. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpusample/records.h"
#include "native/native.h"
#include "native/sym_internal.h"

/* A private copy of this test binary (a few MB with .eh_frame and .symtab). */
static char *copy_self(char *path, size_t len, size_t *size)
{
	int in = open("/proc/self/exe", O_RDONLY);
	struct stat st;
	cr_assert_geq(in, 0);
	cr_assert_eq(fstat(in, &st), 0);
	char *buf = malloc((size_t)st.st_size);
	cr_assert_eq(pread(in, buf, (size_t)st.st_size, 0), st.st_size);
	close(in);
	snprintf(path, len, "/tmp/gs-trunc-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*size = (size_t)st.st_size;
	return buf;
}

/* [lo, hi) of .text in the ELF at path. */
static void text_range(const char *path, uint64_t *lo, uint64_t *hi)
{
	int fd = open(path, O_RDONLY);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	cr_assert_not_null(e);
	cr_assert_eq(elf_getshdrstrndx(e, &shstrndx), 0);
	*lo = *hi = 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		const char *n = elf_strptr(e, shstrndx, sh.sh_name);
		if (n && !strcmp(n, ".text")) {
			*lo = sh.sh_addr;
			*hi = sh.sh_addr + sh.sh_size;
		}
	}
	elf_end(e);
	close(fd);
	cr_assert_gt(*hi, *lo);
}

/* ELF vaddr of the function name in the ELF at path (its .symtab): an
 * address a symbol covers whatever the link layout (a fixed fraction of
 * .text can fall into the padding between two functions). */
static uint64_t func_vaddr(const char *path, const char *name)
{
	int fd = open(path, O_RDONLY);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	uint64_t v = 0;
	cr_assert_not_null(e);
	while (!v && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; !v && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;
			if (gelf_getsym(d, (int)i, &sym) && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
			    sym.st_size && (n = elf_strptr(e, sh.sh_link, sym.st_name)) &&
			    !strcmp(n, name))
				v = sym.st_value + sym.st_size / 2;
		}
	}
	elf_end(e);
	close(fd);
	cr_assert_neq(v, 0, "%s is in .symtab", name);
	return v;
}

Test(truncate, symbolizer_survives_a_shrunk_module, .timeout = 60)
{
	char path[64];
	size_t size;
	free(copy_self(path, sizeof(path), &size));
	uint64_t lo, hi;
	text_range(path, &lo, &hi);
	struct gs_sym_modcache *c = gs_sym_modcache_new(NULL);
	const char *paths[] = { path };
	struct stat st;
	stat(path, &st);
	struct gs_sym_module *m = gs_sym_module_get(c, path, paths, 1, path, st.st_dev, st.st_ino);
	cr_assert_not_null(m);
	struct gs_sym_result r;
	cr_assert_eq(gs_sym_module_resolve(m, func_vaddr(path, "gs_sym_module_resolve"), &r), 0);
	cr_assert_gt(r.n, 0, "resolves while the file is whole");
	gs_sym_result_clear(&r);
	cr_assert_eq(truncate(path, 0), 0);
	int failed = 0;
	for (int i = 1; i <= 200; i++) {
		int rc = gs_sym_module_resolve(m, lo + (hi - lo) * (uint64_t)i / 201, &r);
		failed += rc == -EFAULT;
		gs_sym_result_clear(&r);
	}
	uint64_t start;
	gs_sym_module_function_start(m, lo + (hi - lo) / 2, &start);
	cr_assert_gt(failed, 0, "no lookup touched a page past the new end: test does not test");
	cr_assert(m->broken, "the module is marked broken");
	gs_sym_modcache_free(c);
	unlink(path);
}

struct shrinker {
	const char *path;
	const char *buf;
	size_t size;
	atomic_bool stop;
};

/* Truncate the file and write it back, over and over. */
static void *shrink_loop(void *arg)
{
	struct shrinker *s = arg;
	int fd = open(s->path, O_WRONLY);
	while (!atomic_load(&s->stop)) {
		if (ftruncate(fd, 4096) || pwrite(fd, s->buf, s->size, 0) != (ssize_t)s->size)
			break;
	}
	close(fd);
	return NULL;
}

Test(truncate, cfi_builder_survives_a_shrinking_file, .timeout = 120)
{
	char path[64];
	struct shrinker s = { .path = path };
	char *buf = copy_self(path, sizeof(path), &s.size);
	s.buf = buf;
	struct gs_cfi_table t;
	cr_assert_eq(gs_cfi_table_build(path, -1, &t), 0, "builds while the file is whole");
	uint32_t whole = t.n_rows;
	gs_cfi_table_free(&t);
	pthread_t th;
	pthread_create(&th, NULL, shrink_loop, &s);
	int ok = 0, err = 0;
	for (int i = 0; i < 40; i++) {
		int fd = open(path, O_RDONLY);
		int rc = gs_cfi_table_build(path, fd, &t);
		close(fd);
		if (rc == 0) {
			ok++;
			cr_assert_leq(t.n_rows, whole);
		} else {
			err++;
		}
		gs_cfi_table_free(&t);
	}
	atomic_store(&s.stop, true);
	pthread_join(th, NULL);
	cr_log_info("builds: %d complete or partial, %d errors", ok, err);
	free(buf);
	unlink(path);
}
