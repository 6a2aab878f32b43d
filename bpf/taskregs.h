/* SPDX-License-Identifier: MIT */
/*
 * Every thread of some processes, now, as the kernel keeps it: the BPF task
 * iterator (bpf/taskregs.bpf.c, `iter/task`, kernel 5.8+) walks the
 * kernel's task list once and writes one struct gs_task_regs per thread of
 * a chosen process into a seq file that user space reads.  Nothing is done
 * to the threads: no ptrace stop, no signal, no wake-up; the iterator only
 * reads the task structs and kernel stacks.
 *
 * Wire layout (includable from BPF C after vmlinux.h, and from user space
 * after gpusample/records.h).
 */
#ifndef GS_BPF_TASKREGS_H
#define GS_BPF_TASKREGS_H

/* gs_task_regs.flags */
#define GS_TREG_ON_CPU   (1u << 0) /* running on a CPU now: its saved registers are stale */
#define GS_TREG_USER_OK  (1u << 1) /* regs are user-mode registers (cs has RPL 3) */
#define GS_TREG_KSTACK   (1u << 2) /* kips[0..n_kernel) came from bpf_get_task_stack */
#define GS_TREG_PT_REGS  (1u << 3) /* read with bpf_task_pt_regs (else top of the kernel stack) */
#define GS_TREG_KERN_ERR (1u << 4) /* bpf_get_task_stack failed */

struct gs_task_regs {
	__u32 tgid, tid;  /* root pid namespace */
	__u32 state;      /* task->__state (task->state before 5.14): TASK_* bits */
	__u32 flags;      /* GS_TREG_* */
	__u64 ip, sp, bp; /* user registers saved on the last kernel entry */
	__u64 fsbase;     /* thread.fsbase: glibc's struct pthread (TLS, TSS keys) */
	__u64 start_ns;   /* task start (CLOCK_MONOTONIC) */
	__u32 n_kernel;   /* kernel frames in kips, leaf first */
	__u32 pad;
	char comm[16];   /* thread comm */
	__u64 kips[127]; /* GS_MAX_KERNEL_FRAMES */
};

#ifndef __VMLINUX_H__
#include <stddef.h>
#include <stdint.h>

/* Call fn once per thread of the processes tgids[0..n) (n <= 4096), in
 * the kernel's task-list order; fn returns 0 to go on.  Loads the iterator
 * (once per call; a few ms), reads it, unloads it.  GS_BPF_COMPAT=1 picks
 * the compat program, as it does the sampler's.  Errors: -ENOTSUP when
 * the kernel cannot load the iterator (no BTF, no task iterator: err says
 * which; the caller falls back to /proc), -EPERM without CAP_BPF /
 * CAP_PERFMON, fn's non-zero value, or another negative errno. */
typedef int (*gs_task_regs_fn)(void *ctx, const struct gs_task_regs *t);
/* info (may be NULL): the program loaded and the instructions the verifier
 * processed for it (its BPF_LOG_STATS line; -1 when not reported), for
 * `gpusample check` and the kernel matrix. */
struct gs_task_regs_info {
	char prog[32]; /* "gs_task_regs" or "gs_task_regs_compat" */
	long insns;
};
int gs_task_regs_read(const uint32_t *tgids, size_t n, gs_task_regs_fn fn, void *ctx,
		      struct gs_task_regs_info *info, char *err, size_t errlen);
#endif

#endif
