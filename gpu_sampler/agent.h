/* SPDX-License-Identifier: MIT */
/*
 * libgpusample_agent.so: the in-process GPU agent (CUPTI PC sampling).
 *
 * Loading.  The CUDA driver loads the agent through CUDA_INJECTION64_PATH
 * and calls InitializeInjection() during cuInit.  Launch mode
 * (gpusample -- CMD) sets, for CMD:
 *     CUDA_INJECTION64_PATH=<prefix>/lib/gpusample/libgpusample_agent.so
 *     GS_AGENT_OPTS=period=N,mode=continuous|serialized   (optional)
 * For -p PID the job must have been started with CUDA_INJECTION64_PATH, or
 * (gpusample --inject, inject/inject.h) a CPython 3.14+ job loads the agent
 * late as an extension module (_imp.create_dynamic: its
 * PyInit_libgpusample_agent calls InitializeInjection), once its CUDA
 * contexts exist: the watcher finds them at arm as for any dormant agent.
 * The agent needs only libc; CUPTI is opened with dlopen (see cupti_api.c
 * for the search order; GS_CUPTI_PATH overrides it, which tests use to load
 * the CUPTI double).
 *
 * Dormant until armed, and dormant means not subscribed: CUDA 13.0 allows
 * one CUPTI subscriber per process, and a dormant agent must leave it to
 * torch.profiler (Kineto).  InitializeInjection only binds libcupti,
 * registers the cubin hash (cuptiRegisterComputeCrcCallback, no
 * subscription) and starts a watcher thread ("gs-agent").  The watcher polls
 * the semaphore of probe gpusample:record every GS_AGENT_POLL_MS; when
 * gpusample attaches (semaphore > 0) it reads gs_agent_cfg (records.h,
 * struct gs_gpu_agent_cfg) and arms:
 *   1. cuptiSubscribe_v2 as "gpusample" (on CUPTI 13.3+ asking for the
 *      multi-subscriber mode, allowMultipleSubscribers); resource callbacks
 *      (context created / destroy starting, module loaded / unload
 *      starting).  When another subscriber holds CUPTI: status OFF naming
 *      it (reason GS_GPU_R_OTHER_SUBSCRIBER), the CPU profile goes on, and
 *      the watcher asks again every GS_AGENT_SUB_RETRY_MS.
 *   2. contexts created while unsubscribed: the devices' active primary
 *      contexts (the CUDA runtime's, PyTorch's) from the driver
 *      (cuDevicePrimaryCtxGetState, then Retain + Release, which leaves the
 *      count as it was); any other context at its next kernel launch.
 *   3. launch callbacks on; per context, in the ENTER callback of its next
 *      kernel launch, on the application's thread: Enable -> stall reasons
 *      -> configuration (continuous by default, start/stop control) ->
 *      cuCtxSynchronize -> cuptiPCSamplingStart -> stall table record (a
 *      context that launches nothing for GS_AGENT_ARM_WAIT_MS is armed by
 *      the watcher, the same calls with it pushed current); cubin notices
 *      for every known module.
 * Disarm (semaphore back to 0, or detach_req == session): each armed
 * context is drained and disabled in its next launch EXIT callback, on the
 * application's thread; after GS_AGENT_DISARM_WAIT_MS the watcher does it
 * for the contexts that launched nothing; then launch callbacks off,
 * status DISARMED, cuptiUnsubscribe (subscribe=arm: cuptiFinalize in the
 * EXIT callback of the next launch, within GS_AGENT_DISARM_WAIT_MS, else
 * cuptiUnsubscribe by the watcher); contexts are
 * forgotten (their destruction is not seen while unsubscribed) and found
 * again at the next arm.
 *
 * Modules loaded while unsubscribed are never announced: neither CUPTI nor
 * the driver API can list a process's modules or hand out a module's cubin
 * afterwards, and recovering them from the .nv_fatbin sections of the
 * loaded libraries is out of reach (CUDA 13 fatbin entries are
 * zstd-compressed: all 5,449 ELF entries of libcublasLt.so.13).  CUPTI
 * still names their kernels in PC records, so their samples are attributed
 * per kernel and pcOffset without source lines, and gpusample says how many
 * kernels that is.  gpusample -- CMD sets subscribe=launch, which subscribes
 * before the first module loads.
 *
 * USDT probes (provider "gpusample", sys/sdt.h, with semaphores):
 *   record(void *rec, uint64_t size)  any GS_REC_GPU_* record but launches
 *   launch(void *rec, uint64_t size)  struct gs_gpu_launch (64 bytes)
 *
 * Drains (cuptiPCSamplingGetData until remainingNumPcs == 0): every
 * drain_interval_ms on the watcher, at module load / unload, before Disable,
 * at context destroy, and in kernel-serialized mode in every launch's EXIT
 * callback on the launching thread (cupti_pcsampling.h:529-534: a flush
 * "after every kernel ends"); each drain first reads what CUPTI parked in
 * the configured buffer (SAMPLING_DATA_BUFFER).  That buffer is CUPTI's
 * until a Disable succeeds (a context's teardown writes into it): a context
 * gone without one keeps its buffer for the life of the process.  Nothing
 * is drained or disabled after the process's exit handler ran.
 * Hardware buffer overflow: Disable +
 * Enable + configure again, dropped samples counted, status RECOVERED.
 * Every CUPTI failure turns GPU sampling off (for the process or the
 * context) with a status record naming the cause and what to change; the
 * application is never stopped or slowed beyond bounded callback work.
 *
 * Environment:
 *   GS_CUPTI_PATH    libcupti to use (full path)
 *   GS_AGENT_OPTS    comma list: period=5..31, mode=continuous|serialized,
 *                    launch_rate=N (events/s), drain_ms=N, hwbuf=BYTES,
 *                    scratch=BYTES, cubin_keep=BYTES,
 *                    subscribe=arm|launch|init (enum gs_agent_subscribe)
 *   GS_AGENT_DEBUG   1: log agent decisions to stderr
 */
#ifndef GS_AGENT_H
#define GS_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpusample/records.h"

#define GS_AGENT_POLL_MS      50   /* watcher period: arm latency bound */
#define GS_AGENT_SUB_RETRY_MS 1000 /* asking again while another subscriber holds CUPTI */
#define GS_AGENT_SUBSCRIBER   "gpusample"
#define GS_AGENT_MAX_CTX      64
#define GS_AGENT_GET_PCS      512  /* PCs per GetData call */
#define GS_AGENT_CFG_PCS      1024 /* PCs in the SAMPLING_DATA_BUFFER */
#define GS_AGENT_LAUNCH_RATE  200  /* default launch events per second */
#define GS_AGENT_DRAIN_MS     100
/* detach: how long the launch callbacks have to disable their contexts
 * before the watcher does it (a job that launches nothing more) */
#define GS_AGENT_DISARM_WAIT_MS 300
/* arm: the same wait for a context's next launch before the watcher arms
 * it (it is idle then: starting sampling needs an idle GPU) */
#define GS_AGENT_ARM_WAIT_MS 300
/* Starts refused (GPU busy again between cuCtxSynchronize and Start, as
 * another thread launched) retried at later launches before giving up */
#define GS_AGENT_START_TRIES 16
/* functionName pointers remembered (hashed once, freed at exit); a CUPTI
 * that allocates them per GetData hands out new ones without end: past
 * this many, a name is hashed each time, not kept, and counted */
#define GS_AGENT_MAX_NAMES 1024
/* CUPTI's 1 MB scratch buffer holds ~5,500 PCs: PyTorch-class work runs
 * out (CUPTI_ERROR_OUT_OF_MEMORY).  16 MB, as parcagpu, Proton and
 * HPCToolkit use; doubled on each overflow up to the max. */
#define GS_AGENT_SCRATCH (16ull << 20)
/* CUPTI's hardware buffer is device memory, 512 MB by default
 * (cupti_pcsampling.h:288-296), taken mid-training from the job's GPU.
 * 128 MB, as Proton uses, and never more than a quarter of the device's
 * free memory (cuMemGetInfo, asked on the watcher only: no driver calls
 * inside CUPTI callbacks); hwbuf= / --gpu-hwbuf set it instead. */
#define GS_AGENT_HWBUF          (128ull << 20)
#define GS_AGENT_HWBUF_FREE_DIV 4
#define GS_AGENT_SCRATCH_MAX    (256ull << 20)

void gs_agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* When the agent holds a CUPTI subscription (GS_AGENT_OPTS subscribe=).
 * CUDA 13.0 allows one subscriber per process: while the agent holds it,
 * torch.profiler (Kineto), Nsight and cuda-gdb get
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED. */
enum gs_agent_subscribe {
	GS_AGENT_SUB_ARM = 0,    /* default: from arm to disarm only */
	GS_AGENT_SUB_LAUNCH = 1, /* from InitializeInjection to the first disarm
				  * (gpusample -- CMD: every module is seen) */
	GS_AGENT_SUB_INIT = 2,   /* from InitializeInjection for the life of the
				  * process: every module of the job is seen by
				  * any later -p attach, CUPTI is never free */
};

/* Effective options (cfg from gpusample, else GS_AGENT_OPTS, else defaults). */
struct gs_agent_opts {
	uint32_t period;    /* 0 = CUPTI default */
	uint32_t mode;      /* GS_GPU_MODE_* */
	uint32_t subscribe; /* enum gs_agent_subscribe (environment only) */
	uint32_t launch_rate;
	uint32_t drain_ms;
	uint32_t sleep_ms; /* CUPTI worker sleep span; 0 = CUPTI's (100 ms) */
	uint64_t hwbuf, scratch, cubin_keep;
};
int gs_agent_parse_opts(const char *s, struct gs_agent_opts *o);

/* emit.c: USDT probes. */
bool gs_emit_armed(void);         /* record semaphore raised */
bool gs_emit_launch_wanted(void); /* launch semaphore raised */
int gs_emit_record(void *rec, uint32_t size);
void gs_emit_launch(struct gs_gpu_launch *l);


#endif
