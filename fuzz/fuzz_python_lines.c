// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: CPython line tables (python/python_lines.c) as a
 * hostile interpreter can shape them in its code objects.  Input: one byte
 * choosing the format (lnotab <= 3.9, 3.10 linetable, 3.11+ locations),
 * 4 bytes firstlineno, 4 bytes f_lasti, then the table.
 */
#include <stdint.h>
#include <string.h>

#include "python/python.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t versions[] = { 0x03080000, 0x030a0000, 0x030b0000, 0x030d0000 };
	int32_t first;
	uint32_t lasti;

	if (size < 9)
		return 0;
	memcpy(&first, data + 1, 4);
	memcpy(&lasti, data + 5, 4);
	gs_py_addr2line(versions[data[0] & 3], data + 9, size - 9, first, lasti);
	/* every offset of a short table, as the symbolizer asks for many */
	for (uint32_t l = 0; l < 64 && size - 9 < 512; l += 2)
		gs_py_addr2line(versions[data[0] & 3], data + 9, size - 9, first, l);
	return 0;
}
