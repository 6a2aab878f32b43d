// SPDX-License-Identifier: MIT
/* Test driver for the CFI unwinder (tests/cfi/cfi_probe.c): cpu-clock samples
 * of the target processes, user stack from gs_unwind_begin (the entry point
 * gs_fill_stack uses, walk-state level 0: nothing nests here), one ring-buffer
 * record per sample.  Independent of bpf/gpusample.bpf.c so the unwinder can
 * be tested and measured on its own. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "gpusample/records.h"
#include "unwind.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct probe_sample {
	__u32 tgid, tid;
	__u16 err, flags;
	__u32 n;
	__u64 ips[GS_MAX_USER_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} probe_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct probe_sample);
} probe_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} probe_events SEC(".maps");

__u64 probe_err[GS_UNWIND_NR];
__u64 probe_lost;
__u64 probe_unwind_ns, probe_unwind_cnt, probe_frames; /* cost of gs_unwind_begin alone */

SEC("perf_event")
int probe_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, zero = 0;
	struct probe_sample *s;
	struct gs_unwind_state *w;
	__u16 flags = 0;
	__u64 n, t0;

	if (!bpf_map_lookup_elem(&probe_targets, &tgid))
		return 0;
	s = bpf_map_lookup_elem(&probe_scratch, &zero);
	if (!s)
		return 0;
	s->tgid = tgid;
	s->tid = (__u32)id;
	t0 = bpf_ktime_get_ns();
	w = gs_unwind_begin(ctx, tgid, 0, &flags, false);
	__sync_fetch_and_add(&probe_unwind_ns, bpf_ktime_get_ns() - t0);
	if (!w)
		return 0;
	/* n was written by the walk: the verifier does not know its range */
	n = *(volatile __u32 *)&w->n;
	if (n > GS_MAX_USER_FRAMES)
		n = GS_MAX_USER_FRAMES;
	asm volatile("" : "+r"(n));
	if (n)
		bpf_probe_read_kernel(s->ips, (n & 0xff) * sizeof(__u64), w->ips);
	s->n = n;
	s->err = w->err;
	__sync_fetch_and_add(&probe_unwind_cnt, 1);
	__sync_fetch_and_add(&probe_frames, n);
	/* the perf regs are kernel regs when the sample interrupted a syscall */
	if ((*(volatile __u64 *)&ctx->regs.cs & 3) == 0) /* ctx loads must be 8 bytes */
		flags |= GS_CPU_IN_KERNEL;
	s->flags = flags;
	if (s->err < GS_UNWIND_NR)
		__sync_fetch_and_add(&probe_err[s->err], 1);
	if (bpf_ringbuf_output(&probe_events, s, sizeof(*s), BPF_RB_NO_WAKEUP))
		__sync_fetch_and_add(&probe_lost, 1);
	return 0;
}

/* Follow fork children of targets (same address space until exec). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(probe_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid), one = 1;

	if (ptgid != ctgid && bpf_map_lookup_elem(&probe_targets, &ptgid))
		bpf_map_update_elem(&probe_targets, &ctgid, &one, BPF_ANY);
	return 0;
}
