/* SPDX-License-Identifier: MIT */
/*
 * Every counter of a run, defined once.  Each row is
 *   X(name, kind, what)
 * name:  the field of struct gs_sampler_stats (BPF counters) or of the
 *        host's counts, and the word written in the profile comment
 *        "counters: name=N name=N ..." (every counter, zero or not);
 * kind:  GS_CK_LOST  data the profile misses (samples, frames, threads,
 *                    records): the report prints it on its "dropped:" line
 *                    when it is not zero;
 *        GS_CK_INFO  volume, for the record;
 * what:  one line for people (units: records, walks, threads).
 * `lost` (ring buffer full, no scratch, bad record header) keeps its own
 * report line and note; the "dropped:" line is for the others.
 *
 * A new counter is one row here: the sampler struct, the profile comment
 * and the report's dropped line follow.
 */
#ifndef GS_COUNTERS_H
#define GS_COUNTERS_H

#include <stdint.h>

enum gs_counter_kind { GS_CK_INFO = 0, GS_CK_LOST = 1 };

/* Counted in BPF (bpf/common.bpf.h GS_STAT_*), read by gs_sampler_stats. */
#define GS_BPF_COUNTERS(X)                                                                 \
	X(samples, GS_CK_INFO, "CPU sample records emitted")                               \
	X(lost, GS_CK_LOST,                                                                \
	  "CPU samples and proc events dropped: ring buffer full, no "                     \
	  "scratch, bad header")                                                           \
	X(proc_events, GS_CK_INFO, "process events (fork, exec, exit) emitted")            \
	X(py_errors, GS_CK_LOST, "Python walks cut short by a read fault")                 \
	X(py_truncated, GS_CK_LOST, "Python walks cut at the frame limit")                 \
	X(kstack_errors, GS_CK_LOST, "kernel stacks not taken (bpf_get_stack failed)")     \
	X(children_unfollowed, GS_CK_LOST, "forks not followed: the targets map was full") \
	X(off_stacks, GS_CK_INFO, "off-CPU stack records emitted")                         \
	X(off_ends, GS_CK_INFO, "off-CPU interval end records emitted")                    \
	X(off_unsampled, GS_CK_INFO, "switch-outs accounted without a stack (p < 1)")      \
	X(off_threads_full, GS_CK_LOST, "threads not accounted off-CPU: offcpu_thr full")  \
	X(off_unseeded, GS_CK_LOST, "threads accounted off-CPU from first sight only")     \
	X(off_wakers, GS_CK_INFO, "wakeups recorded with the waker's stack")               \
	X(gpu_records, GS_CK_INFO, "GPU agent records passed on")                          \
	X(gpu_launches, GS_CK_INFO, "GPU launch events passed on")                         \
	X(gpu_lost, GS_CK_LOST, "GPU records and launch events dropped: ring buffer full") \
	X(gpu_bad, GS_CK_LOST, "GPU records rejected by BPF: bad header or read fault")    \
	X(gpu_rate_limited, GS_CK_LOST,                                                    \
	  "GPU records and launch events dropped in BPF: over their process's rate")       \
	X(step_marks, GS_CK_INFO, "training-step marks (backward returns) passed on")      \
	X(step_rate_limited, GS_CK_LOST,                                                   \
	  "training-step marks dropped in BPF: over their process's rate")                 \
	X(step_lost, GS_CK_LOST, "training-step marks dropped: ring buffer full")          \
	X(gpu_mem_events, GS_CK_INFO, "CUDA driver memory call records emitted")           \
	X(gpu_mem_rate_limited, GS_CK_LOST,                                                \
	  "CUDA driver memory calls not recorded: over their process's rate")              \
	X(gpu_mem_lost, GS_CK_LOST, "CUDA driver memory records dropped: ring buffer full")

/* Counted in gpusample itself (cli/ session, symbolizer/ join). */
#define GS_HOST_COUNTERS(X)                                                                \
	X(off_stacks_unmatched, GS_CK_LOST,                                                \
	  "off-CPU stack records without their interval "                                  \
	  "end (or the reverse)")                                                          \
	X(gpu_unknown_launch, GS_CK_INFO, "GPU samples under [unknown launch]")            \
	X(gpu_unannounced, GS_CK_LOST, "GPU samples of cubins never announced (no lines)") \
	X(gpu_kernels_capped, GS_CK_LOST,                                                  \
	  "GPU launch events and PC records of new kernels past the kernel caps "          \
	  "(launches dropped, PCs under [other kernels])")                                 \
	X(gpu_locations_capped, GS_CK_LOST,                                                \
	  "GPU PC records of new locations past the location caps ([other kernels])")      \
	X(gpu_launches_trimmed, GS_CK_LOST,                                                \
	  "GPU launch events cut from a kernel's time window by the history caps")         \
	X(gpu_corrs_capped, GS_CK_LOST,                                                    \
	  "GPU launch correlation ids dropped by the correlation caps (no exact "          \
	  "attribution)")                                                                  \
	X(gpu_mem_unknown, GS_CK_LOST,                                                     \
	  "CUDA driver memory records at an address that is no probed entry point")        \
	X(records_malformed, GS_CK_LOST,                                                   \
	  "records whose layout the codec refused (sizes, counts or origin lie)")

#define GS_COUNTERS(X) GS_BPF_COUNTERS(X) GS_HOST_COUNTERS(X)

enum gs_counter {
#define GS_X_ENUM(name, kind, what) GS_C_##name,
	GS_COUNTERS(GS_X_ENUM)
#undef GS_X_ENUM
	    GS_NCOUNTERS
};

/* The prefix of the profile comment that carries every counter. */
#define GS_COUNTERS_COMMENT "counters:"

#endif
