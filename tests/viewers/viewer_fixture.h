/* SPDX-License-Identifier: MIT */
/* speedscope's importer in headless Chromium (tests/tools/speedscope_import.sh)
 * for the viewer tests: one call per file. */
#ifndef GS_TEST_VIEWER_FIXTURE_H
#define GS_TEST_VIEWER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../unit/output_fixture.h"

/* Import path in speedscope; the run must succeed and print "Importing as
 * <format>" (format: "speedscope json file", "protobuf encoded pprof file",
 * "Trace Event Format profile": the importer speedscope picked).  Exit 77
 * (Chromium or speedscope missing) is a failure: make test-deps installs them.
 * The script exits 0 only when speedscope used that importer and raised no
 * alert. */
static inline void viewer_imports(const char *path, const char *format)
{
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd), "%s/tests/tools/speedscope_import.sh %s '%s' 2>&1", fx_root(),
		 path, format);
	char *out = fx_run(cmd, &st);
	cr_assert_neq(st, 77, "a viewer is missing (make test-deps): %s", out);
	cr_assert_eq(st, 0, "speedscope in Chromium on %s: %s", path, out);
	cr_assert_not_null(strstr(out, format), "%s: not imported as %s: %s", path, format, out);
	free(out);
}

#endif
