/* SPDX-License-Identifier: MIT */
/* CPython line tables: the three formats, decoded as CPython's own
 * PyCode_Addr2Line does (Objects/codeobject.c of each version;
 * Objects/locations.md for 3.11+).  Offsets are bytes into the code. */
#include <stdint.h>
#include "python/python.h"

#define GS_LASTI_NONE 0xffffffffu

/* line + delta as CPython computes it (-fwrapv): a hostile table may push
 * the line past INT_MAX; that must wrap, not be undefined behaviour. */
static int line_add(int line, int32_t delta)
{
	return (int)((uint32_t)line + (uint32_t)delta);
}

/* <= 3.9 co_lnotab: (byte delta, signed line delta) pairs. */
int gs_py_line_lnotab(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti)
{
	int line = firstlineno;
	uint64_t addr = 0;

	if (lasti == GS_LASTI_NONE)
		return firstlineno;
	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > lasti)
			break;
		line = line_add(line, (int8_t)t[i + 1]);
	}
	return line;
}

/* 3.10 co_linetable (PEP 626): (byte delta, signed line delta) pairs; a
 * line delta of -128 means "no line" for that range.  Zero-length ranges
 * still carry their line delta.  The whole table is walked (a port that
 * stops at len/2 pairs, or forgets that 3.10 f_lasti counts code units,
 * gives wrong lines: reference §10 E4). */
int gs_py_line_310(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti)
{
	int line = firstlineno, ar_line = -1;
	uint64_t start, end = 0;

	if (lasti == GS_LASTI_NONE)
		return firstlineno;
	for (size_t i = 0; i + 1 < len; i += 2) {
		int8_t ldelta = (int8_t)t[i + 1];

		start = end;
		end += t[i];
		if (ldelta == -128) {
			ar_line = -1;
		} else {
			line = line_add(line, ldelta);
			ar_line = line;
		}
		if (start != end && lasti >= start && lasti < end)
			return ar_line;
	}
	return -1;
}

static int read_varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;

	for (;;) {
		if (*i >= len || shift > 28)
			return -1;
		uint8_t b = t[(*i)++];

		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64))
			break;
	}
	*out = v;
	return 0;
}

static int read_svarint(const uint8_t *t, size_t len, size_t *i, int32_t *out)
{
	uint32_t v;

	if (read_varint(t, len, i, &v))
		return -1;
	*out = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return 0;
}

/* 3.11+ location table: entries start with a byte 1cccclll (code c, length
 * l+1 code units); 15 = no location, 14 = long form (svarint line delta,
 * varint end-line delta, varint columns), 13 = no columns (svarint line
 * delta), 10..12 = one-line form (line delta c-10, two column bytes),
 * 0..9 = short form (same line, one column byte). */
int gs_py_line_311(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti)
{
	int line = firstlineno;
	uint64_t end = 0, addr;
	size_t i = 0;

	if (lasti == GS_LASTI_NONE)
		return firstlineno;
	addr = lasti / 2; /* code units */
	while (i < len) {
		uint8_t b = t[i++];
		unsigned code = (b >> 3) & 15, n = (b & 7) + 1;
		int ar_line;
		int32_t d;
		uint32_t u;

		if (!(b & 0x80))
			return -1; /* lost sync: not an entry start */
		switch (code) {
		case 15:
			ar_line = -1;
			break;
		case 14:
			if (read_svarint(t, len, &i, &d) || read_varint(t, len, &i, &u) ||
			    read_varint(t, len, &i, &u) || read_varint(t, len, &i, &u))
				return -1;
			line = line_add(line, d);
			ar_line = line;
			break;
		case 13:
			if (read_svarint(t, len, &i, &d))
				return -1;
			line = line_add(line, d);
			ar_line = line;
			break;
		case 10:
		case 11:
		case 12:
			line = line_add(line, (int32_t)code - 10);
			ar_line = line;
			i += 2;
			break;
		default:
			ar_line = line;
			i += 1;
			break;
		}
		uint64_t start = end;

		end += n;
		if (addr >= start && addr < end)
			return ar_line;
	}
	return -1;
}

int gs_py_addr2line(uint32_t version_hex, const uint8_t *t, size_t len, int firstlineno,
		    uint32_t lasti)
{
	if (version_hex >= 0x030b0000)
		return gs_py_line_311(t, len, firstlineno, lasti);
	if (version_hex >= 0x030a0000)
		return gs_py_line_310(t, len, firstlineno, lasti);
	return gs_py_line_lnotab(t, len, firstlineno, lasti);
}
