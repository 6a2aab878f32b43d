/* SPDX-License-Identifier: MIT */
/* Launch mode: start CMD stopped before exec so that it is a target from its
 * first instruction, then let it exec as the invoking (sudo) user. */
#ifndef GS_CLI_LAUNCH_H
#define GS_CLI_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gs_launch {
	pid_t pid;
	int go_fd;  /* write end: one byte releases the child */
	int err_fd; /* read end: errno of a failed exec, EOF on success */
	uid_t uid;  /* the user the command runs as */
	/* CLOCK_REALTIME ns at the start; 0 when the user set oneDNN's perf
	 * map switch themselves (the maps are theirs to keep) */
	uint64_t jit_maps_since_ns;
};

/* Fork CMD; the child waits for gs_launch_release.  env_extra: "K=V"
 * strings set in the child (NULL-terminated, may be NULL). */
/* Remember the signal dispositions and nice value gpusample was started
 * with (call before installing its own handlers or raising its priority);
 * the command gets them back, not gpusample's SIGPIPE ignore, handlers or
 * priority. */
void gs_launch_save_signals(void);
int gs_launch_start(struct gs_launch *l, char **argv, bool as_root, char **env_extra, char *err,
		    size_t errlen);
/* Release the child; returns 0 once it has exec'ed, or -errno of the
 * failed exec (message in err). */
int gs_launch_release(struct gs_launch *l, char *err, size_t errlen);
/* The perf maps oneDNN wrote because gpusample switched them on
 * (/tmp/perf-PID.map; nobody removes them) of the command's processes
 * that have exited, tgids[0..n): removed once the profile is written, so
 * runs do not fill /tmp.  Only a regular file with one link, owned by the
 * command's user and changed since the start; a map the user asked for
 * (their own ONEDNN_JIT_PROFILE) stays.  Returns how many were removed. */
size_t gs_launch_remove_jit_maps(const struct gs_launch *l, const uint32_t *tgids, size_t n);

#endif
