/* SPDX-License-Identifier: MIT */
/*
 * CUDA driver double (libcuda.so.1) for GPU-less tests: the handful of
 * driver entry points a PyTorch-like program and the gpusample agent use.
 * Kernels "run" by asking the CUPTI double (when loaded and PC sampling is
 * on) to produce PC samples.  See fake_drv.h.
 */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fake_drv.h"

typedef int CUresult;
#define CUDA_SUCCESS               0
#define CUDA_ERROR_INVALID_VALUE   1
#define CUDA_ERROR_OUT_OF_MEMORY   2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_IMAGE   200
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_FOUND       500
#define CUDA_ERROR_INVALID_HANDLE  400

#define FAKE_SMS 132 /* SMs of each device: MULTIPROCESSOR_COUNT */

/* CUPTI resource / driver callback ids (cupti_callbacks.h, cupti_driver_cbid.h) */
#define CBID_CONTEXT_CREATED          1
#define CBID_CONTEXT_DESTROY_STARTING 2
#define CBID_MODULE_LOADED            6
#define CBID_MODULE_UNLOAD_STARTING   7
#define CBID_cuLaunchKernel           307

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct fake_cupti_hooks *hooks;
static int initialized, ndev = 1, arch[FAKE_MAX_DEVICES];
static uint32_t next_ctx_uid = 1, next_mod_id = 1;
static __thread struct fake_ctx *stack[16];
static struct fake_ctx *all_ctx[64]; /* every context made, for the teardown at exit */
static __thread int depth;

__attribute__((visibility("default"))) void fake_drv_set_hooks(const struct fake_cupti_hooks *h)
{
	hooks = h;
}

__attribute__((visibility("default"))) int fake_drv_device_arch(int device)
{
	return device >= 0 && device < ndev ? arch[device] : 0;
}

static struct fake_ctx *current(void)
{
	return depth ? stack[depth - 1] : NULL;
}

static int alive(struct fake_ctx *c)
{
	return c && c->magic == FAKE_CTX_MAGIC;
}

static unsigned green_refused;

__attribute__((visibility("default"))) unsigned fake_cuda_green_refused(void)
{
	return __atomic_load_n(&green_refused, __ATOMIC_SEQ_CST);
}

static int in_stack(const struct fake_ctx *c)
{
	for (int i = 0; i < depth; i++)
		if (stack[i] == c)
			return 1;
	return 0;
}

/* This thread takes c current: refused for a green context another thread
 * has current.  0 or CUDA_ERROR_INVALID_CONTEXT. */
static CUresult hold(struct fake_ctx *c)
{
	unsigned long self = (unsigned long)pthread_self();
	CUresult r = CUDA_SUCCESS;

	if (!c || !c->green)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	if (c->holder && c->holder != self) {
		__atomic_fetch_add(&green_refused, 1, __ATOMIC_SEQ_CST);
		fprintf(stderr, "fake_cuda: green context %u made current on a second thread\n",
			c->uid);
		r = CUDA_ERROR_INVALID_CONTEXT;
	} else {
		c->holder = self;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* c left this thread's stack: a green one is free for another thread. */
static void let_go(struct fake_ctx *c)
{
	if (!c || !c->green || in_stack(c))
		return;
	pthread_mutex_lock(&lock);
	if (c->holder == (unsigned long)pthread_self())
		c->holder = 0;
	pthread_mutex_unlock(&lock);
}

static void load_injection(void)
{
	const char *p = getenv("CUDA_INJECTION64_PATH");
	int (*init)(void);
	void *h;

	if (!p || !*p)
		return;
	h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "fake libcuda: cannot load injection %s: %s\n", p, dlerror());
		return;
	}
	*(void **)&init = dlsym(h, "InitializeInjection");
	if (init)
		init();
}

CUresult cuCtxDestroy_v2(struct fake_ctx *c);

/* FAKE_CUDA_EXIT_DESTROY=1: contexts the program left alive are destroyed
 * at process exit, after the exit handlers registered later (the agent's
 * among them) have run, as a runtime's exit handler or the driver's own
 * teardown does: CONTEXT_DESTROY_STARTING callbacks then reach a CUPTI
 * client that is already exiting. */
static void exit_destroy(void)
{
	for (int i = 0; i < 64; i++)
		if (all_ctx[i] && alive(all_ctx[i]))
			cuCtxDestroy_v2(all_ctx[i]);
}

CUresult cuInit(unsigned flags)
{
	const char *e;

	pthread_mutex_lock(&lock);
	if (initialized) {
		pthread_mutex_unlock(&lock);
		return CUDA_SUCCESS;
	}
	e = getenv("FAKE_CUDA_DEVICES");
	ndev = e ? atoi(e) : 1;
	if (ndev < 1 || ndev > FAKE_MAX_DEVICES)
		ndev = 1;
	e = getenv("FAKE_CUDA_ARCH");
	for (int i = 0; i < ndev; i++) {
		arch[i] = 90;
		if (e) {
			const char *p = e;
			for (int k = 0; k < i && p; k++)
				if ((p = strchr(p, ',')))
					p++;
			if (p && *p)
				arch[i] = atoi(p);
		}
	}
	initialized = 1;
	pthread_mutex_unlock(&lock);
	if ((e = getenv("FAKE_CUDA_EXIT_DESTROY")) && *e == '1')
		atexit(exit_destroy); /* before the agent's: runs after it */
	load_injection();             /* the real driver does this during cuInit */
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	*n = ndev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= ndev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case 13:
		*v = 1980000;
		return CUDA_SUCCESS; /* CLOCK_RATE, kHz */
	case 16:
		*v = FAKE_SMS;
		return CUDA_SUCCESS; /* MULTIPROCESSOR_COUNT */
	case 75:
		*v = arch[dev] / 10;
		return CUDA_SUCCESS; /* COMPUTE_CAPABILITY_MAJOR */
	case 76:
		*v = arch[dev] % 10;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static struct fake_ctx *new_ctx(int dev)
{
	struct fake_ctx *c = calloc(1, sizeof(*c));

	c->magic = FAKE_CTX_MAGIC;
	pthread_mutex_lock(&lock);
	c->uid = next_ctx_uid++;
	if (c->uid <= 64)
		all_ctx[c->uid - 1] = c;
	pthread_mutex_unlock(&lock);
	c->device = dev;
	c->arch = arch[dev];
	c->creator = (unsigned long)pthread_self();
	return c;
}

CUresult cuCtxCreate_v2(struct fake_ctx **out, unsigned flags, int dev)
{
	struct fake_ctx *c;

	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndev || !out)
		return CUDA_ERROR_INVALID_VALUE;
	c = new_ctx(dev);
	if (depth < 16)
		stack[depth++] = c;
	*out = c;
	if (hooks)
		hooks->resource(CBID_CONTEXT_CREATED, c, NULL);
	return CUDA_SUCCESS;
}

/* Primary contexts, the CUDA runtime's (PyTorch's): one per device,
 * reference-counted.  Retain creates it when inactive (CONTEXT_CREATED) and
 * does not make it current; the last Release destroys it (DESTROY_STARTING);
 * GetState says whether it is active.  primary_created counts creations. */
static struct fake_ctx *primary[FAKE_MAX_DEVICES];
static int primary_refs[FAKE_MAX_DEVICES];
static unsigned primary_created;

__attribute__((visibility("default"))) unsigned fake_cuda_primary_created(void)
{
	return primary_created;
}

CUresult cuDevicePrimaryCtxRetain(struct fake_ctx **out, int dev)
{
	struct fake_ctx *c = NULL;

	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndev || !out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!primary_refs[dev]++) {
		pthread_mutex_unlock(&lock);
		c = new_ctx(dev);
		pthread_mutex_lock(&lock);
		primary[dev] = c;
		primary_created++;
	}
	*out = primary[dev];
	pthread_mutex_unlock(&lock);
	if (c && hooks)
		hooks->resource(CBID_CONTEXT_CREATED, c, NULL);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
	struct fake_ctx *c = NULL;

	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!primary_refs[dev]) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!--primary_refs[dev]) {
		c = primary[dev];
		primary[dev] = NULL;
	}
	pthread_mutex_unlock(&lock);
	return c ? cuCtxDestroy_v2(c) : CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
	if (dev < 0 || dev >= ndev || !flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	*flags = 0;
	*active = primary_refs[dev] > 0;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Green contexts: the CUgreenCtx handle is the context itself, created
 * with half the device's SMs; desc is not read. */
CUresult cuGreenCtxCreate(struct fake_ctx **out, void *desc, int dev, unsigned flags)
{
	struct fake_ctx *c;

	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndev || !out || !(flags & 1)) /* CU_GREEN_CTX_DEFAULT_STREAM */
		return CUDA_ERROR_INVALID_VALUE;
	c = new_ctx(dev);
	c->green = 1;
	*out = c;
	if (hooks)
		hooks->resource(CBID_CONTEXT_CREATED, c, NULL);
	return CUDA_SUCCESS;
}

CUresult cuCtxFromGreenCtx(struct fake_ctx **out, struct fake_ctx *g)
{
	if (!alive(g) || !g->green || !out)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = g;
	return CUDA_SUCCESS;
}

CUresult cuGreenCtxDestroy(struct fake_ctx *g)
{
	if (!alive(g) || !g->green)
		return CUDA_ERROR_INVALID_HANDLE;
	return cuCtxDestroy_v2(g);
}

/* CUdevResource of CUDA 13.0's cuda.h: type, 92 bytes, then the SM
 * resource (smCount first). */
struct fake_dev_resource {
	int type;
	unsigned char pad[92];
	unsigned sm_count, min_partition, coscheduled;
};

static CUresult sm_resource(struct fake_dev_resource *r, int type, unsigned sms)
{
	if (!r || type != 1) /* CU_DEV_RESOURCE_TYPE_SM */
		return CUDA_ERROR_INVALID_VALUE;
	r->type = type;
	r->sm_count = sms;
	r->min_partition = 2;
	r->coscheduled = 2;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetDevResource(int dev, struct fake_dev_resource *r, int type)
{
	if (dev < 0 || dev >= ndev)
		return CUDA_ERROR_INVALID_VALUE;
	return sm_resource(r, type, FAKE_SMS);
}

CUresult cuCtxGetDevResource(struct fake_ctx *c, struct fake_dev_resource *r, int type)
{
	if (!alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	return sm_resource(r, type, c->green ? FAKE_SMS / 2 : FAKE_SMS);
}

CUresult cuCtxDestroy_v2(struct fake_ctx *c)
{
	if (!alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (hooks)
		hooks->resource(CBID_CONTEXT_DESTROY_STARTING, c, NULL);
	c->magic = 0; /* never freed: a stale handle stays readable */
	for (int i = 0; i < depth; i++)
		if (stack[i] == c)
			stack[i] = NULL;
	while (depth && !stack[depth - 1])
		depth--;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(struct fake_ctx *c)
{
	struct fake_ctx *old;

	if (c && !alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (hold(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!depth)
		depth = 1;
	old = stack[depth - 1];
	stack[depth - 1] = c;
	if (old != c)
		let_go(old);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(struct fake_ctx **c)
{
	*c = current();
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(struct fake_ctx *c)
{
	if (!alive(c) || depth >= 16 || hold(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	stack[depth++] = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(struct fake_ctx **c)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	depth--;
	if (c)
		*c = stack[depth];
	let_go(stack[depth]);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(int *dev)
{
	struct fake_ctx *c = current();

	if (!alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = c->device;
	return CUDA_SUCCESS;
}

/* "Wait for the GPU" in a synchronize call: FAKE_CUDA_SYNC_MS (default 0:
 * return at once) per call, spinning on the CPU (FAKE_CUDA_SYNC=spin, like
 * the real driver's default spin/yield) or blocked on a condition variable
 * (FAKE_CUDA_SYNC=block, the default, like cudaDeviceScheduleBlockingSync:
 * a futex wait in the kernel). */
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never;
static pthread_once_t never_once = PTHREAD_ONCE_INIT;

static void never_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&never, &a);
}

static void gpu_wait(void)
{
	const char *ms = getenv("FAKE_CUDA_SYNC_MS"), *how = getenv("FAKE_CUDA_SYNC");
	long ns = ms ? (long)(atof(ms) * 1e6) : 0;
	struct timespec end, now;

	if (ns <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (end.tv_nsec + ns) / 1000000000L;
	end.tv_nsec = (end.tv_nsec + ns) % 1000000000L;
	if (how && !strcmp(how, "spin")) {
		do
			clock_gettime(CLOCK_MONOTONIC, &now);
		while (now.tv_sec < end.tv_sec ||
		       (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
		return;
	}
	pthread_once(&never_once, never_init);
	pthread_mutex_lock(&wait_lock);
	while (pthread_cond_timedwait(&never, &wait_lock, &end) == 0)
		;
	pthread_mutex_unlock(&wait_lock);
}

/* This thread's last cuCtxSynchronize: which context, after how many of
 * its launches (fake_drv_idle). */
static __thread const struct fake_ctx *synced_ctx;
static __thread uint64_t synced_launches;

CUresult cuCtxSynchronize(void)
{
	struct fake_ctx *c = current();

	if (!alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	gpu_wait();
	synced_ctx = c;
	synced_launches = __atomic_load_n(&c->launches, __ATOMIC_SEQ_CST);
	return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) int fake_drv_idle(const struct fake_ctx *ctx)
{
	return ctx == synced_ctx && !__atomic_load_n(&ctx->running, __ATOMIC_SEQ_CST) &&
	       __atomic_load_n(&ctx->launches, __ATOMIC_SEQ_CST) == synced_launches;
}

CUresult cuStreamSynchronize(void *stream)
{
	if (!alive(current()))
		return CUDA_ERROR_INVALID_CONTEXT;
	gpu_wait();
	return CUDA_SUCCESS;
}

/* Size of an ELF64 image: the furthest byte any header or section covers. */
static size_t elf_size(const void *image)
{
	const Elf64_Ehdr *eh = image;
	const Elf64_Shdr *sh;
	size_t end;

	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return 0;
	end = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	sh = (const Elf64_Shdr *)((const char *)image + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > end)
			end = sh[i].sh_offset + sh[i].sh_size;
	if (eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize > end)
		end = eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
	return end;
}

/* Device memory: addresses only (nothing reads it), from a range no host
 * mapping uses, with the device's capacity (FAKE_CUDA_MEM_MB, default
 * 81,559 MB: an H100's) enforced: an allocation past it answers
 * CUDA_ERROR_OUT_OF_MEMORY, as the driver does.  Pinned host memory is
 * real host memory.  Handles of cuMemCreate are numbered from 1. */
#define FAKE_DEV_BASE 0x7f0000000000ull
struct fake_alloc {
	unsigned long long addr;
	size_t size;
	struct fake_alloc *next;
};
static struct fake_alloc *allocs; /* device allocations and physical handles, under lock */
static unsigned long long next_dev = FAKE_DEV_BASE, next_handle = 1;
static size_t dev_used;

static size_t dev_capacity(void)
{
	const char *e = getenv("FAKE_CUDA_MEM_MB");

	return (e ? strtoull(e, NULL, 0) : 81559ull) << 20;
}

/* Take size bytes of the device: the address (or handle) in *out. */
static CUresult dev_take(unsigned long long *out, size_t size, int handle)
{
	struct fake_alloc *a;
	CUresult rc = CUDA_SUCCESS;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!size)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (size > dev_capacity() - dev_used)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	else if (!(a = malloc(sizeof(*a))))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		a->addr = handle ? next_handle++ : next_dev;
		if (!handle)
			next_dev += (size + 0xfffff) &
				    ~0xfffffull; /* 1 MiB aligned, never reused */
		a->size = size;
		a->next = allocs;
		allocs = a;
		dev_used += size;
		*out = a->addr;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult dev_give(unsigned long long addr)
{
	struct fake_alloc **p, *a;

	pthread_mutex_lock(&lock);
	for (p = &allocs; *p && (*p)->addr != addr; p = &(*p)->next)
		;
	a = *p;
	if (a) {
		*p = a->next;
		dev_used -= a->size;
	}
	pthread_mutex_unlock(&lock);
	free(a);
	return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(unsigned long long *p, size_t n)
{
	return dev_take(p, n, 0);
}

CUresult cuMemAllocPitch_v2(unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned elem)
{
	size_t pw = (w + 511) & ~(size_t)511;

	if (!pitch || !elem)
		return CUDA_ERROR_INVALID_VALUE;
	*pitch = pw;
	return dev_take(p, pw * h, 0);
}

CUresult cuMemAllocManaged(unsigned long long *p, size_t n, unsigned flags)
{
	return dev_take(p, n, 0);
}

CUresult cuMemAllocAsync(unsigned long long *p, size_t n, void *stream)
{
	return dev_take(p, n, 0);
}

CUresult cuMemAllocFromPoolAsync(unsigned long long *p, size_t n, void *pool, void *stream)
{
	return dev_take(p, n, 0);
}

CUresult cuMemCreate(unsigned long long *handle, size_t n, const void *prop,
		     unsigned long long flags)
{
	return dev_take(handle, n, 1);
}

CUresult cuMemRelease(unsigned long long handle)
{
	return dev_give(handle);
}

CUresult cuMemMap(unsigned long long ptr, size_t n, size_t offset, unsigned long long handle,
		  unsigned long long flags)
{
	return ptr && n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(unsigned long long ptr, size_t n)
{
	return ptr && n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemFreeAsync(unsigned long long p, void *stream)
{
	return dev_give(p);
}

CUresult cuMemAllocHost_v2(void **p, size_t n)
{
	if (!p || !(*p = calloc(1, n ? n : 1)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	return cuMemAllocHost_v2(p, n);
}

CUresult cuMemFreeHost(void *p)
{
	free(p);
	return CUDA_SUCCESS;
}

/* FAKE_CUDA_FREE_MB of the device's 81,559 MB (an H100's) are free
 * (default 80,000). */
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
	const char *e = getenv("FAKE_CUDA_FREE_MB");
	size_t total = 81559ull << 20, free_mb = e ? strtoull(e, NULL, 0) : 80000;

	if (!alive(current()))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!free_b || !total_b)
		return CUDA_ERROR_INVALID_VALUE;
	*total_b = total;
	*free_b = (free_mb << 20) < total ? free_mb << 20 : total;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(unsigned long long p)
{
	return dev_give(p);
}

CUresult cuModuleLoadData(struct fake_module **out, const void *image)
{
	struct fake_ctx *c = current();
	struct fake_module *m;
	size_t size;

	if (!alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!image || !(size = elf_size(image)))
		return CUDA_ERROR_INVALID_IMAGE;
	m = calloc(1, sizeof(*m));
	m->ctx = c;
	m->image = malloc(size);
	memcpy(m->image, image, size);
	m->size = size;
	pthread_mutex_lock(&lock);
	m->id = next_mod_id++;
	pthread_mutex_unlock(&lock);
	*out = m;
	if (hooks)
		hooks->resource(CBID_MODULE_LOADED, c, m);
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(struct fake_module *m)
{
	if (!m || !alive(m->ctx))
		return CUDA_ERROR_INVALID_HANDLE;
	if (hooks)
		hooks->resource(CBID_MODULE_UNLOAD_STARTING, m->ctx, m);
	return CUDA_SUCCESS; /* kept: functions may still be referenced by stale handles */
}

CUresult cuModuleGetFunction(struct fake_func **out, struct fake_module *m, const char *name)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;

	if (!m || !name)
		return CUDA_ERROR_INVALID_VALUE;
	eh = m->image;
	sh = (const Elf64_Shdr *)((const char *)m->image + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		const Elf64_Sym *sym = (const void *)((const char *)m->image + sh[i].sh_offset);
		const char *str = (const char *)m->image + sh[sh[i].sh_link].sh_offset;
		size_t n = sh[i].sh_size / sizeof(*sym);
		for (size_t k = 0; k < n; k++) {
			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
			    strcmp(str + sym[k].st_name, name))
				continue;
			struct fake_func *f = calloc(1, sizeof(*f));
			f->mod = m;
			snprintf(f->name, sizeof(f->name), "%s", name);
			f->index = k;
			f->size = sym[k].st_size ? sym[k].st_size : 16;
			*out = f;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuLaunchKernel(struct fake_func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			unsigned by, unsigned bz, unsigned shmem, void *stream, void **params,
			void **extra)
{
	struct fake_ctx *c = current();

	if (!f || !alive(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (f->mod->ctx != c)
		return CUDA_ERROR_INVALID_HANDLE;
	if (hooks)
		return hooks->launch(CBID_cuLaunchKernel, "cuLaunchKernel", c, f);
	return CUDA_SUCCESS;
}
