/* SPDX-License-Identifier: MIT */
/* gpu/gpu_host.c record handling: per-process GPU state, warp-sample
 * counting against each context's own stall table (kept once, by gpu/cuda.c,
 * and asked with gs_cuda_stall_kind), summary line; the agent found in the
 * process table's maps snapshot. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "gpu/gpu.h"
#include "gpusample/profile.h"
#include "gpusample/stall.h"
#include "proc/proc.h"

static void hdr(struct gs_rec_hdr *h, uint16_t type, uint32_t size)
{
	h->type = type;
	h->version = GS_RECORDS_VERSION;
	h->size = size;
	h->ktime_ns = 1000;
}

/* Table: index base_idx a base reason, base_idx + 1 its _not_issued twin,
 * 0 a counter; to the host and to the store of stall tables, as the
 * session routes it. */
static void send_table(struct gs_gpu_host *h, struct gs_cuda *c, uint32_t tgid, uint32_t ctx,
		       uint32_t base_idx)
{
	size_t sz = sizeof(struct gs_gpu_stall_table) + 3 * sizeof(struct gs_gpu_stall_reason);
	struct gs_gpu_stall_table *t = calloc(1, sz);
	struct gs_gpu_stall_reason *r = (void *)(t + 1);

	hdr(&t->hdr, GS_REC_GPU_STALL_TABLE, sz);
	t->gpu.tgid = tgid;
	t->gpu.ctx_uid = ctx;
	t->n_reasons = 3;
	r[0].index = base_idx + 1;
	r[0].flags = GS_GPU_STALL_NOT_ISSUED;
	strcpy(r[0].name, "smsp__pcsamp_warps_issue_stalled_wait_not_issued");
	r[1].index = base_idx;
	strcpy(r[1].name, "smsp__pcsamp_warps_issue_stalled_wait");
	r[2].index = 0;
	r[2].flags = GS_GPU_STALL_COUNTER;
	strcpy(r[2].name, "smsp__pcsamp_sample_count");
	gs_gpu_host_on_record(h, &t->hdr);
	cr_assert_eq(gs_cuda_stall_table_record(c, t, sz), 0);
	free(t);
}

/* One PC with counts (idx, n) pairs. */
static void send_batch(struct gs_gpu_host *h, uint32_t tgid, uint32_t ctx, const uint32_t *idx,
		       const uint32_t *n, int k)
{
	size_t sz = sizeof(struct gs_gpu_pc_batch) + sizeof(struct gs_gpu_pc) +
		    k * sizeof(struct gs_gpu_stall_count) + 8;
	struct gs_gpu_pc_batch *b = calloc(1, sz);
	struct gs_gpu_pc *pc = (void *)(b + 1);
	struct gs_gpu_stall_count *c = (void *)(pc + 1);

	hdr(&b->hdr, GS_REC_GPU_PC_BATCH, sz);
	b->gpu.tgid = tgid;
	b->gpu.ctx_uid = ctx;
	b->n_pcs = 1;
	b->n_counts = k;
	b->names_len = 8;
	pc->n_counts = k;
	for (int i = 0; i < k; i++) {
		c[i].reason_index = idx[i];
		c[i].samples = n[i];
	}
	gs_gpu_host_on_record(h, &b->hdr);
	free(b);
}

static void send_status(struct gs_gpu_host *h, uint32_t tgid, uint32_t state, uint32_t reason)
{
	struct gs_gpu_status s;

	memset(&s, 0, sizeof(s));
	hdr(&s.hdr, GS_REC_GPU_STATUS, sizeof(s));
	s.gpu.tgid = tgid;
	s.state = state;
	s.reason = reason;
	strcpy(s.message, "test");
	gs_gpu_host_on_record(h, &s.hdr);
}

static int grab(void *ctx, const struct gs_gpu_proc_info *p)
{
	*(struct gs_gpu_proc_info *)ctx = *p;
	return 1;
}

Test(gpu_host, counts_base_reasons_per_context)
{
	struct gs_profile prof;
	gs_profile_init(&prof);
	struct gs_cuda *c = gs_cuda_new(&prof);
	struct gs_gpu_host_opts o = { .cuda = c };
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, &o);
	struct gs_gpu_proc_info pi;
	/* ctx 1: base 7; ctx 2: base 20 (index 7 is nothing there) */
	uint32_t idx1[] = { 7, 8, 0 }, n1[] = { 5, 3, 5 };
	uint32_t idx2[] = { 20, 7 }, n2[] = { 4, 100 };
	char sum[128];

	cr_assert(c && h);
	send_table(h, c, 42, 1, 7);
	send_table(h, c, 42, 2, 20);
	send_status(h, 42, GS_GPU_ST_ARMED, 0);
	send_batch(h, 42, 1, idx1, n1, 3);
	send_batch(h, 42, 2, idx2, n2, 2);
	cr_assert_eq(gs_gpu_host_foreach(h, grab, &pi), 1);
	cr_assert_eq(pi.tgid, 42);
	cr_assert_eq(pi.state, GS_GPU_PROC_ARMED);
	cr_assert_eq(pi.batches, 2);
	cr_assert_eq(pi.samples, 5 + 4, "not_issued, counters and foreign indices excluded: %lu",
		     (unsigned long)pi.samples);
	gs_gpu_host_summary(h, sum, sizeof(sum));
	cr_assert(strstr(sum, "1 armed") && strstr(sum, "9 samples"), "%s", sum);
	gs_gpu_host_free(h);
	gs_cuda_free(c);
	gs_profile_free(&prof);
}

/* The one store of stall tables classifies a reason index of (tgid,
 * context) by that context's last table only. */
Test(gpu_host, stall_kind_query)
{
	struct gs_profile prof;
	gs_profile_init(&prof);
	struct gs_cuda *c = gs_cuda_new(&prof);
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, NULL);

	cr_assert(c && h);
	send_table(h, c, 42, 1, 7);
	send_table(h, c, 42, 2, 20);
	send_table(h, c, 43, 2, 30);
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 1, 7), GS_STALL_BASE);
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 1, 8), GS_STALL_NOT_ISSUED);
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 1, 0), GS_STALL_COUNTER);
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 2, 7), -ENOENT, "another context's index");
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 2, 20), GS_STALL_BASE);
	cr_expect_eq(gs_cuda_stall_kind(c, 43, 2, 20), -ENOENT, "another process's table");
	cr_expect_eq(gs_cuda_stall_kind(c, 43, 2, 31), GS_STALL_NOT_ISSUED);
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 3, 7), -ENOENT, "no table");
	cr_expect_eq(gs_cuda_stall_kind(c, 44, 1, 7), -ENOENT, "no process");
	send_table(h, c, 42, 1, 9); /* a second table replaces the first */
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 1, 7), -ENOENT);
	cr_expect_eq(gs_cuda_stall_kind(c, 42, 1, 9), GS_STALL_BASE);
	gs_gpu_host_free(h);
	gs_cuda_free(c);
	gs_profile_free(&prof);
}

Test(gpu_host, off_reason_in_summary)
{
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, NULL);
	char sum[128];

	gs_gpu_host_summary(h, sum, sizeof(sum));
	cr_assert_str_eq(sum, "GPU: no agent");
	send_status(h, 7, GS_GPU_ST_OFF, GS_GPU_R_PRIVILEGES);
	gs_gpu_host_summary(h, sum, sizeof(sum));
	cr_assert_str_eq(sum, "GPU: off (insufficient privileges)");
	gs_gpu_host_free(h);
}

Test(gpu_host, ignores_other_and_short_records)
{
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, NULL);
	struct gs_rec_hdr r;
	char sum[128];

	hdr(&r, GS_REC_CPU_SAMPLE, sizeof(r));
	gs_gpu_host_on_record(h, &r);
	hdr(&r, GS_REC_GPU_STATUS, sizeof(r)); /* shorter than any GPU record */
	gs_gpu_host_on_record(h, &r);
	gs_gpu_host_summary(h, sum, sizeof(sum));
	cr_assert_str_eq(sum, "GPU: no agent");
	gs_gpu_host_free(h);
}

static void send_cubin(struct gs_gpu_host *h, uint64_t crc, const void *bytes, uint64_t size)
{
	struct gs_gpu_cubin c;

	memset(&c, 0, sizeof(c));
	hdr(&c.hdr, GS_REC_GPU_CUBIN, sizeof(c));
	c.gpu.tgid = (uint32_t)getpid(); /* read back from this process */
	c.crc = crc;
	c.addr = (uint64_t)(uintptr_t)bytes;
	c.size = size;
	gs_gpu_host_on_record(h, &c.hdr);
}

/* A cubin flood (sizes are the target's word) stays under both caps, with
 * every cubin not kept counted; kept ones read back byte for byte. */
Test(gpu_host, cubin_flood_capped)
{
	struct gs_gpu_host_opts o = { .cubin_max_bytes = 4096, .cubin_total_bytes = 64 << 10 };
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, &o);
	static unsigned char img[8192];
	struct gs_gpu_cubin_losses l;
	size_t size;

	for (size_t i = 0; i < sizeof(img); i++)
		img[i] = (unsigned char)(i * 7);
	for (uint64_t crc = 1; crc <= 1000; crc++)
		send_cubin(h, crc, img, 1000);
	send_cubin(h, 5000, img, sizeof(img)); /* over the per-cubin cap */
	send_cubin(h, 5001, img, 1ull << 40);  /* a lie: never allocated */
	send_cubin(h, 1, img, 1000);           /* a duplicate: neither kept nor lost */
	gs_gpu_host_cubin_losses(h, &l);
	cr_expect_leq(l.kept_bytes, 64 << 10);
	cr_expect_eq(l.kept_bytes, 65 * 1000, "%llu", (unsigned long long)l.kept_bytes);
	cr_expect_eq(l.cubins, 1000 - 65 + 2, "%llu", (unsigned long long)l.cubins);
	cr_expect_eq(l.over_cap, l.cubins);
	const unsigned char *b = gs_gpu_host_cubin(h, 65, &size);
	cr_assert_not_null(b);
	cr_expect_eq(size, 1000);
	cr_expect_eq(memcmp(b, img, 1000), 0);
	cr_expect_null(gs_gpu_host_cubin(h, 66, &size));
	cr_expect_null(gs_gpu_host_cubin(h, 5000, &size));
	gs_gpu_host_free(h);
}

/* An alias record adds a key to a cubin already read: the same bytes, not
 * read again nor counted twice; an alias of a cubin never stored, or a key
 * already taken, changes nothing. */
Test(gpu_host, cubin_alias_one_copy)
{
	struct gs_gpu_host_opts o = { .cubin_max_bytes = 4096, .cubin_total_bytes = 64 << 10 };
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, &o);
	static unsigned char img[1000], other[1000];
	struct gs_gpu_cubin c;
	struct gs_gpu_cubin_losses l;
	size_t size = 0;

	memset(img, 0x5a, sizeof(img));
	memset(other, 0xa5, sizeof(other));
	send_cubin(h, 7, img, sizeof(img));
	send_cubin(h, 9, other, sizeof(other));
	memset(&c, 0, sizeof(c));
	hdr(&c.hdr, GS_REC_GPU_CUBIN, sizeof(c));
	c.gpu.tgid = (uint32_t)getpid();
	c.addr = (uint64_t)(uintptr_t)img;
	c.size = sizeof(img);
	c.crc = 8;
	c.alias_of = 7;
	gs_gpu_host_on_record(h, &c.hdr);
	c.crc = 9; /* taken: keeps its own cubin */
	gs_gpu_host_on_record(h, &c.hdr);
	c.crc = 10;
	c.alias_of = 11; /* never stored */
	gs_gpu_host_on_record(h, &c.hdr);
	cr_assert_eq(gs_gpu_host_cubin(h, 8, &size), gs_gpu_host_cubin(h, 7, NULL));
	cr_expect_eq(size, sizeof(img));
	cr_expect_eq(memcmp(gs_gpu_host_cubin(h, 9, NULL), other, sizeof(other)), 0);
	cr_expect_null(gs_gpu_host_cubin(h, 10, NULL));
	gs_gpu_host_cubin_losses(h, &l);
	cr_expect_eq(l.kept_bytes, 2 * sizeof(img), "%llu", (unsigned long long)l.kept_bytes);
	cr_expect_eq(l.cubins, 0);
	gs_gpu_host_free(h);
}

/* Records that end inside their fixed part or lie about their counts are
 * ignored without reading past them; a status message without a NUL is
 * cut at its field. */
Test(gpu_host, short_and_lying_records)
{
	struct gs_profile prof;
	gs_profile_init(&prof);
	struct gs_cuda *c = gs_cuda_new(&prof);
	struct gs_gpu_host_opts o = { .cuda = c };
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, &o);
	struct gs_gpu_proc_info pi;
	size_t tsz = sizeof(struct gs_gpu_stall_table);
	struct gs_gpu_stall_table *t = calloc(1, tsz);
	struct gs_gpu_status *s = malloc(sizeof(*s));

	/* header + common only: n_reasons would be past the end */
	struct {
		struct gs_rec_hdr h;
		struct gs_gpu_common c;
	} *small = calloc(1, sizeof(*small));
	hdr(&small->h, GS_REC_GPU_STALL_TABLE, sizeof(*small));
	small->c.tgid = 3;
	gs_gpu_host_on_record(h, &small->h);
	hdr(&t->hdr, GS_REC_GPU_STALL_TABLE, tsz);
	t->gpu.tgid = 3;
	t->n_reasons = 0xffffffffu;
	gs_gpu_host_on_record(h, &t->hdr);
	cr_expect_eq(gs_cuda_stall_table_record(c, t, tsz), -EINVAL);
	cr_expect_eq(gs_cuda_stall_kind(c, 3, 0, 0), -ENOENT);
	memset(s, 'A', sizeof(*s));
	hdr(&s->hdr, GS_REC_GPU_STATUS, sizeof(*s));
	s->gpu.tgid = 3;
	s->gpu.ctx_uid = 0;
	s->state = GS_GPU_ST_ARMED;
	gs_gpu_host_on_record(h, &s->hdr);
	cr_assert_eq(gs_gpu_host_foreach(h, grab, &pi), 1);
	cr_expect_eq(strlen(pi.message), sizeof(s->message) < sizeof(pi.message)
					     ? sizeof(s->message)
					     : sizeof(pi.message) - 1);
	free(small);
	free(t);
	free(s);
	gs_gpu_host_free(h);
	gs_cuda_free(c);
	gs_profile_free(&prof);
}

/* The agent built next to this test (build/libgpusample_agent.so), opened
 * read-only: mapped, never run. */
static int open_agent(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(n, 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(path, sizeof(path), "%s/../libgpusample_agent.so", exe);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s (make builds it)", path, strerror(errno));
	return fd;
}

static int maps_changes;

static void count_changes(void *ctx, struct gs_proc *p, const struct gs_proc_maps_change *ch)
{
	maps_changes++;
}

/* Whether p's snapshot has a mapping of the agent at addr. */
static bool snapshot_maps_agent(const struct gs_proc *p, const void *addr)
{
	const struct gs_maps_line *l = gs_proc_maps_find(p->maps, (uintptr_t)addr);

	return l && l->path && strstr(l->path, "libgpusample_agent.so");
}

/* The host looks for the agent in the process table's snapshot, which it
 * asks proc/ to re-read only when the executable ranges changed: mapping
 * the agent's code is told to every handler, and nothing is announced
 * while the code stays. */
Test(gpu_host, agent_in_table_snapshot)
{
	const struct gs_proc_handler watch = { .name = "watch", .maps_changed = count_changes };
	const struct gs_proc_handler gpu = { .name = "gpu" };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, NULL);
	uint32_t me = (uint32_t)getpid();
	int fd = open_agent(), id;
	struct stat st;
	struct gs_proc *p;

	cr_assert(t && h);
	cr_assert_geq(gs_proc_register(t, &watch), 0);
	cr_assert_geq(id = gs_proc_register(t, &gpu), 0);
	cr_assert_eq(gs_gpu_host_bind(h, t, id), 0);
	cr_assert_eq(gs_gpu_host_agent_mapped(h, me), 0);
	cr_assert_not_null(p = gs_proc_get(t, me), "the host asked the table");
	cr_assert_not_null(p->maps, "and read the maps through it");
	maps_changes = 0;
	cr_assert_eq(gs_gpu_host_agent_mapped(h, me), 0);
	cr_expect_eq(maps_changes, 0, "nothing new mapped: nothing announced");

	cr_assert_eq(fstat(fd, &st), 0);
	void *a = mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	cr_assert_neq(a, MAP_FAILED);
	cr_assert_eq(gs_gpu_host_agent_mapped(h, me), 1);
	cr_expect_geq(maps_changes, 1, "the re-read reached every handler");
	cr_expect(snapshot_maps_agent(p, a), "the table's snapshot is the one searched");
	munmap(a, st.st_size);
	cr_assert_eq(gs_gpu_host_agent_mapped(h, me), 0);
	cr_expect(!snapshot_maps_agent(p, a));
	gs_gpu_host_free(h);
	gs_proc_table_free(t);
	close(fd);
}

/* Alone (its own table), the host finds the agent the same way; a process
 * that is gone is an error, not "no agent". */
Test(gpu_host, agent_own_table_and_gone)
{
	struct gs_gpu_host *h = gs_gpu_host_new(NULL, NULL, NULL);
	int fd = open_agent();
	struct stat st;
	pid_t child = fork();

	cr_assert_geq(child, 0);
	if (!child)
		_exit(0);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(gs_gpu_host_agent_mapped(h, (uint32_t)child), -ESRCH);
	cr_assert_eq(gs_gpu_host_agent_mapped(h, (uint32_t)getpid()), 0);
	cr_assert_eq(fstat(fd, &st), 0);
	void *a = mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	cr_assert_neq(a, MAP_FAILED);
	cr_expect_eq(gs_gpu_host_agent_mapped(h, (uint32_t)getpid()), 1);
	munmap(a, st.st_size);
	gs_gpu_host_free(h);
	close(fd);
}
