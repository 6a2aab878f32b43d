// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The task iterator of `gpusample dump` (bpf/taskregs.h): one struct
 * gs_task_regs per thread of a process in `dump_tgids`, written to the
 * iterator's seq file.  Two programs, one loaded (bpf/taskregs.c picks by
 * a feature probe): gs_task_regs reads the saved user registers with
 * bpf_task_pt_regs (5.15+); gs_task_regs_compat reads them at the top of
 * the task's kernel stack, where the kernel saved them on entry (the
 * ptrace ABI's struct pt_regs, x86-64 THREAD_SIZE from the loader), as the
 * sampler's compat programs do.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "gpusample/records.h"
#include "taskregs.h"

char LICENSE[] SEC("license") = "GPL"; /* bpf_get_task_stack is GPL-only */

const volatile __u32 gs_thread_size = 16384; /* KASAN kernels: 32768 */
#define GS_PT_REGS_WORDS 21                  /* r15 ... ss */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} dump_tgids SEC(".maps");

/* The record is too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_task_regs);
} dump_scratch SEC(".maps");

/* task->state before 5.14 */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline struct gs_task_regs *begin(struct task_struct *task)
{
	struct gs_task_regs *r;
	__u32 key = 0, tgid;

	tgid = BPF_CORE_READ(task, tgid);
	if (!bpf_map_lookup_elem(&dump_tgids, &tgid))
		return NULL;
	r = bpf_map_lookup_elem(&dump_scratch, &key);
	if (!r)
		return NULL;
	r->tgid = tgid;
	r->tid = BPF_CORE_READ(task, pid);
	if (bpf_core_field_exists(task->__state))
		r->state = BPF_CORE_READ(task, __state);
	else
		r->state = (__u32)BPF_CORE_READ((struct task_struct___pre514 *)task, state);
	r->flags = BPF_CORE_READ(task, on_cpu) ? GS_TREG_ON_CPU : 0;
	r->fsbase = BPF_CORE_READ(task, thread.fsbase);
	r->start_ns = BPF_CORE_READ(task, start_time);
	r->ip = r->sp = r->bp = 0;
	BPF_CORE_READ_STR_INTO(&r->comm, task, comm);
	return r;
}

static __always_inline int finish(struct bpf_iter__task *ctx, struct task_struct *task,
				  struct gs_task_regs *r, __u64 cs)
{
	long n;

	if ((cs & 3) == 3)
		r->flags |= GS_TREG_USER_OK;
	n = bpf_get_task_stack(task, r->kips, sizeof(r->kips), 0);
	if (n < 0) {
		r->n_kernel = 0;
		r->flags |= GS_TREG_KERN_ERR;
	} else {
		r->n_kernel = n / 8;
		r->flags |= GS_TREG_KSTACK;
	}
	bpf_seq_write(ctx->meta->seq, r, sizeof(*r));
	return 0;
}

SEC("iter/task")
int gs_task_regs(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct gs_task_regs *r;
	struct pt_regs *regs;

	if (!task)
		return 0;
	r = begin(task);
	if (!r)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return finish(ctx, task, r, 0);
	r->ip = BPF_CORE_READ(regs, ip);
	r->sp = BPF_CORE_READ(regs, sp);
	r->bp = BPF_CORE_READ(regs, bp);
	r->flags |= GS_TREG_PT_REGS;
	return finish(ctx, task, r, BPF_CORE_READ(regs, cs));
}

SEC("iter/task")
int gs_task_regs_compat(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct gs_task_regs *r;
	__u64 regs[GS_PT_REGS_WORDS];
	void *stack;

	if (!task)
		return 0;
	r = begin(task);
	if (!r)
		return 0;
	stack = BPF_CORE_READ(task, stack);
	if (!stack || bpf_probe_read_kernel(regs, sizeof(regs),
					    stack + gs_thread_size - GS_PT_REGS_WORDS * 8))
		return finish(ctx, task, r, 0);
	/* r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs
	 * flags sp ss */
	r->ip = regs[16];
	r->sp = regs[19];
	r->bp = regs[4];
	return finish(ctx, task, r, regs[17]);
}
