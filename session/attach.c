// SPDX-License-Identifier: MIT
/*
 * The phases before and around sampling (issue 13's attach): unwind tables
 * for the processes there at attach are built by native/cfi.c's thread while
 * this loop prints progress and watches for a stop (Ctrl-C, SIGTERM) or the
 * target's exit; a run stopped before or during that phase still writes its
 * (short) profile, saying why; and the exit status tells scripts what
 * happened (launch mode: the command's own status, as perf record does).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "session/session_int.h"
#include "output/output.h"
#include "util/log.h"

/* Past this, sampling starts anyway; what is left is built while sampling
 * (those objects unwind by frame pointers until their table is loaded). */
#define ATTACH_WAIT_MAX_NS (60ull * 1000000000ull)
#define PROGRESS_EVERY_NS  1000000000ull

/* Priorities.  Sampling: gpusample at nice -10 (its threads likewise): a
 * job with hundreds of busy threads at nice 0 otherwise leaves it a 1/500
 * share of a CPU, and records pile up.  At -10 a gpusample thread weighs as
 * much as ~9 job threads while sleeping most of the time, so the job keeps
 * nearly all the machine.
 * Attach (BPF load and verification, unwind tables: 1-2 s of CPU) is a
 * bounded burst that nice -10 would still stretch to tens of seconds behind
 * 500 busy threads, so it runs SCHED_RR at the lowest real-time priority,
 * with SCHED_RESET_ON_FORK (the launched command and any thread get normal
 * scheduling), and drops back to nice -10 as soon as sampling starts or the
 * run stops.  Worst case the job loses one CPU for that burst (the kernel's
 * real-time throttling bounds it, 95% per second); a real-time class for the
 * whole run was rejected: it would take CPU from the job whenever gpusample
 * is busy (symbolizing at the end, a burst of records).  The launched
 * command also gets its own nice back (session/launch.c). */
#define GS_SESSION_NICE -10

static bool g_rt;

void gs_session_raise_priority(void)
{
	struct sched_param sp = { .sched_priority = 1 };

	errno = 0;
	int now = getpriority(PRIO_PROCESS, 0);

	if (!errno && now > GS_SESSION_NICE)
		setpriority(PRIO_PROCESS, 0, GS_SESSION_NICE);
	g_rt = sched_setscheduler(0, SCHED_RR | SCHED_RESET_ON_FORK, &sp) == 0;
}

void gs_session_attach_done(struct gs_cfi *cfi)
{
	struct sched_param sp = { .sched_priority = 0 };

	if (!g_rt)
		return;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (cfi)
		gs_cfi_builder_sched(cfi, false, GS_SESSION_NICE);
	g_rt = false;
}

void gs_session_attach_builder(struct gs_cfi *cfi)
{
	if (cfi)
		gs_cfi_builder_sched(cfi, g_rt, GS_SESSION_NICE);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL); /* a signal cuts it short: fine */
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

int gs_attach_build_tables(struct session *s, bool (*stop)(struct session *))
{
	uint64_t t0 = gs_now_ns(CLOCK_MONOTONIC),
		 next = t0 + PROGRESS_EVERY_NS / 10; /* quiet when quick */
	struct gs_cfi_progress pr;

	if (!s->rt.cfi)
		return 0;
	s->attach.phase = "building unwind tables";
	for (;;) {
		uint64_t now;

		gs_cfi_refresh(s->rt.cfi);
		gs_cfi_progress(s->rt.cfi, &pr);
		s->attach.tables_queued = pr.queued;
		s->attach.tables_built = pr.queued - pr.pending;
		if (stop(s))
			return 1;
		if (!pr.pending)
			break;
		now = gs_now_ns(CLOCK_MONOTONIC);
		if (now - t0 > ATTACH_WAIT_MAX_NS) {
			gs_log("unwind tables: %u of %u objects after %.0f s; "
			       "sampling starts, the rest are built meanwhile\n",
			       s->attach.tables_built, pr.queued, (now - t0) / 1e9);
			break;
		}
		if (now >= next) {
			char lib[4 * sizeof(pr.current)];

			/* the target names its libraries: no escape reaches root's tty */
			gs_term_escape(pr.current[0] ? base_name(pr.current) : "", lib,
				       sizeof(lib));
			gs_log("building unwind tables: %u of %u objects done%s%s",
			       s->attach.tables_built, pr.queued,
			       !pr.current[0] ? ""
			       : pr.loading   ? ", now loading "
					      : ", now ",
			       lib);
			if (pr.current[0] && !pr.loading)
				gs_log_more(" (%llu rows)", (unsigned long long)pr.rows);
			gs_log_more("\n");
			next = now + PROGRESS_EVERY_NS;
		}
		sleep_ms(20);
	}
	if (next > t0 + PROGRESS_EVERY_NS / 10) /* a progress line was printed */
		gs_log("unwind tables built: %u objects in %.1f s\n", pr.queued,
		       (gs_now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	return 0;
}

/* The abbreviation of the signals a user stops a run with (sigabbrev_np is
 * glibc 2.32: the binaries ask for no glibc newer than 2.31). */
static const char *sig_abbrev(int sig)
{
	switch (sig) {
	case SIGINT:
		return "INT";
	case SIGTERM:
		return "TERM";
	case SIGHUP:
		return "HUP";
	case SIGQUIT:
		return "QUIT";
	case SIGPIPE:
		return "PIPE";
	case SIGUSR1:
		return "USR1";
	case SIGUSR2:
		return "USR2";
	default:
		return "?";
	}
}

void gs_attach_note_stop(struct gs_session_attach *a, int sig, bool target_gone)
{
	if (a->stop_phase)
		return;
	a->stop_phase = a->phase ? a->phase : "starting";
	if (sig)
		snprintf(a->stop_cause, sizeof(a->stop_cause), "stopped by SIG%s", sig_abbrev(sig));
	else if (target_gone)
		snprintf(a->stop_cause, sizeof(a->stop_cause), "the target exited");
	if (a->stop_cause[0] && strcmp(a->stop_phase, "sampling"))
		gs_log("%s while %s\n", a->stop_cause, a->stop_phase);
}

void gs_attach_add_comments(struct session *s)
{
	struct gs_profile *p = &s->prof;

	if (!s->attach.stop_phase || !s->attach.stop_cause[0] ||
	    !strcmp(s->attach.stop_phase, "sampling"))
		return;
	gs_profile_add_comment(p,
			       "short run: %s while %s (unwind tables: %u of %u objects built); "
			       "%zu CPU samples",
			       s->attach.stop_cause, s->attach.stop_phase, s->attach.tables_built,
			       s->attach.tables_queued, s->stacks.n_samples);
	gs_profile_add_note(p,
			    "the run was %s while %s, before sampling had started: the profile "
			    "holds no samples",
			    s->attach.stop_cause, s->attach.stop_phase);
}

static bool collected_nothing(const struct session *s)
{
	for (size_t i = 0; i < s->prof.n_samples; i++)
		for (int v = 0; v < GS_NVALUES; v++)
			if (s->prof.samples[i].values[v])
				return false;
	return true;
}

int gs_session_exit_status(struct session *s, int rc)
{
	if (rc)
		return 1; /* the message is out already: no profile written */
	if (s->targets.launched && s->targets.exited) {
		int st = s->targets.status;

		if (WIFEXITED(st) && WEXITSTATUS(st))
			return WEXITSTATUS(st);
		/* the SIGTERM that ended it at -d was ours: the run ended as asked */
		if (WIFSIGNALED(st) && !(s->targets.stopped && WTERMSIG(st) == SIGTERM))
			return 128 + WTERMSIG(st);
	}
	if (collected_nothing(s)) {
		char why[200] = "";

		if (s->attach.stop_cause[0])
			snprintf(why, sizeof(why), " (%s while %s)", s->attach.stop_cause,
				 s->attach.stop_phase);
		gs_log("no samples were collected%s; exit status 1\n", why);
		if (!s->attach.stop_cause[0])
			gs_log("the target ran too briefly or was idle (off-CPU) the "
			       "whole time: profile for longer (-d) or a busier phase\n");
		return 1;
	}
	return 0;
}
