// SPDX-License-Identifier: MIT
/*
 * The HTML report (output/html.c) as Chromium runs it, network off
 * (tests/tools/html_check.js over the DevTools protocol): the report's
 * verdict first, the flame graph drawn, search, zoom, tooltips, the views
 * (wall, CPU, GPU samples) and the thread filter working, no request leaving the page, and a thread, process and function
 * named like markup shown as text.  A real profile of the demo loop:
 * tests/integration/t_html.sh.
 */
#include <criterion/criterion.h>

#include "output/output.h"
#include "viewer_fixture.h"

FX_TMPDIR_SUITE(html, "htmlv");

#define HOSTILE "</script><img src=x onerror=alert(1)>"

/* Run the checker on path with args; its output (it passed: exit 0). */
static char *html_check(const char *path, const char *args)
{
	char cmd[1024];
	int st;

	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	snprintf(cmd, sizeof(cmd), "node %s/tests/tools/html_check.js %s %s 2>&1", fx_root(), path,
		 args);
	char *out = fx_run(cmd, &st);
	cr_assert_neq(st, 77, "Chromium is missing (make test-deps): %s", out);
	cr_assert_eq(st, 0, "%s", out);
	return out;
}

Test(html, fixture_search_zoom_filter)
{
	struct fx x;
	char path[128], err[256];

	fx_build(&x);
	fx_add_offcpu(&x);
	snprintf(path, sizeof(path), "%s/fx.html", tmpdir);
	cr_assert_eq(gs_write_html(&x.p, path, err, sizeof(err)), 0, "%s", err);
	char *out = html_check(path, "--frame train_step --thread pt_data_worker");
	cr_assert_not_null(strstr(out, "ok: a click zooms the frame to the full width"), "%s", out);
	cr_assert_not_null(strstr(out, "ok: no request leaves the page"), "%s", out);
	cr_assert_not_null(strstr(out, "ok: the GPU samples view draws [GPU] kernel frames"), "%s",
			   out);
	cr_assert_not_null(strstr(out, "ok: a tooltip gives total, self and file:line"), "%s", out);
	free(out);
	gs_profile_free(&x.p);
}

Test(html, hostile_names_render_as_text)
{
	struct fx x;
	char path[128], err[256];

	fx_build(&x);
	struct gs_profile *p = &x.p;
	uint32_t f = fx_fn(p, HOSTILE, NULL, "/tmp/" HOSTILE ".py", 3);
	uint32_t l = fx_loc(p, x.m_py, 0, GS_FRAME_PYTHON, f, 4);
	fx_samples(p, &l, 1, 50, 1300, 1301, HOSTILE, HOSTILE, 0, 1000);
	struct gs_process pr = { .pid = 1300, .comm = gs_profile_intern(p, HOSTILE) };
	gs_profile_add_process(p, &pr);
	snprintf(path, sizeof(path), "%s/hostile.html", tmpdir);
	cr_assert_eq(gs_write_html(p, path, err, sizeof(err)), 0, "%s", err);
	char *out = html_check(path,
			       "--frame onerror --hostile '" HOSTILE "' --thread '" HOSTILE "'");
	cr_assert_not_null(strstr(out, "ok: the hostile name is shown as text"), "%s", out);
	free(out);
	gs_profile_free(p);
}

/* The page's script as a file of its own parses (node --check). */
Test(html, script_parses)
{
	char cmd[512];
	int st;

	cr_assert(fx_have("node"), "node is needed (apt-get install nodejs)");
	snprintf(cmd, sizeof(cmd), "node --check %s/output/html_report.js 2>&1", fx_root());
	char *out = fx_run(cmd, &st);
	cr_assert_eq(st, 0, "%s", out);
	free(out);
}
