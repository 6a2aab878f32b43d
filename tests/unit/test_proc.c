/* SPDX-License-Identifier: MIT */
/* proc/: the maps reader and the remote-memory reader, on real processes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/proc.h"

static int marker(void) { return 42; }

Test(proc_maps, own_process)
{
	struct gs_proc_maps *s;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	cr_assert_gt(n, 0);
	self[n] = 0;
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &s), 0);
	cr_assert_gt(s->n, 3);
	for (size_t i = 1; i < s->n; i++)
		cr_assert_geq(s->m[i].start, s->m[i - 1].end, "mappings in ascending order");
	const struct gs_maps_line *m = gs_proc_maps_find(s, (uint64_t)(uintptr_t)&marker);
	cr_assert(m && m->exec && m->inode);
	cr_assert_str_eq(m->path, self);
	/* the stack is a pseudo path, anonymous memory has none */
	int on_stack;
	m = gs_proc_maps_find(s, (uint64_t)(uintptr_t)&on_stack);
	cr_assert(m && m->path && !strcmp(m->path, "[stack]"));
	cr_assert_null(gs_proc_maps_find(s, 0));
	cr_assert_eq(gs_proc_maps_get(s), s);
	gs_proc_maps_put(s);
	cr_assert_eq(s->refs, 1); /* still readable: one reference left */
	gs_proc_maps_put(s);
	gs_proc_maps_put(NULL);
}

Test(proc_maps, gone_process)
{
	struct gs_proc_maps *s = NULL;
	pid_t c = fork();

	if (!c)
		_exit(0);
	cr_assert_eq(waitpid(c, NULL, 0), c);
	cr_assert_eq(gs_proc_maps_read((uint32_t)c, &s), -ESRCH);
	cr_assert_null(s);
}

Test(proc_mem, full_short_and_bounded)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char buf[64];
	size_t got = 99;

	cr_assert_neq(p, MAP_FAILED);
	memset(p, 'a', pg);
	strcpy(p + 100, "remote");
	cr_assert_eq(gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)(p + 100), buf, 7, &got), 0);
	cr_assert_eq(got, 7);
	cr_assert_str_eq(buf, "remote");
	/* across the end of a mapping: a short read, and how short */
	cr_assert_eq(munmap(p + pg, pg), 0);
	cr_assert_eq(gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)(p + pg - 16), buf,
				      32, &got), -EFAULT);
	cr_assert_eq(got, 16);
	cr_assert_eq(buf[0], 'a');
	cr_assert_eq(gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)p, buf,
				      GS_PROC_MEM_MAX_BYTES + 1, &got), -E2BIG);
	munmap(p, pg);
}

Test(proc_mem, gone_process)
{
	char buf[8];
	pid_t c = fork();

	if (!c)
		_exit(0);
	cr_assert_eq(waitpid(c, NULL, 0), c);
	cr_assert_eq(gs_proc_mem_read((uint32_t)c, 4096, buf, sizeof(buf), NULL), -ESRCH);
}

/* process_vm_readv refused by a seccomp filter (as in a container
 * profile): the read still works, through /proc/PID/mem. */
static int read_under_seccomp(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	static const char secret[] = "through /proc/PID/mem";
	char buf[sizeof(secret)], probe;
	struct iovec l = { &probe, 1 }, r = { (void *)secret, 1 };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 2;
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != -1 || errno != EPERM)
		return 3; /* the filter must really refuse it */
	if (gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)secret, buf, sizeof(buf), NULL))
		return 4;
	return memcmp(buf, secret, sizeof(buf)) ? 5 : 0;
}

Test(proc_mem, falls_back_to_proc_mem)
{
	int st;
	pid_t c = fork();

	if (!c)
		_exit(read_under_seccomp());
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFEXITED(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "child step %d failed", WEXITSTATUS(st));
}
