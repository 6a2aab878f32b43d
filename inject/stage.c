/* SPDX-License-Identifier: MIT */
/*
 * The staged directory of an injection, in the target's root (inject.h):
 * made and filled only through descriptors, never by a path the target
 * could redirect.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "inject/inject.h"
#include "inject/inject_int.h"
#include "proc/proc.h"

#define AGENT_MAX_BYTES (64u << 20)
#define CHECK_WAIT_MS   2000
#define MAX_GROUPS      256

/* Candidate parents, relative to the target's root: the first safe one. */
static const char *const parents[] = { "tmp", "var/tmp", "dev/shm" };

static int open_root(uint32_t tgid)
{
	char path[48];
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/root", tgid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? (errno == ENOENT ? -ESRCH : -errno) : fd;
}

/* Is the directory fd (rel in tgid's root) a temporary directory of the
 * job's own, not some other tree bound there?  Its mount (statx's mount
 * id) in the job's mountinfo gives the bound tree's path in its
 * filesystem (the root field) and where the job sees it (the mount point):
 * the directory's path in its filesystem must end as rel does (/tmp,
 * /var/tmp, /dev/shm: the host's /tmp bound at the job's /tmp is fine,
 * its /etc is not), or the directory is the root of a sticky tmpfs (or
 * ramfs): a /tmp mounted for the job (not the host's /run, say).  A mount
 * the job's mountinfo leaves out is mounted above the job's root (the
 * kernel skips mount points outside it): the directory is then part of the
 * job's own tree (a chroot's /tmp). */
static bool own_tmp(uint32_t tgid, int fd, const char *rel)
{
	char path[48], line[4096], root[2048], mnt[2048], type[64];
	struct statx sx;
	bool ok = true;
	FILE *f;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID | STATX_MODE, &sx) ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return false;
	snprintf(path, sizeof(path), "/proc/%u/mountinfo", tgid);
	if (!(f = fopen(path, "re")))
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long id;
		const char *dash = strstr(line, " - ");
		if (sscanf(line, "%llu %*u %*s %2047s %2047s", &id, root, mnt) != 3 ||
		    id != sx.stx_mnt_id || !dash || sscanf(dash, " - %63s", type) != 1)
			continue;
		/* the path below the mount point, appended to the bound tree */
		char job_path[64], fs_path[4200];
		snprintf(job_path, sizeof(job_path), "/%s", rel);
		size_t m = strcmp(mnt, "/") ? strlen(mnt) : 0;
		if (m > strlen(job_path)) {
			ok = false;
			break;
		}
		const char *below = job_path + m, *last = strrchr(job_path, '/');
		snprintf(fs_path, sizeof(fs_path), "%s%s", strcmp(root, "/") ? root : "", below);
		size_t fl = strlen(fs_path), ll = strlen(last);
		ok = (fl >= ll && !strcmp(fs_path + fl - ll, last)) ||
		     (!*below && !strcmp(root, "/") &&
		      (!strcmp(type, "tmpfs") || !strcmp(type, "ramfs")) &&
		      (sx.stx_mode & S_ISVTX));
		break;
	}
	fclose(f);
	return ok;
}

/* A parent nobody but root can rename entries in (root-owned, and not
 * group/other-writable unless sticky), executable mappings allowed, the
 * job's own temporary directory (own_tmp). */
static int open_parent(uint32_t tgid, int root_fd, const char *rel, const char **why)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct statvfs vfs;
	struct stat st;
	int fd = (int)syscall(__NR_openat2, root_fd, rel, &how, sizeof(how));

	if (fd < 0) {
		*why = "cannot be opened without following links";
		return -errno;
	}
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0)
		*why = "is not a root-owned directory";
	else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		*why = "is writable by others and not sticky";
	else if (fstatvfs(fd, &vfs) || (vfs.f_flag & (ST_NOEXEC | ST_RDONLY)))
		*why = "is mounted noexec or read-only";
	else if (!own_tmp(tgid, fd, rel))
		*why = "is a bind mount of a directory that is not a temporary one";
	else
		return fd;
	close(fd);
	return -EPERM;
}

/* Create name in dir_fd (never over anything) with data from src_fd or buf. */
static int write_file(int dir_fd, const char *name, int src_fd, const char *buf, size_t n)
{
	char chunk[65536];
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int err = 0;

	if (fd < 0)
		return -errno;
	for (size_t done = 0; !err;) {
		ssize_t r = src_fd >= 0
				? read(src_fd, chunk, sizeof(chunk))
				: (ssize_t)(n - done < sizeof(chunk) ? n - done : sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err = r < 0 ? -errno : 0;
			break;
		}
		const char *p = src_fd >= 0 ? chunk : buf + done;
		for (ssize_t w = 0; w < r;) {
			ssize_t k = write(fd, p + w, (size_t)(r - w));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				err = k < 0 ? -errno : -EIO;
				break;
			}
			w += k;
		}
		done += (size_t)r;
	}
	if (!err && fchmod(fd, 0644))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	return err;
}

/* gpusample's agent: a regular root-owned file nobody else may write. */
static int open_agent(const char *agent, char *msg, size_t len)
{
	struct stat st;
	int fd = gs_open_regular(agent, O_NOFOLLOW, &st);

	if (fd < 0)
		return gs_inject_say(msg, len, fd, "cannot open gpusample's agent %s (%s)", agent,
				     strerror(-fd));
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    st.st_size > (off_t)AGENT_MAX_BYTES) {
		close(fd);
		return gs_inject_say(
		    msg, len, -EPERM,
		    "gpusample's agent %s must be a root-owned file that group and others "
		    "cannot write (install it with make install)",
		    agent);
	}
	return fd;
}

/* The liveness lock the script tests: an OFD write lock on the script,
 * held through alive_fd (and the watchdog's copy of it) while gpusample
 * is attached; the kernel drops it when the last holder dies. */
static int lock_script(struct gs_inject_stage *st)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	st->alive_fd = openat(st->dir_fd, GS_INJECT_SCRIPT_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (st->alive_fd < 0)
		return -errno;
	return fcntl(st->alive_fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

static int make_dir(struct gs_inject_stage *st, const char *rel)
{
	uint32_t r;
	struct stat sb;
	int err;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return -EIO;
	snprintf(st->name, sizeof(st->name), ".gpusample-inject-%08x", r);
	if (mkdirat(st->parent_fd, st->name, 0700))
		return -errno;
	st->dir_fd = openat(st->parent_fd, st->name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	err = st->dir_fd < 0 ? -errno : 0;
	if (!err && (fstat(st->dir_fd, &sb) || sb.st_uid != 0))
		err = -EPERM;
	if (err) {
		if (st->dir_fd >= 0)
			close(st->dir_fd);
		st->dir_fd = -1;
		unlinkat(st->parent_fd, st->name, AT_REMOVEDIR);
		return err;
	}
	snprintf(st->dir, sizeof(st->dir), "/%s/%s", rel, st->name);
	return 0;
}

/* The script: only modules built into the interpreter (posix, _imp: in
 * sys.modules from its start, never searched on the job's sys.path), so no
 * file of the job runs.  It goes on only while the script is write-locked
 * (an OFD lock: gpusample, or its watchdog, attached); then _imp loads the
 * agent by its absolute path as an extension module would be
 * (dlopen, no search) and the agent's PyInit_ entry starts it as the CUDA
 * driver would.  Silent: the job goes on whatever happens. */
static int write_script(struct gs_inject_stage *st)
{
	char s[1536];
	int n = snprintf(s, sizeof(s),
			 "# Written by gpusample --inject: loads gpusample's GPU agent; removed at "
			 "detach.\n"
			 "def _gpusample_inject():\n"
			 "    try:\n"
			 "        import posix, _imp\n"
			 "        d = \"%s\"\n"
			 "        fd = posix.open(d + \"/%s\", posix.O_RDONLY)\n"
			 "        try:\n"
			 "            posix.lockf(fd, posix.F_TEST, 0)\n"
			 "            return  # not locked: no gpusample attached any more\n"
			 "        except OSError:\n"
			 "            pass\n"
			 "        finally:\n"
			 "            posix.close(fd)\n"
			 "        class spec:\n"
			 "            name = \"%s\"\n"
			 "            origin = d + \"/%s\"\n"
			 "        _imp.create_dynamic(spec)\n"
			 "    except Exception:\n"
			 "        pass\n"
			 "_gpusample_inject()\n"
			 "del _gpusample_inject\n",
			 st->dir, GS_INJECT_SCRIPT_NAME, GS_INJECT_AGENT_MODULE,
			 GS_INJECT_AGENT_NAME);
	int err;

	if (n < 0 || (size_t)n >= sizeof(s))
		return -ENAMETOOLONG;
	if ((err = write_file(st->dir_fd, GS_INJECT_SCRIPT_NAME, -1, s, (size_t)n)))
		return err;
	return lock_script(st);
}

int gs_inject_stage(uint32_t tgid, const char *agent, struct gs_inject_stage *st, char *msg,
		    size_t len)
{
	const char *why = "";
	int root_fd, src, err = -EXDEV;

	*st = (struct gs_inject_stage){ .parent_fd = -1, .dir_fd = -1, .alive_fd = -1 };
	if ((src = open_agent(agent, msg, len)) < 0)
		return src;
	if ((root_fd = open_root(tgid)) < 0) {
		close(src);
		return gs_inject_say(msg, len, root_fd, "cannot open /proc/%u/root (%s)", tgid,
				     strerror(-root_fd));
	}
	for (size_t i = 0; i < sizeof(parents) / sizeof(parents[0]) && st->parent_fd < 0; i++) {
		if ((st->parent_fd = open_parent(tgid, root_fd, parents[i], &why)) < 0)
			continue;
		if ((err = make_dir(st, parents[i]))) {
			why = "refused a new directory";
			close(st->parent_fd);
			st->parent_fd = -1;
		}
	}
	close(root_fd);
	if (st->parent_fd < 0) {
		close(src);
		return gs_inject_say(
		    msg, len, -EXDEV,
		    "no safe directory in the job's root for the agent: /tmp, /var/tmp and "
		    "/dev/shm there must be root-owned, sticky or not writable by others, "
		    "allow executable mappings and be the job's own temporary directory, not "
		    "another tree bound there (last: %s)",
		    why);
	}
	err = write_file(st->dir_fd, GS_INJECT_AGENT_NAME, src, NULL, 0);
	close(src);
	if (!err)
		err = write_script(st);
	if (!err && fchmod(st->dir_fd, 0755))
		err = -errno;
	if (err) {
		gs_inject_unstage(st);
		return gs_inject_say(msg, len, err,
				     "cannot write the agent and script into the job's root (%s)",
				     strerror(-err));
	}
	return 0;
}

void gs_inject_unstage(struct gs_inject_stage *st)
{
	if (st->alive_fd >= 0)
		close(st->alive_fd); /* a script run from now on loads nothing */
	if (st->dir_fd >= 0) {
		unlinkat(st->dir_fd, GS_INJECT_AGENT_NAME, 0);
		unlinkat(st->dir_fd, GS_INJECT_SCRIPT_NAME, 0);
		close(st->dir_fd);
		if (st->parent_fd >= 0)
			unlinkat(st->parent_fd, st->name, AT_REMOVEDIR);
	}
	if (st->parent_fd >= 0)
		close(st->parent_fd);
	st->dir_fd = st->parent_fd = st->alive_fd = -1;
}

/* The file-system ids of tgid (fs uid and gid: what access checks use) and
 * its supplementary groups, from /proc/tgid/status. */
struct ids {
	uid_t uid;
	gid_t gid;
	gid_t groups[MAX_GROUPS];
	int n_groups;
};

static int read_ids(uint32_t tgid, struct ids *id)
{
	char path[48], line[4096];
	unsigned long v[4];
	int have = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", tgid);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? -ESRCH : -errno;
	id->n_groups = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4) {
			id->uid = (uid_t)v[3];
			have |= 1;
		} else if (sscanf(line, "Gid: %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4) {
			id->gid = (gid_t)v[3];
			have |= 2;
		} else if (!strncmp(line, "Groups:", 7)) {
			char *p = line + 7, *end;
			for (unsigned long g; id->n_groups < MAX_GROUPS; p = end) {
				g = strtoul(p, &end, 10);
				if (end == p)
					break;
				id->groups[id->n_groups++] = (gid_t)g;
			}
		}
	}
	fclose(f);
	return have == 3 ? 0 : -EPROTO;
}

/* In a child: the job's root and ids, then open both files.  Raw syscalls:
 * the child of a threaded process runs only async-signal-safe code. */
static __attribute__((noreturn)) void check_child(int root_fd, const struct ids *id,
						  const struct gs_inject_stage *st)
{
	char path[256];
	const char *files[] = { GS_INJECT_AGENT_NAME, GS_INJECT_SCRIPT_NAME };

	if (fchdir(root_fd) || chroot(".") ||
	    syscall(SYS_setgroups, (size_t)id->n_groups, id->groups) ||
	    syscall(SYS_setresgid, id->gid, id->gid, id->gid) ||
	    syscall(SYS_setresuid, id->uid, id->uid, id->uid))
		_exit(100);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", st->dir, files[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			_exit(1 + i);
		close(fd);
	}
	_exit(0);
}

int gs_inject_stage_check_user(uint32_t tgid, const struct gs_inject_stage *st, char *msg,
			       size_t len)
{
	struct ids id;
	int root_fd, status = 0, err;
	pid_t pid, w = 0;

	if ((err = read_ids(tgid, &id)))
		return gs_inject_say(msg, len, err, "cannot read the ids of pid %u (%s)", tgid,
				     strerror(-err));
	if ((root_fd = open_root(tgid)) < 0)
		return gs_inject_say(msg, len, root_fd, "cannot open /proc/%u/root", tgid);
	pid = fork();
	if (pid == 0)
		check_child(root_fd, &id, st);
	close(root_fd);
	if (pid < 0)
		return gs_inject_say(msg, len, -errno, "fork: %s", strerror(errno));
	for (int ms = 0; ms < CHECK_WAIT_MS && !(w = waitpid(pid, &status, WNOHANG)); ms += 10)
		nanosleep(&(struct timespec){ 0, 10000000L }, NULL);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return gs_inject_say(msg, len, -ETIMEDOUT,
				     "the readability check as uid %u timed out", (unsigned)id.uid);
	}
	if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) == 100)
		return gs_inject_say(msg, len, -EIO,
				     "the readability check as uid %u could not run",
				     (unsigned)id.uid);
	if (WEXITSTATUS(status))
		return gs_inject_say(
		    msg, len, -EACCES,
		    "the job's user (uid %u) cannot read %s/%s in its root: GPU sampling needs "
		    "the agent readable there",
		    (unsigned)id.uid, st->dir,
		    WEXITSTATUS(status) == 1 ? GS_INJECT_AGENT_NAME : GS_INJECT_SCRIPT_NAME);
	return 0;
}
