/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Training-step marks.  Included once, at the end of bpf/gpusample.bpf.c
 * (after targets, events, stats and gpu.bpf.h's per-process rate window).
 *
 * gs_step_mark is a uretprobe user space attaches per process
 * (session/steps.c) on torch::autograd::Engine::execute in the libtorch_cpu
 * that process maps: every loss.backward() returns from there once.  The
 * return, not the entry: what follows a backward until the next one's end
 * is the optimizer's step and the next batch's data and forward, whose
 * times vary far less than the backward's own (so the time between two
 * returns is the loop's step time, the optimizer's variation apart).
 * It emits a struct gs_step_mark (records.h) with the thread and the time,
 * nothing else: no stack walk, no read of the target's memory.
 * gs_step_opt is a uprobe at the entry of the profiler's
 * record_function_enter_new in the same library: every Optimizer.step()
 * opens a region named "Optimizer.step#..." there, whether a profiler runs
 * or not; it marks those (the optimizer step: what tells gradient
 * accumulation's several backwards per step apart).  A loop
 * calling backward thousands of times per second is cut at step_mark_rate
 * per second and process (GS_STAT_STEP_RATE counts the rest, and user space
 * then labels no steps in that process rather than wrong ones).
 */
#ifndef GS_STEPS_BPF_H
#define GS_STEPS_BPF_H

/* Marks per second and process passed on (set by the loader). */
const volatile __u32 step_mark_rate = 1000;

/* One mark of kind (enum gs_step_kind) for the current thread, if its
 * process is a target and within its rate (window kind 2 + kind - 1 of
 * the per-process windows gpu.bpf.h keeps; 0, 1 are the GPU's). */
static __always_inline int gs_step_emit(__u32 kind)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct gs_stats *st = gs_stats_get();
	struct gs_step_mark m = {};

	if (!bpf_map_lookup_elem(&targets, &tgid))
		return 0; /* a process that stopped being a target keeps its link a while */
	if (!gs_gpu_rate_ok(tgid, 1 + kind, step_mark_rate)) {
		gs_stat_inc(st, GS_STAT_STEP_RATE);
		return 0;
	}
	m.hdr.type = GS_REC_STEP_MARK;
	m.hdr.version = GS_RECORDS_VERSION;
	m.hdr.size = sizeof(m);
	m.hdr.ktime_ns = bpf_ktime_get_ns();
	m.tgid = tgid;
	m.tid = (__u32)pid_tgid;
	m.kind = kind;
	if (bpf_ringbuf_output(&events, &m, sizeof(m), gs_rb_lazy()))
		gs_stat_inc(st, GS_STAT_STEP_LOST);
	else
		gs_stat_inc(st, GS_STAT_STEP_MARKS);
	return 0;
}

SEC("uretprobe")
int gs_step_mark(struct pt_regs *ctx)
{
	return gs_step_emit(GS_STEP_BACKWARD_END);
}

/* The name every optimizer's step() opens its region with (torch/optim/
 * optimizer.py, 1.13 and 2.x: "Optimizer.step#SGD.step"). */
#define GS_OPT_STEP_PREFIX     "Optimizer.step#"
#define GS_OPT_STEP_PREFIX_LEN 15

/* uprobe on torch::autograd::profiler::record_function_enter_new(const
 * std::string &name, ...): a mark when name starts with the prefix.  It
 * returns a c10::intrusive_ptr by value (a class with a destructor: the
 * caller's return slot comes first, in rdi), so name is the second
 * register argument.  The string (libstdc++'s layout: data pointer, then
 * length) is the target's: two bounded reads, a fault is no mark. */
SEC("uprobe")
int gs_step_opt(struct pt_regs *ctx)
{
	struct {
		__u64 data, len;
	} str;
	char name[GS_OPT_STEP_PREFIX_LEN];
	const char want[] = GS_OPT_STEP_PREFIX;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!bpf_map_lookup_elem(&targets, &tgid) ||
	    bpf_probe_read_user(&str, sizeof(str), (void *)PT_REGS_PARM2(ctx)) ||
	    str.len < GS_OPT_STEP_PREFIX_LEN ||
	    bpf_probe_read_user(name, sizeof(name), (void *)str.data))
		return 0;
#pragma unroll
	for (int i = 0; i < GS_OPT_STEP_PREFIX_LEN; i++)
		if (name[i] != want[i])
			return 0;
	return gs_step_emit(GS_STEP_OPTIMIZER);
}

#endif
