/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * CUDA driver memory calls: uprobes on libcuda.so.1's allocation entry
 * points (records.h, gs_mem_*).  Included once, at the end of
 * bpf/gpusample.bpf.c, after gpu.bpf.h (its per-process rate windows are
 * shared, under their own kind).
 *
 *   gs_mem_enter       uprobe on an allocation entry point (first argument
 *                      the out-parameter): the thread's CPU stack and the
 *                      raw arguments as GS_REC_MEM_CALL; remembers args[0]
 *                      and args[1] for the return.  gs_mem_enter_compat is
 *                      its twin for kernels before bpf_loop (the loader
 *                      keeps one).
 *   gs_mem_return      uretprobe on the same: the result and the
 *                      out-parameter's value as GS_REC_MEM_RET.
 *   gs_mem_free        uprobe on a free-like entry point: GS_REC_MEM_FREE,
 *                      no stack.
 *
 * User space attaches them per process (gpu/gpumem_probe.c), to libcuda
 * only from root-owned paths.  Which entry point fired is the record's ip:
 * without bpf_cookie (5.15+) one program serves them all.
 */
#ifndef GS_GPUMEM_BPF_H
#define GS_GPUMEM_BPF_H

/* Driver memory calls per second and process that are passed on (set by
 * the loader: GS_GPU_MEM_RATE_MAX); the rest are counted.  PyTorch's
 * caching allocator calls the driver a few times a second at most. */
const volatile __u32 gpu_mem_rate = 2000;

/* A call in flight on a thread, from entry to return.  depth counts nested
 * entries of probed functions (one entry point calling another): only the
 * outermost call is recorded.  LRU: a thread killed mid-call leaves its
 * entry behind, and the map never grows. */
struct gs_mem_pending {
	__u64 call_ns;
	__u64 out_ptr, aux_ptr;
	__u32 depth, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct gs_mem_pending);
} mem_pending SEC(".maps");

_Static_assert(sizeof(struct gs_mem_call) == GS_SCRATCH_PREFIX,
	       "the memory call's fixed part is the scratch prefix");

#define GS_MEM_RATE_KIND 2 /* gs_gpu_rate_ok's kind (0 records, 1 launches) */

static __always_inline int gs_mem_enter_body(struct pt_regs *ctx, bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct gs_stats *st = gs_stats_get();
	struct gs_mem_pending *pend, fresh = {};
	struct gs_target none = {}, *t;
	struct gs_mem_call *c;
	struct gs_cpu_sample *rec;
	__u32 ssize;
	__u64 total;
	void *buf;

	pend = bpf_map_lookup_elem(&mem_pending, &pid_tgid);
	if (pend) {
		pend->depth++;
		return 0;
	}
	if (!gs_gpu_rate_ok(tgid, GS_MEM_RATE_KIND, gpu_mem_rate)) { /* before the stack walk */
		gs_stat_inc(st, GS_STAT_MEM_RATE);
		return 0;
	}
	buf = gs_scratch(GS_SCRATCH_MEM);
	if (!buf) {
		gs_stat_inc(st, GS_STAT_SCRATCH_ERR);
		return 0;
	}
	c = buf;
	c->hdr.type = GS_REC_MEM_CALL;
	c->hdr.version = GS_RECORDS_VERSION;
	c->ip = PT_REGS_IP(ctx);
	c->args[0] = PT_REGS_PARM1(ctx);
	c->args[1] = PT_REGS_PARM2(ctx);
	c->args[2] = PT_REGS_PARM3(ctx);
	c->args[3] = PT_REGS_PARM4(ctx);
	c->pad = 0;
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t)
		t = &none; /* a process outside the targets: native stack only */
	rec = buf + GS_SCRATCH_PREFIX;
	gs_fill_head(rec, pid_tgid, GS_ORIGIN_MEM);
	ssize = gs_fill_stack(ctx, (struct task_struct *)bpf_get_current_task(), tgid, t, false,
			      rec, st, compat);
	if (ssize > GS_CPU_SAMPLE_MAX_SIZE)
		return 0;
	rec->hdr.size = ssize;
	c->hdr.ktime_ns = rec->hdr.ktime_ns;
	total = GS_SCRATCH_PREFIX + ssize;
	asm volatile("" : "+r"(total)); /* keep the check on the register used below */
	if (total > GS_SCRATCH_SIZE)
		return 0;
	c->hdr.size = total;
	fresh.call_ns = c->hdr.ktime_ns;
	fresh.out_ptr = c->args[0];
	fresh.aux_ptr = c->args[1];
	if (bpf_ringbuf_output(&events, buf, total, gs_rb_lazy())) {
		gs_stat_inc(st, GS_STAT_MEM_LOST);
		return 0;
	}
	gs_stat_inc(st, GS_STAT_MEM_EVENTS);
	/* Only a recorded call is awaited at its return. */
	bpf_map_update_elem(&mem_pending, &pid_tgid, &fresh, BPF_ANY);
	return 0;
}

SEC("uprobe")
int gs_mem_enter(struct pt_regs *ctx)
{
	return gs_mem_enter_body(ctx, false);
}

SEC("uprobe")
int gs_mem_enter_compat(struct pt_regs *ctx)
{
	return gs_mem_enter_body(ctx, true);
}

static __always_inline void gs_mem_hdr(struct gs_rec_hdr *h, __u16 type, __u32 size)
{
	h->type = type;
	h->version = GS_RECORDS_VERSION;
	h->size = size;
	h->ktime_ns = bpf_ktime_get_ns();
}

/* A fixed-size memory record into `events`, counted. */
static __always_inline void gs_mem_output(struct gs_stats *st, void *rec, __u64 size)
{
	if (bpf_ringbuf_output(&events, rec, size, gs_rb_lazy()))
		gs_stat_inc(st, GS_STAT_MEM_LOST);
	else
		gs_stat_inc(st, GS_STAT_MEM_EVENTS);
}

SEC("uretprobe")
int gs_mem_return(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gs_stats *st = gs_stats_get();
	struct gs_mem_pending *pend = bpf_map_lookup_elem(&mem_pending, &pid_tgid);
	struct gs_mem_ret r = {};

	if (!pend)
		return 0; /* not recorded at entry (rate, ring full, attached mid-call) */
	if (pend->depth) {
		pend->depth--;
		return 0;
	}
	gs_mem_hdr(&r.hdr, GS_REC_MEM_RET, sizeof(r));
	r.tgid = pid_tgid >> 32;
	r.tid = (__u32)pid_tgid;
	r.call_ns = pend->call_ns;
	r.result = (__s32)PT_REGS_RC(ctx);
	if (bpf_probe_read_user(&r.out, sizeof(r.out), (void *)pend->out_ptr))
		r.flags |= GS_MEMRET_OUT_FAULT;
	if (bpf_probe_read_user(&r.aux, sizeof(r.aux), (void *)pend->aux_ptr))
		r.flags |= GS_MEMRET_AUX_FAULT;
	bpf_map_delete_elem(&mem_pending, &pid_tgid);
	gs_mem_output(st, &r, sizeof(r));
	return 0;
}

SEC("uprobe")
int gs_mem_free(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gs_stats *st = gs_stats_get();
	struct gs_mem_free f = {};

	if (!gs_gpu_rate_ok(pid_tgid >> 32, GS_MEM_RATE_KIND, gpu_mem_rate)) {
		gs_stat_inc(st, GS_STAT_MEM_RATE);
		return 0;
	}
	gs_mem_hdr(&f.hdr, GS_REC_MEM_FREE, sizeof(f));
	f.tgid = pid_tgid >> 32;
	f.tid = (__u32)pid_tgid;
	f.ip = PT_REGS_IP(ctx);
	f.args[0] = PT_REGS_PARM1(ctx);
	f.args[1] = PT_REGS_PARM2(ctx);
	gs_mem_output(st, &f, sizeof(f));
	return 0;
}

#endif
