/* SPDX-License-Identifier: MIT */
/*
 * gs_dump_collect (dump.h): the threads of the targets, now, as one sample
 * each in a profile.  Threads come from the BPF task iterator
 * (bpf/taskregs.h) or, where it cannot load, from /proc; each thread's
 * stacks are walked in user space (walk.c) into the frame runs of a CPU
 * sample (gpusample/records.h) and symbolized through the same function
 * as a profile's stacks (gs_sym_cpu_stack), so a dump and a profile name
 * a frame alike.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpusample/records.h"
#include "bpf/taskregs.h"
#include "dump/dump.h"
#include "dump/dump_int.h"
#include "gpusample/procstat.h"
#include "output/output.h"
#include "python/python.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/vec.h"

/* One thread as collected, before its stacks are walked. */
struct thread {
	struct gs_task_regs r;
	char state;   /* 'R' running, 'r' runnable, 'S' blocked, 'T' stopped, 'Z' zombie */
	char *kfuncs; /* /proc fallback: kernel function names, '\n'-separated */
	/* walked right after the registers were read, before any
	 * symbolization: a thread that is not hung moves on meanwhile */
	__u64 *user; /* native frames, leaf first */
	struct gs_py_frame *py;
	uint32_t n_user, n_python;
	uint16_t flags; /* GS_CPU_* */
};

struct proc_state {
	uint32_t tgid, ppid;
	bool is_root, py_ok;
	bool main; /* process_role "main" (else "other", or "dataloader" later) */
	struct gs_py_cfg cfg;
	struct gs_rank_env ranks;
	struct gs_proc_maps *maps;
	char comm[16];
};

struct collect {
	const struct gs_dump_opts *o;
	struct gs_profile *prof;
	struct gs_dump_stats *st;
	struct gs_symbolizer *sym;
	struct gs_py *py;
	struct gs_dump_unwinder *unw;
	struct proc_state *procs;
	size_t n_procs;
	struct thread *threads;
	size_t n_threads, cap_threads;
	bool bpf;
};

static struct proc_state *proc_of(struct collect *c, uint32_t tgid)
{
	for (size_t i = 0; i < c->n_procs; i++)
		if (c->procs[i].tgid == tgid)
			return &c->procs[i];
	return NULL;
}

/* ---- threads from the task iterator ------------------------------------ */

/* TASK_* bits of task->__state (include/linux/sched.h, stable since 2.6):
 * 0 running or runnable, 1 interruptible, 2 uninterruptible, 4 stopped,
 * 8 traced. */
static char state_of(const struct gs_task_regs *r)
{
	if (r->state == 0)
		return (r->flags & GS_TREG_ON_CPU) ? 'R' : 'r';
	if (r->state & (4 | 8))
		return 'T';
	return 'S';
}

static int on_task(void *ctx, const struct gs_task_regs *r)
{
	struct collect *c = ctx;
	struct thread t = { .r = *r, .state = state_of(r) };

	if (c->n_threads >= GS_DUMP_MAX_THREADS) {
		c->st->dropped++;
		return 0;
	}
	return GS_PUSH(c->threads, c->n_threads, c->cap_threads, t);
}

/* ---- threads from /proc (no task iterator) ------------------------------ */

static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return n;
}

/* Kernel function names joined as "func\n..." (gs_proc_task_kstack), so
 * the wait is taken now, before anything is symbolized. */
struct kjoin {
	char buf[4096];
	size_t len;
};

static int kjoin_add(void *ctx, const char *func)
{
	struct kjoin *k = ctx;
	size_t n = strlen(func);

	if (k->len + n + 2 > sizeof(k->buf))
		return 1;
	memcpy(k->buf + k->len, func, n);
	k->len += n;
	k->buf[k->len++] = '\n';
	k->buf[k->len] = 0;
	return 0;
}

static void proc_thread(void *ctx, uint32_t tgid, uint32_t tid)
{
	struct collect *c = ctx;
	char path[96], buf[4096];
	struct thread t = { 0 };
	unsigned long long v[9];
	long nr;

	t.r.tgid = tgid;
	t.r.tid = tid;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", tgid, tid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return;
	char *cp = strchr(buf, '('), *ce = strrchr(buf, ')');

	if (!cp || !ce || ce < cp)
		return;
	snprintf(t.r.comm, sizeof(t.r.comm), "%.*s", (int)(ce - cp - 1), cp + 1);
	t.state = ce[1] && ce[2] ? ce[2] : '?';
	t.state = t.state == 'R'                     ? 'R'
		  : t.state == 'T' || t.state == 't' ? 'T'
		  : t.state == 'Z'                   ? 'Z'
						     : 'S';
	/* "NR arg1..arg6 SP PC" while in a system call; "running" or "-1 SP PC" */
	snprintf(path, sizeof(path), "/proc/%u/task/%u/syscall", tgid, tid);
	if (read_small(path, buf, sizeof(buf)) > 0 &&
	    sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr, &v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7]) == 9) {
		t.r.sp = v[6];
		t.r.ip = v[7];
		t.r.flags |= GS_TREG_USER_OK;
	} else if (sscanf(buf, "%ld %llx %llx", &nr, &v[0], &v[1]) == 3 && nr == -1) {
		t.r.sp = v[0];
		t.r.ip = v[1];
		t.r.flags |= GS_TREG_USER_OK;
	}
	if (t.state == 'R')
		t.r.flags |= GS_TREG_ON_CPU;
	struct kjoin k = { .len = 0 };
	if (!gs_proc_task_kstack(tgid, tid, kjoin_add, &k) && k.len)
		t.kfuncs = strdup(k.buf);
	if (c->n_threads >= GS_DUMP_MAX_THREADS)
		c->st->dropped++;
	if (c->n_threads >= GS_DUMP_MAX_THREADS ||
	    GS_PUSH(c->threads, c->n_threads, c->cap_threads, t))
		free(t.kfuncs);
}

/* ---- per process --------------------------------------------------------- */

static int open_procs(struct collect *c)
{
	c->procs = calloc(c->o->n_procs ? c->o->n_procs : 1, sizeof(*c->procs));
	if (!c->procs)
		return -ENOMEM;
	for (size_t i = 0; i < c->o->n_procs; i++) {
		struct proc_state *p = &c->procs[c->n_procs];
		struct gs_proc_stat ps;
		char msg[256];

		p->tgid = c->o->procs[i].tgid;
		p->is_root = c->o->procs[i].is_root;
		if (gs_proc_stat(p->tgid, &ps) || ps.kernel_thread)
			continue; /* gone meanwhile */
		memcpy(p->comm, ps.comm, sizeof(p->comm));
		p->ppid = ps.ppid;
		p->ranks = GS_RANK_ENV_UNKNOWN;
		gs_proc_rank_env(p->tgid, &p->ranks);
		gs_sym_add_process(c->sym, p->tgid);
		if (c->o->native && gs_proc_maps_read(p->tgid, &p->maps))
			p->maps = NULL;
		if (c->py)
			p->py_ok = !gs_py_discover(c->py, p->tgid, &p->cfg, NULL, msg, sizeof(msg));
		c->n_procs++;
	}
	return 0;
}

/* Process roles by the session's rule (gs_proc_assign_roles): no CPU
 * samples here, so the wrapper rule is by Python instead (wrapper_roles);
 * workers become "dataloader" later from
 * their frames.  Launchers lose their ranks, as there. */
static void assign_roles(struct collect *c)
{
	struct gs_role_proc *v = calloc(c->n_procs ? c->n_procs : 1, sizeof(*v));

	for (size_t i = 0; v && i < c->n_procs; i++) {
		const struct proc_state *p = &c->procs[i];

		v[i] = (struct gs_role_proc){
			.tgid = p->tgid,
			.ppid = p->ppid,
			.is_root = p->is_root,
			.ranks = p->ranks,
			.role = p->is_root ? GS_ROLE_MAIN : GS_ROLE_OTHER,
		};
	}
	if (v && !gs_proc_assign_roles(v, c->n_procs))
		for (size_t i = 0; i < c->n_procs; i++) {
			c->procs[i].main = v[i].role == GS_ROLE_MAIN;
			c->procs[i].ranks = v[i].ranks;
		}
	free(v);
}

/* The index of the process tgid in c->procs, or -1. */
static ssize_t proc_index(const struct collect *c, uint32_t tgid)
{
	for (size_t i = 0; i < c->n_procs; i++)
		if (c->procs[i].tgid == tgid)
			return (ssize_t)i;
	return -1;
}

/* Whether process k is a Python process below root r with no Python
 * process between them (a wrapper's job, not one of its workers). */
static bool top_python_below(const struct collect *c, size_t k, size_t r)
{
	ssize_t i = (ssize_t)k;

	if (k == r || !c->procs[k].py_ok)
		return false;
	for (int depth = 0; depth < 256; depth++) {
		i = c->procs[i].is_root ? -1 : proc_index(c, c->procs[i].ppid);
		if (i < 0)
			return false;
		if ((size_t)i == r)
			return true;
		if (c->procs[i].py_ok)
			return false;
	}
	return false;
}

/* A root that runs no Python but one Python process below it (timeout,
 * env, a shell script, nohup) is a wrapper: the Python process is "main",
 * as a profile's wrapper rule makes it from CPU samples. */
static void wrapper_roles(struct collect *c)
{
	for (size_t r = 0; c->py && r < c->n_procs; r++) {
		size_t job = 0, n = 0;

		if (!c->procs[r].is_root || !c->procs[r].main || c->procs[r].py_ok)
			continue;
		for (size_t k = 0; k < c->n_procs && n < 2; k++)
			if (top_python_below(c, k, r)) {
				job = k;
				n++;
			}
		if (n == 1 && !c->procs[job].main) {
			c->procs[r].main = false;
			c->procs[job].main = true;
		}
	}
}

static void collect_threads(struct collect *c, char *err, size_t errlen)
{
	uint32_t *tgids = calloc(c->n_procs ? c->n_procs : 1, sizeof(*tgids));
	char why[256] = "";
	int rc = -ENOTSUP;

	if (tgids && !c->o->force_proc) {
		for (size_t i = 0; i < c->n_procs; i++)
			tgids[i] = c->procs[i].tgid;
		rc = gs_task_regs_read(tgids, c->n_procs, on_task, c, NULL, why, sizeof(why));
	}
	free(tgids);
	if (!rc) {
		c->bpf = true;
		snprintf(c->st->source, sizeof(c->st->source), "BPF task iterator");
		return;
	}
	c->n_threads = 0; /* a partial read starts over */
	c->st->dropped = 0;
	snprintf(c->st->source, sizeof(c->st->source), "/proc/PID/task/TID/syscall (%s)",
		 c->o->force_proc ? "asked for"
		 : why[0]         ? why
				  : strerror(-rc));
	for (size_t i = 0; i < c->n_procs; i++)
		gs_proc_for_each_tid(c->procs[i].tgid, proc_thread, c);
	(void)err;
	(void)errlen;
}

/* ---- one thread -> one sample ------------------------------------------- */

static const char *state_label(char s)
{
	switch (s) {
	case 'R':
		return "running";
	case 'r':
		return "runnable";
	case 'T':
		return "stopped";
	case 'Z':
		return "zombie";
	default:
		return "blocked";
	}
}

static uint32_t kernel_name_loc(struct gs_profile *p, const char *name)
{
	struct gs_function f = { .name = gs_profile_intern(p, name) };
	struct gs_line l = { .function = gs_profile_add_function(p, &f) };

	return gs_profile_add_location(p, 0, 0, GS_FRAME_KERNEL, &l, 1);
}

/* The user stacks of t, into memory of its own. */
static int walk_thread(struct collect *c, struct thread *t)
{
	static __u64 user[GS_MAX_USER_FRAMES];
	static struct gs_py_frame py[GS_MAX_PY_FRAMES];
	struct proc_state *p = proc_of(c, t->r.tgid);
	bool regs_ok = (t->r.flags & GS_TREG_USER_OK) && !(t->r.flags & GS_TREG_ON_CPU);

	if (!p)
		return 0;
	if (regs_ok && p->maps && c->unw) {
		uint16_t uerr;

		t->n_user = gs_dump_unwind(c->unw, t->r.tgid, p->maps, t->r.ip, t->r.sp, t->r.bp,
					   c->bpf, user, GS_MAX_USER_FRAMES, &uerr);
		if (uerr == GS_UNWIND_DEPTH)
			t->flags |= GS_CPU_USER_TRUNC;
		if (!t->n_user)
			c->st->native_failed++;
	}
	if (p->py_ok && c->bpf) { /* fsbase comes from the iterator only */
		t->n_python = gs_dump_python(t->r.tgid, &p->cfg, t->r.fsbase, py, GS_MAX_PY_FRAMES,
					     &t->flags);
		/* code objects now, while the frames still run them (the
		 * session's own intern does it for gs_dump_walk's callers) */
		if (c->py)
			gs_py_note_frames(c->py, t->r.tgid, py, t->n_python);
	}
	t->user = t->n_user ? malloc(t->n_user * sizeof(*user)) : NULL;
	t->py = t->n_python ? malloc(t->n_python * sizeof(*py)) : NULL;
	if ((t->n_user && !t->user) || (t->n_python && !t->py))
		return -ENOMEM;
	if (t->n_user)
		memcpy(t->user, user, t->n_user * sizeof(*user));
	if (t->n_python)
		memcpy(t->py, py, t->n_python * sizeof(*py));
	return 0;
}

/* Stack of t (location ids) into the profile; its index or <0. */
static int64_t thread_stack(struct collect *c, struct thread *t)
{
	static uint32_t locs[GS_MAX_KERNEL_FRAMES + GS_MAX_USER_FRAMES + GS_MAX_PY_FRAMES + 2];
	struct gs_cpu_stack cs = {
		.tgid = t->r.tgid,
		.flags = t->flags,
		.kernel = t->r.kips,
		.n_kernel = t->r.n_kernel > GS_MAX_KERNEL_FRAMES ? GS_MAX_KERNEL_FRAMES
								 : t->r.n_kernel,
		.user = t->user,
		.n_user = t->n_user,
		.py = t->py,
		.n_python = t->n_python,
	};
	uint32_t nk = 0;
	int rc;

	if (t->kfuncs) { /* /proc: names only, leaf first */
		for (char *s = t->kfuncs, *e; *s && nk < GS_MAX_KERNEL_FRAMES; s = e + 1) {
			e = strchr(s, '\n');
			*e = 0;
			locs[nk++] = kernel_name_loc(c->prof, s);
		}
	}
	rc = gs_sym_cpu_stack(c->sym, c->py, &cs, c->o->interp_frames, 0, locs + nk,
			      (uint32_t)(sizeof(locs) / sizeof(locs[0])) - nk);
	if (rc < 0)
		return rc;
	return gs_profile_add_stack(c->prof, locs, nk + (uint32_t)rc);
}

static void set_ranks(struct gs_sample_ctx *x, const struct gs_rank_env *r)
{
	const int64_t v[GS_NL_NODE_RANK + 1] = { r->rank, r->local_rank, r->world_size,
						 r->node_rank };

	for (int i = 0; i <= GS_NL_NODE_RANK; i++)
		if (v[i] >= 0) {
			x->num_labels[i] = v[i];
			x->num_set |= 1u << i;
		}
}

static int add_thread(struct collect *c, struct thread *t)
{
	struct proc_state *p = proc_of(c, t->r.tgid);
	struct gs_sample s = { .values = { [GS_V_SAMPLES] = 1 } };
	struct gs_sample_ctx x = { .cuda_device = -1 };
	char comm[17];
	int64_t stack;

	if (!p)
		return 0;
	stack = thread_stack(c, t);
	if (stack < 0)
		return (int)stack;
	if (t->state == 'R')
		c->st->on_cpu++;
	memcpy(comm, t->r.comm, 16);
	comm[16] = 0;
	x.pid = t->r.tgid;
	x.tid = t->r.tid;
	x.thread_name = gs_profile_intern(c->prof, comm);
	x.process_role = gs_profile_intern(c->prof, p->main ? "main" : "other");
	x.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(c->prof, state_label(t->state));
	set_ranks(&x, &p->ranks);
	s.stack = (uint32_t)stack;
	c->st->threads++;
	return gs_profile_add_sample(c->prof, &s, &x);
}

/* A process whose threads include a DataLoader worker loop is a worker. */
static bool is_worker_ctx(const struct gs_sample *s, const struct gs_sample_ctx *x, void *arg)
{
	const struct gs_profile *p = arg;
	gs_str w = (gs_str)gs_profile_find_str(p, "dataloader_worker");

	return w && x->str_labels[GS_SL_THREAD_ROLE] == w;
}

static void mark_workers(struct gs_profile *p)
{
	gs_str dl = gs_profile_intern(p, "dataloader");

	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample_ctx *x = gs_profile_ctx(p, &p->samples[i]);

		if (!is_worker_ctx(&p->samples[i], x, p))
			continue;
		uint32_t pid = x->pid;

		for (uint32_t k = 0; k < p->n_ctxs; k++)
			if (p->ctxs[k].pid == pid)
				p->ctxs[k].process_role = dl;
	}
}

static void free_collect(struct collect *c)
{
	for (size_t i = 0; i < c->n_threads; i++) {
		free(c->threads[i].kfuncs);
		free(c->threads[i].user);
		free(c->threads[i].py);
	}
	free(c->threads);
	for (size_t i = 0; i < c->n_procs; i++)
		gs_proc_maps_put(c->procs[i].maps);
	free(c->procs);
	gs_dump_unwinder_free(c->unw);
	gs_py_free(c->py);
	gs_sym_free(c->sym);
}

/* Lines the maps snapshots' caps left out (proc.h): said in the profile. */
static void maps_note(struct gs_profile *prof)
{
	char note[320];

	if (gs_proc_maps_cap_note(note, sizeof(note)))
		gs_profile_add_note(prof, "%s", note);
}

/* SIGINT/SIGTERM/SIGHUP so far, and the last one.  A dump is not ended
 * by them: they stop the symbolizer's long reads (gs_sym_watch_stop), so
 * the stacks collected are still printed and written, named as far as
 * the symbolization got. */
static volatile sig_atomic_t g_signals, g_last_signal;

static void on_signal(int sig)
{
	g_last_signal = sig;
	g_signals = g_signals + 1;
}

static void install_signals(void)
{
	/* restarted: nothing here waits for a signal to wake it */
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	gs_sym_watch_stop(&g_signals);
}

static void note_cut(struct gs_profile *p)
{
	int sig = g_last_signal;

	if (!g_signals)
		return;
	gs_profile_add_note(p,
			    "dump cut short by %s: slow symbolization (debug-link CRCs, "
			    "debuginfod) stopped there; every thread is shown, frames past the "
			    "stop are named from symbol tables or offsets",
			    sig == SIGINT    ? "SIGINT"
			    : sig == SIGTERM ? "SIGTERM"
					     : "SIGHUP");
	gs_log("dump cut short by a stop signal: frames named as far as symbolization got\n");
}

int gs_dump_collect(const struct gs_dump_opts *o, struct gs_profile *prof, struct gs_dump_stats *st,
		    char *err, size_t errlen)
{
	struct collect c = { .o = o, .prof = prof, .st = st };
	uint64_t t0 = gs_now_ns(CLOCK_MONOTONIC);
	int rc = -ENOMEM;

	memset(st, 0, sizeof(*st));
	if (o->catch_stops)
		install_signals();
	c.sym = gs_sym_new(prof);
	if (!c.sym || (o->python && !(c.py = gs_py_new(prof))) ||
	    (o->native && !(c.unw = gs_dump_unwinder_new(gs_sym_elf_cache(c.sym)))) ||
	    open_procs(&c))
		goto out;
	assign_roles(&c);
	wrapper_roles(&c);
	collect_threads(&c, err, errlen);
	for (size_t i = 0; i < c.n_threads; i++)
		if ((rc = walk_thread(&c, &c.threads[i])))
			goto out;
	for (size_t i = 0; i < c.n_threads; i++)
		if ((rc = add_thread(&c, &c.threads[i])))
			goto out;
	st->processes = (uint32_t)c.n_procs;
	if ((rc = gs_thread_roles(prof)))
		goto out;
	mark_workers(prof);
	gs_sym_report(c.sym, prof);
	gs_profile_add_comment(prof, GS_DUMP_COMMENT "registers from the %s", st->source);
	maps_note(prof);
	if (o->catch_stops)
		note_cut(prof);
	rc = 0;
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	st->elapsed_ns = gs_now_ns(CLOCK_MONOTONIC) - t0;
	free_collect(&c);
	return rc;
}

/* ---- raw stacks for the sampling session -------------------------------- */

int gs_dump_walk(const uint32_t *tgids, size_t n, const struct gs_dump_walk_src *src,
		 int (*fn)(void *ctx, const struct gs_dump_raw *r), void *fn_ctx, char *err,
		 size_t errlen)
{
	static const __u64 no_user[1];
	static const struct gs_py_frame no_py[1];
	struct gs_dump_opts o = { .native = true, .python = true };
	struct gs_dump_stats st = { 0 };
	struct collect c = { .o = &o, .st = &st, .bpf = true };
	int rc = -ENOMEM;

	c.unw = gs_dump_unwinder_new(src->elf);
	c.procs = calloc(n ? n : 1, sizeof(*c.procs));
	if (!c.unw || !c.procs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct proc_state *p = &c.procs[c.n_procs++];
		const struct gs_py_cfg *cfg = src->py_cfg ? src->py_cfg(src->ctx, tgids[i]) : NULL;

		p->tgid = tgids[i];
		if (gs_proc_maps_read(p->tgid, &p->maps))
			p->maps = NULL;
		if (cfg) {
			p->cfg = *cfg;
			p->py_ok = true;
		}
	}
	rc = gs_task_regs_read(tgids, n, on_task, &c, NULL, err, errlen);
	for (size_t i = 0; !rc && i < c.n_threads; i++) {
		struct thread *t = &c.threads[i];
		struct gs_dump_raw r = {
			.tgid = t->r.tgid,
			.tid = t->r.tid,
			.state = t->state,
			.kernel = t->r.kips,
			.n_kernel = t->r.n_kernel > GS_MAX_KERNEL_FRAMES ? GS_MAX_KERNEL_FRAMES
									 : t->r.n_kernel,
		};

		if ((rc = walk_thread(&c, t)))
			break;
		memcpy(r.comm, t->r.comm, sizeof(r.comm));
		r.flags = t->flags;
		/* never NULL: consumers copy runs of 0 frames with memcpy */
		r.user = t->user ? t->user : no_user;
		r.n_user = t->n_user;
		r.py = t->py ? t->py : no_py;
		r.n_python = t->n_python;
		rc = fn(fn_ctx, &r);
	}
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free_collect(&c);
	return rc;
}
