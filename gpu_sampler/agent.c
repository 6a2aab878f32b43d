/* SPDX-License-Identifier: MIT */
/*
 * The GPU agent: CUPTI subscription, dormant/armed state machine, per-context
 * PC sampling, records out through USDT.  See agent.h for the model.
 *
 * Locking: one mutex `g.lock` guards the context table, the cubin store and
 * every PC-sampling CUPTI call.  The watcher thread takes it normally.  CUDA
 * application threads (CUPTI callbacks) take it with a bounded wait
 * (lock_bounded): CUPTI may hold its own locks while dispatching a callback,
 * and the watcher may be inside CUPTI holding g.lock, so an unbounded wait
 * could deadlock the job.  On timeout the callback does the minimum without
 * the lock (queue the context, skip the drain) and the watcher catches up.
 * Launch callbacks never take the lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "agent.h"
#include "cupti_api.h"
#include "gpusample/stall.h"
#include "util/hash.h" /* gs_mix64 */
#include "util/hashmap.h"
#include "util/vec.h" /* GS_GROW */

_Static_assert(sizeof(struct gs_gpu_pc) % 8 == 0, "pc entry alignment");
_Static_assert(sizeof(struct gs_gpu_pc_batch) % 8 == 0, "batch alignment");
_Static_assert(sizeof(struct gs_gpu_launch) == 64, "launch record is the BPF scratch prefix");
_Static_assert(sizeof(struct gs_gpu_status) % 8 == 0, "status alignment");
_Static_assert(sizeof(struct gs_gpu_stall_table) % 8 == 0, "stall table alignment");
_Static_assert(sizeof(struct gs_gpu_cubin) % 8 == 0, "cubin alignment");
_Static_assert(GS_CBID_GRAPH_LAUNCH == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch &&
		   GS_CBID_GRAPH_LAUNCH_PTSZ == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
	       "graph launch CBIDs");

/* Options from gpusample (process_vm_writev before it attaches). */
__attribute__((visibility("default"))) volatile struct gs_gpu_agent_cfg gs_agent_cfg = {
	.magic = GS_GPU_CFG_MAGIC,
	.version = GS_GPU_CFG_VERSION,
};

/* 1 while a gpusample session has the agent armed (and GPU sampling is not
 * off process-wide), else 0: read by the device kit's workload so its
 * timed loop starts only once sampling is on. */
__attribute__((visibility("default"))) volatile uint32_t gs_agent_armed;

enum ctx_state { CTX_IDLE = 0, CTX_ARMED = 1, CTX_OFF = 2 };

/* The buffer configured as SAMPLING_DATA_BUFFER.  CUPTI writes into it
 * after the configuration call has returned: at Disable and at the
 * context's teardown ("this API does the PC Sampling tear-down, joins
 * threads and copies PC records in the buffer provided during the PC
 * sampling configuration", cupti_pcsampling.h:617-621, cuptiPCSamplingDisable,
 * which a context's destruction does by itself), and when a range closes
 * unflushed ("Flushing of GPU PC Sampling data is required ... For
 * KERNEL_SERIALIZED, after every kernel ends", cupti_pcsampling.h:529-534).
 * So it lives on the heap, the CUpti_PCSamplingData header with it, and is
 * freed only once CUPTI can no longer write it: after a successful Disable.
 * A context that went away without one (destroyed while the agent's lock
 * was busy, or during process exit) leaves its buffer on g.retired for the
 * life of the process. */
struct cfg_buf {
	struct cfg_buf *next; /* g.retired */
	CUpti_PCSamplingData data;
	void *pcs;
	CUpti_PCSamplingStallReason *sr;
};

struct gs_ctx {
	CUcontext ctx;
	uint32_t uid, device;
	enum ctx_state state;
	uint32_t reason;
	int result;
	char msg[GS_GPU_STATUS_MSG_LEN]; /* why it is off */
	size_t n_reasons;
	uint32_t *reason_idx;
	char (*reason_names)[GS_GPU_STALL_NAME_LEN];
	uint8_t *reason_flags_by_slot; /* GS_GPU_STALL_* per table slot */
	void *get_pcs;                 /* PCData array, stride pcdata_size */
	CUpti_PCSamplingStallReason *get_sr;
	CUpti_PCSamplingData get_data;
	struct cfg_buf *cfg; /* the context's SAMPLING_DATA_BUFFER */
	/* cfg was handed to CUPTI and no Disable has succeeded since: CUPTI may
	 * still write it (free_ctx_buffers retires it instead of freeing). */
	bool cfg_live;
	uint32_t period, mode, seq, overflows;
	uint64_t hwbuf;      /* hardware buffer asked for (bytes); 0: not sized yet */
	uint64_t hwbuf_read; /* as CUPTI reads it back */
	bool in_use;
	/* Enable failed on the watcher thread: arm from the next launch
	 * callback, on an application thread, as Proton and parcagpu do. */
	bool arm_on_launch;
	/* arm_on_launch: when the watcher arms it instead (UINT64_MAX: never,
	 * the agent's thread was refused) */
	uint64_t arm_deadline_ns;
	/* configured with start/stop control; Start succeeded (no Stop since);
	 * Starts refused so far */
	bool start_stop, started;
	uint32_t start_refused;
	/* GetData failed on the watcher thread: drained from the launch EXIT
	 * callbacks of the application's threads instead (every drain_ms),
	 * where NVIDIA's sample drains; a failure there turns it off. */
	bool drain_on_launch;
	uint64_t last_cb_drain_ns;
	/* A green context (cuCtxFromGreenCtx) "can be current to only one
	 * thread at a time" (cuda.h, cuGreenCtxCreate): the watcher never
	 * pushes it; it is armed, drained and disabled from its own launch
	 * callbacks only.  kind_known: asked (on the watcher, once). */
	bool green, kind_known;
	/* green, still enabled at a disarm (no launch since the detach): its
	 * buffers kept, disabled at its next launch (or torn down at exit) */
	bool green_left;
	/* DESTROY_STARTING came while g.lock was busy: the context is gone for
	 * CUPTI; set without the lock, reaped (no CUPTI call) under it. */
	_Atomic bool gone;
};

/* A module loaded while g.lock was busy: copied without the lock, added to
 * the store by the watcher (a cubin must never be dropped). */
struct pending_cubin {
	struct pending_cubin *next;
	CUcontext ctx;
	void *copy;
	size_t size;
	uint32_t module_id;
	bool unloaded;
};

struct gs_cubin {
	uint64_t crc;
	/* CUPTI's own CRC of it, when CUPTI may key its PC records with that
	 * (cubin_alias); 0: none */
	uint64_t alias_crc;
	void *copy;
	size_t size;
	uint32_t module_id, ctx_uid, device, flags;
};

static struct {
	pthread_mutex_t lock;
	struct gs_cupti api;
	bool cupti_ok, subscribed, exiting, forked;
	bool shared;          /* subscribed asking for the multi-subscriber mode (13.3+) */
	_Atomic bool cb_live; /* subscribed: callbacks of an old subscription are ignored */
	/* Another subscriber holds CUPTI while a session wants it armed:
	 * its name as CUPTI gave it, whether that was reported, last try. */
	char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN];
	int holder_result;
	bool holder_reported;
	bool refused_reported; /* every context refused: process OFF said */
	uint64_t sub_try_ns;
	bool own_crc; /* CUPTI stamps gs_cubin_hash into PC records (registered) */
	CUpti_SubscriberHandle sub;
	/* process-wide failure: GPU sampling off */
	uint32_t off_reason;
	int off_result;
	char off_msg[GS_GPU_STATUS_MSG_LEN];
	struct gs_agent_opts env_opts, opts;
	struct gs_ctx ctx[GS_AGENT_MAX_CTX];
	_Atomic(CUcontext) pending[GS_AGENT_MAX_CTX]; /* contexts seen without the lock */
	_Atomic(struct pending_cubin *) pending_cubins;
	struct gs_cubin *cubins;
	size_t n_cubins, cap_cubins, cubin_bytes;
	struct gs_hmap names;    /* CUPTI-allocated function name -> its hash (freed at exit) */
	struct cfg_buf *retired; /* configured buffers CUPTI may still write: never freed */
	uint32_t n_retired;
	bool armed, launch_cb_on;
	/* Detach asked: armed contexts are drained and disabled in their next
	 * launch EXIT callback, on an application thread; the watcher does the
	 * rest at disarm_deadline_ns (GS_AGENT_DISARM_WAIT_MS) or once none is
	 * armed. */
	_Atomic bool disarming;
	uint64_t disarm_deadline_ns;
	bool arming_in_launch; /* ctx_enable runs in a launch callback */
	/* Disarmed in subscribe=arm: cuptiFinalize waits for the exit site of
	 * the next launch (finalize_in_launch) until finalize_deadline_ns, then
	 * the watcher unsubscribes instead. */
	_Atomic bool finalize_pending;
	uint64_t finalize_deadline_ns;
	/* green contexts left sampling by a disarm: CUPTI is kept (launch
	 * callbacks on) until the last is disabled at its launch */
	_Atomic uint32_t green_left;
	uint32_t session, reported_session;
	uint64_t last_drain_ns, last_rate_ns, last_rate_launches;
	/* counters (status) */
	uint64_t batches, samples, dropped, hw_full, scratch_full, records_failed;
	_Atomic uint64_t flush_missed; /* serialized flushes that missed g.lock */
	uint64_t zero_records;         /* all-zero PC records after an overflow, skipped */
	uint64_t names_past_cap;       /* functionName pointers not kept (GS_AGENT_MAX_NAMES) */
	_Atomic uint64_t launches, launch_events;
	_Atomic uint32_t launch_every, launch_seq;
	uint64_t recbuf[GS_GPU_REC_MAX / 8];
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const CUpti_CallbackId launch_cbids[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Bounded wait for g.lock from an application thread (see top comment). */
static bool lock_bounded(int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	return pthread_mutex_timedlock(&g.lock, &ts) == 0;
}

/* ---- options ----------------------------------------------------------- */

static void default_opts(struct gs_agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = GS_GPU_MODE_CONTINUOUS;
	o->launch_rate = GS_AGENT_LAUNCH_RATE;
	o->drain_ms = GS_AGENT_DRAIN_MS;
	o->cubin_keep = 1ull << 30;
	o->scratch = GS_AGENT_SCRATCH;
}

/* Values of the word options, in enum order (enum gs_agent_subscribe;
 * continuous, serialized). */
static const char *const subscribe_words[] = { "arm", "launch", "init", NULL };
static const char *const mode_words[] = { "continuous", "serialized", NULL };

static int word_index(const char *w, const char *const *words)
{
	for (int i = 0; words[i]; i++)
		if (!strcmp(w, words[i]))
			return i;
	return -1;
}

int gs_agent_parse_opts(const char *s, struct gs_agent_opts *o)
{
	char buf[512], *save = NULL, *tok;
	int bad = 0;

	if (!s)
		return 0;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		unsigned long long v;

		if (!eq) {
			bad = -EINVAL;
			continue;
		}
		*eq++ = 0;
		if (!strcmp(tok, "subscribe") || !strcmp(tok, "mode")) {
			bool sub = tok[0] == 's';
			int k = word_index(eq, sub ? subscribe_words : mode_words);
			if (k < 0)
				bad = -EINVAL;
			else if (sub)
				o->subscribe = k;
			else
				o->mode = k ? GS_GPU_MODE_SERIALIZED : GS_GPU_MODE_CONTINUOUS;
			continue;
		}
		v = strtoull(eq, &end, 0);
		if (*end) {
			bad = -EINVAL;
			continue;
		}
		if (!strcmp(tok, "period") && (v == 0 || (v >= 5 && v <= 31)))
			o->period = v;
		else if (!strcmp(tok, "launch_rate") && v > 0)
			o->launch_rate = v;
		else if (!strcmp(tok, "drain_ms") && v >= 10)
			o->drain_ms = v;
		else if (!strcmp(tok, "hwbuf"))
			o->hwbuf = v;
		else if (!strcmp(tok, "scratch"))
			o->scratch = v;
		else if (!strcmp(tok, "cubin_keep"))
			o->cubin_keep = v;
		else
			bad = -EINVAL;
	}
	return bad;
}

/* Options for a new session: gpusample's write wins over the environment. */
static void read_cfg(struct gs_agent_opts *o, uint32_t *session)
{
	struct gs_gpu_agent_cfg c;

	memcpy(&c, (const void *)&gs_agent_cfg, sizeof(c));
	*o = g.env_opts;
	*session = 0;
	if (c.magic != GS_GPU_CFG_MAGIC || c.version != GS_GPU_CFG_VERSION || !c.session)
		return;
	*session = c.session;
	if (c.sampling_period >= 5 && c.sampling_period <= 31)
		o->period = c.sampling_period;
	if (c.collection_mode == GS_GPU_MODE_SERIALIZED ||
	    c.collection_mode == GS_GPU_MODE_CONTINUOUS)
		o->mode = c.collection_mode;
	if (c.launch_events_per_s)
		o->launch_rate = c.launch_events_per_s;
	if (c.drain_interval_ms >= 10)
		o->drain_ms = c.drain_interval_ms;
	if (c.hw_buffer_bytes)
		o->hwbuf = c.hw_buffer_bytes;
	if (c.scratch_bytes)
		o->scratch = c.scratch_bytes;
	if (c.cubin_keep_bytes)
		o->cubin_keep = c.cubin_keep_bytes;
}

/* ---- status records ---------------------------------------------------- */

static uint32_t count_armed(void)
{
	uint32_t n = 0;

	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		n += g.ctx[i].in_use && g.ctx[i].state == CTX_ARMED;
	return n;
}

/* Armed green contexts (never disabled by the watcher). */
static uint32_t count_green(void)
{
	uint32_t n = 0;

	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		n += g.ctx[i].in_use && g.ctx[i].state == CTX_ARMED && g.ctx[i].green;
	return n;
}

static uint32_t count_deferred(void)
{
	uint32_t n = 0;

	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		n += g.ctx[i].in_use && g.ctx[i].arm_on_launch;
	return n;
}

static uint32_t count_cfg_live(void)
{
	uint32_t n = 0;

	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		n += g.ctx[i].in_use && g.ctx[i].cfg_live;
	return n + (g.retired != NULL);
}

static uint32_t count_live(void)
{
	uint32_t n = 0;

	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		n += g.ctx[i].in_use;
	return n;
}

static void hdr_init(struct gs_rec_hdr *h, uint16_t type, uint32_t size)
{
	h->type = type;
	h->version = GS_RECORDS_VERSION;
	h->size = size;
	h->ktime_ns = 0;
}

/* Status record for the process (c == NULL) or one context. */
static void emit_status(const struct gs_ctx *c, uint32_t state, uint32_t reason, int result,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void emit_status(const struct gs_ctx *c, uint32_t state, uint32_t reason, int result,
			const char *fmt, ...)
{
	struct gs_gpu_status s;
	va_list ap;

	memset(&s, 0, sizeof(s));
	hdr_init(&s.hdr, GS_REC_GPU_STATUS, sizeof(s));
	s.gpu.ctx_uid = c ? c->uid : 0;
	s.gpu.device = c ? c->device : ~0u;
	s.state = state;
	s.reason = reason;
	s.cupti_result = result;
	s.cupti_version = g.api.version;
	s.session = g.session;
	s.contexts = count_live();
	s.contexts_armed = count_armed();
	s.launch_every = atomic_load(&g.launch_every);
	s.batches = g.batches;
	s.samples = g.samples;
	s.dropped_samples = g.dropped;
	s.hw_buffer_full = g.hw_full;
	s.launches = atomic_load(&g.launches);
	s.launch_events = atomic_load(&g.launch_events);
	s.records_failed = g.records_failed;
	va_start(ap, fmt);
	vsnprintf(s.message, sizeof(s.message), fmt, ap);
	va_end(ap);
	gs_agent_log("status ctx %u state %u reason %u: %s", s.gpu.ctx_uid, state, reason,
		     s.message);
	gs_emit_record(&s, sizeof(s));
}

/* Map a CUPTI failure to a reason and a message that says what to do. */
static uint32_t explain(CUptiResult r, uint32_t device, const char *call, char *msg, size_t len)
{
	const char *rs = gs_cupti_strerror(&g.api, r);

	switch (r) {
	case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
	case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
		snprintf(
		    msg, len,
		    "%s: insufficient privileges for GPU PC sampling: run the job as root or with "
		    "CAP_SYS_ADMIN (CAP_PERFMON on driver R565+), or set the driver option "
		    "NVreg_RestrictProfilingToAdminUsers=0",
		    call);
		return GS_GPU_R_PRIVILEGES;
	case CUPTI_ERROR_HARDWARE_BUSY:
		snprintf(msg, len,
			 "%s: GPU %u performance monitors busy: another profiler or DCGM "
			 "(dcgm-exporter profiling metrics) holds them; stop it or pause DCGM "
			 "profiling (dcgmi profile --pause)",
			 call, device);
		return GS_GPU_R_HW_BUSY;
	case CUPTI_ERROR_NOT_SUPPORTED:
	case CUPTI_ERROR_NOT_COMPATIBLE:
	case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
	case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
		snprintf(
		    msg, len,
		    "%s: GPU %u does not support PC sampling (%s): needs compute capability 7.5+ "
		    "on bare metal or an isolated MIG instance",
		    call, device, rs);
		return GS_GPU_R_UNSUPPORTED_DEVICE;
	case CUPTI_ERROR_OUT_OF_MEMORY:
		snprintf(msg, len,
			 "%s: out of memory for PC sampling buffers on GPU %u; lower the "
			 "hardware buffer size",
			 call, device);
		return GS_GPU_R_OUT_OF_MEMORY;
	case CUPTI_ERROR_NOT_INITIALIZED:
	case CUPTI_ERROR_UNKNOWN:
		snprintf(msg, len,
			 "%s: CUPTI could not reach the CUDA driver (%s); check that "
			 "libcupti matches the driver version",
			 call, rs);
		return GS_GPU_R_NO_DRIVER;
	default:
		snprintf(msg, len, "%s failed: %s (%d)", call, rs, (int)r);
		return GS_GPU_R_CUPTI_ERROR;
	}
}

static void set_off(uint32_t reason, int result, const char *msg)
{
	g.off_reason = reason;
	g.off_result = result;
	snprintf(g.off_msg, sizeof(g.off_msg), "GPU sampling off: %.230s", msg);
	gs_agent_log("%s", g.off_msg);
}

/* ---- contexts, cubins, names ------------------------------------------- */

static struct gs_ctx *ctx_find(CUcontext ctx)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		if (g.ctx[i].in_use && g.ctx[i].ctx == ctx && !atomic_load(&g.ctx[i].gone))
			return &g.ctx[i];
	return NULL;
}

static void free_ctx_buffers(struct gs_ctx *c);

static void release_cupti(void);

/* A green context left sampling by a disarm is gone (destroyed): CUPTI is
 * released once none is left.  Caller holds g.lock. */
static void green_left_gone(struct gs_ctx *c)
{
	if (!c->green_left)
		return;
	c->green_left = false;
	if (atomic_fetch_sub(&g.green_left, 1) == 1 && !g.armed)
		release_cupti();
}

/* Drop contexts destroyed while the lock was busy, without a CUPTI call:
 * CUPTI tore their PC sampling down with them, and their CUcontext value
 * may already name a new context.  Caller holds g.lock. */
static void reap_gone(void)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		struct gs_ctx *c = &g.ctx[i];
		if (!c->in_use || !atomic_load(&c->gone))
			continue;
		gs_agent_log("context %u destroyed while busy: dropped", c->uid);
		green_left_gone(c);
		free_ctx_buffers(c);
		c->state = CTX_IDLE;
		c->in_use = false;
	}
}

static struct gs_ctx *ctx_add(CUcontext ctx)
{
	struct gs_ctx *c = ctx_find(ctx);

	if (c)
		return c;
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		c = &g.ctx[i];
		if (c->in_use)
			continue;
		memset(c, 0, sizeof(*c));
		atomic_store(&c->gone, false);
		c->in_use = true;
		c->ctx = ctx;
		c->device = ~0u;
		if (g.api.GetContextId(ctx, &c->uid) != CUPTI_SUCCESS)
			c->uid = i + 1;
		if (g.api.GetDeviceId(ctx, &c->device) != CUPTI_SUCCESS)
			c->device = ~0u;
		gs_agent_log("context %u on device %u", c->uid, c->device);
		return c;
	}
	return NULL;
}

static void queue_pending(CUcontext ctx)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		CUcontext cur = atomic_load(&g.pending[i]);
		if (cur == ctx)
			return;
		if (!cur) {
			CUcontext expect = NULL;
			if (atomic_compare_exchange_strong(&g.pending[i], &expect, ctx) ||
			    expect == ctx)
				return;
		}
	}
}

/* Hash of a CUPTI-owned function name, looked up by pointer (one hash per
 * string, not per record) and remembered so it is freed exactly once. */
static uint64_t name_hash(char *p)
{
	bool added;
	uint64_t *v;

	if (!p)
		return 0;
	if (g.names.n >= GS_AGENT_MAX_NAMES && !gs_hmap_get(&g.names, (uint64_t)(uintptr_t)p)) {
		g.names_past_cap++; /* CUPTI's to free: it may hand it out again */
		return gs_kernel_name_hash(p);
	}
	v = gs_hmap_slot(&g.names, (uint64_t)(uintptr_t)p, &added);
	if (!v)
		return gs_kernel_name_hash(p); /* not remembered: leaked, never double-freed */
	if (added)
		*v = gs_kernel_name_hash(p);
	return *v;
}

/* CUPTI may hand the same functionName pointer out again in a later
 * session (after Disable + Enable): freeing at disarm would make a second
 * attach read freed memory and free it twice.  So only at process exit,
 * when no record can come any more. */
static void free_names(void)
{
	size_t it = 0;
	uint64_t ptr;

	while (gs_hmap_next(&g.names, &it, &ptr, NULL))
		free((char *)(uintptr_t)ptr);
	gs_hmap_free(&g.names);
}

static void emit_cubin(const struct gs_cubin *b, uint32_t extra_flags)
{
	struct gs_gpu_cubin r;

	memset(&r, 0, sizeof(r));
	hdr_init(&r.hdr, GS_REC_GPU_CUBIN, sizeof(r));
	r.gpu.ctx_uid = b->ctx_uid;
	r.gpu.device = b->device;
	r.crc = b->crc;
	r.addr = (uint64_t)(uintptr_t)b->copy;
	r.size = b->size;
	r.module_id = b->module_id;
	r.flags = b->flags | extra_flags;
	gs_emit_record(&r, sizeof(r));
	if (b->alias_crc) { /* the same module under CUPTI's key: no bytes read */
		r.alias_of = b->crc;
		r.crc = b->alias_crc;
		gs_emit_record(&r, sizeof(r));
	}
}

/* With the CRC callback registered, CUPTI keys PC records with our full
 * hash, but it may not honour the callback for every module (its keying
 * is untested on real CUPTI): the module is also announced under CUPTI's
 * own CRC, unless that key already names another module (twins: CUPTI's
 * CRC reads a few sparse bytes), where the first keeps it. */
static void cubin_alias(struct gs_cubin *b, const CUpti_ModuleResourceData *m)
{
	CUpti_GetCubinCrcParams p = { .size = CUpti_GetCubinCrcParamsSize };

	p.cubin = m->pCubin;
	p.cubinSize = m->cubinSize;
	if (g.api.GetCubinCrc(&p) != CUPTI_SUCCESS || p.cubinCrc == b->crc)
		return;
	for (size_t i = 0; i < g.n_cubins; i++)
		if (g.cubins[i].crc == p.cubinCrc || g.cubins[i].alias_crc == p.cubinCrc)
			return;
	b->alias_crc = p.cubinCrc;
}

static struct gs_cubin *cubin_add(const CUpti_ModuleResourceData *m, const struct gs_ctx *c)
{
	CUpti_GetCubinCrcParams p = { .size = CUpti_GetCubinCrcParamsSize };
	struct gs_cubin *b;

	if (!m || !m->pCubin || !m->cubinSize)
		return NULL;
	p.cubin = m->pCubin;
	p.cubinSize = m->cubinSize;
	/* The key must be what CUPTI puts in PC records: our full hash once
	 * registered, its own (sparse) CRC otherwise. */
	if (g.own_crc)
		p.cubinCrc = gs_cubin_hash(m->pCubin, m->cubinSize);
	else if (g.api.GetCubinCrc(&p) != CUPTI_SUCCESS)
		return NULL;
	for (size_t i = 0; i < g.n_cubins; i++)
		if (g.cubins[i].crc == p.cubinCrc) {
			g.cubins[i].flags &= ~GS_GPU_CUBIN_UNLOADED;
			return &g.cubins[i];
		}
	if (GS_GROW(g.cubins, g.cap_cubins, g.n_cubins + 1))
		return NULL;
	b = &g.cubins[g.n_cubins++];
	memset(b, 0, sizeof(*b));
	b->crc = p.cubinCrc;
	b->size = m->cubinSize;
	b->module_id = m->moduleId;
	b->ctx_uid = c ? c->uid : 0;
	b->device = c ? c->device : ~0u;
	/* The module data is valid only inside the callback: keep a copy for
	 * the host to read with process_vm_readv. */
	if (g.cubin_bytes + m->cubinSize <= g.opts.cubin_keep && (b->copy = malloc(m->cubinSize))) {
		memcpy(b->copy, m->pCubin, m->cubinSize);
		g.cubin_bytes += m->cubinSize;
	} else {
		b->flags |= GS_GPU_CUBIN_NOT_KEPT;
	}
	if (g.own_crc)
		cubin_alias(b, m);
	return b;
}

/* Module callback that missed the lock: keep a copy, never drop it. */
static void queue_cubin(CUcontext ctx, const CUpti_ModuleResourceData *m, bool unloaded)
{
	struct pending_cubin *q;

	if (!m || !m->pCubin || !m->cubinSize || !(q = calloc(1, sizeof(*q))))
		return;
	if (!(q->copy = malloc(m->cubinSize))) {
		free(q);
		return;
	}
	memcpy(q->copy, m->pCubin, m->cubinSize);
	q->ctx = ctx;
	q->size = m->cubinSize;
	q->module_id = m->moduleId;
	q->unloaded = unloaded;
	gs_agent_log("module %u loaded while the agent was busy: cubin queued", m->moduleId);
	q->next = atomic_load(&g.pending_cubins);
	while (!atomic_compare_exchange_weak(&g.pending_cubins, &q->next, q))
		;
}

/* Caller holds g.lock. */
static void adopt_cubins(void)
{
	struct pending_cubin *q = atomic_exchange(&g.pending_cubins, NULL), *next;

	for (; q; q = next) {
		CUpti_ModuleResourceData m = { .moduleId = q->module_id,
					       .cubinSize = q->size,
					       .pCubin = q->copy };
		/* ctx_find, not ctx_add: the context may be gone by now */
		struct gs_cubin *b = cubin_add(&m, ctx_find(q->ctx));
		if (b && q->unloaded)
			b->flags |= GS_GPU_CUBIN_UNLOADED;
		if (b && g.armed)
			emit_cubin(b, 0);
		next = q->next;
		free(q->copy);
		free(q);
	}
}

/* ---- PC sampling per context ------------------------------------------- */

static void push_ctx(struct gs_ctx *c)
{
	if (g.api.CtxPush)
		g.api.CtxPush(c->ctx);
}

static void pop_ctx(void)
{
	CUcontext dummy;

	if (g.api.CtxPop)
		g.api.CtxPop(&dummy);
}

static CUpti_PCSamplingPCData *pc_at(void *base, size_t i)
{
	return (CUpti_PCSamplingPCData *)((char *)base + i * g.api.pcdata_size);
}

/* One CUpti_PCSamplingData with n PCs, each with room for every stall reason. */
static int alloc_data(CUpti_PCSamplingData *d, void **pcs, CUpti_PCSamplingStallReason **sr,
		      size_t n, size_t n_reasons)
{
	*pcs = calloc(n, g.api.pcdata_size);
	*sr = calloc(n * (n_reasons ? n_reasons : 1), sizeof(**sr));
	if (!*pcs || !*sr)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	d->size = g.api.data_size;
	d->collectNumPcs = n;
	d->pPcData = *pcs;
	for (size_t i = 0; i < n; i++) {
		CUpti_PCSamplingPCData *p = pc_at(*pcs, i);
		p->size = g.api.pcdata_size;
		p->stallReason = *sr + i * n_reasons;
	}
	return 0;
}

static struct cfg_buf *cfg_alloc(size_t n_reasons)
{
	struct cfg_buf *b = calloc(1, sizeof(*b));

	if (b && alloc_data(&b->data, &b->pcs, &b->sr, GS_AGENT_CFG_PCS, n_reasons)) {
		free(b->pcs);
		free(b->sr);
		free(b);
		return NULL;
	}
	return b;
}

/* Free c's configured buffer, or keep it for good while CUPTI may still
 * write it (see struct cfg_buf). */
static void cfg_release(struct gs_ctx *c)
{
	struct cfg_buf *b = c->cfg;

	c->cfg = NULL;
	if (!b)
		return;
	if (c->cfg_live) {
		b->next = g.retired;
		g.retired = b;
		g.n_retired++;
		gs_agent_log(
		    "context %u: configured buffer kept (CUPTI may still write it; %u kept)",
		    c->uid, g.n_retired);
	} else {
		free(b->pcs);
		free(b->sr);
		free(b);
	}
	c->cfg_live = false;
}

static void free_ctx_buffers(struct gs_ctx *c)
{
	free(c->get_pcs);
	free(c->get_sr);
	cfg_release(c);
	free(c->reason_idx);
	free(c->reason_names);
	free(c->reason_flags_by_slot);
	c->get_pcs = NULL;
	c->get_sr = NULL;
	c->reason_idx = NULL;
	c->reason_names = NULL;
	c->reason_flags_by_slot = NULL;
	c->n_reasons = 0;
}

static uint32_t flags_of_index(const struct gs_ctx *c, uint32_t idx)
{
	for (size_t i = 0; i < c->n_reasons; i++)
		if (c->reason_idx[i] == idx)
			return c->reason_flags_by_slot[i];
	return 0;
}

static int read_stall_reasons(struct gs_ctx *c, CUptiResult *res)
{
	CUpti_PCSamplingGetNumStallReasonsParams np = {
		.size = CUpti_PCSamplingGetNumStallReasonsParamsSize
	};
	CUpti_PCSamplingGetStallReasonsParams sp = {
		.size = CUpti_PCSamplingGetStallReasonsParamsSize
	};
	char **names;
	size_t n = 0;

	np.ctx = c->ctx;
	np.numStallReasons = &n;
	if ((*res = g.api.PCSamplingGetNumStallReasons(&np)) != CUPTI_SUCCESS)
		return -1;
	if (!n || n > 1024) {
		*res = CUPTI_ERROR_UNKNOWN;
		return -1;
	}
	c->reason_idx = calloc(n, sizeof(*c->reason_idx));
	c->reason_names = calloc(n, sizeof(*c->reason_names));
	c->reason_flags_by_slot = calloc(n, 1);
	names = calloc(n, sizeof(*names));
	if (!c->reason_idx || !c->reason_names || !c->reason_flags_by_slot || !names) {
		free(names);
		*res = CUPTI_ERROR_OUT_OF_MEMORY;
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = c->reason_names[i];
	sp.ctx = c->ctx;
	sp.numStallReasons = n;
	sp.stallReasonIndex = c->reason_idx;
	sp.stallReasons = names;
	*res = g.api.PCSamplingGetStallReasons(&sp);
	free(names);
	if (*res != CUPTI_SUCCESS)
		return -1;
	c->n_reasons = n;
	for (size_t i = 0; i < n; i++) {
		c->reason_names[i][GS_GPU_STALL_NAME_LEN - 1] = 0;
		c->reason_flags_by_slot[i] = gs_stall_flags_of_name(c->reason_names[i]);
	}
	return 0;
}

static void set_attr(CUpti_PCSamplingConfigurationInfo *a, int *n,
		     CUpti_PCSamplingConfigurationAttributeType t)
{
	memset(&a[*n], 0, sizeof(a[*n]));
	a[*n].attributeType = t;
	(*n)++;
}

static CUptiResult configure(struct gs_ctx *c, bool with_period)
{
	CUpti_PCSamplingConfigurationInfoParams p = {
		.size = CUpti_PCSamplingConfigurationInfoParamsSize
	};
	CUpti_PCSamplingConfigurationInfo a[10];
	int n = 0;

	set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON);
	a[n - 1].attributeData.stallReasonData.stallReasonCount = c->n_reasons;
	a[n - 1].attributeData.stallReasonData.pStallReasonIndex = c->reason_idx;
	set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER);
	a[n - 1].attributeData.samplingDataBufferData.samplingDataBuffer = &c->cfg->data;
	set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE);
	a[n - 1].attributeData.collectionModeData.collectionMode =
	    g.opts.mode == GS_GPU_MODE_SERIALIZED
		? CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED
		: CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
	set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT);
	a[n - 1].attributeData.outputDataFormatData.outputDataFormat =
	    CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
	if (with_period && g.opts.period) {
		set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD);
		a[n - 1].attributeData.samplingPeriodData.samplingPeriod = g.opts.period;
	}
	if (g.opts.sleep_ms) {
		set_attr(
		    a, &n,
		    CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN);
		a[n - 1]
		    .attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan =
		    g.opts.sleep_ms;
	}
	if (g.opts.scratch) {
		set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE);
		a[n - 1].attributeData.scratchBufferSizeData.scratchBufferSize = g.opts.scratch;
	}
	/* Sampling starts at cuptiPCSamplingStart, after ctx_start has made the
	 * GPU idle, not at this call (cupti_pcsampling.h:303-311). */
	c->start_stop = g.api.PCSamplingStart && g.api.PCSamplingStop && g.api.CtxSynchronize;
	if (c->start_stop) {
		set_attr(a, &n,
			 CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL);
		a[n - 1].attributeData.enableStartStopControlData.enableStartStopControl = 1;
	}
	if (!c->hwbuf) /* in a callback: no cuMemGetInfo there */
		c->hwbuf = g.opts.hwbuf ? g.opts.hwbuf : GS_AGENT_HWBUF;
	set_attr(a, &n, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE);
	a[n - 1].attributeData.hardwareBufferSizeData.hardwareBufferSize = c->hwbuf;
	p.ctx = c->ctx;
	p.numAttributes = n;
	p.pPCSamplingConfigurationInfo = a;
	/* Attributes are taken one by one (attributeStatus): the buffer may be
	 * CUPTI's even when the call as a whole failed. */
	c->cfg_live = true;
	return g.api.PCSamplingSetConfigurationAttribute(&p);
}

/* One attribute as CUPTI has it; false when it cannot say. */
static bool read_attr(struct gs_ctx *c, CUpti_PCSamplingConfigurationAttributeType t,
		      CUpti_PCSamplingConfigurationInfo *a)
{
	CUpti_PCSamplingConfigurationInfoParams p = {
		.size = CUpti_PCSamplingConfigurationInfoParamsSize
	};

	memset(a, 0, sizeof(*a));
	a->attributeType = t;
	p.ctx = c->ctx;
	p.numAttributes = 1;
	p.pPCSamplingConfigurationInfo = a;
	return g.api.PCSamplingGetConfigurationAttribute(&p) == CUPTI_SUCCESS &&
	       a->attributeStatus == CUPTI_SUCCESS;
}

/* Period and hardware buffer as CUPTI took them. */
static void read_back(struct gs_ctx *c)
{
	CUpti_PCSamplingConfigurationInfo a;

	c->period = g.opts.period;
	if (read_attr(c, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, &a))
		c->period = a.attributeData.samplingPeriodData.samplingPeriod;
	c->hwbuf_read = c->hwbuf;
	if (read_attr(c, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE, &a))
		c->hwbuf_read = a.attributeData.hardwareBufferSizeData.hardwareBufferSize;
}

/* Hardware buffer for c, on the watcher with c current (GS_AGENT_HWBUF). */
static void size_hwbuf(struct gs_ctx *c)
{
	size_t free_b = 0, total_b = 0;

	c->hwbuf = g.opts.hwbuf ? g.opts.hwbuf : GS_AGENT_HWBUF;
	if (g.opts.hwbuf || !g.api.MemGetInfo ||
	    g.api.MemGetInfo(&free_b, &total_b) != CUDA_SUCCESS)
		return;
	if (free_b / GS_AGENT_HWBUF_FREE_DIV < c->hwbuf)
		c->hwbuf = free_b / GS_AGENT_HWBUF_FREE_DIV > (1u << 20)
			       ? free_b / GS_AGENT_HWBUF_FREE_DIV
			       : (1u << 20);
	gs_agent_log("context %u: %zu MiB free of %zu on GPU %u: hardware buffer %" PRIu64 " MiB",
		     c->uid, free_b >> 20, total_b >> 20, c->device, c->hwbuf >> 20);
}

static void emit_stall_table(struct gs_ctx *c)
{
	struct gs_gpu_stall_table *t = (void *)g.recbuf;
	struct gs_gpu_stall_reason *r = (void *)(t + 1);
	size_t max = (GS_GPU_REC_MAX - sizeof(*t)) / sizeof(*r), n = c->n_reasons;
	int v;

	if (n > max) {
		n = max;
		g.records_failed++;
	}
	memset(t, 0, sizeof(*t) + n * sizeof(*r));
	hdr_init(&t->hdr, GS_REC_GPU_STALL_TABLE, sizeof(*t) + n * sizeof(*r));
	t->gpu.ctx_uid = c->uid;
	t->gpu.device = c->device;
	t->n_reasons = n;
	t->sampling_period = c->period;
	t->collection_mode = c->mode;
	if (g.api.DevAttr && c->device != ~0u) {
		if (g.api.DevAttr(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->device) ==
		    CUDA_SUCCESS)
			t->sm_count = v;
		if (g.api.DevAttr(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, c->device) == CUDA_SUCCESS)
			t->clock_khz = v;
	}
	for (size_t i = 0; i < n; i++) {
		r[i].index = c->reason_idx[i];
		r[i].flags = c->reason_flags_by_slot[i];
		memcpy(r[i].name, c->reason_names[i], GS_GPU_STALL_NAME_LEN);
	}
	gs_emit_record(t, t->hdr.size);
}

/* Another armed context on the same device?  CUPTI samples one per GPU:
 * "PC Sampling APIs don't support simultaneous sampling of multiple CUDA
 * contexts on a GPU ... Before enabling and configuring the PC sampling on a
 * different CUDA context on the same GPU, PC sampling needs to be disabled
 * on the other context" (CUPTI Usage, https://docs.nvidia.com/cupti/main/
 * main.html, 2.8.7 Limitations).  So a second context on a sampled GPU is
 * never Enabled: ctx_arm turns it off with GS_GPU_R_SECOND_CONTEXT (named
 * once per session, counted as contexts - contexts_armed in every status
 * record) and arms it when its sibling's sampling ends (ctx_armable). */
static struct gs_ctx *device_owner(const struct gs_ctx *c)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		struct gs_ctx *o = &g.ctx[i];
		if (o != c && o->in_use && o->state == CTX_ARMED && o->device == c->device)
			return o;
	}
	return NULL;
}

/* cuptiPCSamplingDisable.  Only a successful one ends CUPTI's writes into
 * the configured buffer; a failed one leaves it CUPTI's (cfg_live). */
static CUptiResult pcs_disable(struct gs_ctx *c)
{
	CUpti_PCSamplingDisableParams dp = { .size = CUpti_PCSamplingDisableParamsSize };
	CUptiResult r;

	dp.ctx = c->ctx;
	c->started = false; /* Disable ends the range */
	if ((r = g.api.PCSamplingDisable(&dp)) == CUPTI_SUCCESS)
		c->cfg_live = false;
	else
		gs_agent_log("context %u: cuptiPCSamplingDisable: %s", c->uid,
			     gs_cupti_strerror(&g.api, r));
	return r;
}

static void ctx_fail(struct gs_ctx *c, CUptiResult r, const char *call, bool enabled)
{
	char msg[GS_GPU_STATUS_MSG_LEN];

	c->reason = explain(r, c->device, call, msg, sizeof(msg));
	c->result = r;
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
	if (enabled)
		pcs_disable(c);
	free_ctx_buffers(c);
	c->state = CTX_OFF;
	emit_status(c, GS_GPU_ST_OFF, c->reason, r, "GPU sampling off for context %u: %s", c->uid,
		    msg);
}

/* Enable failures that another thread may not see: everything but the
 * permanent ones (permissions, unsupported device, busy counters, memory). */
static bool enable_retryable(CUptiResult r)
{
	char msg[GS_GPU_STATUS_MSG_LEN];
	uint32_t reason = explain(r, 0, "cuptiPCSamplingEnable", msg, sizeof(msg));

	return reason != GS_GPU_R_PRIVILEGES && reason != GS_GPU_R_UNSUPPORTED_DEVICE &&
	       reason != GS_GPU_R_HW_BUSY && reason != GS_GPU_R_OUT_OF_MEMORY;
}

/* Start the sampled range on an idle GPU.  "CUPTI requires the GPU to be
 * idle before starting PC sampling" (parcagpu, which like Proton starts from
 * a launch callback after cuCtxSynchronize): the kernels already queued on
 * the context are waited for, on this thread, with c current.  Without
 * start/stop control sampling began at the configuration. */
static CUptiResult ctx_start(struct gs_ctx *c)
{
	CUpti_PCSamplingStartParams sp = { .size = CUpti_PCSamplingStartParamsSize };
	CUresult cr;
	CUptiResult r;

	if (!c->start_stop)
		return CUPTI_SUCCESS;
	if ((cr = g.api.CtxSynchronize()) != CUDA_SUCCESS) {
		gs_agent_log("context %u: cuCtxSynchronize: %d", c->uid, (int)cr);
		return CUPTI_ERROR_UNKNOWN;
	}
	sp.ctx = c->ctx;
	if ((r = g.api.PCSamplingStart(&sp)) != CUPTI_SUCCESS) {
		gs_agent_log("context %u: cuptiPCSamplingStart: %s", c->uid,
			     gs_cupti_strerror(&g.api, r));
		return r;
	}
	c->started = true;
	c->start_refused = 0;
	return CUPTI_SUCCESS;
}

/* End the sampled range before Disable; what it held is flushed by
 * Disable into the configured buffer (cupti_pcsampling.h:533-535). */
static void ctx_stop(struct gs_ctx *c)
{
	CUpti_PCSamplingStopParams sp = { .size = CUpti_PCSamplingStopParamsSize };
	CUptiResult r;

	if (!c->started)
		return;
	sp.ctx = c->ctx;
	if ((r = g.api.PCSamplingStop(&sp)) != CUPTI_SUCCESS)
		gs_agent_log("context %u: cuptiPCSamplingStop: %s", c->uid,
			     gs_cupti_strerror(&g.api, r));
	c->started = false;
}

/* Enable + stall reasons + configuration + Start.  Caller holds g.lock and
 * has the context current. */
static int ctx_enable(struct gs_ctx *c)
{
	CUpti_PCSamplingEnableParams ep = { .size = CUpti_PCSamplingEnableParamsSize };
	CUptiResult r;

	ep.ctx = c->ctx;
	if ((r = g.api.PCSamplingEnable(&ep)) != CUPTI_SUCCESS) {
		if (!g.arming_in_launch && enable_retryable(r)) {
			c->arm_on_launch = true;
			c->arm_deadline_ns = UINT64_MAX;
			c->result = r;
			emit_status(c, GS_GPU_ST_WARNING, 0, r,
				    "cuptiPCSamplingEnable on the agent's "
				    "thread: %s; arming context %u from its next kernel launch",
				    gs_cupti_strerror(&g.api, r), c->uid);
			return -1;
		}
		ctx_fail(c, r, "cuptiPCSamplingEnable", false);
		return -1;
	}
	if (!c->reason_idx && read_stall_reasons(c, &r)) {
		ctx_fail(c, r, "cuptiPCSamplingGetStallReasons", true);
		return -1;
	}
	if (!c->cfg && !(c->cfg = cfg_alloc(c->n_reasons))) {
		ctx_fail(c, CUPTI_ERROR_OUT_OF_MEMORY, "allocating PC buffers", true);
		return -1;
	}
	if (!c->get_pcs &&
	    alloc_data(&c->get_data, &c->get_pcs, &c->get_sr, GS_AGENT_GET_PCS, c->n_reasons)) {
		ctx_fail(c, CUPTI_ERROR_OUT_OF_MEMORY, "allocating PC buffers", true);
		return -1;
	}
	c->mode = g.opts.mode;
	r = configure(c, true);
	if (r != CUPTI_SUCCESS && g.opts.period) {
		/* Explicit periods are refused on some GPUs: fall back to
		 * CUPTI's default rather than losing GPU sampling. */
		CUptiResult r2 = configure(c, false);
		if (r2 == CUPTI_SUCCESS)
			emit_status(c, GS_GPU_ST_WARNING, GS_GPU_R_BAD_CONFIG, r,
				    "sampling period 2^%u refused (%s); using CUPTI's default",
				    g.opts.period, gs_cupti_strerror(&g.api, r));
		r = r2;
	}
	if (r != CUPTI_SUCCESS) {
		ctx_fail(c, r, "cuptiPCSamplingSetConfigurationAttribute", true);
		return -1;
	}
	read_back(c);
	if ((r = ctx_start(c)) != CUPTI_SUCCESS) {
		if (++c->start_refused >= GS_AGENT_START_TRIES || !enable_retryable(r)) {
			ctx_fail(c, r, "cuptiPCSamplingStart", true);
			return -1;
		}
		/* the GPU was busy again: Disable, and try at a later launch */
		pcs_disable(c);
		c->arm_on_launch = true;
		c->arm_deadline_ns = now_ns() + GS_AGENT_ARM_WAIT_MS * 1000000ull;
		return -1;
	}
	c->arm_on_launch = false;
	c->state = CTX_ARMED;
	return 0;
}

/* Whether arming c could succeed now: idle, or a second context whose GPU
 * has been freed by its sibling.  Any other OFF is permanent for the context
 * and was reported once; the watcher must not retry (or report) it each tick. */
static bool ctx_armable(const struct gs_ctx *c)
{
	if (c->arm_on_launch && !g.arming_in_launch && now_ns() < c->arm_deadline_ns)
		return false; /* waits for an application thread */
	return c->state == CTX_IDLE ||
	       (c->state == CTX_OFF && c->reason == GS_GPU_R_SECOND_CONTEXT && !device_owner(c));
}

static int ctx_arm(struct gs_ctx *c)
{
	struct gs_ctx *o;
	int rc;

	if (c->state == CTX_ARMED || g.off_reason || atomic_load(&c->gone))
		return 0;
	if (!ctx_armable(c))
		return -1;
	if ((o = device_owner(c))) {
		c->state = CTX_OFF;
		c->reason = GS_GPU_R_SECOND_CONTEXT;
		snprintf(c->msg, sizeof(c->msg), "second context on GPU %u (context %u is sampled)",
			 c->device, o->uid);
		emit_status(
		    c, GS_GPU_ST_OFF, GS_GPU_R_SECOND_CONTEXT, 0,
		    "GPU sampling off for context %u: second context on GPU %u; CUPTI samples "
		    "one context per GPU and context %u is sampled",
		    c->uid, c->device, o->uid);
		return -1;
	}
	rc = ctx_enable(c);
	if (rc)
		return rc;
	emit_stall_table(c);
	emit_status(c, GS_GPU_ST_ARMED, 0, 0,
		    "context %u on GPU %u armed: %s, period 2^%u, hardware buffer %" PRIu64 " MiB",
		    c->uid, c->device,
		    c->mode == GS_GPU_MODE_SERIALIZED ? "kernel-serialized" : "continuous",
		    c->period, c->hwbuf_read >> 20);
	return 0;
}

static uint64_t samples_of(const CUpti_PCSamplingPCData *p, size_t nsr)
{
	uint64_t n = 0;

	for (size_t j = 0; j < nsr && p->stallReason; j++)
		n += p->stallReason[j].samples;
	return n;
}

/* Turn one GetData result (d: totalNumPcs PCs) into batch records. */
static void emit_batches(struct gs_ctx *c, CUpti_PCSamplingData *d, uint32_t flags)
{
	struct gs_gpu_pc_batch *b = (void *)g.recbuf;
	char *area = (char *)(b + 1);
	const size_t cap = GS_GPU_REC_MAX - sizeof(*b);
	struct gs_gpu_pc *pcs = NULL;
	/* static: only ever used under g.lock */
	static struct gs_gpu_stall_count cnt[GS_GPU_REC_MAX / sizeof(struct gs_gpu_stall_count)];
	static char names[GS_GPU_REC_MAX];
	/* names in this batch: offset, and hash (name_hash scans every name
	 * of the session, so once per name and batch, not once per PC) */
	struct {
		const char *p;
		uint32_t off;
		uint64_t hash;
	} seen[64];
	size_t n_pcs = 0, n_cnt = 0, names_len = 0, n_seen = 0;
	bool first = true;
	size_t total = d->totalNumPcs;

	/* PCs go straight into the record; counts and names are gathered
	 * aside and appended when the batch is closed. */
#define FLUSH(last)                                                                               \
	do {                                                                                      \
		char *cnt_at = area + n_pcs * sizeof(*pcs),                                       \
		     *names_at = cnt_at + n_cnt * sizeof(cnt[0]);                                 \
		size_t used = names_at + names_len - (char *)b, sz = (used + 7) & ~(size_t)7;     \
		memcpy(cnt_at, cnt, n_cnt * sizeof(cnt[0]));                                      \
		memcpy(names_at, names, names_len);                                               \
		memset((char *)b + used, 0, sz - used);                                           \
		hdr_init(&b->hdr, GS_REC_GPU_PC_BATCH, sz);                                       \
		b->gpu.ctx_uid = c->uid;                                                          \
		b->gpu.device = c->device;                                                        \
		b->gpu.tgid = b->gpu.tid = 0;                                                     \
		b->range_id = d->rangeId;                                                         \
		b->total_samples = first ? d->totalSamples : 0;                                   \
		b->dropped_samples = first ? d->droppedSamples : 0;                               \
		b->non_user_samples = first && g.api.version >= 16 ? d->nonUsrKernelsTotalSamples \
								   : 0;                           \
		b->n_pcs = n_pcs;                                                                 \
		b->n_counts = n_cnt;                                                              \
		b->names_len = names_len;                                                         \
		b->flags = flags | (first ? GS_GPU_BATCH_FIRST : 0) |                             \
			   ((last) ? GS_GPU_BATCH_LAST : 0);                                      \
		b->seq = c->seq++;                                                                \
		b->sampling_period = c->period;                                                   \
		if (gs_emit_record(b, sz))                                                        \
			g.records_failed++;                                                       \
		else                                                                              \
			g.batches++;                                                              \
		first = false;                                                                    \
		n_pcs = n_cnt = names_len = n_seen = 0;                                           \
	} while (0)

	pcs = (struct gs_gpu_pc *)area;
	if (c->mode == GS_GPU_MODE_SERIALIZED)
		flags |= GS_GPU_BATCH_SERIALIZED;
	if (g.api.pcdata_size < 64)
		flags |= GS_GPU_BATCH_NO_CORRELATION;
	for (size_t i = 0; i < total; i++) {
		CUpti_PCSamplingPCData *p = pc_at(d->pPcData, i);
		size_t nsr = p->stallReasonCount, nlen = 0, need;
		const char *fn = p->functionName ? p->functionName : "";
		uint32_t name_off = ~0u;
		size_t k;

		if (nsr > c->n_reasons)
			nsr = c->n_reasons;
		/* "When hardware buffer is full, user will get pc data as 0"
		 * (cupti_pcsampling.h:236-239): such a record names no PC. */
		if (!p->cubinCrc && !p->pcOffset && !p->functionName && !samples_of(p, nsr)) {
			g.zero_records++;
			continue;
		}
		for (k = 0; k < n_seen && seen[k].p != fn; k++)
			;
		if (k < n_seen)
			name_off = seen[k].off;
		else
			nlen = strnlen(fn, 4095) + 1;
		need = sizeof(*pcs) + nsr * sizeof(cnt[0]) + nlen;
		if (n_pcs &&
		    (sizeof(*pcs) * n_pcs + n_cnt * sizeof(cnt[0]) + names_len + need + 8 > cap ||
		     (name_off == ~0u && n_seen == 64))) {
			FLUSH(false);
			name_off = ~0u;
			nlen = strnlen(fn, 4095) + 1;
		}
		if (name_off == ~0u) {
			name_off = names_len;
			memcpy(names + names_len, fn, nlen - 1);
			names[names_len + nlen - 1] = 0;
			names_len += nlen;
			k = n_seen++;
			seen[k].p = fn;
			seen[k].off = name_off;
			seen[k].hash = name_hash(p->functionName);
		}
		struct gs_gpu_pc *o = &pcs[n_pcs++];
		o->cubin_crc = p->cubinCrc;
		o->pc_offset = p->pcOffset;
		o->name_hash = seen[k].hash;
		o->function_index = p->functionIndex;
		/* "Only valid for serialized mode of pc sampling collection.
		 * For continous mode of collection the correlationId will be
		 * set to 0" (cupti_pcsampling.h, CUpti_PCSamplingPCData;
		 * https://docs.nvidia.com/cupti/api/structCUpti__PCSamplingPCData.html):
		 * outside serialized mode whatever is there is no launch's id,
		 * so it never reaches a record the join could trust. */
		o->correlation_id = g.api.pcdata_size >= 64 && c->mode == GS_GPU_MODE_SERIALIZED
					? p->correlationId
					: 0;
		o->name_off = name_off;
		o->first_count = n_cnt;
		o->n_counts = nsr;
		for (size_t j = 0; j < nsr; j++) {
			cnt[n_cnt].reason_index = p->stallReason[j].pcSamplingStallReasonIndex;
			cnt[n_cnt].samples = p->stallReason[j].samples;
			if (gs_stall_kind(flags_of_index(c, cnt[n_cnt].reason_index)) ==
			    GS_STALL_BASE)
				g.samples += cnt[n_cnt].samples;
			n_cnt++;
		}
	}
	if (n_pcs || first)
		FLUSH(true);
#undef FLUSH
}

static void ctx_disable(struct gs_ctx *c, bool report_leftovers);

/* Scratch buffer overflow (GetData: OUT_OF_MEMORY, hardwareBufferFull 0):
 * the PCs that did not fit are lost and CUPTI keeps failing until Disable +
 * Enable; restart with twice the scratch buffer. */
static void ctx_recover_scratch(struct gs_ctx *c)
{
	uint64_t old = g.opts.scratch ? g.opts.scratch : (1ull << 20);

	g.scratch_full++;
	if (old < GS_AGENT_SCRATCH_MAX)
		g.opts.scratch = old * 2;
	ctx_disable(c, false); /* what CUPTI still holds is incomplete */
	c->state = CTX_IDLE;
	/* Said before the restart: the records are lost whether sampling starts
	 * again now or, on a GPU busy for this thread, at the next launch (an
	 * OFF status follows if it cannot). */
	emit_status(c, GS_GPU_ST_RECOVERED, GS_GPU_R_SCRATCH_FULL, CUPTI_ERROR_OUT_OF_MEMORY,
		    "scratch buffer full on GPU %u (%" PRIu64 " MiB): PC records lost; PC "
		    "sampling restarts with %" PRIu64 " MiB (--gpu-scratch sets the size)",
		    c->device, old >> 20, g.opts.scratch >> 20);
	ctx_enable(c);
}

/* Hardware buffer overflow: data is lost and CUPTI stays wedged until the
 * context is disabled and enabled again. */
static void ctx_recover(struct gs_ctx *c, CUpti_PCSamplingData *d)
{
	uint64_t lost = d->droppedSamples;
	uint32_t old = g.opts.period, old_sleep = g.opts.sleep_ms;
	uint32_t cur = g.opts.period ? g.opts.period : c->period;

	g.hw_full++;
	g.dropped += lost;
	c->overflows++;
	/* Overflowing again: the header's remedies (cupti_pcsampling.h:236-239)
	 * rather than losing data every drain: CUPTI's worker threads drain the
	 * hardware buffer twice as often (their sleep span halved from CUPTI's
	 * 100 ms, down to 10 ms; the attribute came with API v19, CUDA 12.0),
	 * and the sample rate halves, from the period CUPTI read back when it
	 * chose it. */
	if (c->overflows >= 2 && cur >= 5 && cur < 31)
		g.opts.period = cur + 1;
	if (c->overflows >= 2 && g.api.version >= 19 && (!old_sleep || old_sleep > 10))
		g.opts.sleep_ms = (old_sleep ? old_sleep : 100) / 2 < 10
				      ? 10
				      : (old_sleep ? old_sleep : 100) / 2;
	ctx_disable(c, true);
	c->state = CTX_IDLE;
	if (ctx_enable(c) == 0)
		emit_status(
		    c, GS_GPU_ST_RECOVERED, GS_GPU_R_HW_BUFFER_FULL, CUPTI_ERROR_OUT_OF_MEMORY,
		    "hardware buffer full on GPU %u (%" PRIu64 " samples dropped); PC sampling "
		    "restarted%s%s: use a longer --gpu-period or a bigger hardware buffer",
		    c->device, lost, old != g.opts.period ? " with a longer period" : "",
		    old_sleep != g.opts.sleep_ms ? ", CUPTI draining more often" : "");
}

/* Records CUPTI parked in the configured buffer: a range closed without a
 * flush (a serialized kernel whose flush missed the lock, a module unload),
 * or Disable's leftovers.  Read, when emit, and handed back (totalNumPcs 0),
 * as NVIDIA's samples read it after Disable and at context destroy
 * (pc_sampling_continuous.cpp; docs/reference cupti_pc_sampling.md 1.5).
 * Caller holds g.lock. */
static void read_parked(struct gs_ctx *c, bool emit)
{
	CUpti_PCSamplingData *d = c->cfg ? &c->cfg->data : NULL;

	if (!d || !d->totalNumPcs)
		return;
	if (d->totalNumPcs > d->collectNumPcs)
		d->totalNumPcs = d->collectNumPcs; /* never read past the buffer */
	if (emit)
		emit_batches(c, d, 0);
	d->totalNumPcs = 0;
}

/* Set while this thread drains inside a launch callback. */
static __thread bool in_launch_cb;

/* GetData until remainingNumPcs is 0.  Caller holds g.lock. */
static void ctx_drain(struct gs_ctx *c)
{
	CUpti_PCSamplingGetDataParams p = { .size = CUpti_PCSamplingGetDataParamsSize };

	if (c->state != CTX_ARMED || atomic_load(&c->gone))
		return;
	read_parked(c, true);
	for (int guard = 0; guard < 4096; guard++) {
		CUpti_PCSamplingData *d = &c->get_data;
		CUptiResult r;

		if (atomic_load(&c->gone))
			return; /* destroyed while we were in CUPTI */
		d->totalNumPcs = d->remainingNumPcs = 0;
		d->totalSamples = d->droppedSamples = 0;
		if (g.api.version >= 16)
			d->nonUsrKernelsTotalSamples = 0;
		if (g.api.version >= 19)
			d->hardwareBufferFull = 0;
		p.ctx = c->ctx;
		p.pcSamplingData = d;
		r = g.api.PCSamplingGetData(&p);
		/* Any OUT_OF_MEMORY is recoverable by Disable + Enable: the
		 * hardware buffer (hardwareBufferFull, API v19+) or else the
		 * scratch buffer.  Never off for good. */
		if (r == CUPTI_ERROR_OUT_OF_MEMORY &&
		    (g.api.version < 19 || d->hardwareBufferFull)) {
			ctx_recover(c, d);
			return;
		}
		if (r == CUPTI_ERROR_OUT_OF_MEMORY) {
			ctx_recover_scratch(c);
			return;
		}
		if (atomic_load(&c->gone))
			return; /* destroyed during the call: its error means nothing */
		if (r != CUPTI_SUCCESS && !in_launch_cb && !c->drain_on_launch &&
		    enable_retryable(r)) {
			c->drain_on_launch = true;
			emit_status(
			    c, GS_GPU_ST_WARNING, 0, r,
			    "cuptiPCSamplingGetData on the agent's thread: %s; context %u is "
			    "drained from its kernel launches from now on",
			    gs_cupti_strerror(&g.api, r), c->uid);
			return;
		}
		if (r != CUPTI_SUCCESS) {
			ctx_fail(c, r, "cuptiPCSamplingGetData", true);
			return;
		}
		g.dropped += d->droppedSamples;
		if (d->totalNumPcs || d->totalSamples)
			emit_batches(c, d, 0);
		if (!d->remainingNumPcs)
			return;
	}
}

static void ctx_disable(struct gs_ctx *c, bool report_leftovers)
{
	CUptiResult r;

	if (c->state != CTX_ARMED || atomic_load(&c->gone))
		return;
	ctx_stop(c);
	read_parked(c, report_leftovers);
	r = pcs_disable(c);
	/* Disable copies what CUPTI still held into the configured buffer. */
	read_parked(c, report_leftovers && r == CUPTI_SUCCESS);
	if (r != CUPTI_SUCCESS)
		emit_status(c, GS_GPU_ST_WARNING, GS_GPU_R_CUPTI_ERROR, r,
			    "cuptiPCSamplingDisable on context %u: %s; its PC buffer is kept, "
			    "since CUPTI may still write it",
			    c->uid, gs_cupti_strerror(&g.api, r));
	c->state = CTX_IDLE;
}

/* ---- launch callbacks -------------------------------------------------- */

static void set_launch_callbacks(bool on)
{
	size_t failed = 0;
	CUptiResult r = CUPTI_SUCCESS, last = CUPTI_SUCCESS;

	if (g.launch_cb_on == on || !g.subscribed)
		return;
	for (size_t i = 0; i < sizeof(launch_cbids) / sizeof(*launch_cbids); i++)
		if ((r = g.api.EnableCallback(on, g.sub, CUPTI_CB_DOMAIN_DRIVER_API,
					      launch_cbids[i])) != CUPTI_SUCCESS) {
			failed++;
			last = r;
		}
	g.launch_cb_on = on;
	/* Launch stacks of those APIs are missing: their samples go to
	 * [unknown launch].  Said once per change, not per tick. */
	if (failed)
		emit_status(NULL, GS_GPU_ST_WARNING, GS_GPU_R_CUPTI_ERROR, last,
			    "cuptiEnableCallback(%s) failed for %zu of %zu launch APIs: %s",
			    on ? "on" : "off", failed, sizeof(launch_cbids) / sizeof(*launch_cbids),
			    gs_cupti_strerror(&g.api, last));
}

/* Whether launch number n gets an event when 1 in `every` do.  Not
 * n % every: a training step launches the same kernel sequence over and
 * over, so a fixed stride keeps picking the same positions of it (3
 * launches per step and every = 3: always the same kernel), and the other
 * launch sites would never be seen.  A hash of n picks 1 in `every` on
 * average with no period, lock-free and without thread-local state. */
static bool launch_sampled(uint64_t n, uint32_t every)
{
	return every <= 1 || gs_mix64(n) % every == 0;
}

static int ctx_arm(struct gs_ctx *c);

/* On an application thread inside a launch of c (current here): the arm
 * the watcher could not do.  Bounded lock: never stall the launch. */
static void arm_in_launch(struct gs_ctx *c)
{
	if (!lock_bounded(5))
		return; /* next launch */
	if (c->arm_on_launch && g.armed && !g.exiting && !atomic_load(&g.disarming) &&
	    !atomic_load(&c->gone)) {
		g.arming_in_launch = true;
		c->arm_on_launch = false;
		if (ctx_arm(c) == 0)
			gs_agent_log("context %u armed from a launch callback", c->uid);
		g.arming_in_launch = false;
	}
	pthread_mutex_unlock(&g.lock);
}

/* Detach, on the launching thread, after its kernel: the last drain and
 * Disable where CUPTI has the context idle and current (peers stop
 * sampling from an application thread, never from a foreign one).  The
 * watcher does it for contexts that launch nothing more. */
static void disarm_in_launch(struct gs_ctx *c)
{
	if (!lock_bounded(5))
		return; /* the next launch, or the watcher */
	if (c->in_use && c->state == CTX_ARMED && g.armed && !g.exiting &&
	    atomic_load(&g.disarming)) {
		in_launch_cb = true;
		ctx_drain(c);
		ctx_disable(c, true);
		in_launch_cb = false;
		gs_agent_log("context %u disabled from a launch callback", c->uid);
	}
	pthread_mutex_unlock(&g.lock);
}

static void unsubscribe(bool finalize);

/* A green context left enabled by a disarm, at its first launch since:
 * Disable on its own thread (what it collected since the detach has no
 * session to go to). */
static void disable_green_left(struct gs_ctx *c)
{
	if (!lock_bounded(5))
		return; /* the next launch */
	if (c->in_use && c->green_left && !g.exiting) {
		in_launch_cb = true;
		ctx_disable(c, false);
		in_launch_cb = false;
		c->hwbuf = 0;
		free_ctx_buffers(c);
		gs_agent_log("green context %u disabled at its first launch after the detach",
			     c->uid);
		green_left_gone(c);
		/* at a launch's exit site, where cuptiFinalize may be called */
		if (atomic_load(&g.finalize_pending) && !g.armed)
			unsubscribe(true);
	}
	pthread_mutex_unlock(&g.lock);
}

/* Kernel-serialized mode: "Flushing of GPU PC Sampling data is required ...
 * For CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED, after every kernel
 * ends" (cupti_pcsampling.h:529-534), and NVIDIA's pc_sampling_continuous
 * drains in every launch EXIT callback (docs/reference cupti_pc_sampling.md
 * 2.x, "Launch EXIT").  A range left unflushed is parked in the configured
 * buffer and the next kernel's overwrites it.  So drain here, on the
 * launching thread (the context is current, no driver call), with a bounded
 * wait: a missed flush is read from the configured buffer at the next drain,
 * unless another kernel overwrote it first. */
static void flush_in_launch(CUcontext ctx)
{
	struct gs_ctx *c = ctx_find(ctx);
	bool serialized;
	uint64_t now;

	if (!c || c->state != CTX_ARMED)
		return;
	if (c->green_left) {
		disable_green_left(c);
		return;
	}
	if (atomic_load(&g.disarming)) {
		disarm_in_launch(c);
		return;
	}
	serialized = c->mode == GS_GPU_MODE_SERIALIZED;
	if (!serialized) {
		/* continuous: only a context the watcher cannot drain, every
		 * drain_ms (unlocked read: a stale value costs one drain) */
		now = now_ns();
		if (!c->drain_on_launch ||
		    now - c->last_cb_drain_ns < (uint64_t)g.opts.drain_ms * 1000000ull)
			return;
	}
	if (!lock_bounded(serialized ? 20 : 5)) {
		if (serialized)
			g.flush_missed++;
		return;
	}
	if (c->in_use && c->ctx == ctx && g.armed && !g.exiting) {
		in_launch_cb = true;
		c->last_cb_drain_ns = now_ns();
		ctx_drain(c);
		in_launch_cb = false;
	}
	pthread_mutex_unlock(&g.lock);
}

static void on_launch(const CUpti_CallbackData *cb, CUpti_CallbackId cbid)
{
	uint32_t every = atomic_load(&g.launch_every);
	const struct gs_ctx *c;
	struct gs_gpu_launch l;
	uint64_t n;

	if (cb->callbackSite == CUPTI_API_EXIT) {
		flush_in_launch(cb->context);
		return;
	}
	if (cb->callbackSite != CUPTI_API_ENTER)
		return;
	n = atomic_fetch_add(&g.launches, 1);
	/* Lock-free read: ctx/uid/device never change while in_use. */
	c = ctx_find(cb->context);
	if (!c)
		queue_pending(cb->context); /* created while unsubscribed: armed by the watcher */
	else if (c->arm_on_launch)
		arm_in_launch((struct gs_ctx *)c);
	/* Launch stacks only for kernels that can have PC samples. */
	if (!c || c->state != CTX_ARMED || !launch_sampled(n, every))
		return;
	if (!gs_emit_launch_wanted())
		return;
	memset(&l, 0, sizeof(l));
	hdr_init(&l.hdr, GS_REC_GPU_LAUNCH, sizeof(l));
	l.gpu.ctx_uid = cb->contextUid;
	l.gpu.device = c ? c->device : ~0u;
	l.name_hash = gs_kernel_name_hash(cb->symbolName);
	l.correlation_id = cb->correlationId;
	l.cbid = cbid;
	l.sample_every = every ? every : 1;
	l.seq = atomic_fetch_add(&g.launch_seq, 1);
	l.launches_total = n + 1;
	gs_emit_launch(&l);
	atomic_fetch_add(&g.launch_events, 1);
}

/* Adapt N so that about launch_rate events per second fire. */
static void adapt_launch_rate(uint64_t now)
{
	uint64_t dt = now - g.last_rate_ns, n, d;
	uint32_t every;

	if (dt < 250000000ull)
		return;
	n = atomic_load(&g.launches);
	d = n - g.last_rate_launches;
	every = (uint32_t)((d * 1000000000ull / dt + g.opts.launch_rate - 1) / g.opts.launch_rate);
	atomic_store(&g.launch_every, every ? every : 1);
	g.last_rate_ns = now;
	g.last_rate_launches = n;
}

/* ---- arm / disarm ------------------------------------------------------ */

static void adopt_pending(void)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		CUcontext ctx = atomic_exchange(&g.pending[i], NULL);
		if (ctx)
			ctx_add(ctx);
	}
}

/* Whether c is a green context: fewer SMs than its device (both asked by
 * handle, c made current nowhere).  A green context given every SM is not
 * told apart (nothing else in CUDA 13.0 says a CUcontext came from a green
 * one). */
static bool ctx_is_green(const struct gs_ctx *c)
{
	CUdevResource cr, dr;
	CUdevice dev;

	if (!g.api.CtxDevResource || !g.api.DevDevResource || !g.api.DevGet || c->device == ~0u ||
	    g.api.DevGet(&dev, (int)c->device) != CUDA_SUCCESS)
		return false;
	memset(&cr, 0, sizeof(cr));
	memset(&dr, 0, sizeof(dr));
	if (g.api.CtxDevResource(c->ctx, &cr, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
	    g.api.DevDevResource(dev, &dr, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS)
		return false;
	return cr.sm.smCount && cr.sm.smCount < dr.sm.smCount;
}

/* A green context waits for its own thread's launch, with no deadline:
 * it is never made current here. */
static void arm_green(struct gs_ctx *c)
{
	if (!c->kind_known) {
		c->kind_known = true;
		c->green = ctx_is_green(c);
		if (c->green)
			gs_agent_log("context %u is a green context: armed and drained from its "
				     "launches only",
				     c->uid);
	}
	if (c->green && c->state != CTX_ARMED && !c->arm_on_launch) {
		c->arm_on_launch = true;
		c->arm_deadline_ns = UINT64_MAX;
	}
	if (c->green)
		c->drain_on_launch = true;
}

static void arm_all(void)
{
	reap_gone();
	adopt_pending();
	adopt_cubins();
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		struct gs_ctx *c = &g.ctx[i];
		if (c->in_use && g.subscribed)
			arm_green(c);
		if (!c->in_use || !ctx_armable(c) || c->green)
			continue; /* no driver calls for contexts that stay as they are */
		if (!c->arm_on_launch && g.subscribed && !device_owner(c)) {
			/* armed by its own thread at its next launch (on_launch) */
			push_ctx(c);
			size_hwbuf(c);
			pop_ctx();
			c->arm_on_launch = true;
			c->arm_deadline_ns = now_ns() + GS_AGENT_ARM_WAIT_MS * 1000000ull;
			continue;
		}
		push_ctx(c);
		if (c->state != CTX_ARMED)
			size_hwbuf(c);
		ctx_arm(c);
		pop_ctx();
	}
}

/* ---- subscription ------------------------------------------------------ */

static void CUPTIAPI callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			      const void *data);

/* The watcher's own driver calls (primary context retain / release): the
 * resource callbacks they cause are handled by the caller. */
static __thread bool in_driver_call;

static void clear_pending_contexts(void)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++)
		atomic_store(&g.pending[i], NULL);
}

/* cuptiSubscribe_v2 as "gpusample", asking for the multi-subscriber mode
 * where CUPTI can have it (13.3+ with an r610+ driver: CUPTI Usage,
 * https://docs.nvidia.com/cupti/main/main.html, 2.4.1; see cupti_api.h);
 * holder gets the name CUPTI gives of the subscriber that holds the only
 * slot.  g.shared says the mode was asked for and the subscription taken,
 * not that another tool can join: the first subscriber's setting decides
 * (2.4.8), and on a pre-r610 driver there is one slot still. */
static CUptiResult subscribe_call(char *holder, size_t len)
{
	struct gs_subscriber_params sp;
	CUptiResult r;

	holder[0] = 0;
	g.shared = false;
	if (!g.api.Subscribe_v2)
		return g.api.Subscribe(&g.sub, callback, NULL);
	memset(&sp, 0, sizeof(sp));
	sp.subscriberName = GS_AGENT_SUBSCRIBER;
	sp.oldSubscriberName = holder;
	sp.oldSubscriberSize = len;
	if (g.api.version >= GS_CUPTI_MULTI_SUBSCRIBER_VERSION) {
		sp.structSize = GS_SUBSCRIBER_PARAMS_MULTI_SIZE;
		sp.allowMultipleSubscribers = 1;
		r = g.api.Subscribe_v2(&g.sub, callback, NULL, (CUpti_SubscriberParams *)&sp);
		if (r != CUPTI_ERROR_INVALID_PARAMETER) {
			g.shared = r == CUPTI_SUCCESS;
			return r;
		}
		gs_agent_log(
		    "CUPTI %u refused the multi-subscriber request; asking with the 13.0 layout",
		    g.api.version);
		sp.allowMultipleSubscribers = 0;
	}
	sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
	return g.api.Subscribe_v2(&g.sub, callback, NULL, (CUpti_SubscriberParams *)&sp);
}

static void unsubscribe(bool finalize);

/* Subscribe and turn the resource callbacks on.  0; -EBUSY when another
 * subscriber holds CUPTI (g.holder names it); -EIO when CUPTI failed
 * otherwise (GPU sampling off for the process, set_off). */
static int subscribe(void)
{
	static const CUpti_CallbackId res[] = {
		CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
		CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
		CUPTI_CBID_RESOURCE_MODULE_LOADED,
		CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING,
	};
	char msg[GS_GPU_STATUS_MSG_LEN], holder[sizeof(g.holder)];
	CUptiResult r;

	if (g.subscribed)
		return 0;
	r = subscribe_call(holder, sizeof(holder));
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		holder[sizeof(holder) - 1] = 0;
		snprintf(g.holder, sizeof(g.holder), "%s", holder[0] ? holder : "unnamed");
		g.holder_result = r;
		return -EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		set_off(explain(r, ~0u, "cuptiSubscribe", msg, sizeof(msg)), r, msg);
		return -EIO;
	}
	clear_pending_contexts(); /* only contexts seen from now on */
	g.subscribed = true;
	atomic_store(&g.cb_live, true);
	gs_agent_log("subscribed to CUPTI%s", g.shared ? " (multi-subscriber mode requested)" : "");
	for (size_t i = 0; i < sizeof(res) / sizeof(*res); i++)
		if ((r = g.api.EnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE, res[i])) !=
		    CUPTI_SUCCESS) {
			/* without context and module callbacks nothing can be sampled */
			set_off(explain(r, ~0u, "cuptiEnableCallback(resource)", msg, sizeof(msg)),
				r, msg);
			unsubscribe(false);
			return -EIO;
		}
	return 0;
}

/* Give CUPTI back, so torch.profiler (Kineto) or any other tool can
 * subscribe.  Contexts are forgotten: their destruction is not seen while
 * unsubscribed, and a stale CUcontext must never reach CUPTI at the next
 * arm (they are found again then).  Cubins stay.  Caller holds g.lock,
 * every context disabled. */
static void unsubscribe(bool finalize)
{
	CUptiResult r = CUPTI_ERROR_NOT_INITIALIZED;

	atomic_store(&g.finalize_pending, false);
	if (!g.subscribed)
		return;
	set_launch_callbacks(false);
	atomic_store(&g.cb_live, false);
	/* cuptiFinalize ends the subscription with the rest of CUPTI */
	if (finalize && (r = g.api.Finalize()) != CUPTI_SUCCESS)
		gs_agent_log("cuptiFinalize: %s", gs_cupti_strerror(&g.api, r));
	if (finalize && r == CUPTI_SUCCESS)
		gs_agent_log("CUPTI finalized at a launch's exit");
	else if ((r = g.api.Unsubscribe(g.sub)) != CUPTI_SUCCESS)
		gs_agent_log("cuptiUnsubscribe: %s", gs_cupti_strerror(&g.api, r));
	g.subscribed = g.shared = false;
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		free_ctx_buffers(&g.ctx[i]);
		g.ctx[i].in_use = g.ctx[i].green_left = false;
		g.ctx[i].state = CTX_IDLE;
	}
	atomic_store(&g.green_left, 0);
	clear_pending_contexts();
	gs_agent_log("unsubscribed from CUPTI");
}

/* Contexts created while unsubscribed, as far as the driver names them:
 * the devices' active primary contexts (the CUDA runtime's, PyTorch's).
 * Only an active one is retained, so none is created, and Retain + Release
 * leaves its count as it was; its destruction is seen from now on.  Other
 * contexts (cuCtxCreate) are found at their next kernel launch. */
static void find_primary_contexts(void)
{
	int n = 0;

	if (!g.api.DevCount || !g.api.DevGet || !g.api.PrimaryState || !g.api.PrimaryRetain ||
	    !g.api.PrimaryRelease || g.api.DevCount(&n) != CUDA_SUCCESS)
		return;
	for (int i = 0; i < n && i < GS_AGENT_MAX_CTX; i++) {
		CUdevice dev;
		CUcontext ctx = NULL;
		unsigned int flags = 0;
		int active = 0;

		if (g.api.DevGet(&dev, i) != CUDA_SUCCESS ||
		    g.api.PrimaryState(dev, &flags, &active) != CUDA_SUCCESS || !active)
			continue;
		in_driver_call = true;
		if (g.api.PrimaryRetain(&ctx, dev) == CUDA_SUCCESS) {
			if (ctx && !ctx_find(ctx) && ctx_add(ctx))
				gs_agent_log("primary context of device %d found at arm", i);
			g.api.PrimaryRelease(dev);
		}
		in_driver_call = false;
	}
}

/* ---- arm / disarm (continued) ------------------------------------------ */

/* Every known context refused PC sampling: the process is CPU-only.  Launch
 * callbacks off, and one process status naming the first context's reason
 * (they share a cause in practice).  A context created later is still
 * tried (CONTEXT_CREATED). */
static bool all_refused(void)
{
	if (!count_live() || count_armed() || count_deferred())
		return false;
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		const struct gs_ctx *c = &g.ctx[i];
		if (!c->in_use || c->state != CTX_OFF)
			continue;
		set_launch_callbacks(false);
		gs_agent_armed = 0;
		if (!g.refused_reported)
			emit_status(NULL, GS_GPU_ST_OFF, c->reason, c->result,
				    "GPU sampling off: %.230s", c->msg);
		g.refused_reported = true;
		return true;
	}
	return false;
}

static void emit_armed(void)
{
	char held[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = "";

	if (g.holder_reported)
		snprintf(held, sizeof(held),
			 "; GPU sampling started late: \"%s\" held CUPTI until now", g.holder);
	emit_status(NULL, GS_GPU_ST_ARMED, g.holder_reported ? GS_GPU_R_OTHER_SUBSCRIBER : 0, 0,
		    "armed: %u of %u contexts sampled, %s, CUPTI %u at %.120s%s%s",
		    count_armed() + count_deferred(), count_live(),
		    g.opts.mode == GS_GPU_MODE_SERIALIZED ? "kernel-serialized" : "continuous",
		    g.api.version, g.api.path, g.shared ? ", multi-subscriber mode requested" : "",
		    held);
}

/* CUPTI API versions name toolkits (cupti_version.h: "v26 : CUDA Toolkit
 * 12.8", "v27 : CUDA Toolkit 12.9"); 12.8 Update 1 has no number of its
 * own, so v26 may be either. */
#define GS_CUPTI_API_12_8 26

/* PC sampling beside concurrent-kernel tracing (torch.profiler/Kineto,
 * Nsight Systems in the same job) is compatible only from CUDA 12.8 Update
 * 1: said once per session with a CUPTI that may be older.  The agent
 * cannot see whether such tracing is on (the Activity API needs no
 * subscription), so the warning names the case. */
static void warn_old_cupti(void)
{
	if (!g.api.version || g.api.version > GS_CUPTI_API_12_8)
		return;
	emit_status(NULL, GS_GPU_ST_WARNING, GS_GPU_R_CUPTI_TOO_OLD, 0,
		    "CUPTI API v%u (CUDA 12.8 or older): PC sampling beside concurrent-kernel "
		    "tracing (torch.profiler, Nsight Systems) is compatible only from CUDA 12.8 "
		    "Update 1; with such a tracer on, use a newer CUDA or profile in turn",
		    g.api.version);
}

/* Subscribe, find the contexts and sample them.  While another subscriber
 * holds CUPTI: status OFF naming it, once per session; the CPU profile goes
 * on and the watcher asks again every GS_AGENT_SUB_RETRY_MS (a
 * torch.profiler window ends). */
static void arm_subscribed(void)
{
	int rc = subscribe();

	g.sub_try_ns = now_ns();
	if (rc == -EBUSY) {
		if (!g.holder_reported)
			emit_status(
			    NULL, GS_GPU_ST_OFF, GS_GPU_R_OTHER_SUBSCRIBER, g.holder_result,
			    "GPU sampling off: another CUPTI subscriber holds CUPTI: \"%s\" "
			    "(torch.profiler/Kineto, Nsight Systems/Compute, cuda-gdb...); CPU "
			    "profile only, asking again every second: stop it to sample the GPU",
			    g.holder);
		g.holder_reported = true;
		return;
	}
	if (rc) {
		emit_status(NULL, GS_GPU_ST_OFF, g.off_reason, g.off_result, "%s", g.off_msg);
		return;
	}
	find_primary_contexts();
	arm_all();
	for (size_t i = 0; i < g.n_cubins; i++)
		emit_cubin(&g.cubins[i], GS_GPU_CUBIN_REPLAY);
	if (all_refused())
		return;
	/* Launch callbacks only while something is sampled, or while no
	 * context is known yet (late attach: the first launch names it). */
	set_launch_callbacks(count_armed() > 0 || count_live() == 0 || count_deferred() > 0);
	gs_agent_armed = 1;
	emit_armed();
	warn_old_cupti();
}

static void arm(void)
{
	struct gs_agent_opts o;
	uint32_t session;

	read_cfg(&o, &session);
	g.opts = o;
	g.session = session;
	g.armed = true;
	g.holder_reported = g.refused_reported = false;
	g.last_rate_ns = now_ns();
	g.last_rate_launches = atomic_load(&g.launches);
	atomic_store(&g.launch_every, 1);
	if (g.off_reason) {
		emit_status(NULL, GS_GPU_ST_OFF, g.off_reason, g.off_result, "%s", g.off_msg);
		return;
	}
	arm_subscribed();
}

/* Drain every armed context (and Disable it), each made current on this
 * thread for the calls.  Caller holds g.lock. */
static void drain_armed(bool disable)
{
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		struct gs_ctx *c = &g.ctx[i];
		if (!c->in_use || c->state != CTX_ARMED || c->green)
			continue; /* a green one: its launches, or left enabled */
		push_ctx(c);
		/* one drained from its launches gets its leftovers from Disable */
		if (!c->drain_on_launch)
			ctx_drain(c);
		if (disable)
			ctx_disable(c, true);
		pop_ctx();
	}
}

static void disarm(void);

/* Detach asked: leave the last drain and Disable to the application's
 * launch callbacks (disarm_in_launch) for up to GS_AGENT_DISARM_WAIT_MS,
 * then do what is left here: a job that launches nothing more is disarmed
 * all the same.  Caller holds g.lock. */
static void start_disarm(void)
{
	uint64_t now = now_ns();

	if (!atomic_load(&g.disarming)) {
		atomic_store(&g.disarming, true);
		g.disarm_deadline_ns = now + GS_AGENT_DISARM_WAIT_MS * 1000000ull;
	}
	if (!g.launch_cb_on || !count_armed() || now >= g.disarm_deadline_ns) {
		if (count_armed() > count_green())
			gs_agent_log("%u contexts launched nothing since the detach: disabled by "
				     "the agent's thread",
				     count_armed() - count_green());
		disarm();
	}
}

static void disarm(void)
{
	uint32_t green_left = 0;

	/* Disable before the launch callbacks go: in kernel-serialized mode a
	 * kernel launched in between would have no flush (its range parked in
	 * the configured buffer and overwritten by the next kernel's). */
	drain_armed(true);
	set_launch_callbacks(false);
	for (int i = 0; i < GS_AGENT_MAX_CTX; i++) {
		struct gs_ctx *c = &g.ctx[i];
		if (!c->in_use)
			continue;
		if (c->state == CTX_OFF && c->reason == GS_GPU_R_SECOND_CONTEXT)
			c->state = CTX_IDLE; /* may be the sampled one next time */
		c->arm_on_launch = c->drain_on_launch = false;
		if (c->state == CTX_ARMED && c->green) {
			c->green_left = true; /* never made current here */
			green_left++;
			continue;
		}
		c->hwbuf = 0; /* sized again for the next session's options */
		free_ctx_buffers(c);
	}
	emit_status(
	    NULL, GS_GPU_ST_DISARMED, g.off_reason, g.off_result,
	    "disarmed: %" PRIu64 " PC samples in %" PRIu64 " batches, %" PRIu64 " dropped, "
	    "%" PRIu64 " launch events, %" PRIu64 " serialized flushes deferred, %" PRIu64
	    " all-zero PC records skipped, %" PRIu64 " function-name pointers past the cap, "
	    "%u green contexts left sampling until their next launch",
	    g.samples, g.batches, g.dropped, (uint64_t)atomic_load(&g.launch_events),
	    (uint64_t)atomic_load(&g.flush_missed), g.zero_records, g.names_past_cap, green_left);
	g.armed = false;
	atomic_store(&g.disarming, false);
	gs_agent_armed = 0;
	g.holder_reported = false;
	atomic_store(&g.green_left, green_left);
	if (green_left)
		set_launch_callbacks(true); /* CUPTI released after their Disable */
	else
		release_cupti();
}

/* After a disarm with every context disabled: CUPTI finalized or given
 * back as the subscribe mode wants.  Caller holds g.lock. */
static void release_cupti(void)
{
	if (g.env_opts.subscribe == GS_AGENT_SUB_ARM && g.api.Finalize) {
		/* Attached to a running job: an idle CUPTI left initialized
		 * slows it (Kineto saw lasting slowdowns), so it is finalized,
		 * "from the exit call site of any of the CUDA Driver or Runtime
		 * API" (CUPTI Usage 2.3.5), at the next launch's EXIT callback.
		 * CUPTI may be attached again after: "You can attach and detach
		 * CUPTI any number of times" (ibid.). */
		set_launch_callbacks(true);
		g.finalize_deadline_ns = now_ns() + GS_AGENT_DISARM_WAIT_MS * 1000000ull;
		atomic_store(&g.finalize_pending, g.launch_cb_on);
		if (!g.launch_cb_on)
			unsubscribe(false);
	} else if (g.env_opts.subscribe != GS_AGENT_SUB_INIT) {
		unsubscribe(false); /* dormant again: CUPTI is the user's */
	}
}

/* At a launch's exit site, on the application's thread, after a disarm in
 * subscribe=arm: cuptiFinalize (it synchronizes every context and blocks
 * the application's threads while CUPTI tears down: once per detach). */
static void finalize_in_launch(void)
{
	if (!lock_bounded(5))
		return; /* the next launch, or the watcher's unsubscribe */
	if (atomic_load(&g.finalize_pending) && !g.armed && !g.exiting)
		unsubscribe(true);
	pthread_mutex_unlock(&g.lock);
}

/* ---- CUPTI callbacks --------------------------------------------------- */

static void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd)
{
	struct gs_ctx *c;

	if (in_driver_call) {
		/* The watcher's own Retain / Release, under g.lock: a context
		 * it made go away is marked gone (reaped without a CUPTI call);
		 * one it made is not adopted (released right away). */
		if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING &&
		    (c = ctx_find(rd->context)))
			atomic_store(&c->gone, true);
		return;
	}
	switch (cbid) {
	case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
		if (!lock_bounded(100)) {
			queue_pending(rd->context);
			return;
		}
		c = ctx_add(rd->context);
		/* Armed: enable right here, on the creating thread, as NVIDIA's
		 * continuous sample does, so the first kernels are sampled. */
		if (c && g.armed && !g.exiting && !atomic_load(&g.disarming))
			ctx_arm(c);
		pthread_mutex_unlock(&g.lock);
		return;
	case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
		/* Marked gone before waiting for the lock, so the watcher starts
		 * no new CUPTI call on it while we wait (lock-free lookup). */
		if ((c = ctx_find(rd->context)))
			atomic_store(&c->gone, true);
		if (!lock_bounded(200)) {
			/* CUPTI tears PC sampling down with the context; never
			 * touch it again (the watcher reaps the entry). */
			if (c)
				gs_agent_log("context %u destroyed while the agent was busy",
					     c->uid);
			return;
		}
		if (c && c->in_use && c->ctx == rd->context) {
			atomic_store(&c->gone, false); /* ours until it is gone: the last drain */
			if (c->state == CTX_ARMED && !g.exiting) {
				if (!c->green_left) /* no session for those */
					ctx_drain(c);
				ctx_disable(c, !c->green_left);
			}
			green_left_gone(c);
			free_ctx_buffers(c);
			c->in_use = false;
		}
		pthread_mutex_unlock(&g.lock);
		return;
	case CUPTI_CBID_RESOURCE_MODULE_LOADED:
	case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: {
		const CUpti_ModuleResourceData *m = rd->resourceDescriptor;
		struct gs_cubin *b;

		if (!lock_bounded(100)) {
			queue_cubin(rd->context, m,
				    cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
			return;
		}
		adopt_cubins();           /* earlier ones first */
		c = ctx_add(rd->context); /* finds it, or adds one created before us */
		/* A module load/unload starts a new range: drain first so PCs of
		 * the old and new module never mix. */
		if (c && c->state == CTX_ARMED && g.armed && !g.exiting)
			ctx_drain(c);
		b = cubin_add(m, c);
		if (b && cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
			b->flags |= GS_GPU_CUBIN_UNLOADED;
		if (b && g.armed)
			emit_cubin(b, 0);
		pthread_mutex_unlock(&g.lock);
		return;
	}
	default:
		return;
	}
}

static void CUPTIAPI callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			      const void *data)
{
	if (g.forked || !atomic_load(&g.cb_live))
		return;
	if (domain == CUPTI_CB_DOMAIN_RESOURCE)
		on_resource(cbid, data);
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && g.armed)
		on_launch(data, cbid);
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && atomic_load(&g.green_left) &&
		 ((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_EXIT)
		flush_in_launch(((const CUpti_CallbackData *)data)->context);
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && atomic_load(&g.finalize_pending) &&
		 ((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_EXIT)
		finalize_in_launch();
}

/* ---- watcher ----------------------------------------------------------- */

static bool want_armed(void)
{
	uint32_t session = gs_agent_cfg.session, req = gs_agent_cfg.detach_req;

	if (!gs_emit_armed())
		return false;
	return !(session && req == session);
}

static void watcher_tick(void)
{
	bool want = want_armed();
	uint64_t now;

	pthread_mutex_lock(&g.lock);
	if (g.exiting) {
		pthread_mutex_unlock(&g.lock);
		return;
	}
	reap_gone();
	adopt_cubins();
	/* attached again, or no launch came to finalize CUPTI at */
	if (atomic_load(&g.finalize_pending) && (want || now_ns() >= g.finalize_deadline_ns))
		unsubscribe(false);
	if (want && g.armed && atomic_load(&g.disarming))
		disarm(); /* attached again while disarming: finish, arm anew */
	if (want && g.armed && gs_agent_cfg.session != g.session) {
		disarm(); /* re-attached between two polls: start a new session */
	}
	if (want && !g.armed) {
		arm();
	} else if (!want && g.armed) {
		start_disarm();
	} else if (g.armed && !g.off_reason && !g.subscribed) {
		if (now_ns() - g.sub_try_ns >= GS_AGENT_SUB_RETRY_MS * 1000000ull)
			arm_subscribed(); /* is CUPTI free now? */
	} else if (g.armed && !g.off_reason) {
		now = now_ns();
		arm_all(); /* contexts found late, or freed by a detached sibling */
		if (count_armed() || count_deferred()) {
			set_launch_callbacks(true);
			if (g.refused_reported) { /* a new context took it */
				g.refused_reported = false;
				gs_agent_armed = 1;
				emit_armed();
			}
		} else {
			all_refused();
		}
		if (now - g.last_drain_ns >= (uint64_t)g.opts.drain_ms * 1000000ull) {
			drain_armed(false);
			g.last_drain_ns = now;
		}
		adapt_launch_rate(now);
	}
	pthread_mutex_unlock(&g.lock);
}

/* A host without a GPU (the driver's CUDA_ERROR_NO_DEVICE): said while
 * dormant too, since nothing is subscribed then.  Asked once the
 * application's cuInit has returned (never from inside it). */
static void explain_no_driver(void)
{
	if (!g.api.Init || (g.off_reason && g.off_reason != GS_GPU_R_NO_DRIVER))
		return;
	if (g.api.Init(0) == CUDA_ERROR_NO_DEVICE)
		set_off(GS_GPU_R_NO_DRIVER, CUDA_ERROR_NO_DEVICE,
			"no CUDA device: the driver sees no GPU (cuInit: CUDA_ERROR_NO_DEVICE); "
			"CPU profile only");
}

static void *watcher(void *arg)
{
	struct timespec ts = { 0, GS_AGENT_POLL_MS * 1000000L };

	pthread_mutex_lock(&g.lock);
	explain_no_driver();
	pthread_mutex_unlock(&g.lock);
	for (;;) {
		nanosleep(&ts, NULL);
		if (g.exiting || g.forked)
			return NULL;
		watcher_tick();
	}
	return NULL;
}

static void at_exit(void)
{
	/* Bounded: exit must never hang on a watcher stuck inside CUPTI. */
	if (!lock_bounded(500)) {
		g.exiting = true;
		return;
	}
	/* No GetData or Disable here: at exit the driver may already have torn
	 * the contexts down (parcagpu avoids the same calls).  Contexts the
	 * program destroyed were drained at DESTROY_STARTING; what the others
	 * collected since the last drain (one drain interval) is lost. */
	if (g.armed) {
		emit_status(NULL, GS_GPU_ST_DISARMED, 0, 0,
			    "process exiting: %" PRIu64 " PC samples in %" PRIu64 " batches",
			    g.samples, g.batches);
		g.armed = false;
	}
	g.exiting = true;
	/* A context still sampled gets its records copied into its configured
	 * buffer at its teardown, after this handler (the driver's exit, a
	 * runtime's): CUPTI still holds the name strings then, shared "across
	 * all the records" (cupti_pcsampling.h:144-148).  Freed only when no
	 * configured buffer is CUPTI's any more. */
	if (!count_cfg_live())
		free_names(); /* no record can refer to them any more */
	pthread_mutex_unlock(&g.lock);
}

/* A fork child inherits the agent but no CUDA and no watcher. */
static void after_fork_child(void)
{
	pthread_mutex_init(&g.lock, NULL);
	g.forked = true;
	g.armed = false;
}

/* CUPTI's cubin CRC is sparse: cubins that differ in one immediate
 * collide and would be symbolized against each other.  Ours reads every
 * byte (records.h); CUPTI calls it at each module load. */
static void CUPTIAPI compute_crc(const void *cubin, size_t size, uint64_t *crc)
{
	*crc = gs_cubin_hash(cubin, size);
}

static void register_crc(void)
{
	CUptiResult r;

	if (!g.api.RegisterComputeCrcCallback) {
		gs_agent_log(
		    "no cuptiRegisterComputeCrcCallback: cubins keyed by CUPTI's sparse CRC");
		return;
	}
	r = g.api.RegisterComputeCrcCallback(compute_crc);
	g.own_crc = r == CUPTI_SUCCESS;
	if (!g.own_crc)
		gs_agent_log("cuptiRegisterComputeCrcCallback: %s", gs_cupti_strerror(&g.api, r));
}

static void start_watcher(void)
{
	sigset_t all, old;
	pthread_attr_t at;
	pthread_t t;

	/* The application's signal handlers must never run on our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 << 10);
	if (pthread_create(&t, &at, watcher, NULL) == 0)
		pthread_setname_np(t, "gs-agent");
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Entry point called by the CUDA driver (CUDA_INJECTION64_PATH).  Returns 1:
 * a failure here only turns GPU sampling off; the job always runs. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	static int done;
	char err[GS_GPU_STATUS_MSG_LEN];

	if (__atomic_exchange_n(&done, 1, __ATOMIC_SEQ_CST))
		return 1;
	default_opts(&g.env_opts);
	if (gs_agent_parse_opts(getenv("GS_AGENT_OPTS"), &g.env_opts))
		gs_agent_log("GS_AGENT_OPTS has unknown or bad entries; ignoring those");
	g.opts = g.env_opts;
	atomic_store(&g.launch_every, 1);
	pthread_mutex_lock(&g.lock);
	if (gs_cupti_open(&g.api, err, sizeof(err))) {
		set_off(g.api.lib ? GS_GPU_R_CUPTI_TOO_OLD : GS_GPU_R_NO_CUPTI, 0, err);
	} else if (g.api.version < 15) {
		snprintf(err, sizeof(err),
			 "CUPTI API version %u at %.160s has no PC sampling API "
			 "(needs CUDA 11.3+)",
			 g.api.version, g.api.path);
		set_off(GS_GPU_R_CUPTI_TOO_OLD, 0, err);
	} else {
		g.cupti_ok = true;
		register_crc();
		/* gpusample -- CMD (subscribe=launch) or a job that asked for it:
		 * subscribed before the first module loads.  Otherwise nothing
		 * is subscribed until gpusample arms the agent. */
		if (g.env_opts.subscribe != GS_AGENT_SUB_ARM && subscribe() == -EBUSY)
			gs_agent_log("CUPTI held by \"%s\": subscribing again at arm", g.holder);
	}
	pthread_mutex_unlock(&g.lock);
	gs_agent_log("initialized: CUPTI %u (%s), PC record %zu bytes", g.api.version, g.api.path,
		     g.api.pcdata_size);
	pthread_atfork(NULL, NULL, after_fork_child);
	atexit(at_exit);
	start_watcher();
	return 1;
}

/* Entry point when gpusample --inject has the interpreter load the agent
 * as an extension module (_imp.create_dynamic: dlopen by absolute path, no
 * search).  Starts the agent and makes no module: NULL (the interpreter
 * raises SystemError, which the injected script ignores). */
__attribute__((visibility("default"))) void *PyInit_libgpusample_agent(void)
{
	InitializeInjection();
	return NULL;
}
