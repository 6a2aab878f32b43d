/* SPDX-License-Identifier: MIT */
/*
 * Thread roles from symbolized frames: which thread of a PyTorch job is the
 * training loop, a DataLoader worker, the pin-memory thread, a
 * multiprocessing queue feeder, an autograd device thread, an intra-op pool
 * worker or a collective (gloo / NCCL / c10d) thread.  Roles are per thread,
 * decided by the thread's entry: the root-most matching frame of each
 * sample, so a main thread that calls into OpenMP is still the main thread
 * and an OpenMP worker that runs a convolution is still a pool worker.
 * One table; everything else here is bookkeeping.  The votes are kept on
 * the thread entries of the process table (proc/proc.h, struct gs_thread).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "native/native.h"
#include "symbolizer/symbolizer.h"
#include "util/vec.h"

const char *const gs_thread_role_name[GS_NTHREAD_ROLES] = {
	[GS_TR_OTHER] = "other",
	[GS_TR_MAIN] = "main",
	[GS_TR_DATALOADER_WORKER] = "dataloader_worker",
	[GS_TR_PIN_MEMORY] = "pin_memory",
	[GS_TR_QUEUE_FEEDER] = "queue_feeder",
	[GS_TR_AUTOGRAD] = "autograd_engine",
	[GS_TR_INTRA_OP] = "intra_op_pool",
	[GS_TR_COLLECTIVE] = "collective",
};

enum match { M_PY, M_NATIVE, M_OBJECT, M_COMM };

/* M_PY: the qualname's last component equals name and the file contains
 * file.  M_NATIVE: the (demangled) function name contains name.  M_OBJECT:
 * a native frame in an object whose file name starts with name (pools
 * shipped stripped).  M_COMM: the thread name starts with name (used only
 * when no frame matches). */
static const struct role_row {
	uint8_t role, match;
	const char *name, *file;
} role_table[] = {
	/* torch.utils.data: worker process loop, pin-memory thread */
	{ GS_TR_DATALOADER_WORKER, M_PY, "_worker_loop", "torch/utils/data/" },
	{ GS_TR_PIN_MEMORY, M_PY, "_pin_memory_loop", "torch/utils/data/" },
	/* multiprocessing.Queue's feeder thread (Queue._feed) */
	{ GS_TR_QUEUE_FEEDER, M_PY, "_feed", "multiprocessing/queues.py" },
	/* autograd device threads (CPU-only backward runs on the caller) */
	{ GS_TR_AUTOGRAD, M_NATIVE, "torch::autograd::Engine::thread_init", NULL },
	{ GS_TR_AUTOGRAD, M_NATIVE, "torch::autograd::python::PythonEngine::thread_init", NULL },
	/* intra-op pools: libgomp, LLVM/Intel OpenMP, TBB, at::parallel's own */
	{ GS_TR_INTRA_OP, M_NATIVE, "gomp_thread_start", NULL },
	{ GS_TR_INTRA_OP, M_NATIVE, "__kmp_launch_worker", NULL },
	{ GS_TR_INTRA_OP, M_NATIVE, "tbb::detail::r1::", NULL },
	{ GS_TR_INTRA_OP, M_NATIVE, "tbb::internal::", NULL },
	{ GS_TR_INTRA_OP, M_NATIVE, "c10::ThreadPool::main_loop", NULL },
	{ GS_TR_INTRA_OP, M_OBJECT, "libgomp", NULL },
	{ GS_TR_INTRA_OP, M_OBJECT, "libiomp", NULL },
	{ GS_TR_INTRA_OP, M_OBJECT, "libtbb", NULL },
	{ GS_TR_INTRA_OP, M_OBJECT, "libpthreadpool", NULL }, /* XNNPACK/QNNPACK pool */
	/* collectives: ProcessGroup worker loops, gloo transport, NCCL */
	{ GS_TR_COLLECTIVE, M_NATIVE, "c10d::", NULL },
	{ GS_TR_COLLECTIVE, M_NATIVE, "gloo::", NULL },
	{ GS_TR_COLLECTIVE, M_NATIVE, "ncclProxy", NULL },
	{ GS_TR_COLLECTIVE, M_NATIVE, "ncclAsyncJobMain", NULL },
	{ GS_TR_COLLECTIVE, M_OBJECT, "libnccl", NULL },
	/* names torch >= 2 gives its threads (2.14: torch/utils/data's
	 * pt_data_worker and pt_data_pin, c10::setThreadName's pt_autograd_N,
	 * pt_dist_engine (distributed autograd) and pt_gloo_runloop (gloo's
	 * ProcessGroup thread, whose frames in a stripped libtorch_cpu have no
	 * names)) */
	{ GS_TR_AUTOGRAD, M_COMM, "pt_autograd", NULL },
	{ GS_TR_AUTOGRAD, M_COMM, "pt_dist_engine", NULL },
	{ GS_TR_DATALOADER_WORKER, M_COMM, "pt_data_worker", NULL },
	{ GS_TR_DATALOADER_WORKER, M_COMM, "pt_multiprocess", NULL },
	{ GS_TR_PIN_MEMORY, M_COMM, "pt_data_pin", NULL },
	{ GS_TR_COLLECTIVE, M_COMM, "pt_gloo_runloop", NULL },
};
#define N_ROWS (sizeof(role_table) / sizeof(role_table[0]))

static bool row_matches(const struct role_row *r, uint8_t kind, const char *name, const char *file)
{
	const char *dot;

	switch (r->match) {
	case M_PY:
		if (kind != GS_FRAME_PYTHON)
			return false;
		dot = strrchr(name, '.');
		return !strcmp(dot ? dot + 1 : name, r->name) && strstr(file, r->file);
	case M_NATIVE:
		return kind == GS_FRAME_NATIVE && strstr(name, r->name);
	default:
		return false;
	}
}

/* Role + 1 of a function seen in a frame of kind (0 = none). */
static uint8_t function_role(const struct gs_profile *p, uint32_t fn, uint8_t kind)
{
	const struct gs_function *f = gs_profile_function(p, fn);
	const char *name = gs_profile_str(p, f->name), *file = gs_profile_str(p, f->file);

	for (size_t i = 0; i < N_ROWS; i++)
		if (row_matches(&role_table[i], kind, name, file))
			return (uint8_t)(role_table[i].role + 1);
	return 0;
}

/* Role + 1 of the first row of kind m whose name starts s (0 = none). */
static uint8_t prefix_role(enum match m, const char *s)
{
	for (size_t i = 0; i < N_ROWS; i++)
		if (role_table[i].match == m &&
		    !strncmp(s, role_table[i].name, strlen(role_table[i].name)))
			return (uint8_t)(role_table[i].role + 1);
	return 0;
}

/* Role + 1 of a native location's object (0 = none). */
static uint8_t object_role(const struct gs_profile *p, const struct gs_location *l)
{
	const char *file, *slash;

	if (l->kind != GS_FRAME_NATIVE || !l->mapping)
		return 0;
	file = gs_profile_str(p, p->mappings[l->mapping - 1].file);
	slash = strrchr(file, '/');
	return prefix_role(M_OBJECT, slash ? slash + 1 : file);
}

/* v's caches cover p's functions and stacks (new ones: not yet known). */
static int cover(uint8_t **arr, size_t *n, size_t need)
{
	size_t had = *n;

	if (gs_grow_from((void **)arr, n, need, 1, 4096))
		return -ENOMEM;
	memset(*arr + had, 0xff, *n - had);
	return 0;
}

/* Role + 1 of a stack: its root-most matching frame (0 = none).  v->fn_role
 * caches function_role. */
static uint8_t stack_role(struct gs_thread_voter *v, const struct gs_profile *p, uint32_t st)
{
	const struct gs_stack *s = &p->stacks[st];

	for (uint32_t k = s->n; k-- > 0;) {
		const struct gs_location *l = gs_profile_location(p, p->stack_locs[s->first + k]);
		uint8_t obj = object_role(p, l);

		if (obj)
			return obj;

		for (uint32_t j = 0; j < l->n_lines; j++) {
			uint32_t fn = p->lines[l->first_line + j].function;

			if (v->fn_role[fn] == 0xff)
				v->fn_role[fn] = function_role(p, fn, l->kind);
			if (v->fn_role[fn])
				return v->fn_role[fn];
		}
	}
	return 0;
}

_Static_assert(GS_NTHREAD_ROLES == GS_THREAD_NVOTES, "struct gs_thread votes per role");

int gs_thread_role_vote(struct gs_thread_voter *v, const struct gs_profile *p, struct gs_thread *th,
			uint32_t stack, gs_str thread_name)
{
	uint8_t r;

	if (cover(&v->fn_role, &v->n_fn, (size_t)p->n_functions + 1) ||
	    cover(&v->st_role, &v->n_st, (size_t)p->n_stacks + 1))
		return -ENOMEM;
	if (v->st_role[stack] == 0xff)
		v->st_role[stack] = stack_role(v, p, stack);
	r = v->st_role[stack];
	th->role_votes[r ? r - 1 : GS_TR_OTHER]++;
	th->vote_comm = thread_name;
	return 0;
}

void gs_thread_voter_free(struct gs_thread_voter *v)
{
	free(v->fn_role);
	free(v->st_role);
	*v = (struct gs_thread_voter){ 0 };
}

static uint8_t comm_role(const struct gs_profile *p, gs_str comm)
{
	uint8_t r = prefix_role(M_COMM, gs_profile_str(p, comm));

	return r ? r - 1 : GS_TR_OTHER;
}

enum gs_thread_role gs_thread_role_decide(const struct gs_profile *p, const struct gs_thread *th)
{
	uint32_t best = GS_TR_OTHER;

	if (th->role_votes[GS_TR_DATALOADER_WORKER])
		return GS_TR_DATALOADER_WORKER;
	if (th->tid == th->tgid)
		return GS_TR_MAIN;
	for (uint32_t r = 1; r < GS_NTHREAD_ROLES; r++)
		if (th->role_votes[r] > th->role_votes[best])
			best = r;
	return best != GS_TR_OTHER ? best : comm_role(p, th->vote_comm);
}

static bool is_thread_sample(const struct gs_sample *s, const struct gs_sample_ctx *c, void *arg)
{
	return c->cuda_device < 0 && c->tid;
}

struct role_arg {
	const struct gs_profile *p;
	const struct gs_proc_table *t;
	gs_str names[GS_NTHREAD_ROLES];
};

/* Once per distinct context: the role its thread's entry decides (a thread
 * whose samples were never counted has no votes: its tid and name say). */
static void label_role(struct gs_sample_ctx *c, void *arg)
{
	struct role_arg *a = arg;
	const struct gs_thread *th = gs_thread_find(a->t, c->pid, c->tid);
	const struct gs_thread none = { .tgid = c->pid,
					.tid = c->tid,
					.vote_comm = c->thread_name };

	c->str_labels[GS_SL_THREAD_ROLE] = a->names[gs_thread_role_decide(a->p, th ? th : &none)];
}

int gs_thread_roles_apply(struct gs_profile *p, const struct gs_proc_table *t)
{
	struct role_arg a = { p, t, { 0 } };

	for (uint32_t r = 0; r < GS_NTHREAD_ROLES; r++)
		if ((a.names[r] = gs_profile_intern(p, gs_thread_role_name[r])) == (gs_str)-1)
			return -ENOMEM;
	return gs_profile_edit_ctx(p, is_thread_sample, label_role, &a);
}

int gs_thread_roles(struct gs_profile *p)
{
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_thread_voter v = { 0 };
	int rc = t ? 0 : -ENOMEM;

	for (size_t i = 0; !rc && i < p->n_samples; i++) {
		const struct gs_sample *s = &p->samples[i];
		const struct gs_sample_ctx *c = gs_profile_ctx(p, s);
		struct gs_thread *th;

		if (!is_thread_sample(s, c, NULL))
			continue;
		if (!(th = gs_thread_get(t, c->pid, c->tid)))
			rc = -ENOMEM;
		else
			rc = gs_thread_role_vote(&v, p, th, s->stack, c->thread_name);
	}
	if (!rc)
		rc = gs_thread_roles_apply(p, t);
	gs_thread_voter_free(&v);
	gs_proc_table_free(t);
	return rc;
}
