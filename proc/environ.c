/* SPDX-License-Identifier: MIT */
/*
 * Ranks of a distributed job from a process's environment
 * (/proc/PID/environ).  The environment is the target's: it is read
 * without following links, in bounded chunks, and every value is a strict
 * decimal or ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/proc.h"

enum rank_field { RF_RANK, RF_LOCAL, RF_WORLD, RF_NODE };

static const struct rank_var {
	const char *key;
	uint8_t field, src;
} rank_vars[] = {
	{ "RANK", RF_RANK, GS_RANK_TORCH },
	{ "LOCAL_RANK", RF_LOCAL, GS_RANK_TORCH },
	{ "WORLD_SIZE", RF_WORLD, GS_RANK_TORCH },
	{ "GROUP_RANK", RF_NODE, GS_RANK_TORCH },
	{ "OMPI_COMM_WORLD_RANK", RF_RANK, GS_RANK_OMPI },
	{ "OMPI_COMM_WORLD_LOCAL_RANK", RF_LOCAL, GS_RANK_OMPI },
	{ "OMPI_COMM_WORLD_SIZE", RF_WORLD, GS_RANK_OMPI },
	{ "PMI_RANK", RF_RANK, GS_RANK_PMI },
	{ "PMI_SIZE", RF_WORLD, GS_RANK_PMI },
	{ "SLURM_PROCID", RF_RANK, GS_RANK_SLURM },
	{ "SLURM_LOCALID", RF_LOCAL, GS_RANK_SLURM },
	{ "SLURM_NTASKS", RF_WORLD, GS_RANK_SLURM },
	{ "SLURM_NODEID", RF_NODE, GS_RANK_SLURM },
};

/* Strict decimal 0..INT32_MAX of exactly len bytes; -1 otherwise. */
static int64_t parse_rank_value(const char *v, size_t len)
{
	int64_t x = 0;

	if (len == 0 || len > 10)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x <= INT32_MAX ? x : -1;
}

void gs_rank_env_entry(struct gs_rank_env *r, const char *kv, size_t len)
{
	int64_t *field[] = { &r->rank, &r->local_rank, &r->world_size, &r->node_rank };
	const char *eq = memchr(kv, '=', len);

	if (!eq)
		return;
	for (size_t i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]); i++) {
		const struct rank_var *v = &rank_vars[i];
		size_t klen = strlen(v->key);
		int64_t x;

		if ((size_t)(eq - kv) != klen || memcmp(kv, v->key, klen))
			continue;
		x = parse_rank_value(eq + 1, len - klen - 1);
		/* A better source (lower enum) already set this field: keep it,
		 * whatever order the entries come in. */
		if (x < 0 || (r->src[v->field] && r->src[v->field] <= v->src))
			return;
		*field[v->field] = x;
		r->src[v->field] = v->src;
		return;
	}
}

void gs_rank_env_parse(struct gs_rank_env *r, const char *buf, size_t n)
{
	size_t i = 0;

	while (i < n) {
		const char *end = memchr(buf + i, '\0', n - i);
		size_t len = end ? (size_t)(end - (buf + i)) : n - i;

		gs_rank_env_entry(r, buf + i, len);
		i += len + 1;
	}
}

/* Bounds: environments of real jobs are tens of KiB; one that is larger
 * is read up to this much and the rest ignored. */
#define RANK_ENV_MAX   (1u << 20)
#define RANK_ENV_CHUNK 65536

int gs_proc_rank_env(uint32_t pid, struct gs_rank_env *r)
{
	char path[64], *buf;
	size_t n = 0, keep = 0;
	int fd, rc = 0;

	*r = GS_RANK_ENV_UNKNOWN;
	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(RANK_ENV_CHUNK + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* Chunked: parse complete entries, carry a partial one over (an entry
	 * longer than a chunk is no rank variable and is dropped). */
	while (n < RANK_ENV_MAX) {
		ssize_t got = read(fd, buf + keep, RANK_ENV_CHUNK - keep);
		char *last;

		if (got < 0) {
			rc = -errno;
			break;
		}
		if (got == 0) {
			gs_rank_env_parse(r, buf, keep);
			break;
		}
		n += (size_t)got;
		keep += (size_t)got;
		last = memrchr(buf, '\0', keep);
		if (!last) {
			keep = 0;
			continue;
		}
		gs_rank_env_parse(r, buf, (size_t)(last - buf));
		keep -= (size_t)(last + 1 - buf);
		memmove(buf, last + 1, keep);
	}
	free(buf);
	close(fd);
	return rc;
}

bool gs_rank_head(const struct gs_rank_env *r, const struct gs_rank_env *parent)
{
	return r->rank >= 0 && !(parent && parent->rank == r->rank && parent->src[0] == r->src[0]);
}
