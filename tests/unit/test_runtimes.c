// SPDX-License-Identifier: MIT
/* The note for a process whose Python stacks cannot be read says "native
 * stacks only" once, whether or not the symbolizer's reason says it. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/proc.h"
#include "python/python.h"
#include "session/session_int.h"
#include "gpusample/profile.h"
#include "keep_profile.h"

static const char *note(const char *why)
{
	static struct gs_profile p;
	static char buf[512];
	gs_profile_init(&p);
	cr_assert_eq(gs_py_note_native_only(&p, 42, "python3", why), 0);
	cr_assert_eq(p.n_notes, 1);
	snprintf(buf, sizeof(buf), "%s", gs_profile_str(&p, p.notes[0]));
	gs_test_keep_profile(&p);
	gs_profile_free(&p);
	return buf;
}

Test(runtimes, native_only_said_once)
{
	cr_assert_str_eq(note("free-threaded build: not supported (native stacks only)"),
			 "pid 42 (python3): free-threaded build: not supported (native stacks "
			 "only)");
	cr_assert_str_eq(note("Python 2 is not supported (native stacks only)"),
			 "pid 42 (python3): Python 2 is not supported (native stacks only)");
	cr_assert_str_eq(note("no _PyRuntime symbol"),
			 "pid 42 (python3): no _PyRuntime symbol; native stacks only");
}

/* The Python plug-in on a process table, with a real interpreter: found at
 * attach (one configuration stored, the targets entry pushed), inherited by
 * a fork child (pushed again: BPF copied the entry before discovery), reset
 * by an exec (pushed with no configuration), and a process that is no
 * Python stays unknown while its discovery window runs. */
struct host_log {
	uint32_t cfgs, changed[8], n_changed;
};

static int h_set_cfg(void *ctx, uint32_t id, const struct gs_py_cfg *cfg)
{
	struct host_log *l = ctx;

	cr_assert_eq(id, l->cfgs + 1);
	l->cfgs++;
	return 0;
}

static void h_changed(void *ctx, uint32_t tgid)
{
	struct host_log *l = ctx;

	if (l->n_changed < 8)
		l->changed[l->n_changed++] = tgid;
}

static void h_grew(void *ctx, uint32_t tgid)
{
}

static const char *h_comm(void *ctx, uint32_t tgid)
{
	return "python3";
}

static pid_t spawn(const char *path, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		execv(path, argv);
		_exit(127);
	}
	cr_assert_gt(pid, 0);
	return pid;
}

Test(python_plugin, discovery_fork_exec, .timeout = 30)
{
	char *py_argv[] = { "python3", "-c", "import time; time.sleep(30)", NULL };
	char *sl_argv[] = { "sleep", "30", NULL };
	pid_t py_pid = spawn("/usr/bin/python3", py_argv), sl_pid = spawn("/bin/sleep", sl_argv);
	uint32_t child = (uint32_t)getpid(); /* alive: stands for a fork child */
	struct host_log log = { 0 };
	const struct gs_py_host host = { &log, h_set_cfg, h_changed, h_grew, h_comm };
	struct gs_profile prof;
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_proc_handler h;
	struct gs_py_proc v;
	struct gs_py *py;
	int id;

	gs_profile_init(&prof);
	py = gs_py_new(&prof);
	cr_assert(t && py);
	gs_py_plugin(py, &host, &h);
	cr_assert_geq(id = gs_proc_register(t, &h), 0);
	cr_assert_eq(gs_py_bind(py, t, id), 0);
	/* an interpreter needs a moment to map libpython and initialise */
	for (int i = 0; i < 100; i++) {
		usleep(50000);
		if (i == 0)
			cr_assert_not_null(gs_proc_table_seen(t, (uint32_t)py_pid, 0));
		else
			gs_proc_table_tick(t);
		if (!gs_py_proc_view(py, (uint32_t)py_pid, &v) && v.state == GS_PYS_FOUND)
			break;
	}
	cr_assert_eq(v.state, GS_PYS_FOUND, "state %u", v.state);
	cr_assert_eq(v.cfg_id, 1);
	cr_assert(!strncmp(v.name, "CPython 3.", 10), "%s", v.name);
	cr_assert_neq(v.runtime, 0);
	cr_assert_eq(log.cfgs, 1);
	cr_assert_eq(log.changed[log.n_changed - 1], (uint32_t)py_pid);
	cr_assert_not_null(gs_py_cfg_of(py, (uint32_t)py_pid));

	uint32_t before = log.n_changed;
	cr_assert_not_null(gs_proc_table_fork(t, (uint32_t)py_pid, child));
	cr_assert_eq(gs_py_proc_view(py, child, &v), 0);
	cr_assert_eq(v.state, GS_PYS_FOUND);
	cr_assert_eq(v.cfg_id, 1);
	cr_assert_eq(log.n_changed, before + 1);
	cr_assert_eq(log.changed[before], child);

	/* exec into this test binary: no Python, the entry pushed without one */
	gs_proc_table_exec(t, child, (uint32_t)py_pid);
	cr_assert_eq(gs_py_proc_view(py, child, &v), 0);
	cr_assert_eq(v.state, GS_PYS_UNKNOWN);
	cr_assert_eq(v.cfg_id, 0);
	cr_assert_null(gs_py_cfg_of(py, child));
	cr_assert_eq(log.changed[log.n_changed - 1], child);
	cr_assert_eq(log.cfgs, 1);

	cr_assert_not_null(gs_proc_table_seen(t, (uint32_t)sl_pid, 0));
	cr_assert_eq(gs_py_proc_view(py, (uint32_t)sl_pid, &v), 0);
	cr_assert_eq(v.state, GS_PYS_UNKNOWN);

	kill(py_pid, SIGKILL);
	kill(sl_pid, SIGKILL);
	waitpid(py_pid, NULL, 0);
	waitpid(sl_pid, NULL, 0);
	gs_proc_table_free(t);
	gs_py_free(py);
	gs_profile_free(&prof);
}
