/* SPDX-License-Identifier: MIT */
/*
 * State of one profiling session, shared by the session/ files only.
 *
 * struct session is split by concern: each sub-struct says which files
 * write it and which read it, and a file works mostly in its own
 * (attach.c in attach, gpu.c and gpu_inject.c in gpu, offcpu.c in off);
 * a function that needs one concern only takes that sub-struct.  What
 * every file shares stays at the top: the options, the profile being
 * built, and an error buffer.  scripts/arch-counts.sh counts the top-level
 * fields, so the struct does not grow back flat: a new field goes into
 * its concern's sub-struct, or a new concern gets one.
 */
#ifndef GS_SESSION_INT_H
#define GS_SESSION_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gpusample/records_codec.h"
#include "bpf/reaper.h"
#include "bpf/sampler.h"
#include "session/launch.h"
#include "session/machine.h"
#include "session/session.h"
#include "session/procs.h"
#include "session/rawstacks.h"
#include "gpusample/profile.h"
#include "gpu/gpu.h"
#include "proc/proc.h"
#include "python/python.h"
#include "native/native.h"
#include "symbolizer/symbolizer.h" /* gs_thread_voter */
#include "util/clock.h"            /* gs_now_ns */

/* One CPU sample as recorded (session.c), made whole at the end. */
struct raw_sample {
	uint32_t stack; /* index into the session's raw stacks */
	uint32_t tid;
	uint64_t ktime; /* the record's CLOCK_MONOTONIC ns (bpf_ktime_get_ns) */
	gs_str comm;    /* the thread's comm, interned in the profile */
};

/* The components the session opened and wires together: opened by
 * session.c (sampler, symbolizer) and runtimes.c (the rest), closed by
 * free_session; every session file calls through them. */
struct gs_session_rt {
	struct gs_sampler *sampler; /* the BPF programs and their ring buffer */
	struct gs_symbolizer *sym;  /* native and kernel symbols, the ELF cache */
	struct gs_py *py;           /* NULL with --no-python */
	struct gs_cfi *cfi;         /* unwind tables; NULL with --no-cfi or when refused */
	struct gs_proc_table *pt;   /* the one process table: its handlers are the runtimes */
	struct gs_proc_slots procs; /* struct gs_procinfo: the session's state of each process */
	struct gs_session_steps *steps; /* training-step probes and marks (steps.c) */
	/* Closes the per-process uprobe/USDT links (steps, GPU memory, the GPU
	 * agent's) off the record loop; lent to them, freed after them and
	 * before the sampler (the BPF object outlives the closes). */
	struct gs_link_reaper *reaper;
};

/* What is profiled: the -p PIDs, or the launched command (session.c
 * writes it in prepare and when the command is reaped; ranks.c and
 * gpu_inject.c read the roots). */
struct gs_session_targets {
	uint32_t roots[GS_MAX_PIDS]; /* -p PIDs, or the launched command's pid */
	int n_roots;
	struct gs_launch launch; /* launch mode's command (session/launch.h) */
	bool launched;           /* launch mode, the command started */
	bool exited;             /* the launched command was reaped */
	int status;              /* its waitpid status once exited */
	bool stopped;            /* SIGTERM'd by us when -d ended (--on-duration=stop) */
	char self_comm[16];      /* gpusample's own task name: the command's
				  * until its exec (PR_GET_NAME at launch) */
};

/* A record of the launched command's process taken before its exec: it ran
 * gpusample's own code (environment, user switch, the wait to be let go)
 * under gpusample's name, so neither its CPU samples nor its off-CPU stacks
 * are the command's.  comm: the record's task name (GS_COMM_LEN bytes). */
static inline bool gs_targets_pre_exec(const struct gs_session_targets *t, uint32_t tgid,
				       const char *comm)
{
	return t->launched && tgid == (uint32_t)t->launch.pid && t->self_comm[0] &&
	       !strncmp(comm, t->self_comm, GS_COMM_LEN);
}

/* Where the run is (session.c sets the phase as it goes; attach.c writes
 * the rest): a run stopped before sampling says in which phase and why. */
struct gs_session_attach {
	const char *phase;      /* what the run is doing now: a static string */
	const char *stop_phase; /* phase when a stop or the targets' exit was first seen */
	char stop_cause[48];    /* "stopped by SIGINT", "the target exited"; "" if neither */
	uint32_t tables_queued; /* attach-time unwind tables: objects queued, */
	uint32_t tables_built;  /* and built so far (gs_attach_build_tables) */
};

/* The sampling window (session.c writes it when sampling starts and when
 * CPU samples and switches stop; gpu.c, offcpu.c and steps.c read it). */
struct gs_session_window {
	uint64_t t0_mono;              /* CLOCK_MONOTONIC ns sampling started; 0: it never did */
	uint64_t t0_wall;              /* CLOCK_REALTIME ns at the same instant */
	uint64_t t1_mono;              /* CLOCK_MONOTONIC ns sampling stopped; 0: not yet */
	struct gs_cpu_snap cpu0, cpu1; /* the machine's CPU time at start and stop */
};

/* The stacks and CPU samples as recorded, and what building the profile's
 * samples from them keeps (session.c and stacks.c write it; offcpu.c and
 * gpu.c intern their stacks here too; ranks.c keeps the host label). */
struct gs_session_stacks {
	struct gs_rawstacks raw;       /* every distinct recorded stack (CPU, off-CPU, launch) */
	struct raw_sample *samples;    /* the CPU samples in arrival order, */
	size_t n_samples, cap_samples; /* n_samples of them in cap_samples slots */
	uint32_t truncated_loc;        /* "[truncated]" special location, 0 until made */
	gs_str host_label;             /* GS_SL_HOST of every CPU and off-CPU sample, 0 until set */
	struct gs_thread_voter roles;  /* thread-role votes' caches (build time) */
	/* Exited processes waiting to be retired (their stacks symbolized,
	 * their maps snapshots dropped), oldest first from retire_head. */
	uint32_t *retiring;
	size_t retire_head, n_retiring, cap_retiring;
	uint64_t trim_ns; /* CLOCK_MONOTONIC ns of the last malloc_trim after retiring */
};

/* --inject: one per target root (session/gpu_inject.c, inject/inject.h). */
struct gs_inject;
struct gs_inject_slot {
	uint8_t phase;       /* enum in session/gpu_inject.c */
	struct gs_inject *j; /* while staged */
	uint64_t since_ms;   /* CLOCK_MONOTONIC ms the phase began */
	char note[400];      /* what happened, for the profile */
};

/* The GPU side (session/gpu.c, session/gpu_inject.c write it; the router
 * and the progress line read it).  All NULL / zero with --no-gpu. */
struct gs_session_gpu {
	struct gs_gpu_host *host;    /* the agent host; NULL with --no-gpu or when it failed */
	struct gs_cuda *cuda;        /* cubins, kernels, stall tables (with host) */
	struct gs_join *join;        /* CPU<->GPU join, made by gs_gpu_start (needs t0) */
	int join_slot;               /* the join's handler id in the process table */
	struct gs_gpu_plugin plugin; /* the GPU handler's state; its summary for the progress */
	/* launch mode: CUDA_INJECTION64_PATH=, GS_AGENT_OPTS= (gs_gpu_launch_env),
	 * and launch_env, the NULL-ended list of them the command gets */
	char agent_env[2][600];
	char *launch_env[3];
	struct gs_inject_slot injects[GS_MAX_PIDS]; /* --inject, by index of targets.roots */
	/* GPU memory through the driver (session/memory.c) */
	struct gs_gpumem_probe *mem_probe; /* the uprobes on libcuda, per process */
	struct gs_gpumem *mem;             /* the live set */
};

/* What the run tells: the output files' prefix (ranks.c expands -o into
 * it, outputs.c checks it, session.c writes), the host counters (written
 * where counted: session.c, gpu.c, offcpu.c; counters.c puts them in the
 * profile) and the progress callback (session.c). */
struct gs_session_out {
	char prefix[PATH_MAX];         /* -o expanded: every output path is prefix + suffix */
	uint64_t counts[GS_NCOUNTERS]; /* host counters (gpusample/counters.h), event counts */
	void (*show_progress)(const struct gs_session_progress *p); /* NULL: no progress line */
};

struct session {
	const struct gs_options *o;        /* the command line, read-only */
	struct gs_profile prof;            /* the profile being built; every file adds to it */
	char err[512];                     /* the last component error, for the log line */
	struct gs_session_rt rt;           /* component handles */
	struct gs_session_targets targets; /* roots, the launched command */
	struct gs_session_attach attach;   /* phase, why the run stopped */
	struct gs_session_window window;   /* t0, CPU snapshots */
	struct gs_session_stacks stacks;   /* raw stacks, CPU samples */
	struct gs_session_gpu gpu;         /* GPU agent host, cubins, join, --inject */
	struct gs_offcpu *off;             /* off-CPU threads; NULL with --no-offcpu (offcpu.c) */
	struct gs_session_out out;         /* output prefix, host counters, progress */
};

/* session/attach.c: build the attach-time unwind tables with progress lines,
 * returning 1 as soon as stop(s) says so (a signal, the target gone);
 * remember why and in which phase a run stopped; comments/notes for a short
 * run; the process exit status (launch mode: the command's; 1 when nothing
 * was collected, with the reason on stderr; rc: the writers' result). */
int gs_attach_build_tables(struct session *s, bool (*stop)(struct session *));
void gs_attach_note_stop(struct gs_session_attach *a, int sig, bool target_gone);
void gs_attach_add_comments(struct session *s);
int gs_session_exit_status(struct session *s, int rc);
/* Priorities (why: session/attach.c): nice -10 and SCHED_RR during attach;
 * attach_builder gives the CFI thread the same; attach_done drops both to
 * nice -10 SCHED_OTHER (call when sampling starts or the run stops). */
void gs_session_raise_priority(void);
void gs_session_attach_builder(struct gs_cfi *cfi);
void gs_session_attach_done(struct gs_cfi *cfi);

/* session/outputs.c: output files owned by the sudo caller (gs_output_set_owner
 * from SUDO_UID/SUDO_GID) and every output path checked before sampling. */
void gs_outputs_set_owner(void);
/* The files of a run: a format bit of s->o->formats and the suffix after
 * the prefix (session/outputs.c); GS_N_OUT_FILES of them. */
struct gs_out_file {
	unsigned fmt;
	const char *suffix;
};
#define GS_N_OUT_FILES 6
extern const struct gs_out_file gs_out_files[GS_N_OUT_FILES];
int gs_outputs_check(const struct session *s);

/* session/runtimes.c: the runtimes (Python, CFI tables) opened, then
 * registered as handlers of s->rt.pt with the symbolizer and the GPU agent
 * (after gs_gpu_open, before the first process).  Process events go to
 * s->rt.pt (gs_proc_table_seen/_fork/_exec/_exit/_tick), which calls them. */
int gs_rt_open(struct session *s);
int gs_rt_register(struct session *s);
void gs_rt_close(struct session *s);
void gs_rt_comments(struct session *s); /* profile comments: what stayed unresolved */
/* Push the targets entry of p (flags, root, py_cfg_id) to BPF. */
int gs_session_update_target(struct session *s, const struct gs_procinfo *p);

/* session/stacks.c (calls only down: procs.c and the components):
 * Symbolize one raw stack into a profile stack (also used for launch
 * stacks of GPU kernels during the run); returns the stack index or <0. */
int64_t gs_session_stack(struct session *s, const struct gs_rawstack *r);
/* Raw stack r symbolized as profile stack `stack`: a _worker_loop frame
 * makes its process a DataLoader worker. */
void gs_session_note_dataloader(struct session *s, const struct gs_rawstack *r, uint32_t stack);
/* Exited process p (its exit record came at now): queued for retiring.
 * Retire those whose exit is GS_RETIRE_DELAY_NS old at now (every stack
 * they left symbolized, then gs_proc_table_retire drops their maps
 * snapshots).  The delay lets records of the process still in the ring
 * buffer arrive first.  0 or -ENOMEM (then nothing is lost: the stacks
 * are symbolized at the end as before). */
#define GS_RETIRE_DELAY_NS 2000000000ull
#define GS_RETIRE_TRIM_NS  10000000000ull /* malloc_trim at most every 10 s */
int gs_session_exited(struct session *s, struct gs_procinfo *p, uint64_t now);
int gs_session_retire_exited(struct session *s, uint64_t now);
/* Intern a decoded CPU stack (new stacks get their Python code objects
 * read right away); returns the raw stack index or -ENOMEM. */
int64_t gs_session_intern(struct session *s, const struct gs_rec_cpu_view *v);
/* Add a CPU or off-CPU sample of thread th, whole (its context c, or
 * smp->ctx when c is NULL), and count its vote for th's role (NULL: tid 0)
 * (gs_thread_role_vote: the role itself is applied once, at the end).
 * 0 or -ENOMEM. */
int gs_session_add_thread_sample(struct session *s, struct gs_thread *th,
				 const struct gs_sample *smp, const struct gs_sample_ctx *c);
const char *gs_session_role(struct session *s, uint32_t tgid);
/* A process seen for the first time (no fork record): table entry, ranks,
 * maps snapshot, runtimes.  NULL on ENOMEM. */
struct gs_procinfo *gs_session_first_sight(struct session *s, uint32_t tgid);

/* session/memory.c: GPU memory through the driver.  register: a handler
 * of s->rt.pt (after gs_gpu_register); record: a GS_REC_MEM_* record;
 * exit: tgid's group exited; finish: its comments and notes in the
 * profile; close: free (after the table). */
int gs_memory_register(struct session *s);
void gs_memory_record(struct session *s, const struct gs_rec_hdr *h);
void gs_memory_exit(struct session *s, uint32_t tgid);
int gs_memory_finish(struct session *s);
/* detach: the probes' links to the reaper at the end of the run. */
void gs_memory_detach(struct session *s);
void gs_memory_close(struct session *s);

/* session/gpu.c: the GPU agent's records and the CPU<->GPU join. */
int gs_gpu_open(struct session *s);        /* after the sampler is loaded */
void gs_gpu_launch_env(struct session *s); /* fills s->gpu.launch_env */
void gs_gpu_start(struct session *s);      /* t0 known */
/* Register the GPU agent's handler (gpu/plugin.c, over s->gpu.plugin:
 * the host, and the session's hooks for preparing a process before its
 * agent arms and for --inject) with s->rt.pt, and with GPU sampling on, the slots
 * the GPU host, the cubin symbolizer and the join keep their per-process
 * state in (the join's bound when gs_gpu_start makes it): 0 or -errno. */
int gs_gpu_register(struct session *s);
/* session/gpu_inject.c (--inject): tick: start or follow each root's injection
 * (from the GPU handler's tick); gone: a root exec'd or exited; fork: a
 * root forked while its request is pending (withdrawn in the child, whose
 * copy of the request would load a second agent there); end: at
 * detach, withdraw what is pending and remove the staged files; notes:
 * what happened, into the profile. */
void gs_gpu_inject_tick(struct session *s);
void gs_gpu_inject_gone(struct session *s, uint32_t tgid);
void gs_gpu_inject_fork(struct session *s, uint32_t parent, uint32_t child);
void gs_gpu_inject_end(struct session *s);
void gs_gpu_inject_notes(struct session *s);
/* Whether GPU records have consumers (the agent host and the join). */
bool gs_gpu_on(const struct session *s);
/* A GPU record the router decoded once (gs_gpu_rec_decode), routed to the
 * agent host, the cubin symbolizer or the join.  Returns 1 for a launch
 * whose stack the session is to make: r->launch.stack is then narrowed to
 * the program's frames, and the caller interns and symbolizes it and hands
 * it to the join with gs_gpu_launch_stack; 0 otherwise (a launch of a new
 * kernel past the join's caps is dropped, counted). */
int gs_gpu_record(struct session *s, struct gs_gpu_rec *r);
void gs_gpu_launch_stack(struct session *s, const struct gs_gpu_launch *l,
			 const struct gs_rec_cpu_view *v, uint32_t stack, const char *role);
void gs_gpu_detach(struct session *s, int (*poll)(void *ctx, int timeout_ms));
int gs_gpu_finish(struct session *s); /* join -> profile samples */
void gs_gpu_close(struct session *s);

/* session/ranks.c: host/rank labels (ranks: the process table's), -o expansion. */
/* The host, rank, local_rank, world_size and node_rank labels of a CPU or
 * off-CPU sample of process tgid (its ranks as the table has them once the
 * roles are assigned) into *c. */
void gs_session_proc_labels(struct session *s, uint32_t tgid, struct gs_sample_ctx *c);
/* s->out.prefix from -o (default gpusample-%p) with %h %p %r expanded
 * (gs_expand_prefix); prints the error itself. */
int gs_session_prefix(struct session *s);

/* "[name]" frame of kind GS_FRAME_SPECIAL; returns its location id. */
uint32_t gs_session_special(struct session *s, const char *name);

/* session/offcpu.c: off-CPU records -> samples (see the file comment). */
/* Before the sampler starts: the stacks of the threads asleep then, user
 * stacks included (dump/dump.h), for the waits begun before the window. */
/* session/wakers.c: who ended the sampled waits (GS_REC_OFFCPU_WAKER),
 * owned by offcpu.c.  gs_wakers_add keeps a waker record whose wait (its
 * wakee's pending off-CPU stack, begun at wakee_out) is known and returns
 * its index (or -ENOMEM), wakee_raw the raw stack of the wait (-1: none
 * raw); gs_wakers_miss counts one that is not.  At build
 * time gs_wakers_label labels the wait that record idx ended (idx < 0:
 * none): c[0] holds the sample's context, c[0..n) get it with the waker
 * labels of each part the wait is shared by, share[0..n) their fractions
 * (summing to 1); returns n (<= max, 0 for none) or -ENOMEM. */
struct gs_wakers;
struct gs_wakers *gs_wakers_new(void);
void gs_wakers_free(struct gs_wakers *w);
int64_t gs_wakers_add(struct session *s, struct gs_wakers *w, const struct gs_offcpu_waker *h,
		      const struct gs_rec_cpu_view *v, uint64_t wakee_out, int64_t wakee_raw);
void gs_wakers_miss(struct gs_wakers *w);
uint64_t gs_wakers_unmatched(const struct gs_wakers *w);
int gs_wakers_label(struct session *s, struct gs_wakers *w, int64_t idx, const uint32_t *stack_ids,
		    struct gs_sample_ctx *c, double *share, int max);

int gs_off_prepare(struct session *s);
int gs_off_start(struct session *s); /* right after gs_sampler_start and t0 */
void gs_off_record(struct session *s, const struct gs_rec_hdr *h);
/* After the CPU sampler's detach and a drain: the threads' open intervals
 * end at window.t1_mono. */
void gs_off_stop(struct session *s);
/* cpu/nanoseconds of the next CPU sample of th: with off-CPU accounting, a
 * thread's CPU samples (th->cpu_samples of them) share its exact on-CPU
 * time, the first one taking the division's remainder; else period_ns. */
int64_t gs_off_cpu_ns(struct gs_thread *th, int64_t period_ns);
/* After the CPU samples are in the profile: the off-CPU samples; stack_ids
 * maps raw stacks to profile stacks. */
int gs_off_finish(struct session *s, const uint32_t *stack_ids);
void gs_off_comments(struct session *s, const struct gs_sampler_stats *st);
/* session/steps.c: training steps from a uprobe on autograd's backward.
 * register: its process-table handler (with the runtimes); record: a
 * GS_REC_STEP_MARK; detach: the probes off (after the sampler stops);
 * finish: the marks to the profile's step and phase labels, after the
 * samples and roles are in (0 or -ENOMEM); free: after the table. */
struct gs_session_steps;
int gs_steps_register(struct session *s);
void gs_steps_record(struct session *s, const struct gs_rec_hdr *h);
void gs_steps_detach(struct session *s);
int gs_steps_finish(struct session *s);
void gs_steps_free(struct session *s);
/* session/counters.c: the "counters:" profile comment, every BPF and host counter. */
int gs_session_counters(struct session *s, const struct gs_sampler_stats *st);
void gs_off_free(struct session *s);

#endif
