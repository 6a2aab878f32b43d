// SPDX-License-Identifier: MIT
/*
 * The trace's waker flows (output/trace.c waker_flow): a blocked stretch
 * whose waker thread is known gets one "s" event on the waker's track and
 * one "f" ("bp":"e") on the wakee's, with the same id, at the wakeup; a
 * wait without waker_tid (a timer) gets none; under an event cap an "f" is
 * never written without its "s".
 */
#include <criterion/criterion.h>

#include "output/output.h"
#include "output_fixture.h"

FX_TMPDIR_SUITE(traceflows, "trace-flows");

/* pid 7: tid 7 blocked 40 ms from 10 ms (woken by tid 8), then blocked
 * 20 ms (woken by a timer); tid 8 running throughout. */
static void build(struct gs_profile *p)
{
	gs_profile_init(p);
	p->period_ns = FX_PERIOD;
	p->duration_nanos = 100000000;
	struct gs_function f = { .name = gs_profile_intern(p, "work") };
	struct gs_line l = { .function = gs_profile_add_function(p, &f) };
	uint32_t loc = gs_profile_add_location(p, 0, 1, GS_FRAME_NATIVE, &l, 1);
	int64_t st = gs_profile_add_stack(p, &loc, 1);
	for (int i = 0; i < 10; i++) {
		struct gs_sample s = { .stack = (uint32_t)st,
				       .time_ns = 5000000 + i * 10000000ull };
		struct gs_sample_ctx c = { .pid = 7, .tid = 8, .cuda_device = -1 };
		s.values[GS_V_SAMPLES] = 1;
		s.values[GS_V_CPU_NS] = FX_PERIOD;
		cr_assert_eq(gs_profile_add_sample(p, &s, &c), 0);
	}
	for (int i = 0; i < 2; i++) {
		struct gs_sample s = { .stack = (uint32_t)st, .time_ns = i ? 50000000 : 10000000 };
		struct gs_sample_ctx c = { .pid = 7, .tid = 7, .cuda_device = -1 };
		c.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(p, "blocked");
		c.str_labels[GS_SL_WAKER_ROLE] = gs_profile_intern(p, i ? "timer" : "other");
		if (!i) {
			c.num_labels[GS_NL_WAKER_TID] = 8;
			c.num_set = 1u << GS_NL_WAKER_TID;
		}
		s.values[GS_V_OFFCPU_NS] = i ? 20000000 : 40000000;
		cr_assert_eq(gs_profile_add_sample(p, &s, &c), 0);
	}
}

static char *write_capped(struct gs_profile *p, size_t cap)
{
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/t.trace.json", tmpdir);
	cr_assert_eq(gs_write_trace_capped(p, path, cap, err, sizeof(err)), 0, "%s", err);
	char *s = fx_read_file(path, NULL);
	cr_assert_not_null(s);
	return s;
}

static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *q = s; (q = strstr(q, needle)); q++)
		n++;
	return n;
}

Test(traceflows, waker_to_wakee)
{
	struct gs_profile p;
	build(&p);
	char *s = write_capped(&p, 1000000);
	cr_assert_eq(count(s, "\"cat\":\"waker\""), 2, "%s", s);
	cr_assert_not_null(strstr(s, "{\"ph\":\"s\",\"pid\":7,\"tid\":8,\"name\":\"woken by\","
				     "\"cat\":\"waker\",\"id\":1,\"ts\":49999.875}"),
			   "%s", s);
	cr_assert_not_null(strstr(s, "{\"ph\":\"f\",\"pid\":7,\"tid\":7,\"name\":\"woken by\","
				     "\"cat\":\"waker\",\"bp\":\"e\",\"id\":1,\"ts\":50000.000}"),
			   "%s", s);
	free(s);
	gs_profile_free(&p);
}

Test(traceflows, no_finish_without_start_under_the_cap)
{
	struct gs_profile p;
	build(&p);
	for (size_t cap = 1; cap < 40; cap++) {
		char *s = write_capped(&p, cap);
		cr_assert_eq(count(s, "\"ph\":\"s\""), count(s, "\"ph\":\"f\""), "cap %zu: %s", cap,
			     s);
		free(s);
	}
	gs_profile_free(&p);
}
