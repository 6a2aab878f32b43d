// SPDX-License-Identifier: MIT
#include "util/escape.h"

#include <stdio.h>
#include <string.h>

int gs_utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		if (s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80)
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		if (s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* Code points that change what a terminal shows without being visible
 * themselves: C1 controls (U+0080-U+009F, CSI among them) and the bidi
 * embeddings/overrides/isolates (U+202A-U+202E, U+2066-U+2069). */
static bool invisible_control(const unsigned char *s, int n)
{
	if (n == 2)
		return s[0] == 0xc2 && s[1] <= 0x9f;
	if (n == 3 && s[0] == 0xe2)
		return (s[1] == 0x80 && s[2] >= 0xaa && s[2] <= 0xae) ||
		       (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9);
	return false;
}

/* Bytes of s that gs_term_escape copies verbatim (0 = escape s[0]). */
static int term_plain_len(const unsigned char *s)
{
	int n;

	if (*s >= 0x20 && *s < 0x7f)
		return 1;
	if (*s < 0x80 || !(n = gs_utf8_len(s)) || invisible_control(s, n))
		return 0;
	return n;
}

bool gs_term_needs_escape(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int n;

	for (; *s; s += n)
		if (!(n = term_plain_len(s)))
			return true;
	return false;
}

size_t gs_term_escape(const char *str, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;

	if (!outlen)
		return 0;
	while (*s) {
		int n = term_plain_len(s);
		char tmp[12];
		size_t k;

		if (n) {
			memcpy(tmp, s, (size_t)n);
			k = (size_t)n;
		} else if (*s >= 0xc2 && gs_utf8_len(s) > 1) { /* C1 or bidi control */
			unsigned cp = *s == 0xc2 ? s[1]
						 : ((s[0] & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) |
						       (s[2] & 0x3fu);
			n = gs_utf8_len(s);
			k = (size_t)snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
		} else {
			n = 1;
			k = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", *s);
		}
		if (o + k + 1 > outlen)
			break; /* whole pieces only: never half an escape or a sequence */
		memcpy(out + o, tmp, k);
		o += k;
		s += n;
	}
	out[o] = 0;
	return o;
}
