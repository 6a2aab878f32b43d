/* SPDX-License-Identifier: MIT */
/* Binding libcupti at run time.  Search order:
 *   1. GS_CUPTI_PATH (exact file; tests point it at the CUPTI double)
 *   2. a libcupti already loaded in the process (RTLD_NOLOAD: PyTorch's,
 *      Kineto's), so the process never has two CUPTIs
 *   3. $CUDA_HOME, /usr/local/cuda: extras/CUPTI/lib64, lib64,
 *      targets/<arch>-linux/lib; libcupti.so.13 then .so.12
 *   4. PyTorch's bundled copy next to a loaded torch/lib
 *      (site-packages/nvidia/cuda_cupti/lib, nvidia/cu13/lib)
 *   5. the loader's search path */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cupti_api.h"

_Static_assert(offsetof(struct gs_subscriber_params, oldSubscriberSize) ==
		       offsetof(CUpti_SubscriberParams, oldSubscriberSize) &&
		   CUpti_SubscriberParams_STRUCT_SIZE <=
		       offsetof(struct gs_subscriber_params, allowMultipleSubscribers),
	       "CUpti_SubscriberParams prefix");
#include "agent.h"

static const char *const sonames[] = { "libcupti.so.13", "libcupti.so.12", "libcupti.so" };

static void *try_open(const char *path, int extra)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | extra);

	if (h)
		gs_agent_log("libcupti: %s%s", path, extra ? " (already loaded)" : "");
	return h;
}

struct torch_find {
	char dir[512];
};

/* dl_iterate_phdr callback: remember the site-packages directory of a loaded
 * library under torch/lib. */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
	struct torch_find *f = data;
	const char *n = info->dlpi_name, *p;

	if (!n || !*n)
		return 0;
	if ((p = strstr(n, "/torch/lib/")) && !f->dir[0] && (size_t)(p - n) < sizeof(f->dir))
		snprintf(f->dir, sizeof(f->dir), "%.*s", (int)(p - n), n);
	return 0;
}

static void *open_loaded(void)
{
	for (size_t i = 0; i < sizeof(sonames) / sizeof(*sonames); i++) {
		void *h = try_open(sonames[i], RTLD_NOLOAD);
		if (h)
			return h;
	}
	return NULL;
}

static void *open_toolkit(const char *root)
{
	static const char *const subdirs[] = { "extras/CUPTI/lib64", "lib64",
					       "targets/x86_64-linux/lib",
					       "targets/sbsa-linux/lib" };
	char path[1024];

	if (!root || !*root)
		return NULL;
	for (size_t d = 0; d < sizeof(subdirs) / sizeof(*subdirs); d++)
		for (size_t i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s/%s/%s", root, subdirs[d], sonames[i]);
			void *h = try_open(path, 0);
			if (h)
				return h;
		}
	return NULL;
}

static void *open_torch_bundle(void)
{
	static const char *const rel[] = { "nvidia/cu13/lib/libcupti.so.13",
					   "nvidia/cuda_cupti/lib/libcupti.so.13",
					   "nvidia/cuda_cupti/lib/libcupti.so.12" };
	struct torch_find f = { { 0 } };
	char path[1024];

	dl_iterate_phdr(find_loaded, &f);
	if (!f.dir[0])
		return NULL;
	for (size_t i = 0; i < sizeof(rel) / sizeof(*rel); i++) {
		snprintf(path, sizeof(path), "%s/%s", f.dir, rel[i]);
		void *h = try_open(path, 0);
		if (h)
			return h;
	}
	return NULL;
}

static void *find_lib(char *err, size_t errlen)
{
	const char *env = getenv("GS_CUPTI_PATH");
	void *h;

	if (env && *env) {
		if ((h = try_open(env, 0)))
			return h;
		snprintf(err, errlen, "GS_CUPTI_PATH=%s cannot be loaded (%s)", env, dlerror());
		return NULL;
	}
	/* The job's own copy first: torch's wheel (nvidia/cu13/lib on CUDA 13,
	 * nvidia/cuda_cupti/lib before) matches the runtime torch was built
	 * with, and Kineto will load that one later anyway. */
	if ((h = open_loaded()) || (h = open_torch_bundle()) ||
	    (h = open_toolkit(getenv("CUDA_HOME"))) || (h = open_toolkit(getenv("CUDA_PATH"))) ||
	    (h = open_toolkit("/usr/local/cuda")))
		return h;
	for (size_t i = 0; i < sizeof(sonames) / sizeof(*sonames); i++)
		if ((h = try_open(sonames[i], 0)))
			return h;
	snprintf(err, errlen,
		 "libcupti not found: install the CUDA toolkit's CUPTI (libcupti.so.13 or .12), "
		 "set CUDA_HOME, or point GS_CUPTI_PATH at libcupti.so");
	return NULL;
}

#define BIND(field, name, required)                                             \
	do {                                                                    \
		*(void **)&c->field = dlsym(c->lib, name);                      \
		if (!c->field && (required)) {                                  \
			snprintf(err, errlen,                                   \
				 "%s has no %s: CUPTI too old for PC sampling " \
				 "(needs CUDA 11.3+)",                          \
				 c->path, name);                                \
			return -1;                                              \
		}                                                               \
	} while (0)

int gs_cupti_open(struct gs_cupti *c, char *err, size_t errlen)
{
	Dl_info di;
	void *drv;

	memset(c, 0, sizeof(*c));
	c->lib = find_lib(err, errlen);
	if (!c->lib)
		return -1;
	BIND(GetVersion, "cuptiGetVersion", 1);
	if (dladdr(*(void **)&c->GetVersion, &di) && di.dli_fname)
		snprintf(c->path, sizeof(c->path), "%s", di.dli_fname);
	BIND(GetResultString, "cuptiGetResultString", 1);
	BIND(Subscribe, "cuptiSubscribe", 1);
	BIND(Subscribe_v2, "cuptiSubscribe_v2", 0);
	BIND(Unsubscribe, "cuptiUnsubscribe", 1);
	BIND(EnableCallback, "cuptiEnableCallback", 1);
	BIND(GetContextId, "cuptiGetContextId", 1);
	BIND(GetDeviceId, "cuptiGetDeviceId", 1);
	BIND(PCSamplingEnable, "cuptiPCSamplingEnable", 1);
	BIND(PCSamplingDisable, "cuptiPCSamplingDisable", 1);
	BIND(PCSamplingGetNumStallReasons, "cuptiPCSamplingGetNumStallReasons", 1);
	BIND(PCSamplingGetStallReasons, "cuptiPCSamplingGetStallReasons", 1);
	BIND(PCSamplingSetConfigurationAttribute, "cuptiPCSamplingSetConfigurationAttribute", 1);
	BIND(PCSamplingGetConfigurationAttribute, "cuptiPCSamplingGetConfigurationAttribute", 1);
	BIND(PCSamplingGetData, "cuptiPCSamplingGetData", 1);
	BIND(PCSamplingStart, "cuptiPCSamplingStart", 0);
	BIND(PCSamplingStop, "cuptiPCSamplingStop", 0);
	BIND(Finalize, "cuptiFinalize", 0);
	BIND(GetCubinCrc, "cuptiGetCubinCrc", 1);
	BIND(RegisterComputeCrcCallback, "cuptiRegisterComputeCrcCallback", 0);

	if (c->GetVersion(&c->version) != CUPTI_SUCCESS) {
		snprintf(err, errlen, "cuptiGetVersion failed in %s", c->path);
		return -1;
	}
	/* API v22 (CUDA 12.4) appended correlationId to CUpti_PCSamplingPCData:
	 * 56 -> 64 bytes.  Never read records with the other layout. */
	c->pcdata_size = c->version >= 22 ? 64 : 56;
	/* hardwareBufferFull came with v19 (12.0), nonUsrKernelsTotalSamples
	 * with v16 (11.5). */
	if (c->version >= 19)
		c->data_size = sizeof(CUpti_PCSamplingData);
	else if (c->version >= 16)
		c->data_size = offsetof(CUpti_PCSamplingData, hardwareBufferFull);
	else
		c->data_size = offsetof(CUpti_PCSamplingData, nonUsrKernelsTotalSamples);

	drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (drv) {
		*(void **)&c->CtxPush = dlsym(drv, "cuCtxPushCurrent_v2");
		*(void **)&c->CtxPop = dlsym(drv, "cuCtxPopCurrent_v2");
		*(void **)&c->DevAttr = dlsym(drv, "cuDeviceGetAttribute");
		*(void **)&c->Init = dlsym(drv, "cuInit");
		*(void **)&c->DevCount = dlsym(drv, "cuDeviceGetCount");
		*(void **)&c->DevGet = dlsym(drv, "cuDeviceGet");
		*(void **)&c->PrimaryState = dlsym(drv, "cuDevicePrimaryCtxGetState");
		*(void **)&c->PrimaryRetain = dlsym(drv, "cuDevicePrimaryCtxRetain");
		*(void **)&c->PrimaryRelease = dlsym(drv, "cuDevicePrimaryCtxRelease_v2");
		*(void **)&c->MemGetInfo = dlsym(drv, "cuMemGetInfo_v2");
		*(void **)&c->CtxSynchronize = dlsym(drv, "cuCtxSynchronize");
		*(void **)&c->CtxDevResource = dlsym(drv, "cuCtxGetDevResource");
		*(void **)&c->DevDevResource = dlsym(drv, "cuDeviceGetDevResource");
	}
	return 0;
}

const char *gs_cupti_strerror(const struct gs_cupti *c, CUptiResult r)
{
	const char *s = NULL;

	if (c->GetResultString && c->GetResultString(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}
