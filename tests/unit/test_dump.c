/* gpusample dump's text (dump/text.c) over a profile built by hand: the
 * cross-rank summary names the rank outside the collective, identical
 * threads fold with their count and tids, target strings are escaped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <unistd.h>

#include "dump/dump.h"
#include "dump/dump_int.h"
#include "output_fixture.h"
#include "keep_profile.h"

/* One thread's sample, stack given leaf first. */
static void thread(struct gs_profile *p, uint32_t pid, uint32_t tid, int64_t rank, const char *name,
		   const char *role, const uint32_t *locs, uint32_t n)
{
	struct gs_sample_ctx x = { .pid = pid, .tid = tid, .cuda_device = -1 };
	struct gs_sample s = { .values = { [GS_V_SAMPLES] = 1 } };

	x.thread_name = gs_profile_intern(p, name);
	x.process_role = gs_profile_intern(p, role);
	x.str_labels[GS_SL_THREAD_STATE] = gs_profile_intern(p, "blocked");
	if (rank >= 0) {
		x.num_labels[GS_NL_RANK] = rank;
		x.num_set = 1u << GS_NL_RANK;
	}
	s.stack = (uint32_t)gs_profile_add_stack(p, locs, n);
	cr_assert_eq(gs_profile_add_sample(p, &s, &x), 0);
}

Test(dump, text_summary_and_folding)
{
	struct gs_profile p;
	struct gs_dump_stats st = { .processes = 2, .threads = 5, .elapsed_ns = 123000000 };
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	gs_profile_init(&p);
	snprintf(st.source, sizeof(st.source), "BPF task iterator");
	uint32_t sched = fx_loc(&p, 0, 0x10, GS_FRAME_KERNEL, fx_fn(&p, "__schedule", 0, 0, 0), 0);
	uint32_t futex = fx_loc(&p, 0, 0x20, GS_FRAME_KERNEL,
				fx_fn(&p, "futex_wait_queue", 0, 0, 0), 0);
	uint32_t sleep = fx_loc(&p, 0, 0x30, GS_FRAME_KERNEL,
				fx_fn(&p, "hrtimer_nanosleep", 0, 0, 0), 0);
	uint32_t ar = fx_loc(
	    &p, 0, 0, GS_FRAME_PYTHON,
	    fx_fn(&p, "all_reduce", 0,
		  "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 1500),
	    1541);
	uint32_t m0 = fx_loc(&p, 0, 0, GS_FRAME_PYTHON, fx_fn(&p, "main", 0, "/t/train.py", 30),
			     36);
	uint32_t m1 = fx_loc(&p, 0, 0, GS_FRAME_PYTHON, fx_fn(&p, "main", 0, "/t/train.py", 30),
			     35);
	uint32_t w = fx_loc(&p, 0, 0, GS_FRAME_PYTHON, fx_fn(&p, "wait\x1b[2J", 0, "/t/w.py", 1),
			    2);
	const uint32_t r0[] = { sched, futex, ar, m0 }, r1[] = { sched, sleep, m1 },
		       waiter[] = { sched, futex, w };

	thread(&p, 100, 100, 0, "python3", "main", r0, 4);
	thread(&p, 100, 101, 0, "worker", "main", waiter, 3);
	thread(&p, 100, 102, 0, "worker", "main", waiter, 3);
	thread(&p, 200, 200, 1, "python3", "main", r1, 3);
	thread(&p, 200, 201, 1, "worker", "main", waiter, 3);
	out = open_memstream(&text, &len);
	cr_assert(out);
	cr_assert_eq(gs_dump_print(&p, &st, out), 0);
	fclose(out);
	static const char *const want[] = {
		"5 threads in 0.123 s (registers from the BPF task iterator)",
		"ranks: 2 main threads, 1 in a collective, 1 not",
		"rank 0: in collective all_reduce "
		"(/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1541)",
		"rank 1: NOT in a collective, in main (/t/train.py:35)",
		"=> not in the collective the others wait in: rank 1\n",
		/* rank 0's two waiters fold, rank 1's one does not; the wait is futex's */
		"  2 threads \"worker\" other, blocked in futex_wait_queue\n    tids 101 102\n",
		"  thread 201 \"worker\" other, blocked in futex_wait_queue\n",
		/* the escape sequence of a target's function name is escaped */
		"wait\\x1b[2J (/t/w.py:2)",
		/* one line per thread group above the stacks: the waiters' kind is
		 * the futex's (a lock), rank 0's main thread's the collective's,
		 * with the innermost frame of the job's own code */
		"threads at a glance",
		"  100     100         python3          other              blocked   collective    "
		"main (/t/train.py:36)\n",
		"  100     101 +1      worker           other              blocked   lock          "
		"wait\\x1b[2J (/t/w.py:2)\n",
		"  200     200         python3          other              blocked   sleep         "
		"main (/t/train.py:35)\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr(text, want[i]), "no \"%s\" in:\n%s", want[i], text);
	cr_expect(!strchr(text, '\x1b'), "raw escape in the text");
	/* processes by rank: 100 (rank 0) before 200 */
	cr_expect(strstr(text, "threads at a glance") < strstr(text, "process 100"));
	cr_expect(strstr(text, "process 100") &&
		  strstr(text, "process 100") < strstr(text, "process 200"));
	free(text);
	gs_test_keep_profile(&p);
	gs_profile_free(&p);
}

/* A frame-pointer step (code without a table: anonymous executable memory)
 * whose return address is not in executable memory (a guess through a
 * function that keeps no frame pointer lands on the stack) ends the walk:
 * no "[stack]" frame; one that is code is the next frame. */
Test(dump, guessed_return_address_must_be_code)
{
	struct gs_elf_cache *elf = gs_elf_cache_new();
	struct gs_dump_unwinder *u = gs_dump_unwinder_new(elf);
	uint8_t *jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile uint64_t frame[4] = { 0 }; /* [saved RBP, return address] */
	struct gs_proc_maps *maps;
	__u64 ips[8], at = (uint64_t)(uintptr_t)&frame[0];
	uint16_t err;
	uint32_t n;

	cr_assert(elf && u && jit != MAP_FAILED);
	cr_assert_eq(gs_proc_maps_read((uint32_t)getpid(), &maps), 0);
	frame[1] = (uint64_t)(uintptr_t)&frame[2];
	n = gs_dump_unwind(u, (uint32_t)getpid(), maps, (uint64_t)(uintptr_t)jit + 16, at, at, true,
			   ips, 8, &err);
	cr_assert_eq(n, 1, "a return address on the stack became frame %u", n);
	cr_assert_eq(err, GS_UNWIND_NO_TABLE);
	frame[1] = (uint64_t)(uintptr_t)jit + 33;
	n = gs_dump_unwind(u, (uint32_t)getpid(), maps, (uint64_t)(uintptr_t)jit + 16, at, at, true,
			   ips, 8, &err);
	cr_assert_eq(n, 2);
	cr_assert_eq(ips[1], (uint64_t)(uintptr_t)jit + 33);
	gs_proc_maps_put(maps);
	munmap(jit, 4096);
	gs_dump_unwinder_free(u);
	gs_elf_cache_put(elf);
}
