/* SPDX-License-Identifier: MIT */
/* gs_py_debug_offsets (python/python.c) on the _Py_DebugOffsets that
 * real interpreters publish: fixtures tests/unit/python_debug/VERSION.txt
 * are the first 96 words of _PyRuntime in Debian sid's python3.14 and
 * python3.15 (read from their ELF files).  The reader goes through
 * process_vm_readv, here on this process's own copy of the words.  Also:
 * a newer minor version is taken with a note; a wrong cookie or version, a
 * free-threaded build and an offset beyond its struct are refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "python/python_int.h"
#include "tests/unit/fixture_words.h"

static uint64_t words[96];

static void load(const char *version)
{
	char path[128];

	snprintf(path, sizeof(path), "tests/unit/python_debug/%s.txt", version);
	fixture_words(path, words, 96);
}

static int read_as(uint32_t version_hex, struct py_table *t, char *note, char *msg)
{
	return gs_py_debug_offsets((uint32_t)getpid(), (uint64_t)(uintptr_t)words, version_hex, t,
				   note, 256, msg, 256);
}

/* A real interpreter's words: read without a note, and the frame fields
 * where pycore_interpframe_structs.h puts them (f_executable 0, previous
 * 8, instr_ptr 56, owner 74), strings and bytes as before. */
static void check_debian(const char *version, uint32_t version_hex)
{
	struct py_table t;
	char note[256], msg[256];

	load(version);
	cr_assert_eq(read_as(version_hex, &t, note, msg), 0, "%s: %s", version, msg);
	cr_assert_str_empty(note);
	cr_assert_eq(t.ts_frame, 72);
	cr_assert(t.fr_code == 0 && t.fr_back == 8 && t.fr_lasti == 56 && t.fr_entry == 74);
	cr_assert(t.ascii_size == 40 && t.compact_size == 56 && t.bytes_sval == 32);
	cr_assert(t.co_firstlineno >= 16 && t.co_argcount >= 16 && t.code_size > t.co_table);
}

Test(python_debug, debian_314)
{
	check_debian("3.14.10", 0x030e0af0);
}

Test(python_debug, debian_315)
{
	check_debian("3.15.2", 0x030f02f0);
}

Test(python_debug, newer_minor_is_tried_with_a_note)
{
	struct py_table t;
	char note[256], msg[256];

	load("3.15.2");
	words[1] = 0x031000a0; /* 3.16.0a0 */
	cr_assert_eq(read_as(0x031000a0, &t, note, msg), 0, "%s", msg);
	cr_assert(strstr(note, "3.16 is newer"), "note: %s", note);
	cr_assert_eq(t.fr_entry, 74);
}

Test(python_debug, refused)
{
	struct py_table t;
	char note[256], msg[256];

	load("3.14.10");
	memcpy(words, "xdebugpz", 8);
	cr_assert_eq(read_as(0x030e0af0, &t, note, msg), -EPROTO);
	load("3.14.10");
	cr_assert_eq(read_as(0x030d0af0, &t, note, msg), -EPROTO, "3.13 binary, 3.14 offsets");
	words[2] = 1; /* free_threaded */
	cr_assert_eq(read_as(0x030e0af0, &t, note, msg), -ENOTSUP);
	cr_assert(strstr(msg, "free-threaded build (3.14t)"), "%s", msg);
	load("3.14.10");
	words[40] = words[39]; /* code_object.filename at code_object.size */
	cr_assert_eq(read_as(0x030e0af0, &t, note, msg), -EPROTO);
	cr_assert(strstr(msg, "code_object.filename"), "%s", msg);
	load("3.14.10");
	words[32] = 4096; /* interpreter_frame.previous beyond the frame */
	cr_assert_eq(read_as(0x030e0af0, &t, note, msg), -EPROTO);
}
