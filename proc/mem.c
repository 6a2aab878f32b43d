/* SPDX-License-Identifier: MIT */
/*
 * The one reader of target memory.  process_vm_readv first (no fd, one
 * syscall); /proc/PID/mem where it is refused: seccomp filters and LSMs
 * (Yama, AppArmor profiles) may deny the one and allow the other, and a
 * cubin read by the GPU host must work wherever a Python read works.
 * And the one writer: process_vm_writev only (see proc.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>
#include "proc/proc.h"

static ssize_t via_vm_readv(uint32_t tgid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };

	return process_vm_readv((pid_t)tgid, &l, 1, &r, 1, 0);
}

/* Bytes read through /proc/tgid/mem, or -errno. */
static ssize_t via_proc_mem(uint32_t tgid, uint64_t addr, void *buf, size_t len)
{
	char path[64];
	size_t done = 0;

	snprintf(path, sizeof(path), "/proc/%u/mem", tgid);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	return (ssize_t)done;
}

int gs_proc_mem_read(uint32_t tgid, uint64_t addr, void *buf, size_t len, size_t *got)
{
	if (got)
		*got = 0;
	if (len > GS_PROC_MEM_MAX_BYTES)
		return -E2BIG;
	if (!len)
		return 0;
	ssize_t n = via_vm_readv(tgid, addr, buf, len);
	if (n == (ssize_t)len) {
		if (got)
			*got = len;
		return 0;
	}
	if (n < 0 && errno == ESRCH)
		return -ESRCH;
	ssize_t m = via_proc_mem(tgid, addr, buf, len);
	if (m < 0 && n <= 0)
		return (int)m;
	size_t best = (size_t)(m > n ? m : n);
	if (got)
		*got = best;
	return best == len ? 0 : -EFAULT;
}

int gs_proc_mem_write(uint32_t tgid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (len > GS_PROC_MEM_WRITE_MAX_BYTES)
		return -E2BIG;
	if (!len)
		return 0;
	n = process_vm_writev((pid_t)tgid, &l, 1, &r, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	return n < 0 && errno != EFAULT ? -errno : -EFAULT;
}
