/* SPDX-License-Identifier: MIT */
/*
 * Shared between the CUDA driver double (fake_cuda.c -> libcuda.so.1) and
 * the CUPTI double (fake_cupti.c -> libcupti.so.13).  The driver owns
 * devices, contexts, modules and functions; CUPTI registers hooks so that
 * the driver reports resource events and launches to it, as the real driver
 * does for the real CUPTI.
 *
 * Environment read by the driver double:
 *   FAKE_CUDA_DEVICES   number of devices (default 1, max 8)
 *   FAKE_CUDA_ARCH      comma list of SM versions per device (default 90);
 *                       the CUPTI double serves a different stall-reason
 *                       table for 90 and for anything else
 *   FAKE_CUDA_FREE_MB   free device memory cuMemGetInfo reports (default 80000)
 *   Green contexts (cuGreenCtxCreate, cuCtxFromGreenCtx: the same handle)
 *   have half the device's SMs (cuCtxGetDevResource); making one current
 *   on a thread while another has it current (in its context stack) is
 *   refused with CUDA_ERROR_INVALID_CONTEXT and counted
 *   (fake_cuda_green_refused), since "a green context can be current to
 *   only one thread at a time" (cuda.h, cuGreenCtxCreate).
 *   FAKE_CUDA_MEM_MB    device capacity the allocation entry points enforce
 *                       (default 81559; past it: CUDA_ERROR_OUT_OF_MEMORY)
 *   FAKE_CUDA_EXIT_DESTROY 1: contexts still alive at exit are destroyed
 *                       after the exit handlers registered after cuInit
 *   CUDA_INJECTION64_PATH  loaded and InitializeInjection() called in cuInit
 */
#ifndef GS_FAKE_DRV_H
#define GS_FAKE_DRV_H

#include <stddef.h>
#include <stdint.h>

#define FAKE_MAX_DEVICES 8

struct fake_ctx {
	uint32_t magic; /* FAKE_CTX_MAGIC while alive */
	uint32_t uid;
	int device;
	int arch;
	/* Threads of the application that used the context (pthread_self):
	 * the creator and the last launcher. */
	unsigned long creator, launcher;
	int running;       /* kernels in flight (between ENTER and EXIT), __atomic */
	uint64_t launches; /* launches past their ENTER callback, __atomic */
	/* A green context (cuGreenCtxCreate, half the device's SMs): current
	 * on one thread at a time (cuda.h), the one in `holder` (0: none,
	 * under the driver's lock); a second thread is refused. */
	int green;
	unsigned long holder;
};
#define FAKE_CTX_MAGIC 0xc0c0c7c7u

struct fake_module {
	struct fake_ctx *ctx;
	uint32_t id;
	void *image; /* driver's copy of the cubin */
	size_t size;
};

struct fake_func {
	struct fake_module *mod;
	char name[512];
	uint32_t index;   /* ELF symbol index in the cubin */
	uint64_t size;    /* st_size: valid pcOffsets are below it */
	void *cupti_priv; /* CUPTI double's per-function state */
};

/* Hooks the CUPTI double registers with the driver double. */
struct fake_cupti_hooks {
	/* resource event: cbid is a CUpti_CallbackIdResource value; module may be NULL */
	void (*resource)(int cbid, struct fake_ctx *ctx, struct fake_module *module);
	/* one kernel launch through driver API cbid: ENTER callback, run, EXIT callback */
	int (*launch)(int cbid, const char *api_name, struct fake_ctx *ctx, struct fake_func *f);
};

void fake_drv_set_hooks(const struct fake_cupti_hooks *h);
int fake_drv_device_arch(int device);
/* Whether ctx is idle for the calling thread: no kernel of it running, and
 * this thread's last cuCtxSynchronize was on ctx after its last launch
 * (what CUPTI wants before sampling starts). */
int fake_drv_idle(const struct fake_ctx *ctx);
/* Times a green context was refused current on a second thread. */
unsigned fake_cuda_green_refused(void);

#endif
