// SPDX-License-Identifier: MIT
/* CFI row builder (native/cfi_rows.c) against binutils' own reading of .eh_frame:
 * every row that `readelf --debug-dump=frames-interp` prints for the test
 * library (build/workloads/libnofp.so, -O2 -fomit-frame-pointer) and for
 * glibc must give the same rule through gs_cfi_table_lookup. */
#include <criterion/criterion.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpusample/records.h"
#include "native/native.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* build/workloads/libnofp.so next to this test's build dir. */
static const char *test_lib(void)
{
	static char path[PATH_MAX];
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert(n > 0);
	exe[n] = 0;
	snprintf(path, sizeof(path), "%s/../workloads/libnofp.so", dirname(exe));
	cr_assert(access(path, R_OK) == 0,
		  "%s missing: build it with make (tests/workloads/workloads.mk)", path);
	return path;
}

struct cmp_result {
	unsigned rows, mismatches, signal_rows, exp_rows, empty_fdes;
};

static bool parse_off(const char *s, const char *prefix, long *off)
{
	size_t n = strlen(prefix);
	char *end;

	if (strncmp(s, prefix, n))
		return false;
	*off = strtol(s + n, &end, 10);
	return *end == 0;
}

/* One readelf row vs our rule; returns true if they agree. */
static bool row_agrees(const struct gs_cfi_rule *r, const char *cfa, const char *rbp,
		       const char *ra, bool signal, struct cmp_result *res)
{
	long off;

	if (!r)
		return false;
	if (signal) {
		res->signal_rows++;
		/* glibc __restore_rt: saved rsp at uc_mcontext.rsp, rbp at .rbp */
		return r->cfa_type == GS_CFA_SIGNAL && r->cfa_off == 160 && r->rbp_off == 120;
	}
	if (!strcmp(ra, "u"))
		return r->cfa_type == GS_CFA_END;
	if (strcmp(ra, "c-8"))
		return r->cfa_type == GS_CFA_EXPR;
	if (parse_off(cfa, "rsp", &off)) {
		if (r->cfa_type != GS_CFA_RSP || r->cfa_off != off)
			return false;
	} else if (parse_off(cfa, "rbp", &off)) {
		if (r->cfa_type != GS_CFA_RBP || r->cfa_off != off)
			return false;
	} else if (!strcmp(cfa, "exp")) {
		res->exp_rows++;
		if (r->cfa_type != GS_CFA_PLT && r->cfa_type != GS_CFA_DEREF_RBP &&
		    r->cfa_type != GS_CFA_EXPR)
			return false;
		if (r->cfa_type == GS_CFA_PLT)
			return true; /* PLT stubs: RBP untouched, threshold in rbp_off */
	} else {
		return r->cfa_type == GS_CFA_EXPR; /* CFA in another register */
	}
	if (r->cfa_type == GS_CFA_EXPR)
		return true;
	if (!rbp || !strcmp(rbp, "u") || !strcmp(rbp, "s"))
		return r->rbp_type == GS_RBP_SAME || r->rbp_type == GS_RBP_LOST;
	if (parse_off(rbp, "c", &off))
		return r->rbp_type == GS_RBP_CFA && r->rbp_off == off;
	if (!strcmp(rbp, "exp"))
		return r->rbp_type == GS_RBP_RBP || r->rbp_type == GS_RBP_LOST;
	return r->rbp_type == GS_RBP_LOST;
}

static void compare_with_readelf(const char *path, const struct gs_cfi_table *t,
				 struct cmp_result *res)
{
	char cmd[PATH_MAX + 64], line[4096], cols[32][16], augs[256][16];
	unsigned long cie_off[256];
	int ncols = 0, ncie = 0;
	bool in_fde = false, fde_rows = false, signal = false;
	unsigned long lo = 0, hi = 0;
	FILE *f;

	memset(res, 0, sizeof(*res));
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	cr_assert(f, "readelf (binutils) is needed");
	while (fgets(line, sizeof(line), f)) {
		unsigned long off, len, id, cie;
		char aug[16];

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%lx %lx %lx CIE \"%15[^\"]\"", &off, &len, &id, aug) == 4) {
			if (ncie < 256) {
				cie_off[ncie] = off;
				snprintf(augs[ncie++], 16, "%s", aug);
			}
			in_fde = false;
			continue;
		}
		if (sscanf(line, "%lx %lx %lx FDE cie=%lx pc=%lx..%lx", &off, &len, &id, &cie, &lo,
			   &hi) == 6) {
			in_fde = true;
			fde_rows = false;
			signal = false;
			for (int i = 0; i < ncie; i++)
				if (cie_off[i] == cie)
					signal = strchr(augs[i], 'S') != NULL;
			continue;
		}
		if (!strncmp(line, "   LOC", 6)) {
			char *save, *tok = strtok_r(line, " ", &save);

			ncols = 0;
			while ((tok = strtok_r(NULL, " ", &save)) && ncols < 32)
				snprintf(cols[ncols++], 16, "%s", tok);
			continue;
		}
		if (!line[0]) {
			if (in_fde && !fde_rows && lo < hi) {
				/* no instructions: the CIE's initial rule, CFA = rsp+8 */
				const struct gs_cfi_rule *r = gs_cfi_table_lookup(t, lo);

				res->empty_fdes++;
				if (!signal && (!r || r->cfa_type != GS_CFA_RSP || r->cfa_off != 8))
					res->mismatches++;
			}
			in_fde = false;
			continue;
		}
		if (!in_fde || !ncols)
			continue;
		/* a row: LOC then one value per column (CFA first) */
		char *save, *tok = strtok_r(line, " ", &save);
		char *vals[32];
		int nv = 0;
		unsigned long loc;

		if (!tok || sscanf(tok, "%lx", &loc) != 1)
			continue;
		while ((tok = strtok_r(NULL, " ", &save)) && nv < 32)
			vals[nv++] = tok;
		if (nv != ncols)
			continue;
		const char *cfa = NULL, *rbp = NULL, *ra = NULL;
		for (int i = 0; i < ncols; i++) {
			if (!strcmp(cols[i], "CFA"))
				cfa = vals[i];
			else if (!strcmp(cols[i], "rbp"))
				rbp = vals[i];
			else if (!strcmp(cols[i], "ra"))
				ra = vals[i];
		}
		if (!cfa || !ra)
			continue;
		fde_rows = true;
		res->rows++;
		if (!row_agrees(gs_cfi_table_lookup(t, loc), cfa, rbp, ra, signal, res)) {
			res->mismatches++;
			if (res->mismatches < 10)
				fprintf(stderr,
					"%s: mismatch at 0x%lx: readelf CFA %s rbp %s ra %s\n",
					path, loc, cfa, rbp ? rbp : "-", ra);
		}
	}
	pclose(f);
}

Test(cfi, rows_match_readelf_test_lib)
{
	struct gs_cfi_table t;
	struct cmp_result res;
	const char *lib = test_lib();

	cr_assert_eq(gs_cfi_table_build(lib, -1, &t), 0);
	compare_with_readelf(lib, &t, &res);
	cr_expect_eq(res.mismatches, 0, "%u of %u rows disagree with readelf", res.mismatches,
		     res.rows);
	cr_expect_geq(res.rows, 15);
	cr_expect_geq(res.exp_rows, 3, "PLT and DRAP rows expected");
	gs_cfi_table_free(&t);
}

Test(cfi, rows_match_readelf_libc)
{
	struct gs_cfi_table t;
	struct cmp_result res;

	cr_assert_eq(gs_cfi_table_build(LIBC, -1, &t), 0);
	compare_with_readelf(LIBC, &t, &res);
	cr_expect_eq(res.mismatches, 0, "%u of %u rows disagree with readelf", res.mismatches,
		     res.rows);
	cr_expect_geq(res.rows, 10000);
	cr_expect_geq(res.signal_rows, 1, "__restore_rt (signal frame) expected in glibc");
	cr_expect_geq(t.n_signal, 1);
	gs_cfi_table_free(&t);
}

/* Symbol value from nm (the test library keeps .symtab). */
static unsigned long sym_addr(const char *lib, const char *name)
{
	char cmd[PATH_MAX + 128], line[512];
	unsigned long addr = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm '%s'", lib);
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a;
		char type, sym[256];

		if (sscanf(line, "%lx %c %255s", &a, &type, sym) == 3 && !strcmp(sym, name))
			addr = a;
	}
	pclose(f);
	cr_assert(addr, "%s not found in %s", name, lib);
	return addr;
}

Test(cfi, known_functions)
{
	struct gs_cfi_table t;
	const char *lib = test_lib();
	const struct gs_cfi_rule *r;
	unsigned long entry = sym_addr(lib, "nofp_lib_entry"),
		      aligned = sym_addr(lib, "lib_aligned");
	bool saw_deref = false;

	cr_assert_eq(gs_cfi_table_build(lib, -1, &t), 0);
	/* at a function's first instruction the CFA is always RSP+8 */
	r = gs_cfi_table_lookup(&t, entry);
	cr_assert(r);
	cr_expect_eq(r->cfa_type, GS_CFA_RSP);
	cr_expect_eq(r->cfa_off, 8);
	/* lib_aligned realigns with DRAP: somewhere inside, CFA = *(RBP+off)
	 * and the caller's RBP is at RBP+0 */
	for (unsigned long pc = aligned; pc < aligned + 256; pc++) {
		r = gs_cfi_table_lookup(&t, pc);
		if (r && r->cfa_type == GS_CFA_DEREF_RBP) {
			saw_deref = true;
			cr_expect_eq(r->rbp_type, GS_RBP_RBP);
			cr_expect_eq(r->rbp_off, 0);
			break;
		}
	}
	cr_expect(saw_deref, "no DW_OP_breg6; DW_OP_deref row in lib_aligned");
	/* the lazy .plt: the standard expression, threshold 11 */
	cr_expect_geq(t.n_plt, 1);
	for (uint32_t i = 0; i < t.n_rows; i++) {
		const struct gs_cfi_rule *pr = &t.rules[t.rows[i].rule];

		if (pr->cfa_type == GS_CFA_PLT) {
			cr_expect_eq(pr->cfa_off, 8);
			cr_expect_eq(pr->rbp_off, 11);
		}
	}
	gs_cfi_table_free(&t);
}

Test(cfi, rows_sorted_and_merged)
{
	struct gs_cfi_table t;

	cr_assert_eq(gs_cfi_table_build(LIBC, -1, &t), 0);
	cr_assert_gt(t.n_rows, 1000);
	for (uint32_t i = 1; i < t.n_rows; i++) {
		cr_assert_lt(t.rows[i - 1].pc, t.rows[i].pc, "rows not sorted at %u", i);
		cr_assert_neq(t.rows[i - 1].rule, t.rows[i].rule,
			      "identical neighbours at %u not merged", i);
	}
	/* rules are deduplicated: far fewer than rows */
	cr_expect_lt(t.n_rules * 20, t.n_rows);
	/* before the first FDE there is no row */
	cr_expect_null(gs_cfi_table_lookup(&t, 0));
	gs_cfi_table_free(&t);
}

Test(cfi, errors)
{
	struct gs_cfi_table t;
	char tmp[] = "/tmp/gs-cfi-notelf.XXXXXX";
	int fd = mkstemp(tmp);

	cr_assert_eq(gs_cfi_table_build("/nonexistent/libx.so", -1, &t), -ENOENT);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "not an ELF file at all", 22), 22);
	cr_expect_eq(gs_cfi_table_build(tmp, fd, &t), -EINVAL);
	close(fd);
	unlink(tmp);
}

/* ---- the linear builder against libdw's (the reference) -------------------- */

static void assert_same_tables(const char *path)
{
	struct gs_cfi_table a, b;
	int ra = gs_cfi_table_build(path, -1, &a), rb = gs_cfi_table_build_libdw(path, -1, &b);
	cr_assert_eq(ra, rb, "%s: %d vs libdw %d", path, ra, rb);
	cr_assert_eq(a.n_rows, b.n_rows, "%s: %u rows vs libdw %u", path, a.n_rows, b.n_rows);
	cr_assert_eq(a.n_expr, b.n_expr, "%s", path);
	for (uint32_t i = 0; i < a.n_rows; i++) {
		cr_assert_eq(a.rows[i].pc, b.rows[i].pc, "%s row %u", path, i);
		cr_assert(
		    !memcmp(&a.rules[a.rows[i].rule], &b.rules[b.rows[i].rule], sizeof(a.rules[0])),
		    "%s: rule of row %u (pc 0x%x) differs from libdw's", path, i, a.rows[i].pc);
	}
	gs_cfi_table_free(&a);
	gs_cfi_table_free(&b);
}

/* Every rule shape on these: PLT expressions, signal trampolines (libc's
 * __restore_rt), DRAP realignment, remember/restore_state, GNU_args_size. */
Test(cfi, linear_builder_matches_libdw)
{
	static const char *const libs[] = {
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
		"/usr/lib/x86_64-linux-gnu/libm.so.6",
		"/usr/bin/python3",
		"/proc/self/exe",
	};
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		cr_assert_eq(access(libs[i], R_OK), 0, "%s missing", libs[i]);
		assert_same_tables(libs[i]);
	}
}

/* ~800 KB of .eh_frame in one FDE of 270002 rows: the quadratic path took
 * 71 s on this; linear, it is every row (the suite's timeout catches a
 * regression to quadratic). */
Test(cfi, huge_fde_is_linear, .timeout = 60)
{
	char so[] = "/tmp/gs-bomb-XXXXXX", cmd[256];
	int fd = mkstemp(so);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "tests/tools/make_cfi_bomb.sh %s 135000", so);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	struct gs_cfi_table t;
	cr_assert_eq(gs_cfi_table_build(so, -1, &t), 0);
	cr_assert_eq(t.n_fdes, 1);
	cr_assert_geq(t.n_rows, 270000, "every push/pop row: %u", t.n_rows);
	cr_assert_eq(t.truncated, 0);
	const struct gs_cfi_rule *r = gs_cfi_table_lookup(&t, t.rows[1].pc);
	cr_assert_not_null(r);
	cr_assert_eq(r->cfa_type, GS_CFA_RSP);
	cr_assert_eq(r->cfa_off, 16, "after a push: CFA = RSP + 16");
	gs_cfi_table_free(&t);
	unlink(so);
}

/* ld.so's _start has no FDE: the entry point gets an outermost row (a walk
 * of the loader's start-up ends there), up to the next FDE. */
Test(cfi, entry_point_is_outermost)
{
	const char *ld = "/lib64/ld-linux-x86-64.so.2";
	char line[256];
	unsigned long entry = 0;
	struct gs_cfi_table t;
	FILE *f = popen("readelf -h /lib64/ld-linux-x86-64.so.2", "r");

	cr_assert(f, "readelf (binutils) is needed");
	while (fgets(line, sizeof(line), f))
		sscanf(line, " Entry point address: %lx", &entry);
	pclose(f);
	cr_assert_gt(entry, 0);
	cr_assert_eq(gs_cfi_table_build(ld, -1, &t), 0);
	const struct gs_cfi_rule *r = gs_cfi_table_lookup(&t, entry);
	cr_assert_not_null(r);
	cr_expect_eq(r->cfa_type, GS_CFA_END);
	r = gs_cfi_table_lookup(&t, entry + 8); /* the return address of its first call */
	cr_assert_not_null(r);
	cr_expect_eq(r->cfa_type, GS_CFA_END);
	gs_cfi_table_free(&t);
}

/* The rule arithmetic both walks share (gs_cfi_cfa / gs_cfi_rbp). */
Test(cfi, rule_arithmetic)
{
	struct gs_cfi_rule r = {
		.cfa_type = GS_CFA_RSP, .cfa_off = 16, .rbp_type = GS_RBP_CFA, .rbp_off = -16
	};
	__u64 at = 0;

	cr_expect_eq(gs_cfi_cfa(&r, 0x1000, 0x7000, 0, 0, &at), GS_CFI_VALUE);
	cr_expect_eq(at, 0x7010);
	cr_expect_eq(gs_cfi_rbp(&r, 0x7010, 0x1, 0, &at), GS_CFI_LOAD);
	cr_expect_eq(at, 0x7000, "saved RBP at CFA-16");
	r.cfa_type = GS_CFA_RBP;
	cr_expect_eq(gs_cfi_cfa(&r, 0x1000, 0x7000, 0x8000, 0, &at), GS_CFI_BAD, "RBP not known");
	cr_expect_eq(gs_cfi_cfa(&r, 0x1000, 0x7000, 0x8000, 1, &at), GS_CFI_VALUE);
	cr_expect_eq(at, 0x8010);
	r.cfa_type = GS_CFA_DEREF_RBP;
	cr_expect_eq(gs_cfi_cfa(&r, 0x1000, 0x7000, 0x8000, 1, &at), GS_CFI_LOAD);
	cr_expect_eq(at, 0x8010);
	/* PLT: 8 more once pc & 15 reaches the threshold (rbp_off) */
	r.cfa_type = GS_CFA_PLT;
	r.cfa_off = 8;
	r.rbp_off = 11;
	gs_cfi_cfa(&r, 0x100a, 0x7000, 0, 0, &at);
	cr_expect_eq(at, 0x7008);
	gs_cfi_cfa(&r, 0x100b, 0x7000, 0, 0, &at);
	cr_expect_eq(at, 0x7010);
	r.cfa_type = GS_CFA_SIGNAL;
	cr_expect_eq(gs_cfi_cfa(&r, 0, 0, 0, 0, &at), GS_CFI_SIG);
	r.cfa_type = GS_CFA_END;
	cr_expect_eq(gs_cfi_cfa(&r, 0, 0, 0, 0, &at), GS_CFI_STOP);
	r.cfa_type = GS_CFA_EXPR;
	cr_expect_eq(gs_cfi_cfa(&r, 0, 0, 0, 0, &at), GS_CFI_BAD);
	r.rbp_type = GS_RBP_SAME;
	cr_expect_eq(gs_cfi_rbp(&r, 0x7010, 0x55, 0, &at), GS_CFI_VALUE);
	cr_expect_eq(at, 0x55);
	r.rbp_type = GS_RBP_RBP;
	r.rbp_off = 8;
	cr_expect_eq(gs_cfi_rbp(&r, 0x7010, 0x8000, 0, &at), GS_CFI_BAD);
	cr_expect_eq(gs_cfi_rbp(&r, 0x7010, 0x8000, 1, &at), GS_CFI_LOAD);
	cr_expect_eq(at, 0x8008);
	r.rbp_type = GS_RBP_LOST;
	cr_expect_eq(gs_cfi_rbp(&r, 0x7010, 0x8000, 1, &at), GS_CFI_STOP);
}
