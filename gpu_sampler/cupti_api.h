/* SPDX-License-Identifier: MIT */
/*
 * CUPTI (and a few CUDA driver) entry points as a function table resolved
 * with dlopen/dlsym, so the agent needs nothing but libc at load time and
 * can bind to whatever libcupti the process already has.  Types come from
 * the CUDA 13.0 headers (compile time only); record layouts that changed
 * between CUPTI versions are chosen at run time (see gs_cupti.pcdata_size).
 */
#ifndef GS_CUPTI_API_H
#define GS_CUPTI_API_H

#include <cupti.h>
#include <cupti_pcsampling.h>

struct gs_cupti {
	void *lib;
	char path[512];
	uint32_t version;     /* cuptiGetVersion() */
	size_t pcdata_size;   /* CUpti_PCSamplingPCData stride: 56 before v22, 64 from v22 */
	size_t data_size;     /* CUpti_PCSamplingData.size for this version */

	CUptiResult (*GetVersion)(uint32_t *);
	CUptiResult (*GetResultString)(CUptiResult, const char **);
	CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				    CUpti_SubscriberParams *); /* optional */
	CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
				      CUpti_CallbackId);
	CUptiResult (*GetContextId)(CUcontext, uint32_t *);
	CUptiResult (*GetDeviceId)(CUcontext, uint32_t *);
	CUptiResult (*PCSamplingEnable)(CUpti_PCSamplingEnableParams *);
	CUptiResult (*PCSamplingDisable)(CUpti_PCSamplingDisableParams *);
	CUptiResult (*PCSamplingGetNumStallReasons)(CUpti_PCSamplingGetNumStallReasonsParams *);
	CUptiResult (*PCSamplingGetStallReasons)(CUpti_PCSamplingGetStallReasonsParams *);
	CUptiResult (*PCSamplingSetConfigurationAttribute)(CUpti_PCSamplingConfigurationInfoParams *);
	CUptiResult (*PCSamplingGetConfigurationAttribute)(CUpti_PCSamplingConfigurationInfoParams *);
	CUptiResult (*PCSamplingGetData)(CUpti_PCSamplingGetDataParams *);
	CUptiResult (*GetCubinCrc)(CUpti_GetCubinCrcParams *);
	CUptiResult (*RegisterComputeCrcCallback)(CUpti_ComputeCrcCallbackFunc); /* optional */

	/* CUDA driver (optional: only to make a context current on the watcher
	 * thread and to read SM count / clock). */
	CUresult (*CtxPush)(CUcontext);
	CUresult (*CtxPop)(CUcontext *);
	CUresult (*DevAttr)(int *, CUdevice_attribute, CUdevice);
	CUresult (*Init)(unsigned int); /* cuInit: only after the driver's own cuInit returned */
};

/* Find and bind libcupti.  Returns 0, or -1 with a message in err
 * ("what happened and what to do"). */
int gs_cupti_open(struct gs_cupti *c, char *err, size_t errlen);
const char *gs_cupti_strerror(const struct gs_cupti *c, CUptiResult r);

#endif
