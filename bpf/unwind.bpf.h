/* SPDX-License-Identifier: MIT */
/* Native user-stack unwinder (BPF side).  Owner: CFI unwinder.  Included once
 * by bpf/gpusample.bpf.c.
 *
 * Contract:
 *   static __always_inline int gs_unwind_user(void *ctx, struct task_struct *task,
 *           __u32 tgid, __u64 *ips, __u16 *err, __u16 *flags);
 * Writes up to GS_MAX_USER_FRAMES return addresses (leaf = interrupted user
 * PC first) into ips and returns the count; *err = enum gs_unwind_err.
 * ctx is the program context (perf event or uprobe) for bpf_get_stack.
 * This first version walks frame pointers with bpf_get_stack.
 */
#ifndef GS_UNWIND_BPF_H
#define GS_UNWIND_BPF_H

static __always_inline int gs_unwind_user(void *ctx, struct task_struct *task, __u32 tgid,
					  __u64 *ips, __u16 *err, __u16 *flags)
{
	long n = bpf_get_stack(ctx, ips, GS_MAX_USER_FRAMES * sizeof(__u64), BPF_F_USER_STACK);

	if (n < 0) {
		*err = GS_UNWIND_READ_FAULT;
		return 0;
	}
	n /= sizeof(__u64);
	*err = n >= GS_MAX_USER_FRAMES ? GS_UNWIND_DEPTH : GS_UNWIND_OK;
	return n;
}

#endif
