/* SPDX-License-Identifier: MIT */
/* Loader of the task iterator (bpf/taskregs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpusample/records.h"
#include "bpf/sampler.h"
#include "bpf/taskregs.h"
#include "taskregs.skel.h"

_Static_assert(sizeof(((struct gs_task_regs *)0)->kips) == GS_MAX_KERNEL_FRAMES * 8,
	       "kips holds the kernel stack's bound");

/* Load with the program the kernel can take: bpf_task_pt_regs where the
 * helper exists (a libbpf probe, never a version check), else the read at
 * the top of the kernel stack. */
static char stats_log[4096];

static int load(struct taskregs_bpf **out, struct bpf_program **prog, char *err, size_t errlen)
{
	struct gs_bpf_features f;
	struct taskregs_bpf *k;
	bool pt_regs;
	int rc;

	gs_bpf_quiet_libbpf();
	k = taskregs_bpf__open();
	if (!k) {
		rc = -errno;
		snprintf(err, errlen, "cannot open the task iterator: %s", strerror(-rc));
		return rc;
	}
	/* libbpf cannot probe tracing programs (they need an attach point):
	 * the helper's probe as a perf_event program, which gets it from the
	 * same table (bpf_tracing_func_proto) */
	gs_bpf_features_probe(&f);
	pt_regs = f.task_pt_regs &&
		  !(getenv("GS_BPF_COMPAT") && !strcmp(getenv("GS_BPF_COMPAT"), "1"));
	*prog = pt_regs ? k->progs.gs_task_regs : k->progs.gs_task_regs_compat;
	bpf_program__set_autoload(pt_regs ? k->progs.gs_task_regs_compat : k->progs.gs_task_regs,
				  false);
	k->rodata->gs_thread_size = gs_bpf_thread_size();
	stats_log[0] = 0;
	bpf_program__set_log_level(*prog, 4 /* BPF_LOG_STATS */);
	bpf_program__set_log_buf(*prog, stats_log, sizeof(stats_log));
	rc = taskregs_bpf__load(k);
	if (rc) {
		snprintf(err, errlen, "the kernel refused the task iterator (%s): %s",
			 strerror(-rc),
			 gs_bpf_last_warning()[0] ? gs_bpf_last_warning() : "no detail");
		taskregs_bpf__destroy(k);
		return rc == -EPERM || rc == -EACCES ? -EPERM : -ENOTSUP;
	}
	*out = k;
	return 0;
}

/* Read whole records out of the iterator's seq file. */
static int drain(int fd, gs_task_regs_fn fn, void *ctx, char *err, size_t errlen)
{
	static struct gs_task_regs buf[16];
	size_t have = 0;

	for (;;) {
		ssize_t n = read(fd, (char *)buf + have, sizeof(buf) - have);

		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			snprintf(err, errlen, "reading the task iterator: %s", strerror(errno));
			return -errno;
		}
		if (n == 0)
			return 0;
		have += (size_t)n;
		for (size_t i = 0; i < have / sizeof(buf[0]); i++) {
			int rc = fn(ctx, &buf[i]);

			if (rc)
				return rc;
		}
		memmove(buf, (char *)buf + have / sizeof(buf[0]) * sizeof(buf[0]),
			have % sizeof(buf[0]));
		have %= sizeof(buf[0]);
	}
}

int gs_task_regs_read(const uint32_t *tgids, size_t n, gs_task_regs_fn fn, void *ctx,
		      struct gs_task_regs_info *info, char *err, size_t errlen)
{
	struct taskregs_bpf *k = NULL;
	struct bpf_program *prog = NULL;
	struct bpf_link *link = NULL;
	int rc, fd = -1;
	__u8 one = 1;

	if (n > 4096)
		return -E2BIG;
	rc = load(&k, &prog, err, errlen);
	if (rc)
		return rc;
	if (info) {
		const char *at = strstr(stats_log, "processed ");

		snprintf(info->prog, sizeof(info->prog), "%s", bpf_program__name(prog));
		if (!at || sscanf(at, "processed %ld insns", &info->insns) != 1)
			info->insns = -1;
	}
	for (size_t i = 0; i < n; i++)
		if (bpf_map__update_elem(k->maps.dump_tgids, &tgids[i], sizeof(tgids[i]), &one,
					 sizeof(one), BPF_ANY)) {
			rc = -errno;
			snprintf(err, errlen, "task iterator map: %s", strerror(-rc));
			goto out;
		}
	link = bpf_program__attach_iter(prog, NULL);
	if (!link) {
		rc = -errno;
		snprintf(err, errlen, "cannot attach the task iterator: %s", strerror(-rc));
		rc = -ENOTSUP;
		goto out;
	}
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create the task iterator: %s", strerror(-rc));
		goto out;
	}
	rc = drain(fd, fn, ctx, err, errlen);
out:
	if (fd >= 0)
		close(fd);
	bpf_link__destroy(link);
	taskregs_bpf__destroy(k);
	return rc;
}
