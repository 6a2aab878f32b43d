// SPDX-License-Identifier: MIT
/*
 * SIGBUS guard for reads of mapped target files (docs/SECURITY.md).
 *
 * libdwfl maps every ELF and debug file it opens (ELF_C_READ_MMAP_PRIVATE,
 * no option to read instead), and the target's user may own those files: a
 * file truncated after it was mapped turns the next read of a page past its
 * new end into SIGBUS.  Calls into libdwfl for one module go through
 * gs_sym_guarded(); a SIGBUS inside jumps back out and the call fails with
 * -EFAULT, so the module is an error (never touched again), not a crash.
 * A SIGBUS outside a guarded call keeps its default action.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "native/sym_internal.h"

static __thread sigjmp_buf *g_jump;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (g_jump)
		siglongjmp(*g_jump, 1);
	signal(sig, SIG_DFL); /* not ours: die as without the handler */
	raise(sig);
}

static void install_once(void)
{
	static bool done;
	struct sigaction sa;

	if (done)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	done = true;
}

int gs_sym_guarded(int (*fn)(void *), void *arg)
{
	sigjmp_buf jb, *outer = g_jump;
	volatile int rc;

	install_once();
	if (sigsetjmp(jb, 1)) {
		g_jump = outer;
		return -EFAULT;
	}
	g_jump = &jb;
	rc = fn(arg);
	g_jump = outer;
	return rc;
}
