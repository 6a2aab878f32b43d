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
 * nothing else: no stack walk, no read of the target's memory.  A loop
 * calling backward thousands of times per second is cut at step_mark_rate
 * per second and process (GS_STAT_STEP_RATE counts the rest, and user space
 * then labels no steps in that process rather than wrong ones).
 */
#ifndef GS_STEPS_BPF_H
#define GS_STEPS_BPF_H

/* Marks per second and process passed on (set by the loader). */
const volatile __u32 step_mark_rate = 1000;

SEC("uretprobe")
int gs_step_mark(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct gs_stats *st = gs_stats_get();
	struct gs_step_mark m = {};

	if (!bpf_map_lookup_elem(&targets, &tgid))
		return 0; /* a process that stopped being a target keeps its link a while */
	/* kind 2 of the per-process windows gpu.bpf.h keeps (0, 1: GPU) */
	if (!gs_gpu_rate_ok(tgid, 2, step_mark_rate)) {
		gs_stat_inc(st, GS_STAT_STEP_RATE);
		return 0;
	}
	m.hdr.type = GS_REC_STEP_MARK;
	m.hdr.version = GS_RECORDS_VERSION;
	m.hdr.size = sizeof(m);
	m.hdr.ktime_ns = bpf_ktime_get_ns();
	m.tgid = tgid;
	m.tid = (__u32)pid_tgid;
	if (bpf_ringbuf_output(&events, &m, sizeof(m), BPF_RB_NO_WAKEUP))
		gs_stat_inc(st, GS_STAT_STEP_LOST);
	else
		gs_stat_inc(st, GS_STAT_STEP_MARKS);
	return 0;
}

#endif
