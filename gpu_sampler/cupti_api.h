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

#include <stddef.h>
#include <stdint.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

struct gs_cupti {
	void *lib;
	char path[512];
	uint32_t version;   /* cuptiGetVersion() */
	size_t pcdata_size; /* CUpti_PCSamplingPCData stride: 56 before v22, 64 from v22 */
	size_t data_size;   /* CUpti_PCSamplingData.size for this version */

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
	CUptiResult (*PCSamplingSetConfigurationAttribute)(
	    CUpti_PCSamplingConfigurationInfoParams *);
	CUptiResult (*PCSamplingGetConfigurationAttribute)(
	    CUpti_PCSamplingConfigurationInfoParams *);
	CUptiResult (*PCSamplingGetData)(CUpti_PCSamplingGetDataParams *);
	CUptiResult (*PCSamplingStart)(CUpti_PCSamplingStartParams *); /* optional */
	CUptiResult (*PCSamplingStop)(CUpti_PCSamplingStopParams *);   /* optional */
	CUptiResult (*Finalize)(void);                                 /* optional */
	CUptiResult (*GetCubinCrc)(CUpti_GetCubinCrcParams *);
	CUptiResult (*RegisterComputeCrcCallback)(CUpti_ComputeCrcCallbackFunc); /* optional */

	/* CUDA driver (optional: to make a context current on the watcher
	 * thread, to read SM count / clock, to size the hardware buffer from
	 * free device memory, to find at arm the primary contexts created
	 * while the agent was not subscribed, and to tell green contexts). */
	CUresult (*CtxPush)(CUcontext);
	CUresult (*CtxPop)(CUcontext *);
	CUresult (*DevAttr)(int *, CUdevice_attribute, CUdevice);
	CUresult (*Init)(unsigned int); /* cuInit: only after the driver's own cuInit returned */
	CUresult (*DevCount)(int *);
	CUresult (*DevGet)(CUdevice *, int);
	CUresult (*PrimaryState)(CUdevice, unsigned int *, int *);
	CUresult (*PrimaryRetain)(CUcontext *, CUdevice);
	CUresult (*PrimaryRelease)(CUdevice);
	CUresult (*MemGetInfo)(size_t *, size_t *); /* the current context's device */
	CUresult (*CtxSynchronize)(void);           /* the current context */
	/* SMs of a context and of its device: a green context has fewer (12.4+) */
	CUresult (*CtxDevResource)(CUcontext, CUdevResource *, CUdevResourceType);
	CUresult (*DevDevResource)(CUdevice, CUdevResource *, CUdevResourceType);
};

/* CUpti_SubscriberParams.allowMultipleSubscribers is in the 13.2
 * documentation (https://docs.nvidia.com/cupti/13.2.0/api/
 * structCUpti__SubscriberParams.html), but the mode it asks for works only
 * with CUDA 13.3+ and an r610+ driver, every tool of the process on the v2
 * APIs (CUPTI Usage, https://docs.nvidia.com/cupti/main/main.html,
 * "Multiple Subscribers": 2.4.1 Overview, 2.4.2 Enabling Multiple
 * Subscribers, 2.4.8 Limitations and Restrictions).  The 13.0 headers the
 * agent builds with lack the field: the same layout with it, passed with the
 * longer structSize only to a CUPTI that can honour it. */
struct gs_subscriber_params {
	size_t structSize;
	const char *subscriberName;
	char *oldSubscriberName;
	size_t oldSubscriberSize;
	uint8_t allowMultipleSubscribers;
};
#define GS_SUBSCRIBER_PARAMS_MULTI_SIZE \
	(offsetof(struct gs_subscriber_params, allowMultipleSubscribers) + 1)
/* cuptiGetVersion() from which the agent asks for the mode: 13.3, as
 * CUPTI_API_VERSION counts (130001 is 13.0 Update 1, cupti_version.h;
 * 130300 is the documented floor of "CUPTI_API_VERSION 130300 (CUDA 13.3)",
 * same page, 2.5.1).  The driver half (r610+) is not visible to the agent:
 * on an older driver CUPTI keeps one subscriber, which the agent reports
 * like any refusal.  A CUPTI that refuses the longer struct anyway is asked
 * again with the 13.0 size.  The mode covers the Activity and Callback APIs
 * only ("not applicable to CUPTI Profiling APIs", 2.4.8); PC sampling is not
 * said to be covered, and the one-context-per-GPU limit of PC sampling
 * (CUPTI Usage 2.8.7) holds whoever subscribes. */
#define GS_CUPTI_MULTI_SUBSCRIBER_VERSION 130300u

/* Find and bind libcupti.  Returns 0, or -1 with a message in err
 * ("what happened and what to do"). */
int gs_cupti_open(struct gs_cupti *c, char *err, size_t errlen);
const char *gs_cupti_strerror(const struct gs_cupti *c, CUptiResult r);

#endif
