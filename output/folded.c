// SPDX-License-Identifier: MIT
/*
 * Brendan Gregg folded stacks (reference/output_formats.md §4.1, §5.5):
 * one line per distinct stack, "root;...;leaf COUNT", read by flamegraph.pl,
 * inferno, speedscope, the Firefox Profiler and Pyroscope.
 *
 * cpu.folded: CPU samples (samples/count, not nanoseconds: the Firefox
 * importer makes one sample per count unit).  The root frame is the process,
 * "comm-pid", as stackcollapse-perf --pid writes it; kernel frames get the
 * "_[k]" suffix flamegraph.pl colours.
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

void gs_folded_escape(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	if (!outlen)
		return;
	/* ';' separates frames and a newline ends the record; a trailing
	 * " <digits>" is fine since only the last token of a line is the
	 * count.  An empty name would make an empty frame. */
	for (const char *c = in ? in : ""; *c && o + 1 < outlen; c++) {
		char ch = *c;
		if (ch == ';')
			ch = ':';
		else if (ch == '\n' || ch == '\r' || ch == '\t' || (unsigned char)ch < 0x20)
			ch = ' ';
		out[o++] = ch;
	}
	out[o] = 0;
	if (!o)
		snprintf(out, outlen, "[unknown]");
}

struct fold_agg {
	uint32_t stack, pid;
	gs_str reason, comm; /* comm: first sample's thread name (no process entry) */
	int64_t count;
};

static int aggregate(const struct gs_profile *p, enum gs_folded_kind which,
		     struct fold_agg **out, size_t *n_out)
{
	size_t cap, n = 0;
	uint32_t *tab;
	struct fold_agg *a;
	if (gs_agg_alloc(p->n_samples, sizeof(*a), &tab, &cap, (void **)&a))
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		bool gpu = s->cuda_device >= 0;
		int64_t c = which == GS_FOLDED_GPU ? s->values[GS_V_GPU_SAMPLES] : s->values[GS_V_SAMPLES];
		if (gpu != (which == GS_FOLDED_GPU) || c <= 0)
			continue;
		struct fold_agg k = {.stack = s->stack, .pid = gpu ? 0 : s->pid,
				     .reason = gpu ? s->cuda_stall_reason : 0, .comm = s->thread_name};
		size_t h = gs_mix64(k.stack ^ ((uint64_t)k.pid << 32) ^ ((uint64_t)k.reason << 11)) & (cap - 1);
		while (tab[h] && !(a[tab[h] - 1].stack == k.stack && a[tab[h] - 1].pid == k.pid &&
				   a[tab[h] - 1].reason == k.reason))
			h = (h + 1) & (cap - 1);
		if (!tab[h]) {
			a[n] = k;
			tab[h] = (uint32_t)++n;
		}
		a[tab[h] - 1].count += c;
	}
	free(tab);
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

static void write_line(const struct gs_profile *p, struct gs_wbuf *w, const struct fold_agg *a,
		       enum gs_folded_kind which)
{
	char name[1024];
	bool first = true;
	if (which == GS_FOLDED_CPU) {
		const struct gs_process *pr = gs_find_process(p, a->pid);
		snprintf(name, sizeof(name), "%s-%u",
			 pr && pr->comm ? gs_profile_str(p, pr->comm) : a->comm ? gs_profile_str(p, a->comm) : "pid",
			 a->pid);
		put_frame(w, name, false, &first);
	}
	const struct gs_stack *st = &p->stacks[a->stack];
	const uint32_t *locs = &p->stack_locs[st->first];
	struct gs_dframe df[66];
	for (uint32_t i = st->n; i-- > 0;) {
		size_t nd = gs_location_dframes(p, locs[i], df, 66);
		for (size_t j = 0; j < nd; j++)
			put_frame(w, gs_dframe_name(p, &df[j], name, sizeof(name)), df[j].kernel, &first);
	}
	if (which == GS_FOLDED_GPU) {
		struct gs_dframe sf = {.type = GS_DF_STALL, .fn = a->reason};
		put_frame(w, gs_dframe_name(p, &sf, name, sizeof(name)), false, &first);
	}
	gs_wbuf_putc(w, ' ');
	gs_wbuf_i64(w, a->count);
	gs_wbuf_putc(w, '\n');
}

int gs_write_folded(const struct gs_profile *p, enum gs_folded_kind which,
		    const char *path, char *err, size_t errlen)
{
	struct fold_agg *a;
	size_t n;
	int rc = aggregate(p, which, &a, &n);
	if (rc)
		return gs_output_fail(err, errlen, rc, "cannot write", path);
	int fd = gs_output_open(path, err, errlen);
	if (fd < 0) {
		free(a);
		return fd;
	}
	struct gs_wbuf *w = malloc(sizeof(*w));
	if (!w) {
		close(fd);
		free(a);
		return gs_output_fail(err, errlen, -ENOMEM, "cannot write", path);
	}
	gs_wbuf_init(w, fd);
	for (size_t i = 0; i < n; i++)
		write_line(p, w, &a[i], which);
	rc = gs_wbuf_flush(w);
	if (close(fd) && !rc)
		rc = -errno;
	free(w);
	free(a);
	if (rc)
		return gs_output_fail(err, errlen, rc, "cannot write", path);
	return 0;
}
