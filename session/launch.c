/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/launch.h"
#include "util/clock.h"

/* Under sudo, run CMD as the user who invoked sudo, with that user's
 * supplementary groups, so the job behaves as it does without gpusample. */
static bool sudo_ids(uid_t *uid, gid_t *gid)
{
	const char *uid_s = getenv("SUDO_UID"), *gid_s = getenv("SUDO_GID");

	if (!uid_s || !gid_s || geteuid() != 0)
		return false;
	*uid = (uid_t)strtoul(uid_s, NULL, 10);
	*gid = (gid_t)strtoul(gid_s, NULL, 10);
	return *uid != 0;
}

static int drop_to_sudo_user(void)
{
	uid_t uid;
	gid_t gid;
	struct passwd *pw;

	if (!sudo_ids(&uid, &gid))
		return 0;
	pw = getpwuid(uid);
	if (pw ? initgroups(pw->pw_name, gid) : setgroups(0, NULL))
		return -errno;
	if (setgid(gid) || setuid(uid))
		return -errno;
	if (pw) {
		setenv("HOME", pw->pw_dir, 1);
		setenv("USER", pw->pw_name, 1);
		setenv("LOGNAME", pw->pw_name, 1);
	}
	return 0;
}

/* Dispositions gpusample was started with, restored in the child: its own
 * handlers and ignores (SIGPIPE) are not the job's business. */
static struct sigaction g_orig_pipe, g_orig_hup;
static bool g_saved;
static int g_orig_nice;

void gs_launch_save_signals(void)
{
	sigaction(SIGPIPE, NULL, &g_orig_pipe);
	sigaction(SIGHUP, NULL, &g_orig_hup);
	errno = 0;
	g_orig_nice = getpriority(PRIO_PROCESS, 0);
	if (errno)
		g_orig_nice = 0;
	g_saved = true;
}

static void restore_signals(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;

	sigemptyset(&dfl.sa_mask);
	sigaction(SIGPIPE, g_saved && g_orig_pipe.sa_handler == SIG_IGN ? &g_orig_pipe : &dfl,
		  NULL);
	sigaction(SIGHUP, g_saved && g_orig_hup.sa_handler == SIG_IGN ? &g_orig_hup : &dfl, NULL);
	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* gpusample runs niced up (session/attach.c); the job gets its own nice back */
	if (g_saved)
		setpriority(PRIO_PROCESS, 0, g_orig_nice);
}

static void child(char **argv, bool as_root, char **env_extra, int go_rd, int err_wr)
{
	char c;
	int e;

	/* Die with gpusample if it is killed before releasing us. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read(go_rd, &c, 1) != 1)
		_exit(127);
	close(go_rd);
	prctl(PR_SET_PDEATHSIG, 0);
	for (char **kv = env_extra; kv && *kv; kv++)
		putenv(*kv);
	/* oneDNN's JIT kernels get names through the Linux perf map
	 * (/tmp/perf-PID.map, native/perfmap.c): 2 is the perf map (1 is
	 * VTune).  DNNL_ is the name before oneDNN 2.x.  A user's value wins. */
	setenv("ONEDNN_JIT_PROFILE", "2", 0);
	setenv("DNNL_JIT_PROFILE", "2", 0);
	if (!as_root && (e = drop_to_sudo_user()) != 0)
		goto fail;
	restore_signals();
	execvp(argv[0], argv);
	e = -errno;
fail:
	if (write(err_wr, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

int gs_launch_start(struct gs_launch *l, char **argv, bool as_root, char **env_extra, char *err,
		    size_t errlen)
{
	int go[2], ex[2];
	gid_t gid;

	if (as_root || !sudo_ids(&l->uid, &gid))
		l->uid = geteuid();
	l->jit_maps_since_ns = getenv("ONEDNN_JIT_PROFILE") || getenv("DNNL_JIT_PROFILE")
				   ? 0
				   : gs_now_ns(CLOCK_REALTIME);
	if (pipe2(go, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	l->pid = fork();
	if (l->pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -errno;
	}
	if (l->pid == 0) {
		close(go[1]);
		close(ex[0]);
		child(argv, as_root, env_extra, go[0], ex[1]);
	}
	close(go[0]);
	close(ex[1]);
	l->go_fd = go[1];
	l->err_fd = ex[0];
	return 0;
}

int gs_launch_release(struct gs_launch *l, char *err, size_t errlen)
{
	int e = 0;
	ssize_t n;

	if (write(l->go_fd, "g", 1) != 1) {
		snprintf(err, errlen, "cannot start the command: %s", strerror(errno));
		return -errno;
	}
	close(l->go_fd);
	do
		n = read(l->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(l->err_fd);
	if (n == sizeof(e) && e < 0) {
		snprintf(err, errlen, "cannot run the command: %s (check the path and permissions)",
			 strerror(-e));
		return e;
	}
	return 0;
}

size_t gs_launch_remove_jit_maps(const struct gs_launch *l, const uint32_t *tgids, size_t n)
{
	/* /tmp is root's and sticky: only the file's owner (the command's
	 * user) can swap the entry between the check and the unlink, so what
	 * goes is always theirs; the last component is never followed */
	int dir = l->jit_maps_since_ns ? open("/tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
				       : -1;
	size_t removed = 0;

	for (size_t i = 0; dir >= 0 && i < n; i++) {
		char name[32];
		struct stat st;

		snprintf(name, sizeof(name), "perf-%u.map", tgids[i]);
		if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
		    st.st_nlink != 1 || st.st_uid != l->uid ||
		    (uint64_t)st.st_ctim.tv_sec * 1000000000ull + (uint64_t)st.st_ctim.tv_nsec <
			l->jit_maps_since_ns)
			continue;
		removed += unlinkat(dir, name, 0) == 0;
	}
	if (dir >= 0)
		close(dir);
	return removed;
}
