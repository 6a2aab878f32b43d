/* SPDX-License-Identifier: MIT */
/*
 * Training steps and phases on a profile's samples (see output.h,
 * gs_profile_label_steps).
 *
 * A process's step boundaries are its main thread's returns from
 * autograd's backward (marks m_1 < ... < m_n, from the session's
 * uretprobe), or the starts of its optimizer steps when the optimizer was
 * seen (the session's uprobe on the profiler region "Optimizer.step#...";
 * gradient accumulation runs several backwards per step).  Step k is the
 * one whose backward ends (or optimizer starts) at m_k: its data loading,
 * forward and backward come before m_k, its optimizer step after.
 * So step k's samples run from the end of step k-1's optimizer work to the
 * end of its own: b_k = just past the last main-thread timer sample of the
 * optimizer's step in [m_k, m_k+1) (m_k when none was sampled; zero_grad
 * is optimizer phase but no end: a loop may clear the gradients at the top
 * of the next iteration, after its data).  Its
 * wall time is m_k - m_k-1, exact to the probe: the loop's own step time
 * but for the difference between two optimizer steps' times; the first
 * step's start was not seen, so it has none.
 *
 * Phases come from the frames, the outermost marker winning (a forward
 * called from a data loader's collate stays data):
 *   optimizer  a function of torch/optim/ (Optimizer.step, zero_grad)
 *   backward   Python "backward" under torch/ (Tensor.backward,
 *              torch.autograd.backward), native torch::autograd::Engine::*
 *   data       a function of torch/utils/data/ (the DataLoader iterator)
 *   forward    nn.Module's call (torch/nn/modules/module.py) or a Python
 *              function named forward
 *   other      none of those
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "output/internal.h"
#include "util/vec.h"

const char *const gs_phase_name[GS_NPHASES] = {
	[GS_PHASE_OTHER] = "other",         [GS_PHASE_DATA] = "data",
	[GS_PHASE_FORWARD] = "forward",     [GS_PHASE_BACKWARD] = "backward",
	[GS_PHASE_OPTIMIZER] = "optimizer",
};

_Static_assert(GS_NPHASES == GS_STEP_PHASES, "struct gs_step's phase_ns has a slot per phase");

/* Above this many backward calls per second a process's "steps" are an
 * inner loop, not training steps: no labels (said in a note). */
#define STEP_RATE_MAX 200

static const char *last_part(const char *qualname)
{
	const char *d = strrchr(qualname, '.');

	return d ? d + 1 : qualname;
}

/* The phase one frame (function fn, a frame of kind) marks, or -1. */
static int frame_phase(const struct gs_profile *p, uint32_t fn, uint8_t kind)
{
	const struct gs_function *f = gs_profile_function(p, fn);
	const char *name = gs_profile_str(p, f->name), *file = gs_profile_str(p, f->file);

	if (kind == GS_FRAME_PYTHON) {
		if (strstr(file, "torch/optim/"))
			return GS_PHASE_OPTIMIZER;
		if (!strcmp(last_part(name), "backward") && strstr(file, "torch/"))
			return GS_PHASE_BACKWARD;
		if (strstr(file, "torch/utils/data/"))
			return GS_PHASE_DATA;
		if (strstr(file, "torch/nn/modules/module.py") ||
		    !strcmp(last_part(name), "forward"))
			return GS_PHASE_FORWARD;
		return -1;
	}
	if (kind == GS_FRAME_NATIVE && !strncmp(name, "torch::autograd::Engine::", 25))
		return GS_PHASE_BACKWARD;
	return -1;
}

/* The phase of a stack and the function of its outermost marker frame
 * (*fn = 0 when none). */
static int stack_marker(const struct gs_profile *p, uint32_t stack, uint32_t *fn)
{
	const struct gs_stack *st = &p->stacks[stack];
	const uint32_t *locs = gs_profile_stack_locs(p, st);

	/* leaf first: the outermost frame is the last */
	for (uint32_t i = st->n; i-- > 0;) {
		const struct gs_location *l = gs_profile_location(p, locs[i]);

		for (uint32_t j = l->n_lines; j-- > 0;) {
			*fn = p->lines[l->first_line + j].function;
			int ph = frame_phase(p, *fn, l->kind);

			if (ph >= 0)
				return ph;
		}
	}
	*fn = 0;
	return GS_PHASE_OTHER;
}

int gs_stack_phase(const struct gs_profile *p, uint32_t stack)
{
	uint32_t fn;

	return stack_marker(p, stack, &fn);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median of the step walls m_k - m_k-1 (0 with fewer than two marks). */
static int median_wall(const uint64_t *m, size_t n, uint64_t *out)
{
	uint64_t *w;

	*out = 0;
	if (n < 2)
		return 0;
	if (!(w = malloc((n - 1) * sizeof(*w))))
		return -ENOMEM;
	for (size_t k = 1; k < n; k++)
		w[k - 1] = m[k] - m[k - 1];
	qsort(w, n - 1, sizeof(*w), cmp_u64);
	*out = w[(n - 1) / 2];
	free(w);
	return 0;
}

/* Number of marks at or before t. */
static size_t marks_upto(const uint64_t *m, size_t n, uint64_t t)
{
	return gs_upper_bound_u64(m, n, sizeof(*m), 0, t);
}

struct labeller {
	struct gs_profile *p;
	uint32_t pid, tid;
	const uint64_t *m;
	size_t n;
	uint8_t *phase; /* per stack: its phase | ZERO_GRAD, 0xff: not yet */
	uint64_t *b;    /* b[k-1] = b_k, the end of step k */
	uint64_t start; /* start of step 1 */
	bool by_optimizer;
	const uint64_t *bwd; /* backward returns, ascending */
	size_t n_bwd;
	gs_str names[GS_NPHASES];
};

/* In L->phase: an optimizer stack in zero_grad, not in the optimizer's
 * step: the phase label is optimizer, but it does not end a step (a loop
 * that clears the gradients at the top of an iteration does so after the
 * next batch's data, a stall in it included). */
#define ZERO_GRAD 0x80

static void stack_of(struct labeller *L, uint32_t stack)
{
	uint32_t fn;
	int ph;

	if (L->phase[stack] != 0xff)
		return;
	ph = stack_marker(L->p, stack, &fn);
	L->phase[stack] = (uint8_t)ph;
	if (ph == GS_PHASE_OPTIMIZER &&
	    !strcmp(last_part(gs_profile_str(L->p, gs_profile_function(L->p, fn)->name)),
		    "zero_grad"))
		L->phase[stack] |= ZERO_GRAD;
}

static int phase_of(struct labeller *L, uint32_t stack)
{
	stack_of(L, stack);
	return L->phase[stack] & ~ZERO_GRAD;
}

/* Whether a stack is the optimizer's step (zero_grad is not). */
static bool optimizer_step(struct labeller *L, uint32_t stack)
{
	stack_of(L, stack);
	return L->phase[stack] == GS_PHASE_OPTIMIZER;
}

/* b_k from the main thread's optimizer samples. */
static void boundaries(struct labeller *L)
{
	for (size_t k = 0; k < L->n; k++)
		L->b[k] = L->m[k];
	for (size_t i = 0; i < L->p->n_samples; i++) {
		const struct gs_sample *s = &L->p->samples[i];
		const struct gs_sample_ctx *c = gs_profile_ctx(L->p, s);
		size_t k;

		/* timer samples only: an off-CPU sample may carry the stack of
		 * another interval of its thread (unsampled switch-outs are
		 * spread over the sampled ones) */
		if (c->pid != L->pid || c->tid != L->tid || c->cuda_device >= 0 ||
		    s->values[GS_V_SAMPLES] <= 0)
			continue;
		if (!optimizer_step(L, s->stack) || !(k = marks_upto(L->m, L->n, s->time_ns)))
			continue;
		if (s->time_ns + 1 > L->b[k - 1])
			L->b[k - 1] = s->time_ns + 1;
	}
}

/* Step number of a sample at t (0: none: before step 1, after the last). */
static uint32_t step_at(const struct labeller *L, uint64_t t)
{
	if (t < L->start || t >= L->b[L->n - 1])
		return 0;
	/* the first k with t < b_k */
	size_t lo = 0, hi = L->n - 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t < L->b[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return (uint32_t)lo + 1;
}

static int relabel(struct labeller *L)
{
	struct gs_profile *p = L->p;

	for (size_t i = 0; i < p->n_samples; i++) {
		struct gs_sample *s = &p->samples[i];
		struct gs_sample_ctx c = *gs_profile_ctx(p, s);
		uint32_t step;
		int64_t idx;

		if (c.pid != L->pid || c.cuda_device >= 0)
			continue;
		c.str_labels[GS_SL_PHASE] = L->names[phase_of(L, s->stack)];
		if ((step = step_at(L, s->time_ns))) {
			c.num_labels[GS_NL_STEP] = step;
			c.num_set |= 1u << GS_NL_STEP;
		}
		if ((idx = gs_profile_add_ctx(p, &c)) < 0)
			return (int)idx;
		s->ctx = (uint32_t)idx;
	}
	return 0;
}

static int add_steps(struct labeller *L)
{
	struct gs_profile *p = L->p;

	if (GS_GROW(p->steps, p->cap_steps, p->n_steps + L->n))
		return -ENOMEM;
	for (size_t k = 0; k < L->n; k++)
		p->steps[p->n_steps++] = (struct gs_step){
			.pid = L->pid,
			.tid = L->tid,
			.number = (uint32_t)k + 1,
			.by_optimizer = L->by_optimizer,
			/* backward returns in (m_k-1, m_k] (step 1: from its start) */
			.backwards =
			    (uint32_t)(marks_upto(L->bwd, L->n_bwd, L->m[k]) -
				       marks_upto(L->bwd, L->n_bwd, k ? L->m[k - 1] : L->start)),
			.mark_ns = L->m[k],
			.wall_ns = k ? L->m[k] - L->m[k - 1] : 0,
			.start_ns = k ? L->b[k - 1] : L->start,
			.end_ns = L->b[k],
		};
	return 0;
}

/* Each step's phase_ns: the stepping thread's samples laid out on the
 * wall-clock axis (output/timeline.c: each sample holds the stretch of the
 * thread's time it stands for), so a step's phases add up to about its
 * time, not to the weights of the samples that fell in it.  st[0..n): one
 * process's steps, numbers 1..n; names: the phase label's strings. */
static int phase_split(const struct gs_profile *p, struct gs_step *st, size_t n,
		       const gs_str names[GS_NPHASES])
{
	struct gs_tl_item *items = NULL;
	uint32_t *idx;
	size_t n_idx;
	int rc = gs_timeline_order(p, NULL, &idx, &n_idx); /* its own lane */

	if (rc)
		return rc;
	for (size_t b = 0, e; b < n_idx; b = e) {
		const struct gs_sample_ctx *c0 = gs_profile_ctx(p, &p->samples[idx[b]]);

		e = gs_timeline_thread_end(p, NULL, idx, b, n_idx);
		if (c0->pid != st[0].pid || c0->tid != st[0].tid)
			continue;
		if (!(items = malloc((e - b) * sizeof(*items)))) {
			rc = -ENOMEM;
			break;
		}
		gs_timeline_layout(p, idx + b, e - b, items);
		for (size_t i = 0; i < e - b; i++) {
			const struct gs_sample_ctx *c =
			    gs_profile_ctx(p, &p->samples[items[i].sample]);
			int64_t k = c->num_labels[GS_NL_STEP];
			int ph = GS_PHASE_OTHER;

			if (c->cuda_device >= 0 || !(c->num_set & (1u << GS_NL_STEP)) || k < 1 ||
			    (uint64_t)k > n)
				continue;
			for (int j = 0; j < GS_NPHASES; j++)
				if (c->str_labels[GS_SL_PHASE] == names[j])
					ph = j;
			st[k - 1].phase_ns[ph] += items[i].end - items[i].start;
		}
		break;
	}
	free(items);
	free(idx);
	return rc;
}

int gs_profile_label_steps(struct gs_profile *p, uint32_t pid, uint32_t tid, const uint64_t *m,
			   size_t n, bool by_optimizer, const uint64_t *bwd, size_t n_bwd)
{
	struct labeller L = { .p = p,
			      .pid = pid,
			      .tid = tid,
			      .m = m,
			      .n = n,
			      .by_optimizer = by_optimizer,
			      .bwd = bwd,
			      .n_bwd = n_bwd };
	uint64_t median;
	int rc;

	if (!n)
		return 0;
	if (n >= 10 && m[n - 1] > m[0] &&
	    (double)(n - 1) * 1e9 / (double)(m[n - 1] - m[0]) > STEP_RATE_MAX)
		return gs_profile_add_note(
		    p,
		    "steps: pid %u called backward %.0f times per second (over "
		    "%d): an inner loop, not training steps; no step labels",
		    pid, (double)(n - 1) * 1e9 / (double)(m[n - 1] - m[0]), STEP_RATE_MAX);
	for (int i = 0; i < GS_NPHASES; i++)
		if ((L.names[i] = gs_profile_intern(p, gs_phase_name[i])) == (gs_str)-1)
			return -ENOMEM;
	if ((rc = median_wall(m, n, &median)))
		return rc;
	/* step 1 began about one step before its backward (or at the start) */
	L.start = n > 1 && m[0] > median ? m[0] - median : 0;
	L.phase = malloc(p->n_stacks ? p->n_stacks : 1);
	L.b = malloc(n * sizeof(*L.b));
	if (!L.phase || !L.b) {
		rc = -ENOMEM;
		goto out;
	}
	memset(L.phase, 0xff, p->n_stacks);
	boundaries(&L);
	if (!(rc = relabel(&L)) && !(rc = add_steps(&L)))
		rc = phase_split(p, p->steps + p->n_steps - n, n, L.names);
out:
	free(L.phase);
	free(L.b);
	return rc;
}
