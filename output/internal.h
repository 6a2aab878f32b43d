/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the writers in output/ (not a public interface).
 *
 * Display frames: speedscope, folded and the report show one "display
 * frame" per pprof Line (inline chains expanded caller first), plus GPU
 * pseudo-frames: a GPU PC location becomes "[GPU] kernel" -> inlined device
 * functions -> "file.cu:line", and writers append "[stall] reason".
 */
#ifndef GS_OUTPUT_INTERNAL_H
#define GS_OUTPUT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include "util/escape.h"
#include "gpusample/profile.h"
#include "output/output.h"

#include "util/hash.h" /* gs_mix64, gs_hash_bytes */
#include "util/hashmap.h"

/* ---- display frames ---------------------------------------------------- */
enum gs_dframe_type {
	GS_DF_FUNC = 1,   /* native/kernel/special function (one per function) */
	GS_DF_PYLINE,     /* Python: "qualname (file:line)", one per line */
	GS_DF_GPU_KERNEL, /* "[GPU] kernel" */
	GS_DF_GPU_INLINE, /* inlined device function inside a kernel */
	GS_DF_GPU_LINE,   /* "file.cu:line" */
	GS_DF_ADDR,       /* location without lines: "lib.so+0x1f" */
	GS_DF_STALL,      /* "[stall] reason"; fn = string index of the reason */
};

struct gs_dframe {
	uint8_t type;   /* enum gs_dframe_type */
	uint8_t kernel; /* kernel-space frame (folded adds _[k]) */
	uint32_t fn;    /* function id (GS_DF_STALL: gs_str of the reason) */
	int64_t line;
	uint32_t loc; /* location id (GS_DF_ADDR) */
};

/* Expand location id into display frames, caller first.  Returns the count
 * written (at most max; a location expands to at most n_lines + 2). */
size_t gs_location_dframes(const struct gs_profile *p, uint32_t loc, struct gs_dframe *out,
			   size_t max);
/* Display name; returns buf. */
const char *gs_dframe_name(const struct gs_profile *p, const struct gs_dframe *f, char *buf,
			   size_t len);
/* File and line for viewers that show them (NULL/0 if unknown). */
const char *gs_dframe_file(const struct gs_profile *p, const struct gs_dframe *f);
int64_t gs_dframe_line(const struct gs_profile *p, const struct gs_dframe *f);
uint64_t gs_dframe_hash(const struct gs_dframe *f);
int gs_dframe_eq(const struct gs_dframe *a, const struct gs_dframe *b);

/* Path shortened for display: after site-packages/, dist-packages/ or
 * lib/pythonX.Y/ when present, else unchanged. */
const char *gs_short_path(const char *path);
/* C++ name without parameter list, template arguments and return type
 * ("void ns::k<int>(float*)" -> "ns::k"); writes into buf. */
const char *gs_short_cxx_name(const char *name, char *buf, size_t len);

/* Process comm for pid from p->processes, or NULL. */
const struct gs_process *gs_find_process(const struct gs_profile *p, uint32_t pid);

/* Buffered writer over an fd (stdio is too slow for multi-MB JSON). */
struct gs_wbuf {
	int fd;
	int err; /* first negative errno */
	size_t n;
	char buf[1 << 16];
};
void gs_wbuf_init(struct gs_wbuf *w, int fd);
void gs_wbuf_put(struct gs_wbuf *w, const void *s, size_t n);
void gs_wbuf_puts(struct gs_wbuf *w, const char *s);
void gs_wbuf_putc(struct gs_wbuf *w, char c);
void gs_wbuf_u64(struct gs_wbuf *w, uint64_t v);
void gs_wbuf_i64(struct gs_wbuf *w, int64_t v);
int gs_wbuf_flush(struct gs_wbuf *w);

/* JSON string body (no quotes): escapes '"', '\\', control characters as
 * \uXXXX (\n \t \r \b \f short forms), and replaces every byte that is not
 * part of valid UTF-8 (overlong forms, surrogates, > U+10FFFF included) with
 * U+FFFD. */
void gs_json_escape(struct gs_wbuf *w, const char *s);
/* A JSON string: '"', gs_json_escape(s), '"'. */
void gs_json_str(struct gs_wbuf *w, const char *s);
/* A JSON string safe inside an HTML <script> element (output/html.c): as
 * gs_json_str, plus < > & and U+2028 U+2029 as \u escapes. */
void gs_html_json_str(struct gs_wbuf *w, const char *s);
/* Create path (gs_output_open), write it through body(ctx, w) with a
 * buffered writer, flush and close; errors (body's, or the file's) are
 * reported in err as "cannot write PATH: ...".  Returns 0 or -errno. */
int gs_write_buffered(const char *path, int (*body)(void *ctx, struct gs_wbuf *w), void *ctx,
		      char *err, size_t errlen);
/* Same into a buffer (tests); returns the length written (truncates). */
size_t gs_json_escape_buf(const char *s, char *out, size_t outlen);

/* The report's "Where the time goes" section and verdicts
 * (output/report_wall.c); gpu_line (may be NULL) is printed after the
 * splits.  Returns 0 or -ENOMEM. */
int gs_report_wall(const struct gs_profile *p, FILE *out, bool color, const char *gpu_line);
/* The cross-rank table (output/report_ranks.c): with main-thread samples of
 * two ranks or more, min / median / max per wall category over the ranks,
 * the rank at the max, and the straggler and input-starved rank when there
 * is one.  Prints nothing otherwise.  Returns 0 or -ENOMEM. */
int gs_report_ranks(const struct gs_profile *p, FILE *out, bool color);
/* Stack st in one line, the frames worth a glance ("a (x.py:3) > b (y.py:9)
 * > poll"; cat: the enum gs_wall_cat whose frame to show, -1 none), in at
 * most len - 1 chars (output/report_wall.c). */
/* ns as the report prints a duration: "12.3 ms", "1.23 s", "12.3 s"
 * (output/report.c). */
void gs_report_fmt_ns(char *buf, size_t len, int64_t ns);
void gs_report_short_stack(const struct gs_profile *p, uint32_t st, int cat, char *buf, size_t len);
/* The Steps section (output/report_steps.c): per process with training
 * steps (p->steps), their count, step time p50 / p90 / max, the trend
 * (first vs last quarter) and the phase that grew, the slowest steps with
 * their dominant wall category and its stack, the mean phase split per
 * step; with processes of two or more distinct ranks, the steps per rank
 * and each step's straggler (the rank busy, collective waits left out,
 * well over the others).  Prints nothing without steps.  Returns 0 or
 * -ENOMEM. */
int gs_report_steps(const struct gs_profile *p, FILE *out, bool color);

/* ---- wall-clock timeline (output/timeline.c) ------------------------- */
/* Lanes of the timelines (timeline.c's file comment): exited DataLoader
 * workers of a parent with GS_TL_MERGE_MIN or more share one lane per
 * slot and thread, and so do the threads of a (process, thread name) group
 * of GS_TL_MERGE_MIN or more; every other thread is a lane.  Lane keys are
 * pid << 32 | tid for a thread's own; for a merged one (parent << 32 |
 * GS_TL_LANE_TID | slot << 8 | thread) for workers, (pid << 32 |
 * GS_TL_LANE_TID | GS_TL_GROUP_BIT | group << 16 | slot << 8) for threads.
 * of: (pid << 32 | tid) of a merged thread -> its lane key; count: lane
 * key without its last byte -> the workers or threads laid in it. */
#define GS_TL_MERGE_MIN 8
#define GS_TL_LANE_TID  0x40000000u /* above pid_max (2^22) */
#define GS_TL_GROUP_BIT 0x01000000u
struct gs_tl_lanes {
	struct gs_hmap of, count;
};
/* 0 or -ENOMEM (then l is empty). */
int gs_tl_lanes_build(const struct gs_profile *p, struct gs_tl_lanes *l);
void gs_tl_lanes_free(struct gs_tl_lanes *l);
/* The lane key of sample s (l may be NULL: every thread its own); *merged
 * (if not NULL) gets the workers or threads merged in it, 0 if none. */
uint64_t gs_tl_lane(const struct gs_tl_lanes *l, const struct gs_profile *p,
		    const struct gs_sample *s, uint32_t *merged);
/* A merged lane's name ("exited DataLoader workers of pid P, slot K,
 * thread J (N processes)", "COMM pid P: threads NAME, slot K (N
 * threads)") in buf; false (buf untouched) for a thread's own lane. */
bool gs_tl_lane_name(const struct gs_tl_lanes *l, const struct gs_profile *p,
		     const struct gs_sample *s, char *buf, size_t len);
/* Indexes of the CPU samples with wall time, grouped per lane (main
 * process and main thread first) in time order; *idx malloc'ed. */
int gs_timeline_order(const struct gs_profile *p, const struct gs_tl_lanes *l, uint32_t **idx,
		      size_t *n);
/* End of the lane's run starting at idx[b] (first index of another lane). */
size_t gs_timeline_thread_end(const struct gs_profile *p, const struct gs_tl_lanes *l,
			      const uint32_t *idx, size_t b, size_t n);
/* One thread's samples idx[0..n) on the axis from the profile start, ns
 * (placement rules in timeline.c); out has n entries, in order, never
 * overlapping. */
struct gs_tl_item {
	uint64_t start, end;
	uint32_t sample; /* index into p->samples */
};
void gs_timeline_layout(const struct gs_profile *p, const uint32_t *idx, size_t n,
			struct gs_tl_item *out);
/* What an off-CPU stack waits in: the display name of its leaf-most
 * user-space frame (the leaf frame when all are kernel); returns buf. */
const char *gs_wait_name(const struct gs_profile *p, uint32_t stack, char *buf, size_t len);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if s starts an
 * invalid one (RFC 3629: no overlongs, no surrogates, max U+10FFFF). */

/* ---- terminal escaping: gs_term_escape in output.h ----------------------- */
/* A view of p whose string table has every string that needs it escaped
 * (v->p == p when none does).  Everything but the string table is shared
 * with p: read-only use (the report).  0 or -ENOMEM; free with
 * gs_term_view_free. */
struct gs_term_view {
	const struct gs_profile *p;
	struct gs_profile view;
	char **strings, **owned;
};
int gs_term_view_init(struct gs_term_view *v, const struct gs_profile *p);
void gs_term_view_free(struct gs_term_view *v);

/* Open path via gs_output_open and report errors in err. */
int gs_output_fail(char *err, size_t errlen, int rc, const char *what, const char *path);

#endif
