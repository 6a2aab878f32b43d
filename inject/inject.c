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
#include <sys/file.h>
#include <sys/stat.h>
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
	j->lock_fd = openat(j->lock_dir_fd, j->lock_name,
			    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	if (j->lock_fd < 0)
		return gs_inject_say(msg, len, -errno, "cannot open %s/%s (%s)", LOCK_DIR,
				     j->lock_name, strerror(errno));
	if (flock(j->lock_fd, LOCK_EX | LOCK_NB)) {
		close(j->lock_fd);
		j->lock_fd = -1;
		return gs_inject_say(msg, len, -EALREADY,
				     "another gpusample is injecting the agent into this process");
	}
	return 0;
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

static void free_inject(struct gs_inject *j)
{
	gs_inject_unstage(&j->st);
	unlock_target(j);
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
	j->lock_fd = j->lock_dir_fd = -1;
	j->st.parent_fd = j->st.dir_fd = -1;
	/* The lock first (a second gpusample is told so), then the interpreter:
	 * no file is made for a process that refuses. */
	if ((err = lock_target(j, msg, len)) ||
	    (err = gs_pyexec_locate(r->tgid, r->runtime, r->version_hex, &j->t, msg, len)) ||
	    (err = gs_inject_stage(r->tgid, r->agent, &j->st, msg, len)) ||
	    (err = gs_inject_stage_check_user(r->tgid, &j->st, msg, len))) {
		free_inject(j);
		return err;
	}
	snprintf(j->script, sizeof(j->script), "%s/%s", j->st.dir, GS_INJECT_SCRIPT_NAME);
	/* Looked at again under the lock: another tool may have asked since. */
	if ((err = gs_pyexec_locate(r->tgid, r->runtime, r->version_hex, &j->t, msg, len)) ||
	    (err = gs_pyexec_request(r->tgid, &j->t, j->script, msg, len))) {
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
