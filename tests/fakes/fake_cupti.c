/* SPDX-License-Identifier: MIT */
/*
 * CUPTI double (libcupti.so.13) for GPU-less tests of the gpusample agent.
 * Models, as far as NVIDIA documents them (docs/reference
 * cupti_pc_sampling.md §1, §6.2):
 *   - call order: every PC-sampling call but Enable needs Enable on that
 *     context first; Start/Stop only with ENABLE_START_STOP_CONTROL
 *     (cupti_pcsampling.h:655-669, 695-709); Start only on a GPU idle for
 *     the calling thread, i.e. after its cuCtxSynchronize with no launch
 *     since (CUPTI_ERROR_UNKNOWN, counted start_busy_refused); one sampled
 *     context per device
 *   - size checks on every params struct, PC record size by API version
 *     (56 bytes before v22, 56 or 64 from v22), attributeStatus per attribute,
 *     sampling period 5..31
 *   - stall-reason tables per architecture, sparse indices served in a
 *     non-sorted order, each reason with a _not_issued twin
 *   - GetData paging through collectNumPcs / remainingNumPcs, totals,
 *     dropped and non-user samples reported once, CUPTI-owned functionName
 *     strings shared between records and handed to the client at Disable
 *   - continuous mode: correlationId 0; kernel-serialized: the launch's id
 *   - subscribers: one per process (CUDA 13.0: a second cuptiSubscribe gets
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and cuptiSubscribe_v2
 *     the holder's name, "CUPTI for <subscriberName>"); version 130200
 *     (13.2) takes the longer CUpti_SubscriberParams with
 *     allowMultipleSubscribers but still one subscriber; from 130300 (13.3)
 *     with an r610+ driver (FAKE_CUPTI_DRIVER) several, when every one set
 *     allowMultipleSubscribers (CUPTI Usage, "Multiple Subscribers" 2.4.1,
 *     2.4.8: https://docs.nvidia.com/cupti/main/main.html)
 *   - callbacks only for (domain, cbid) pairs each subscriber enabled
 *   - cuptiFinalize ends every subscription, a later subscribe starts
 *     afresh (subscribe_after_finalize); counted by call site
 *     (finalize_at_exit_site: inside a launch's EXIT callbacks, where CUPTI
 *     Usage 2.3.5 wants it; finalize_elsewhere) and finalize_while_enabled
 *   - Disable: leftovers copied into the SAMPLING_DATA_BUFFER, excess dropped;
 *     with the hardware buffer full, as all-zero records (zero_pcs)
 *   - context destroy: the same copy, after the DESTROY_STARTING callbacks
 *     returned, into a buffer still configured (a client that freed it gets
 *     a write after free; t_gpu_exit_asan builds this double with ASan)
 *   - records written with CUPTI's own stride (56 bytes before API v22, 64
 *     from it), never the client's size field; any other size is refused
 *   - ranges: a range closed unflushed (a kernel in KERNEL_SERIALIZED mode
 *     when the next starts, a module unload) is parked in the configured
 *     buffer over what was there (parked_pcs_lost counts what the client had
 *     not read: totalNumPcs not set back to 0); GetData into the configured
 *     buffer itself is accepted, as NVIDIA's start/stop sample does
 *
 * Environment:
 *   FAKE_CUPTI_VERSION   cuptiGetVersion() value (default 130001)
 *   FAKE_CUPTI_DRIVER    driver branch CUPTI runs on (default 580, CUDA
 *                        13.0's); the multi-subscriber mode needs 610+
 *   FAKE_CUPTI_FAIL      comma list: privileges (Enable), busy (Enable),
 *                        unsupported (Enable), enable_oom (Enable),
 *                        subscribers (Subscribe: a tool outside the process,
 *                        e.g. Nsight, holds CUPTI), nodriver (Subscribe),
 *                        enable_offthread (Enable from a thread that neither
 *                        created the context nor launched on it fails with
 *                        CUPTI_ERROR_INVALID_OPERATION: no document allows it),
 *                        hwfull (hardware buffer overflows once, after
 *                        FAKE_CUPTI_HWFULL_AFTER samples, default 500;
 *                        FAKE_CUPTI_HWFULL_TIMES times, default 1),
 *                        offthread (Enable, GetData and Disable from such a
 *                        thread fail with CUPTI_ERROR_INVALID_OPERATION),
 *                        inflight (Enable, GetData or Disable while a kernel
 *                        of the context runs fails with CUPTI_ERROR_UNKNOWN: CUPTI wants
 *                        the GPU idle, and a tool calling from a worker
 *                        thread saw that error; FAKE_CUPTI_KERNEL_MS: how
 *                        long each kernel runs),
 *                        disable (every cuptiPCSamplingDisable fails with
 *                        CUPTI_ERROR_UNKNOWN and sampling goes on: the
 *                        configured buffer stays CUPTI's),
 *                        idle (sampling started by the configuration, with
 *                        no start/stop control, on a GPU not idle for the
 *                        calling thread is refused like such a Start),
 *                        names_per_getdata (each GetData hands a new
 *                        functionName string per function, as a CUPTI that
 *                        allocates per call would: names_per_getdata counts
 *                        them),
 *                        crc_some (the registered CRC callback honoured
 *                        for every second module only, the others keyed
 *                        by CUPTI's own CRC: crc_not_honoured counts them),
 *                        continuous_corr (PC records carry the launch's
 *                        correlationId in continuous mode too, where the
 *                        documentation promises 0: a client must not trust
 *                        it there)
 *   FAKE_CUPTI_OLD_SUBSCRIBER  name reported with "subscribers"
 *                        (default "CUPTI for Kineto")
 *   FAKE_CUPTI_SAMPLES   warp samples per launch (default 40)
 *   FAKE_CUPTI_GETDATA_MS each cuptiPCSamplingGetData takes this long (a busy
 *                        GPU; the agent holds its lock meanwhile)
 *   FAKE_CUPTI_TEARDOWN_MS a context's PC-sampling teardown waits this long
 *                        (joining CUPTI's threads) before it writes the
 *                        configured buffer
 *   FAKE_CUPTI_PC_SPREAD distinct PCs a kernel's samples spread over
 *                        (default: up to 4 inside the function)
 *
 * Scratch buffer, as documented for CUPTI: PC records parsed since the last
 * GetData wait there; its size (CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_
 * SCRATCH_BUFFER_SIZE, default 1 MB) holds about 5,500 PCs.  A new PC that
 * does not fit is lost, and GetData returns CUPTI_ERROR_OUT_OF_MEMORY with
 * hardwareBufferFull 0 until Disable + Enable.
 *   FAKE_CUPTI_STATS     file written at exit: "key value" lines (call
 *                        counts per function, samples generated,
 *                        subscribe_ok.<name> / subscribe_refused.<name> per
 *                        subscriber name, blanks as _, ...)
 *   FAKE_CUPTI_REAL      real libcupti for cuptiGetCubinCrc (default
 *                        /usr/local/cuda/lib64/libcupti.so.13; "" = own CRC)
 *
 * Cubin identity, as the real CUPTI: cuptiGetCubinCrc is sparse (it does
 * not read every byte, so near-identical cubins collide; the double's own
 * CRC covers the ELF header, the size and one byte per 4 KiB), and the
 * cubinCrc of PC records is what a callback registered with
 * cuptiRegisterComputeCrcCallback computed at module load, else the same
 * sparse CRC.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include "fake_drv.h"

#define API         __attribute__((visibility("default")))
#define MAX_SUB_IDS 1024
#define MAX_REASONS 64
#define MAX_CTX     64

/* ---- call counting ----------------------------------------------------- */
enum call {
	C_GetVersion,
	C_GetResultString,
	C_Subscribe,
	C_Unsubscribe,
	C_EnableCallback,
	C_EnableDomain,
	C_GetContextId,
	C_GetDeviceId,
	C_PCEnable,
	C_PCDisable,
	C_PCGetNumStallReasons,
	C_PCGetStallReasons,
	C_PCSetConfig,
	C_PCGetConfig,
	C_PCStart,
	C_PCStop,
	C_PCGetData,
	C_GetCubinCrc,
	C_Finalize,
	C_NR
};
static const char *const call_names[C_NR] = {
	"cuptiGetVersion",
	"cuptiGetResultString",
	"cuptiSubscribe",
	"cuptiUnsubscribe",
	"cuptiEnableCallback",
	"cuptiEnableDomain",
	"cuptiGetContextId",
	"cuptiGetDeviceId",
	"cuptiPCSamplingEnable",
	"cuptiPCSamplingDisable",
	"cuptiPCSamplingGetNumStallReasons",
	"cuptiPCSamplingGetStallReasons",
	"cuptiPCSamplingSetConfigurationAttribute",
	"cuptiPCSamplingGetConfigurationAttribute",
	"cuptiPCSamplingStart",
	"cuptiPCSamplingStop",
	"cuptiPCSamplingGetData",
	"cuptiGetCubinCrc",
	"cuptiFinalize",
};
static _Atomic uint64_t calls[C_NR];
static _Atomic uint64_t st_launches, st_launch_cb, st_resource_cb, st_generated, st_delivered,
    st_dropped, st_hwfull, st_bad_size, st_order_err, st_enable_ok, st_scratch_full,
    st_scratch_lost, st_scratch_bytes, st_names_freed_early, st_enable_offthread, st_dead_ctx_calls,
    st_parked, st_parked_lost, st_teardown_copies, st_teardown_pcs, st_zero_pcs, st_hwbuf_bytes,
    st_sleep_ms, st_period, st_inflight_refused, st_disable_refused, st_disable_app_thread,
    st_offthread_refused, st_start_busy, st_start_app_thread, st_names_fresh, st_crc_not_honoured;
#define COUNT(c) atomic_fetch_add(&calls[c], 1)

/* ---- stall reason tables ----------------------------------------------- */
static const char *const base_reasons[] = {
	"barrier",
	"branch_resolving",
	"dispatch_stall",
	"drain",
	"imc_miss",
	"lg_throttle",
	"long_scoreboard",
	"math_pipe_throttle",
	"membar",
	"mio_throttle",
	"misc",
	"no_instructions",
	"not_selected",
	"selected",
	"short_scoreboard",
	"sleeping",
	"tex_throttle",
	"wait",
	"warpgroup_arrive",
};
#define N_BASE (sizeof(base_reasons) / sizeof(*base_reasons))

struct table {
	size_t n;
	uint32_t idx[MAX_REASONS];
	char name[MAX_REASONS][CUPTI_STALL_REASON_STRING_SIZE];
	int base_slot[MAX_REASONS]; /* slot of a warp-state reason, its twin is +1 */
	size_t n_base;
	int count_slot; /* smsp__pcsamp_sample_count */
};
static struct table tab90, tab_other;

static void add_reason(struct table *t, uint32_t idx, const char *name)
{
	t->idx[t->n] = idx;
	snprintf(t->name[t->n], CUPTI_STALL_REASON_STRING_SIZE, "%s", name);
	t->n++;
}

/* Hopper: 40 reasons, indices 0..39 in name order (as decoded from a real
 * pc_sampling_continuous file), served in a shuffled order.  Other
 * architectures: no warpgroup_arrive and no dispatch_stall, sparse indices
 * starting at 3 (gaps where those would be). */
static void build_table(struct table *t, bool hopper)
{
	struct table tmp = { 0 };
	char name[CUPTI_STALL_REASON_STRING_SIZE];
	uint32_t idx = hopper ? 2 : 3;

	add_reason(&tmp, 0, "smsp__pcsamp_sample_count");
	add_reason(&tmp, 1, "smsp__pcsamp_samples_data_dropped");
	for (size_t i = 0; i < N_BASE; i++) {
		bool skip = !hopper && (!strcmp(base_reasons[i], "warpgroup_arrive") ||
					!strcmp(base_reasons[i], "dispatch_stall"));
		if (skip) {
			idx += 2; /* leave the hole */
			continue;
		}
		snprintf(name, sizeof(name), "smsp__pcsamp_warps_issue_stalled_%s",
			 base_reasons[i]);
		add_reason(&tmp, idx, name);
		snprintf(name, sizeof(name), "smsp__pcsamp_warps_issue_stalled_%s_not_issued",
			 base_reasons[i]);
		add_reason(&tmp, idx + 1, name);
		idx += 2;
	}
	/* Deterministic shuffle: odd slots backwards, then even slots. */
	memset(t, 0, sizeof(*t));
	for (size_t i = tmp.n; i-- > 0;)
		if (i % 2)
			add_reason(t, tmp.idx[i], tmp.name[i]);
	for (size_t i = 0; i < tmp.n; i++)
		if (!(i % 2))
			add_reason(t, tmp.idx[i], tmp.name[i]);
	t->count_slot = -1;
	for (size_t i = 0; i < t->n; i++) {
		if (!strcmp(t->name[i], "smsp__pcsamp_sample_count"))
			t->count_slot = i;
		else if (strstr(t->name[i], "_stalled_") && !strstr(t->name[i], "_not_issued"))
			t->base_slot[t->n_base++] = i;
	}
}

static const struct table *table_for(const struct fake_ctx *c)
{
	return c->arch == 90 ? &tab90 : &tab_other;
}

static int twin_slot(const struct table *t, int slot)
{
	char want[CUPTI_STALL_REASON_STRING_SIZE + 16];

	snprintf(want, sizeof(want), "%s_not_issued", t->name[slot]);
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->name[i], want))
			return i;
	return -1;
}

/* ---- per-context PC sampling state ------------------------------------- */
struct pcrec {
	uint64_t crc, off;
	uint32_t fidx, corr;
	struct fake_func *f;
	uint32_t counts[MAX_REASONS]; /* by table slot */
};

struct pcs_state {
	struct fake_ctx *ctx;
	bool enabled, configured, start_stop, started, hw_full, scratch_full;
	uint64_t scratch; /* bytes configured; 0 = CUPTI's 1 MB */
	uint64_t hwbuf;   /* bytes configured; 0 = CUPTI's 512 MB */
	uint32_t *slots;  /* pending recs by key: index + 1, 0 = empty */
	size_t n_slots;
	uint32_t mode, period;
	uint32_t selected[MAX_REASONS]; /* slots selected */
	size_t n_selected;
	CUpti_PCSamplingData *cfg_buf;
	struct pcrec *recs;
	size_t n_recs, cap_recs, read_pos;
	uint64_t range, pend_total, pend_dropped, pend_nonuser, since_drain;
	uint64_t parked_samples; /* delivered into the range parked in cfg_buf */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* functionName strings, one per function for the life of the process: "might
 * be shared across all the records including records from activity APIs
 * representing the same function" (cupti_pcsampling.h), so the same pointer
 * comes back after Disable + Enable.  The client frees them, once, when it
 * is done with every record. */
static struct {
	const struct fake_func *f;
	char *s;
} * names;
static size_t n_names;
static struct pcs_state ctxs[MAX_CTX];
/* Subscribers.  CUDA 13.0: one at a time; a second cuptiSubscribe gets
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and, through
 * cuptiSubscribe_v2, the holder's name ("CUPTI for <subscriberName>").
 * CUpti_SubscriberParams.allowMultipleSubscribers is documented from 13.2
 * (https://docs.nvidia.com/cupti/13.2.0/api/structCUpti__SubscriberParams.html),
 * but "Multiple subscriber support requires CUDA 13.3+ and driver r610+"
 * (CUPTI Usage, https://docs.nvidia.com/cupti/main/main.html, 2.4.1
 * Overview): from 13.3 (version >= 130300) on an r610+ driver several may
 * subscribe when every one of them asked for it (the first one's setting is
 * global, 2.4.2 / 2.4.8); each gets only the callbacks it enabled.  A 13.2
 * CUPTI takes the field and keeps one subscriber.  The mode covers the
 * Activity and Callback APIs, not the profiling ones (2.4.8): PC sampling
 * keeps its one context per GPU whoever subscribed. */
#define MAX_SUBS          4
#define MULTI_SUB_FIELD   130200u /* CUpti_SubscriberParams has the field */
#define MULTI_SUB_VERSION 130300u /* and the mode works (with MULTI_SUB_DRIVER) */
#define MULTI_SUB_DRIVER  610u
struct subscriber {
	bool used, allow_multi;
	CUpti_CallbackFunc fn;
	void *ud;
	char name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN];
	uint8_t ids[7][MAX_SUB_IDS];
};
static struct subscriber subs[MAX_SUBS];
/* subscribe outcomes by subscriber name, for FAKE_CUPTI_STATS */
static struct {
	char name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN];
	uint64_t ok, refused;
} sub_stats[8];
static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER;
/* cuptiFinalize: calls by site, with PC sampling on, subscribes after */
static _Atomic uint64_t st_finalize_exit, st_finalize_elsewhere, st_finalize_enabled,
    st_sub_after_finalize;
static bool finalized; /* under sub_lock */
static _Atomic uint32_t next_corr = 1;
static uint32_t version = 130001;
static uint32_t driver_branch = 580;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static char fail[256];
static unsigned hwfull_fired, hwfull_times = 1;

static bool failing(const char *what)
{
	const char *p = fail;
	size_t n = strlen(what);

	while ((p = strstr(p, what))) {
		if ((p == fail || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return true;
		p += n;
	}
	return false;
}

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static struct pcs_state *state_of(CUcontext ctx, bool create)
{
	struct fake_ctx *c = (struct fake_ctx *)ctx;

	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i].ctx == c)
			return &ctxs[i];
	if (!create)
		return NULL;
	for (int i = 0; i < MAX_CTX; i++)
		if (!ctxs[i].ctx) {
			memset(&ctxs[i], 0, sizeof(ctxs[i]));
			ctxs[i].ctx = c;
			return &ctxs[i];
		}
	return NULL;
}

static bool ctx_ok(CUcontext ctx)
{
	return ctx && ((struct fake_ctx *)ctx)->magic == FAKE_CTX_MAGIC;
}

/* ---- core API ---------------------------------------------------------- */
API CUptiResult cuptiGetVersion(uint32_t *v)
{
	COUNT(C_GetVersion);
	if (!v)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*v = version;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	static const struct {
		CUptiResult r;
		const char *s;
	} names[] = {
		{ CUPTI_SUCCESS, "CUPTI_SUCCESS" },
		{ CUPTI_ERROR_INVALID_PARAMETER, "CUPTI_ERROR_INVALID_PARAMETER" },
		{ CUPTI_ERROR_INVALID_OPERATION, "CUPTI_ERROR_INVALID_OPERATION" },
		{ CUPTI_ERROR_OUT_OF_MEMORY, "CUPTI_ERROR_OUT_OF_MEMORY" },
		{ CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED" },
		{ CUPTI_ERROR_HARDWARE_BUSY, "CUPTI_ERROR_HARDWARE_BUSY" },
		{ CUPTI_ERROR_NOT_SUPPORTED, "CUPTI_ERROR_NOT_SUPPORTED" },
		{ CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" },
		{ CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
		  "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" },
		{ CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN" },
	};
	COUNT(C_GetResultString);
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (names[i].r == r) {
			*s = names[i].s;
			return CUPTI_SUCCESS;
		}
	*s = "CUPTI_ERROR_UNKNOWN";
	return CUPTI_ERROR_INVALID_PARAMETER;
}

API CUptiResult cuptiGetContextId(CUcontext ctx, uint32_t *id)
{
	COUNT(C_GetContextId);
	if (!ctx_ok(ctx) || !id)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*id = ((struct fake_ctx *)ctx)->uid;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetDeviceId(CUcontext ctx, uint32_t *id)
{
	COUNT(C_GetDeviceId);
	if (!ctx_ok(ctx) || !id)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*id = ((struct fake_ctx *)ctx)->device;
	return CUPTI_SUCCESS;
}

static void count_subscribe(const char *name, bool ok)
{
	for (size_t i = 0; i < sizeof(sub_stats) / sizeof(*sub_stats); i++)
		if (!sub_stats[i].name[0] || !strcmp(sub_stats[i].name, name)) {
			snprintf(sub_stats[i].name, sizeof(sub_stats[i].name), "%s", name);
			if (ok)
				sub_stats[i].ok++;
			else
				sub_stats[i].refused++;
			return;
		}
}

static struct subscriber *sub_of(CUpti_SubscriberHandle h)
{
	for (int i = 0; i < MAX_SUBS; i++)
		if (subs[i].used && h == (CUpti_SubscriberHandle)&subs[i])
			return &subs[i];
	return NULL;
}

/* Whether a new subscriber may join the ones there: none there, or 13.3+
 * on an r610+ driver and every one (the new one too) asked for the
 * multi-subscriber mode. */
static const struct subscriber *refusing_holder(bool allow_multi)
{
	bool multi_works = version >= MULTI_SUB_VERSION && driver_branch >= MULTI_SUB_DRIVER;

	for (int i = 0; i < MAX_SUBS; i++)
		if (subs[i].used && (!multi_works || !allow_multi || !subs[i].allow_multi))
			return &subs[i];
	return NULL;
}

static CUptiResult do_subscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc fn, void *ud,
				const char *want_name, bool allow_multi, char *old, size_t old_size)
{
	const struct subscriber *holder;
	char name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN];
	CUptiResult r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;

	COUNT(C_Subscribe);
	if (!h || !fn)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (failing("nodriver"))
		return CUPTI_ERROR_UNKNOWN; /* what real CUPTI returns without a driver */
	snprintf(name, sizeof(name), want_name ? "CUPTI for %.*s" : "CUPTI",
		 CUPTI_SUBSCRIBER_NAME_MAX_LEN, want_name ? want_name : "");
	pthread_mutex_lock(&sub_lock);
	if (failing("subscribers")) { /* a tool outside the process's control (Nsight, ...) */
		const char *o = getenv("FAKE_CUPTI_OLD_SUBSCRIBER");
		if (old && old_size)
			snprintf(old, old_size, "%s", o ? o : "CUPTI for Kineto");
	} else if ((holder = refusing_holder(allow_multi))) {
		if (old && old_size)
			snprintf(old, old_size, "%s", holder->name);
	} else {
		r = CUPTI_ERROR_MAX_LIMIT_REACHED;
		for (int i = 0; i < MAX_SUBS; i++)
			if (!subs[i].used) {
				memset(&subs[i], 0, sizeof(subs[i]));
				subs[i].used = true;
				subs[i].allow_multi = allow_multi;
				subs[i].fn = fn;
				subs[i].ud = ud;
				snprintf(subs[i].name, sizeof(subs[i].name), "%s", name);
				*h = (CUpti_SubscriberHandle)&subs[i];
				r = CUPTI_SUCCESS;
				break;
			}
	}
	count_subscribe(name, r == CUPTI_SUCCESS);
	if (r == CUPTI_SUCCESS && finalized)
		atomic_fetch_add(&st_sub_after_finalize, 1);
	pthread_mutex_unlock(&sub_lock);
	return r;
}

API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc fn, void *ud)
{
	return do_subscribe(h, fn, ud, NULL, false, NULL, 0);
}

/* structSize: the 13.0 struct ends at oldSubscriberSize; 13.2 appended
 * uint8_t allowMultipleSubscribers (read only by a 13.2+ CUPTI, honoured
 * only as refusing_holder says). */
API CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *h, CUpti_CallbackFunc fn, void *ud,
				  CUpti_SubscriberParams *p)
{
	const size_t multi_at = CUpti_SubscriberParams_STRUCT_SIZE; /* offset of the 13.2 field */
	bool allow = false;

	if (p &&
	    (p->structSize < CUpti_SubscriberParams_STRUCT_SIZE ||
	     (version < MULTI_SUB_FIELD && p->structSize != CUpti_SubscriberParams_STRUCT_SIZE) ||
	     p->structSize > multi_at + 8)) {
		COUNT(C_Subscribe);
		atomic_fetch_add(&st_bad_size, 1);
		return CUPTI_ERROR_INVALID_PARAMETER;
	}
	if (p && p->structSize > multi_at)
		allow = ((const uint8_t *)p)[multi_at] != 0;
	return do_subscribe(h, fn, ud, p ? p->subscriberName : NULL, allow,
			    p ? p->oldSubscriberName : NULL, p ? p->oldSubscriberSize : 0);
}

API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
	struct subscriber *sb;

	COUNT(C_Unsubscribe);
	pthread_mutex_lock(&sub_lock);
	sb = sub_of(h);
	if (sb)
		sb->used = false;
	pthread_mutex_unlock(&sub_lock);
	return sb ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

API CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle h,
				    CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
	struct subscriber *sb = sub_of(h);

	COUNT(C_EnableCallback);
	if (!sb || d <= 0 || d >= 7 || cbid >= MAX_SUB_IDS)
		return CUPTI_ERROR_INVALID_PARAMETER;
	sb->ids[d][cbid] = enable ? 1 : 0;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
	struct subscriber *sb = sub_of(h);

	COUNT(C_EnableDomain);
	if (!sb || d <= 0 || d >= 7)
		return CUPTI_ERROR_INVALID_PARAMETER;
	memset(sb->ids[d], enable ? 1 : 0, MAX_SUB_IDS);
	return CUPTI_SUCCESS;
}

/* A launch's EXIT callbacks run on this thread (cuptiFinalize's documented
 * call site). */
static __thread bool at_exit_site;

/* CUPTI detached from the process: every subscription ends; "You can attach
 * and detach CUPTI any number of times" (CUPTI Usage 2.3.5), so a later
 * subscribe starts afresh.  Called anywhere but a driver API's exit site,
 * or with PC sampling still enabled on a context, it is counted. */
API CUptiResult cuptiFinalize(void)
{
	COUNT(C_Finalize);
	atomic_fetch_add(at_exit_site ? &st_finalize_exit : &st_finalize_elsewhere, 1);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i].enabled)
			atomic_fetch_add(&st_finalize_enabled, 1);
	pthread_mutex_unlock(&lock);
	pthread_mutex_lock(&sub_lock);
	for (int i = 0; i < MAX_SUBS; i++)
		subs[i].used = false;
	finalized = true;
	pthread_mutex_unlock(&sub_lock);
	return CUPTI_SUCCESS;
}

/* ---- callback dispatch from the driver double -------------------------- */
static bool cb_enabled_by(const struct subscriber *sb, int d, int cbid)
{
	return sb->used && cbid < MAX_SUB_IDS && sb->ids[d][cbid];
}

static bool cb_enabled(int d, int cbid)
{
	for (int i = 0; i < MAX_SUBS; i++)
		if (cb_enabled_by(&subs[i], d, cbid))
			return true;
	return false;
}

/* One callback to every subscriber that enabled (d, cbid). */
static void dispatch(int d, int cbid, const void *data)
{
	for (int i = 0; i < MAX_SUBS; i++) {
		struct subscriber *sb = &subs[i];
		CUpti_CallbackFunc fn = sb->fn;
		if (cb_enabled_by(sb, d, cbid) && fn)
			fn(sb->ud, d, cbid, data);
	}
}

static void copy_out(struct pcs_state *s, CUpti_PCSamplingData *d, bool once_totals);
static bool data_ok(CUpti_PCSamplingData *d, size_t n_selected);

/* A range closed with PC records nobody flushed: they go to the configured
 * buffer, over whatever it held (cupti_pcsampling.h:529-534 makes flushing
 * the client's duty "to maintain uniqueness of PCs").  The double's
 * convention for "the client has read it": totalNumPcs set back to 0; a
 * range overwritten before that is lost, and its samples are taken back
 * from samples_delivered.  What does not fit is discarded, as at Disable.
 * Caller holds lock. */
static void park(struct pcs_state *s)
{
	uint64_t before;

	if (!s || !s->enabled || !s->cfg_buf || s->read_pos >= s->n_recs || s->hw_full ||
	    s->scratch_full || !data_ok(s->cfg_buf, s->n_selected))
		return;
	if (s->cfg_buf->totalNumPcs) {
		atomic_fetch_add(&st_parked_lost, s->cfg_buf->totalNumPcs);
		atomic_fetch_sub(&st_delivered, s->parked_samples);
	}
	before = atomic_load(&st_delivered);
	copy_out(s, s->cfg_buf, s->read_pos == 0);
	s->parked_samples = atomic_load(&st_delivered) - before;
	atomic_fetch_add(&st_parked, 1);
	s->n_recs = s->read_pos = 0;
	if (s->slots)
		memset(s->slots, 0, s->n_slots * sizeof(*s->slots));
}

/* The context goes: CUPTI tears its PC sampling down as Disable would
 * ("this API does the PC Sampling tear-down, joins threads and copies PC
 * records in the buffer provided during the PC sampling configuration",
 * cupti_pcsampling.h:617-621: Disable does for a live context what the
 * context's destruction does), after the DESTROY_STARTING callbacks have
 * returned.  FAKE_CUPTI_TEARDOWN_MS: joining CUPTI's worker threads takes
 * that long first.  A client that freed the configured buffer meanwhile
 * has it written after free (ASan reports it). */
static void teardown(struct fake_ctx *c)
{
	const char *ms = getenv("FAKE_CUPTI_TEARDOWN_MS");
	struct pcs_state *s;

	pthread_mutex_lock(&lock);
	s = state_of((CUcontext)c, false);
	bool copy = s && s->enabled && s->cfg_buf;
	pthread_mutex_unlock(&lock);
	if (copy && ms)
		usleep((useconds_t)atoi(ms) * 1000);
	pthread_mutex_lock(&lock);
	if ((s = state_of((CUcontext)c, false))) {
		if (s->enabled && s->cfg_buf && !s->hw_full && !s->scratch_full &&
		    data_ok(s->cfg_buf, s->n_selected)) {
			s->cfg_buf->totalNumPcs = 0;
			copy_out(s, s->cfg_buf, true);
			atomic_fetch_add(&st_teardown_copies, 1);
			atomic_fetch_add(&st_teardown_pcs, s->cfg_buf->totalNumPcs);
		}
		free(s->recs);
		free(s->slots);
		s->ctx = NULL; /* CUPTI drops its per-context state with the context */
	}
	pthread_mutex_unlock(&lock);
}

static void hook_resource(int cbid, struct fake_ctx *c, struct fake_module *m)
{
	CUpti_ModuleResourceData md;
	CUpti_ResourceData rd;

	if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
		/* A module load starts a new range in continuous mode. */
		pthread_mutex_lock(&lock);
		struct pcs_state *s = state_of((CUcontext)c, false);
		if (s && s->enabled)
			s->range++;
		pthread_mutex_unlock(&lock);
	}
	memset(&rd, 0, sizeof(rd));
	rd.context = (CUcontext)c;
	if (m) {
		md.moduleId = m->id;
		md.cubinSize = m->size;
		md.pCubin = m->image;
		rd.resourceDescriptor = &md;
	}
	if (cb_enabled(CUPTI_CB_DOMAIN_RESOURCE, cbid)) {
		atomic_fetch_add(&st_resource_cb, 1);
		dispatch(CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd);
	}
	/* with or without a subscriber */
	if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
		/* The range closes: what was not flushed is parked. */
		pthread_mutex_lock(&lock);
		park(state_of((CUcontext)c, false));
		pthread_mutex_unlock(&lock);
	}
	if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
		teardown(c);
}

static uint64_t crc_of(const void *image, size_t size);

static size_t rec_slot(const struct pcs_state *s, uint64_t crc, uint32_t fidx, uint64_t off,
		       uint32_t corr)
{
	uint64_t h = (crc ^ (off * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)fidx << 32) ^ corr) *
		     0xff51afd7ed558ccdull;
	return (size_t)(h ^ (h >> 29)) & (s->n_slots - 1);
}

/* Slot of the pending record with this key, or the empty slot for it. */
static uint32_t *rec_find(struct pcs_state *s, uint64_t crc, uint32_t fidx, uint64_t off,
			  uint32_t corr)
{
	for (size_t i = rec_slot(s, crc, fidx, off, corr);; i = (i + 1) & (s->n_slots - 1)) {
		uint32_t v = s->slots[i];
		if (!v)
			return &s->slots[i];
		struct pcrec *r = &s->recs[v - 1];
		if (r->crc == crc && r->fidx == fidx && r->off == off && r->corr == corr)
			return &s->slots[i]; /* pending, or already read (stale) */
	}
}

static void rec_rehash(struct pcs_state *s)
{
	size_t need = (s->n_recs + 1) * 2;
	if (s->n_slots >= need && s->n_recs)
		return;
	size_t n = s->n_slots ? s->n_slots : 1024;
	while (n < need)
		n *= 2;
	free(s->slots);
	s->slots = calloc(n, sizeof(*s->slots));
	s->n_slots = n;
	for (size_t i = s->read_pos; i < s->n_recs; i++) {
		struct pcrec *r = &s->recs[i];
		*rec_find(s, r->crc, r->fidx, r->off, r->corr) = (uint32_t)i + 1;
	}
}

static struct pcrec *rec_for(struct pcs_state *s, struct fake_func *f, uint64_t off, uint32_t corr)
{
	uint64_t crc = crc_of(f->mod->image, f->mod->size);
	uint64_t cap = (s->scratch ? s->scratch : (1u << 20)) * 5500 / (1u << 20);

	if (!s->n_slots || (s->n_recs + 1) * 2 > s->n_slots)
		rec_rehash(s);
	uint32_t *slot = rec_find(s, crc, f->index, off, corr);
	if (*slot && *slot - 1 >= s->read_pos)
		return &s->recs[*slot - 1];
	if (s->n_recs - s->read_pos >= cap) {
		s->scratch_full = true; /* sticky until Disable + Enable */
		atomic_fetch_add(&st_scratch_full, 1);
		return NULL;
	}
	if (s->n_recs == s->cap_recs) {
		s->cap_recs = s->cap_recs ? s->cap_recs * 2 : 64;
		s->recs = realloc(s->recs, s->cap_recs * sizeof(*s->recs));
	}
	struct pcrec *r = &s->recs[s->n_recs++];
	memset(r, 0, sizeof(*r));
	r->crc = crc;
	r->off = off;
	r->fidx = f->index;
	r->corr = corr;
	r->f = f;
	*slot = (uint32_t)(s->n_recs - 1) + 1;
	return r;
}

static bool sampling_active(const struct pcs_state *s)
{
	return s && s->enabled && s->configured && (!s->start_stop || s->started);
}

/* The kernel "runs": FAKE_CUPTI_SAMPLES warp samples over a few PCs. */
static void run_kernel(struct fake_ctx *c, struct fake_func *f, uint32_t corr)
{
	static int per_launch = -1;
	static uint64_t spread;
	struct pcs_state *s;
	const struct table *t = table_for(c);
	uint64_t limit;

	if (per_launch < 0) {
		const char *e = getenv("FAKE_CUPTI_SAMPLES");
		per_launch = e ? atoi(e) : 40;
		e = getenv("FAKE_CUPTI_PC_SPREAD");
		spread = e ? strtoull(e, NULL, 0) : 0;
	}
	pthread_mutex_lock(&lock);
	s = state_of((CUcontext)c, false);
	if (!sampling_active(s) || !s->n_selected) {
		pthread_mutex_unlock(&lock);
		return;
	}
	if (s->mode == CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED) {
		/* a range per kernel: the last kernel's, if not flushed, is parked */
		park(s);
		s->range++;
	}
	s->pend_nonuser += 1; /* a little non-user kernel noise per launch */
	s->pend_total += 1;
	limit = getenv("FAKE_CUPTI_HWFULL_AFTER")
		    ? strtoull(getenv("FAKE_CUPTI_HWFULL_AFTER"), NULL, 0)
		    : 500;
	for (int k = 0; k < per_launch; k++) {
		uint64_t npc = f->size / 16 < 4 ? (f->size / 16 ? f->size / 16 : 1) : 4;
		uint64_t off = ((rnd() % npc) * 7 % (f->size / 16 ? f->size / 16 : 1)) * 16;
		if (spread)
			off = (rnd() % spread) * 16;
		int slot = t->base_slot[rnd() % t->n_base], twin = twin_slot(t, slot);
		bool sel = false;

		for (size_t i = 0; i < s->n_selected; i++)
			sel |= s->selected[i] == (uint32_t)slot;
		s->pend_total++;
		atomic_fetch_add(&st_generated, 1);
		if (s->hw_full) {
			s->pend_dropped++;
			atomic_fetch_add(&st_dropped, 1);
			continue;
		}
		if (failing("hwfull") && hwfull_fired < hwfull_times && ++s->since_drain > limit) {
			s->hw_full = true; /* sticky until Disable + Enable */
			hwfull_fired++;    /* FAKE_CUPTI_HWFULL_TIMES per process */
			atomic_fetch_add(&st_hwfull, 1);
			s->pend_dropped++;
			atomic_fetch_add(&st_dropped, 1);
			continue;
		}
		if (!sel)
			continue;
		struct pcrec *r =
		    s->scratch_full
			? NULL
			: rec_for(s, f, off,
				  s->mode == CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED ||
					  failing("continuous_corr")
				      ? corr
				      : 0);
		if (!r) {
			atomic_fetch_add(&st_scratch_lost, 1);
			continue;
		}
		r->counts[slot]++;
		if (twin >= 0 && (rnd() & 1))
			r->counts[twin]++;
		if (t->count_slot >= 0)
			r->counts[t->count_slot]++;
	}
	pthread_mutex_unlock(&lock);
}

static int hook_launch(int cbid, const char *api_name, struct fake_ctx *c, struct fake_func *f)
{
	CUpti_CallbackData cd;
	uint32_t corr = atomic_fetch_add(&next_corr, 1);
	bool cb = cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, cbid);
	CUresult ret = CUDA_SUCCESS;

	atomic_fetch_add(&st_launches, 1);
	c->launcher = (unsigned long)pthread_self();
	memset(&cd, 0, sizeof(cd));
	cd.functionName = api_name;
	cd.symbolName = f->name;
	cd.context = (CUcontext)c;
	cd.contextUid = c->uid;
	cd.correlationId = corr;
	cd.callbackSite = CUPTI_API_ENTER;
	if (cb) {
		atomic_fetch_add(&st_launch_cb, 1);
		dispatch(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
	}
	__atomic_add_fetch(&c->launches, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&c->running, 1, __ATOMIC_SEQ_CST);
	run_kernel(c, f, corr);
	if (getenv("FAKE_CUPTI_KERNEL_MS")) /* the kernel runs that long */
		usleep((useconds_t)(atof(getenv("FAKE_CUPTI_KERNEL_MS")) * 1000));
	__atomic_sub_fetch(&c->running, 1, __ATOMIC_SEQ_CST);
	cd.callbackSite = CUPTI_API_EXIT;
	cd.functionReturnValue = &ret;
	at_exit_site = true;
	if (cb)
		dispatch(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
	at_exit_site = false;
	return 0;
}

static const struct fake_cupti_hooks hooks = { hook_resource, hook_launch };

/* ---- PC sampling API --------------------------------------------------- */
#define CHECK_SIZE(p, sz)                                     \
	do {                                                  \
		if (!(p) || (p)->size != (sz)) {              \
			atomic_fetch_add(&st_bad_size, 1);    \
			return CUPTI_ERROR_INVALID_PARAMETER; \
		}                                             \
	} while (0)

/* Lookup for calls that need a prior Enable on ctx. */
#define NEED_ENABLED(s, ctx)                                  \
	do {                                                  \
		if (!ctx_ok(ctx))                             \
			return CUPTI_ERROR_INVALID_PARAMETER; \
		(s) = state_of(ctx, false);                   \
		if (!(s) || !(s)->enabled) {                  \
			atomic_fetch_add(&st_order_err, 1);   \
			return CUPTI_ERROR_INVALID_OPERATION; \
		}                                             \
	} while (0)

/* Neither the thread that created ctx nor the one that last launched on it. */
static bool off_thread(CUcontext ctx)
{
	const struct fake_ctx *fc = (const struct fake_ctx *)ctx;
	unsigned long me = (unsigned long)pthread_self();

	return me != fc->creator && me != fc->launcher;
}

/* FAKE_CUPTI_FAIL=inflight: a kernel of ctx is running (counted refused). */
static bool in_flight(CUcontext ctx)
{
	if (!failing("inflight") ||
	    !__atomic_load_n(&((struct fake_ctx *)ctx)->running, __ATOMIC_SEQ_CST))
		return false;
	atomic_fetch_add(&st_inflight_refused, 1);
	return true;
}

API CUptiResult cuptiPCSamplingEnable(CUpti_PCSamplingEnableParams *p)
{
	struct pcs_state *s;
	CUptiResult r = CUPTI_SUCCESS;

	COUNT(C_PCEnable);
	CHECK_SIZE(p, CUpti_PCSamplingEnableParamsSize);
	if (!ctx_ok(p->ctx))
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (failing("privileges"))
		return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
	if (failing("busy"))
		return CUPTI_ERROR_HARDWARE_BUSY;
	if (failing("unsupported"))
		return CUPTI_ERROR_NOT_SUPPORTED;
	if (failing("enable_oom"))
		return CUPTI_ERROR_OUT_OF_MEMORY;
	if ((failing("enable_offthread") || failing("offthread")) && off_thread(p->ctx)) {
		atomic_fetch_add(&st_enable_offthread, 1);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	if (in_flight(p->ctx))
		return CUPTI_ERROR_UNKNOWN;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i].ctx && ctxs[i].enabled && ctxs[i].ctx != (struct fake_ctx *)p->ctx &&
		    ctxs[i].ctx->device == ((struct fake_ctx *)p->ctx)->device)
			r = CUPTI_ERROR_INVALID_OPERATION; /* one sampled context per GPU */
	s = state_of(p->ctx, true);
	if (r == CUPTI_SUCCESS && s && s->enabled)
		r = CUPTI_ERROR_INVALID_OPERATION;
	if (r == CUPTI_SUCCESS && s) {
		struct fake_ctx *c = s->ctx;
		memset(s, 0, sizeof(*s));
		s->ctx = c;
		s->enabled = true;
		s->mode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
		s->period = 13;
		atomic_fetch_add(&st_enable_ok, 1);
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* CUPTI's own CUpti_PCSamplingPCData stride: correlationId came with API
 * v22 (CUDA 12.4: cupti_version.h:114 lists "v22 : CUDA Toolkit 12.4";
 * cupti_pcsampling.h:159-163 is the field), taking the struct from 56 to 64
 * bytes.  CUPTI walks the client's array with its own stride, not with the
 * records' size fields, so a client that allocated the other layout reads
 * garbage (or has its heap overrun); data_ok refuses it here. */
static size_t pc_stride(void)
{
	return version >= 22 ? 64 : 56;
}

/* Copy pending records into d, with CUPTI's stride. */
static void copy_out(struct pcs_state *s, CUpti_PCSamplingData *d, bool once_totals)
{
	const struct table *t = table_for(s->ctx);
	size_t n = 0;
	char *base = (char *)d->pPcData;
	size_t stride = pc_stride();
	struct {
		const struct fake_func *f;
		char *s;
	} fresh[16];
	size_t n_fresh = 0;
	bool per_call = failing("names_per_getdata");

	while (s->read_pos < s->n_recs && n < d->collectNumPcs) {
		struct pcrec *r = &s->recs[s->read_pos++];
		CUpti_PCSamplingPCData *o = (CUpti_PCSamplingPCData *)(base + n * stride);
		size_t k = 0;
		char *name = NULL;

		/* names_per_getdata: a fresh string per function and call */
		for (size_t i = 0; i < n_fresh && !name; i++)
			if (fresh[i].f == r->f)
				name = fresh[i].s;
		if (!name && per_call && n_fresh < sizeof(fresh) / sizeof(*fresh)) {
			name = strdup(r->f->name);
			fresh[n_fresh].f = r->f;
			fresh[n_fresh++].s = name;
			atomic_fetch_add(&st_names_fresh, 1);
		}
		for (size_t i = 0; i < n_names && !name; i++)
			if (names[i].f == r->f) {
				name = names[i].s;
				/* A client that freed it already (e.g. at Disable)
				 * reads and frees it again from here on. */
				if (strcmp(name, r->f->name))
					atomic_fetch_add(&st_names_freed_early, 1);
			}
		if (!name) {
			name = strdup(r->f->name);
			names = realloc(names, (n_names + 1) * sizeof(*names));
			names[n_names].f = r->f;
			names[n_names++].s = name;
		}
		o->cubinCrc = r->crc;
		o->pcOffset = r->off;
		o->functionIndex = r->fidx;
		o->pad = 0;
		o->functionName = name;
		for (size_t i = 0; i < s->n_selected; i++) {
			uint32_t slot = s->selected[i];
			if (!r->counts[slot])
				continue;
			o->stallReason[k].pcSamplingStallReasonIndex = t->idx[slot];
			o->stallReason[k].samples = r->counts[slot];
			if (slot != (uint32_t)t->count_slot &&
			    !strstr(t->name[slot], "_not_issued"))
				atomic_fetch_add(&st_delivered, r->counts[slot]);
			k++;
		}
		o->stallReasonCount = k;
		if (stride >= 60)
			o->correlationId = r->corr;
		n++;
	}
	d->totalNumPcs = n;
	d->remainingNumPcs = s->n_recs - s->read_pos;
	d->rangeId = s->range;
	if (once_totals) {
		d->totalSamples = s->pend_total;
		d->droppedSamples = s->pend_dropped;
		if (d->size > offsetof(CUpti_PCSamplingData, nonUsrKernelsTotalSamples))
			d->nonUsrKernelsTotalSamples = s->pend_nonuser;
		s->pend_total = s->pend_dropped = s->pend_nonuser = 0;
	} else {
		d->totalSamples = d->droppedSamples = 0;
		if (d->size > offsetof(CUpti_PCSamplingData, nonUsrKernelsTotalSamples))
			d->nonUsrKernelsTotalSamples = 0;
	}
	if (s->read_pos == s->n_recs)
		s->read_pos = s->n_recs = 0;
	if (!s->n_recs && s->slots)
		memset(s->slots, 0, s->n_slots * sizeof(*s->slots));
}

/* "When hardware buffer is full, user will get pc data as 0"
 * (cupti_pcsampling.h:236-239): the pending records come out with every
 * field but size and the stall-reason array pointer zeroed. */
static void zero_out(struct pcs_state *s, CUpti_PCSamplingData *d)
{
	size_t n = s->n_recs - s->read_pos;

	if (n > d->collectNumPcs)
		n = d->collectNumPcs;
	for (size_t i = 0; i < n; i++) {
		CUpti_PCSamplingPCData *o = (void *)((char *)d->pPcData + i * pc_stride());
		CUpti_PCSamplingStallReason *sr = o->stallReason;
		memset(o, 0, pc_stride());
		o->size = pc_stride();
		o->stallReason = sr;
	}
	d->totalNumPcs = n;
	d->remainingNumPcs = 0;
	atomic_fetch_add(&st_zero_pcs, n);
}

static size_t min_data_size(void)
{
	if (version >= 19)
		return offsetof(CUpti_PCSamplingData, hardwareBufferFull) + 1;
	if (version >= 16)
		return offsetof(CUpti_PCSamplingData, nonUsrKernelsTotalSamples) + 8;
	return offsetof(CUpti_PCSamplingData, pPcData) + 8;
}

/* Client buffer checks: data and per-PC sizes for this API version. */
static bool data_ok(CUpti_PCSamplingData *d, size_t n_selected)
{
	if (!d || d->size < min_data_size() || d->size > sizeof(*d) || !d->pPcData ||
	    !d->collectNumPcs)
		return false;
	for (size_t i = 0; i < d->collectNumPcs; i++) {
		CUpti_PCSamplingPCData *p = (void *)((char *)d->pPcData + i * pc_stride());
		if (p->size != pc_stride())
			return false;
		if (n_selected && !p->stallReason)
			return false;
	}
	return true;
}

API CUptiResult cuptiPCSamplingGetData(CUpti_PCSamplingGetDataParams *p)
{
	struct pcs_state *s;
	CUpti_PCSamplingData *d;
	CUptiResult r = CUPTI_SUCCESS;

	COUNT(C_PCGetData);
	CHECK_SIZE(p, CUpti_PCSamplingGetDataParamsSize);
	if (!ctx_ok(p->ctx))
		atomic_fetch_add(&st_dead_ctx_calls, 1); /* called on a destroyed context */
	if (getenv("FAKE_CUPTI_GETDATA_MS"))
		usleep((useconds_t)atoi(getenv("FAKE_CUPTI_GETDATA_MS")) * 1000);
	if (ctx_ok(p->ctx) && failing("offthread") && off_thread(p->ctx)) {
		atomic_fetch_add(&st_offthread_refused, 1);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	if (ctx_ok(p->ctx) && in_flight(p->ctx))
		return CUPTI_ERROR_UNKNOWN;
	pthread_mutex_lock(&lock);
	if (!ctx_ok(p->ctx) || !(s = state_of(p->ctx, false)) || !s->enabled || !s->configured) {
		atomic_fetch_add(&st_order_err, 1);
		pthread_mutex_unlock(&lock);
		return ctx_ok(p->ctx) ? CUPTI_ERROR_INVALID_OPERATION
				      : CUPTI_ERROR_INVALID_PARAMETER;
	}
	d = p->pcSamplingData;
	if (!data_ok(d, s->n_selected)) {
		atomic_fetch_add(&st_bad_size, 1);
		pthread_mutex_unlock(&lock);
		return CUPTI_ERROR_INVALID_PARAMETER;
	}
	/* GetData into the configured buffer itself is allowed: NVIDIA's
	 * pc_sampling_start_stop sample does it. */
	if (s->scratch_full) {
		d->totalNumPcs = d->remainingNumPcs = 0;
		if (d->size > offsetof(CUpti_PCSamplingData, hardwareBufferFull))
			d->hardwareBufferFull = 0;
		r = CUPTI_ERROR_OUT_OF_MEMORY;
	} else if (s->hw_full) {
		d->totalNumPcs = 0;
		d->remainingNumPcs = 0;
		d->totalSamples = s->pend_total;
		d->droppedSamples = s->pend_dropped;
		s->pend_total = s->pend_dropped = 0;
		if (d->size > offsetof(CUpti_PCSamplingData, hardwareBufferFull))
			d->hardwareBufferFull = 1;
		r = CUPTI_ERROR_OUT_OF_MEMORY;
	} else {
		bool first = s->read_pos == 0;
		copy_out(s, d, first);
		if (d->size > offsetof(CUpti_PCSamplingData, hardwareBufferFull))
			d->hardwareBufferFull = 0;
		s->since_drain = 0;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

API CUptiResult cuptiPCSamplingDisable(CUpti_PCSamplingDisableParams *p)
{
	struct pcs_state *s;

	COUNT(C_PCDisable);
	CHECK_SIZE(p, CUpti_PCSamplingDisableParamsSize);
	if (ctx_ok(p->ctx)) {
		const struct fake_ctx *fc = (const struct fake_ctx *)p->ctx;
		unsigned long me = (unsigned long)pthread_self();
		bool off = failing("offthread") && off_thread(p->ctx);
		if (off || in_flight(p->ctx) || failing("disable")) {
			atomic_fetch_add(&st_disable_refused, 1);
			return off ? CUPTI_ERROR_INVALID_OPERATION : CUPTI_ERROR_UNKNOWN;
		}
		if (me == fc->creator || me == fc->launcher)
			atomic_fetch_add(&st_disable_app_thread, 1);
	}
	pthread_mutex_lock(&lock);
	if (!ctx_ok(p->ctx))
		atomic_fetch_add(&st_dead_ctx_calls, 1);
	if (!ctx_ok(p->ctx) || !(s = state_of(p->ctx, false)) || !s->enabled) {
		atomic_fetch_add(&st_order_err, 1);
		pthread_mutex_unlock(&lock);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	if (s->cfg_buf && s->hw_full && data_ok(s->cfg_buf, s->n_selected))
		zero_out(s, s->cfg_buf);
	else if (s->cfg_buf && !s->scratch_full && data_ok(s->cfg_buf, s->n_selected))
		copy_out(s, s->cfg_buf, true);
	s->enabled = s->configured = s->started = false;
	s->hw_full = s->scratch_full = false;
	s->n_recs = s->read_pos = 0; /* what did not fit the buffer is discarded */
	if (s->slots)
		memset(s->slots, 0, s->n_slots * sizeof(*s->slots));
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiPCSamplingGetNumStallReasons(CUpti_PCSamplingGetNumStallReasonsParams *p)
{
	struct pcs_state *s;

	COUNT(C_PCGetNumStallReasons);
	CHECK_SIZE(p, CUpti_PCSamplingGetNumStallReasonsParamsSize);
	if (!p->numStallReasons)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*p->numStallReasons = 0; /* what real CUPTI answers before Enable */
	NEED_ENABLED(s, p->ctx);
	*p->numStallReasons = table_for(s->ctx)->n;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiPCSamplingGetStallReasons(CUpti_PCSamplingGetStallReasonsParams *p)
{
	struct pcs_state *s;
	const struct table *t;

	COUNT(C_PCGetStallReasons);
	CHECK_SIZE(p, CUpti_PCSamplingGetStallReasonsParamsSize);
	NEED_ENABLED(s, p->ctx);
	t = table_for(s->ctx);
	if (p->numStallReasons != t->n || !p->stallReasonIndex || !p->stallReasons)
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (size_t i = 0; i < t->n; i++) {
		if (!p->stallReasons[i])
			return CUPTI_ERROR_INVALID_PARAMETER;
		p->stallReasonIndex[i] = t->idx[i];
		memcpy(p->stallReasons[i], t->name[i], CUPTI_STALL_REASON_STRING_SIZE);
	}
	return CUPTI_SUCCESS;
}

static CUptiResult set_one(struct pcs_state *s, CUpti_PCSamplingConfigurationInfo *a)
{
	const struct table *t = table_for(s->ctx);

	switch (a->attributeType) {
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD:
		if (a->attributeData.samplingPeriodData.samplingPeriod < 5 ||
		    a->attributeData.samplingPeriodData.samplingPeriod > 31)
			return CUPTI_ERROR_INVALID_OPERATION;
		s->period = a->attributeData.samplingPeriodData.samplingPeriod;
		atomic_store(&st_period, s->period);
		return CUPTI_SUCCESS;
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON: {
		size_t n = a->attributeData.stallReasonData.stallReasonCount;
		uint32_t *idx = a->attributeData.stallReasonData.pStallReasonIndex;
		if (!n || n > t->n || !idx)
			return CUPTI_ERROR_INVALID_OPERATION;
		s->n_selected = 0;
		for (size_t i = 0; i < n; i++) {
			size_t slot = t->n;
			for (size_t k = 0; k < t->n; k++)
				if (t->idx[k] == idx[i])
					slot = k;
			if (slot == t->n)
				return CUPTI_ERROR_INVALID_OPERATION; /* index not in this GPU's table */
			s->selected[s->n_selected++] = slot;
		}
		return CUPTI_SUCCESS;
	}
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE:
		s->scratch = a->attributeData.scratchBufferSizeData.scratchBufferSize;
		atomic_store(&st_scratch_bytes, s->scratch);
		return CUPTI_SUCCESS;
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE:
		s->hwbuf = a->attributeData.hardwareBufferSizeData.hardwareBufferSize;
		atomic_store(&st_hwbuf_bytes, s->hwbuf);
		return CUPTI_SUCCESS;
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE: {
		uint32_t m = a->attributeData.collectionModeData.collectionMode;
		if (m != CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS &&
		    m != CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED)
			return CUPTI_ERROR_INVALID_OPERATION;
		s->mode = m;
		return CUPTI_SUCCESS;
	}
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL:
		s->start_stop =
		    a->attributeData.enableStartStopControlData.enableStartStopControl != 0;
		return CUPTI_SUCCESS;
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT:
		return a->attributeData.outputDataFormatData.outputDataFormat ==
			       CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED
			   ? CUPTI_SUCCESS
			   : CUPTI_ERROR_INVALID_OPERATION;
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER:
		s->cfg_buf = a->attributeData.samplingDataBufferData.samplingDataBuffer;
		return s->cfg_buf ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_OPERATION;
	case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN:
		if (version < 19) /* came with CUDA 12.0 */
			return CUPTI_ERROR_INVALID_PARAMETER;
		atomic_store(&st_sleep_ms, a->attributeData.workerThreadPeriodicSleepSpanData
					       .workerThreadPeriodicSleepSpan);
		return CUPTI_SUCCESS;
	default:
		return CUPTI_ERROR_INVALID_PARAMETER;
	}
}

API CUptiResult cuptiPCSamplingSetConfigurationAttribute(CUpti_PCSamplingConfigurationInfoParams *p)
{
	struct pcs_state *s;
	CUptiResult r = CUPTI_SUCCESS;

	COUNT(C_PCSetConfig);
	CHECK_SIZE(p, CUpti_PCSamplingConfigurationInfoParamsSize);
	if (!p->pPCSamplingConfigurationInfo || !p->numAttributes)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	if (!ctx_ok(p->ctx) || !(s = state_of(p->ctx, false)) || !s->enabled) {
		atomic_fetch_add(&st_order_err, 1);
		pthread_mutex_unlock(&lock);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	for (size_t i = 0; i < p->numAttributes; i++) {
		CUpti_PCSamplingConfigurationInfo *a = &p->pPCSamplingConfigurationInfo[i];
		a->attributeStatus = set_one(s, a);
		if (a->attributeStatus != CUPTI_SUCCESS)
			r = a->attributeStatus;
	}
	if (r == CUPTI_SUCCESS && !s->n_selected) {
		/* default: every reason */
		for (size_t k = 0; k < table_for(s->ctx)->n; k++)
			s->selected[s->n_selected++] = k;
	}
	/* FAKE_CUPTI_FAIL=idle: sampling that starts here (no start/stop
	 * control) on a GPU not idle for this thread is refused, as Start is. */
	if (r == CUPTI_SUCCESS && !s->start_stop && failing("idle") &&
	    !fake_drv_idle((const struct fake_ctx *)p->ctx)) {
		atomic_fetch_add(&st_start_busy, 1);
		r = CUPTI_ERROR_UNKNOWN;
	}
	if (r == CUPTI_SUCCESS)
		s->configured = true;
	pthread_mutex_unlock(&lock);
	return r;
}

API CUptiResult cuptiPCSamplingGetConfigurationAttribute(CUpti_PCSamplingConfigurationInfoParams *p)
{
	struct pcs_state *s;

	COUNT(C_PCGetConfig);
	CHECK_SIZE(p, CUpti_PCSamplingConfigurationInfoParamsSize);
	NEED_ENABLED(s, p->ctx);
	for (size_t i = 0; i < p->numAttributes; i++) {
		CUpti_PCSamplingConfigurationInfo *a = &p->pPCSamplingConfigurationInfo[i];
		a->attributeStatus = CUPTI_SUCCESS;
		switch (a->attributeType) {
		case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD:
			a->attributeData.samplingPeriodData.samplingPeriod = s->period;
			break;
		case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE:
			a->attributeData.collectionModeData.collectionMode = s->mode;
			break;
		case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE:
			/* "DEFAULT - 512 MB" (cupti_pcsampling.h:288-296) */
			a->attributeData.hardwareBufferSizeData.hardwareBufferSize =
			    s->hwbuf ? s->hwbuf : (512ull << 20);
			break;
		case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL:
			a->attributeData.enableStartStopControlData.enableStartStopControl =
			    s->start_stop;
			break;
		default:
			a->attributeStatus = CUPTI_ERROR_INVALID_PARAMETER;
		}
	}
	return CUPTI_SUCCESS;
}

/* Start and Stop share their checks; Stop closes a range. */
static CUptiResult start_stop(CUcontext ctx, bool start)
{
	struct pcs_state *s;

	NEED_ENABLED(s, ctx);
	if (!s->start_stop || s->started == start)
		return CUPTI_ERROR_INVALID_OPERATION;
	/* "CUPTI requires the GPU to be idle before starting PC sampling"
	 * (parcagpu): a cuCtxSynchronize on this thread since the last launch. */
	if (start && !fake_drv_idle((const struct fake_ctx *)ctx)) {
		atomic_fetch_add(&st_start_busy, 1);
		return CUPTI_ERROR_UNKNOWN;
	}
	if (start && !off_thread(ctx))
		atomic_fetch_add(&st_start_app_thread, 1);
	s->started = start;
	if (!start)
		s->range++;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiPCSamplingStart(CUpti_PCSamplingStartParams *p)
{
	COUNT(C_PCStart);
	CHECK_SIZE(p, CUpti_PCSamplingStartParamsSize);
	return start_stop(p->ctx, true);
}

API CUptiResult cuptiPCSamplingStop(CUpti_PCSamplingStopParams *p)
{
	COUNT(C_PCStop);
	CHECK_SIZE(p, CUpti_PCSamplingStopParamsSize);
	return start_stop(p->ctx, false);
}

/* ---- offline ----------------------------------------------------------- */
static uint32_t crc32_own(const uint8_t *p, size_t n)
{
	uint32_t c = ~0u;

	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

static CUpti_ComputeCrcCallbackFunc crc_cb;

API CUptiResult cuptiRegisterComputeCrcCallback(CUpti_ComputeCrcCallbackFunc fn)
{
	if (!fn)
		return CUPTI_ERROR_INVALID_PARAMETER;
	crc_cb = fn;
	return CUPTI_SUCCESS;
}

/* Sparse, like the real cuptiGetCubinCrc: header, size, a byte per 4 KiB. */
static uint64_t sparse_crc(const uint8_t *p, size_t n)
{
	uint8_t buf[64 + 8 + 4096];
	size_t k = n < 64 ? n : 64;

	memcpy(buf, p, k);
	memcpy(buf + k, &n, sizeof(n));
	k += sizeof(n);
	for (size_t off = 4096; off < n && k < sizeof(buf); off += 4096)
		buf[k++] = p[off];
	return crc32_own(buf, k);
}

static uint64_t cupti_crc(const void *image, size_t size);

/* cubinCrc of PC records: the registered callback's value, else CUPTI's. */
static uint64_t crc_of(const void *image, size_t size)
{
	static struct {
		const void *image;
		uint64_t crc;
	} cache[64];
	uint64_t crc = 0;

	static unsigned n_images;

	for (int i = 0; i < 64; i++)
		if (cache[i].image == image)
			return cache[i].crc;
	/* crc_some: the callback honoured for every second module only */
	if (crc_cb && !(failing("crc_some") && (n_images++ & 1))) {
		crc_cb(image, size, &crc);
	} else {
		crc = cupti_crc(image, size);
		if (crc_cb)
			atomic_fetch_add(&st_crc_not_honoured, 1);
	}
	for (int i = 0; i < 64; i++)
		if (!cache[i].image) {
			cache[i].image = image;
			cache[i].crc = crc;
			break;
		}
	return crc;
}

/* cuptiGetCubinCrc: the real library's when it is there, else as sparse. */
static uint64_t cupti_crc(const void *image, size_t size)
{
	static CUptiResult (*real)(CUpti_GetCubinCrcParams *);
	static int tried;
	CUpti_GetCubinCrcParams p = { .size = CUpti_GetCubinCrcParamsSize };

	if (!tried) {
		const char *path = getenv("FAKE_CUPTI_REAL");
		void *h;
		tried = 1;
		if (!path)
			path = "/usr/local/cuda/lib64/libcupti.so.13";
		if (*path && (h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			*(void **)&real = dlsym(h, "cuptiGetCubinCrc");
	}
	p.cubin = image;
	p.cubinSize = size;
	if (real && real(&p) == CUPTI_SUCCESS)
		return p.cubinCrc;
	return sparse_crc(image, size);
}

API CUptiResult cuptiGetCubinCrc(CUpti_GetCubinCrcParams *p)
{
	COUNT(C_GetCubinCrc);
	CHECK_SIZE(p, CUpti_GetCubinCrcParamsSize);
	if (!p->cubin || p->cubinSize < 64)
		return CUPTI_ERROR_INVALID_PARAMETER;
	p->cubinCrc = cupti_crc(p->cubin, p->cubinSize);
	return CUPTI_SUCCESS;
}

/* ---- lifecycle --------------------------------------------------------- */
API uint64_t fake_cupti_calls(const char *name)
{
	for (int i = 0; i < C_NR; i++)
		if (!strcmp(call_names[i], name))
			return atomic_load(&calls[i]);
	return ~0ull;
}

static void write_stats(void)
{
	const char *path = getenv("FAKE_CUPTI_STATS");
	/* the start/stop, idle and finalize rules' counters */
	static const struct {
		const char *key;
		_Atomic uint64_t *n;
	} rules[] = {
		{ "start_busy_refused", &st_start_busy },
		{ "start_app_thread", &st_start_app_thread },
		{ "finalize_at_exit_site", &st_finalize_exit },
		{ "finalize_elsewhere", &st_finalize_elsewhere },
		{ "finalize_while_enabled", &st_finalize_enabled },
		{ "subscribe_after_finalize", &st_sub_after_finalize },
		{ "names_per_getdata", &st_names_fresh },
		{ "crc_not_honoured", &st_crc_not_honoured },
	};
	uint64_t pcs = 0;
	FILE *f;

	if (!path || !(f = fopen(path, "w")))
		return;
	for (int i = 0; i < C_NR; i++) {
		fprintf(f, "call.%s %llu\n", call_names[i],
			(unsigned long long)atomic_load(&calls[i]));
		if (!strncmp(call_names[i], "cuptiPCSampling", 15))
			pcs += atomic_load(&calls[i]);
	}
	fprintf(f, "pcsampling_calls %llu\n", (unsigned long long)pcs);
	fprintf(f, "green_current_refused %u\n", fake_cuda_green_refused());
	fprintf(f, "launches %llu\n", (unsigned long long)atomic_load(&st_launches));
	fprintf(f, "launch_callbacks %llu\n", (unsigned long long)atomic_load(&st_launch_cb));
	fprintf(f, "resource_callbacks %llu\n", (unsigned long long)atomic_load(&st_resource_cb));
	fprintf(f, "samples_generated %llu\n", (unsigned long long)atomic_load(&st_generated));
	fprintf(f, "samples_delivered %llu\n", (unsigned long long)atomic_load(&st_delivered));
	fprintf(f, "samples_dropped %llu\n", (unsigned long long)atomic_load(&st_dropped));
	fprintf(f, "hw_buffer_full %llu\n", (unsigned long long)atomic_load(&st_hwfull));
	fprintf(f, "scratch_full %llu\n", (unsigned long long)atomic_load(&st_scratch_full));
	fprintf(f, "names_freed_early %llu\n",
		(unsigned long long)atomic_load(&st_names_freed_early));
	fprintf(f, "enable_offthread_refused %llu\n",
		(unsigned long long)atomic_load(&st_enable_offthread));
	fprintf(f, "inflight_refused %llu\n",
		(unsigned long long)atomic_load(&st_inflight_refused));
	fprintf(f, "disable_refused %llu\n", (unsigned long long)atomic_load(&st_disable_refused));
	fprintf(f, "offthread_refused %llu\n",
		(unsigned long long)atomic_load(&st_offthread_refused));
	for (size_t i = 0; i < sizeof(rules) / sizeof(*rules); i++)
		fprintf(f, "%s %llu\n", rules[i].key, (unsigned long long)atomic_load(rules[i].n));
	fprintf(f, "disable_app_thread %llu\n",
		(unsigned long long)atomic_load(&st_disable_app_thread));
	fprintf(f, "dead_ctx_calls %llu\n", (unsigned long long)atomic_load(&st_dead_ctx_calls));
	fprintf(f, "scratch_lost %llu\n", (unsigned long long)atomic_load(&st_scratch_lost));
	fprintf(f, "zero_pcs %llu\n", (unsigned long long)atomic_load(&st_zero_pcs));
	fprintf(f, "parked_ranges %llu\n", (unsigned long long)atomic_load(&st_parked));
	fprintf(f, "parked_pcs_lost %llu\n", (unsigned long long)atomic_load(&st_parked_lost));
	fprintf(f, "teardown_copies %llu\n", (unsigned long long)atomic_load(&st_teardown_copies));
	fprintf(f, "teardown_pcs %llu\n", (unsigned long long)atomic_load(&st_teardown_pcs));
	fprintf(f, "scratch_bytes %llu\n", (unsigned long long)atomic_load(&st_scratch_bytes));
	fprintf(f, "hwbuf_bytes %llu\n", (unsigned long long)atomic_load(&st_hwbuf_bytes));
	fprintf(f, "sleep_span_ms %llu\n", (unsigned long long)atomic_load(&st_sleep_ms));
	fprintf(f, "period_set %llu\n", (unsigned long long)atomic_load(&st_period));
	fprintf(f, "bad_size %llu\n", (unsigned long long)atomic_load(&st_bad_size));
	fprintf(f, "order_errors %llu\n", (unsigned long long)atomic_load(&st_order_err));
	fprintf(f, "enables %llu\n", (unsigned long long)atomic_load(&st_enable_ok));
	for (size_t i = 0; i < sizeof(sub_stats) / sizeof(*sub_stats) && sub_stats[i].name[0];
	     i++) {
		char key[sizeof(sub_stats[i].name)];
		memcpy(key, sub_stats[i].name, sizeof(key));
		for (char *c = key; *c; c++)
			if (*c == ' ')
				*c = '_';
		fprintf(f, "subscribe_ok.%s %llu\n", key, (unsigned long long)sub_stats[i].ok);
		fprintf(f, "subscribe_refused.%s %llu\n", key,
			(unsigned long long)sub_stats[i].refused);
	}
	fclose(f);
}

__attribute__((constructor)) static void fake_cupti_init(void)
{
	const char *v = getenv("FAKE_CUPTI_VERSION"), *f = getenv("FAKE_CUPTI_FAIL");

	if (v)
		version = strtoul(v, NULL, 0);
	if ((v = getenv("FAKE_CUPTI_DRIVER")))
		driver_branch = strtoul(v, NULL, 0);
	if ((v = getenv("FAKE_CUPTI_HWFULL_TIMES")))
		hwfull_times = strtoul(v, NULL, 0);
	if (f)
		snprintf(fail, sizeof(fail), "%s", f);
	build_table(&tab90, true);
	build_table(&tab_other, false);
	fake_drv_set_hooks(&hooks);
	atexit(write_stats);
}
