/* SPDX-License-Identifier: MIT */
/*
 * Could the job's user ptrace the target?  The kernel's ptrace_may_access
 * (kernel/ptrace.c, __ptrace_may_access) for a tracer without
 * CAP_SYS_PTRACE, read from /proc: the target's real, effective, saved and
 * fs uids all the user's, the same for the gids, the process dumpable, and
 * no capability the user lacks.  gpusample (root) injects only into a
 * process its user could have injected into itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include "inject/inject.h"
#include "inject/inject_int.h"
#include "proc/proc.h"

/* The four ids v of key ("Uid:", "Gid:": real, effective, saved, fs); all
 * equal: 0 and *id. */
static int same_ids(uint32_t tgid, const char *key, const char *v, unsigned long *id, char *msg,
		    size_t len)
{
	unsigned long r, e, s, f;

	if (sscanf(v, "%lu %lu %lu %lu", &r, &e, &s, &f) != 4)
		return gs_inject_say(msg, len, -EPROTO, "pid %u: unreadable %s line", tgid, key);
	if (r != e || r != s || r != f)
		return gs_inject_say(
		    msg, len, -EPERM,
		    "pid %u changed its %.3ss (real %lu, effective %lu, saved %lu, fs %lu): its "
		    "user could not ptrace it, so gpusample does not inject into it",
		    tgid, key, r, e, s, f);
	*id = r;
	return 0;
}

/* A process of uid holding capabilities: fine when they are capabilities
 * in a user namespace that uid owns (a rootless container), else the user
 * lacks them. */
static int check_caps(uint32_t tgid, unsigned long uid, const char *v, char *msg, size_t len)
{
	char path[48];
	struct stat ours, theirs;
	uint64_t caps = strtoull(v, NULL, 16);
	uid_t owner;
	int fd, err;

	if (uid == 0 || caps == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/ns/user", tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	err = fd < 0 || fstat(fd, &theirs) || stat("/proc/self/ns/user", &ours) ||
	      (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) ||
	      ioctl(fd, NS_GET_OWNER_UID, &owner) || owner != uid;
	if (fd >= 0)
		close(fd);
	if (err)
		return gs_inject_say(msg, len, -EPERM,
				     "pid %u holds capabilities (CapPrm %" PRIx64
				     ") its user (uid %lu) lacks: its user could not ptrace "
				     "it, so gpusample does not inject into it",
				     tgid, caps, uid);
	return 0;
}

int gs_inject_check_access(uint32_t tgid, char *msg, size_t len)
{
	static const char *const keys[] = { "Uid:", "Gid:", "CapPrm:" };
	char v[3][128], *const outs[] = { v[0], v[1], v[2] };
	unsigned long uid, gid;
	char path[48];
	struct stat st;
	int err = gs_proc_status_fields(tgid, 3, keys, outs, sizeof(v[0]));

	/* one read: the ids and capabilities of one moment */
	if (err)
		return gs_inject_say(msg, len, err, "cannot read the ids of pid %u (%s)", tgid,
				     strerror(-err));
	if ((err = same_ids(tgid, "Uid:", v[0], &uid, msg, len)) ||
	    (err = same_ids(tgid, "Gid:", v[1], &gid, msg, len)) ||
	    (err = check_caps(tgid, uid, v[2], msg, len)))
		return err;
	/* The files of /proc/PID (not the directory itself) belong to the
	 * process's euid:egid while it is dumpable and to root otherwise (the
	 * kernel's task_dump_owner). */
	snprintf(path, sizeof(path), "/proc/%u/status", tgid);
	if (stat(path, &st))
		return gs_inject_say(msg, len, errno == ENOENT ? -ESRCH : -errno,
				     "cannot stat %s (%s)", path, strerror(errno));
	if (st.st_uid != uid || st.st_gid != gid)
		return gs_inject_say(
		    msg, len, -EPERM,
		    "pid %u is not dumpable (it changed ids or called "
		    "prctl(PR_SET_DUMPABLE, 0)): its user could not ptrace it, so gpusample "
		    "does not inject into it",
		    tgid);
	return 0;
}
