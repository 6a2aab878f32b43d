/* SPDX-License-Identifier: MIT */
/* proc/: the maps reader and the remote-memory reader, on real processes. */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/proc.h"
#include "util/membudget.h"

static int marker(void)
{
	return 42;
}

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

/* A job with far more anonymous mappings than the cap: the snapshot keeps
 * GS_PROC_MAPS_ANON_MAX of them and every file-backed and executable one,
 * counts the rest, and is charged to the budget as what it keeps. */
Test(proc_maps, anonymous_mappings_capped_and_charged)
{
	const size_t pages = 2 * (GS_PROC_MAPS_ANON_MAX + 500);
	struct gs_mem_stats before, during;
	struct gs_proc_maps *s;
	uint64_t snaps, lines, snaps0, lines0;
	char *base = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);

	cr_assert_neq(base, MAP_FAILED);
	for (size_t i = 0; i < pages; i += 2) /* neighbours differ: no merge */
		cr_assert_eq(mprotect(base + i * 4096, 4096, PROT_READ), 0);
	gs_proc_maps_capped(&snaps0, &lines0);
	gs_mem_stats(&before);
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &s), 0);
	gs_mem_stats(&during);
	cr_assert_geq(s->dropped, 1000, "dropped %llu", (unsigned long long)s->dropped);
	size_t anon = 0;
	for (size_t i = 0; i < s->n; i++)
		anon += !s->m[i].inode && !s->m[i].path && !s->m[i].exec;
	cr_assert_eq(anon, GS_PROC_MAPS_ANON_MAX);
	cr_assert(gs_proc_maps_find(s, (uint64_t)(uintptr_t)&marker), "code is kept");
	cr_assert_eq(during.used_by[GS_MEM_MAPS] - before.used_by[GS_MEM_MAPS], s->bytes);
	cr_assert_lt(s->bytes, 512u << 10);
	gs_proc_maps_capped(&snaps, &lines);
	cr_assert_eq(snaps - snaps0, 1);
	cr_assert_eq(lines - lines0, s->dropped);
	char note[320];
	cr_assert_eq(gs_proc_maps_cap_note(note, sizeof(note)), 1);
	cr_assert(strstr(note, "mapping lines left out"), "%s", note);
	gs_proc_maps_put(s);
	gs_mem_stats(&during);
	cr_assert_eq(during.used_by[GS_MEM_MAPS], before.used_by[GS_MEM_MAPS]);
	munmap(base, pages * 4096);
}

/* A spent budget refuses the snapshot (nothing charged, nothing left to
 * give back), and counts the refusal. */
Test(proc_maps, refused_by_the_budget)
{
	struct gs_mem_stats a, b;
	struct gs_proc_maps *s = NULL;
	uint64_t old;

	gs_mem_stats(&a);
	old = gs_mem_set_budget(a.used + 16);
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &s), -ENOSPC);
	cr_assert_null(s);
	gs_mem_set_budget(old);
	gs_mem_stats(&b);
	cr_assert_eq(b.refused[GS_MEM_MAPS], a.refused[GS_MEM_MAPS] + 1);
	cr_assert_eq(b.used_by[GS_MEM_MAPS], a.used_by[GS_MEM_MAPS]);
}

/* The hand parser takes what the kernel prints and refuses the rest. */
Test(proc_maps, line_parser)
{
	char ok[] = "7f0000001000-7f0000002000 r-xp 0000a000 fd:01 123456     /usr/lib/x y.so\n";
	char anon[] = "7f0000001000-7f0000002000 rw-p 00000000 00:00 0 ";
	char bad1[] = "7f0000001000 7f0000002000 r-xp 0 fd:01 1 /x";
	char bad2[] = "7f0000001000-7f0000002000 r-xp 0 fd01 1 /x";
	char bad3[] = "ffffffffffffffffff-1 r-xp 0 fd:01 1 /x";
	struct gs_maps_line l;

	cr_assert_eq(gs_maps_parse_line(ok, &l), 0);
	cr_assert_eq(l.start, 0x7f0000001000ull);
	cr_assert_eq(l.end, 0x7f0000002000ull);
	cr_assert_eq(l.offset, 0xa000);
	cr_assert_eq(l.dev_major, 0xfd);
	cr_assert_eq(l.dev_minor, 1);
	cr_assert_eq(l.inode, 123456);
	cr_assert(l.exec);
	cr_assert_str_eq(l.path, "/usr/lib/x y.so");
	cr_assert_eq(gs_maps_parse_line(anon, &l), 0);
	cr_assert(!l.exec && !l.inode && !l.path);
	cr_assert_eq(gs_maps_parse_line(bad1, &l), -EINVAL);
	cr_assert_eq(gs_maps_parse_line(bad2, &l), -EINVAL);
	cr_assert_eq(gs_maps_parse_line(bad3, &l), -EINVAL);
}

/* PROCMAP_QUERY came with Linux 6.11: older kernels must say so. */
static bool kernel_has_procmap_query(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	cr_assert_eq(uname(&u), 0);
	sscanf(u.release, "%d.%d", &major, &minor);
	return major > 6 || (major == 6 && minor >= 11);
}

Test(proc_maps, one_mapping_asked_of_the_kernel)
{
	uint64_t at = (uint64_t)(uintptr_t)&marker;
	struct gs_proc_maps *s;
	struct gs_maps_line v;
	int rc = gs_proc_vma_at((uint32_t)getpid(), at, &v);

	if (!kernel_has_procmap_query()) {
		cr_assert_eq(rc, -EOPNOTSUPP);
		return;
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &s), 0);
	const struct gs_maps_line *m = gs_proc_maps_find(s, at);
	cr_assert(m);
	/* the same mapping as the maps file prints, field by field */
	cr_assert(v.start == m->start && v.end == m->end && v.offset == m->offset);
	cr_assert(v.inode == m->inode && v.dev_major == m->dev_major &&
		  v.dev_minor == m->dev_minor && v.exec && !v.path);
	gs_proc_maps_put(s);
	/* anonymous memory: no file, and not executable */
	void *anon = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(anon, MAP_FAILED);
	cr_assert_eq(gs_proc_vma_at((uint32_t)getpid(), (uint64_t)(uintptr_t)anon + 4096, &v), 0);
	cr_assert(v.start == (uint64_t)(uintptr_t)anon && v.end == v.start + 8192);
	cr_assert(!v.inode && !v.exec);
	munmap(anon, 8192);
	cr_assert_eq(gs_proc_vma_at((uint32_t)getpid(), (uint64_t)(uintptr_t)anon, &v), -ENOENT);
	cr_assert_eq(gs_proc_vma_at((uint32_t)getpid(), 4096, &v), -ENOENT);
}

Test(proc_maps, executable_mappings_asked_of_the_kernel)
{
	struct gs_proc_range r[512];
	struct gs_proc_maps *s;
	int n = gs_proc_exec_ranges((uint32_t)getpid(), r, 512), k = 0;

	if (!kernel_has_procmap_query()) {
		cr_assert_eq(n, -EOPNOTSUPP);
		return;
	}
	cr_assert_gt(n, 1);
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &s), 0);
	/* the maps file's executable lines, in order, [vsyscall] aside */
	for (size_t i = 0; i < s->n; i++) {
		if (!s->m[i].exec || (s->m[i].path && !strcmp(s->m[i].path, "[vsyscall]")))
			continue;
		cr_assert_lt(k, n);
		cr_assert(r[k].start == s->m[i].start && r[k].end == s->m[i].end, "mapping %d", k);
		k++;
	}
	cr_assert_eq(k, n);
	gs_proc_maps_put(s);
	cr_assert_eq(gs_proc_exec_ranges((uint32_t)getpid(), r, 1), -E2BIG, "bounded");
}

Test(proc_maps, one_mapping_of_a_gone_process)
{
	struct gs_maps_line v;
	pid_t c = fork();

	if (!c)
		_exit(0);
	cr_assert_eq(waitpid(c, NULL, 0), c);
	cr_assert_eq(gs_proc_vma_at((uint32_t)c, 4096, &v),
		     kernel_has_procmap_query() ? -ESRCH : -EOPNOTSUPP);
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
	cr_assert_eq(
	    gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)(p + 100), buf, 7, &got), 0);
	cr_assert_eq(got, 7);
	cr_assert_str_eq(buf, "remote");
	/* across the end of a mapping: a short read, and how short */
	cr_assert_eq(munmap(p + pg, pg), 0);
	cr_assert_eq(
	    gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)(p + pg - 16), buf, 32, &got),
	    -EFAULT);
	cr_assert_eq(got, 16);
	cr_assert_eq(buf[0], 'a');
	cr_assert_eq(gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)p, buf,
				      GS_PROC_MEM_MAX_BYTES + 1, &got),
		     -E2BIG);
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

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 2;
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != -1 || errno != EPERM)
		return 3; /* the filter must really refuse it */
	if (gs_proc_mem_read((uint32_t)getpid(), (uint64_t)(uintptr_t)secret, buf, sizeof(buf),
			     NULL))
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

/* ---- ELF objects ---------------------------------------------------------- */

static void copy_file(const char *from, const char *to)
{
	char cmd[8300];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	cr_assert_eq(system(cmd), 0);
}

static struct gs_elf_obj *get(struct gs_elf_cache *c, const char *path)
{
	struct stat st;
	struct gs_elf_obj *o = NULL;
	const char *paths[] = { "/nonexistent/first", path };

	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(gs_elf_get(c, path, paths, 2, st.st_dev, st.st_ino, &o), 0);
	cr_assert_not_null(o);
	return o;
}

Test(proc_elf, one_object_per_build_id)
{
	char self[4096], a[64], b[64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct gs_elf_cache *c = gs_elf_cache_new();
	struct gs_elf_stats st;

	cr_assert_gt(n, 0);
	self[n] = 0;
	snprintf(a, sizeof(a), "/tmp/gs_test_proc_a.%d", getpid());
	snprintf(b, sizeof(b), "/tmp/gs_test_proc_b.%d", getpid());
	copy_file(self, a);
	copy_file(self, b);
	struct gs_elf_obj *oa = get(c, a), *ob = get(c, b), *os = get(c, self);
	cr_assert_eq(strlen(oa->build_id), 40, "test binary has a build-id: %s", oa->build_id);
	cr_assert_eq(oa, ob, "same build-id, other inode: one object");
	cr_assert_eq(oa, os);
	cr_assert_geq(oa->fd, 0);
	cr_assert_not_null(oa->elf);
	cr_assert_gt(oa->n_loads, 1);
	struct stat sb;
	cr_assert_eq(stat(b, &sb), 0);
	cr_assert_eq(gs_elf_find(c, sb.st_dev, sb.st_ino), oa, "the second inode is remembered");
	cr_assert_null(gs_elf_find(c, sb.st_dev, sb.st_ino + 1000003));
	/* the offset of the first executable segment maps to its vaddr */
	for (size_t i = 0; i < oa->n_loads; i++) {
		uint64_t v;
		cr_assert(gs_elf_off_to_vaddr(oa, oa->loads[i].p_offset, &v));
		cr_assert_eq(v, oa->loads[i].p_vaddr);
	}
	/* a file that cannot be opened: its own object, with the reason */
	struct gs_elf_obj *gone = NULL;
	const char *none[] = { "/nonexistent/x" };
	cr_assert_eq(gs_elf_get(c, "/nonexistent/x", none, 1, 1, 77, &gone), 0);
	cr_assert_eq(gone->fd, -1);
	cr_assert_eq(gone->err, -ENOENT);
	cr_assert_neq(gone, oa);
	gs_elf_stats(c, &st);
	cr_assert_eq(st.objects, 2);
	cr_assert_eq(st.open_fds, 1);
	unlink(a);
	unlink(b);
	gs_elf_cache_put(c);
}

/* Under a small RLIMIT_NOFILE the cache keeps at most its bound of fds and
 * says which objects went without: the limit is not raised. */
static int fd_bound_child(const char *dir, int files)
{
	struct rlimit rl = { GS_ELF_FD_RESERVE + 4, GS_ELF_FD_RESERVE + 4 };
	struct gs_elf_cache *c;
	struct gs_elf_stats st;
	int without = 0;

	if (setrlimit(RLIMIT_NOFILE, &rl) || !(c = gs_elf_cache_new()))
		return 2;
	gs_elf_stats(c, &st);
	if (st.max_fds != GS_ELF_FD_MIN)
		return 3;
	for (int i = 0; i < files; i++) {
		char p[128];
		struct gs_elf_obj *o;
		snprintf(p, sizeof(p), "%s/f%d", dir, i);
		o = get(c, p);
		without += o->fd < 0 && o->err == -EMFILE;
	}
	gs_elf_stats(c, &st);
	if (st.open_fds != GS_ELF_FD_MIN || st.fd_refused != (size_t)(files - GS_ELF_FD_MIN) ||
	    without != files - GS_ELF_FD_MIN || getrlimit(RLIMIT_NOFILE, &rl) ||
	    rl.rlim_cur != GS_ELF_FD_RESERVE + 4)
		return 4;
	gs_elf_cache_put(c);
	return 0;
}

Test(proc_elf, fds_bounded_by_rlimit)
{
	char dir[] = "/tmp/gs_test_proc_XXXXXX";
	int files = GS_ELF_FD_MIN + 8, st;

	cr_assert_not_null(mkdtemp(dir));
	for (int i = 0; i < files; i++) {
		char p[128];
		snprintf(p, sizeof(p), "%s/f%d", dir, i);
		/* a bare ELF header and no build-id: one object each */
		Elf64_Ehdr eh = { .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64,
					       ELFDATA2LSB, EV_CURRENT },
				  .e_type = ET_DYN,
				  .e_machine = EM_X86_64,
				  .e_version = EV_CURRENT,
				  .e_ehsize = sizeof(Elf64_Ehdr) };
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fwrite(&eh, sizeof(eh), 1, f);
		fprintf(f, "%d\n", i);
		fclose(f);
	}
	pid_t c = fork();
	if (!c)
		_exit(fd_bound_child(dir, files));
	cr_assert_eq(waitpid(c, &st, 0), c);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert(WIFEXITED(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "child step %d failed", WEXITSTATUS(st));
}

/* A data file mapped at offset 0 (locale-archive) is no ELF object: it
 * gives its fd back at once instead of holding one of the bounded fds. */
Test(proc_elf, non_elf_keeps_no_fd)
{
	char p[] = "/tmp/gs_test_proc_data_XXXXXX";
	int fd = mkstemp(p);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "just data\n", 10), 10);
	close(fd);
	struct gs_elf_cache *c = gs_elf_cache_new();
	struct gs_elf_obj *o = get(c, p);
	struct gs_elf_stats st;
	gs_elf_stats(c, &st);
	cr_assert_eq(o->fd, -1);
	cr_assert_eq(o->err, -ENOEXEC);
	cr_assert_eq(st.open_fds, 0);
	unlink(p);
	gs_elf_cache_put(c);
}

/* The GPU agent is recognised by its USDT notes (gpu_sampler/emit.c), here
 * under another file name: BUILD/libgpusample_agent.so, next to BUILD/tests
 * (make all builds it; missing, the test fails). */
Test(proc_elf, usdt_provider)
{
	char exe[4096], agent[4200], copy[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct gs_elf_cache *c = gs_elf_cache_new();

	cr_assert_gt(n, 0);
	exe[n] = 0;
	struct gs_elf_obj *self = get(c, exe);
	*strrchr(exe, '/') = 0; /* BUILD/tests */
	*strrchr(exe, '/') = 0; /* BUILD */
	snprintf(agent, sizeof(agent), "%s/libgpusample_agent.so", exe);
	cr_assert_eq(access(agent, R_OK), 0, "%s missing: run make all", agent);
	snprintf(copy, sizeof(copy), "/tmp/gs_test_proc_renamed.%d.so", getpid());
	copy_file(agent, copy);
	struct gs_elf_obj *o = get(c, copy);
	cr_assert_eq(gs_elf_usdt_provider(o, "gpusample"), 1);
	cr_assert_eq(gs_elf_usdt_provider(o, "gpusampl"), 0);
	cr_assert_eq(gs_elf_usdt_provider(o, "libc"), 0);
	cr_assert_eq(gs_elf_usdt_provider(self, "gpusample"), 0);
	unlink(copy);
	gs_elf_cache_put(c);
}

/* The mapped file itself, or nothing: a link planted on the path (the
 * target's root is ours here) must not lead to another file. */
Test(proc_elf, open_mapped_only_the_mapped_file)
{
	char self[4096], lib[64], other[64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct gs_proc_maps *s;
	struct stat st, want;

	cr_assert_gt(n, 0);
	self[n] = 0;
	snprintf(lib, sizeof(lib), "/tmp/gs_test_proc_map.%d", getpid());
	snprintf(other, sizeof(other), "/tmp/gs_test_proc_other.%d", getpid());
	copy_file(self, lib);
	copy_file(self, other);
	int mfd = open(lib, O_RDONLY);
	cr_assert_geq(mfd, 0);
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, mfd, 0);
	cr_assert_neq(p, MAP_FAILED);
	close(mfd);
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &s), 0);
	const struct gs_maps_line *m = gs_proc_maps_find(s, (uint64_t)(uintptr_t)p);
	cr_assert(m && m->inode && !strcmp(m->path, lib));
	cr_assert_eq(stat(lib, &want), 0);

	int fd = gs_proc_open_mapped((uint32_t)getpid(), m);
	cr_assert_geq(fd, 0, "the mapped file opens: %s", strerror(-fd));
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert(st.st_ino == want.st_ino && st.st_dev == want.st_dev);
	close(fd);

	/* unmapped (map_files fails) and the path now a link to another file:
	 * only the path remains, and it leads elsewhere */
	struct gs_maps_line l = *m;
	munmap(p, 4096);
	cr_assert_eq(unlink(lib), 0);
	cr_assert_eq(symlink(other, lib), 0);
	cr_assert_eq(gs_proc_open_mapped((uint32_t)getpid(), &l), -ESTALE);
	/* anonymous memory has no file */
	l.inode = 0;
	cr_assert_eq(gs_proc_open_mapped((uint32_t)getpid(), &l), -EINVAL);
	gs_proc_maps_put(s);
	unlink(lib);
	unlink(other);
}

/* Only regular files are ever opened: a device or FIFO a link points to is
 * looked at (O_PATH), not opened. */
Test(proc_elf, open_regular_refuses_what_is_not_a_file)
{
	char fifo[64], link[64];
	struct stat st;
	int fd;

	snprintf(fifo, sizeof(fifo), "/tmp/gs_test_proc_fifo.%d", getpid());
	snprintf(link, sizeof(link), "/tmp/gs_test_proc_lnk.%d", getpid());
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(gs_open_regular(fifo, 0, &st), -EPERM, "a FIFO (no writer: no hang)");
	cr_assert_eq(gs_open_regular("/dev/null", 0, &st), -EPERM, "a device");
	cr_assert_eq(symlink("/dev/null", link), 0);
	cr_assert_eq(gs_open_regular(link, 0, &st), -EPERM, "a link to a device");
	cr_assert_eq(gs_open_regular(link, O_NOFOLLOW, &st), -EPERM, "the link itself");
	fd = gs_open_regular("/proc/self/exe", 0, &st);
	cr_assert_geq(fd, 0, "a regular file through a link opens: %s", strerror(-fd));
	cr_assert(S_ISREG(st.st_mode));
	char b[4];
	cr_assert_eq(pread(fd, b, 4, 0), 4);
	cr_assert_eq(memcmp(b, "\177ELF", 4), 0);
	close(fd);
	unlink(fifo);
	unlink(link);
}

/* A sparse ELF whose header (at 0) claims, through the extended forms,
 * shnum sections (e_shnum 0: section 0's sh_size) or phnum program headers
 * (PN_XNUM: section 0's sh_info); size: the file's apparent size. */
static void elf_bomb(const char *p, uint64_t shnum, uint32_t phnum, off_t size)
{
	Elf64_Ehdr eh = { 0 };
	Elf64_Shdr s0 = { 0 };
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof(eh);
	eh.e_shoff = 4096;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phoff = sizeof(eh);
	eh.e_shnum = shnum ? 0 : 1;
	eh.e_phnum = phnum ? PN_XNUM : 0;
	s0.sh_size = shnum;
	s0.sh_info = phnum;
	cr_assert_eq(pwrite(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	cr_assert_eq(pwrite(fd, &s0, sizeof(s0), 4096), (ssize_t)sizeof(s0));
	cr_assert_eq(ftruncate(fd, size), 0);
	close(fd);
}

/* Issue 24, items 2 and 3: the counts are checked before libelf allocates
 * for them (it took 13.4 GB for 16M claimed sections), whatever the file's
 * apparent size; the object is skipped, counted and named. */
Test(proc_elf, header_bombs_skipped_before_libelf)
{
	char p[64];
	const char *why;
	int fd;

	snprintf(p, sizeof(p), "/tmp/gs_test_proc_bomb.%d", getpid());
	elf_bomb(p, 16u << 20, 0, (off_t)1 << 31); /* sections in a 2 GB hole */
	fd = open(p, O_RDONLY);
	cr_assert_eq(gs_elf_headers_check(fd, &why), -EFBIG);
	cr_assert(why && strstr(why, "section"), "%s", why);
	close(fd);
	elf_bomb(p, 0, 50u << 20, 24 << 10); /* 50M program headers, 24 KB */
	fd = open(p, O_RDONLY);
	cr_assert_eq(gs_elf_headers_check(fd, &why), -EFBIG);
	cr_assert(why && strstr(why, "program header"), "%s", why);
	close(fd);
	elf_bomb(p, 2, 0, 24 << 10); /* a sane extended count passes */
	fd = open(p, O_RDONLY);
	cr_assert_eq(gs_elf_headers_check(fd, &why), 0);
	close(fd);

	elf_bomb(p, 16u << 20, 0, (off_t)1 << 31);
	struct gs_elf_cache *c = gs_elf_cache_new();
	struct gs_elf_obj *o = get(c, p);
	struct gs_elf_stats st;
	gs_elf_stats(c, &st);
	cr_assert_eq(o->err, -EFBIG);
	cr_assert_eq(o->fd, -1);
	cr_assert_eq(st.skipped, 1);
	cr_assert_eq(st.first_skipped, o);
	gs_elf_cache_put(c);
	unlink(p);

	fd = open("/proc/self/exe", O_RDONLY);
	cr_assert_eq(gs_elf_headers_check(fd, &why), 0, "a real executable: %s", why);
	close(fd);
}

/* Debug files inside a target's root: a link (absolute or "..") cannot lead
 * out of it, and only a regular file opens. */
Test(proc_elf, open_regular_at_stays_in_root)
{
	char dir[64], p[128];
	struct stat st;

	snprintf(dir, sizeof(dir), "/tmp/gs_test_proc_root.%d", getpid());
	cr_assert_eq(mkdir(dir, 0700), 0);
	int rfd = open(dir, O_PATH | O_DIRECTORY);
	snprintf(p, sizeof(p), "%s/abs", dir);
	cr_assert_eq(symlink("/proc/self/exe", p), 0);
	snprintf(p, sizeof(p), "%s/up", dir);
	cr_assert_eq(symlink("../../../../proc/self/exe", p), 0);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	uint64_t r = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	cr_assert_lt(gs_open_regular_at(rfd, "abs", 0, r, &st), 0);
	cr_assert_lt(gs_open_regular_at(rfd, "up", 0, r, &st), 0);
	cr_assert_eq(gs_open_regular_at(rfd, "fifo", 0, r, &st), -EPERM);
	snprintf(p, sizeof(p), "%s/f", dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	int fd = gs_open_regular_at(rfd, "f", 0, r, &st);
	cr_assert_geq(fd, 0);
	close(fd);
	close(rfd);
	for (const char *n = "abs\0up\0fifo\0f\0"; *n; n += strlen(n) + 1) {
		snprintf(p, sizeof(p), "%s/%s", dir, n);
		unlink(p);
	}
	rmdir(dir);
}
