// SPDX-License-Identifier: MIT
/*
 * Wall-clock classification: the one table that says where a sample's wall
 * time went (API and category meanings in output.h).
 *
 * A sample's category comes from its thread_state label and its frames:
 *   1. thread_state "runnable"                      -> CPU starvation
 *   2. else the highest-priority frame class found on any frame of the
 *      stack, priority GIL > collective > CUDA sync > input > sleep
 *      (a GIL wait is what the thread literally does, whatever called it; a
 *      collective may synchronize a stream; an .item() inside a collate_fn
 *      is a host sync; a time.sleep inside a Dataset is input wait); a
 *      collective's frames count only outside an import (importing
 *      torch.distributed runs its module code: no collective is waited for)
 *   3. else "blocked" (or off-CPU time without a label) -> other blocking
 *   4. else                                          -> compute
 * Spinning on the CPU inside a synchronize or a collective counts as that
 * wait, not compute: the frames decide, not the thread state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "output/output.h"
#include "util/hashmap.h"

const char *const gs_wall_cat_name[GS_NWALL_CATS] = {
	[GS_WALL_COMPUTE] = "compute",     [GS_WALL_INPUT] = "input wait",
	[GS_WALL_CUDA_SYNC] = "CUDA sync", [GS_WALL_COLLECTIVE] = "collective wait",
	[GS_WALL_GIL] = "GIL wait",        [GS_WALL_STARVED] = "CPU starvation",
	[GS_WALL_SLEEP] = "sleep",         [GS_WALL_OTHER_BLOCKED] = "other blocking",
};

/* Frame classes, in increasing priority (0 = none). */
enum fcls { F_NONE = 0, F_SLEEP, F_INPUT, F_SYNC, F_COLL, F_GIL, F_N };
static const enum gs_wall_cat fcls_cat[F_N] = {
	[F_NONE] = GS_WALL_COMPUTE,   [F_SLEEP] = GS_WALL_SLEEP,     [F_INPUT] = GS_WALL_INPUT,
	[F_SYNC] = GS_WALL_CUDA_SYNC, [F_COLL] = GS_WALL_COLLECTIVE, [F_GIL] = GS_WALL_GIL,
};

enum { K_PY = 1, K_NATIVE = 2, K_KERNEL = 4 };
enum match {
	M_BASE,   /* name without namespaces/classes/parameters equals pat */
	M_PREFIX, /* short C++ name (or the name) starts with pat */
	M_SUB,    /* short name contains pat */
	M_FILE,   /* any function whose source file contains file */
};

struct rule {
	enum fcls cls;
	enum match how;
	const char *pat;  /* NULL for M_FILE */
	const char *file; /* source file must contain this (NULL = any) */
	uint8_t kinds;
};

/* THE table.  Python frames are matched by qualname's last part and file;
 * native ones by symbol (C++ names without parameters). */
static const struct rule rules[] = {
	/* GIL: CPython's take_gil and the exported entry points that call it
	 * (take_gil is static, so stripped interpreters show only these) */
	{ F_GIL, M_BASE, "take_gil", NULL, K_NATIVE },
	{ F_GIL, M_BASE, "PyEval_RestoreThread", NULL, K_NATIVE },
	{ F_GIL, M_BASE, "PyEval_AcquireThread", NULL, K_NATIVE },
	{ F_GIL, M_BASE, "PyEval_AcquireLock", NULL, K_NATIVE },
	{ F_GIL, M_BASE, "PyGILState_Ensure", NULL, K_NATIVE },
	/* collectives: torch.distributed (Python), c10d (ProcessGroup*,
	 * Work::wait, DDP's Reducer), gloo, NCCL */
	{ F_COLL, M_FILE, NULL, "torch/distributed/distributed_c10d.py", K_PY },
	{ F_COLL, M_BASE, "barrier", "torch/distributed/", K_PY },
	{ F_COLL, M_PREFIX, "c10d::", NULL, K_NATIVE },
	{ F_COLL, M_PREFIX, "gloo::", NULL, K_NATIVE },
	{ F_COLL, M_PREFIX, "nccl", NULL, K_NATIVE },
	{ F_COLL, M_PREFIX, "pncclAllReduce", NULL, K_NATIVE },
	/* host waits for the GPU, spinning or blocked */
	{ F_SYNC, M_BASE, "synchronize", "torch/cuda", K_PY }, /* torch.cuda.synchronize() */
	{ F_SYNC, M_BASE, "cudaStreamSynchronize", NULL, K_NATIVE },
	{ F_SYNC, M_BASE, "cudaDeviceSynchronize", NULL, K_NATIVE },
	{ F_SYNC, M_BASE, "cudaEventSynchronize", NULL, K_NATIVE },
	{ F_SYNC, M_BASE, "cudaMemcpy", NULL, K_NATIVE }, /* synchronous copy (D2H in practice) */
	{ F_SYNC, M_PREFIX, "cuStreamSynchronize", NULL, K_NATIVE }, /* and _ptsz */
	{ F_SYNC, M_PREFIX, "cuCtxSynchronize", NULL, K_NATIVE },
	{ F_SYNC, M_PREFIX, "cuEventSynchronize", NULL, K_NATIVE },
	{ F_SYNC, M_PREFIX, "cuMemcpyDtoH", NULL, K_NATIVE }, /* and _v2 */
	{ F_SYNC, M_PREFIX, "c10::cuda::stream_synchronize", NULL, K_NATIVE },
	/* Tensor.item() and Tensor.cpu() of a CUDA tensor: what they run on
	 * the CUDA side (on a CPU tensor they are compute:
	 * _local_scalar_dense_cpu, no sync) */
	{ F_SYNC, M_SUB, "_local_scalar_dense_cuda", NULL, K_NATIVE },
	{ F_SYNC, M_PREFIX, "c10::cuda::memcpy_and_sync", NULL, K_NATIVE },
	{ F_SYNC, M_BASE, "copy_kernel_cuda", NULL, K_NATIVE }, /* blocking copies */
	/* the DataLoader iterator, waiting for or making a batch */
	{ F_INPUT, M_BASE, "__next__", "utils/data/", K_PY },
	{ F_INPUT, M_BASE, "_next_data", "utils/data/", K_PY },
	{ F_INPUT, M_BASE, "_get_data", "utils/data/", K_PY },
	{ F_INPUT, M_BASE, "_try_get_data", "utils/data/", K_PY },
	/* sleeping: time.sleep (CPython's time_sleep/pysleep), libc, kernel */
	{ F_SLEEP, M_BASE, "time_sleep", NULL, K_NATIVE },
	{ F_SLEEP, M_BASE, "pysleep", NULL, K_NATIVE },
	/* time.sleep is a builtin without a Python frame, and stripped
	 * interpreters hide time_sleep: libc's and the kernel's nanosleep
	 * family (clock_nanosleep, __x64_sys_clock_nanosleep, do_nanosleep) */
	{ F_SLEEP, M_SUB, "nanosleep", NULL, K_NATIVE | K_KERNEL },
	{ F_SLEEP, M_BASE, "usleep", NULL, K_NATIVE },
};

/* Name without namespaces/classes and parameters. */
static const char *base_name(const char *shortname)
{
	const char *c = strrchr(shortname, ':');
	const char *d = strrchr(shortname, '.');
	if (d && (!c || d > c))
		c = d;
	return c ? c + 1 : shortname;
}

static uint8_t kind_bit(uint8_t frame_kind)
{
	if (frame_kind == GS_FRAME_PYTHON)
		return K_PY;
	return frame_kind == GS_FRAME_KERNEL ? K_KERNEL : K_NATIVE;
}

static bool rule_matches(const struct rule *r, const char *shortname, const char *file,
			 uint8_t kind)
{
	if (!(r->kinds & kind) || (r->file && !strstr(file, r->file)))
		return false;
	switch (r->how) {
	case M_BASE:
		return !strcmp(base_name(shortname), r->pat);
	case M_PREFIX:
		return !strncmp(shortname, r->pat, strlen(r->pat));
	case M_SUB:
		return strstr(shortname, r->pat) != NULL;
	case M_FILE:
		return true;
	}
	return false;
}

/* Class of one function seen in a frame of kind frame_kind. */
static enum fcls function_class(const struct gs_profile *p, uint32_t fn, uint8_t frame_kind)
{
	const struct gs_function *f = gs_profile_function(p, fn);
	const char *name = gs_profile_str(p, f->name), *file = gs_profile_str(p, f->file);
	uint8_t k = kind_bit(frame_kind);
	char buf[512];
	const char *shortname = k == K_PY ? name : gs_short_cxx_name(name, buf, sizeof(buf));
	enum fcls best = F_NONE;

	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (rules[i].cls > best && rule_matches(&rules[i], shortname, file, k))
			best = rules[i].cls;
	return best;
}

/* An import in progress: importlib's _find_and_load, the frame every
 * `import` runs under (frozen importlib._bootstrap). */
#define F_IMPORT 0x80 /* flag beside the class in fcache */
static bool is_import_frame(const struct gs_profile *p, uint32_t fn, uint8_t frame_kind)
{
	const struct gs_function *f = gs_profile_function(p, fn);

	return frame_kind == GS_FRAME_PYTHON &&
	       !strcmp(gs_profile_str(p, f->name), "_find_and_load") &&
	       strstr(gs_profile_str(p, f->file), "importlib._bootstrap");
}

/* Class and import flag of function fn; fcache (per function, 0xff = not
 * yet computed) may be NULL. */
static uint8_t frame_bits(const struct gs_profile *p, uint32_t fn, uint8_t kind, uint8_t *fcache)
{
	uint8_t b;

	if (fcache && fcache[fn] != 0xff)
		return fcache[fn];
	b = (uint8_t)function_class(p, fn, kind) | (is_import_frame(p, fn, kind) ? F_IMPORT : 0);
	if (fcache)
		fcache[fn] = b;
	return b;
}

/* Highest class over the frames of stack st.  A collective's frames below
 * an import (leafward of _find_and_load) are the import of
 * torch.distributed running its module code, not a collective call. */
static enum fcls stack_class(const struct gs_profile *p, uint32_t st, uint8_t *fcache)
{
	const struct gs_stack *s = &p->stacks[st];
	enum fcls best = F_NONE;
	bool coll = false;

	for (uint32_t i = 0; i < s->n; i++) {
		const struct gs_location *l = gs_profile_location(p, p->stack_locs[s->first + i]);
		for (uint32_t k = 0; k < l->n_lines; k++) {
			uint32_t fn = p->lines[l->first_line + k].function;
			if (!fn || fn > p->n_functions)
				continue;
			uint8_t b = frame_bits(p, fn, l->kind, fcache);
			enum fcls c = (enum fcls)(b & ~F_IMPORT);

			if (b & F_IMPORT)
				coll = false;
			if (c == F_COLL)
				coll = true;
			else if (c > best)
				best = c;
		}
	}
	return coll && F_COLL > best ? F_COLL : best;
}

static bool stack_has_python(const struct gs_profile *p, uint32_t st)
{
	const struct gs_stack *s = &p->stacks[st];

	for (uint32_t i = 0; i < s->n; i++)
		if (gs_profile_location(p, p->stack_locs[s->first + i])->kind == GS_FRAME_PYTHON)
			return true;
	return false;
}

static bool state_is(const struct gs_profile *p, const struct gs_sample *s, const char *state)
{
	gs_str st = gs_profile_ctx(p, s)->str_labels[GS_SL_THREAD_STATE];
	return st && !strcmp(gs_profile_str(p, st), state);
}

static enum gs_wall_cat category(const struct gs_profile *p, const struct gs_sample *s,
				 enum fcls fc)
{
	if (state_is(p, s, "runnable"))
		return GS_WALL_STARVED;
	if (fc != F_NONE)
		return fcls_cat[fc];
	if (state_is(p, s, "blocked") || (!gs_profile_ctx(p, s)->str_labels[GS_SL_THREAD_STATE] &&
					  s->values[GS_V_OFFCPU_NS] > 0))
		return GS_WALL_OTHER_BLOCKED;
	return GS_WALL_COMPUTE;
}

int gs_wall_frame_cat(const struct gs_profile *p, uint32_t fn, uint8_t frame_kind)
{
	if (!fn || fn > p->n_functions)
		return -1;
	enum fcls c = function_class(p, fn, frame_kind);
	return c == F_NONE ? -1 : (int)fcls_cat[c];
}

int gs_wall_classify(const struct gs_profile *p, const struct gs_sample *s)
{
	if (gs_profile_ctx(p, s)->cuda_device >= 0 || s->stack >= p->n_stacks)
		return -EINVAL;
	return (int)category(p, s, stack_class(p, s->stack, NULL));
}

int64_t gs_wall_ns(const struct gs_profile *p, const struct gs_sample *s)
{
	int64_t cpu = s->values[GS_V_CPU_NS];
	if (!cpu)
		cpu = s->values[GS_V_SAMPLES] * (p->period_ns > 0 ? p->period_ns : 0);
	int64_t w = s->values[GS_V_WALL_NS];
	return w > cpu + s->values[GS_V_OFFCPU_NS] ? w : cpu + s->values[GS_V_OFFCPU_NS];
}

/* Insert (st, ns) into category c's top GS_WALL_TOP (most ns first, then
 * the lower stack index, so the order does not depend on hashing). */
static void top_keep(struct gs_wall_split *out, uint32_t c, uint32_t st, uint64_t ns)
{
	uint32_t *sv = out->top_stacks[c];
	uint64_t *nv = out->top_ns[c];
	int i = GS_WALL_TOP;
	while (i > 0 &&
	       (sv[i - 1] == UINT32_MAX || ns > nv[i - 1] || (ns == nv[i - 1] && st < sv[i - 1])))
		i--;
	if (i == GS_WALL_TOP)
		return;
	memmove(&sv[i + 1], &sv[i], (GS_WALL_TOP - 1 - (size_t)i) * sizeof(*sv));
	memmove(&nv[i + 1], &nv[i], (GS_WALL_TOP - 1 - (size_t)i) * sizeof(*nv));
	sv[i] = st;
	nv[i] = ns;
}

int gs_wall_split(const struct gs_profile *p, gs_ctx_pick_fn keep, void *ctx,
		  struct gs_wall_split *out)
{
	memset(out, 0, sizeof(*out));
	memset(out->top_stack, 0xff, sizeof(out->top_stack));
	memset(out->top_stacks, 0xff, sizeof(out->top_stacks));
	uint8_t *fcache = malloc(p->n_functions + 1);
	uint8_t *scache = malloc(p->n_stacks + 1);
	uint8_t *pcache = calloc(p->n_stacks + 1, 1); /* 2: known, | 1: has Python */
	struct gs_hmap top = { 0 };                   /* cat << 32 | stack -> ns */
	int rc = 0;
	if (!fcache || !scache || !pcache) {
		rc = -ENOMEM;
		goto out;
	}
	memset(fcache, 0xff, p->n_functions + 1);
	memset(scache, 0xff, p->n_stacks + 1);
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *sc = gs_profile_ctx(p, s);
		if (sc->cuda_device >= 0 || s->stack >= p->n_stacks || (keep && !keep(s, sc, ctx)))
			continue;
		int64_t ns = gs_wall_ns(p, s);
		if (ns <= 0)
			continue;
		if (scache[s->stack] == 0xff)
			scache[s->stack] = (uint8_t)stack_class(p, s->stack, fcache);
		if (!(pcache[s->stack] & 2))
			pcache[s->stack] = 2 | stack_has_python(p, s->stack);
		if (pcache[s->stack] & 1)
			out->python_ns += (uint64_t)ns;
		enum gs_wall_cat c = category(p, s, (enum fcls)scache[s->stack]);
		if (c == GS_WALL_STARVED)
			out->starved_in[fcls_cat[scache[s->stack]]] += (uint64_t)ns;
		out->ns[c] += (uint64_t)ns;
		out->total_ns += (uint64_t)ns;
		uint64_t *acc = gs_hmap_slot(&top, (uint64_t)c << 32 | s->stack, NULL);
		if (!acc) {
			rc = -ENOMEM;
			goto out;
		}
		*acc += (uint64_t)ns;
	}
	uint64_t key, acc;
	for (size_t it = 0; gs_hmap_next(&top, &it, &key, &acc);)
		top_keep(out, (uint32_t)(key >> 32), (uint32_t)key, acc);
	for (int c = 0; c < GS_NWALL_CATS; c++)
		out->top_stack[c] = out->top_stacks[c][0];
out:
	free(pcache);
	free(fcache);
	free(scache);
	gs_hmap_free(&top);
	return rc;
}
