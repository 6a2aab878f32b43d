/* SPDX-License-Identifier: MIT */
/*
 * Writers: profile model -> pprof (gzipped profile.proto, hand-written
 * encoder), speedscope JSON, folded stacks, terminal report; and a pprof
 * reader for `gpusample report FILE.pb.gz`.
 *
 * Output files (output/common.c): created fresh with O_CREAT|O_EXCL|
 * O_NOFOLLOW under a temporary name in the target directory, chowned on the
 * descriptor to the owner set by gs_output_set_owner, renamed into place by
 * gs_output_close.  An existing entry at the path is replaced only if it is a
 * regular, singly linked file of that owner (an earlier profile); a symlink,
 * directory, FIFO, device or another user's file is refused with -EEXIST or
 * -EISDIR, never followed, truncated or chowned.
 * Errors: 0 or a negative errno, with a one-line
 * message in err (what failed, and what to do).
 */
#ifndef GS_OUTPUT_H
#define GS_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include "gpusample/counters.h"
#include "gpusample/profile.h"
#include "util/escape.h"

/* Owner given to every output file (sudo: the invoking user); default: the
 * euid, with no chown.  Also the only owner whose files may be replaced. */
void gs_output_set_owner(uid_t uid, gid_t gid);
/* Could path be written as described above?  Creates and removes a probe
 * file; run before sampling so a run never ends with nowhere to write. */
int gs_output_check(const char *path, char *err, size_t errlen);
/* Open path for writing as described above; returns fd or -errno.  The file
 * appears at path only through gs_output_close (never close() the fd). */
int gs_output_open(const char *path, char *err, size_t errlen);
/* Close fd from gs_output_open.  rc is the writer's result so far: 0 puts
 * the file at its path, non-zero removes the temporary.  Returns rc, or the
 * close/rename error, with err filled. */
int gs_output_close(int fd, int rc, char *err, size_t errlen);

/* Serialized, uncompressed profile.proto bytes (for tests and the gzip
 * writer).  *buf is malloc'ed; caller frees.  Samples with equal (stack,
 * labels) are aggregated (values summed).  Besides profile.proto's fields the
 * file carries a private message in Profile field 4751 (processes, notes,
 * frequency, lost samples, frame kinds; layout in pprof_proto.h) that pprof and
 * speedscope skip as an unknown field and gs_read_pprof reads back. */
int gs_pprof_encode(const struct gs_profile *p, uint8_t **buf, size_t *len);
int gs_write_pprof(const struct gs_profile *p, const char *path, char *err, size_t errlen);
/* Read a pprof file (gzip or plain) into p, which the caller has set up with
 * gs_profile_init (normally empty); free it with gs_profile_free even on
 * error.  The file is read whole: more than 256 MiB, compressed or after
 * gunzip, is -EFBIG ("more than 256 MiB" in err), not an attempt.
 * Sample columns are matched to enum gs_value by sample_type name (others
 * ignored); labels pid/tid/thread_name/process_role/cuda_* back into the
 * sample fields; processes, notes, frequency, lost samples and frame kinds
 * come from gpusample's private meta field when present (see pprof_proto.h), else
 * processes are derived from the pid labels.  Samples come back aggregated
 * (time_ns = 0). */
int gs_read_pprof(const char *path, struct gs_profile *p, char *err, size_t errlen);

/* Merge src into dst (output/merge.c): dst empty (gs_profile_init) takes
 * src's run facts and comments; afterwards every sample of src is added
 * with its labels (values unchanged, so totals add up exactly), processes
 * and notes appended, lost samples summed; the duration is the time the
 * runs cover (dst->run_spans): overlapping spans (the ranks of one job)
 * count once, separate runs add up, not the gap between them; time_nanos
 * is the earliest start.  Both
 * must come from one gpusample version (the "gpusample VERSION" comment):
 * -EINVAL with err saying which versions otherwise; -ENOMEM.  dst may be
 * half-merged after an error: free it. */
int gs_profile_merge(struct gs_profile *dst, const struct gs_profile *src, char *err,
		     size_t errlen);
/* The text after key in p's first comment that starts with key, NULL if
 * none ("sample event: ", GS_DUMP_COMMENT). */
const char *gs_profile_comment(const struct gs_profile *p, const char *key);
/* The version in p's "gpusample VERSION" comment, NULL if none. */
const char *gs_profile_version(const struct gs_profile *p);

/* One time-ordered "sampled" profile per CPU thread, all on one wall-clock
 * axis in ns (startValue 0 = the profile start, the same endValue for
 * every thread; empty samples where a thread was not seen; adjacent
 * samples with the same frames merged; off-CPU stretches end in a
 * "[blocked] WAIT" or "[runnable]" frame), one per GPU device (unit
 * "none", weights = gpu_samples, "[GPU] kernel -> file.cu:line -> [stall]
 * reason" leaves).  activeProfileIndex = the GPU profile when
 * default_sample_type is a GPU column, else the main thread of the main
 * process (role "main", else the first process), the one with the most
 * on-CPU time among several (ranks); no such thread: the thread with the
 * most on-CPU time.
 * Long runs: the file grows with stack changes, not samples.  When the
 * threads' samples and weights would pass max_bytes (GS_SPEEDSCOPE_MAX_BYTES
 * for gs_write_speedscope), each thread's timeline is cut into steps of
 * 10, 30, 100, 300 ms, 1, 3, 10, 30, 60, 120, 300, 600, 1800 or 3600 s (the finest
 * that fits; else the whole thread) and the samples within a step merged
 * by frames, in first-seen order: flame graph, left heavy and sandwich
 * views stay exact, time order is exact to the step, and the file's name
 * says the step.  The pprof file always has every sample's labels. */
#define GS_SPEEDSCOPE_MAX_BYTES ((size_t)100 << 20)
int gs_write_speedscope_capped(const struct gs_profile *p, const char *path, size_t max_bytes,
			       char *err, size_t errlen);
int gs_write_speedscope(const struct gs_profile *p, const char *path, char *err, size_t errlen);

/* Chrome trace-event JSON (Perfetto UI, chrome://tracing): per thread,
 * state slices (running / runnable / blocked, with the wall-time category)
 * with their stacks as nested slices on the wall-clock axis from the
 * profile start; process and thread names; GPU PC-sample batches as
 * instant events.  Long runs: adjacent identical samples merged, at most
 * GS_TRACE_MAX_EVENTS events (otherData.max_events): stacks cut to the
 * deepest of 16, 8, 4, 2, 1, 0 frames that fits (otherData.stack_depth),
 * then events past the cap dropped, threads in order, main process first,
 * and counted in otherData.dropped_events with a note.  Layout in trace.c. */
#define GS_TRACE_MAX_EVENTS 1000000
int gs_write_trace(const struct gs_profile *p, const char *path, char *err, size_t errlen);
int gs_write_trace_capped(const struct gs_profile *p, const char *path, size_t max_events,
			  char *err, size_t errlen);

/* A self-contained HTML report (output/html.c): one file, nothing loaded
 * from elsewhere (style and script inline, a Content-Security-Policy that
 * allows no fetch), readable without JavaScript for its text: the terminal
 * report (verdict first), the hottest GPU source lines with their stall
 * reasons when there are GPU samples, and an icicle graph per view (wall
 * time, CPU time, GPU samples) with search, zoom and a thread / process /
 * role filter, drawn by output/html_report.js.  Stacks are aggregated into
 * a tree of at most max_nodes nodes and max_rows (node, thread) rows: past
 * them, the nodes below 1/K of every view's total are cut, K the largest of
 * 1e5, 5e4, ... that fits, their time counted in their caller's self time, and the
 * page says how many were cut.  Every target string is escaped for HTML
 * or for a JSON string inside <script>.  0 or -errno with err filled. */
#define GS_HTML_MAX_NODES 20000
#define GS_HTML_MAX_ROWS  200000
int gs_write_html(const struct gs_profile *p, const char *path, char *err, size_t errlen);
int gs_write_html_capped(const struct gs_profile *p, const char *path, size_t max_nodes,
			 size_t max_rows, char *err, size_t errlen);

/* Brendan Gregg folded stacks: root;...;leaf COUNT.  which = GS_FOLDED_CPU
 * (samples/count, root frame "comm-pid", kernel frames suffixed "_[k]") or
 * GS_FOLDED_GPU (gpu_samples only: the _not_issued column is a subset and is
 * never added; stacks end "[GPU] kernel;...;file.cu:line;[stall] reason") or
 * GS_FOLDED_WAKE (blocked off-CPU time whose waker was recorded, in
 * microseconds: "comm-pid;wakee...;--;waker frames leaf first;waker role",
 * bcc offwaketime's layout). */
enum gs_folded_kind { GS_FOLDED_CPU, GS_FOLDED_GPU, GS_FOLDED_WAKE };
int gs_write_folded(const struct gs_profile *p, enum gs_folded_kind which, const char *path,
		    char *err, size_t errlen);
/* Escape one frame name for folded output (';' and newlines replaced). */
void gs_folded_escape(const char *in, char *out, size_t outlen);

/* ---- terminal escaping: util/escape.h (gs_term_escape) ---------------- */

/* ---- counters (gpusample/counters.h) ------------------------------------
 * gs_profile_add_counters: one profile comment "counters: name=N ..." with
 * all GS_NCOUNTERS values (0 or -ENOMEM).  gs_profile_counters: the sums of
 * those comments (a merged profile has one per input) into v; returns how
 * many there were (0: a profile from before counters, v all 0).
 * gs_counter_name / gs_counter_is_loss: a row's name and kind. */
int gs_profile_add_counters(struct gs_profile *p, const uint64_t v[GS_NCOUNTERS]);
int gs_profile_counters(const struct gs_profile *p, uint64_t v[GS_NCOUNTERS]);
const char *gs_counter_name(enum gs_counter c);
bool gs_counter_is_loss(enum gs_counter c);

/* The innermost Python frame of stack, as a location id (0: none): of the
 * job's own code (not the interpreter's library, an installed package or a
 * frozen module) when the stack has one, else the innermost Python frame.
 * *file (file may be NULL) gets the innermost Python frame's file
 * (output/common.c). */
uint32_t gs_stack_user_python(const struct gs_profile *p, uint32_t stack, const char **file);

/* Training steps (output/steps.c).  Phases of a CPU stack, from its frames
 * (the outermost marker wins): optimizer (torch/optim/), backward (Python
 * backward under torch/, native torch::autograd::Engine::*), data
 * (torch/utils/data/), forward (nn.Module's call, a Python forward),
 * other. */
enum gs_phase {
	GS_PHASE_OTHER = 0,
	GS_PHASE_DATA,
	GS_PHASE_FORWARD,
	GS_PHASE_BACKWARD,
	GS_PHASE_OPTIMIZER,
	GS_NPHASES
};
extern const char *const gs_phase_name[GS_NPHASES]; /* the phase label's values */
int gs_stack_phase(const struct gs_profile *p, uint32_t stack);
/* Label the CPU samples of process pid with their step and phase (labels
 * "step", numeric, and "phase") and append its steps to p->steps, from
 * marks[0..n): thread tid's returns from autograd's backward, or with
 * by_optimizer the starts of its optimizer steps, ns since the profile
 * start, ascending; backwards[0..n_bwd): its backward returns (each step
 * counts those it holds).  The rule (steps.c's comment): step k ends after
 * the optimizer work that follows marks[k-1].  A process
 * calling backward more than 200 times per second gets a note instead
 * (an inner loop: no wrong labels).  Call once per process, after every
 * sample is in.  0 or -ENOMEM. */
int gs_profile_label_steps(struct gs_profile *p, uint32_t pid, uint32_t tid, const uint64_t *marks,
			   size_t n, bool by_optimizer, const uint64_t *backwards, size_t n_bwd);

struct gs_report_opts {
	unsigned top; /* rows per table, default 15 */
	bool color;
};
/* Header, top functions (self/total), processes and threads, notes, GPU
 * kernels (stall mix, hottest lines, launching Python line) and a "where the
 * time goes" verdict (heuristics table in report.c).  o may be NULL. */
int gs_write_report(const struct gs_profile *p, const struct gs_report_opts *o, FILE *out);

/* Wall-clock classification: one table (output/walltime.c, `rules`) maps a
 * CPU sample (its thread_state label and its frames) to where that wall
 * time went.  Every sample's wall value (gs_wall_ns) falls in exactly one
 * category, so a thread's split sums to its wall time in the profile.
 *
 * Order: thread_state "runnable" is CPU starvation, whatever the frames.
 * Else the highest-priority frame class on any frame of the stack, in this
 * order (frames matched, Python by qualname's last part and file, native by
 * symbol without parameters):
 *   GIL wait    take_gil, PyEval_RestoreThread, PyEval_AcquireThread,
 *               PyEval_AcquireLock, PyGILState_Ensure
 *   collective  any function of torch/distributed/distributed_c10d.py,
 *               torch.distributed barrier; native c10d::* (ProcessGroup*,
 *               Work::wait, DDP's Reducer), gloo::*, nccl*
 *   CUDA sync   torch/cuda synchronize; cudaStreamSynchronize,
 *               cudaDeviceSynchronize, cudaEventSynchronize, cudaMemcpy,
 *               cuStreamSynchronize*, cuCtxSynchronize*,
 *               cuEventSynchronize*, cuMemcpyDtoH*,
 *               c10::cuda::stream_synchronize; Tensor.item() / .cpu() of
 *               a CUDA tensor through *_local_scalar_dense_cuda*,
 *               c10::cuda::memcpy_and_sync, copy_kernel_cuda (on a CPU
 *               tensor they are compute); spinning on-CPU there is sync
 *               too, not compute
 *   input wait  torch/utils/data iterator __next__, _next_data, _get_data,
 *               _try_get_data (waiting for a batch, or making it with
 *               num_workers=0)
 *   sleep       time_sleep, pysleep, usleep, *nanosleep* (libc, kernel)
 * Else "blocked" (or off-CPU time without a label: an old file) is other
 * blocking, and on-CPU time is compute. */
enum gs_wall_cat {
	GS_WALL_COMPUTE = 0,   /* on-CPU work not covered below */
	GS_WALL_INPUT,         /* waiting on (or running) the DataLoader iterator */
	GS_WALL_CUDA_SYNC,     /* blocked or spinning in a CUDA synchronize/D2H copy */
	GS_WALL_COLLECTIVE,    /* torch.distributed / gloo / NCCL waits */
	GS_WALL_GIL,           /* waiting for the GIL (take_gil) */
	GS_WALL_STARVED,       /* runnable: waiting in the run queue for a CPU */
	GS_WALL_SLEEP,         /* time.sleep, nanosleep */
	GS_WALL_OTHER_BLOCKED, /* any other blocking wait */
	GS_NWALL_CATS
};
extern const char *const gs_wall_cat_name[GS_NWALL_CATS]; /* "compute", ... */

/* Category of one sample of p (its stack and context are p's; walks the
 * stack: gs_wall_split caches per stack and is the one to use over many
 * samples); GPU samples give -EINVAL. */
int gs_wall_classify(const struct gs_profile *p, const struct gs_sample *s);

/* The category a frame of function fn (a location of enum gs_frame_kind
 * frame_kind) marks by the table, or -1 when no row matches it. */
int gs_wall_frame_cat(const struct gs_profile *p, uint32_t fn, uint8_t frame_kind);

/* Wall time of a CPU sample in ns: cpu (samples * period when the cpu
 * column is 0) + offcpu, or its wall column when larger. */
int64_t gs_wall_ns(const struct gs_profile *p, const struct gs_sample *s);

/* Wall split of the CPU samples accepted by keep (NULL = all CPU samples):
 * ns[] per category, total_ns their sum, top_stack[] the stack index with the
 * most ns in each category (UINT32_MAX if none), top_stacks[][] / top_ns[][]
 * the GS_WALL_TOP stacks with the most ns, most first (UINT32_MAX / 0 past
 * the last; top_stacks[c][0] == top_stack[c]); starved_in[] splits
 * ns[GS_WALL_STARVED] by the category the frames would give (what the
 * thread was doing when it waited for a CPU: an input wait, a spinning
 * sync, compute).  Returns 0 or -ENOMEM.  Usable per process, thread or
 * rank through keep/ctx. */
#define GS_WALL_TOP 8 /* the report shows 3 distinct ones */
struct gs_wall_split {
	uint64_t ns[GS_NWALL_CATS];
	uint64_t total_ns;
	uint32_t top_stack[GS_NWALL_CATS];
	uint32_t top_stacks[GS_NWALL_CATS][GS_WALL_TOP];
	uint64_t top_ns[GS_NWALL_CATS][GS_WALL_TOP];
	uint64_t starved_in[GS_NWALL_CATS];
	uint64_t python_ns; /* of total_ns, samples whose stack has a Python frame */
};
int gs_wall_split(const struct gs_profile *p, gs_ctx_pick_fn keep, void *ctx,
		  struct gs_wall_split *out);

#endif
