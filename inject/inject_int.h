/* SPDX-License-Identifier: MIT */
/* Private to inject/: the message helper of its files and the staging
 * (stage.c) that inject.c drives. */
#ifndef GS_INJECT_INJECT_INT_H
#define GS_INJECT_INJECT_INT_H

#include <stddef.h>
#include <stdint.h>

/* Format one line into msg (when msg and len) and return err. */
int gs_inject_say(char *msg, size_t len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* stage.c: the staged directory in tgid's root (inject.h says where and how).  dir
 * gets the directory's path in the target; the files are GS_INJECT_AGENT_NAME and
 * GS_INJECT_SCRIPT_NAME in it.  0 or -errno with msg. */
struct gs_inject_stage {
	int parent_fd, dir_fd; /* -1 when not open */
	int alive_fd;          /* the script, write-locked (OFD) while we attach */
	char name[40];         /* ".gpusample-inject-XXXXXXXX" */
	char dir[128];         /* its path in the target's root */
};
#define GS_INJECT_AGENT_NAME  "libgpusample_agent.so"
#define GS_INJECT_SCRIPT_NAME "gpusample_inject.py"
/* The agent's name as an extension module: its PyInit_ entry (agent.h). */
#define GS_INJECT_AGENT_MODULE "libgpusample_agent"
int gs_inject_stage(uint32_t tgid, const char *agent, struct gs_inject_stage *st, char *msg,
		    size_t len);
/* Can tgid's user (uid, gids, in its root) read both staged files?
 * 0, -EACCES (msg names the file), or -errno of the check. */
int gs_inject_stage_check_user(uint32_t tgid, const struct gs_inject_stage *st, char *msg,
			       size_t len);
/* access.c: could tgid's user ptrace it (inject.h)?  0, or -EPERM with
 * msg naming what differs, or -errno of reading /proc. */
int gs_inject_check_access(uint32_t tgid, char *msg, size_t len);
/* Remove the files and the directory (through the fds held: works after
 * the process is gone) and close the fds. */
void gs_inject_unstage(struct gs_inject_stage *st);

#endif
