// SPDX-License-Identifier: MIT
/* GPU PC symbolization (gpu/cuda.c) against real nvcc-built cubins
 * (tests/unit/cuda/kernels.cu, sm_90, with and without -lineinfo) and the
 * real libcupti's offline functions, which need no GPU.  Tests that need
 * libcupti skip (with the reason) where it is not installed. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keep_profile.h"
#include "gpusample/profile.h"
#include "gpusample/records.h"
#include "gpu/gpu.h"
#include "gpu/cuda_internal.h"

#ifndef GS_CUDA_FIXTURES
#define GS_CUDA_FIXTURES "tests/unit/cuda"
#endif
#ifndef GS_CUDA_SOURCE
#define GS_CUDA_SOURCE "tests/unit/cuda/kernels.cu"
#endif

#if defined(__has_include)
#if __has_include(<cupti_pcsampling.h>)
#include <cupti_pcsampling.h>
#include <stddef.h>
/* The mirrors in gpu/cuda_internal.h must match the real header. */
_Static_assert(sizeof(struct gs_cupti_sass_params) == CUpti_GetSassToSourceCorrelationParamsSize,
	       "sass params size");
_Static_assert(offsetof(struct gs_cupti_sass_params, lineNumber) ==
		   offsetof(CUpti_GetSassToSourceCorrelationParams, lineNumber),
	       "lineNumber");
_Static_assert(offsetof(struct gs_cupti_sass_params, pcOffset) ==
		   offsetof(CUpti_GetSassToSourceCorrelationParams, pcOffset),
	       "pcOffset");
_Static_assert(offsetof(struct gs_cupti_sass_params, dirName) ==
		   offsetof(CUpti_GetSassToSourceCorrelationParams, dirName),
	       "dirName");
_Static_assert(sizeof(struct gs_cupti_crc_params) == CUpti_GetCubinCrcParamsSize, "crc size");
_Static_assert(offsetof(struct gs_cupti_crc_params, cubin) ==
		   offsetof(CUpti_GetCubinCrcParams, cubin),
	       "cubin");
_Static_assert(offsetof(struct gs_cupti_crc_params, cubinCrc) ==
		   offsetof(CUpti_GetCubinCrcParams, cubinCrc),
	       "cubinCrc");
#endif
#endif

static struct gs_profile P;
static struct gs_cuda *C;

static void setup(void)
{
	gs_profile_init(&P);
	C = gs_cuda_new(&P);
	cr_assert_not_null(C);
}
static void teardown(void)
{
	gs_cuda_free(C);
	gs_test_keep_profile(&P);
	gs_profile_free(&P);
}
TestSuite(cuda, .init = setup, .fini = teardown);

static void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "fixture %s missing (make builds it from kernels.cu)", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *b = malloc(n + 1);
	cr_assert_eq(fread(b, 1, n, f), (size_t)n);
	fclose(f);
	((char *)b)[n] = 0;
	*len = (size_t)n;
	return b;
}

static void *cubin(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", GS_CUDA_FIXTURES, name);
	return slurp(path, len);
}

static void need_cupti(void)
{
	if (gs_cuda_load_cupti(C))
		cr_skip_test("%s", gs_cuda_cupti_info(C));
}

/* Line of the "MARK name" comment in kernels.cu (1-based), so expectations
 * follow the source instead of being written down twice. */
static uint32_t mark(const char *name)
{
	size_t len;
	char *src = slurp(GS_CUDA_SOURCE, &len);
	char want[128];
	snprintf(want, sizeof(want), "MARK %s", name);
	uint32_t lineno = 1, found = 0;
	for (char *l = src; *l; lineno++) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = 0;
		char *m = strstr(l, want);
		if (m && (m[strlen(want)] == 0 || m[strlen(want)] == ' '))
			found = lineno;
		if (!nl)
			break;
		l = nl + 1;
	}
	free(src);
	cr_assert(found, "no %s in %s", want, GS_CUDA_SOURCE);
	return found;
}

struct fn_size {
	const char *want;
	uint64_t size;
	int n;
};
static int find_fn(void *ctx, const char *name, uint64_t size)
{
	struct fn_size *f = ctx;
	f->n++;
	if (!strcmp(name, f->want))
		f->size = size;
	return 0;
}
static uint64_t fn_size(const void *b, size_t len, const char *name)
{
	struct fn_size f = { .want = name };
	cr_assert_eq(gs_cuda_cubin_functions(b, len, find_fn, &f), 0);
	cr_assert_eq(f.n, 2, "kernels.cu has two kernels, saw %d", f.n);
	cr_assert(f.size > 0 && f.size % 16 == 0, "%s size %lu", name, (unsigned long)f.size);
	return f.size;
}

/* ---- stall reasons ------------------------------------------------------- */

/* The one classifier (gpusample/stall.h): names -> wire flags in the agent,
 * flags -> kind everywhere else; short names carry no kind. */
static enum gs_stall_kind kind_of(const char *name)
{
	return gs_stall_kind(gs_stall_flags_of_name(name));
}

Test(cuda, stall_names_are_classified_and_shortened)
{
	char b[64];
	cr_expect_eq(kind_of("smsp__pcsamp_warps_issue_stalled_long_scoreboard"), GS_STALL_BASE);
	gs_cuda_stall_short("smsp__pcsamp_warps_issue_stalled_long_scoreboard", b, sizeof(b));
	cr_expect_str_eq(b, "long_scoreboard");
	cr_expect_eq(kind_of("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"),
		     GS_STALL_NOT_ISSUED);
	gs_cuda_stall_short("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued", b,
			    sizeof(b));
	cr_expect_str_eq(b, "long_scoreboard");
	cr_expect_eq(kind_of("smsp__pcsamp_warps_issue_stalled_selected"), GS_STALL_BASE);
	gs_cuda_stall_short("smsp__pcsamp_warps_issue_stalled_selected", b, sizeof(b));
	cr_expect_str_eq(b, "selected");
	cr_expect_eq(kind_of("smsp__pcsamp_warps_issue_stalled_not_selected_not_issued"),
		     GS_STALL_NOT_ISSUED);
	gs_cuda_stall_short("smsp__pcsamp_warps_issue_stalled_not_selected_not_issued", b,
			    sizeof(b));
	cr_expect_str_eq(b, "not_selected");
	cr_expect_eq(kind_of("smsp__pcsamp_sample_count"), GS_STALL_COUNTER);
	cr_expect_eq(kind_of("smsp__pcsamp_samples_data_dropped"), GS_STALL_COUNTER);
	gs_cuda_stall_short("smsp__pcsamp_samples_data_dropped", b, sizeof(b));
	cr_expect_str_eq(b, "samples_data_dropped");
	/* a flag pair: the counter wins */
	cr_expect_eq(gs_stall_kind(GS_GPU_STALL_COUNTER | GS_GPU_STALL_NOT_ISSUED),
		     GS_STALL_COUNTER);
	/* unknown spellings survive; tiny buffers truncate without overflow */
	cr_expect_eq(kind_of("something_else"), GS_STALL_BASE);
	gs_cuda_stall_short("something_else", b, sizeof(b));
	cr_expect_str_eq(b, "something_else");
	char tiny[5];
	gs_cuda_stall_short("smsp__pcsamp_warps_issue_stalled_warpgroup_arrive", tiny,
			    sizeof(tiny));
	cr_expect_str_eq(tiny, "warp");
}

/* The host trusts the wire flags, not the names: a table whose flags say
 * otherwise than its names is folded by the flags. */
Test(cuda, stall_fold_trusts_wire_flags)
{
	const char *names[] = { "smsp__pcsamp_warps_issue_stalled_wait_not_issued",
				"smsp__pcsamp_warps_issue_stalled_barrier",
				"smsp__pcsamp_sample_count" };
	uint32_t idx[] = { 1, 2, 3 };
	uint32_t flags[] = { 0, GS_GPU_STALL_NOT_ISSUED, 0 };
	cr_assert_eq(gs_cuda_add_stall_table(C, 11, 1, 0, 3, idx, flags, names), 0);
	struct gs_cuda_stall_in in[] = { { 1, 10 }, { 2, 20 }, { 3, 30 } };
	struct gs_cuda_stall_out out[4];
	size_t n;
	cr_assert_eq(gs_cuda_fold_stalls(C, 11, 1, in, 3, out, 4, &n), 0);
	cr_assert_eq(n, 3);
	cr_expect_str_eq(gs_profile_str(&P, out[0].reason), "wait");
	cr_expect_eq(out[0].samples, 10, "flags 0: base, whatever the name says");
	cr_expect_eq(out[0].not_issued, 0);
	cr_expect_str_eq(gs_profile_str(&P, out[1].reason), "barrier");
	cr_expect_eq(out[1].samples, 0);
	cr_expect_eq(out[1].not_issued, 20, "GS_GPU_STALL_NOT_ISSUED: the twin column");
	cr_expect_str_eq(gs_profile_str(&P, out[2].reason), "sample_count");
	cr_expect_eq(out[2].samples, 30, "a counter name without the flag is not skipped");
}

/* Wire flags of names, as the agent sends them. */
static void flags_of(const char *const *names, size_t n, uint32_t *flags)
{
	for (size_t i = 0; i < n; i++)
		flags[i] = gs_stall_flags_of_name(names[i]);
}

/* The Hopper table layout of the reference (counters first, pairs after),
 * but given out of order and with sparse indices. */
Test(cuda, stall_fold_per_context)
{
	const char *names[] = {
		"smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
		"smsp__pcsamp_sample_count",
		"smsp__pcsamp_warps_issue_stalled_long_scoreboard",
		"smsp__pcsamp_samples_data_dropped",
		"smsp__pcsamp_warps_issue_stalled_selected",
		"smsp__pcsamp_warps_issue_stalled_selected_not_issued",
	};
	uint32_t idx[] = { 15, 0, 14, 1, 28, 29 }, flags[6];
	flags_of(names, 6, flags);
	cr_assert_eq(gs_cuda_add_stall_table(C, 10, 1, 0, 6, idx, flags, names), 0);
	/* another context of the same process: another architecture's indices */
	uint32_t idx2[] = { 13, 0, 12, 1, 26, 27 };
	cr_assert_eq(gs_cuda_add_stall_table(C, 10, 2, 1, 6, idx2, flags, names), 0);

	struct gs_cuda_stall_in in[] = { { 0, 100 }, { 14, 42 }, { 15, 39 },
					 { 28, 7 },  { 1, 3 },   { 99, 5 } };
	struct gs_cuda_stall_out out[8];
	size_t n;
	cr_assert_eq(gs_cuda_fold_stalls(C, 10, 1, in, 6, out, 8, &n), 0);
	cr_assert_eq(n, 3, "long_scoreboard, selected, stall_99; counters skipped (got %zu)", n);
	cr_expect_str_eq(gs_profile_str(&P, out[0].reason), "long_scoreboard");
	cr_expect_eq(out[0].samples, 42);
	cr_expect_eq(out[0].not_issued, 39);
	cr_expect_str_eq(gs_profile_str(&P, out[1].reason), "selected");
	cr_expect_eq(out[1].samples, 7);
	cr_expect_eq(out[1].not_issued, 0);
	cr_expect_str_eq(gs_profile_str(&P, out[2].reason), "stall_99");

	/* same indices under context 2 mean different reasons */
	struct gs_cuda_stall_in in2[] = { { 14, 42 }, { 12, 6 } };
	cr_assert_eq(gs_cuda_fold_stalls(C, 10, 2, in2, 2, out, 8, &n), 0);
	cr_assert_eq(n, 2);
	cr_expect_str_eq(gs_profile_str(&P, out[0].reason), "stall_14");
	cr_expect_str_eq(gs_profile_str(&P, out[1].reason), "long_scoreboard");
	cr_expect_eq(out[1].samples, 6);

	cr_expect_eq(gs_cuda_fold_stalls(C, 10, 1, in, 6, out, 2, &n), -ENOSPC);
}

/* Context and device ids come from the target: one process cannot make the
 * stores grow (and every lookup slow) without bound; refusals are counted. */
Test(cuda, stall_tables_and_devices_capped_per_process)
{
	const char *names[] = { "smsp__pcsamp_warps_issue_stalled_barrier" };
	uint32_t idx[] = { 4 }, flags[] = { 0 };

	for (uint32_t ctx = 1; ctx <= GS_CUDA_STALL_CONTEXTS_PER_PID; ctx++)
		cr_assert_eq(gs_cuda_add_stall_table(C, 12, ctx, 0, 1, idx, flags, names), 0);
	cr_expect_eq(gs_cuda_add_stall_table(C, 12, 100000, 0, 1, idx, flags, names), -ENOSPC);
	cr_expect_eq(gs_cuda_add_stall_table(C, 12, 1, 0, 1, idx, flags, names), 0,
		     "a known context's table is still replaced");
	cr_expect_eq(gs_cuda_add_stall_table(C, 13, 100000, 0, 1, idx, flags, names), 0,
		     "another process has its own share");
	for (int32_t dev = 0; dev < (int32_t)GS_CUDA_DEVICES_PER_PID + 9; dev++)
		gs_cuda_add_counts(C, 14, dev, 1, 0, 0);
	struct gs_cuda_device_info info = { .name = "x" };
	cr_expect_eq(gs_cuda_set_device(C, 14, 100000, &info), -ENOSPC);
	cr_assert_eq(gs_cuda_add_comments(C), 0);
	bool said = false, said_dev = false;
	size_t dev_lines = 0;
	for (size_t i = 0; i < P.n_comments; i++) {
		const char *t = gs_profile_str(&P, P.comments[i]);
		said |= strstr(t, "gpu stall tables: 1 refused") != NULL;
		said_dev |= strstr(t, "gpu devices: 10 record(s)") != NULL;
		dev_lines += !strncmp(t, "gpu pid 14 device", 17);
	}
	cr_expect(said, "the refusal is counted in a comment");
	cr_expect(said_dev, "device ids past the cap are counted");
	cr_expect_eq(dev_lines, GS_CUDA_DEVICES_PER_PID);
}

/* ---- cubins and libcupti ------------------------------------------------- */

Test(cuda, cubin_functions_from_elf)
{
	size_t len;
	void *b = cubin("kernels_li.cubin", &len);
	fn_size(b, len, "axpy");
	fn_size(b, len, "_Z5scaleIfLi4EEvPT_S0_i");
	char junk[64] = "not an elf";
	cr_expect_neq(gs_cuda_cubin_functions(junk, sizeof(junk), find_fn, &(struct fn_size){ 0 }),
		      0);
	free(b);
}

/* The cubin key reads every byte: two near-identical cubins (one byte
 * flipped, at each of 257 offsets spread over the image: an immediate, a
 * line-table entry, a symbol) never share it.  libcupti's own
 * cuptiGetCubinCrc is sparse; how many of the same twins it cannot tell
 * apart is printed (the reason the agent registers the hash instead). */
Test(cuda, cubin_hash_tells_near_identical_cubins_apart)
{
	size_t la, lb;
	unsigned char *a = cubin("kernels_li.cubin", &la), *b = cubin("kernels_noli.cubin", &lb);
	uint64_t ca, ca2, cb, key;
	cr_assert_eq(gs_cuda_cubin_crc(C, a, la, &ca), 0);
	cr_assert_eq(gs_cuda_cubin_crc(C, a, la, &ca2), 0);
	cr_assert_eq(gs_cuda_cubin_crc(C, b, lb, &cb), 0);
	cr_expect_eq(ca, gs_cubin_hash(a, la), "one hash everywhere");
	cr_expect_neq(ca, 0);
	cr_expect_eq(ca, ca2);
	cr_expect_neq(ca, cb);
	cr_assert_eq(gs_cuda_add_cubin(C, 0, a, la, 1, NULL, &key), 0);
	cr_expect_eq(key, ca);

	int (*real)(void *) = NULL;
	void *h = NULL;
	if (gs_cuda_load_cupti(C) == 0 &&
	    (h = dlopen(gs_cuda_cupti_info(C), RTLD_NOW | RTLD_LOCAL)))
		real = (int (*)(void *))dlsym(h, "cuptiGetCubinCrc");
	struct gs_cupti_crc_params prm = { .size = sizeof(prm), .cubinSize = la, .cubin = a };
	uint64_t real_a = real && real(&prm) == 0 ? prm.cubinCrc : 0;
	unsigned missed = 0;
	for (unsigned k = 0; k < 257; k++) {
		size_t off = (size_t)k * (la - 1) / 256;
		a[off] ^= 0x01;
		cr_expect_neq(gs_cubin_hash(a, la), ca, "byte %zu flipped: same hash", off);
		prm.cubinCrc = 0;
		if (real && real(&prm) == 0 && prm.cubinCrc == real_a)
			missed++;
		a[off] ^= 0x01;
	}
	cr_expect_eq(gs_cubin_hash(a, la), ca);
	if (real)
		cr_log_info(
		    "libcupti cuptiGetCubinCrc missed %u of 257 one-byte twins of a %zu-byte cubin",
		    missed, la);
	if (h)
		dlclose(h);
	free(a);
	free(b);
}

/* SASS -> source for the known kernels: every resolved line lies inside the
 * kernel's body in kernels.cu and the marked store statement is among them. */
static void check_lines(const char *fn, const char *begin, const char *end, const char *store)
{
	need_cupti();
	size_t len;
	void *b = cubin("kernels_li.cubin", &len);
	uint64_t crc;
	cr_assert_eq(gs_cuda_add_cubin(C, 0, b, len, 1, NULL, &crc), 0);
	uint64_t size = fn_size(b, len, fn);
	uint32_t lo = mark(begin), hi = mark(end), want = mark(store);
	bool seen_store = false;
	int resolved = 0;
	for (uint64_t pc = 0; pc < size; pc += 16) {
		char file[512];
		uint32_t line;
		cr_assert_eq(gs_cuda_source_line(C, crc, fn, pc, file, sizeof(file), &line), 0);
		if (!line)
			continue;
		resolved++;
		cr_expect(line >= lo && line <= hi, "%s+0x%lx -> line %u outside %u..%u", fn,
			  (unsigned long)pc, line, lo, hi);
		const char *base = strrchr(file, '/');
		cr_expect_str_eq(base ? base + 1 : file, "kernels.cu");
		seen_store |= line == want;
	}
	cr_expect(resolved > 0, "no pcOffset of %s resolved", fn);
	cr_expect(seen_store, "line %u (%s) never seen in %s", want, store, fn);
	free(b);
}

Test(cuda, sass_to_source_axpy)
{
	check_lines("axpy", "axpy_begin", "axpy_end", "axpy_store");
}

Test(cuda, sass_to_source_template_kernel)
{
	check_lines("_Z5scaleIfLi4EEvPT_S0_i", "scale_begin", "scale_end", "scale_store");
}

/* Locations in the profile: mapping per cubin, demangled function with the
 * mangled system_name, source file on the function, line on the Line,
 * cached per (cubin, function, pcOffset). */
Test(cuda, location_with_lines)
{
	need_cupti();
	size_t len;
	void *b = cubin("kernels_li.cubin", &len);
	uint64_t crc;
	cr_assert_eq(gs_cuda_add_cubin(C, 0, b, len, 1, NULL, &crc), 0);
	const char *mangled = "_Z5scaleIfLi4EEvPT_S0_i";
	uint64_t size = fn_size(b, len, mangled);
	uint32_t lo = mark("scale_begin"), hi = mark("scale_end");
	uint32_t first = 0, with_line = 0;
	for (uint64_t pc = 0; pc < size; pc += 16) {
		uint32_t id = gs_cuda_location(C, crc, mangled, pc);
		cr_assert_neq(id, 0);
		cr_expect_eq(gs_cuda_location(C, crc, mangled, pc), id, "cached");
		const struct gs_location *l = gs_profile_location(&P, id);
		cr_expect_eq(l->kind, GS_FRAME_GPU_PC);
		cr_expect_eq(l->address, pc);
		cr_assert_eq(l->n_lines, 1);
		const struct gs_line *ln = &P.lines[l->first_line];
		const struct gs_function *f = gs_profile_function(&P, ln->function);
		cr_expect_str_eq(gs_profile_str(&P, f->system_name), mangled);
		cr_expect(strstr(gs_profile_str(&P, f->name), "scale<float, 4>") != NULL, "name %s",
			  gs_profile_str(&P, f->name));
		if (ln->line) {
			with_line++;
			cr_expect(ln->line >= lo && ln->line <= hi);
			cr_expect(strstr(gs_profile_str(&P, f->file), "kernels.cu") != NULL);
		}
		if (!first)
			first = l->mapping;
		cr_expect_eq(l->mapping, first, "one mapping per cubin");
	}
	cr_expect(with_line > 0);
	const struct gs_mapping *m = &P.mappings[first - 1];
	char hex[17], file[40];
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)crc);
	snprintf(file, sizeof(file), "cubin:%llx", (unsigned long long)crc);
	cr_expect_str_eq(gs_profile_str(&P, m->build_id), hex);
	cr_expect_str_eq(gs_profile_str(&P, m->file), file);
	cr_expect(m->has_functions && m->has_lines);
	cr_expect_eq(m->limit, len);
	/* the extern "C" kernel keeps its plain name, no system_name */
	uint32_t id = gs_cuda_location(C, crc, "axpy", 0);
	const struct gs_function *f =
	    gs_profile_function(&P, P.lines[gs_profile_location(&P, id)->first_line].function);
	cr_expect_str_eq(gs_profile_str(&P, f->name), "axpy");
	cr_expect_eq(f->system_name, 0);
	free(b);
}

/* Without -lineinfo: function-level attribution per pcOffset, line 0, no
 * crash, no file; and an unknown function or CRC still gets a location. */
Test(cuda, cubin_without_lineinfo)
{
	size_t len;
	void *b = cubin("kernels_noli.cubin", &len);
	uint64_t crc = 0x1234abcd; /* as an agent would report it */
	if (gs_cuda_load_cupti(C) == 0)
		cr_assert_eq(gs_cuda_cubin_crc(C, b, len, &crc), 0);
	cr_assert_eq(gs_cuda_add_cubin(C, crc, b, len, 1, "libfoo.so", NULL), 0);
	const char *mangled = "_Z5scaleIfLi4EEvPT_S0_i";
	uint64_t size = fn_size(b, len, mangled);
	uint32_t ids[64];
	size_t n = 0;
	for (uint64_t pc = 0; pc < size && n < 64; pc += 16) {
		ids[n] = gs_cuda_location(C, crc, mangled, pc);
		cr_assert_neq(ids[n], 0);
		const struct gs_location *l = gs_profile_location(&P, ids[n]);
		const struct gs_line *ln = &P.lines[l->first_line];
		cr_expect_eq(ln->line, 0);
		const struct gs_function *f = gs_profile_function(&P, ln->function);
		cr_expect_eq(f->file, 0);
		cr_expect(strstr(gs_profile_str(&P, f->name), "scale<float, 4>") != NULL);
		cr_expect_eq(l->address, pc);
		for (size_t k = 0; k < n; k++)
			cr_expect_neq(ids[k], ids[n], "distinct location per pcOffset");
		n++;
	}
	const struct gs_location *l = gs_profile_location(&P, ids[0]);
	const struct gs_mapping *m = &P.mappings[l->mapping - 1];
	cr_expect_str_eq(gs_profile_str(&P, m->file), "libfoo.so");
	cr_expect(!m->has_lines);
	/* function not in the cubin, pcOffset out of range, unknown cubin */
	cr_expect_neq(gs_cuda_location(C, crc, "nosuchfn", 0x10), 0);
	cr_expect_neq(gs_cuda_location(C, crc, mangled, 0x100000), 0);
	uint32_t u = gs_cuda_location(C, 0xdeadbeef, "_Z3foov", 0x20);
	cr_assert_neq(u, 0);
	const struct gs_function *f =
	    gs_profile_function(&P, P.lines[gs_profile_location(&P, u)->first_line].function);
	cr_expect_str_eq(gs_profile_str(&P, f->name), "foo()");
	cr_expect_str_eq(
	    gs_profile_str(&P, P.mappings[gs_profile_location(&P, u)->mapping - 1].file),
	    "cubin:deadbeef");
	cr_expect_neq(gs_cuda_location(C, 1, NULL, 0), 0);
	free(b);
}

/* --cupti: a file some other user could have written is refused before it
 * is ever loaded; "none" turns libcupti off with a sentence saying so. */
Test(cuda, cupti_option_checked)
{
	char why[512], real[PATH_MAX], dir[] = "/tmp/gs-cupti.XXXXXX", lib[PATH_MAX];
	struct gs_cuda *c = gs_cuda_new(&P);

	cr_assert_not_null(mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/libcupti.so.13", dir);
	FILE *f = fopen(lib, "w");
	cr_assert_not_null(f);
	fclose(f);
	/* /tmp is writable by everyone: whatever the file's owner */
	cr_expect_eq(gs_cuda_trusted_lib(lib, real, sizeof(real), why, sizeof(why)), -EPERM);
	cr_expect(strstr(why, "/tmp") && strstr(why, "writable"), "%s", why);
	cr_expect_eq(gs_cuda_set_cupti(c, lib, why, sizeof(why)), -EPERM);
	cr_expect_eq(gs_cuda_set_cupti(c, "/nonexistent/libcupti.so", why, sizeof(why)), -ENOENT);
	/* a root-owned file in a root-owned directory is accepted */
	cr_expect_eq(gs_cuda_trusted_lib("/bin/sh", real, sizeof(real), why, sizeof(why)), 0, "%s",
		     why);
	/* ... but not a directory */
	cr_expect_eq(gs_cuda_trusted_lib("/usr/lib", real, sizeof(real), why, sizeof(why)), -EPERM);
	/* a trusted file without the offline entry points is no libcupti */
	cr_expect_eq(gs_cuda_set_cupti(c, "/bin/sh", why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(gs_cuda_load_cupti(c), -ENOENT);
	cr_expect(strstr(gs_cuda_cupti_info(c), "--cupti") != NULL, "%s", gs_cuda_cupti_info(c));
	gs_cuda_free(c);
	c = gs_cuda_new(&P);
	cr_expect_eq(gs_cuda_set_cupti(c, "none", why, sizeof(why)), 0);
	cr_expect_eq(gs_cuda_load_cupti(c), -ENOENT);
	cr_expect(strstr(gs_cuda_cupti_info(c), "--cupti none") != NULL);
	gs_cuda_free(c);
	unlink(lib);
	rmdir(dir);
}

/* The environment never chooses the library: CUDA_HOME and the other
 * variables a sudo caller could pass point at a planted one. */
Test(cuda, cupti_ignores_environment)
{
	char dir[] = "/tmp/gs-cupti.XXXXXX", sub[PATH_MAX];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/lib64", dir);
	mkdir(sub, 0755);
	const char *vars[] = { "GS_CUPTI_LIB", "CUDA_HOME", "CUDA_PATH", "VIRTUAL_ENV",
			       "CONDA_PREFIX" };
	for (size_t i = 0; i < 5; i++)
		setenv(vars[i], i ? dir : "/tmp/x/libcupti.so", 1);
	struct gs_cuda *c = gs_cuda_new(&P);
	int rc = gs_cuda_load_cupti(c);
	cr_expect(rc == 0 || rc == -ENOENT);
	cr_expect(strstr(gs_cuda_cupti_info(c), "/tmp") == NULL, "%s", gs_cuda_cupti_info(c));
	if (rc == 0)
		cr_expect(strncmp(gs_cuda_cupti_info(c), "/usr/", 5) == 0, "%s",
			  gs_cuda_cupti_info(c));
	gs_cuda_free(c);
	for (size_t i = 0; i < 5; i++)
		unsetenv(vars[i]);
	rmdir(sub);
	rmdir(dir);
}

Test(cuda, comments_carry_device_facts)
{
	struct gs_cuda_device_info di = { .name = "NVIDIA H200",
					  .sm_clock_khz = 1980000,
					  .sm_count = 132,
					  .period_exp = 20,
					  .mode = "continuous" };
	cr_assert_eq(gs_cuda_set_device(C, 7, 0, &di), 0);
	gs_cuda_add_counts(C, 7, 0, 1000, 5, 12);
	gs_cuda_add_counts(C, 7, 0, 500, 1, 0);
	cr_assert_eq(gs_cuda_add_comments(C), 0);
	cr_assert_geq(P.n_comments, 1);
	const char *s = gs_profile_str(&P, P.comments[0]);
	cr_expect(strstr(s, "132 SMs") && strstr(s, "1980 MHz") && strstr(s, "2^20") &&
		      strstr(s, "total 1500") && strstr(s, "dropped 6") &&
		      strstr(s, "non-user kernels 12"),
		  "%s", s);
	/* 2^20 cycles at 1.98 GHz = 529.6 us */
	cr_expect(strstr(s, "529.6 us") != NULL, "%s", s);
}

/* Each process keeps its own devices, yet the comments come in the order
 * the devices were first seen across processes (as one list kept them).
 * Its own profile: not one of the fixed profiles the suite keeps. */
Test(cuda_alone, device_comments_in_arrival_order)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_cuda *c = gs_cuda_new(&p);

	cr_assert_not_null(c);
	gs_cuda_add_counts(c, 7, 1, 10, 0, 0);
	gs_cuda_add_counts(c, 8, 0, 20, 0, 0);
	gs_cuda_add_counts(c, 7, 0, 30, 0, 0);
	gs_cuda_add_counts(c, 8, 0, 40, 0, 0); /* the same device again */
	gs_cuda_add_counts(c, 9, 3, 50, 0, 0);
	cr_assert_eq(gs_cuda_add_comments(c), 0);
	cr_assert_geq(p.n_comments, 4);
	const char *want[] = { "gpu pid 7 device 1; samples total 10,",
			       "gpu pid 8 device 0; samples total 60,",
			       "gpu pid 7 device 0; samples total 30,",
			       "gpu pid 9 device 3; samples total 50," };
	for (size_t i = 0; i < 4; i++) {
		const char *s = gs_profile_str(&p, p.comments[i]);
		cr_expect(!strncmp(s, want[i], strlen(want[i])), "comment %zu: %s", i, s);
	}
	gs_cuda_free(c);
	gs_profile_free(&p);
}

/* ---- wire records end to end (records.h -> cuda + join -> profile) ------- */

#include "gpusample/records.h"
#include "gpu/gpu.h"

struct rec_buf {
	unsigned char b[4096];
	size_t n;
};
static void *put(struct rec_buf *r, const void *p, size_t n)
{
	cr_assert_leq(r->n + n, sizeof(r->b));
	void *at = r->b + r->n;
	memcpy(at, p, n);
	r->n += n;
	return at;
}
/* End the record in r: pad to 8 bytes, hdr.size = its length (as BPF sends it). */
static void seal(struct rec_buf *r)
{
	r->n = (r->n + 7) & ~(size_t)7;
	((struct gs_rec_hdr *)r->b)->size = (uint32_t)r->n;
}

Test(cuda, records_end_to_end)
{
	size_t len;
	void *cb = cubin("kernels_li.cubin", &len);
	uint64_t crc = 0x77;
	bool lines = gs_cuda_load_cupti(C) == 0;
	if (lines)
		cr_assert_eq(gs_cuda_cubin_crc(C, cb, len, &crc), 0);
	cr_assert_eq(gs_cuda_add_cubin_borrowed(C, crc, cb, len, 500, NULL, NULL), 0);

	/* stall table of context 3 on device 0 */
	struct rec_buf t = { .n = 0 };
	struct gs_gpu_stall_table th = {
		.hdr = { .type = GS_REC_GPU_STALL_TABLE, .version = GS_RECORDS_VERSION },
		.gpu = { .tgid = 500, .ctx_uid = 3, .device = 0 },
		.n_reasons = 3,
		.sampling_period = 20,
		.collection_mode = GS_GPU_MODE_SERIALIZED,
		.sm_count = 132,
		.clock_khz = 1980000,
	};
	put(&t, &th, sizeof(th));
	struct gs_gpu_stall_reason rs[3] = {
		{ .index = 14, .name = "smsp__pcsamp_warps_issue_stalled_long_scoreboard" },
		{ .index = 15,
		  .flags = GS_GPU_STALL_NOT_ISSUED,
		  .name = "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued" },
		{ .index = 0, .flags = GS_GPU_STALL_COUNTER, .name = "smsp__pcsamp_sample_count" },
	};
	put(&t, rs, sizeof(rs));
	seal(&t);
	cr_assert_eq(gs_cuda_stall_table_record(C, (void *)t.b, t.n), 0);
	cr_expect_eq(gs_cuda_stall_table_record(C, (void *)t.b, t.n - 8), -EINVAL);

	/* a launch of axpy with correlation id 42 from a one-frame CPU stack */
	struct gs_join *j = gs_join_new(&P, 1000);
	struct gs_function f = { .name = gs_profile_intern(&P, "train_step") };
	struct gs_line l = { .function = gs_profile_add_function(&P, &f) };
	uint32_t cpu_loc = gs_profile_add_location(&P, 0, 0x4000, GS_FRAME_NATIVE, &l, 1);
	uint32_t stack = (uint32_t)gs_profile_add_stack(&P, &cpu_loc, 1);
	struct gs_gpu_launch lr = {
		.hdr = { .type = GS_REC_GPU_LAUNCH,
			 .version = GS_RECORDS_VERSION,
			 .ktime_ns = 1500 },
		.gpu = { .tgid = 500, .tid = 501, .ctx_uid = 3, .device = 0 },
		.name_hash = gs_kernel_name_hash("axpy"),
		.correlation_id = 42,
		.sample_every = 1,
	};
	cr_assert_eq(gs_join_launch_record(j, &lr, stack, gs_profile_intern(&P, "python3"), 0), 0);

	/* one batch: axpy+0x80 (corr 42) and scale+0x0 (never launched) */
	struct rec_buf r = { .n = 0 };
	struct gs_gpu_pc_batch bh = {
		.hdr = { .type = GS_REC_GPU_PC_BATCH,
			 .version = GS_RECORDS_VERSION,
			 .ktime_ns = 2000 },
		.gpu = { .tgid = 500, .tid = 502, .ctx_uid = 3, .device = 0 },
		.total_samples = 200,
		.dropped_samples = 2,
		.non_user_samples = 9,
		.n_pcs = 2,
		.n_counts = 4,
		.flags = GS_GPU_BATCH_SERIALIZED | GS_GPU_BATCH_FIRST | GS_GPU_BATCH_LAST,
	};
	const char names[] = "axpy\0_Z5scaleIfLi4EEvPT_S0_i";
	bh.names_len = sizeof(names);
	put(&r, &bh, sizeof(bh));
	struct gs_gpu_pc pcs[2] = {
		{ .cubin_crc = crc,
		  .pc_offset = 0x80,
		  .name_hash = gs_kernel_name_hash("axpy"),
		  .correlation_id = 42,
		  .name_off = 0,
		  .first_count = 0,
		  .n_counts = 3 },
		{ .cubin_crc = crc,
		  .pc_offset = 0,
		  .name_hash = gs_kernel_name_hash(names + 5),
		  .correlation_id = 43,
		  .name_off = 5,
		  .first_count = 3,
		  .n_counts = 1 },
	};
	put(&r, pcs, sizeof(pcs));
	struct gs_gpu_stall_count cnt[4] = { { 14, 30 }, { 15, 20 }, { 0, 55 }, { 14, 6 } };
	put(&r, cnt, sizeof(cnt));
	put(&r, names, sizeof(names));
	seal(&r);
	cr_assert_eq(gs_join_pc_batch_record(j, C, (void *)r.b, r.n), 0);
	/* a lying name offset is refused */
	struct gs_gpu_pc_batch *bad = (void *)r.b;
	((struct gs_gpu_pc *)(bad + 1))[1].name_off = 999;
	cr_expect_eq(gs_join_pc_batch_record(j, C, (void *)r.b, r.n), -EINVAL);

	struct gs_join_stats st;
	cr_assert_eq(gs_join_emit(j, &st), 0);
	cr_expect_eq(st.samples[GS_JOIN_EXACT], 30);
	cr_expect_eq(st.not_issued[GS_JOIN_EXACT], 20);
	cr_expect_eq(st.samples[GS_JOIN_UNKNOWN], 6);
	cr_assert_eq(P.n_samples, 2);
	for (size_t i = 0; i < P.n_samples; i++) {
		const struct gs_sample *s = &P.samples[i];
		const struct gs_stack *k = &P.stacks[s->stack];
		const struct gs_location *leaf = gs_profile_location(&P, P.stack_locs[k->first]);
		const struct gs_function *kf =
		    gs_profile_function(&P, P.lines[leaf->first_line].function);
		cr_expect_str_eq(gs_profile_str(&P, gs_profile_ctx(&P, s)->cuda_stall_reason),
				 "long_scoreboard");
		cr_expect_eq(s->time_ns, 1000);
		if (!strcmp(gs_profile_str(&P, gs_profile_ctx(&P, s)->gpu_attribution), "exact")) {
			cr_expect_str_eq(gs_profile_str(&P, kf->name), "axpy");
			cr_expect_eq(leaf->address, 0x80);
			cr_expect_eq(P.stack_locs[k->first + 1], cpu_loc);
			cr_expect_eq(gs_profile_ctx(&P, s)->tid, 501);
			cr_expect_str_eq(gs_profile_str(&P, gs_profile_ctx(&P, s)->thread_name),
					 "python3");
			if (lines) {
				int64_t ln = P.lines[leaf->first_line].line;
				cr_expect(ln >= mark("axpy_begin") && ln <= mark("axpy_end"),
					  "axpy+0x80 -> line %ld", (long)ln);
			}
		} else {
			cr_expect_str_eq(gs_profile_str(&P, gs_profile_ctx(&P, s)->gpu_attribution),
					 "unknown");
			cr_expect(strstr(gs_profile_str(&P, kf->name), "scale<float, 4>"));
		}
	}
	cr_expect_eq(P.default_sample_type, GS_V_GPU_SAMPLES);
	cr_assert_eq(gs_cuda_add_comments(C), 0);
	const char *cm = gs_profile_str(&P, P.comments[0]);
	cr_expect(strstr(cm, "kernel-serialized") && strstr(cm, "total 200") &&
		      strstr(cm, "dropped 2") && strstr(cm, "non-user kernels 9"),
		  "%s", cm);
	gs_join_free(j);
	free(cb);
}

/* One PC batch record: n_pcs PCs of kernel name at pc 0x10*i, one count
 * each (reason index 14, samples). */
static size_t batch_rec(struct rec_buf *r, uint64_t t, uint32_t flags, const char *name,
			uint32_t samples)
{
	r->n = 0;
	size_t nl = strlen(name) + 1;
	struct gs_gpu_pc_batch bh = {
		.hdr = { .type = GS_REC_GPU_PC_BATCH, .version = GS_RECORDS_VERSION, .ktime_ns = t },
		.gpu = { .tgid = 600, .ctx_uid = 1, .device = 0 },
		.n_pcs = 1,
		.n_counts = 1,
		.names_len = (uint32_t)nl,
		.flags = flags,
	};
	put(r, &bh, sizeof(bh));
	struct gs_gpu_pc pc = { .cubin_crc = 5,
				.pc_offset = 0x10,
				.name_hash = gs_kernel_name_hash(name),
				.n_counts = 1 };
	put(r, &pc, sizeof(pc));
	struct gs_gpu_stall_count cnt = { 14, samples };
	put(r, &cnt, sizeof(cnt));
	put(r, name, nl);
	seal(r);
	return r->n;
}

static void launch_rec(struct gs_join *j, uint32_t stack, uint64_t t, const char *name)
{
	struct gs_gpu_launch lr = {
		.hdr = { .type = GS_REC_GPU_LAUNCH, .version = GS_RECORDS_VERSION, .ktime_ns = t },
		.gpu = { .tgid = 600, .tid = 601 },
		.name_hash = gs_kernel_name_hash(name),
		.sample_every = 1,
	};
	cr_assert_eq(gs_join_launch_record(j, &lr, stack, 0, 0), 0);
}

static int64_t gpu_samples_under(uint32_t cpu_loc)
{
	int64_t n = 0;
	for (size_t i = 0; i < P.n_samples; i++) {
		const struct gs_stack *k = &P.stacks[P.samples[i].stack];
		if (k->n > 1 && P.stack_locs[k->first + 1] == cpu_loc)
			n += P.samples[i].values[GS_V_GPU_SAMPLES];
	}
	return n;
}

/* Pages and GetData calls of one drain share its window: a page that ends
 * a few ns after the first must not see an empty window of its own. */
Test(cuda, record_pages_share_the_drain_window)
{
	struct gs_join *j = gs_join_new(&P, 0);
	uint32_t locs[2], stacks[2];
	for (int i = 0; i < 2; i++) {
		struct gs_function f = { .name = gs_profile_intern(&P, i ? "site_b" : "site_a") };
		struct gs_line l = { .function = gs_profile_add_function(&P, &f) };
		locs[i] = gs_profile_add_location(&P, 0, 0x100 + i, GS_FRAME_NATIVE, &l, 1);
		stacks[i] = (uint32_t)gs_profile_add_stack(&P, &locs[i], 1);
	}
	struct rec_buf r;
	launch_rec(j, stacks[1], 500, "k"); /* site_b, before drain 1 */
	batch_rec(&r, 1000, GS_GPU_BATCH_FIRST | GS_GPU_BATCH_LAST, "k", 10);
	cr_assert_eq(gs_join_pc_batch_record(j, C, (void *)r.b, r.n), 0);
	launch_rec(j, stacks[0], 1500, "k"); /* site_a, inside drain 2 */
	/* drain 2: a first GetData call that left PCs behind, then a second */
	batch_rec(&r, 2000, GS_GPU_BATCH_FIRST, "k", 30);
	cr_assert_eq(gs_join_pc_batch_record(j, C, (void *)r.b, r.n), 0);
	batch_rec(&r, 2001, GS_GPU_BATCH_FIRST | GS_GPU_BATCH_LAST, "k", 50);
	cr_assert_eq(gs_join_pc_batch_record(j, C, (void *)r.b, r.n), 0);
	cr_assert_eq(gs_join_emit(j, NULL), 0);
	cr_expect_eq(gpu_samples_under(locs[1]), 10, "drain 1 -> site_b");
	cr_expect_eq(gpu_samples_under(locs[0]), 80, "both pages of drain 2 -> site_a");
	gs_join_free(j);
}

/* A hostile period exponent (the agent's memory is the target's): no shift
 * by it, no "2^200" in the comments; a truncated or lying n_reasons is
 * refused before any reason is read. */
Test(cuda, stall_table_hostile_fields)
{
	struct rec_buf t = { .n = 0 };
	struct gs_gpu_stall_table th = {
		.hdr = { .type = GS_REC_GPU_STALL_TABLE, .version = GS_RECORDS_VERSION },
		.gpu = { .tgid = 9, .ctx_uid = 1, .device = 0 },
		.n_reasons = 0,
		.sampling_period = 200,
		.sm_count = 1,
		.clock_khz = 1000,
	};
	put(&t, &th, sizeof(th));
	seal(&t);
	cr_assert_eq(gs_cuda_stall_table_record(C, (void *)t.b, t.n), 0);
	gs_cuda_add_counts(C, 9, 0, 10, 0, 0);
	cr_assert_eq(gs_cuda_add_comments(C), 0);
	cr_assert_geq(P.n_comments, 1);
	const char *cm = gs_profile_str(&P, P.comments[0]);
	cr_expect(strstr(cm, "2^200") == NULL && strstr(cm, "period") == NULL, "%s", cm);
	th.n_reasons = 0x40000000u;
	th.hdr.size = sizeof(th); /* only n_reasons lies */
	cr_expect_eq(gs_cuda_stall_table_record(C, (void *)&th, sizeof(th)), -EINVAL);
	cr_expect_eq(gs_cuda_stall_table_record(C, (void *)&th, sizeof(th) - 1), -EINVAL);
}

/* Deferred source lines (the session's mode): locations come back at once
 * without a line, gs_cuda_resolve_lines() then gives each the line and file
 * the synchronous lookup gives, under the same location id. */
Test(cuda, deferred_lines_match_synchronous)
{
	need_cupti();
	size_t len;
	void *b = cubin("kernels_li.cubin", &len);
	uint64_t crc;
	const char *mangled = "_Z5scaleIfLi4EEvPT_S0_i";
	uint64_t size = fn_size(b, len, mangled);
	struct gs_profile q;
	gs_profile_init(&q);
	struct gs_cuda *d = gs_cuda_new(&q);
	gs_cuda_defer_lines(d, true);
	cr_assert_eq(gs_cuda_add_cubin(C, 0, b, len, 1, NULL, &crc), 0);
	cr_assert_eq(gs_cuda_add_cubin(d, crc, b, len, 1, NULL, NULL), 0);
	uint32_t ids[512], n = 0, lines = 0;
	for (uint64_t pc = 0; pc < size && n < 512; pc += 16, n++) {
		ids[n] = gs_cuda_location(d, crc, mangled, pc);
		cr_assert_neq(ids[n], 0);
		cr_expect_eq(q.lines[gs_profile_location(&q, ids[n])->first_line].line, 0,
			     "not yet");
	}
	cr_assert_eq(gs_cuda_resolve_lines(d), 0);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = gs_cuda_location(C, crc, mangled, (uint64_t)i * 16);
		const struct gs_line *ls = &P.lines[gs_profile_location(&P, s)->first_line];
		const struct gs_line *ld = &q.lines[gs_profile_location(&q, ids[i])->first_line];
		cr_expect_eq(ld->line, ls->line, "pc 0x%x", i * 16);
		const struct gs_function *fs = gs_profile_function(&P, ls->function);
		const struct gs_function *fd = gs_profile_function(&q, ld->function);
		cr_expect_str_eq(gs_profile_str(&q, fd->file), gs_profile_str(&P, fs->file));
		lines += ld->line != 0;
	}
	cr_expect_gt(lines, 0, "no PC of scale resolved to a line");
	gs_cuda_free(d);
	gs_test_keep_profile(&q);
	gs_profile_free(&q);
	free(b);
}

/* Issue 24: libcupti given a cubin it loops on (allocating, signals
 * blocked) runs apart and is killed at the wall: the lookup returns, the
 * location keeps its kernel name without a line, and the comments say why. */
/* A copy of src in a fresh root-owned directory under /run: gs_cuda_set_cupti
 * trusts only a library whose directories only root can write, and a
 * checkout may live anywhere (CI clones under /tmp, which others can write).
 * Writes the copy's path to out and its directory to dir. */
static void trusted_copy(const char *src, char *dir, char *out, size_t outlen)
{
	char buf[65536];
	size_t n;

	snprintf(dir, PATH_MAX, "/run/gs-test-cupti.XXXXXX");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp under /run: %s (run as root)", strerror(errno));
	cr_assert_lt((size_t)snprintf(out, outlen, "%.200s/libcupti.so", dir), outlen);
	FILE *in = fopen(src, "rb"), *o = fopen(out, "wb");
	cr_assert(in && o, "copy %s: %s", src, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, o), n);
	fclose(in);
	fclose(o);
	cr_assert_eq(chmod(out, 0755), 0);
}

Test(cuda, cupti_behind_a_wall, .timeout = 60)
{
	char src[PATH_MAX], lib[PATH_MAX], dir[PATH_MAX], why[512] = "";
	snprintf(src, sizeof(src), "%s/../fakes/hostile/libcupti.so", GS_CUDA_FIXTURES);
	trusted_copy(src, dir, lib, sizeof(lib));
	size_t len;
	void *b = cubin("kernels_li.cubin", &len);
	const char *mangled = "_Z5scaleIfLi4EEvPT_S0_i";
	struct gs_profile q;
	gs_profile_init(&q);
	struct gs_cuda *d = gs_cuda_new(&q);
	cr_assert_eq(gs_cuda_set_cupti(d, lib, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(gs_cuda_set_cupti_limits(d, 1500, 64 << 20), 0);
	gs_cuda_defer_lines(d, true);
	uint64_t crc;
	cr_assert_eq(gs_cuda_add_cubin(d, 0, b, len, 1, NULL, &crc), 0);
	uint32_t id = gs_cuda_location(d, crc, mangled, 0);
	cr_assert_neq(id, 0);
	time_t t0 = time(NULL);
	cr_assert_eq(gs_cuda_resolve_lines(d), 0);
	cr_assert_leq(time(NULL) - t0, 10, "killed at the wall, not later");
	const struct gs_location *l = gs_profile_location(&q, id);
	cr_expect_eq(q.lines[l->first_line].line, 0);
	cr_assert_eq(gs_cuda_add_comments(d), 0);
	bool said = false;
	for (size_t i = 0; i < q.n_comments; i++)
		said |= strstr(gs_profile_str(&q, q.comments[i]), "libcupti") &&
			strstr(gs_profile_str(&q, q.comments[i]), "without a line");
	cr_expect(said, "the comments say why the lines are missing");
	gs_cuda_free(d);
	gs_test_keep_profile(&q);
	gs_profile_free(&q);
	free(b);
	unlink(lib);
	rmdir(dir);
}
