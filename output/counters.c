/* SPDX-License-Identifier: MIT */
/*
 * The run's counters (gpusample/counters.h) in and out of a profile: one
 * comment "counters: name=N ..." with every counter, read back (summed
 * over merged profiles) by the report for its "dropped:" line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusample/counters.h"
#include "output/output.h"

static const char *const names[GS_NCOUNTERS] = {
#define GS_X_NAME(name, kind, what) [GS_C_##name] = #name,
	GS_COUNTERS(GS_X_NAME)
#undef GS_X_NAME
};

static const uint8_t kinds[GS_NCOUNTERS] = {
#define GS_X_KIND(name, kind, what) [GS_C_##name] = kind,
	GS_COUNTERS(GS_X_KIND)
#undef GS_X_KIND
};

const char *gs_counter_name(enum gs_counter c)
{
	return c < GS_NCOUNTERS ? names[c] : NULL;
}

bool gs_counter_is_loss(enum gs_counter c)
{
	return c < GS_NCOUNTERS && kinds[c] == GS_CK_LOST;
}

int gs_profile_add_counters(struct gs_profile *p, const uint64_t v[GS_NCOUNTERS])
{
	/* every counter, 20 digits and its name at most: well under 4 KiB */
	char line[4096];
	size_t len = (size_t)snprintf(line, sizeof(line), "%s", GS_COUNTERS_COMMENT);

	for (int c = 0; c < GS_NCOUNTERS && len < sizeof(line); c++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=%" PRIu64, names[c],
					v[c]);
	if (len >= sizeof(line))
		return -ENAMETOOLONG;
	return gs_profile_add_comment(p, "%s", line);
}

/* Add the "name=N" words of one counters comment to v. */
static void parse_counters(const char *s, uint64_t v[GS_NCOUNTERS])
{
	while (*s) {
		const char *eq = strchr(s, '='), *end;
		if (!eq)
			return;
		uint64_t n = strtoull(eq + 1, (char **)&end, 10);
		for (int c = 0; c < GS_NCOUNTERS; c++)
			if (strlen(names[c]) == (size_t)(eq - s) &&
			    !memcmp(names[c], s, (size_t)(eq - s)))
				v[c] += n;
		s = end + strspn(end, " ");
	}
}

int gs_profile_counters(const struct gs_profile *p, uint64_t v[GS_NCOUNTERS])
{
	size_t plen = strlen(GS_COUNTERS_COMMENT);
	int found = 0;

	memset(v, 0, GS_NCOUNTERS * sizeof(*v));
	for (uint32_t i = 0; i < p->n_comments; i++) {
		const char *s = gs_profile_str(p, p->comments[i]);
		if (s && !strncmp(s, GS_COUNTERS_COMMENT, plen)) {
			parse_counters(s + plen + strspn(s + plen, " "), v);
			found++;
		}
	}
	return found;
}
