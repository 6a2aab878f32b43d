/* SPDX-License-Identifier: MIT */
/*
 * The profiling session: the one place that wires bpf/ (records in),
 * symbolizer/ (addresses -> frames) and output/ (writers) together.
 *
 * During the run only cheap work happens per record (stack dedupe, maps
 * snapshots of new processes, eager reads of new Python code objects); all
 * native symbolization is deferred to the end, once per distinct stack and
 * address, so the profiler competes as little as possible with the job.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bpf/sampler.h"
#include "session/launch.h"
#include "session/procs.h"
#include "session/rawstacks.h"
#include "session/session.h"
#include "session/session_int.h"
#include "gpusample/profile.h"
#include "output/output.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h"
#include "util/escape.h"
#include "util/log.h"

static volatile sig_atomic_t g_stop;
/* Stop signals so far: the symbolizer's long debug-file reads end on one
 * that comes after it was told to watch (gs_sym_watch_stop). */
static volatile sig_atomic_t g_signals;

static void on_signal(int sig)
{
	g_stop = sig;
	g_signals = g_signals + 1;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	/* No SA_RESTART: the ring-buffer poll must return on Ctrl-C. */
	gs_launch_save_signals();
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a debug-file read while sampling (a huge debuglink CRC) ends on one */
	gs_sym_watch_stop(&g_signals);
}

/* ---- preflight ---------------------------------------------------------- */

static bool has_cap(const struct __user_cap_data_struct *d, int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

static int check_privileges(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (geteuid() == 0)
		return 0;
	if (!syscall(SYS_capget, &h, d) && has_cap(d, 39 /* CAP_BPF */) &&
	    has_cap(d, 38 /* CAP_PERFMON */) && has_cap(d, CAP_SYS_PTRACE))
		return 0;
	gs_log("needs root to load eBPF programs and read other processes' "
	       "memory: run it with sudo (or grant CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE)\n");
	return -EPERM;
}

/* The kernel's initial pid namespace has this fixed inode number
 * (PROC_PID_INIT_INO, include/linux/proc_ns.h). */
#define GS_INIT_PIDNS_INO 0xEFFFFFFCu

/* The BPF programs see the pids of the initial (host's) pid namespace; in a
 * container with a pid namespace of its own, -p and the launched command's
 * pid would name other processes.  A kernel without the file is let be. */
static int check_pid_namespace(void)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) || st.st_ino == GS_INIT_PIDNS_INO)
		return 0;
	gs_log("runs in a pid namespace of its own (a container without the host's pids), "
	       "while the kernel's samples carry the host's pids: run it in the host's pid "
	       "namespace (docker run --pid=host, Kubernetes hostPID: true; README "
	       "\"Containers\")\n");
	return -EPERM;
}

/* ---- targets ------------------------------------------------------------ */

static int add_target(struct session *s, uint32_t pid, uint32_t ppid, bool is_root)
{
	struct gs_procinfo *p = gs_procs_add(&s->rt.procs, pid, ppid);
	struct gs_proc_stat st;
	int rc;

	if (!p)
		return -ENOMEM;
	p->is_root = is_root;
	gs_procs_set_main(p, is_root);
	if (!gs_proc_stat(pid, &st))
		memcpy(p->comm, st.comm, sizeof(p->comm));
	rc = gs_session_update_target(s, p); /* the table reads the ranks when it sees it */
	if (!rc && !gs_proc_table_seen(s->rt.pt, pid, ppid))
		rc = -ENOMEM;
	return rc;
}

static void add_descendant(void *ctx, uint32_t pid, uint32_t ppid)
{
	struct session *s = ctx;

	/* Parents come first only by luck of pid order; make sure the chain
	 * exists so roles and roots propagate. */
	if (!gs_procs_get(&s->rt.procs, ppid)) {
		struct gs_proc_stat st;

		if (!gs_proc_stat(ppid, &st))
			add_descendant(ctx, ppid, st.ppid);
	}
	add_target(s, pid, ppid, false);
}

static int setup_targets(struct session *s)
{
	for (int i = 0; i < s->targets.n_roots; i++) {
		int rc = add_target(s, s->targets.roots[i], 0, true);

		if (rc) {
			gs_log("cannot add target %u: %s\n", s->targets.roots[i], strerror(-rc));
			return rc;
		}
	}
	if (s->o->children)
		gs_for_each_descendant(s->targets.roots, s->targets.n_roots, add_descendant, s);
	return 0;
}

/* ---- records ------------------------------------------------------------ */

static bool is_dataloader_comm(const char *comm)
{
	/* PyTorch names worker threads pt_data_worker (<= 2.x) and
	 * pt_multiprocess(ing_data_worker) in newer releases. */
	return !strncmp(comm, "pt_data_worker", 14) || !strncmp(comm, "pt_multiprocess", 15);
}

static int push_sample(struct gs_session_stacks *k, const struct raw_sample *r)
{
	if (k->n_samples == k->cap_samples) {
		size_t cap = k->cap_samples ? k->cap_samples * 2 : 65536;
		void *n = realloc(k->samples, cap * sizeof(*k->samples));

		if (!n)
			return -ENOMEM;
		k->samples = n;
		k->cap_samples = cap;
	}
	k->samples[k->n_samples++] = *r;
	return 0;
}

/* A timer sample the codec accepted. */
static int on_cpu_sample(struct session *s, const struct gs_rec_cpu_view *v)
{
	const struct gs_cpu_sample *cs = v->s;
	struct raw_sample r;
	struct gs_procinfo *p;
	struct gs_thread *th;
	char comm[GS_COMM_LEN + 1];
	int64_t idx;

	memcpy(comm, cs->comm, GS_COMM_LEN);
	comm[GS_COMM_LEN] = '\0';
	if (gs_targets_pre_exec(&s->targets, cs->tgid, comm))
		return 0;
	idx = gs_session_intern(s, v);
	if (idx < 0)
		return (int)idx;
	p = gs_procs_get(&s->rt.procs, cs->tgid);
	if (!p)
		p = gs_session_first_sight(s, cs->tgid);
	if (p) {
		p->cpu_samples++;
		if (is_dataloader_comm(comm))
			gs_procs_set_dataloader(p);
	}
	r.stack = (uint32_t)idx;
	r.tid = cs->tid;
	r.ktime = cs->hdr.ktime_ns;
	r.comm = gs_profile_intern(&s->prof, comm);
	/* the thread's count before its first sample is built: they share
	 * its exact on-CPU time (gs_off_cpu_ns) */
	th = gs_thread_get(s->rt.pt, cs->tgid, cs->tid);
	if (!th && cs->tid)
		return -ENOMEM;
	if (th) {
		th->cpu_samples++;
		th->comm = r.comm; /* the latest name: off-CPU samples are built at the end */
	}
	return push_sample(&s->stacks, &r);
}

static void on_proc_event(struct session *s, const struct gs_proc_event *ev)
{
	struct gs_procinfo *p;

	switch (ev->kind) {
	case GS_PROC_FORK:
		p = gs_procs_add(&s->rt.procs, ev->tgid, ev->ppid);
		if (p) {
			memcpy(p->comm, ev->comm, sizeof(p->comm));
			p->exit_ns = 0; /* a pid handed out again: alive */
		}
		gs_proc_table_fork(s->rt.pt, ev->ppid, ev->tgid);
		break;
	case GS_PROC_EXEC:
		p = gs_procs_get(&s->rt.procs, ev->tgid);
		if (!p)
			p = gs_session_first_sight(s, ev->tgid);
		if (p)
			memcpy(p->comm, ev->comm, sizeof(p->comm));
		/* known: first sight above; the table reads the new image's ranks */
		gs_proc_table_exec(s->rt.pt, ev->tgid, 0);
		break;
	case GS_PROC_EXIT:
		gs_proc_table_exit(s->rt.pt, ev->tgid); /* marks the entry exited */
		gs_memory_exit(s, ev->tgid);
		p = gs_procs_get(&s->rt.procs, ev->tgid);
		if (p && p->proc->exited)
			gs_session_exited(s, p, gs_now_ns(CLOCK_MONOTONIC));
		break;
	}
}

/* A GPU record, decoded once here and routed by gpu.c.  A kernel launch's
 * CPU stack is interned and symbolized now (cached per address), since
 * the join aggregates as batches arrive and needs the launch stack's
 * profile index; gpu.c trims it first and hands it to the join after. */
static void on_gpu_record(struct session *s, const struct gs_rec_hdr *h)
{
	struct gs_gpu_rec r;
	int64_t raw, stack;

	if (!gs_gpu_on(s))
		return;
	if (gs_gpu_rec_decode(h, &r)) {
		s->out.counts[GS_C_records_malformed]++;
		return;
	}
	if (gs_gpu_record(s, &r) <= 0 || (raw = gs_session_intern(s, &r.launch.stack)) < 0)
		return;
	gs_thread_get(s->rt.pt, r.launch.stack.s->tgid,
		      r.launch.stack.s->tid); /* first sight of the thread maybe */
	stack = gs_session_stack(s, &s->stacks.raw.items[raw]);
	if (stack >= 0)
		gs_gpu_launch_stack(s, r.launch.l, &r.launch.stack, (uint32_t)stack,
				    gs_session_role(s, r.launch.stack.s->tgid));
}

/* Every record here passed the sampler's gs_rec_hdr_check (this version,
 * hdr.size delivered); each type's layout is decoded by the codec before a
 * field is read. */
static int on_record(void *ctx, const struct gs_rec_hdr *h)
{
	struct session *s = ctx;
	struct gs_rec_cpu_view v;
	const void *rec;

	switch (h->type) {
	case GS_REC_CPU_SAMPLE:
		if (!gs_rec_cpu_sample(h, &v))
			return on_cpu_sample(s, &v);
		s->out.counts[GS_C_records_malformed]++;
		return 0;
	case GS_REC_PROC_EVENT:
		if (!gs_rec_fixed(h, GS_REC_PROC_EVENT, &rec))
			on_proc_event(s, rec);
		else
			s->out.counts[GS_C_records_malformed]++;
		return 0;
	case GS_REC_OFFCPU_STACK:
	case GS_REC_OFFCPU_END:
	case GS_REC_OFFCPU_WAKER:
		gs_off_record(s, h);
		return 0;
	case GS_REC_STEP_MARK:
		gs_steps_record(s, h);
		return 0;
	case GS_REC_MEM_CALL:
	case GS_REC_MEM_RET:
	case GS_REC_MEM_FREE:
		gs_memory_record(s, h);
		return 0;
	default:
		if (h->type >= GS_REC_GPU_PC_BATCH && h->type <= GS_REC_GPU_STATUS)
			on_gpu_record(s, h);
		return 0;
	}
}

static int poll_records(void *ctx, int timeout_ms)
{
	struct session *s = ctx;

	return gs_sampler_poll(s->rt.sampler, timeout_ms, on_record, s);
}

/* ---- the run loop ------------------------------------------------------- */

static bool targets_gone(struct gs_session_targets *t)
{
	int status;

	if (t->launched) {
		if (!t->exited && waitpid(t->launch.pid, &status, WNOHANG) == t->launch.pid) {
			t->exited = true;
			t->status = status;
		}
		return t->exited;
	}
	for (int i = 0; i < t->n_roots; i++)
		if (gs_proc_alive(t->roots[i]))
			return false;
	return true;
}

/* A signal or the targets' exit ends the current phase (noted once). */
static bool stop_requested(struct session *s)
{
	bool gone = !g_stop && targets_gone(&s->targets);

	if (gone && !s->targets.launched && !s->attach.stop_phase &&
	    !strcmp(s->attach.phase ? s->attach.phase : "", "sampling"))
		gs_log("the profiled process%s exited; writing the profile\n",
		       s->targets.n_roots > 1 ? "es" : "");
	if (g_stop || gone)
		gs_attach_note_stop(&s->attach, g_stop, gone);
	return g_stop || gone;
}

static void progress(struct session *s, bool final)
{
	struct gs_sampler_stats st;
	struct gs_session_progress p = { .gpu = s->gpu.plugin.summary, .final = final };

	if (!s->out.show_progress)
		return;
	gs_sampler_stats(s->rt.sampler, &st);
	for (size_t i = 0; i < s->rt.procs.n; i++)
		p.live_procs += !((struct gs_procinfo *)s->rt.procs.all[i])->proc->exited;
	p.elapsed_s = (gs_now_ns(CLOCK_MONOTONIC) - s->window.t0_mono) / 1e9;
	p.cpu_samples = s->stacks.n_samples;
	p.lost = st.lost;
	p.procs = (uint32_t)s->rt.procs.n;
	s->out.show_progress(&p);
}

/* The window's end and the machine's CPU time then; once. */
static void end_window(struct session *s)
{
	if (s->window.t1_mono)
		return;
	s->window.t1_mono = gs_now_ns(CLOCK_MONOTONIC);
	gs_cpu_snap_take(&s->window.cpu1, "/proc");
}

/* What BPF queued before a detach. */
static void drain(struct session *s)
{
	for (int i = 0; i < 64 && gs_sampler_poll(s->rt.sampler, 0, on_record, s) > 0; i++)
		;
}

/* Link closes the record loop made itself (bpf/reaper.h): each waited for
 * an RCU grace period, samples may have been lost meanwhile. */
static void note_reaper(struct session *s)
{
	struct gs_link_reaper_stats st;
	uint64_t inl;

	gs_link_reaper_stats(s->rt.reaper, &st);
	inl = st.inline_full + st.inline_nothread;
	gs_profile_add_comment(
	    &s->prof,
	    "uprobe link closes: %llu handed to the reaper's threads (%llu pending "
	    "at most), %llu inline (%llu with its queue full, %llu without threads)",
	    (unsigned long long)st.queued, (unsigned long long)st.max_pending,
	    (unsigned long long)inl, (unsigned long long)st.inline_full,
	    (unsigned long long)st.inline_nothread);
	if (inl)
		gs_profile_add_note(
		    &s->prof,
		    "%llu uprobe link closes were made by the record loop itself (the "
		    "link reaper's queue was full or its threads did not start): each "
		    "waited for an RCU grace period, samples may have been lost then",
		    (unsigned long long)inl);
}

static int run_loop(struct session *s)
{
	uint64_t deadline = s->o->duration_s > 0
				? s->window.t0_mono + (uint64_t)(s->o->duration_s * 1e9)
				: UINT64_MAX;
	uint64_t next_progress = 0, next_tick = 0, next_cfi = 0;
	bool tick_pending = false;

	s->attach.phase = "sampling";
	while (!stop_requested(s)) {
		/* Records arrive without per-record wakeups (BPF_RB_NO_WAKEUP for
		 * samples); process events and CFI table requests do wake us.
		 * Ticks (maps re-reads, discovery, GPU scans) run at most every
		 * 50 ms so a burst of wakeups is handled in one batch. */
		uint64_t before = gs_now_ns(CLOCK_MONOTONIC);
		int wait_ms = tick_pending && next_tick > before
				  ? (int)((next_tick - before) / 1000000) + 1
				  : 200;
		/* Unwind tables being built: load each within a few ms of its
		 * build, and serve table requests (BPF wakes us) as they come,
		 * not at the 50 ms tick: a library sampled before its table is
		 * loaded gets a shorter stack. */
		bool cfi_busy = s->rt.cfi && gs_cfi_busy(s->rt.cfi);

		if (cfi_busy && wait_ms > GS_CFI_POLL_MS)
			wait_ms = GS_CFI_POLL_MS;
		if (deadline > before && (deadline - before) / 1000000 < (uint64_t)wait_ms)
			wait_ms = (int)((deadline - before) / 1000000) + 1; /* -d is the window */
		int rc = gs_sampler_poll(s->rt.sampler, wait_ms, on_record, s);
		uint64_t now = gs_now_ns(CLOCK_MONOTONIC);

		if (rc < 0 && rc != -EINTR) {
			gs_log_more("\n");
			gs_log("ring buffer poll failed: %s\n", strerror(-rc));
			return rc;
		}
		if (now >= deadline || stop_requested(s))
			break;
		if (s->rt.cfi && now >= next_cfi) {
			gs_cfi_refresh(s->rt.cfi);
			next_cfi = now + GS_CFI_POLL_MS * 1000000ull;
		}
		tick_pending = now < next_tick; /* woken early: tick once the 50 ms are up */
		if (!tick_pending) {
			gs_proc_table_tick(s->rt.pt);
			/* ENOMEM: the stacks left are symbolized at the end */
			(void)gs_session_retire_exited(s, now);
			next_tick = now + 50000000ull;
		}
		if (now >= next_progress) {
			progress(s, false);
			next_progress = now + 500000000ull;
		}
	}
	/* The window ends here, when CPU samples and switches stop: the GPU
	 * agents' drain (up to 2 s) and each uprobe link's close (a tasks-trace
	 * RCU grace period) come after, or a thread's last sampled wait would
	 * take all its time until they end, unseen switches included. */
	gs_sampler_stop(s->rt.sampler);
	end_window(s);
	drain(s);
	gs_off_stop(s);
	gs_gpu_detach(s, poll_records);
	gs_steps_detach(s);
	gs_memory_detach(s); /* the reaper closes the links while the profile is built */
	drain(s);            /* the agents' last batches, the steps' last marks */
	note_reaper(s);
	progress(s, true);
	/* The Ctrl-C that ended sampling must not cut the symbolization that
	 * follows; another one does. */
	gs_sym_watch_stop(&g_signals);
	return 0;
}

/* ---- building the profile ------------------------------------------------ */


/* What a CPU sample of thread (tgid, tid) named comm says besides its
 * stack: known in full when it is added (the process's role and ranks are
 * assigned before the first one). */
static struct gs_sample_ctx cpu_ctx(struct session *s, uint32_t tgid, uint32_t tid, gs_str comm,
				    gs_str running)
{
	struct gs_sample_ctx c = {
		.pid = tgid,
		.tid = tid,
		.thread_name = comm,
		.process_role = gs_profile_intern(&s->prof, gs_session_role(s, tgid)),
		.cuda_device = -1,
	};

	c.str_labels[GS_SL_THREAD_STATE] = running;
	gs_session_proc_labels(s, tgid, &c);
	return c;
}

/* The CPU samples, each whole: its thread's share of on-CPU time, state,
 * process role, ranks and host (the thread role comes last: see
 * symbolizer.h).  Runs of one thread share their context. */
static int add_cpu_samples(struct session *s, const uint32_t *stack_ids)
{
	struct gs_profile *p = &s->prof;
	gs_str running = gs_profile_intern(p, "running");
	struct gs_thread *th = NULL;
	struct gs_sample_ctx c = { 0 };

	if (running == (gs_str)-1)
		return -ENOMEM;
	for (size_t i = 0; i < s->stacks.n_samples; i++) {
		const struct raw_sample *r = &s->stacks.samples[i];
		uint32_t tgid = s->stacks.raw.items[r->stack].tgid;
		struct gs_sample smp = {
			.stack = stack_ids[r->stack],
			.values = { [GS_V_SAMPLES] = 1 },
			.time_ns = r->ktime > s->window.t0_mono ? r->ktime - s->window.t0_mono : 0,
		};

		if (!th || th->tgid != tgid || th->tid != r->tid) {
			if (!(th = gs_thread_get(s->rt.pt, tgid, r->tid)) && r->tid)
				return -ENOMEM;
			c.pid = 0; /* a new thread: a new context */
		}
		if (c.tid != r->tid || c.pid != tgid || c.thread_name != r->comm)
			c = cpu_ctx(s, tgid, r->tid, r->comm, running);
		if (th && !th->comm)
			th->comm = r->comm;
		smp.values[GS_V_CPU_NS] = gs_off_cpu_ns(th, p->period_ns);
		if (gs_session_add_thread_sample(s, th, &smp, &c))
			return -ENOMEM;
	}
	return 0;
}

static void add_processes(struct session *s)
{
	for (size_t i = 0; i < s->rt.procs.n; i++) {
		const struct gs_procinfo *p = s->rt.procs.all[i];
		struct gs_py_proc py;

		gs_py_proc_view(s->rt.py, p->proc->tgid, &py);
		struct gs_process gp = {
			.pid = p->proc->tgid,
			.ppid = p->proc->ppid,
			.ns_pid = p->ns_pid,
			.comm = gs_profile_intern(&s->prof, p->comm),
			.role = gs_profile_intern(&s->prof, gs_procs_role(p)),
			.python = gs_profile_intern(&s->prof, py.name),
			.gpu = gs_profile_intern(&s->prof, p->gpu),
			.cpu_samples = p->cpu_samples,
			.exited = p->proc->exited,
		};
		gs_profile_add_process(&s->prof, &gp);
	}
}

static void add_comments(struct session *s)
{
	struct gs_sampler_stats st;
	struct gs_profile *p = &s->prof;

	gs_sampler_stats(s->rt.sampler, &st);
	p->lost_samples = st.lost;
	gs_profile_add_comment(p, "gpusample %s", GS_VERSION);
	gs_cpu_snap_comment(p, &s->window.cpu0, &s->window.cpu1, (uint32_t)getpid(),
			    sysconf(_SC_CLK_TCK));
	if (s->o->command) {
		char cmd[512] = "";
		size_t len = 0;

		for (char **a = s->o->command; *a && len < sizeof(cmd) - 2; a++)
			len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, "%s%s",
						a == s->o->command ? "" : " ", *a);
		gs_profile_add_comment(p, "command: %s", cmd);
	}
	gs_profile_add_comment(p, "cpu sampling: %u Hz per CPU (cpu-clock), %ld ns per sample",
			       p->frequency_hz, (long)p->period_ns);
	gs_profile_add_comment(p, "duration: %.3f s", p->duration_nanos / 1e9);
	/* the window on the clock a job's own timers use (Python's
	 * time.monotonic and perf_counter), to line it up with their logs */
	if (s->window.t0_mono)
		gs_profile_add_comment(p, "window: CLOCK_MONOTONIC %.6f s + %.6f s",
				       s->window.t0_mono / 1e9, p->duration_nanos / 1e9);
	gs_profile_add_comment(p, "cpu samples: %zu, lost: %llu", s->stacks.n_samples,
			       (unsigned long long)st.lost);
	if (st.unwind_err[GS_UNWIND_NO_TABLE] || st.unwind_err[GS_UNWIND_READ_FAULT] ||
	    st.unwind_err[GS_UNWIND_BAD_RULE] || st.unwind_err[GS_UNWIND_DEPTH])
		gs_profile_add_comment(p,
				       "native unwind stops: no table %llu, read fault %llu, "
				       "bad rule %llu, depth %llu",
				       (unsigned long long)st.unwind_err[GS_UNWIND_NO_TABLE],
				       (unsigned long long)st.unwind_err[GS_UNWIND_READ_FAULT],
				       (unsigned long long)st.unwind_err[GS_UNWIND_BAD_RULE],
				       (unsigned long long)st.unwind_err[GS_UNWIND_DEPTH]);
	gs_off_comments(s, &st);
	gs_rt_comments(s);
	if (st.lost)
		gs_profile_add_note(p, "%llu samples were lost (ring buffer full); try a lower -F",
				    (unsigned long long)st.lost);
	gs_attach_add_comments(s);
	gs_session_counters(s, &st);
}

/* -p named a DataLoader worker (pgrep -f train.py finds them too): the
 * verdict and the "main thread" are the worker's, so say whose job it is. */
static void note_worker_roots(struct session *s)
{
	for (size_t i = 0; i < s->rt.procs.n; i++) {
		const struct gs_procinfo *p = s->rt.procs.all[i];
		struct gs_proc_stat st; /* a root's parent is outside the table */

		if (!p->is_root || p->proc->role != GS_ROLE_DATALOADER)
			continue;
		if (!gs_proc_stat(p->proc->tgid, &st) && st.ppid > 1)
			gs_profile_add_note(
			    &s->prof,
			    "pid %u is a DataLoader worker of pid %u: this profile "
			    "shows the worker's own time; profile pid %u (its workers "
			    "are followed) for the whole job",
			    p->proc->tgid, st.ppid, st.ppid);
		else
			gs_profile_add_note(&s->prof,
					    "pid %u is a DataLoader worker: this profile shows the "
					    "worker's own time; profile the training process (its "
					    "workers are followed) for the whole job",
					    p->proc->tgid);
	}
}

static int build_profile(struct session *s)
{
	struct gs_profile *p = &s->prof;
	uint32_t *stack_ids = calloc(s->stacks.raw.n ? s->stacks.raw.n : 1, sizeof(*stack_ids));

	if (!stack_ids)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->stacks.raw.n; i++) {
		int64_t id = gs_session_stack(s, &s->stacks.raw.items[i]);

		if (id < 0) {
			free(stack_ids);
			return (int)id;
		}
		stack_ids[i] = (uint32_t)id;
		gs_session_note_dataloader(s, &s->stacks.raw.items[i], (uint32_t)id);
	}
	gs_procs_assign_roles(&s->rt.procs);
	note_worker_roots(s);
	if (add_cpu_samples(s, stack_ids) || gs_off_finish(s, stack_ids)) {
		free(stack_ids);
		return -ENOMEM;
	}
	free(stack_ids);
	if (gs_gpu_finish(s) || gs_memory_finish(s) || gs_thread_roles_apply(p, s->rt.pt) ||
	    gs_steps_finish(s))
		return -ENOMEM;
	add_processes(s);
	add_comments(s);
	return 0;
}

/* ---- writing ------------------------------------------------------------ */

static int write_one(struct session *s, const char *suffix,
		     int (*fn)(struct session *, const char *, char *, size_t))
{
	char path[PATH_MAX + 32];
	int rc;

	snprintf(path, sizeof(path), "%s%s", s->out.prefix, suffix);
	rc = fn(s, path, s->err, sizeof(s->err));
	if (rc) {
		gs_log("cannot write %s: %s\n", path, s->err);
		return rc;
	}
	gs_log("wrote %s\n", path);
	return 0;
}

static int w_pprof(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_pprof(&s->prof, path, err, len);
}

static int w_speedscope(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_speedscope(&s->prof, path, err, len);
}

static int w_cpu_folded(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_folded(&s->prof, GS_FOLDED_CPU, path, err, len);
}

static int w_gpu_folded(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_folded(&s->prof, GS_FOLDED_GPU, path, err, len);
}

static int w_wake_folded(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_folded(&s->prof, GS_FOLDED_WAKE, path, err, len);
}

static int w_trace(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_trace(&s->prof, path, err, len);
}

static int w_html(struct session *s, const char *path, char *err, size_t len)
{
	return gs_write_html(&s->prof, path, err, len);
}

static bool has_gpu_samples(const struct gs_profile *p)
{
	for (size_t i = p->n_samples; i-- > 0;)
		if (gs_profile_ctx(p, &p->samples[i])->cuda_device >= 0)
			return true;
	return false;
}

static int write_outputs(struct session *s)
{
	int rc = 0;

	/* One summary line for logs (the progress line is terminal-only). */
	gs_log("%zu CPU samples, %llu lost, %u process%s, %.1f s\n", s->stacks.n_samples,
	       (unsigned long long)s->prof.lost_samples, (uint32_t)s->rt.procs.n,
	       s->rt.procs.n == 1 ? "" : "es", s->prof.duration_nanos / 1e9);

	if (s->o->formats & GS_FMT_PPROF)
		rc |= write_one(s, ".pb.gz", w_pprof);
	if (s->o->formats & GS_FMT_SPEEDSCOPE)
		rc |= write_one(s, ".speedscope.json", w_speedscope);
	if (s->o->formats & GS_FMT_FOLDED)
		rc |= write_one(s, ".cpu.folded", w_cpu_folded);
	if ((s->o->formats & GS_FMT_FOLDED) && has_gpu_samples(&s->prof))
		rc |= write_one(s, ".gpu.folded", w_gpu_folded);
	if ((s->o->formats & GS_FMT_FOLDED) && s->off)
		rc |= write_one(s, ".wake.folded", w_wake_folded);
	if (s->o->formats & GS_FMT_TRACE)
		rc |= write_one(s, ".trace.json", w_trace);
	if (s->o->formats & GS_FMT_HTML)
		rc |= write_one(s, ".html", w_html);
	if (s->o->report) {
		struct gs_report_opts ro = { .top = 15, .color = isatty(1) };
		int err = gs_write_report(&s->prof, &ro, stdout);

		if (err) {
			gs_log("report: %s; the profile files are written: run `gpusample report "
			       "FILE.pb.gz` to print it\n",
			       strerror(-err));
			rc = 1;
		}
	}
	return rc ? 1 : 0;
}

/* ---- setup / teardown ------------------------------------------------------ */

static int open_sampler(struct session *s)
{
	struct gs_sampler_opts so = {
		.frequency_hz = s->o->frequency_hz,
		.kernel_stacks = s->o->kernel,
		.follow_children = s->o->children,
		.offcpu = s->o->offcpu,
		.offcpu_rate = s->o->offcpu_rate,
	};
	int rc = gs_sampler_open(&so, &s->rt.sampler, s->err, sizeof(s->err));

	if (rc) {
		gs_log("%s\n", s->err);
		return rc;
	}
	if (gs_sampler_compat(s->rt.sampler))
		gs_profile_add_note(&s->prof,
				    "BPF: the compat programs walked the stacks (for kernels "
				    "without bpf_loop, bpf_task_pt_regs, task storage or "
				    "bpf_get_current_task_btf, all in Linux 5.17+; or "
				    "GS_BPF_COMPAT=1): the same stacks, up to %d processes with "
				    "CFI unwinding, the others by frame pointers",
				    GS_CFI_COMPAT_PROCS);
	/* Before the components that attach per-process links, which it outlives. */
	s->rt.reaper = gs_link_reaper_new(0, 0, NULL);
	if (!s->rt.reaper)
		return -ENOMEM;
	rc = gs_rt_open(s);
	if (!rc)
		rc = gs_gpu_open(s);
	return rc ? rc : gs_rt_register(s);
}

static int start_launch(struct session *s)
{
	int rc;

	gs_gpu_launch_env(s);
	rc = gs_launch_start(&s->targets.launch, s->o->command, s->o->as_root, s->gpu.launch_env,
			     s->err, sizeof(s->err));

	if (rc) {
		gs_log("%s\n", s->err);
		return rc;
	}
	s->targets.launched = true;
	if (prctl(PR_GET_NAME, s->targets.self_comm))
		s->targets.self_comm[0] = '\0';
	return 0;
}

static void init_session(struct session *s, const struct gs_options *o)
{
	memset(s, 0, sizeof(*s));
	s->o = o;
	gs_profile_init(&s->prof);
	gs_rawstacks_init(&s->stacks.raw);
	s->prof.frequency_hz = o->frequency_hz;
	s->prof.period_ns = 1000000000ll / o->frequency_hz;
	/* Viewers open on the report's unit: wall time (on-CPU + waits) when
	 * off-CPU time is recorded; a GPU run switches to GPU samples. */
	s->prof.default_sample_type = o->offcpu ? GS_V_WALL_NS : GS_V_CPU_NS;
	s->prof.process_frames = true; /* README: telling processes apart */
}

static void free_session(struct session *s)
{
	gs_off_free(s);
	gs_thread_voter_free(&s->stacks.roles);
	gs_proc_table_free(s->rt.pt); /* before the runtimes its handlers call */
	gs_gpu_close(s);
	gs_steps_free(s);
	gs_memory_close(s);
	gs_rt_close(s);
	gs_link_reaper_free(s->rt.reaper); /* waits for the links' closes, before the BPF object */
	s->rt.reaper = NULL;
	if (s->rt.sampler)
		gs_sampler_close(s->rt.sampler);
	if (s->rt.sym)
		gs_sym_free(s->rt.sym);
	gs_rawstacks_free(&s->stacks.raw);
	free(s->stacks.samples);
	for (size_t i = 0; i < s->rt.procs.n; i++)
		free(((struct gs_procinfo *)s->rt.procs.all[i])->raw);
	free(s->stacks.retiring);
	gs_proc_slots_fini(&s->rt.procs); /* bound: the states only */
	gs_profile_free(&s->prof);
	gs_cpu_snap_free(&s->window.cpu0);
	gs_cpu_snap_free(&s->window.cpu1);
}

static int prepare(struct session *s)
{
	char err[256];
	int rc;

	for (int i = 0; i < s->o->n_pids; i++)
		if (gs_check_target(s->o->pids[i], err, sizeof(err))) {
			gs_log("%s\n", err);
			return -ESRCH;
		}
	if (s->o->command && (rc = start_launch(s)))
		return rc;
	if (s->targets.launched) {
		s->targets.roots[0] = (uint32_t)s->targets.launch.pid;
		s->targets.n_roots = 1;
	} else {
		memcpy(s->targets.roots, s->o->pids, sizeof(s->targets.roots));
		s->targets.n_roots = s->o->n_pids;
	}
	if ((rc = gs_session_prefix(s)) || (rc = gs_outputs_check(s)))
		return rc;
	s->rt.sym = gs_sym_new(&s->prof);
	if (!s->rt.sym)
		return -ENOMEM;
	return open_sampler(s);
}

static int start(struct session *s)
{
	int rc;

	/* Launch mode: the target entry first, then exec, so the job is
	 * sampled from its first instruction and its children from birth. */
	if ((rc = setup_targets(s)))
		return rc;
	/* Tables of the processes there at attach: built by the CFI thread
	 * while this thread reports progress and watches for a stop. */
	if (gs_attach_build_tables(s, stop_requested))
		return 1;
	gs_session_attach_done(s->rt.cfi);
	/* Tables of the processes there at attach were built eagerly (full
	 * stacks from the first sample); from now on build them when a sample
	 * first walks through an object, so a fork or dlopen mid-run does not
	 * stall the ring-buffer consumer for seconds. */
	if (s->rt.cfi)
		gs_cfi_set_lazy(s->rt.cfi, true);
	if ((rc = gs_off_prepare(s)))
		return rc;
	if ((rc = gs_sampler_start(s->rt.sampler, s->err, sizeof(s->err)))) {
		gs_log("%s\n", s->err);
		return rc;
	}
	/* The report says which event sampled (output/report.c reads it). */
	gs_profile_add_comment(&s->prof, "sample event: %s", gs_sampler_event(s->rt.sampler));
	gs_log("sampling %zu process%s at %u Hz%s (Ctrl-C to stop)\n", s->rt.procs.n,
	       s->rt.procs.n == 1 ? "" : "es", s->o->frequency_hz,
	       s->targets.launched ? ", starting the command" : "");
	s->window.t0_mono = gs_now_ns(CLOCK_MONOTONIC);
	s->window.t0_wall = gs_now_ns(CLOCK_REALTIME);
	gs_cpu_snap_take(&s->window.cpu0, "/proc"); /* best effort: no comment without it */
	if ((rc = gs_off_start(s)))
		return rc;
	gs_gpu_start(s);
	if (s->targets.launched &&
	    (rc = gs_launch_release(&s->targets.launch, s->err, sizeof(s->err)))) {
		char cmd[256];

		/* a bare name not on PATH was refused with the options (cli/) */
		gs_term_escape(s->o->command[0], cmd, sizeof(cmd));
		gs_log("%s: %s\n", cmd, s->err);
		return rc;
	}
	return 0;
}

/* -d ended with the command still running: SIGTERM it, as perf record and
 * timeout(1) do, and wait up to GS_STOP_WAIT_S for it to exit (a training
 * job may save a checkpoint on SIGTERM).  No SIGKILL: one that ignores the
 * signal is named and left running rather than killed mid-write.  Called
 * once the profile is written: names are read through the job's
 * /proc/PID/root (a container's debug files), gone with the job. */
#define GS_STOP_WAIT_S 10
static void stop_at_duration(struct session *s)
{
	pid_t pid = s->targets.launch.pid;
	char cmd[256];

	if (!s->targets.launched || s->targets.exited || g_stop ||
	    s->o->on_duration == GS_ON_DURATION_KEEP)
		return;
	gs_term_escape(s->o->command[0], cmd, sizeof(cmd));
	gs_log("duration reached; stopping %s (pid %d) with SIGTERM (--on-duration=keep leaves "
	       "it running)\n",
	       cmd, pid);
	s->targets.stopped = true;
	kill(pid, SIGTERM);
	for (int i = 0; i < GS_STOP_WAIT_S * 20; i++) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid) {
			s->targets.exited = true;
			s->targets.status = st;
			return;
		}
		usleep(50000);
	}
	gs_log("%s (pid %d) still runs %d s after SIGTERM; left running\n", cmd, pid,
	       GS_STOP_WAIT_S);
}

static void finish_launch(struct session *s)
{
	if (!s->targets.launched || s->targets.exited)
		return;
	if (g_stop) {
		/* Ctrl-C at a terminal reached the command too; a signal sent to
		 * gpusample alone (kill, a job scheduler) is passed on, as perf
		 * record does, so the command does not outlive its profiler. */
		for (int i = 0; i < 40; i++) {
			int st;

			if (waitpid(s->targets.launch.pid, &st, WNOHANG) == s->targets.launch.pid) {
				s->targets.exited = true;
				s->targets.status = st;
				break;
			}
			if (i == 4)
				kill(s->targets.launch.pid, g_stop);
			usleep(50000);
		}
	} else if (s->o->on_duration == GS_ON_DURATION_KEEP) {
		gs_log("duration reached; %s (pid %d) keeps running (--on-duration=keep)\n",
		       s->o->command[0], s->targets.launch.pid);
	}
}

/* Has process p of the table exited, whether or not its exit was seen
 * (after Ctrl-C the loop stops before the command's and its workers' exit
 * events are read)? */
/* Exited, reaped or a zombie (its parent gone, it waits for a slow
 * reaper): none of these writes its map any more. */
static bool proc_gone(const struct gs_proc *p)
{
	char state[32];

	if (p->exited || (kill((pid_t)p->tgid, 0) && errno == ESRCH))
		return true;
	int rc = gs_proc_status_field(p->tgid, "State:", state, sizeof(state));

	return rc == -ESRCH || (!rc && (state[0] == 'Z' || state[0] == 'X'));
}

/* After the outputs: the perf maps launch mode had oneDNN write, of the
 * command's processes that are gone (a running one still writes its own).
 * When the command itself has exited (its end, Ctrl-C, a signal passed on)
 * its processes are given up to 1 s to follow it (a DataLoader's workers
 * end when they see their parent gone). */
static void remove_jit_maps(struct gs_proc_table *pt, const struct gs_launch *l, bool cmd_exited)
{
	size_t n = pt ? gs_proc_count(pt) : 0, k = 0, alive;
	uint32_t *gone = n ? calloc(n, sizeof(*gone)) : NULL;

	for (int wait = 0; gone && cmd_exited && wait < 20; wait++) {
		alive = 0;
		for (size_t i = 0; i < n; i++)
			alive += !proc_gone(gs_proc_at(pt, i));
		if (!alive)
			break;
		usleep(50000);
	}
	for (size_t i = 0; gone && i < n; i++)
		if (proc_gone(gs_proc_at(pt, i)))
			gone[k++] = gs_proc_at(pt, i)->tgid;
	if (gone)
		gs_launch_remove_jit_maps(l, gone, k);
	free(gone);
}

int gs_session_run(const struct gs_options *o, void (*show)(const struct gs_session_progress *p))
{
	struct session s;
	int rc;

	if (check_privileges() || check_pid_namespace())
		return 1;
	install_signals();
	gs_session_raise_priority();
	gs_outputs_set_owner();
	init_session(&s, o);
	s.out.show_progress = show;
	s.attach.phase = "loading the BPF programs";
	rc = prepare(&s);
	if (!rc)
		rc = start(&s);
	if (rc < 0) {
		if (s.targets.launched)
			kill(s.targets.launch.pid, SIGKILL);
		free_session(&s);
		return 1;
	}
	gs_session_attach_done(s.rt.cfi); /* no real-time class past attach, whatever happened */
	if (rc == 0) {
		run_loop(&s);
		finish_launch(&s);
	} else if (s.targets.launched) { /* stopped before the command was let go: it never ran */
		kill(s.targets.launch.pid, SIGKILL);
		waitpid(s.targets.launch.pid, NULL, 0);
		s.targets.launched = false;
	}
	/* Stopped before sampling started (Ctrl-C or the target's exit while
	 * the tables were built): t0 was never taken, and stop - 0 would be
	 * the machine's uptime.  The profile covers nothing: duration 0, time
	 * of the stop. */
	if (s.window.t0_mono) {
		end_window(&s); /* where sampling never ran its loop */
		s.prof.time_nanos = s.window.t0_wall;
		s.prof.duration_nanos = s.window.t1_mono - s.window.t0_mono;
	} else {
		s.prof.time_nanos = gs_now_ns(CLOCK_REALTIME);
		s.prof.duration_nanos = 0;
	}
	rc = build_profile(&s);
	if (rc)
		gs_log("building the profile failed: %s\n", strerror(-rc));
	else
		rc = write_outputs(&s);
	stop_at_duration(&s);
	if (s.targets.launched)
		remove_jit_maps(s.rt.pt, &s.targets.launch, s.targets.exited);
	rc = gs_session_exit_status(&s, rc);
	free_session(&s);
	return rc;
}
