/* SPDX-License-Identifier: MIT */
/* The PEP 768 request (inject/pyexec.c) on a fake interpreter in this
 * process: its _PyRuntime starts with the _Py_DebugOffsets words of Debian
 * sid's python3.14 and python3.15 (fixtures tests/unit/inject/VERSION.txt,
 * the first 112 words of their live _PyRuntime; words past the struct are
 * the runtime's own state, unused), and an interpreter and main thread state
 * are laid out where those offsets say.  Reads and writes go through
 * process_vm_readv/writev on this process, as on a target.  Checked: the
 * fields located, the request written (path, pending flag, only the
 * eval-breaker byte), taken and withdrawn; refusals: disabled, pending,
 * versions outside 3.14-3.15, a bad cookie, offsets out of bounds, a path
 * too long, and an image replaced (exec) before a withdraw. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "inject/inject.h"
#include "tests/unit/fixture_words.h"

#define WORDS 112

static uint64_t *runtime; /* 1 MiB: the runtime struct of both versions fits */
static uint8_t *interp;   /* 256 KiB */
static uint8_t *tstate;   /* 1 KiB */
static uint32_t dbg;      /* word index of debugger_support */
static char msg[320];

static void load(const char *version, uint32_t debugger_support)
{
	char path[128];

	runtime = calloc(1, 1 << 20);
	interp = calloc(1, 256 << 10);
	tstate = calloc(1, 1024);
	cr_assert(runtime && interp && tstate);
	snprintf(path, sizeof(path), "tests/unit/inject/%s.txt", version);
	fixture_words(path, runtime, WORDS);
	dbg = debugger_support;
	/* runtime->interpreters.head, interp->threads.main, config.remote_debug */
	memcpy((uint8_t *)runtime + runtime[5], &(uint64_t){ (uintptr_t)interp }, 8);
	memcpy(interp + runtime[10], &(uint64_t){ (uintptr_t)tstate }, 8);
	memcpy(interp + runtime[dbg + 2], &(int32_t){ 1 }, 4);
}

static int locate(uint32_t version_hex, struct gs_pyexec_target *t)
{
	return gs_pyexec_locate((uint32_t)getpid(), (uintptr_t)runtime, version_hex, t, msg,
				sizeof(msg));
}

static int32_t pending_flag(void)
{
	int32_t v;

	memcpy(&v, tstate + runtime[dbg + 1] + runtime[dbg + 3], 4);
	return v;
}

static void request_cycle(const char *version, uint32_t hex, uint32_t dbg_word)
{
	struct gs_pyexec_target t;
	const char *script = "/tmp/.gpusample-inject-0000abcd/gpusample_inject.py";
	uint32_t pid = (uint32_t)getpid();
	uint64_t breaker = 0x1234500 | 0x01; /* version bits and the GIL drop bit */

	load(version, dbg_word);
	cr_assert_eq(runtime[dbg + 5], 512, "debugger_script_path_size");
	cr_assert_eq(locate(hex, &t), 0, "%s: %s", version, msg);
	cr_assert_eq(t.tstate, (uintptr_t)tstate);
	cr_assert_eq(t.path_size, 512);
	cr_assert_eq(t.breaker, (uintptr_t)tstate + runtime[dbg]);
	memcpy(tstate + runtime[dbg], &breaker, 8);
	cr_assert_eq(gs_pyexec_request(pid, &t, script, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_str_eq((char *)tstate + runtime[dbg + 1] + runtime[dbg + 4], script);
	cr_assert_eq(pending_flag(), 1);
	memcpy(&breaker, tstate + runtime[dbg], 8);
	cr_assert_eq(breaker, 0x1234500 | 0x01 | 0x20, "eval_breaker %#llx",
		     (unsigned long long)breaker);
	cr_assert_eq(gs_pyexec_pending(pid, &t), 1);
	/* a second request while this one is pending is refused */
	cr_assert_eq(locate(hex, &(struct gs_pyexec_target){ 0 }), -EBUSY, "%s", msg);
	/* withdrawn, then the interpreter finds nothing to run */
	cr_assert_eq(gs_pyexec_withdraw(pid, &t), 1);
	cr_assert_eq(pending_flag(), 0);
	cr_assert_eq(gs_pyexec_pending(pid, &t), 0);
	cr_assert_eq(gs_pyexec_withdraw(pid, &t), 0, "nothing left to withdraw");
}

Test(inject, debian_314)
{
	request_cycle("3.14.10", 0x030e0af0, 89);
}

Test(inject, debian_315)
{
	request_cycle("3.15.2", 0x030f02f0, 105);
}

Test(inject, refusals)
{
	struct gs_pyexec_target t;

	load("3.14.10", 89);
	memcpy(interp + runtime[dbg + 2], &(int32_t){ 0 }, 4);
	cr_assert_eq(locate(0x030e0af0, &t), -EPERM, "%s", msg);
	cr_assert(strstr(msg, "disabled remote debugging"), "%s", msg);
	memcpy(interp + runtime[dbg + 2], &(int32_t){ 1 }, 4);
	cr_assert_eq(locate(0x030d0af0, &t), -ENOTSUP, "3.13: %s", msg);
	cr_assert_eq(locate(0x031000a0, &t), -ENOTSUP, "3.16: %s", msg);
	cr_assert(strstr(msg, "newer than the layouts known"), "%s", msg);
	cr_assert_eq(locate(0x030f02f0, &t), -EPROTO, "3.14 words read as 3.15: %s", msg);
	runtime[2] = 1;
	cr_assert_eq(locate(0x030e0af0, &t), -ENOTSUP, "free-threaded: %s", msg);
	runtime[2] = 0;
	memcpy(runtime, "xdebugpz", 8);
	cr_assert_eq(locate(0x030e0af0, &t), -EPROTO, "cookie: %s", msg);
	memcpy(runtime, "xdebugpy", 8);
}

Test(inject, offsets_out_of_bounds)
{
	struct gs_pyexec_target t;
	const uint32_t hex = 0x030e0af0;
	struct {
		uint32_t word;
		uint64_t value;
	} bad[] = {
		{ 89 + 5, 1 << 20 },    /* path buffer of 1 MiB */
		{ 89 + 5, 8 },          /* or of 8 bytes */
		{ 89 + 1, 830 },        /* support struct past the thread state */
		{ 89 + 4, 400 },        /* path past the thread state */
		{ 89 + 0, 1ull << 40 }, /* eval_breaker far away */
		{ 89 + 2, 1ull << 30 }, /* enabled flag past the interpreter */
		{ 22, 1ull << 30 },     /* a thread state of 1 GiB */
		{ 10, 300000 },         /* threads_main past the interpreter */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load("3.14.10", 89);
		runtime[bad[i].word] = bad[i].value;
		cr_assert_eq(locate(hex, &t), -EPROTO, "word %u = %llu: %s", bad[i].word,
			     (unsigned long long)bad[i].value, msg);
	}
}

Test(inject, long_path_and_exec)
{
	struct gs_pyexec_target t;
	char path[600];
	uint32_t pid = (uint32_t)getpid();
	uint8_t *other = calloc(1, 1024);

	load("3.15.2", 105);
	cr_assert_eq(locate(0x030f02f0, &t), 0, "%s", msg);
	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[512] = '\0';
	cr_assert_eq(gs_pyexec_request(pid, &t, path, msg, sizeof(msg)), -ENAMETOOLONG);
	cr_assert_eq(pending_flag(), 0, "nothing written for a path too long");
	cr_assert_eq(gs_pyexec_request(pid, &t, "/tmp/x.py", msg, sizeof(msg)), 0, "%s", msg);
	/* an exec: another main thread state in its place, nothing written */
	memcpy(interp + runtime[10], &(uint64_t){ (uintptr_t)other }, 8);
	cr_assert_eq(gs_pyexec_pending(pid, &t), -ESTALE);
	cr_assert_eq(gs_pyexec_withdraw(pid, &t), -ESTALE);
	cr_assert_eq(pending_flag(), 1, "withdraw wrote into a replaced image");
	free(other);
}
