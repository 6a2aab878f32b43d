// SPDX-License-Identifier: MIT
/* The note for a process whose Python stacks cannot be read says "native
 * stacks only" once, whether or not the symbolizer's reason says it. */
#include <criterion/criterion.h>
#include <string.h>

#include "session/session_int.h"
#include "gpusample/profile.h"
#include "keep_profile.h"

static const char *note(const char *why)
{
	static struct gs_profile p;
	static char buf[512];
	gs_profile_init(&p);
	cr_assert_eq(gs_rt_note_native_only(&p, 42, "python3", why), 0);
	cr_assert_eq(p.n_notes, 1);
	snprintf(buf, sizeof(buf), "%s", gs_profile_str(&p, p.notes[0]));
	gs_test_keep_profile(&p);
	gs_profile_free(&p);
	return buf;
}

Test(runtimes, native_only_said_once)
{
	cr_assert_str_eq(note("free-threaded build: not supported (native stacks only)"),
			 "pid 42 (python3): free-threaded build: not supported (native stacks "
			 "only)");
	cr_assert_str_eq(note("Python 2 is not supported (native stacks only)"),
			 "pid 42 (python3): Python 2 is not supported (native stacks only)");
	cr_assert_str_eq(note("no _PyRuntime symbol"),
			 "pid 42 (python3): no _PyRuntime symbol; native stacks only");
}
