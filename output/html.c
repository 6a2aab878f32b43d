// SPDX-License-Identifier: MIT
/*
 * Self-contained HTML report (one file, no network): the terminal report's
 * text (output/report.c, verdict first), a table of the hottest GPU source
 * lines with their stall reasons, and the data of an interactive icicle
 * graph drawn by output/html_report.js (embedded at build time, with
 * output/html_report.css, as build/html_assets.h).
 *
 * The graph's data is a tree of display frames (output/internal.h) built
 * from the samples:
 *   frames  [name, kind, file, line]  kind 0 Python, 1 native, 2 kernel,
 *                                     3 GPU, 4 special ([truncated], ...)
 *   nodes   flat [parent, frame, ...] node k+1 at 2k; node 0 is the root;
 *                                     a parent always precedes its children
 *   threads [pid, tid, thread name, role, process comm]  (GPU samples: one
 *                                     "thread" per device, tid -1 - device)
 *   rows    flat [node, thread, wall us, cpu us, gpu samples, ...]: the
 *                                     self values of a node in one thread
 * Long runs: a tree of more than max_nodes nodes or max_rows rows keeps
 * the nodes that reach 1/K of a view's total in some view, K the largest of 1e5, 5e4, ... that keeps at most max_nodes
 * nodes and max_rows rows; a cut node's time goes to its nearest kept
 * caller (as self time), and the page says how many nodes were cut.
 *
 * Escaping: every string from the target goes out either HTML-escaped
 * (& < > " ' as entities) in the text, or as a JSON string inside the
 * <script type="application/json"> element with < > & U+2028 U+2029 as
 * \u escapes, so no name can end the element or start markup.  Bytes that
 * are not UTF-8 become U+FFFD in both.  The page's Content-Security-Policy
 * allows no fetch and runs only the script with this page's nonce.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "html_assets.h"
#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"
#include "util/clock.h"

enum { V_WALL, V_CPU, V_GPU, NV };
enum { K_PY, K_NATIVE, K_KERNEL, K_GPU, K_SPECIAL };

struct hframe {
	struct gs_dframe df;
	uint32_t out; /* index in the page's frame table, +1; 0 = unused */
};

struct hnode {
	uint32_t parent, frame; /* frame: index into frames[] */
	uint32_t keep;          /* new index + 1 when kept */
	int64_t tot[NV];
};

struct hthread {
	uint32_t pid, tid;
	gs_str name, role;
	int32_t device; /* GPU samples: the device; -1 for a CPU thread */
};

struct hrow {
	uint32_t node, thread;
	int64_t v[NV];
};

/* samples with one (stack, thread, stall reason) summed */
struct hagg {
	uint32_t stack, thread;
	gs_str reason;
	int64_t v[NV];
};

struct html {
	const struct gs_profile *p;
	size_t max_nodes, max_rows;
	struct hframe *frames;
	size_t n_frames, cap_frames;
	struct gs_hmap frame_index; /* gs_dframe_hash -> frames[] */
	struct hnode *nodes;
	size_t n_nodes, cap_nodes;
	struct gs_hmap child; /* parent << 32 | frame -> node */
	struct hthread *threads;
	size_t n_threads, cap_threads;
	struct gs_hmap thread_index; /* pid << 32 | tid -> threads[] */
	struct hagg *aggs;
	size_t n_aggs, cap_aggs;
	struct hrow *rows, *out_rows;
	size_t n_rows, cap_rows, n_out_rows, cap_out_rows;
	int64_t total[NV];
	bool dump;     /* a `gpusample dump`: CPU view = threads, no time */
	uint64_t k;    /* kept: nodes reaching total / k in some view */
	size_t n_kept; /* nodes kept, root included */
	char *report;  /* the terminal report's text */
	size_t report_len;
};

/* ---- escaping ----------------------------------------------------------- */

/* s as HTML text: entities for & < > " ', U+FFFD for bytes that are not
 * UTF-8 and for control characters other than newline and tab. */
static void html_text(struct gs_wbuf *w, const char *s, size_t n)
{
	const unsigned char *c = (const unsigned char *)s, *end = c + n;

	while (c < end) {
		int k = *c < 0x80 ? 1 : gs_utf8_len(c);

		if (k == 0 || c + k > end) {
			gs_wbuf_puts(w, "\xef\xbf\xbd");
			c++;
			continue;
		}
		if (k == 3 && c[0] == 0xe2 && c[1] == 0x80 && (c[2] == 0xa8 || c[2] == 0xa9)) {
			gs_wbuf_puts(w, c[2] == 0xa8 ? "&#8232;" : "&#8233;"); /* as in JSON */
			c += 3;
			continue;
		}
		if (k > 1) {
			gs_wbuf_put(w, c, (size_t)k);
			c += k;
			continue;
		}
		switch (*c) {
		case '&':
			gs_wbuf_puts(w, "&amp;");
			break;
		case '<':
			gs_wbuf_puts(w, "&lt;");
			break;
		case '>':
			gs_wbuf_puts(w, "&gt;");
			break;
		case '"':
			gs_wbuf_puts(w, "&quot;");
			break;
		case '\'':
			gs_wbuf_puts(w, "&#39;");
			break;
		default:
			if ((*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f)
				gs_wbuf_puts(w, "\xef\xbf\xbd");
			else
				gs_wbuf_putc(w, (char)*c);
		}
		c++;
	}
}

static void html_str(struct gs_wbuf *w, const char *s)
{
	html_text(w, s, strlen(s));
}

static void put_u4(struct gs_wbuf *w, unsigned v)
{
	static const char hex[] = "0123456789abcdef";
	char b[6] = {
		'\\', 'u', hex[v >> 12 & 15], hex[v >> 8 & 15], hex[v >> 4 & 15], hex[v & 15]
	};

	gs_wbuf_put(w, b, sizeof(b));
}

/* A JSON string safe inside <script>: quotes, \u escapes for control
 * characters, < > & and the line separators U+2028 U+2029. */
void gs_html_json_str(struct gs_wbuf *w, const char *s)
{
	const unsigned char *c = (const unsigned char *)(s ? s : "");

	gs_wbuf_putc(w, '"');
	while (*c) {
		int k = *c < 0x80 ? 1 : gs_utf8_len(c);

		if (k == 0) {
			put_u4(w, 0xfffd);
			c++;
		} else if (k == 3 && c[0] == 0xe2 && c[1] == 0x80 &&
			   (c[2] == 0xa8 || c[2] == 0xa9)) {
			put_u4(w, c[2] == 0xa8 ? 0x2028 : 0x2029);
			c += 3;
		} else if (k > 1) {
			gs_wbuf_put(w, c, (size_t)k);
			c += k;
		} else {
			if (*c == '"' || *c == '\\') {
				gs_wbuf_putc(w, '\\');
				gs_wbuf_putc(w, (char)*c);
			} else if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&' || *c == 0x7f) {
				put_u4(w, *c);
			} else {
				gs_wbuf_putc(w, (char)*c);
			}
			c++;
		}
	}
	gs_wbuf_putc(w, '"');
}

/* ---- the tree --------------------------------------------------------- */

struct frame_key {
	const struct html *h;
	const struct gs_dframe *df;
};

static bool frame_eq(const void *ctx, uint64_t i)
{
	const struct frame_key *k = ctx;

	return gs_dframe_eq(&k->h->frames[i].df, k->df);
}

/* Index of display frame df in h->frames, added if new; -ENOMEM. */
static int64_t frame_of(struct html *h, const struct gs_dframe *df)
{
	uint64_t hash = gs_dframe_hash(df);
	struct frame_key k = { h, df };
	const uint64_t *v = gs_hmap_find_by(&h->frame_index, hash, frame_eq, &k);
	struct hframe f = { .df = *df };

	if (v)
		return (int64_t)*v;
	if (GS_PUSH(h->frames, h->n_frames, h->cap_frames, f) ||
	    gs_hmap_add(&h->frame_index, hash, h->n_frames - 1))
		return -ENOMEM;
	return (int64_t)h->n_frames - 1;
}

/* The child of node parent for frame df, added if new; -ENOMEM. */
static int64_t child_of(struct html *h, uint32_t parent, const struct gs_dframe *df)
{
	int64_t f = frame_of(h, df);
	bool added;
	uint64_t *v;
	struct hnode n = { .parent = parent };

	if (f < 0)
		return f;
	v = gs_hmap_slot(&h->child, (uint64_t)parent << 32 | (uint64_t)f, &added);
	if (!v)
		return -ENOMEM;
	if (!added)
		return (int64_t)*v;
	n.frame = (uint32_t)f;
	*v = h->n_nodes;
	if (GS_PUSH(h->nodes, h->n_nodes, h->cap_nodes, n))
		return -ENOMEM;
	return (int64_t)h->n_nodes - 1;
}

/* Thread index of a sample's context (GPU: one per device). */
static int64_t thread_of(struct html *h, const struct gs_sample_ctx *c)
{
	bool gpu = c->cuda_device >= 0, added;
	uint64_t key = gpu ? (uint64_t)UINT32_MAX << 32 | (uint32_t)c->cuda_device
			   : (uint64_t)c->pid << 32 | c->tid;
	uint64_t *v = gs_hmap_slot(&h->thread_index, key, &added);
	struct hthread t = { c->pid, c->tid, c->thread_name, c->process_role,
			     gpu ? c->cuda_device : -1 };

	if (!v)
		return -ENOMEM;
	if (!added)
		return (int64_t)*v;
	*v = h->n_threads;
	if (GS_PUSH(h->threads, h->n_threads, h->cap_threads, t))
		return -ENOMEM;
	return (int64_t)h->n_threads - 1;
}

struct agg_key {
	const struct html *h;
	const struct hagg *a;
};

static bool agg_eq(const void *ctx, uint64_t i)
{
	const struct agg_key *k = ctx;
	const struct hagg *x = &k->h->aggs[i];

	return x->stack == k->a->stack && x->thread == k->a->thread && x->reason == k->a->reason;
}

/* Samples summed by (stack, thread, stall reason): stacks are walked once
 * per aggregate, not per sample. */
static int aggregate(struct html *h)
{
	const struct gs_profile *p = h->p;
	struct gs_hmap m = { 0 };
	int rc = 0;

	for (size_t i = 0; i < p->n_samples && !rc; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *c = gs_profile_ctx(p, s);
		bool gpu = c->cuda_device >= 0;
		int64_t v[NV] = { 0 };
		int64_t t;

		if (gpu) {
			v[V_GPU] = s->values[GS_V_GPU_SAMPLES];
		} else {
			v[V_WALL] = gs_wall_ns(p, s);
			v[V_CPU] = s->values[GS_V_CPU_NS] ? s->values[GS_V_CPU_NS]
							  : s->values[GS_V_SAMPLES] * p->period_ns;
			if (h->dump) /* a stack per thread, no time: count them */
				v[V_CPU] = s->values[GS_V_SAMPLES];
		}
		if (v[V_WALL] <= 0 && v[V_CPU] <= 0 && v[V_GPU] <= 0)
			continue;
		if ((t = thread_of(h, c)) < 0) {
			rc = (int)t;
			break;
		}
		struct hagg a = { s->stack, (uint32_t)t, gpu ? c->cuda_stall_reason : 0, { 0 } };
		uint64_t hash = gs_mix64(((uint64_t)a.stack << 32 | a.thread) ^ (uint64_t)a.reason
										    << 20);
		struct agg_key k = { h, &a };
		uint64_t *e = gs_hmap_find_by(&m, hash, agg_eq, &k);

		if (!e) {
			if (GS_PUSH(h->aggs, h->n_aggs, h->cap_aggs, a) ||
			    gs_hmap_add(&m, hash, h->n_aggs - 1)) {
				rc = -ENOMEM;
				break;
			}
			for (int j = 0; j < NV; j++)
				h->aggs[h->n_aggs - 1].v[j] += v[j];
			continue;
		}
		for (int j = 0; j < NV; j++)
			h->aggs[*e].v[j] += v[j];
	}
	gs_hmap_free(&m);
	return rc;
}

/* The node that aggregate a ends in: its stack from the root, then the
 * stall reason of a GPU sample. */
static int64_t leaf_of(struct html *h, const struct hagg *a)
{
	const struct gs_profile *p = h->p;
	const struct gs_stack *st = &p->stacks[a->stack];
	const uint32_t *locs = gs_profile_stack_locs(p, st);
	struct gs_dframe df[66];
	int64_t node = 0;

	for (uint32_t i = st->n; i-- > 0 && node >= 0;) {
		size_t nd = gs_location_dframes(p, locs[i], df, 66);

		for (size_t j = 0; j < nd && node >= 0; j++)
			node = child_of(h, (uint32_t)node, &df[j]);
	}
	if (node >= 0 && a->reason) {
		struct gs_dframe sf = { .type = GS_DF_STALL, .fn = a->reason };

		node = child_of(h, (uint32_t)node, &sf);
	}
	return node;
}

static int add_row(struct hrow **rows, size_t *n, size_t *cap, struct gs_hmap *m, uint32_t node,
		   uint32_t thread, const int64_t *v)
{
	bool added;
	uint64_t *e = gs_hmap_slot(m, (uint64_t)node << 32 | thread, &added);
	struct hrow r = { node, thread, { 0 } };

	if (!e)
		return -ENOMEM;
	if (added) {
		*e = *n;
		if (GS_PUSH(*rows, *n, *cap, r))
			return -ENOMEM;
	}
	for (int j = 0; j < NV; j++)
		(*rows)[*e].v[j] += v[j];
	return 0;
}

static int build_tree(struct html *h)
{
	struct hnode root = { 0 };
	struct gs_hmap m = { 0 };
	int rc = aggregate(h);

	if (!rc && GS_PUSH(h->nodes, h->n_nodes, h->cap_nodes, root))
		rc = -ENOMEM;
	for (size_t i = 0; i < h->n_aggs && !rc; i++) {
		int64_t leaf = leaf_of(h, &h->aggs[i]);

		rc = leaf < 0 ? (int)leaf
			      : add_row(&h->rows, &h->n_rows, &h->cap_rows, &m, (uint32_t)leaf,
					h->aggs[i].thread, h->aggs[i].v);
	}
	gs_hmap_free(&m);
	if (rc)
		return rc;
	for (size_t i = 0; i < h->n_rows; i++)
		for (int j = 0; j < NV; j++) {
			h->nodes[h->rows[i].node].tot[j] += h->rows[i].v[j];
			h->total[j] += h->rows[i].v[j];
		}
	for (size_t i = h->n_nodes; i-- > 1;)
		for (int j = 0; j < NV; j++)
			h->nodes[h->nodes[i].parent].tot[j] += h->nodes[i].tot[j];
	return 0;
}

/* Does node n reach 1/k of a view's total (k 0: every node does)?
 * Divided, not multiplied: a merged job's wall total can pass 2^64 / k. */
static bool reaches(const struct html *h, const struct hnode *n, uint64_t k)
{
	if (!k)
		return true;
	for (int j = 0; j < NV; j++)
		if (h->total[j] > 0 && n->tot[j] > 0 &&
		    (uint64_t)n->tot[j] >= ((uint64_t)h->total[j] + k - 1) / k)
			return true;
	return false;
}

/* Keep the nodes that reach total / k; rows moved to their nearest kept
 * node.  0, -E2BIG when more than the caps are left (but for k = 1, which keeps
 * the root and the nodes that hold all of a view, whatever the caps),
 * -ENOMEM. */
static int cut(struct html *h, uint64_t k)
{
	struct gs_hmap m = { 0 };
	int rc = 0;

	h->n_kept = 0;
	for (size_t i = 0; i < h->n_nodes; i++) {
		struct hnode *n = &h->nodes[i];

		n->keep = 0;
		if (i == 0 || (h->nodes[n->parent].keep && reaches(h, n, k)))
			n->keep = (uint32_t)++h->n_kept;
	}
	if (h->n_kept > h->max_nodes && k != 1)
		return -E2BIG;
	h->n_out_rows = 0;
	for (size_t i = 0; i < h->n_rows && !rc; i++) {
		uint32_t n = h->rows[i].node;

		while (!h->nodes[n].keep)
			n = h->nodes[n].parent;
		rc = add_row(&h->out_rows, &h->n_out_rows, &h->cap_out_rows, &m,
			     h->nodes[n].keep - 1, h->rows[i].thread, h->rows[i].v);
	}
	gs_hmap_free(&m);
	if (!rc && h->n_out_rows > h->max_rows && k != 1)
		rc = -E2BIG;
	h->k = k;
	return rc;
}

/* The whole tree when it fits, else the largest k from 100000 down. */
static int cap_tree(struct html *h)
{
	int rc = cut(h, 0);

	for (uint64_t k = 100000; rc == -E2BIG && k >= 1; k /= 2)
		rc = cut(h, k);
	return rc;
}

/* ---- writing ------------------------------------------------------------ */

static int kind_of(const struct gs_profile *p, const struct gs_dframe *df)
{
	switch (df->type) {
	case GS_DF_PYLINE:
		return K_PY;
	case GS_DF_GPU_KERNEL:
	case GS_DF_GPU_INLINE:
	case GS_DF_GPU_LINE:
	case GS_DF_STALL:
		return K_GPU;
	default:
		break;
	}
	if (df->kernel)
		return K_KERNEL;
	if (df->type == GS_DF_FUNC && df->fn) {
		const char *n = gs_profile_str(p, gs_profile_function(p, df->fn)->name);

		if (n[0] == '[')
			return K_SPECIAL;
	}
	return K_NATIVE;
}

/* The display name the report uses: kernel frames end " [kernel]". */
static void frame_name(const struct gs_profile *p, const struct gs_dframe *df, char *buf,
		       size_t len)
{
	char tmp[512]; /* longer names are cut: a page of many frames stays small */

	gs_dframe_name(p, df, tmp, sizeof(tmp));
	if (df->type == GS_DF_FUNC && !df->kernel)
		gs_short_cxx_name(tmp, buf, len);
	else
		snprintf(buf, len, "%s%s", tmp, df->kernel ? " [kernel]" : "");
}

static void put_sep(struct gs_wbuf *w, bool *first)
{
	if (!*first)
		gs_wbuf_putc(w, ',');
	*first = false;
}

static void put_frames(struct html *h, struct gs_wbuf *w)
{
	const struct gs_profile *p = h->p;
	char name[1024];
	bool first = true;
	uint32_t n_out = 0;

	/* frames in node order, so the table holds the kept ones only */
	gs_wbuf_puts(w, "\"frames\":[");
	for (size_t i = 1; i < h->n_nodes; i++) {
		struct hframe *f = &h->frames[h->nodes[i].frame];
		const char *file;

		if (!h->nodes[i].keep || f->out)
			continue;
		f->out = ++n_out;
		put_sep(w, &first);
		frame_name(p, &f->df, name, sizeof(name));
		gs_wbuf_putc(w, '[');
		gs_html_json_str(w, name);
		gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, (uint64_t)kind_of(p, &f->df));
		gs_wbuf_putc(w, ',');
		file = gs_dframe_file(p, &f->df);
		gs_html_json_str(w, file ? file : "");
		gs_wbuf_putc(w, ',');
		gs_wbuf_i64(w, gs_dframe_line(p, &f->df));
		gs_wbuf_putc(w, ']');
	}
	gs_wbuf_puts(w, "],\n");
}

/* A value as the page has it: ns as us (a 99 Hz sample is 10101 us); GPU
 * samples and a dump's threads as counts. */
static int64_t view_value(const struct html *h, int view, int64_t v)
{
	return view == V_GPU || (h->dump && view == V_CPU) ? v : (v + 500) / 1000;
}

static void put_tree(struct html *h, struct gs_wbuf *w)
{
	bool first = true;

	gs_wbuf_puts(w, "\"nodes\":[");
	for (size_t i = 1; i < h->n_nodes; i++) {
		const struct hnode *n = &h->nodes[i];

		if (!n->keep)
			continue;
		put_sep(w, &first);
		gs_wbuf_u64(w, h->nodes[n->parent].keep - 1);
		gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, h->frames[n->frame].out - 1);
	}
	gs_wbuf_puts(w, "],\n\"rows\":[");
	first = true;
	for (size_t i = 0; i < h->n_out_rows; i++) {
		const struct hrow *r = &h->out_rows[i];

		put_sep(w, &first);
		gs_wbuf_u64(w, r->node);
		gs_wbuf_putc(w, ',');
		gs_wbuf_u64(w, r->thread);
		for (int j = 0; j < NV; j++) {
			gs_wbuf_putc(w, ',');
			gs_wbuf_i64(w, view_value(h, j, r->v[j]));
		}
	}
	gs_wbuf_puts(w, "],\n");
}

static void put_threads(struct html *h, struct gs_wbuf *w)
{
	const struct gs_profile *p = h->p;
	bool first = true;

	gs_wbuf_puts(w, "\"threads\":[");
	for (size_t i = 0; i < h->n_threads; i++) {
		const struct hthread *t = &h->threads[i];
		const struct gs_process *pr = gs_find_process(p, t->pid);
		char name[64];
		bool gpu = t->device >= 0;

		put_sep(w, &first);
		gs_wbuf_putc(w, '[');
		gs_wbuf_u64(w, gpu ? 0 : t->pid);
		gs_wbuf_putc(w, ',');
		gs_wbuf_i64(w, gpu ? -1 - (int64_t)t->device : t->tid);
		gs_wbuf_putc(w, ',');
		snprintf(name, sizeof(name), "GPU %d", (int)t->device);
		gs_html_json_str(w, gpu ? name : gs_profile_str(p, t->name));
		gs_wbuf_putc(w, ',');
		gs_html_json_str(w, gpu ? "gpu" : gs_profile_str(p, t->role));
		gs_wbuf_putc(w, ',');
		gs_html_json_str(w, gpu              ? "GPU"
				    : pr && pr->comm ? gs_profile_str(p, pr->comm)
						     : "");
		gs_wbuf_putc(w, ']');
	}
	gs_wbuf_puts(w, "],\n");
}

static void put_data(struct html *h, struct gs_wbuf *w)
{
	size_t cut_nodes = h->n_nodes - h->n_kept;

	gs_wbuf_puts(w, "<script type=\"application/json\" id=\"gs-data\">{");
	gs_wbuf_puts(w, "\"total\":[");
	for (int j = 0; j < NV; j++) {
		if (j)
			gs_wbuf_putc(w, ',');
		gs_wbuf_i64(w, view_value(h, j, h->total[j]));
	}
	gs_wbuf_puts(w, "],\n\"cut\":{\"nodes\":");
	gs_wbuf_u64(w, cut_nodes);
	gs_wbuf_puts(w, ",\"of\":");
	gs_wbuf_u64(w, h->n_nodes - 1);
	gs_wbuf_puts(w, ",\"below\":");
	gs_wbuf_u64(w, cut_nodes ? h->k : 0);
	gs_wbuf_puts(w, "},\n");
	put_frames(h, w);
	put_threads(h, w);
	put_tree(h, w);
	gs_wbuf_puts(w, "\"dump\":");
	gs_wbuf_puts(w, h->dump ? "true" : "false");
	gs_wbuf_puts(w, "}</script>\n");
}

/* ---- the report's text, verdict first ------------------------------------ */

static int report_text(struct html *h)
{
	struct gs_report_opts o = { .top = 15, .color = false };
	FILE *f = open_memstream(&h->report, &h->report_len);
	int rc;

	if (!f)
		return -ENOMEM;
	rc = gs_write_report(h->p, &o, f);
	if (fclose(f) && !rc)
		rc = -ENOMEM;
	return rc;
}

/* The next section of the report text at s: a heading line after a blank
 * line.  Returns its start (the heading) or end. */
static const char *next_section(const char *s, const char *end)
{
	for (const char *c = s; c + 2 < end; c++)
		if (c[0] == '\n' && c[1] == '\n' && c[2] != ' ' && c[2] != '\n')
			return c + 2;
	return end;
}

static void put_section(struct gs_wbuf *w, const char *s, const char *end)
{
	const char *nl = memchr(s, '\n', (size_t)(end - s));
	const char *body = nl ? nl + 1 : end;

	while (end > body && end[-1] == '\n')
		end--;
	gs_wbuf_puts(w, strncmp(s, "Verdict", 7) ? "<section><h2>"
						 : "<section class=\"verdict\"><h2>");
	html_text(w, s, (size_t)(body - s) - (nl ? 1 : 0));
	gs_wbuf_puts(w, "</h2><pre>");
	html_text(w, body, (size_t)(end - body));
	gs_wbuf_puts(w, "</pre></section>\n");
}

/* Header, then "Where the time goes" and what follows it (the verdict and
 * the ranks), then the other sections in the report's order. */
static void put_report(struct html *h, struct gs_wbuf *w)
{
	const char *s = h->report, *end = s + h->report_len;
	const char *first = next_section(s, end), *wall = first;

	while (wall < end && strncmp(wall, "Where the time goes", 19))
		wall = next_section(wall, end);
	gs_wbuf_puts(w, "<pre class=\"head\">");
	html_text(w, s, (size_t)(first - s));
	gs_wbuf_puts(w, "</pre>\n<nav><a href=\"#flame\">flame graph</a>");
	if (h->total[V_GPU])
		gs_wbuf_puts(w, " &middot; <a href=\"#gpu-lines\">GPU source lines</a>");
	gs_wbuf_puts(w, "</nav>\n");
	for (const char *c = wall; c < end;) {
		const char *n = next_section(c, end);

		put_section(w, c, n);
		c = n;
	}
	for (const char *c = first; c < wall;) {
		const char *n = next_section(c, wall);

		put_section(w, c, n);
		c = n;
	}
}

/* ---- GPU source lines --------------------------------------------------- */

struct gline {
	uint32_t kfn, lfn; /* kernel and line function */
	int64_t line, n;
	gs_str reason[3];
	int64_t rn[3]; /* top reasons, most first */
};

static int cmp_gline(const void *a, const void *b)
{
	const struct gline *x = a, *y = b;

	return x->n != y->n ? (x->n < y->n ? 1 : -1) : (x->line > y->line) - (x->line < y->line);
}

/* Put one reason's exact count into line g's top 3 (most first). */
static void add_reason(struct gline *g, gs_str reason, int64_t n)
{
	int i = 3;

	while (i > 0 && g->rn[i - 1] < n) {
		if (i < 3)
			g->reason[i] = g->reason[i - 1], g->rn[i] = g->rn[i - 1];
		i--;
	}
	if (i < 3)
		g->reason[i] = reason, g->rn[i] = n;
}

/* The kernel and source line frames of GPU aggregate a as one key (frame
 * indexes; the line's 0 when the cubin has no line info).  0, -1 when it
 * has no kernel, -ENOMEM. */
static int gpu_line_key(struct html *h, const struct hagg *a, uint64_t *key, uint32_t *kfn,
			uint32_t *lfn, int64_t *line)
{
	const struct gs_profile *p = h->p;
	const struct gs_stack *st = &p->stacks[a->stack];
	struct gs_dframe df[66];
	int64_t kf = -1, lf = 0, f;
	size_t nd = st->n ? gs_location_dframes(p, gs_profile_stack_locs(p, st)[0], df, 66) : 0;

	for (size_t j = 0; j < nd; j++) {
		if (df[j].type != GS_DF_GPU_KERNEL && df[j].type != GS_DF_GPU_LINE)
			continue;
		if ((f = frame_of(h, &df[j])) < 0)
			return (int)f;
		if (df[j].type == GS_DF_GPU_KERNEL) {
			kf = f;
			*kfn = df[j].fn;
		} else {
			lf = f + 1;
			*lfn = df[j].fn;
			*line = df[j].line;
		}
	}
	*key = (uint64_t)kf << 32 | (uint64_t)lf;
	return kf < 0 ? -1 : 0;
}

struct line_reason {
	uint32_t line; /* index into the lines */
	gs_str reason;
	int64_t n;
};

/* GPU samples per (kernel, source line), hottest first, each with its top
 * stall reasons; counts exact (summed per line and reason, then ranked). */
static int gpu_lines(struct html *h, struct gline **out, size_t *n_out)
{
	struct gs_hmap lines = { 0 }, reasons = { 0 };
	struct gline *g = NULL;
	struct line_reason *lr = NULL;
	size_t n = 0, cap = 0, nlr = 0, caplr = 0;
	int rc = 0;

	for (size_t i = 0; i < h->n_aggs && !rc; i++) {
		const struct hagg *a = &h->aggs[i];
		struct gline z = { 0 };
		uint64_t key = 0, *v, *r;
		bool added;

		if (!a->v[V_GPU])
			continue;
		rc = gpu_line_key(h, a, &key, &z.kfn, &z.lfn, &z.line);
		if (rc == -1) {
			rc = 0;
			continue;
		}
		if (rc || !(v = gs_hmap_slot(&lines, key, &added)) ||
		    (added && GS_PUSH(g, n, cap, z))) {
			rc = -ENOMEM;
			break;
		}
		if (added)
			*v = n - 1;
		g[*v].n += a->v[V_GPU];
		struct line_reason k = { (uint32_t)*v, a->reason, 0 };
		if (!(r = gs_hmap_slot(&reasons, (uint64_t)k.line << 32 | k.reason, &added)) ||
		    (added && GS_PUSH(lr, nlr, caplr, k))) {
			rc = -ENOMEM;
			break;
		}
		if (added)
			*r = nlr - 1;
		lr[*r].n += a->v[V_GPU];
	}
	for (size_t i = 0; i < nlr && !rc; i++)
		add_reason(&g[lr[i].line], lr[i].reason, lr[i].n);
	gs_hmap_free(&lines);
	gs_hmap_free(&reasons);
	free(lr);
	if (rc) {
		free(g);
		return rc;
	}
	if (n)
		qsort(g, n, sizeof(*g), cmp_gline);
	*out = g;
	*n_out = n;
	return 0;
}

static void put_gpu_lines(struct html *h, struct gs_wbuf *w, const struct gline *g, size_t n)
{
	const struct gs_profile *p = h->p;
	char name[512], buf[64];

	gs_wbuf_puts(w, "<section id=\"gpu-lines\"><h2>GPU: hottest source lines</h2>\n"
			"<table><thead><tr><th>GPU samples</th><th>%</th><th>kernel</th>"
			"<th>line</th><th>stall reasons</th></tr></thead><tbody>\n");
	for (size_t i = 0; i < n && i < 30; i++) {
		struct gs_dframe kf = { .type = GS_DF_GPU_KERNEL, .fn = g[i].kfn };
		const struct gs_function *lf = g[i].lfn ? gs_profile_function(p, g[i].lfn) : NULL;

		gs_wbuf_puts(w, "<tr><td>");
		gs_wbuf_i64(w, g[i].n);
		snprintf(buf, sizeof(buf), "</td><td>%.1f%%</td><td>",
			 100.0 * (double)g[i].n / (double)h->total[V_GPU]);
		gs_wbuf_puts(w, buf);
		html_str(w, gs_dframe_name(p, &kf, name, sizeof(name)) + 6);
		gs_wbuf_puts(w, "</td><td>");
		if (lf && lf->file && g[i].line > 0) {
			snprintf(name, sizeof(name), "%s:%" PRId64, gs_profile_str(p, lf->file),
				 g[i].line);
			html_str(w, name);
		} else {
			gs_wbuf_puts(w, "? (built without -lineinfo)");
		}
		gs_wbuf_puts(w, "</td><td>");
		for (int j = 0; j < 3 && g[i].rn[j]; j++) {
			snprintf(buf, sizeof(buf), " %.0f%%",
				 100.0 * (double)g[i].rn[j] / (double)g[i].n);
			if (j)
				gs_wbuf_puts(w, ", ");
			html_str(w, g[i].reason[j] ? gs_profile_str(p, g[i].reason[j]) : "unknown");
			gs_wbuf_puts(w, buf);
		}
		gs_wbuf_puts(w, "</td></tr>\n");
	}
	gs_wbuf_puts(w, "</tbody></table>");
	if (n > 30) {
		snprintf(buf, sizeof(buf), "<p>... %zu more lines</p>", n - 30);
		gs_wbuf_puts(w, buf);
	}
	gs_wbuf_puts(w, "</section>\n");
}

/* ---- the page ------------------------------------------------------------- */

/* A fresh script nonce (32 hex digits): the page's policy runs only the
 * script that carries it, so markup that got into the page by a mistake in
 * the escaping above still could not run script (no inline handler, no
 * other <script>).  getrandom, else the clock and pid mixed. */
static void script_nonce(char out[33])
{
	uint64_t r[2];

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		r[0] = gs_mix64(gs_now_ns(CLOCK_REALTIME));
		r[1] = gs_mix64(r[0] ^ (uint64_t)getpid());
	}
	snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, r[0], r[1]);
}

static int body(void *ctx, struct gs_wbuf *w)
{
	struct html *h = ctx;
	struct gline *g = NULL;
	size_t ng = 0;
	char nonce[33];
	int rc = gpu_lines(h, &g, &ng);

	if (rc)
		return rc;
	script_nonce(nonce);
	gs_wbuf_puts(w,
		     "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		     "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
		     "style-src 'unsafe-inline'; img-src data:; script-src 'nonce-");
	gs_wbuf_puts(w, nonce);
	gs_wbuf_puts(w, "'\">\n<meta name=\"viewport\" content=\"width=device-width\">\n"
			"<title>gpusample report</title>\n<style>\n");
	gs_wbuf_put(w, gs_html_css, sizeof(gs_html_css) - 1);
	gs_wbuf_puts(w, "</style></head><body>\n<main id=\"report\">\n");
	put_report(h, w);
	if (ng)
		put_gpu_lines(h, w, g, ng);
	gs_wbuf_puts(w, "</main>\n<section id=\"flame\"><h2>Flame graph</h2>\n"
			"<noscript><p>The flame graph needs JavaScript; the report above "
			"does not.</p></noscript>\n<div id=\"fg-ui\"></div></section>\n");
	put_data(h, w);
	gs_wbuf_puts(w, "<script nonce=\"");
	gs_wbuf_puts(w, nonce);
	gs_wbuf_puts(w, "\">\n");
	gs_wbuf_put(w, gs_html_js, sizeof(gs_html_js) - 1);
	gs_wbuf_puts(w, "</script>\n</body></html>\n");
	free(g);
	return 0;
}

static void html_free(struct html *h)
{
	free(h->frames);
	gs_hmap_free(&h->frame_index);
	free(h->nodes);
	gs_hmap_free(&h->child);
	free(h->threads);
	gs_hmap_free(&h->thread_index);
	free(h->aggs);
	free(h->rows);
	free(h->out_rows);
	free(h->report);
}

int gs_write_html_capped(const struct gs_profile *p, const char *path, size_t max_nodes,
			 size_t max_rows, char *err, size_t errlen)
{
	struct html h = { .p = p,
			  .max_nodes = max_nodes ? max_nodes : 1,
			  .max_rows = max_rows,
			  .dump = gs_profile_comment(p, GS_DUMP_COMMENT) != NULL };
	int rc = report_text(&h);

	if (!rc)
		rc = build_tree(&h);
	if (!rc)
		rc = cap_tree(&h);
	rc = rc ? gs_output_fail(err, errlen, rc, "cannot write", path)
		: gs_write_buffered(path, body, &h, err, errlen);
	html_free(&h);
	return rc;
}

int gs_write_html(const struct gs_profile *p, const char *path, char *err, size_t errlen)
{
	return gs_write_html_capped(p, path, GS_HTML_MAX_NODES, GS_HTML_MAX_ROWS, err, errlen);
}
