/* SPDX-License-Identifier: MIT */
/*
 * The profile model: what every writer (pprof, speedscope, folded, report)
 * reads, and what the session builds from symbolized records.  It mirrors
 * pprof's profile.proto closely (string table, mappings, functions,
 * locations with inline lines, samples) plus run facts for the report.
 *
 * Ids: mapping, function and location ids are 1-based indexes into their
 * arrays (id 0 = none), exactly the ids written to pprof.  Strings are
 * interned; gs_str 0 is always "".  Stacks are deduplicated location lists,
 * leaf first.  Nothing here knows about BPF, CUPTI or the terminal.
 *
 * Errors: functions returning int return 0 or a negative errno (-ENOMEM).
 */
#ifndef GPUSAMPLE_PROFILE_H
#define GPUSAMPLE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/hashmap.h"

typedef uint32_t gs_str; /* index into the string table; 0 = "" */

/* Fixed sample types, in this order, in every profile (so any two merge). */
enum gs_value {
	GS_V_SAMPLES = 0,    /* samples/count: CPU samples */
	GS_V_CPU_NS,         /* cpu/nanoseconds: samples * 1e9/F; with
				* off-CPU accounting (default) a thread's CPU
				* samples instead share its exact on-CPU time
				* (sum_exec_runtime over the window) equally */
	GS_V_OFFCPU_NS,      /* offcpu/nanoseconds: time off a CPU (blocked
				* or runnable), from sched_switch.  An off-CPU
				* sample has samples = 0, cpu = 0, offcpu = its
				* duration (scaled, see session/offcpu.c), time_ns
				* = its start (the switch-out, or the wake-up
				* for the runnable part of a blocked interval),
				* thread_state "blocked" or "runnable".  Per
				* thread, cpu + offcpu = its wall time in the
				* window (its lifetime when shorter). */
	GS_V_GPU_SAMPLES,    /* gpu_samples/count: issued-stall warp samples */
	GS_V_GPU_NOT_ISSUED, /* gpu_samples_not_issued/count */
	GS_V_WALL_NS,        /* wall/nanoseconds: cpu + offcpu of the sample,
				* so one pprof column is the wall-clock view */
	GS_V_GPU_ALLOC,      /* gpu_alloc_space/bytes: GPU memory the CUDA driver
				* allocated in the window under this stack (one
				* sample per process and stack, time_ns 0) */
	GS_V_GPU_INUSE,      /* gpu_inuse_space/bytes: of it, live at the end (at
				* the process's exit): named as Go's heap
				* profiles' inuse_space */
	GS_NVALUES
};
extern const char *const gs_value_type[GS_NVALUES]; /* "samples", "cpu", ... */
extern const char *const gs_value_unit[GS_NVALUES]; /* "count", "nanoseconds" */

enum gs_frame_kind {
	GS_FRAME_NATIVE = 0, /* user-space machine code */
	GS_FRAME_KERNEL,     /* kernel text ([kernel.kallsyms] mapping) */
	GS_FRAME_PYTHON,     /* CPython code object ([python] mapping) */
	GS_FRAME_GPU_PC,     /* SASS pc in a cubin (mapping per cubin) */
	GS_FRAME_SPECIAL,    /* [truncated], [unknown launch], [stall] x, ... */
};

struct gs_mapping {
	uint64_t start, limit, offset; /* runtime range and file offset */
	gs_str file;                   /* path, or "[python]", "[kernel.kallsyms]" */
	gs_str build_id;               /* hex; cubin CRC for GPU mappings */
	bool has_functions, has_filenames, has_lines, has_inlines;
};

struct gs_function {
	gs_str name;        /* demangled / qualname; never empty */
	gs_str system_name; /* mangled linkage name, 0 unless it differs */
	gs_str file;        /* source file, 0 if unknown */
	int64_t start_line; /* 0 if unknown */
};

struct gs_line {
	uint32_t function; /* function id */
	int64_t line;      /* 0 if unknown */
};

struct gs_location {
	uint32_t mapping;    /* mapping id, 0 = none */
	uint64_t address;    /* runtime address / pcOffset / 0 */
	uint32_t first_line; /* index into lines[] */
	uint32_t n_lines;    /* inline chain, callee first, caller last */
	uint8_t kind;        /* enum gs_frame_kind */
};

struct gs_stack {
	uint32_t first; /* index into stack_locs[] */
	uint32_t n;     /* number of location ids, leaf first */
};

/* Labels beyond the fixed ones of struct gs_sample_ctx, written generically by
 * every writer and read back by the pprof reader: add an enum entry and its
 * key in output/profile.c (gs_str_label_key / gs_num_label_key), nothing
 * else.  String labels are 0 when absent; numeric ones are present when
 * their bit is set in gs_sample_ctx.num_set (so rank 0 survives). */
enum gs_str_label {
	GS_SL_THREAD_STATE = 0, /* "running" (CPU sample), "runnable", "blocked" */
	GS_SL_THREAD_ROLE,      /* "main", "dataloader_worker", "pin_memory", ... */
	GS_SL_HOST,             /* host name of the profiled machine */
	GS_SL_PHASE,            /* training phase: "data", "forward", "backward",
				 * "optimizer", "other" (gs_profile_label_steps) */
	/* Off-CPU samples of a blocked wait whose wakeup was recorded
	 * (session/offcpu.c): who ended the wait, followed back through
	 * helper threads to the thread that did the work. */
	GS_SL_WAKER_ROLE, /* the waker's thread role ("dataloader_worker", ...), or
			   * "timer", "irq", "softirq", "kthread", "other process" */
	GS_SL_WAKER,      /* its top frames, root first, ';'-separated: what it
			   * was doing (its CPU samples in the wait, else its
			   * stack at the wakeup) */
	GS_NSTR_LABELS
};
enum gs_num_label {
	GS_NL_RANK = 0,   /* RANK (torch.distributed global rank) */
	GS_NL_LOCAL_RANK, /* LOCAL_RANK */
	GS_NL_WORLD_SIZE, /* WORLD_SIZE */
	GS_NL_NODE_RANK,  /* GROUP_RANK (torchrun's node rank) or SLURM_NODEID */
	GS_NL_STEP,       /* training step of the process, 1-based (gs_profile_label_steps) */
	GS_NL_WAKER_TID,  /* the waker's tid (root pid namespace); absent for an
			   * interrupt or a kernel thread */
	GS_NNUM_LABELS
};
extern const char *const gs_str_label_key[GS_NSTR_LABELS]; /* pprof keys */

/* The comment that marks a `gpusample dump` profile (one stack per thread at
 * one moment, no time): "dump: registers from the SOURCE". */
#define GS_DUMP_COMMENT "dump: "
/* The comments the report's Memory section shows (the prefix cut): per
 * process its GPU memory peak, the stacks live at it, out-of-memory
 * answers. */
#define GS_MEMORY_COMMENT "memory: "

extern const char *const gs_num_label_key[GS_NNUM_LABELS];

/* Who and what a sample is about, besides its stack, values and time.  A
 * run has few distinct ones (a thread in one state, a stall reason on one
 * device) and millions of samples, so the profile keeps each distinct
 * context once (gs_profile_add_ctx) and a sample holds its index.  After
 * gs_profile_edit_ctx, ctxs[] may hold contexts no sample uses any more:
 * walk the samples, not ctxs[], to see what a profile says. */
struct gs_sample_ctx {
	uint32_t pid, tid;                  /* tgid and tid in the root pid namespace */
	gs_str thread_name;                 /* comm */
	gs_str process_role;                /* "main", "dataloader", "other" */
	gs_str cuda_stall_reason;           /* short name, 0 for CPU samples */
	gs_str gpu_attribution;             /* "exact", "proportional", 0 for CPU */
	int32_t cuda_device;                /* -1 for CPU samples */
	uint32_t num_set;                   /* bit i: num_labels[i] present */
	gs_str str_labels[GS_NSTR_LABELS];  /* enum gs_str_label; 0 = absent */
	int64_t num_labels[GS_NNUM_LABELS]; /* enum gs_num_label */
};

/* Kept for every sample of a run (5M in a long one): 80 bytes. */
struct gs_sample {
	uint32_t stack;   /* stack index (0-based into stacks[]) */
	uint32_t ctx;     /* context index (0-based into ctxs[]) */
	uint64_t time_ns; /* since profile start; GPU batches: drain time */
	int64_t values[GS_NVALUES];
};

/* One training step of a process (gs_profile_label_steps): step `number`
 * is marked by its backward's return, or by its optimizer step's start
 * when the optimizer was seen (by_optimizer: several backwards per step
 * are told apart); wall_ns is the time from the previous step's mark to
 * this one's (0 for a process's first step: its start was not seen).  [start_ns, end_ns): the samples labelled with it on
 * every thread of the process (its data, forward and backward, then its
 * optimizer step after the mark), ns since profile start. */
#define GS_STEP_PHASES 5
struct gs_step {
	uint32_t pid, tid; /* the process and the thread whose backward marks it */
	uint32_t number;
	uint32_t backwards; /* backward calls in the step (its main thread's) */
	bool by_optimizer;
	uint64_t mark_ns; /* its mark, ns since profile start */
	uint64_t wall_ns;
	uint64_t start_ns, end_ns;
	/* the stepping thread's wall time in the step per phase (enum
	 * gs_phase: other, data, forward, backward, optimizer), ns, from its
	 * samples laid out on the wall-clock axis; kept in the pprof with the
	 * step, as a saved profile's samples have no times */
	uint64_t phase_ns[GS_STEP_PHASES];
};

/* One process seen during the run, for the report. */
struct gs_process {
	uint32_t pid, ppid;
	uint32_t ns_pid; /* pid in its own pid namespace (a container) if not pid, else 0 */
	gs_str comm;
	gs_str role;
	gs_str python; /* e.g. "CPython 3.11.7", 0 if none */
	gs_str gpu;    /* GPU agent state line, 0 if none */
	uint64_t cpu_samples;
	bool exited;
};

/* A point of a counter track (the trace's "C" events): counter `name` of
 * process pid has `value` from time_ns (since the profile's start) on.
 * Written by the session (GPU memory per process); not kept in pprof. */
struct gs_counter_point {
	uint32_t pid;
	gs_str name;
	uint64_t time_ns;
	int64_t value;
};

struct gs_profile {
	/* string table (interned, hash-indexed) */
	char **strings;
	uint32_t n_strings, cap_strings;
	struct gs_hmap str_index; /* string hash -> index */

	struct gs_mapping *mappings;
	uint32_t n_mappings, cap_mappings;
	struct gs_function *functions;
	uint32_t n_functions, cap_functions;
	struct gs_hmap fn_index; /* function hash -> index */
	struct gs_line *lines;
	uint32_t n_lines, cap_lines;
	struct gs_location *locations;
	uint32_t n_locations, cap_locations;
	uint32_t *stack_locs;
	uint32_t n_stack_locs, cap_stack_locs;
	struct gs_stack *stacks;
	uint32_t n_stacks, cap_stacks;
	struct gs_hmap stack_index; /* location-list hash -> index */
	struct gs_sample_ctx *ctxs;
	uint32_t n_ctxs, cap_ctxs;
	struct gs_hmap ctx_index; /* context hash -> index */
	uint32_t last_ctx;        /* the one added last: runs of one thread skip the hash */
	struct gs_sample *samples;
	size_t n_samples, cap_samples;
	struct gs_process *processes;
	uint32_t n_processes, cap_processes;
	struct gs_hmap proc_index; /* pid -> index of its last entry (a long run: thousands) */
	gs_str *comments;
	uint32_t n_comments, cap_comments;
	gs_str *notes;
	uint32_t n_notes, cap_notes; /* report lines */
	struct gs_step *steps;       /* by pid, then number (gs_profile_label_steps) */
	size_t n_steps, cap_steps;

	/* run facts */
	uint64_t time_nanos; /* wall-clock start, ns since the Unix epoch */
	uint64_t duration_nanos;
	/* a merged profile's runs, [start, end) ns since the epoch, sorted by
	 * start: duration_nanos is the time they cover (output/merge.c) */
	struct gs_run_span {
		uint64_t start, end;
	} * run_spans;
	size_t n_run_spans, cap_run_spans;
	struct gs_counter_point *counters; /* counter tracks, by process then time */
	uint32_t n_counters, cap_counters;
	uint32_t frequency_hz;             /* CPU sampling frequency */
	int64_t period_ns;                 /* 1e9 / frequency_hz */
	uint64_t lost_samples;             /* ring buffer drops + BPF-side drops */
	enum gs_value default_sample_type; /* GS_V_CPU_NS unless GPU data */
	bool process_frames;               /* pprof: CPU samples get a root frame
				  * "[process ROLE]" (output/pprof.c) */
};

void gs_profile_init(struct gs_profile *p);
void gs_profile_free(struct gs_profile *p);

/* Intern a string (copied); NULL and "" give 0.  Returns the index or
 * (gs_str)-1 on allocation failure. */
gs_str gs_profile_intern(struct gs_profile *p, const char *s);
/* The index of s if it is interned (0 for NULL and ""), -1 if not: a
 * lookup that adds nothing. */
int64_t gs_profile_find_str(const struct gs_profile *p, const char *s);
static inline const char *gs_profile_str(const struct gs_profile *p, gs_str s)
{
	return p->strings[s];
}

/* Append; return the new 1-based id, or 0 on allocation failure. */
uint32_t gs_profile_add_mapping(struct gs_profile *p, const struct gs_mapping *m);
/* Deduplicated on (name, system_name, file, start_line). */
uint32_t gs_profile_add_function(struct gs_profile *p, const struct gs_function *f);
/* lines[] are copied; n_lines may be 0 (address-only location). */
uint32_t gs_profile_add_location(struct gs_profile *p, uint32_t mapping, uint64_t address,
				 enum gs_frame_kind kind, const struct gs_line *lines,
				 uint32_t n_lines);
/* Deduplicated; returns the 0-based stack index or -ENOMEM. */
int64_t gs_profile_add_stack(struct gs_profile *p, const uint32_t *locs, uint32_t n);
/* Deduplicated (field by field); returns the 0-based index or -ENOMEM. */
int64_t gs_profile_add_ctx(struct gs_profile *p, const struct gs_sample_ctx *c);
/* Copies *s.  Its context is *c when c is given (interned; s->ctx is not
 * read), else s->ctx, which must be an index already in ctxs[] (-EINVAL).
 * A zero wall value is filled in as cpu + offcpu. */
int gs_profile_add_sample(struct gs_profile *p, const struct gs_sample *s,
			  const struct gs_sample_ctx *c);
/* Relabel samples after the fact: every sample for which pick() holds
 * (pick NULL: every sample) gets the context edit() makes of a copy of its
 * own.  edit() runs once per distinct context, not per sample.  Returns 0
 * or -ENOMEM (samples already visited keep their new context). */
typedef bool (*gs_ctx_pick_fn)(const struct gs_sample *s, const struct gs_sample_ctx *c, void *arg);
typedef void (*gs_ctx_edit_fn)(struct gs_sample_ctx *c, void *arg);
int gs_profile_edit_ctx(struct gs_profile *p, gs_ctx_pick_fn pick, gs_ctx_edit_fn edit, void *arg);
int gs_profile_add_process(struct gs_profile *p, const struct gs_process *proc);
int gs_profile_add_comment(struct gs_profile *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int gs_profile_add_note(struct gs_profile *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One more counter point (struct gs_counter_point).  0 or -ENOMEM. */
int gs_profile_add_counter(struct gs_profile *p, uint32_t pid, const char *name, uint64_t time_ns,
			   int64_t value);

static inline const struct gs_location *gs_profile_location(const struct gs_profile *p, uint32_t id)
{
	return &p->locations[id - 1];
}
/* Location ids of stack s, leaf first (s->n of them).  An empty stack gives
 * NULL: a profile of empty stacks has no stack_locs array to index. */
static inline const uint32_t *gs_profile_stack_locs(const struct gs_profile *p,
						    const struct gs_stack *s)
{
	return s->n ? &p->stack_locs[s->first] : NULL;
}
static inline const struct gs_sample_ctx *gs_profile_ctx(const struct gs_profile *p,
							 const struct gs_sample *s)
{
	return &p->ctxs[s->ctx];
}
static inline const struct gs_function *gs_profile_function(const struct gs_profile *p, uint32_t id)
{
	return &p->functions[id - 1];
}

#endif /* GPUSAMPLE_PROFILE_H */
