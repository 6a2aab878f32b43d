/* SPDX-License-Identifier: MIT */
/* `gpusample check`: does this kernel load gpusample's BPF programs, and at
 * what verifier cost?  For users on a new kernel and for the kernel matrix
 * (scripts/kernel-matrix.sh), which parses these lines. */
#include <stdio.h>
#include <sys/utsname.h>

#include "bpf/sampler.h"
#include "cli/session.h"

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
	for (int i = 0; i < n; i++)
		printf("program %s %ld\n", st[i].name, st[i].insns);
	gs_sampler_close(s);
	printf("ok: %d BPF programs load on this kernel\n", n);
	return 0;
}
