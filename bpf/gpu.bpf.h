/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * GPU agent USDT handlers.  Owner: GPU agent.  Included once, at the end of
 * bpf/gpusample.bpf.c (after targets, events, stats, gs_scratch() and
 * gs_fill_stack() are defined).
 *
 * The agent (gpu_sampler/, libgpusample_agent.so) builds complete GPU
 * records (include/gpusample/records.h, GS_REC_GPU_*) in its own memory and
 * fires two probes, both with (void *rec, __u64 size):
 *
 *   gpusample:record  PC batches, stall tables, cubin notices, status.
 *                     gs_gpu_record copies the record (at most
 *                     GS_GPU_REC_MAX bytes) into `events`.
 *   gpusample:launch  a sampled kernel launch, on the launching thread
 *                     inside the CUDA launch call.  gs_gpu_launch copies the
 *                     64-byte struct gs_gpu_launch and appends the thread's
 *                     CPU stack (kernel, native, Python) as a complete
 *                     struct gs_cpu_sample with gs_fill_stack().
 *
 * Both overwrite hdr.ktime_ns and gpu.tgid / gpu.tid from the kernel's view
 * (root pid namespace), and drop records whose header does not match the
 * probe (wrong type, version or size), counting them in stats.
 *
 * User space attaches these programs per process with
 * bpf_program__attach_usdt(prog, tgid, agent_path, "gpusample", name, NULL)
 * (gpu/gpu_host.c); attaching raises the probes' semaphores, which is what
 * arms the agent.
 */
#ifndef GS_GPU_BPF_H
#define GS_GPU_BPF_H

#include <bpf/usdt.bpf.h>

/* GS_STAT_GPU_*: common.bpf.h (user space reports them, gpusample/counters.h) */

_Static_assert(sizeof(struct gs_gpu_launch) <= GS_SCRATCH_PREFIX,
	       "launch record must fit the scratch prefix");
_Static_assert(GS_SCRATCH_PREFIX % 8 == 0, "embedded CPU sample must stay 8-aligned");

struct gs_gpu_scratch {
	__u8 b[GS_GPU_REC_MAX];
};

/* Own per-CPU scratch: GPU records can be larger than a CPU sample. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_gpu_scratch);
} gpu_scratch SEC(".maps");

/* Per-process rates (records and launches per second, set by the loader:
 * GS_GPU_*_RATE_MAX in sampler.h).  A fixed one-second window per (tgid,
 * kind) in an LRU hash: a job that forks past its size only gets fresh
 * windows for its new processes, never more memory. */
const volatile __u32 gpu_launch_rate = 5000;
const volatile __u32 gpu_record_rate = 2000;

struct gs_gpu_rate_key {
	__u32 tgid, kind;
};

struct gs_gpu_rate {
	__u64 start_ns;
	__u32 n, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gs_gpu_rate_key);
	__type(value, struct gs_gpu_rate);
} gpu_rate SEC(".maps");

static __always_inline bool gs_gpu_rate_ok(__u32 tgid, __u32 kind, __u32 limit)
{
	struct gs_gpu_rate_key k = { .tgid = tgid, .kind = kind };
	__u64 now = bpf_ktime_get_ns();
	struct gs_gpu_rate *r = bpf_map_lookup_elem(&gpu_rate, &k);

	if (!r) {
		struct gs_gpu_rate fresh = { .start_ns = now, .n = 1 };

		bpf_map_update_elem(&gpu_rate, &k, &fresh, BPF_ANY);
		return true;
	}
	if (now - r->start_ns >= 1000000000ull) {
		/* two CPUs may both reset: a window a few events long, harmless */
		r->start_ns = now;
		r->n = 1;
		return true;
	}
	if (r->n >= limit)
		return false;
	__sync_fetch_and_add(&r->n, 1);
	return true;
}

static __always_inline bool gs_gpu_type_ok(__u16 type)
{
	return type == GS_REC_GPU_PC_BATCH || type == GS_REC_GPU_STALL_TABLE ||
	       type == GS_REC_GPU_CUBIN || type == GS_REC_GPU_STATUS;
}

SEC("usdt")
int BPF_USDT(gs_gpu_record, void *ptr, __u64 size)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gs_stats *st = gs_stats_get();
	struct gs_gpu_common *gc;
	struct gs_rec_hdr *h;
	__u32 zero = 0;
	void *buf;

	buf = bpf_map_lookup_elem(&gpu_scratch, &zero);
	if (!buf) {
		gs_stat_inc(st, GS_STAT_SCRATCH_ERR);
		return 0;
	}
	if (size < sizeof(struct gs_rec_hdr) + sizeof(struct gs_gpu_common) ||
	    size > GS_GPU_REC_MAX || (size & 7)) {
		gs_stat_inc(st, GS_STAT_GPU_BAD);
		return 0;
	}
	size &= GS_GPU_REC_MAX * 2 - 1; /* explicit bound for the verifier */
	if (size > GS_GPU_REC_MAX || bpf_probe_read_user(buf, size, ptr)) {
		gs_stat_inc(st, GS_STAT_GPU_BAD);
		return 0;
	}
	h = buf;
	if (!gs_gpu_type_ok(h->type) || h->version != GS_RECORDS_VERSION || h->size != size) {
		gs_stat_inc(st, GS_STAT_GPU_BAD);
		return 0;
	}
	if (!gs_gpu_rate_ok(pid_tgid >> 32, 0, gpu_record_rate)) {
		gs_stat_inc(st, GS_STAT_GPU_RATE);
		return 0;
	}
	h->ktime_ns = bpf_ktime_get_ns();
	gc = buf + sizeof(*h);
	gc->tgid = pid_tgid >> 32;
	gc->tid = (__u32)pid_tgid;
	/* Wake the reader for the rare records it must act on soon (cubins
	 * are read while the process lives; status, stall tables).  PC
	 * batches, the bulk, wait for its next poll like CPU samples. */
	if (bpf_ringbuf_output(&events, buf, size,
			       h->type == GS_REC_GPU_PC_BATCH ? gs_rb_lazy() : 0))
		gs_stat_inc(st, GS_STAT_GPU_LOST);
	else
		gs_stat_inc(st, GS_STAT_GPU_RECORDS);
	return 0;
}

static __always_inline int gs_gpu_launch_body(void *ctx, void *ptr, __u64 size, bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct gs_stats *st = gs_stats_get();
	struct gs_target none = {}, *t;
	struct gs_gpu_launch *l;
	struct gs_cpu_sample *rec;
	__u32 ssize;
	__u64 total;
	void *buf;

	buf = gs_scratch(GS_SCRATCH_LAUNCH);
	if (!buf) {
		gs_stat_inc(st, GS_STAT_SCRATCH_ERR);
		return 0;
	}
	l = buf;
	if (size != sizeof(*l) || bpf_probe_read_user(l, sizeof(*l), ptr) ||
	    l->hdr.type != GS_REC_GPU_LAUNCH || l->hdr.version != GS_RECORDS_VERSION ||
	    l->hdr.size != sizeof(*l)) {
		gs_stat_inc(st, GS_STAT_GPU_BAD);
		return 0;
	}
	if (!gs_gpu_rate_ok(tgid, 1, gpu_launch_rate)) { /* before the costly stack walk */
		gs_stat_inc(st, GS_STAT_GPU_RATE);
		return 0;
	}
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t)
		t = &none; /* attached but not (yet) a target: native stack only */

	rec = buf + GS_SCRATCH_PREFIX;
	gs_fill_head(rec, pid_tgid, GS_ORIGIN_LAUNCH);
	ssize = gs_fill_stack(ctx, (struct task_struct *)bpf_get_current_task(), tgid, t, false,
			      rec, st, compat);
	if (ssize > GS_CPU_SAMPLE_MAX_SIZE)
		return 0;
	rec->hdr.size = ssize;
	l->hdr.ktime_ns = rec->hdr.ktime_ns;
	l->gpu.tgid = tgid;
	l->gpu.tid = (__u32)pid_tgid;
	/* The embedded sample starts at GS_SCRATCH_PREFIX; pad the gap. */
	total = GS_SCRATCH_PREFIX + ssize;
	asm volatile("" : "+r"(total)); /* keep the check on the register used below */
	if (total > GS_SCRATCH_SIZE)
		return 0;
	l->hdr.size = total;
	if (bpf_ringbuf_output(&events, buf, total, gs_rb_lazy()))
		gs_stat_inc(st, GS_STAT_GPU_LOST);
	else
		gs_stat_inc(st, GS_STAT_GPU_LAUNCHES);
	return 0;
}

/* One of the two is loaded: see gs_sample in gpusample.bpf.c. */
SEC("usdt")
int BPF_USDT(gs_gpu_launch, void *ptr, __u64 size)
{
	return gs_gpu_launch_body(ctx, ptr, size, false);
}

SEC("usdt")
int BPF_USDT(gs_gpu_launch_compat, void *ptr, __u64 size)
{
	return gs_gpu_launch_body(ctx, ptr, size, true);
}

#endif
