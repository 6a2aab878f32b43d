// SPDX-License-Identifier: MIT
/*
 * Brendan Gregg folded stacks (reference/output_formats.md §4.1, §5.5):
 * one line per distinct printed stack, "root;...;leaf COUNT", read by flamegraph.pl,
 * inferno, speedscope, the Firefox Profiler and Pyroscope.
 *
 * cpu.folded: CPU samples (samples/count, not nanoseconds: the Firefox
 * importer makes one sample per count unit).  The root frame is the process,
 * "comm-pid", as stackcollapse-perf --pid writes it; kernel frames get the
 * "_[k]" suffix flamegraph.pl colours.
 * wake.folded: blocked off-CPU time with the waker recorded
 * (microseconds, as bcc's offwaketime): "comm-pid;wakee root..leaf;--;
 * waker frames leaf..root;waker role", the waker's frames from the
 * sample's `waker` label (session/wakers.c).
 * gpu.folded: GPU PC samples of the base stall family (gpu_samples; the
 * _not_issued column is a subset and is not added), stacks ending in
 * "[GPU] kernel;...;file.cu:line;[stall] reason"; no process root (GPU
 * samples without a launch stack hang under "[unknown launch]").
 * Frame names are the speedscope names, escaped by gs_folded_escape().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"

void gs_folded_escape(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	if (!outlen)
		return;
	/* ';' separates frames and a newline ends the record; a trailing
	 * " <digits>" is fine since only the last token of a line is the
	 * count.  An empty name would make an empty frame. */
	for (const unsigned char *c = (const unsigned char *)(in ? in : ""); *c;) {
		int n = *c < 0x80 ? 1 : gs_utf8_len(c);
		const char *piece = (const char *)c;
		char ch = (char)*c;
		size_t k = (size_t)n;

		if (n == 0) { /* not UTF-8: U+FFFD, so viewers get valid text */
			piece = "\xef\xbf\xbd";
			k = 3;
			n = 1;
		} else if (n == 1) {
			if (ch == ';')
				ch = ':';
			else if ((unsigned char)ch < 0x20 || ch == 0x7f)
				ch = ' ';
			piece = &ch;
		}
		if (o + k + 1 > outlen)
			break; /* whole characters only */
		memcpy(out + o, piece, k);
		o += k;
		c += n;
	}
	out[o] = 0;
	if (!o)
		snprintf(out, outlen, "[unknown]");
}

struct fold_agg {
	uint32_t stack, pid;
	gs_str reason, comm; /* comm: first sample's thread name (no process entry) */
	gs_str waker_role;   /* GS_FOLDED_WAKE: of the first sample */
	int64_t count;
};

/* The aggregate of k, added if new; NULL on -ENOMEM.  One pass holds CPU
 * samples (reason 0) or GPU samples (pid 0), so the stack and the other
 * of pid and reason make the key. */
static struct fold_agg *agg_of(struct gs_hmap *m, struct fold_agg **a, size_t *n, size_t *cap,
			       const struct fold_agg *k)
{
	bool added;
	/* a waker text and a pid both set (GS_FOLDED_WAKE): a 64-bit mix of the three */
	uint64_t key = k->pid && k->reason
			   ? gs_mix64(gs_mix64((uint64_t)k->pid << 32 | k->reason) ^ k->stack)
			   : k->stack | (uint64_t)(k->pid | k->reason) << 32;
	uint64_t *v = gs_hmap_slot(m, key, &added);
	if (!v || (added && GS_PUSH(*a, *n, *cap, *k)))
		return NULL;
	if (added)
		*v = *n - 1;
	return &(*a)[*v];
}

static int aggregate(const struct gs_profile *p, enum gs_folded_kind which, struct fold_agg **out,
		     size_t *n_out)
{
	size_t cap = 0, n = 0;
	struct fold_agg *a = NULL;
	struct gs_hmap m = { 0 };
	int rc = 0;
	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		bool gpu = sc->cuda_device >= 0;
		int64_t c = which == GS_FOLDED_GPU    ? s->values[GS_V_GPU_SAMPLES]
			    : which == GS_FOLDED_WAKE ? s->values[GS_V_OFFCPU_NS] / 1000
						      : s->values[GS_V_SAMPLES];
		if (gpu != (which == GS_FOLDED_GPU) || c <= 0 ||
		    (which == GS_FOLDED_WAKE && !sc->str_labels[GS_SL_WAKER]))
			continue;
		/* reason: the stall reason of a GPU sample, the waker of a wait */
		struct fold_agg k = { .stack = s->stack,
				      .pid = gpu ? 0 : sc->pid,
				      .reason = gpu ? sc->cuda_stall_reason
						: which == GS_FOLDED_WAKE
						    ? sc->str_labels[GS_SL_WAKER]
						    : 0,
				      .waker_role = sc->str_labels[GS_SL_WAKER_ROLE],
				      .comm = sc->thread_name };
		struct fold_agg *e = agg_of(&m, &a, &n, &cap, &k);
		if (e)
			e->count += c;
		else
			rc = -ENOMEM;
	}
	gs_hmap_free(&m);
	if (rc) {
		free(a);
		return rc;
	}
	*out = a;
	*n_out = n;
	return 0;
}

static void put_frame(struct gs_wbuf *w, const char *name, bool kernel, bool *first)
{
	char esc[1024];
	gs_folded_escape(name, esc, sizeof(esc));
	if (!*first)
		gs_wbuf_putc(w, ';');
	*first = false;
	gs_wbuf_puts(w, esc);
	if (kernel)
		gs_wbuf_puts(w, "_[k]");
}

/* "--", then the waker label's frames (root first, ';'-separated) leaf
 * first, then its role: bcc's offwaketime writes wakee;--;waker so, the
 * waker's stack growing down from the top of the graph. */
static void put_waker(struct gs_wbuf *w, const char *text, const char *role, bool *first)
{
	char frame[1024];
	const char *end = text + strlen(text);

	put_frame(w, "--", false, first);
	while (end > text) {
		const char *start = end;
		size_t n;

		while (start > text && start[-1] != ';')
			start--;
		n = (size_t)(end - start) < sizeof(frame) - 1 ? (size_t)(end - start)
							      : sizeof(frame) - 1;
		memcpy(frame, start, n);
		frame[n] = 0;
		put_frame(w, frame, false, first);
		end = start > text ? start - 1 : start;
	}
	put_frame(w, role && *role ? role : "[waker]", false, first);
}

/* ---- one line per distinct printed stack --------------------------------
 * Distinct model stacks can print the same line (one function and line at
 * two return addresses).  Each location gets a canonical id shared by all
 * locations whose frames print the same, and aggregates whose (pid, reason,
 * canonical ids) agree are summed into the first one. */
struct canon {
	uint32_t *of_loc; /* location id -> canonical id (1-based) */
	char *text;       /* printed frames of each canonical id, NUL-separated */
	size_t *off;      /* canonical id - 1 -> offset into text */
	size_t n, len;
};

static size_t loc_text(const struct gs_profile *p, uint32_t loc, char *out, size_t max)
{
	char name[1024], esc[1024];
	struct gs_dframe df[66];
	size_t nd = gs_location_dframes(p, loc, df, 66), o = 0;
	for (size_t j = 0; j < nd; j++) {
		gs_folded_escape(gs_dframe_name(p, &df[j], name, sizeof(name)), esc, sizeof(esc));
		int k = snprintf(out + o, max - o, "%s%s%s", j ? ";" : "", esc,
				 df[j].kernel ? "_[k]" : "");
		if (k < 0 || (size_t)k >= max - o)
			return max - 1;
		o += (size_t)k;
	}
	return o;
}

struct text_key {
	const struct canon *c;
	const char *text;
};

static bool text_eq(const void *ctx, uint64_t i)
{
	const struct text_key *k = ctx;
	return strcmp(k->c->text + k->c->off[i], k->text) == 0;
}

/* The canonical id (1-based) of printed frames buf (n bytes); 0 on -ENOMEM. */
static uint32_t canon_id(struct canon *c, struct gs_hmap *m, size_t *tcap, const char *buf,
			 size_t n)
{
	uint64_t h = gs_hash_bytes(buf, n, 0);
	struct text_key k = { c, buf };
	const uint64_t *v = gs_hmap_find_by(m, h, text_eq, &k);
	if (v)
		return (uint32_t)*v + 1;
	if (c->len + n + 1 > *tcap) {
		while (c->len + n + 1 > *tcap)
			*tcap *= 2;
		char *t = realloc(c->text, *tcap);
		if (!t)
			return 0;
		c->text = t;
	}
	if (gs_hmap_add(m, h, c->n))
		return 0;
	memcpy(c->text + c->len, buf, n + 1);
	c->off[c->n++] = c->len;
	c->len += n + 1;
	return (uint32_t)c->n;
}

static int canon_build(const struct gs_profile *p, struct canon *c)
{
	size_t tcap = 1 << 16;
	uint32_t n_loc = p->n_locations;
	struct gs_hmap m = { 0 };
	c->of_loc = calloc((size_t)n_loc + 1, sizeof(*c->of_loc));
	c->off = malloc(((size_t)n_loc + 1) * sizeof(*c->off));
	c->text = malloc(tcap);
	c->n = c->len = 0;
	int rc = c->of_loc && c->off && c->text ? gs_hmap_reserve(&m, n_loc) : -ENOMEM;
	char buf[8192];
	for (uint32_t id = 1; !rc && id <= n_loc; id++) {
		size_t n = loc_text(p, id, buf, sizeof(buf));
		c->of_loc[id] = canon_id(c, &m, &tcap, buf, n);
		if (!c->of_loc[id])
			rc = -ENOMEM;
	}
	gs_hmap_free(&m);
	return rc;
}

static void canon_free(struct canon *c)
{
	free(c->of_loc);
	free(c->text);
	free(c->off);
}

static uint64_t printed_hash(const struct gs_profile *p, const struct canon *c,
			     const struct fold_agg *a)
{
	const struct gs_stack *st = &p->stacks[a->stack];
	uint64_t h = gs_mix64(((uint64_t)a->pid << 32) ^ a->reason);
	for (uint32_t i = 0; i < st->n; i++)
		h = gs_mix64(h ^ c->of_loc[p->stack_locs[st->first + i]]);
	return h;
}

static bool printed_eq(const struct gs_profile *p, const struct canon *c, const struct fold_agg *a,
		       const struct fold_agg *b)
{
	const struct gs_stack *x = &p->stacks[a->stack], *y = &p->stacks[b->stack];
	if (a->pid != b->pid || a->reason != b->reason || x->n != y->n)
		return false;
	for (uint32_t i = 0; i < x->n; i++)
		if (c->of_loc[p->stack_locs[x->first + i]] !=
		    c->of_loc[p->stack_locs[y->first + i]])
			return false;
	return true;
}

struct printed_key {
	const struct gs_profile *p;
	const struct canon *c;
	const struct fold_agg *a, *k;
};

static bool printed_key_eq(const void *ctx, uint64_t i)
{
	const struct printed_key *k = ctx;
	return printed_eq(k->p, k->c, &k->a[i], k->k);
}

/* Sum aggregates that print the same into the first; returns the new count. */
static int merge_printed(const struct gs_profile *p, struct fold_agg *a, size_t *n)
{
	struct canon c;
	int rc = canon_build(p, &c);
	size_t out = 0;
	struct gs_hmap m = { 0 };
	if (!rc)
		rc = gs_hmap_reserve(&m, *n);
	for (size_t i = 0; !rc && i < *n; i++) {
		uint64_t h = printed_hash(p, &c, &a[i]);
		struct printed_key k = { p, &c, a, &a[i] };
		uint64_t *v = gs_hmap_find_by(&m, h, printed_key_eq, &k);
		if (v) {
			a[*v].count += a[i].count;
			continue;
		}
		a[out] = a[i];
		rc = gs_hmap_add(&m, h, out++);
	}
	if (!rc)
		*n = out;
	gs_hmap_free(&m);
	canon_free(&c);
	return rc;
}

static void write_line(const struct gs_profile *p, struct gs_wbuf *w, const struct fold_agg *a,
		       enum gs_folded_kind which)
{
	char name[1024];
	bool first = true;
	if (which != GS_FOLDED_GPU) {
		const struct gs_process *pr = gs_find_process(p, a->pid);
		snprintf(name, sizeof(name), "%s-%u",
			 pr && pr->comm ? gs_profile_str(p, pr->comm)
			 : a->comm      ? gs_profile_str(p, a->comm)
					: "pid",
			 a->pid);
		put_frame(w, name, false, &first);
	}
	const struct gs_stack *st = &p->stacks[a->stack];
	const uint32_t *locs = gs_profile_stack_locs(p, st);
	struct gs_dframe df[66];
	for (uint32_t i = st->n; i-- > 0;) {
		size_t nd = gs_location_dframes(p, locs[i], df, 66);
		for (size_t j = 0; j < nd; j++)
			put_frame(w, gs_dframe_name(p, &df[j], name, sizeof(name)), df[j].kernel,
				  &first);
	}
	if (which == GS_FOLDED_GPU) {
		struct gs_dframe sf = { .type = GS_DF_STALL, .fn = a->reason };
		put_frame(w, gs_dframe_name(p, &sf, name, sizeof(name)), false, &first);
	}
	if (which == GS_FOLDED_WAKE) /* offwaketime's order: the waker upside down */
		put_waker(w, gs_profile_str(p, a->reason), gs_profile_str(p, a->waker_role),
			  &first);
	gs_wbuf_putc(w, ' ');
	gs_wbuf_i64(w, a->count);
	gs_wbuf_putc(w, '\n');
}

int gs_write_folded(const struct gs_profile *p, enum gs_folded_kind which, const char *path,
		    char *err, size_t errlen)
{
	struct fold_agg *a;
	size_t n;
	int rc = aggregate(p, which, &a, &n);
	if (!rc && (rc = merge_printed(p, a, &n)))
		free(a);
	if (rc)
		return gs_output_fail(err, errlen, rc, "cannot write", path);
	int fd = gs_output_open(path, err, errlen);
	if (fd < 0) {
		free(a);
		return fd;
	}
	struct gs_wbuf *w = malloc(sizeof(*w));
	if (!w) {
		free(a);
		return gs_output_close(fd, -ENOMEM, err, errlen);
	}
	gs_wbuf_init(w, fd);
	for (size_t i = 0; i < n; i++)
		write_line(p, w, &a[i], which);
	rc = gs_output_close(fd, gs_wbuf_flush(w), err, errlen);
	free(w);
	free(a);
	return rc;
}
