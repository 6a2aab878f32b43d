/* SPDX-License-Identifier: MIT */
/* `gpusample check`: does this kernel load gpusample's BPF programs, and at
 * what verifier cost?  For users on a new kernel and for the kernel matrix
 * (scripts/kernel-matrix.sh), which parses these lines. */
#include <stdio.h>
#include <sys/utsname.h>

#include <unistd.h>
#include "gpusample/records.h"
#include "bpf/sampler.h"
#include "bpf/taskregs.h"
#include "cli/cli.h"

#define GS_CHECK_PROGS 32

static void print_features(void)
{
	struct gs_bpf_features f;

	gs_bpf_features_probe(&f);
	printf("feature bpf_loop %s\n", f.bpf_loop ? "yes" : "no");
	printf("feature task_storage %s\n", f.task_storage ? "yes" : "no");
	printf("feature task_pt_regs %s\n", f.task_pt_regs ? "yes" : "no");
	printf("feature current_task_btf %s\n", f.current_task_btf ? "yes" : "no");
}

static int count_thread(void *ctx, const struct gs_task_regs *t)
{
	int *n = ctx;

	*n += t->n_kernel > 0;
	return 0;
}

/* The task iterator of `gpusample dump`, run once over this process: it
 * must load and see this thread with a kernel stack. */
static int check_dump_iterator(void)
{
	struct gs_task_regs_info info = { 0 };
	uint32_t self = (uint32_t)getpid();
	char err[512];
	int n = 0, rc = gs_task_regs_read(&self, 1, count_thread, &n, &info, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "gpusample: dump: %s\n", err);
		return 1;
	}
	if (!n) {
		fprintf(stderr, "gpusample: dump: the task iterator saw no thread of this process "
				"with a kernel stack\n");
		return 1;
	}
	printf("program %s %ld\n", info.prog, info.insns);
	return 0;
}

int gs_check_bpf(void)
{
	struct gs_sampler_opts so = { .frequency_hz = 99,
				      .kernel_stacks = true,
				      .follow_children = true,
				      .offcpu = true,
				      .verifier_stats = true };
	struct gs_prog_stat st[GS_CHECK_PROGS];
	struct gs_sampler *s;
	struct utsname u;
	char err[512];
	int n;

	if (!uname(&u))
		printf("kernel %s\n", u.release);
	print_features();
	if (gs_sampler_open(&so, &s, err, sizeof(err))) {
		fprintf(stderr, "gpusample: %s\n", err);
		return 1;
	}
	n = gs_sampler_prog_stats(s, st, GS_CHECK_PROGS);
	/* the kernel's BPF_COMPLEXITY_LIMIT_INSNS (not in its UAPI headers) */
	printf("verifier: instructions processed per program (the kernel's limit: "
	       "1000000)\n");
	for (int i = 0; i < n; i++)
		printf("program %s %ld\n", st[i].name, st[i].insns);
	gs_sampler_close(s);
	if (check_dump_iterator())
		return 1;
	printf("ok: %d BPF programs load on this kernel\n", n + 1);
	return 0;
}
