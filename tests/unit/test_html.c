// SPDX-License-Identifier: MIT
/*
 * The HTML report (output/html.c): escaping of target strings for HTML and
 * for JSON inside <script>, the page's structure (one file, nothing
 * fetched, the report's text before any script, verdict first, the GPU
 * lines table), its data (totals per view) and the node cap.  The page
 * as a browser runs it: tests/viewers/test_html.c.
 */
#include <criterion/criterion.h>
#include <sys/mman.h>

#include "output/internal.h"
#include "output/output.h"
#include "output_fixture.h"

FX_TMPDIR_SUITE(html, "html");

#define HOSTILE "</script><img src=x onerror=alert(1)>"

/* gs_html_json_str(s) as a string (through a memfd). */
static char *json_of(const char *s)
{
	struct gs_wbuf *w = malloc(sizeof(*w));
	int fd = memfd_create("json", 0);
	char *out = calloc(1, 4096);

	cr_assert(w && fd >= 0 && out);
	gs_wbuf_init(w, fd);
	gs_html_json_str(w, s);
	cr_assert_eq(gs_wbuf_flush(w), 0);
	cr_assert_geq(pread(fd, out, 4095, 0), 0);
	close(fd);
	free(w);
	return out;
}

Test(html, json_in_script_escapes)
{
	char *o = json_of(HOSTILE);

	cr_assert_str_eq(o, "\"\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e\"");
	free(o);
	o = json_of("a&b \"q\" \\ \n\x01 \xe2\x80\xa8\xe2\x80\xa9 \xff \xc3\xa9");
	cr_assert_str_eq(o, "\"a\\u0026b \\\"q\\\" \\\\ \\u000a\\u0001 \\u2028\\u2029 \\ufffd "
			    "\xc3\xa9\"");
	free(o);
	o = json_of(NULL);
	cr_assert_str_eq(o, "\"\"");
	free(o);
}

static char *write_page(const struct gs_profile *p, size_t max_nodes, const char *name)
{
	char path[128], err[256];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	cr_assert_eq(gs_write_html_capped(p, path, max_nodes, GS_HTML_MAX_ROWS, err, sizeof(err)),
		     0, "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_not_null(s);
	return s;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *c = strstr(s, what); c; c = strstr(c + 1, what))
		n++;
	return n;
}

static ptrdiff_t at(const char *s, const char *what)
{
	const char *c = strstr(s, what);

	cr_assert_not_null(c, "no '%s' in the page", what);
	return c - s;
}

Test(html, structure)
{
	struct fx x;

	fx_build(&x);
	char *s = write_page(&x.p, GS_HTML_MAX_NODES, "fx.html");
	cr_assert_eq(strncmp(s, "<!DOCTYPE html>", 15), 0);
	cr_assert_not_null(strstr(s, "Content-Security-Policy\" content=\"default-src 'none'"));
	/* one file: nothing fetched */
	cr_assert_null(strstr(s, "<link"));
	cr_assert_null(strstr(s, "src=\""));
	cr_assert_null(strstr(s, "http://"));
	cr_assert_null(strstr(s, "https://"));
	cr_assert_null(strstr(s, "@import"));
	cr_assert_null(strstr(s, "url("));
	cr_assert_eq(count(s, "<script"), 2); /* the data and the code */
	/* only the page's own script runs: its nonce, no 'unsafe-inline' script */
	const char *n = strstr(s, "script-src 'nonce-");
	cr_assert_not_null(n);
	char tag[80];
	snprintf(tag, sizeof(tag), "<script nonce=\"%.32s\">", n + 18);
	cr_assert_not_null(strstr(s, tag), "no %s", tag);
	cr_assert_null(strstr(s, "script-src 'unsafe-inline'"));
	cr_assert_eq(count(s, "</script>"), 2);
	/* the report's text is HTML, before any script; the verdict first */
	ptrdiff_t wall = at(s, "<h2>Where the time goes</h2>");
	cr_assert_lt(at(s, "gpusample report"), wall);
	cr_assert_lt(wall, at(s, "<h2>Top functions by self CPU</h2>"));
	cr_assert_lt(at(s, "<h2>Threads</h2>"), at(s, "<script"));
	cr_assert_not_null(strstr(s, "train_step (train.py:20)"));
	cr_assert_not_null(strstr(s, "<h2>Notes</h2><pre>  - python: 1 frame could not be read"));
	/* GPU lines with their stall mix, hottest first */
	ptrdiff_t l42 = at(s, "<td>/home/u/tile.cuh:42</td><td>long_scoreboard 100%</td>");
	ptrdiff_t l43 = at(s, "<td>/home/u/matmul.cu:43</td><td>selected 80%, long_scoreboard 20%");
	cr_assert_lt(l42, l43);
	cr_assert_not_null(strstr(s, "<tr><td>120</td><td>70.6%</td><td>matmul_kernel</td>"));
	/* data: 15 samples of 10 ms, wall = cpu (no off-CPU), 170 GPU samples */
	cr_assert_not_null(strstr(s, "\"total\":[150000,150000,170]"), "%s", strstr(s, "\"total"));
	cr_assert_not_null(strstr(s, "\"cut\":{\"nodes\":0,"));
	cr_assert_not_null(
	    strstr(s, "[\"train_step (/home/u/train.py:20)\",0,\"/home/u/train.py\",20]"));
	cr_assert_not_null(strstr(s, "<section class=\"verdict\"><h2>Verdict: "));
	cr_assert_not_null(strstr(s, "[\"do_syscall_64 [kernel]\",2,"));
	cr_assert_not_null(strstr(s, "[\"at::native::addmm_out_cpu\",1,"));
	cr_assert_not_null(strstr(s, "[\"[stall] long_scoreboard\",3,"));
	cr_assert_not_null(strstr(s, "[1201,1201,\"pt_data_worker\",\"dataloader\","
				     "\"pt_data_worker\"]"));
	cr_assert_not_null(strstr(s, "[0,-1,\"GPU 0\",\"gpu\",\"GPU\"]"));
	/* the script is the build's copy of output/html_report.js */
	char path[256];
	snprintf(path, sizeof(path), "%s/output/html_report.js", fx_root());
	char *js = fx_read_file(path, NULL);
	cr_assert_not_null(js);
	cr_assert_not_null(strstr(s, js));
	free(js);
	free(s);
	gs_profile_free(&x.p);
}

Test(html, hostile_names_are_text)
{
	struct fx x;

	fx_build(&x);
	struct gs_profile *p = &x.p;
	uint32_t f = fx_fn(p, HOSTILE "\xe2\x80\xa8", NULL, "/tmp/" HOSTILE ".py", 3);
	uint32_t l = fx_loc(p, x.m_py, 0, GS_FRAME_PYTHON, f, 4);
	fx_samples(p, &l, 1, 50, 1300, 1301, HOSTILE, HOSTILE, 0, 1000);
	struct gs_process pr = { .pid = 1300, .comm = gs_profile_intern(p, HOSTILE) };
	gs_profile_add_process(p, &pr);

	char *s = write_page(p, GS_HTML_MAX_NODES, "hostile.html");
	cr_assert_null(strstr(s, "<img"), "markup from a name: %s", strstr(s, "<img"));
	cr_assert_eq(count(s, "</script>"), 2);
	cr_assert_eq(count(s, "<script"), 2);
	cr_assert_null(strstr(s, "\xe2\x80\xa8"), "a raw U+2028 ends a JS string in old engines");
	/* as text in the report (threads table), as \u escapes in the data */
	cr_assert_not_null(strstr(s, "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
	cr_assert_not_null(strstr(s, "[1300,1301,\"\\u003c/script\\u003e\\u003cimg src=x "
				     "onerror=alert(1)\\u003e\""));
	cr_assert_not_null(strstr(s, "\\u2028 (/tmp/\\u003c/script\\u003e"));
	free(s);
	gs_profile_free(p);
}

/* Many small stacks under a cap: the tree keeps at most max_nodes nodes,
 * every view's total stays whole, and the page says what was cut. */
Test(html, cap_cuts_small_frames)
{
	struct fx x;
	char name[32];

	fx_build(&x);
	struct gs_profile *p = &x.p;
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "leaf_%d", i);
		uint32_t l = fx_loc(p, x.m_pyrt, 0x500000 + (uint64_t)i * 16, GS_FRAME_NATIVE,
				    fx_fn(p, name, NULL, NULL, 0), 0);
		fx_samples(p, &l, 1, 1, 1200, 1200, "python3", "main", 0, 1);
	}
	char *s = write_page(p, 40, "cap.html");
	/* 15 + 500 samples of 10 ms */
	cr_assert_not_null(strstr(s, "\"total\":[5150000,5150000,170]"), "%s",
			   strstr(s, "\"total"));
	const char *c = strstr(s, "\"cut\":{\"nodes\":");
	cr_assert_not_null(c);
	long cut = atol(c + 15);
	cr_assert_gt(cut, 500 - 40, "cut %ld", cut);
	const char *nodes = strstr(s, "\"nodes\":[");
	cr_assert_not_null(nodes);
	size_t commas = 0;
	for (const char *e = nodes + 9; *e != ']'; e++)
		commas += *e == ',';
	cr_assert_leq((commas + 1) / 2 + 1, 40, "%zu nodes drawn", (commas + 1) / 2 + 1);
	cr_assert_null(strstr(s, "leaf_499"));
	free(s);
	/* no cap reached: every frame is there */
	s = write_page(p, GS_HTML_MAX_NODES, "nocap.html");
	cr_assert_not_null(strstr(s, "\"cut\":{\"nodes\":0,"));
	cr_assert_not_null(strstr(s, "leaf_499"));
	free(s);
	gs_profile_free(p);
}

/* Many threads: rows are (node, thread) self values; past max_rows the
 * small leaves fold into their caller, one row per thread left. */
Test(html, cap_limits_rows)
{
	struct fx x;
	char name[32];

	fx_build(&x);
	struct gs_profile *p = &x.p;
	uint32_t top = fx_loc(p, x.m_pyrt, 0x600000, GS_FRAME_NATIVE,
			      fx_fn(p, "thread_top", NULL, NULL, 0), 0);
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "leaf_%d", i);
		uint32_t st[2] = { top, fx_loc(p, x.m_pyrt, 0x700000 + (uint64_t)i * 16,
					       GS_FRAME_NATIVE, fx_fn(p, name, NULL, NULL, 0), 0) };
		fx_samples(p, st, 2, 1, 5000, 5000 + (uint32_t)i / 5, "w", "other", 0, 1);
	}
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/rows.html", tmpdir);
	cr_assert_eq(gs_write_html_capped(p, path, GS_HTML_MAX_NODES, 150, err, sizeof(err)), 0,
		     "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_not_null(s);
	const char *rows = strstr(s, "\"rows\":[");
	cr_assert_not_null(rows);
	size_t commas = 0;
	for (const char *e = rows + 8; *e != ']'; e++)
		commas += *e == ',';
	cr_assert_leq((commas + 1) / 5, 150, "%zu rows", (commas + 1) / 5);
	cr_assert_null(strstr(s, "\"cut\":{\"nodes\":0,"));
	cr_assert_not_null(strstr(s, "\"total\":[5150000,5150000,170]"), "%s",
			   strstr(s, "\"total"));
	free(s);
	gs_profile_free(p);
}
