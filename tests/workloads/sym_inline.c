/* SPDX-License-Identifier: MIT */
/*
 * Symbolizer test workload: prints facts the unit test checks against
 * (addresses of known code, the source lines of an inline chain) as
 * "key=value" lines, then runs commands read from stdin:
 *   dlcopy PATH   copy PATH to /tmp, dlopen the copy, unlink it (deleted
 *                 mapping); print cxx=ADDR of its gs_test::Widget<int>::compute
 *   dlopen PATH   dlopen PATH in place; print base=ADDR (its link-map base)
 *   quit / EOF    exit
 * Every reply ends with "ok".  Built -O1 -g: the always_inline functions are
 * inlined despite -fno-inline, so their DWARF has an inline chain.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile uintptr_t captured_ret;
static volatile int sink;
static int leaf_line, mid_line, outer_line;

__attribute__((noinline)) static void capture(int line)
{
	captured_ret = (uintptr_t)__builtin_return_address(0);
	leaf_line = line;
}

static inline __attribute__((always_inline)) int leaf_inl(int x, int call_line)
{
	mid_line = call_line;
	sink = x;
	capture(__LINE__);
	return sink + 1;
}

static inline __attribute__((always_inline)) int mid_inl(int x, int call_line)
{
	outer_line = call_line;
	return leaf_inl(x * 3, __LINE__) + 2;
}

/* declarator and brace on one line: the entry's line is the declaration's */
/* clang-format off */
static const int outer_decl_line = __LINE__ + 1;
__attribute__((noinline)) int outer_fn(int x) {
	return mid_inl(x + 1, __LINE__) * 5;
}
/* clang-format on */

static int copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
	char buf[65536];
	size_t n;
	int err = a && b ? 0 : -1;
	while (!err && (n = fread(buf, 1, sizeof(buf), a)) > 0)
		if (fwrite(buf, 1, n, b) != n)
			err = -1;
	if (a)
		fclose(a);
	if (b && fclose(b))
		err = -1;
	return err;
}

static void cmd_dlcopy(const char *path)
{
	char tmp[] = "/tmp/gs-sym-XXXXXX.so";
	int fd = mkstemps(tmp, 3);
	if (fd < 0 || copy_file(path, tmp)) {
		printf("error=copy %s\n", path);
		return;
	}
	close(fd);
	void *h = dlopen(tmp, RTLD_NOW);
	unlink(tmp);
	if (!h) {
		printf("error=%s\n", dlerror());
		return;
	}
	void *fn = dlsym(h, "_ZN7gs_test6WidgetIiE7computeEi");
	int (*entry)(int) = (int (*)(int))dlsym(h, "gs_cxx_entry");
	if (entry)
		sink = entry(3);
	printf("cxx=%p\n", fn);
}

static void cmd_dlopen(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	struct link_map *lm = NULL;
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm)) {
		printf("error=%s\n", dlerror());
		return;
	}
	printf("base=%#lx\n", (unsigned long)lm->l_addr);
}

/* A child that keeps the parent's address space as it is (no exec) and
 * lives as long as the parent. */
static void cmd_fork(void)
{
	pid_t parent = getpid(), c = fork();

	if (c == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		fclose(stdin);
		for (;;)
			pause();
	}
	printf("child=%d\n", (int)c);
}

int main(void)
{
	static const char marker[] = "gs-sym-rodata-marker";
	setvbuf(stdout, NULL, _IOLBF, 0);
	sink = outer_fn(1);
	/* an anonymous executable region for the perf-map test */
	void *jit = mmap(NULL, 65536, PROT_READ | PROT_WRITE | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("pid=%d\n", getpid());
	printf("outer=%p\n", (void *)outer_fn);
	printf("outer_decl_line=%d\n", outer_decl_line);
	printf("ret=%#lx\n", (unsigned long)captured_ret);
	printf("leaf_line=%d\nmid_line=%d\nouter_line=%d\n", leaf_line, mid_line, outer_line);
	printf("rodata=%p\n", (const void *)marker);
	printf("jit=%p\n", jit);
	printf("ok\n");
	char line[4096];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "dlcopy ", 7))
			cmd_dlcopy(line + 7);
		else if (!strncmp(line, "dlopen ", 7))
			cmd_dlopen(line + 7);
		else if (!strcmp(line, "fork"))
			cmd_fork();
		else if (!strcmp(line, "quit"))
			break;
		printf("ok\n");
	}
	return 0;
}
