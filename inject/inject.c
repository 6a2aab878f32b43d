/* SPDX-License-Identifier: MIT */
/*
 * One injection: lock, stage, check, request, then follow it to its end
 * (inject.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "inject/inject.h"
#include "inject/inject_int.h"

#define LOCK_DIR "/run/gpusample"

struct gs_inject {
	uint32_t tgid;
	struct gs_pyexec_target t;
	struct gs_inject_stage st;
	char script[192];
	int lock_fd, lock_dir_fd;
	char lock_name[32];
	pid_t watchdog;  /* cleans up if gpusample dies (0: none) */
	int watchdog_fd; /* its pipe: a byte means "done, exit"; EOF "clean up" */
	uint64_t deadline_ms, start_ms;
	enum gs_inject_state state;
	bool abandoned; /* exec'd or gone: never written again */
};

int gs_inject_say(char *msg, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	if (msg && len) {
		va_start(ap, fmt);
		vsnprintf(msg, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* One injection per process across gpusample instances: an flock on
 * LOCK_DIR/inject.PID (root's directory, made 0700 when missing). */
static int lock_target(struct gs_inject *j, char *msg, size_t len)
{
	struct stat st;

	if (mkdir(LOCK_DIR, 0700) && errno != EEXIST)
		return gs_inject_say(msg, len, -errno, "cannot make %s (%s)", LOCK_DIR,
				     strerror(errno));
	j->lock_dir_fd = open(LOCK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j->lock_dir_fd < 0 || fstat(j->lock_dir_fd, &st) || st.st_uid != 0 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return gs_inject_say(msg, len, -EPERM,
				     "%s must be root's directory, writable by root only",
				     LOCK_DIR);
	snprintf(j->lock_name, sizeof(j->lock_name), "inject.%u", j->tgid);
	/* The holder unlinks the file while it holds it (unlock_target), so
	 * an flock won on a file opened before that unlink is a lock on a
	 * name nobody else sees: held only when the name still is the file
	 * locked, else tried again on the new file. */
	for (int tries = 0; tries < 8; tries++) {
		struct stat fd_st, name_st;
		j->lock_fd = openat(j->lock_dir_fd, j->lock_name,
				    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
		if (j->lock_fd < 0)
			return gs_inject_say(msg, len, -errno, "cannot open %s/%s (%s)", LOCK_DIR,
					     j->lock_name, strerror(errno));
		if (flock(j->lock_fd, LOCK_EX | LOCK_NB)) {
			close(j->lock_fd);
			j->lock_fd = -1;
			return gs_inject_say(
			    msg, len, -EALREADY,
			    "another gpusample is injecting the agent into this process");
		}
		if (!fstat(j->lock_fd, &fd_st) &&
		    !fstatat(j->lock_dir_fd, j->lock_name, &name_st, AT_SYMLINK_NOFOLLOW) &&
		    fd_st.st_ino == name_st.st_ino && fd_st.st_dev == name_st.st_dev)
			return 0;
		close(j->lock_fd);
		j->lock_fd = -1;
	}
	return gs_inject_say(msg, len, -EALREADY, "the lock %s/%s keeps being replaced", LOCK_DIR,
			     j->lock_name);
}

static void unlock_target(struct gs_inject *j)
{
	if (j->lock_fd >= 0) {
		unlinkat(j->lock_dir_fd, j->lock_name, 0); /* still held: nobody else has it */
		close(j->lock_fd);
	}
	if (j->lock_dir_fd >= 0)
		close(j->lock_dir_fd);
	j->lock_fd = j->lock_dir_fd = -1;
}

/* The watchdog: a child that outlives a gpusample killed by SIGKILL (which
 * runs no cleanup of its own) long enough to withdraw the request, drop
 * the liveness lock (its copy of alive_fd) and remove the staged files and
 * the lock file.  It keeps only the descriptors it needs (no BPF link or
 * perf event of gpusample stays alive through it) and ignores the
 * terminal's signals.  Only system calls: it is the child of a threaded
 * process. */
static void close_all_but(int *keep, int n)
{
	unsigned from = 0;

	for (int i = 1; i < n; i++) /* insertion sort: a handful */
		for (int k = i; k > 0 && keep[k] < keep[k - 1]; k--) {
			int t = keep[k];
			keep[k] = keep[k - 1];
			keep[k - 1] = t;
		}
	for (int i = 0; i < n; i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < from)
			continue;
		if ((unsigned)keep[i] > from)
			syscall(__NR_close_range, from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	/* the system call, not glibc's close_range (2.34): the binaries ask for
	 * no glibc newer than 2.31 (Debian 11, Ubuntu 20.04) */
	syscall(__NR_close_range, from, ~0u, 0);
}

static __attribute__((noreturn)) void watchdog_run(struct gs_inject *j, int rfd)
{
	int keep[] = { rfd,        j->st.parent_fd, j->st.dir_fd, j->st.alive_fd,
		       j->lock_fd, j->lock_dir_fd };
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2 };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigset_t none;
	ssize_t r;
	char c;

	close_all_but(keep, (int)(sizeof(keep) / sizeof(keep[0])));
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &ign, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_NAME, "gs-inject-wd", 0, 0, 0);
	do
		r = read(rfd, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1) {                               /* gpusample died: its work, done here */
		gs_pyexec_withdraw(j->tgid, &j->t); /* checks it still is that image */
		gs_inject_unstage(&j->st);
		unlock_target(j);
	}
	_exit(0);
}

static int start_watchdog(struct gs_inject *j, char *msg, size_t len)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC))
		return gs_inject_say(msg, len, -errno, "pipe: %s", strerror(errno));
	j->watchdog = fork();
	if (j->watchdog == 0) {
		close(p[1]);
		watchdog_run(j, p[0]);
	}
	close(p[0]);
	if (j->watchdog < 0) {
		j->watchdog = 0;
		close(p[1]);
		return gs_inject_say(msg, len, -errno, "fork: %s", strerror(errno));
	}
	j->watchdog_fd = p[1];
	return 0;
}

static void stop_watchdog(struct gs_inject *j)
{
	if (!j->watchdog)
		return;
	while (write(j->watchdog_fd, "", 1) < 0 && errno == EINTR)
		;
	close(j->watchdog_fd);
	while (waitpid(j->watchdog, NULL, 0) < 0 && errno == EINTR)
		;
	j->watchdog = 0;
}

static void free_inject(struct gs_inject *j)
{
	gs_inject_unstage(&j->st);
	unlock_target(j);
	stop_watchdog(j);
	free(j);
}

int gs_inject_start(const struct gs_inject_req *r, struct gs_inject **out, char *msg, size_t len)
{
	struct gs_inject *j = calloc(1, sizeof(*j));
	int err;

	*out = NULL;
	if (!j)
		return gs_inject_say(msg, len, -ENOMEM, "out of memory");
	j->tgid = r->tgid;
	j->lock_fd = j->lock_dir_fd = j->watchdog_fd = -1;
	j->st.parent_fd = j->st.dir_fd = j->st.alive_fd = -1;
	/* The lock first (a second gpusample is told so), then the process's
	 * ids and the interpreter: no file is made for a process that
	 * refuses. */
	if ((err = lock_target(j, msg, len)) || (err = gs_inject_check_access(r->tgid, msg, len)) ||
	    (err = gs_pyexec_locate(r->tgid, r->runtime, r->version_hex, &j->t, msg, len)) ||
	    (err = gs_inject_stage(r->tgid, r->agent, &j->st, msg, len)) ||
	    (err = gs_inject_stage_check_user(r->tgid, &j->st, msg, len))) {
		free_inject(j);
		return err;
	}
	snprintf(j->script, sizeof(j->script), "%s/%s", j->st.dir, GS_INJECT_SCRIPT_NAME);
	/* Looked at again under the lock: another tool may have asked since,
	 * the process may have changed ids.  The watchdog before the request:
	 * from the write on, gpusample's death withdraws it. */
	if ((err = gs_pyexec_locate(r->tgid, r->runtime, r->version_hex, &j->t, msg, len)) ||
	    (err = start_watchdog(j, msg, len)) ||
	    (err = gs_inject_check_access(r->tgid, msg, len)) ||
	    (err = gs_pyexec_request(r->tgid, &j->t, j->script, msg, len))) {
		free_inject(j);
		return err;
	}
	/* ids changed while the request was written: taken back */
	if ((err = gs_inject_check_access(r->tgid, msg, len))) {
		gs_pyexec_withdraw(r->tgid, &j->t);
		free_inject(j);
		return err;
	}
	j->start_ms = r->now_ms;
	j->deadline_ms = r->now_ms + r->wait_ms;
	j->state = GS_INJECT_PENDING;
	*out = j;
	return 0;
}

enum gs_inject_state gs_inject_poll(struct gs_inject *j, uint64_t now_ms, char *msg, size_t len)
{
	int rc;

	if (msg && len)
		msg[0] = '\0';
	if (j->state != GS_INJECT_PENDING)
		return j->state;
	rc = j->abandoned ? -ESRCH : gs_pyexec_pending(j->tgid, &j->t);
	if (rc == 0) {
		j->state = GS_INJECT_RAN;
		gs_inject_say(msg, len, 0, "the interpreter ran the script %s after %llu ms",
			      j->script, (unsigned long long)(now_ms - j->start_ms));
	} else if (rc < 0) {
		j->abandoned = true;
		j->state = GS_INJECT_GONE;
		gs_inject_say(msg, len, 0, "the process %s before its interpreter ran the script",
			      rc == -ESTALE ? "exec'd" : "exited");
	} else if (now_ms >= j->deadline_ms) {
		rc = gs_pyexec_withdraw(j->tgid, &j->t);
		if (rc == 0) { /* taken at the last moment */
			j->state = GS_INJECT_RAN;
			gs_inject_say(msg, len, 0,
				      "the interpreter ran the script %s after %llu ms", j->script,
				      (unsigned long long)(now_ms - j->start_ms));
			return j->state;
		}
		j->state = rc == 1 ? GS_INJECT_TIMEOUT : GS_INJECT_GONE;
		j->abandoned = rc != 1;
		gs_inject_say(
		    msg, len, 0,
		    "the main thread did not reach a safe point within %llu ms (blocked in C "
		    "code, or not running Python)%s",
		    (unsigned long long)(j->deadline_ms - j->start_ms),
		    rc == 1 ? "; the request was withdrawn" : "");
	}
	return j->state;
}

void gs_inject_abandon(struct gs_inject *j)
{
	j->abandoned = true;
}

void gs_inject_withdraw_in(struct gs_inject *j, uint32_t child)
{
	if (j && j->state == GS_INJECT_PENDING)
		gs_pyexec_withdraw(child, &j->t);
}

const char *gs_inject_script(const struct gs_inject *j)
{
	return j->script;
}

void gs_inject_end(struct gs_inject *j)
{
	if (!j)
		return;
	if (j->state == GS_INJECT_PENDING && !j->abandoned)
		gs_pyexec_withdraw(j->tgid, &j->t);
	free_inject(j);
}
