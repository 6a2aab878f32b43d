// SPDX-License-Identifier: MIT
/* GPU samples made by gpu/cuda.c + join.c, written by the pprof
 * writer and read back by an independent reader, `go tool pprof`, the way
 * a user would: -sample_index=gpu_samples -lines -top, -tags, -tagfocus.
 * Skips when go is not installed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpusample/profile.h"
#include "output/output.h"
#include "gpu/gpu.h"
#include "gpu/gpu.h"
#include "keep_profile.h"

#ifndef GS_CUDA_FIXTURES
#define GS_CUDA_FIXTURES "tests/unit/cuda"
#endif
#ifndef GS_CUDA_SOURCE
#define GS_CUDA_SOURCE "tests/unit/cuda/kernels.cu"
#endif

static char *run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *run(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t cap = 1 << 16, n = 0;
	char *out = malloc(cap);
	size_t r;
	while ((r = fread(out + n, 1, cap - n - 1, f)) > 0) {
		n += r;
		if (n + 1 == cap)
			out = realloc(out, cap *= 2);
	}
	out[n] = 0;
	int st = pclose(f);
	cr_assert_eq(st, 0, "%s failed:\n%s", cmd, out);
	return out;
}

static uint32_t mark(const char *name)
{
	FILE *f = fopen(GS_CUDA_SOURCE, "r");
	cr_assert_not_null(f);
	char line[512], want[128];
	snprintf(want, sizeof(want), "MARK %s", name);
	uint32_t n = 0, found = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		char *m = strstr(line, want);
		if (m &&
		    (m[strlen(want)] == '\n' || m[strlen(want)] == 0 || m[strlen(want)] == ' '))
			found = n;
	}
	fclose(f);
	cr_assert(found);
	return found;
}

static uint32_t cpu_stack(struct gs_profile *p, const char *leaf, const char *root)
{
	uint32_t locs[2];
	const char *names[2] = { leaf, root };
	for (int i = 0; i < 2; i++) {
		struct gs_function f = { .name = gs_profile_intern(p, names[i]) };
		struct gs_line l = { .function = gs_profile_add_function(p, &f) };
		locs[i] = gs_profile_add_location(p, 0, 0x1000 + p->n_locations, GS_FRAME_NATIVE,
						  &l, 1);
	}
	return (uint32_t)gs_profile_add_stack(p, locs, 2);
}

/* Value of the "Total:" line of pprof -top output ("... total" column). */
static long top_total(const char *out)
{
	const char *t = strstr(out, "of ");
	cr_assert_not_null(t, "%s", out);
	/* "Showing nodes accounting for 440, 100% of 440 total" */
	return strtol(t + 3, NULL, 10);
}

/* "Showing nodes accounting for N, ..." (what the filters kept). */
static long accounted(const char *out)
{
	const char *s = strstr(out, "accounting for ");
	return s ? strtol(s + 15, NULL, 10) : -1;
}

Test(join_pprof, go_tool_pprof_reads_gpu_samples)
{
	if (system("go version >/dev/null 2>&1") != 0)
		cr_skip_test("go (golang-go) not installed");
	struct gs_profile P;
	gs_profile_init(&P);
	struct gs_cuda *c = gs_cuda_new(&P);
	struct gs_join *j = gs_join_new(&P, 0);

	FILE *f = fopen(GS_CUDA_FIXTURES "/kernels_li.cubin", "rb");
	cr_assert_not_null(f);
	static unsigned char cb[1 << 16];
	size_t len = fread(cb, 1, sizeof(cb), f);
	fclose(f);
	bool lines = gs_cuda_load_cupti(c) == 0;
	uint64_t crc = 0xabc;
	if (lines)
		cr_assert_eq(gs_cuda_cubin_crc(c, cb, len, &crc), 0);
	cr_assert_eq(gs_cuda_add_cubin(c, crc, cb, len, 4242, NULL, NULL), 0);

	const char *names[] = { "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
				"smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
				"smsp__pcsamp_warps_issue_stalled_selected" };
	uint32_t idx[] = { 14, 15, 28 }, flags[] = { 0, GS_GPU_STALL_NOT_ISSUED, 0 };
	cr_assert_eq(gs_cuda_add_stall_table(c, 4242, 1, 0, 3, idx, flags, names), 0);

	uint32_t sa = cpu_stack(&P, "launch_a", "main"), sb = cpu_stack(&P, "launch_b", "main");
	uint64_t fn = gs_kernel_name_hash("axpy");
	for (int i = 0; i < 4; i++) {
		struct gs_join_launch l = { .pid = 4242,
					    .tid = 4243,
					    .function = fn,
					    .time_ns = 10 + i,
					    .stack = i == 1 ? sb : sa,
					    .thread_name = gs_profile_intern(&P, "python3") };
		cr_assert_eq(gs_join_add_launch(j, &l), 0);
	}
	/* Every pcOffset of axpy gets 4 long_scoreboard (+2 not issued) and 4
	 * selected samples. */
	struct gs_join_pc pcs[256];
	size_t n = 0;
	long want_ls = 0, want_all = 0;
	for (uint64_t pc = 0; pc < 0x200 && n + 2 <= 256; pc += 16) {
		uint32_t loc = gs_cuda_location(c, crc, "axpy", pc);
		struct gs_cuda_stall_in in[] = { { 14, 4 }, { 15, 2 }, { 28, 4 } };
		struct gs_cuda_stall_out out[4];
		size_t nf;
		cr_assert_eq(gs_cuda_fold_stalls(c, 4242, 1, in, 3, out, 4, &nf), 0);
		for (size_t k = 0; k < nf; k++) {
			pcs[n++] = (struct gs_join_pc){ .location = loc,
							.function = fn,
							.stall_reason = out[k].reason,
							.samples = out[k].samples,
							.not_issued = out[k].not_issued };
			want_all += out[k].samples;
		}
		want_ls += 4;
	}
	struct gs_join_batch b = { .pid = 4242, .device = 0, .end_ns = 100 };
	cr_assert_eq(gs_join_add_pc_batch(j, &b, pcs, n), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	gs_cuda_add_counts(c, 4242, 0, (uint64_t)want_all, 0, 0);
	cr_assert_eq(gs_cuda_add_comments(c), 0);

	char path[] = "/tmp/gs-join-pprof-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	char err[256] = "";
	cr_assert_eq(gs_write_pprof(&P, path, err, sizeof(err)), 0, "%s", err);
	const char *env = "HOME=${HOME:-/root} GOFLAGS=-mod=mod GOTOOLCHAIN=local "
			  "GOCACHE=${GOCACHE:-/tmp/gs-gocache}";

	char *top = run("%s go tool pprof -sample_index=gpu_samples -lines -top %s 2>&1", env,
			path);
	cr_expect_eq(top_total(top), want_all, "%s", top);
	cr_expect(strstr(top, "axpy") != NULL, "%s", top);
	if (lines) {
		char want[64];
		snprintf(want, sizeof(want), "kernels.cu:%u", mark("axpy_store"));
		cr_expect(strstr(top, want) != NULL, "no %s in\n%s", want, top);
	}
	free(top);

	char *tags = run("%s go tool pprof -sample_index=gpu_samples -tags %s 2>&1", env, path);
	cr_expect(strstr(tags, "cuda_stall_reason") && strstr(tags, "long_scoreboard") &&
		      strstr(tags, "selected") && strstr(tags, "gpu_attribution") &&
		      strstr(tags, "proportional"),
		  "%s", tags);
	free(tags);

	char *foc = run("%s go tool pprof -sample_index=gpu_samples -tagfocus=cuda_stall_reason="
			"long_scoreboard -top %s 2>&1",
			env, path);
	cr_expect_eq(accounted(foc), want_ls, "%s", foc);
	free(foc);

	/* 3:1 over the launch sites, seen through pprof's own aggregation */
	char *fa = run("%s go tool pprof -sample_index=gpu_samples -focus=launch_a -top %s 2>&1",
		       env, path);
	char *fb = run("%s go tool pprof -sample_index=gpu_samples -focus=launch_b -top %s 2>&1",
		       env, path);
	long a = accounted(fa), bb = accounted(fb);
	cr_expect_eq(a + bb, want_all, "%s\n%s", fa, fb);
	cr_expect(a >= 3 * bb - 3 && a <= 3 * bb + 3, "launch_a %ld vs launch_b %ld", a, bb);
	free(fa);
	free(fb);

	char *notiss = run("%s go tool pprof -sample_index=gpu_samples_not_issued -top %s 2>&1",
			   env, path);
	cr_expect_eq(top_total(notiss), want_ls / 2, "%s", notiss);
	free(notiss);

	if (!getenv("GS_KEEP"))
		unlink(path);
	else
		fprintf(stderr, "kept %s\n", path);
	gs_join_free(j);
	gs_cuda_free(c);
	gs_test_keep_profile(&P);
	gs_profile_free(&P);
}
