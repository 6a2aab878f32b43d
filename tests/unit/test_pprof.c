// SPDX-License-Identifier: MIT
/*
 * pprof encoder/decoder tests: golden text dump through protoc, the rules
 * pprof enforces (checked with an independent minimal protobuf walker),
 * `go tool pprof` reading the file, round trip through gs_read_pprof, and
 * speed at 1M samples.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "output/output.h"
#include "output_fixture.h"

FX_TMPDIR_SUITE(pprof, "pprof");

/* ---- a minimal independent protobuf walker ------------------------------ */

struct fld {
	uint32_t num;
	int wt;
	uint64_t v;       /* varint */
	const uint8_t *p; /* length-delimited payload */
	size_t n;
};

static bool next_field(const uint8_t **p, const uint8_t *end, struct fld *f)
{
	if (*p >= end)
		return false;
	uint64_t tag = 0, v = 0;
	int sh = 0;
	while (*p < end) {
		uint8_t b = *(*p)++;
		tag |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80))
			break;
	}
	f->num = (uint32_t)(tag >> 3);
	f->wt = (int)(tag & 7);
	sh = 0;
	while (*p < end) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80))
			break;
	}
	cr_assert(f->wt == 0 || f->wt == 2, "unexpected wire type %d", f->wt);
	if (f->wt == 0) {
		f->v = v;
	} else {
		cr_assert(v <= (uint64_t)(end - *p));
		f->p = *p;
		f->n = v;
		*p += v;
	}
	return true;
}

static size_t count_packed(const struct fld *f)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n; i++)
		n += !(f->p[i] & 0x80);
	return n;
}

static void encode_fixture(struct fx *x, uint8_t **buf, size_t *len)
{
	fx_build(x);
	cr_assert_eq(gs_pprof_encode(&x->p, buf, len), 0);
}

/* ---- rules -------------------------------------------------------------- */

Test(pprof, string_table_rules)
{
	struct fx x;
	uint8_t *b;
	size_t n;
	encode_fixture(&x, &b, &n);
	const uint8_t *p = b;
	struct fld f;
	char **strs = calloc(4096, sizeof(char *));
	size_t ns = 0;
	int time_nanos = 0;
	while (next_field(&p, b + n, &f)) {
		if (f.num == 6) {
			cr_assert(ns < 4096);
			strs[ns] = strndup((const char *)f.p, f.n);
			ns++;
		}
		time_nanos += f.num == 9;
	}
	cr_assert_gt(ns, 10);
	cr_assert_str_eq(strs[0], "", "string_table[0] must be \"\"");
	for (size_t i = 0; i < ns; i++)
		for (size_t j = i + 1; j < ns; j++)
			cr_assert_str_neq(strs[i], strs[j], "duplicate string %zu/%zu '%s'", i, j,
					  strs[i]);
	cr_assert_eq(time_nanos, 1, "time_nanos must be written exactly once");
	for (size_t i = 0; i < ns; i++)
		free(strs[i]);
	free(strs);
	free(b);
	gs_profile_free(&x.p);
}

/* Ids nonzero and unique, references resolve, values match sample_type,
 * system_name never equals name, numeric labels carry units. */
Test(pprof, ids_values_labels)
{
	struct fx x;
	uint8_t *b;
	size_t n;
	encode_fixture(&x, &b, &n);
	const uint8_t *p = b;
	struct fld f, g, h;
	uint64_t loc_ids[256], fn_ids[256], map_ids[64];
	size_t nl = 0, nf = 0, nm = 0, n_types = 0, n_samples = 0;
	/* first pass: tables */
	while (next_field(&p, b + n, &f)) {
		const uint8_t *q = f.p;
		n_types += f.num == 1;
		if (f.num == 3 || f.num == 4 || f.num == 5) {
			uint64_t id = 0, name = 0, sys = 0;
			while (next_field(&q, f.p + f.n, &g)) {
				if (g.num == 1)
					id = g.v;
				if (f.num == 5 && g.num == 2)
					name = g.v;
				if (f.num == 5 && g.num == 3)
					sys = g.v;
			}
			cr_assert_neq(id, 0, "id 0 in field %u", f.num);
			if (f.num == 5) {
				cr_assert_neq(name, 0, "Function without a name");
				cr_assert_neq(name, sys,
					      "system_name == name triggers pprof's demangler");
				fn_ids[nf++] = id;
			} else if (f.num == 4) {
				loc_ids[nl++] = id;
			} else {
				map_ids[nm++] = id;
			}
		}
	}
	cr_assert_eq(n_types, GS_NVALUES);
	cr_assert_eq(nm, x.p.n_mappings);
	cr_assert_eq(nl, x.p.n_locations);
	cr_assert_eq(nf, x.p.n_functions);
	for (size_t i = 0; i < nl; i++)
		for (size_t j = i + 1; j < nl; j++)
			cr_assert_neq(loc_ids[i], loc_ids[j]);
	for (size_t i = 0; i < nf; i++)
		for (size_t j = i + 1; j < nf; j++)
			cr_assert_neq(fn_ids[i], fn_ids[j]);
	for (size_t i = 0; i < nm; i++)
		for (size_t j = i + 1; j < nm; j++)
			cr_assert_neq(map_ids[i], map_ids[j]);
	/* second pass: samples */
	p = b;
	while (next_field(&p, b + n, &f)) {
		if (f.num != 2)
			continue;
		n_samples++;
		const uint8_t *q = f.p;
		size_t n_values = 0;
		while (next_field(&q, f.p + f.n, &g)) {
			if (g.num == 1) {
				cr_assert_eq(g.wt, 2, "location_id should be packed");
				const uint8_t *r = g.p;
				while (r < g.p + g.n) {
					uint64_t v = 0;
					int sh = 0;
					do {
						v |= (uint64_t)(*r & 0x7f) << sh;
						sh += 7;
					} while (*r++ & 0x80);
					bool found = false;
					for (size_t i = 0; i < nl; i++)
						found |= loc_ids[i] == v;
					cr_assert(found, "location_id %lu has no Location",
						  (unsigned long)v);
				}
			} else if (g.num == 2) {
				n_values += g.wt == 2 ? count_packed(&g) : 1;
			} else if (g.num == 3) {
				const uint8_t *r = g.p;
				uint64_t str = 0, num = 0, unit = 0;
				while (next_field(&r, g.p + g.n, &h)) {
					str = h.num == 2 ? h.v : str;
					num = h.num == 3 ? h.v : num;
					unit = h.num == 4 ? h.v : unit;
				}
				cr_assert(str || unit,
					  "label neither string nor numeric with unit");
				cr_assert(!(str && (num || unit)), "label both string and numeric");
			}
		}
		cr_assert_eq(n_values, GS_NVALUES, "len(value) != len(sample_type)");
	}
	/* 5 CPU stacks x label sets + 3 GPU samples, aggregated */
	cr_assert_eq(n_samples, 8);
	free(b);
	gs_profile_free(&x.p);
}

Test(pprof, aggregation_keeps_label_sets_apart)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function fn = { .name = gs_profile_intern(&p, "f") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &fn) };
	uint32_t loc = gs_profile_add_location(&p, 0, 0x10, GS_FRAME_NATIVE, &l, 1);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	for (int i = 0; i < 10; i++) {
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = 5, .tid = 5 + (i & 1), .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = 1;
		s.values[GS_V_CPU_NS] = 7;
		gs_profile_add_sample(&p, &s, &s_c);
	}
	char path[128];
	snprintf(path, sizeof(path), "%s/agg.pb.gz", tmpdir);
	char err[256];
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.n_samples, 2, "two tids -> two pprof samples");
	for (size_t i = 0; i < r.n_samples; i++) {
		cr_assert_eq(r.samples[i].values[GS_V_SAMPLES], 5);
		cr_assert_eq(r.samples[i].values[GS_V_CPU_NS], 35);
	}
	gs_profile_free(&r);
	gs_profile_free(&p);
}

/* Extra labels (enum gs_str_label / gs_num_label) keep samples apart, are
 * written under their keys, and come back; a numeric 0 survives. */
Test(pprof, extra_labels_round_trip)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function fn = { .name = gs_profile_intern(&p, "f") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &fn) };
	uint32_t loc = gs_profile_add_location(&p, 0, 0x10, GS_FRAME_NATIVE, &l, 1);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	gs_str blocked = gs_profile_intern(&p, "blocked");
	for (int i = 0; i < 6; i++) {
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = 5, .tid = 5, .cuda_device = -1 };
		s.values[GS_V_OFFCPU_NS] = 100;
		s_c.str_labels[GS_SL_THREAD_STATE] = blocked;
		s_c.num_labels[GS_NL_RANK] = i % 2; /* rank 0 and rank 1 */
		s_c.num_set = 1u << GS_NL_RANK;
		gs_profile_add_sample(&p, &s, &s_c);
	}
	cr_assert_eq(p.samples[0].values[GS_V_WALL_NS], 100, "wall = cpu + offcpu");
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/extra.pb.gz", tmpdir);
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.n_samples, 2, "ranks 0 and 1 -> two pprof samples");
	bool seen[2] = { false, false };
	for (size_t i = 0; i < r.n_samples; i++) {
		const struct gs_sample *s = &r.samples[i];
		cr_assert(gs_profile_ctx(&r, s)->num_set & (1u << GS_NL_RANK));
		cr_assert(gs_profile_ctx(&r, s)->num_labels[GS_NL_RANK] == 0 ||
			  gs_profile_ctx(&r, s)->num_labels[GS_NL_RANK] == 1);
		seen[gs_profile_ctx(&r, s)->num_labels[GS_NL_RANK]] = true;
		cr_assert_str_eq(
		    gs_profile_str(&r, gs_profile_ctx(&r, s)->str_labels[GS_SL_THREAD_STATE]),
		    "blocked");
		cr_assert_eq(s->values[GS_V_OFFCPU_NS], 300);
		cr_assert_eq(s->values[GS_V_WALL_NS], 300);
	}
	cr_assert(seen[0] && seen[1]);
	gs_profile_free(&r);
	gs_profile_free(&p);
}

/* Strings from the target that are not UTF-8 reach pprof as U+FFFD. */
Test(pprof, invalid_utf8_replaced)
{
	struct gs_profile p;
	gs_profile_init(&p);
	struct gs_function fn = { .name = gs_profile_intern(&p, "f\xff\xc3(") };
	struct gs_line l = { .function = gs_profile_add_function(&p, &fn) };
	uint32_t loc = gs_profile_add_location(&p, 0, 0x10, GS_FRAME_NATIVE, &l, 1);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	struct gs_sample s = { .stack = (uint32_t)st };
	struct gs_sample_ctx s_c = { .pid = 5, .tid = 5, .cuda_device = -1 };
	s.values[GS_V_SAMPLES] = 1;
	gs_profile_add_sample(&p, &s, &s_c);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/utf8.pb.gz", tmpdir);
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	bool found = false;
	for (uint32_t i = 0; i < r.n_strings; i++)
		found |= !strcmp(r.strings[i], "f\xef\xbf\xbd\xef\xbf\xbd(");
	cr_assert(found, "the invalid bytes were not replaced by U+FFFD");
	gs_profile_free(&r);
	gs_profile_free(&p);
}

/* ---- golden file via protoc -------------------------------------------- */

Test(pprof, golden_protoc_decode)
{
	if (!fx_have("protoc"))
		cr_skip_test("protoc not installed (apt-get install protobuf-compiler)");
	struct fx x;
	uint8_t *b;
	size_t n;
	encode_fixture(&x, &b, &n);
	char raw[128], cmd[1024], golden[512];
	snprintf(raw, sizeof(raw), "%s/fx.pb", tmpdir);
	FILE *f = fopen(raw, "wb");
	cr_assert_not_null(f);
	fwrite(b, 1, n, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "protoc --decode=perftools.profiles.Profile --proto_path=%s/tests/unit/golden "
		 "%s/tests/unit/golden/profile.proto < %s 2>&1",
		 fx_root(), fx_root(), raw);
	int st;
	char *out = fx_run(cmd, &st);
	cr_assert_eq(st, 0, "protoc failed: %s", out);
	snprintf(golden, sizeof(golden), "%s/tests/unit/golden/fixture.pprof.txt", fx_root());
	if (getenv("GS_UPDATE_GOLDEN")) {
		FILE *g = fopen(golden, "w");
		cr_assert_not_null(g);
		fputs(out, g);
		fclose(g);
	}
	char *want = fx_read_file(golden, NULL);
	cr_assert_not_null(want, "missing %s (run with GS_UPDATE_GOLDEN=1 once)", golden);
	cr_assert_str_eq(out, want, "protoc dump differs from %s", golden);
	/* and the decoded text says what the rules say */
	cr_assert_not_null(strstr(out, "string_table: \"\"\n"));
	free(want);
	free(out);
	free(b);
	gs_profile_free(&x.p);
}

/* ---- go tool pprof ------------------------------------------------------ */

/* Run the shell command cmd; assert that it exits 0 and prints every string
 * in want (NULL-terminated). */
static void expect_output(const char *cmd, const char *const *want)
{
	int st;
	char *out = fx_run(cmd, &st);
	cr_assert_eq(st, 0, "%s: %s", cmd, out);
	for (; *want; want++)
		cr_assert_not_null(strstr(out, *want), "%s: no \"%s\" in:\n%s", cmd, *want, out);
	free(out);
}

static void expect_pprof(const char *args, const char *file, const char *const *want)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "GOFLAGS=-mod=mod GOTOOLCHAIN=local GOCACHE=${GOCACHE:-/tmp/gs-gocache} "
		 "go tool pprof %s %s 2>&1",
		 args, file);
	expect_output(cmd, want);
}

#define WANT(...) ((const char *const[]){ __VA_ARGS__, NULL })

Test(pprof, go_tool_pprof_reads_it)
{
	if (!fx_have("go"))
		cr_skip_test("go not installed (apt-get install golang-go)");
	struct fx x;
	fx_build(&x);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/fx.pb.gz", tmpdir);
	cr_assert_eq(gs_write_pprof(&x.p, path, err, sizeof(err)), 0, "%s", err);
	/* pid 0 must survive as a label; system_name, periods, roles too */
	expect_pprof("-raw", path,
		     WANT("gpu_samples/count[dflt]", "pid:[0 pid]", "cuda_device:[0 device]",
			  "cuda_stall_reason:[long_scoreboard]", "process_role:[dataloader]",
			  "PeriodType: cpu nanoseconds", "Period: 10000000"));
	expect_pprof(
	    "-top", path,
	    WANT("Type: gpu_samples", "Total samples = 170", "load_tile(float const*) (inline)"));
	/* <module> must not be demangled away */
	expect_pprof("-top -sample_index=cpu", path, WANT("Total samples = 150ms", "<module>"));
	/* the worker pid has 4 of 15 samples */
	expect_pprof("-top -sample_index=samples -tagfocus=pid=1201", path,
		     WANT("Total samples = 15", "4 26.67%"));
	expect_pprof("-top -lines -sample_index=gpu_samples_not_issued", path,
		     WANT("Total samples = 110", "tile.cuh:42"));
	expect_pprof("-traces -sample_index=gpu_samples -tagleaf=cuda_stall_reason", path,
		     WANT("long_scoreboard", "[unknown launch]"));

	/* tests/tools/pprof_stacks.py (what the integration tests assert on):
	 * 160 of the 170 GPU samples have their launching CPU chain */
	char cmd[1024];
	snprintf(
	    cmd, sizeof(cmd),
	    "%s/tests/tools/pprof_stacks.py %s -sample_index=gpu_samples | awk -F'\\t' "
	    "'$3 ~ /matmul_kernel.*;cudaLaunchKernel;.*train_step;.*;main$/ {m += $1} {t += $1} "
	    "END {printf \"total=%%d matched=%%d\\n\", t, m}'",
	    fx_root(), path);
	expect_output(cmd, WANT("total=170 matched=160"));
	gs_profile_free(&x.p);
}

/* ---- round trip --------------------------------------------------------- */

static int64_t total(const struct gs_profile *p, int v)
{
	int64_t t = 0;
	for (size_t i = 0; i < p->n_samples; i++)
		t += p->samples[i].values[v];
	return t;
}

Test(pprof, round_trip)
{
	struct fx x;
	fx_build(&x);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/rt.pb.gz", tmpdir);
	cr_assert_eq(gs_write_pprof(&x.p, path, err, sizeof(err)), 0, "%s", err);
	unsigned char magic[2];
	FILE *f = fopen(path, "rb");
	cr_assert_eq(fread(magic, 1, 2, f), 2);
	fclose(f);
	cr_assert(magic[0] == 0x1f && magic[1] == 0x8b, "gzip framing expected");

	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	for (int v = 0; v < GS_NVALUES; v++)
		cr_assert_eq(total(&r, v), total(&x.p, v), "column %d", v);
	cr_assert_eq(total(&r, GS_V_SAMPLES), FX_SAMPLES);
	cr_assert_eq(total(&r, GS_V_GPU_SAMPLES), FX_GPU);
	cr_assert_eq(r.n_samples, 8);
	cr_assert_eq(r.n_locations, x.p.n_locations);
	cr_assert_eq(r.n_functions, x.p.n_functions);
	cr_assert_eq(r.n_mappings, x.p.n_mappings);
	cr_assert_eq(r.time_nanos, x.p.time_nanos);
	cr_assert_eq(r.duration_nanos, x.p.duration_nanos);
	cr_assert_eq(r.period_ns, FX_PERIOD);
	cr_assert_eq(r.frequency_hz, 100);
	cr_assert_eq(r.lost_samples, 7);
	cr_assert_eq(r.default_sample_type, GS_V_GPU_SAMPLES);
	cr_assert_eq(r.n_comments, 2);
	cr_assert_str_eq(gs_profile_str(&r, r.comments[1]), "gpu0 pc sampling factor 20");
	cr_assert_eq(r.n_notes, 1);
	cr_assert_eq(r.n_processes, 2);
	cr_assert_str_eq(gs_profile_str(&r, r.processes[0].python), "CPython 3.11.2");
	cr_assert_str_eq(gs_profile_str(&r, r.processes[1].role), "dataloader");
	cr_assert(r.processes[1].exited);
	cr_assert_eq(r.processes[0].ns_pid, 0);
	cr_assert_eq(r.processes[1].ns_pid, 7);
	/* locations: same kinds, addresses, line chains and names */
	for (uint32_t i = 1; i <= r.n_locations; i++) {
		const struct gs_location *a = gs_profile_location(&x.p, i),
					 *b = gs_profile_location(&r, i);
		cr_assert_eq(a->kind, b->kind);
		cr_assert_eq(a->address, b->address);
		cr_assert_eq(a->n_lines, b->n_lines);
		for (uint32_t k = 0; k < a->n_lines; k++) {
			const struct gs_line *la = &x.p.lines[a->first_line + k],
					     *lb = &r.lines[b->first_line + k];
			cr_assert_eq(la->line, lb->line);
			cr_assert_str_eq(
			    gs_profile_str(&x.p, gs_profile_function(&x.p, la->function)->name),
			    gs_profile_str(&r, gs_profile_function(&r, lb->function)->name));
		}
	}
	/* labels */
	int gpu = 0, worker = 0;
	for (size_t i = 0; i < r.n_samples; i++) {
		const struct gs_sample *s = &r.samples[i];
		if (gs_profile_ctx(&r, s)->cuda_device == 0) {
			gpu++;
			cr_assert_neq(gs_profile_ctx(&r, s)->cuda_stall_reason, 0);
		}
		if (gs_profile_ctx(&r, s)->pid == 1201) {
			worker++;
			cr_assert_str_eq(gs_profile_str(&r, gs_profile_ctx(&r, s)->process_role),
					 "dataloader");
			cr_assert_str_eq(gs_profile_str(&r, gs_profile_ctx(&r, s)->thread_name),
					 "pt_data_worker");
		}
	}
	cr_assert_eq(gpu, 3);
	cr_assert_eq(worker, 1);
	gs_profile_free(&r);
	gs_profile_free(&x.p);
}

Test(pprof, read_rejects_garbage)
{
	char path[128], err[256] = "";
	snprintf(path, sizeof(path), "%s/junk.pb.gz", tmpdir);
	FILE *f = fopen(path, "w");
	fputs("this is not a profile\n", f);
	fclose(f);
	struct gs_profile r;
	gs_profile_init(&r);
	cr_assert_lt(gs_read_pprof(path, &r, err, sizeof(err)), 0);
	cr_assert_not_null(strstr(err, path), "%s", err);
	gs_profile_free(&r);
	snprintf(path, sizeof(path), "%s/missing.pb.gz", tmpdir);
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), -ENOENT);
	gs_profile_free(&r);
}

/* Corrupted files are rejected or read, never crash (run under ASan in
 * `make asan`), and whatever is read is consistent enough to report on. */
Test(pprof, read_survives_corruption)
{
	struct fx x;
	uint8_t *b;
	size_t n;
	encode_fixture(&x, &b, &n);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/fuzz.pb", tmpdir);
	uint64_t seed = 7;
	int ok = 0;
	for (int iter = 0; iter < 500; iter++) {
		uint8_t *m = malloc(n);
		memcpy(m, b, n);
		size_t len = n;
		for (int k = 0; k < 1 + iter % 4; k++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			size_t at = (size_t)(seed >> 33) % n;
			if (iter % 5 == 0)
				len = at; /* truncate */
			else
				m[at] ^= (uint8_t)(1u << ((seed >> 20) & 7));
		}
		FILE *f = fopen(path, "wb");
		fwrite(m, 1, len, f);
		fclose(f);
		free(m);
		struct gs_profile r;
		gs_profile_init(&r);
		if (gs_read_pprof(path, &r, err, sizeof(err)) == 0) {
			ok++;
			char *out = NULL;
			size_t olen = 0;
			FILE *mf = open_memstream(&out, &olen);
			struct gs_report_opts o = { 0 };
			gs_write_report(&r, &o, mf);
			fclose(mf);
			free(out);
			gs_write_speedscope(&r, "/dev/null", err, sizeof(err));
			gs_write_folded(&r, GS_FOLDED_CPU, "/dev/null", err, sizeof(err));
			gs_write_folded(&r, GS_FOLDED_GPU, "/dev/null", err, sizeof(err));
		}
		gs_profile_free(&r);
	}
	cr_assert_gt(ok, 0);
	free(b);
	gs_profile_free(&x.p);
}

Test(pprof, output_open_refuses_symlink)
{
	char target[128], link[128], err[256] = "";
	snprintf(target, sizeof(target), "%s/target", tmpdir);
	snprintf(link, sizeof(link), "%s/out.pb.gz", tmpdir);
	FILE *f = fopen(target, "w");
	fputs("keep", f);
	fclose(f);
	cr_assert_eq(symlink(target, link), 0);
	struct fx x;
	fx_build(&x);
	cr_assert_eq(gs_write_pprof(&x.p, link, err, sizeof(err)), -ELOOP);
	cr_assert_not_null(strstr(err, "symbolic link"), "%s", err);
	char *keep = fx_read_file(target, NULL);
	cr_assert_str_eq(keep, "keep", "symlink target must stay untouched");
	free(keep);
	int fd = gs_output_open(target, err, sizeof(err));
	cr_assert_geq(fd, 0);
	int flags = fcntl(fd, F_GETFD);
	cr_assert(flags & FD_CLOEXEC);
	struct stat st;
	fstat(fd, &st);
	cr_assert_eq(st.st_size, 0, "a fresh file, not the old one");
	cr_assert_eq(gs_output_close(fd, 0, err, sizeof(err)), 0, "%s", err);
	keep = fx_read_file(target, NULL);
	cr_assert_str_eq(keep, "", "our own old file is replaced");
	free(keep);
	gs_profile_free(&x.p);
}

/* ---- scale -------------------------------------------------------------- */

/* CPU time of this thread: other jobs on a shared 2-core CI box must not
 * make the test flaky. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 42;
static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)((rng >> 33) % n);
}

/* 100k locations (50k functions).  tree = 1: 50k stacks that share
 * prefixes like real call trees (depth up to 48), popular stacks sampled
 * more, each stack on 1-2 of 64 threads.  tree = 0: worst case, 50k
 * stacks of 24 random locations on random threads (nothing aggregates or
 * compresses well). */
static void big_profile(struct gs_profile *p, bool tree)
{
	gs_profile_init(p);
	struct gs_mapping m = { .file = gs_profile_intern(p, "/usr/lib/libbig.so"),
				.limit = 1 << 30 };
	uint32_t mid = gs_profile_add_mapping(p, &m);
	char name[64];
	for (uint32_t i = 0; i < 100000; i++) {
		snprintf(name, sizeof(name), "ns::function_number_%u(int)", i / 2);
		struct gs_function f = { .name = gs_profile_intern(p, name) };
		struct gs_line l = { .function = gs_profile_add_function(p, &f), .line = i };
		cr_assert_neq(
		    gs_profile_add_location(p, mid, 0x1000 + i * 16, GS_FRAME_NATIVE, &l, 1), 0);
	}
	cr_assert_eq(p->n_functions, 50000);
	static uint32_t stacks[50000], root_first[50000][48];
	static uint8_t depth[50000];
	for (int s = 0; s < 50000; s++) {
		uint32_t leaf_first[48];
		if (tree && s > 0) {
			int parent = s < 100 ? (int)rnd((uint32_t)s)
					     : s - 1 - (int)rnd(s < 1000 ? (uint32_t)s : 1000);
			int d = depth[parent] < 46 ? depth[parent] : 30;
			memcpy(root_first[s], root_first[parent], sizeof(uint32_t) * d);
			int add = 1 + (int)rnd(2);
			for (int k = 0; k < add; k++)
				root_first[s][d++] = 1 + rnd(100000);
			depth[s] = (uint8_t)d;
		} else {
			depth[s] = 24;
			for (int d = 0; d < 24; d++)
				root_first[s][d] = 1 + rnd(100000);
		}
		for (int d = 0; d < depth[s]; d++)
			leaf_first[d] = root_first[s][depth[s] - 1 - d];
		int64_t st = gs_profile_add_stack(p, leaf_first, depth[s]);
		cr_assert_geq(st, 0);
		stacks[s] = (uint32_t)st;
	}
	gs_str comm = gs_profile_intern(p, "python3");
	gs_str role = gs_profile_intern(p, "main");
	for (int i = 0; i < 1000000; i++) {
		uint32_t si, tid;
		if (tree) {
			double u = rnd(1 << 30) / (double)(1 << 30);
			si = (uint32_t)(50000 * u * u * u); /* skewed popularity */
			tid = (si * 7 + rnd(2)) % 64;
		} else {
			si = rnd(50000);
			tid = rnd(64);
		}
		struct gs_sample s = { .stack = stacks[si], .time_ns = (uint64_t)i * 1000 };
		struct gs_sample_ctx s_c = { .pid = 100,
					     .tid = 100 + tid,
					     .thread_name = comm,
					     .process_role = role,
					     .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = 1;
		s.values[GS_V_CPU_NS] = 10101010;
		cr_assert_eq(gs_profile_add_sample(p, &s, &s_c), 0);
	}
}

/* 1M samples written and read back whole.  The CPU times are printed, not
 * asserted: a timed unit test fails on a loaded machine or under ASan (it
 * did), and the write cost is bench/outputs.sh's to measure. */
static void scale_run(bool tree)
{
	struct gs_profile p;
	big_profile(&p, tree);
	const char *what = tree ? "call-tree" : "worst-case random";
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/big.pb.gz", tmpdir);
	uint8_t *b;
	size_t n;
	double t0 = cpu_s();
	cr_assert_eq(gs_pprof_encode(&p, &b, &n), 0);
	double t1 = cpu_s();
	free(b);
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	double t2 = cpu_s();
	struct stat st;
	stat(path, &st);
	fprintf(stderr,
		"pprof 1M samples (%s): encode %.3f s, encode+gzip+write %.3f s CPU, "
		"%zu bytes raw, %lld gzipped\n",
		what, t1 - t0, t2 - t1, n, (long long)st.st_size);
	struct gs_profile r;
	double t3 = cpu_s();
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), 0, "%s", err);
	fprintf(stderr, "pprof 1M samples (%s): read back %.3f s, %zu aggregated samples\n", what,
		cpu_s() - t3, r.n_samples);
	cr_assert_eq(total(&r, GS_V_SAMPLES), 1000000);
	cr_assert_eq(total(&r, GS_V_CPU_NS), 1000000LL * 10101010);
	gs_profile_free(&r);
	gs_profile_free(&p);
}

Test(pprof, one_million_samples_call_tree, .timeout = 120)
{
	scale_run(true);
}

Test(pprof, one_million_samples_worst_case, .timeout = 120)
{
	scale_run(false);
}

/* A gzip bomb (320 MiB of zeros in ~300 KiB) is refused at the cap, quickly and
 * without the memory. */
Test(pprof, gzip_bomb_is_capped, .timeout = 60)
{
	char path[128], err[512] = "";
	snprintf(path, sizeof(path), "%s/bomb.pb.gz", tmpdir);
	gzFile g = gzopen(path, "wb1");
	cr_assert_not_null(g);
	static char zeros[1 << 16];
	for (int i = 0; i < (320 << 20) / (int)sizeof(zeros); i++)
		cr_assert_eq(gzwrite(g, zeros, sizeof(zeros)), (int)sizeof(zeros));
	gzclose(g);
	struct stat st;
	stat(path, &st);
	cr_assert_lt(st.st_size, 2 << 20, "a bomb: %lld bytes", (long long)st.st_size);
	struct gs_profile p;
	gs_profile_init(&p);
	cr_assert_eq(gs_read_pprof(path, &p, err, sizeof(err)), -EFBIG);
	cr_assert_not_null(strstr(err, "256 MiB"), "%s", err);
	gs_profile_free(&p);
}

/* Values that could overflow a sum in any reader (report, merge) are refused. */
Test(pprof, huge_values_refused)
{
	char path[128], err[512] = "";
	snprintf(path, sizeof(path), "%s/huge.pb.gz", tmpdir);
	struct gs_profile p, r;
	gs_profile_init(&p);
	uint32_t loc = gs_profile_add_location(&p, 0, 0x1000, GS_FRAME_NATIVE, NULL, 0);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	cr_assert_geq(st, 0);
	for (int i = 0; i < 2; i++) {
		struct gs_sample s = { .stack = (uint32_t)st };
		struct gs_sample_ctx s_c = { .pid = 1 + i, .tid = 1, .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = 1;
		s.values[GS_V_CPU_NS] = INT64_MAX / 2 + 1;
		cr_assert_eq(gs_profile_add_sample(&p, &s, &s_c), 0);
	}
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), -EOVERFLOW);
	cr_assert_not_null(strstr(err, "2^61"), "%s", err);
	gs_profile_free(&r);
	gs_profile_free(&p);
}

/* Sample counts times a hostile period would overflow in the report. */
Test(pprof, huge_period_refused)
{
	char path[128], err[512] = "";
	snprintf(path, sizeof(path), "%s/period.pb.gz", tmpdir);
	struct gs_profile p, r;
	gs_profile_init(&p);
	p.period_ns = (int64_t)1 << 50;
	uint32_t loc = gs_profile_add_location(&p, 0, 0x1000, GS_FRAME_NATIVE, NULL, 0);
	int64_t st = gs_profile_add_stack(&p, &loc, 1);
	struct gs_sample s = { .stack = (uint32_t)st };
	struct gs_sample_ctx s_c = { .pid = 1, .tid = 1, .cuda_device = -1 };
	s.values[GS_V_SAMPLES] = 5025125;
	cr_assert_eq(gs_profile_add_sample(&p, &s, &s_c), 0);
	cr_assert_eq(gs_write_pprof(&p, path, err, sizeof(err)), 0, "%s", err);
	gs_profile_init(&r);
	cr_assert_eq(gs_read_pprof(path, &r, err, sizeof(err)), -EOVERFLOW, "%s", err);
	gs_profile_free(&r);
	gs_profile_free(&p);
}
