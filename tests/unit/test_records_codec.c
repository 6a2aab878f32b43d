// SPDX-License-Identifier: MIT
/* The one record codec (include/gpusample/records_codec.h): well-formed
 * records of every type pass, and each field that could lie (sizes, frame
 * counts, nested stacks, PC/count/name tables, reason counts) is refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "gpusample/records_codec.h"

static _Alignas(8) unsigned char buf[4096];

static struct gs_rec_hdr *rec(uint16_t type, size_t size)
{
	memset(buf, 0, sizeof(buf));
	struct gs_rec_hdr *h = (void *)buf;
	*h = (struct gs_rec_hdr){ .type = type,
				  .version = GS_RECORDS_VERSION,
				  .size = (uint32_t)size };
	return h;
}

/* A CPU sample at at, taken by origin: k kernel, u user ips, p Python
 * frames; its size. */
static size_t cpu_of(void *at, uint16_t origin, int k, int u, int p)
{
	struct gs_cpu_sample *s = at;
	size_t size = sizeof(*s) + ((size_t)k + u + 2 * p) * sizeof(__u64);
	s->hdr = (struct gs_rec_hdr){ .type = GS_REC_CPU_SAMPLE,
				      .version = GS_RECORDS_VERSION,
				      .size = (uint32_t)size };
	s->origin = origin;
	s->n_kernel = (uint8_t)k;
	s->n_user = (uint8_t)u;
	s->n_python = (uint16_t)p;
	for (int i = 0; i < k + u + 2 * p; i++)
		s->frames[i] = 0x1000 + (uint64_t)i;
	return size;
}

static size_t cpu_at(void *at, int k, int u, int p)
{
	return cpu_of(at, GS_ORIGIN_TIMER, k, u, p);
}

Test(codec, header)
{
	struct gs_rec_hdr *h = rec(GS_REC_WAKEUP, sizeof(*h));
	cr_expect_eq(gs_rec_hdr_check(h, sizeof(*h)), 0);
	cr_expect_eq(gs_rec_hdr_check(h, sizeof(*h) - 1), -EINVAL, "shorter than a header");
	h->size = 64;
	cr_expect_eq(gs_rec_hdr_check(h, 32), -EINVAL, "hdr.size past what was delivered");
	h->size = 4;
	cr_expect_eq(gs_rec_hdr_check(h, 32), -EINVAL, "hdr.size below the header");
	h->size = sizeof(*h);
	h->version = GS_RECORDS_VERSION + 1;
	cr_expect_eq(gs_rec_hdr_check(h, 32), -EPROTO);
	h->version = GS_RECORDS_VERSION;
	h->type = 99;
	cr_expect_eq(gs_rec_check(h), -ENOENT);
}

Test(codec, cpu_sample_and_nested_stacks)
{
	struct gs_rec_cpu_view v;
	size_t n = cpu_at(buf, 3, 5, 2);
	struct gs_rec_hdr *h = (void *)buf;
	cr_assert_eq(gs_rec_cpu_sample(h, &v), 0);
	cr_expect_eq(v.kernel[0], 0x1000);
	cr_expect_eq(v.user[0], 0x1003);
	cr_expect_eq((const void *)v.py, (const void *)&v.s->frames[8]);
	cr_expect(v.n_kernel == 3 && v.n_user == 5 && v.n_python == 2, "the view's counts");
	h->size = (uint32_t)(n - 8);
	cr_expect_eq(gs_rec_cpu_sample(h, &v), -EINVAL, "frames past the record");
	cpu_at(buf, GS_MAX_KERNEL_FRAMES + 1, 0, 0);
	cr_expect_eq(gs_rec_cpu_sample(h, &v), -EINVAL, "more kernel frames than BPF takes");
	cpu_at(buf, 0, 0, 0);
	cr_expect_eq(gs_rec_offcpu_stack(h, &(const struct gs_offcpu_stack *){ 0 }, &v), -EBADMSG);

	/* off-CPU stack and GPU launch: the inner sample must fit the outer record */
	size_t fixed[] = { sizeof(struct gs_offcpu_stack), sizeof(struct gs_gpu_launch),
			   sizeof(struct gs_offcpu_waker) };
	uint16_t types[] = { GS_REC_OFFCPU_STACK, GS_REC_GPU_LAUNCH, GS_REC_OFFCPU_WAKER };
	uint16_t origins[] = { GS_ORIGIN_OFFCPU, GS_ORIGIN_LAUNCH, GS_ORIGIN_WAKER };
	for (int t = 0; t < 3; t++) {
		h = rec(types[t], 0);
		size_t inner = cpu_of(buf + fixed[t], origins[t], 1, 2, 1);
		h->size = (uint32_t)(fixed[t] + inner);
		cr_expect_eq(gs_rec_check(h), 0, "type %u", types[t]);
		h->size -= 8;
		cr_expect_eq(gs_rec_check(h), -EINVAL, "type %u: inner stack past the outer",
			     types[t]);
		h->size = (uint32_t)(fixed[t] + sizeof(struct gs_cpu_sample) - 1);
		cr_expect_eq(gs_rec_check(h), -EINVAL, "type %u: no room for the inner header",
			     types[t]);
	}
}

/* A record of type whose stack was taken by origin; the view's origin. */
static int stack_of(uint16_t type, size_t fixed, uint16_t origin, uint16_t *got)
{
	struct gs_rec_cpu_view v;
	struct gs_rec_hdr *h = rec(type, 0);
	int rc;

	h->size = (uint32_t)(fixed + cpu_of(buf + fixed, origin, 2, 3, 1));
	rc = gs_rec_stack(h, &v);
	if (!rc)
		*got = v.s->origin;
	return rc;
}

/* A stack says the path that took it, and only its own record's path:
 * a launch's stack is a CPU sample with origin launch, and so on. */
Test(codec, stack_origin_matches_its_record)
{
	struct {
		uint16_t type;
		size_t fixed;
		uint16_t origin;
	} rec_of[] = {
		{ GS_REC_CPU_SAMPLE, 0, GS_ORIGIN_TIMER },
		{ GS_REC_OFFCPU_STACK, sizeof(struct gs_offcpu_stack), GS_ORIGIN_OFFCPU },
		{ GS_REC_GPU_LAUNCH, sizeof(struct gs_gpu_launch), GS_ORIGIN_LAUNCH },
		{ GS_REC_OFFCPU_WAKER, sizeof(struct gs_offcpu_waker), GS_ORIGIN_WAKER },
		{ GS_REC_MEM_CALL, sizeof(struct gs_mem_call), GS_ORIGIN_MEM },
	};
	uint16_t all[] = { 0,
			   GS_ORIGIN_TIMER,
			   GS_ORIGIN_OFFCPU,
			   GS_ORIGIN_LAUNCH,
			   GS_ORIGIN_WAKER,
			   GS_ORIGIN_MEM,
			   6,
			   0xffff };

	for (size_t r = 0; r < sizeof(rec_of) / sizeof(*rec_of); r++)
		for (size_t o = 0; o < sizeof(all) / sizeof(*all); o++) {
			uint16_t got = 0;
			int rc = stack_of(rec_of[r].type, rec_of[r].fixed, all[o], &got);
			if (all[o] == rec_of[r].origin) {
				cr_expect_eq(rc, 0, "type %u, origin %u", rec_of[r].type, all[o]);
				cr_expect_eq(got, all[o]);
			} else {
				cr_expect_eq(rc, -EINVAL, "type %u with a stack of origin %u",
					     rec_of[r].type, all[o]);
			}
			cr_expect_eq(gs_rec_check((void *)buf), rc, "gs_rec_check agrees");
		}

	/* the typed decoders say the same */
	const struct gs_gpu_launch *l;
	const struct gs_offcpu_stack *os;
	struct gs_rec_cpu_view v;
	uint16_t got;
	stack_of(GS_REC_GPU_LAUNCH, sizeof(*l), GS_ORIGIN_TIMER, &got);
	cr_expect_eq(gs_rec_gpu_launch((void *)buf, &l, &v), -EINVAL, "a launch saying timer");
	stack_of(GS_REC_GPU_LAUNCH, sizeof(*l), GS_ORIGIN_LAUNCH, &got);
	cr_expect_eq(gs_rec_gpu_launch((void *)buf, &l, &v), 0);
	cr_expect_eq((const void *)l, (const void *)buf);
	cr_expect_eq((const void *)v.s, (const void *)(buf + sizeof(*l)));
	const struct gs_offcpu_waker *wk;
	stack_of(GS_REC_OFFCPU_WAKER, sizeof(*wk), GS_ORIGIN_OFFCPU, &got);
	cr_expect_eq(gs_rec_offcpu_waker((void *)buf, &wk, &v), -EINVAL, "a waker saying off-CPU");
	stack_of(GS_REC_OFFCPU_WAKER, sizeof(*wk), GS_ORIGIN_WAKER, &got);
	cr_expect_eq(gs_rec_offcpu_waker((void *)buf, &wk, &v), 0);
	cr_expect_eq((const void *)v.s, (const void *)(buf + sizeof(*wk)));
	stack_of(GS_REC_OFFCPU_STACK, sizeof(*os), GS_ORIGIN_LAUNCH, &got);
	cr_expect_eq(gs_rec_offcpu_stack((void *)buf, &os, &v), -EINVAL, "off-CPU saying launch");
	cpu_of(buf, GS_ORIGIN_OFFCPU, 1, 1, 0);
	cr_expect_eq(gs_rec_cpu_sample((void *)buf, &v), -EINVAL, "a bare sample saying off-CPU");
}

Test(codec, nested_stack_is_a_cpu_sample_record)
{
	const size_t fixed = sizeof(struct gs_gpu_launch);
	struct gs_cpu_sample *inner = (void *)(buf + fixed);
	struct gs_rec_cpu_view v;
	uint16_t got;

	cr_assert_eq(stack_of(GS_REC_GPU_LAUNCH, fixed, GS_ORIGIN_LAUNCH, &got), 0);
	inner->hdr.type = GS_REC_PROC_EVENT;
	cr_expect_eq(gs_rec_stack((void *)buf, &v), -EINVAL, "inner record of another type");
	inner->hdr.type = GS_REC_CPU_SAMPLE;
	inner->hdr.version = GS_RECORDS_VERSION + 1;
	cr_expect_eq(gs_rec_stack((void *)buf, &v), -EPROTO, "inner record of another version");
	cr_expect_eq(gs_rec_stack(rec(GS_REC_PROC_EVENT, sizeof(struct gs_proc_event)), &v),
		     -EBADMSG, "a record without a stack");
}

Test(codec, fixed_records)
{
	const void *r = NULL;
	struct gs_rec_hdr *h = rec(GS_REC_PROC_EVENT, sizeof(struct gs_proc_event));

	cr_expect_eq(gs_rec_fixed(h, GS_REC_PROC_EVENT, &r), 0);
	cr_expect_eq(r, (const void *)h);
	cr_expect_eq(gs_rec_fixed(h, GS_REC_OFFCPU_END, &r), -EBADMSG, "another type");
	h->size = sizeof(struct gs_proc_event) - 8;
	cr_expect_eq(gs_rec_fixed(h, GS_REC_PROC_EVENT, &r), -EINVAL, "shorter than the type");
	h = rec(GS_REC_GPU_PC_BATCH, sizeof(struct gs_gpu_pc_batch));
	cr_expect_eq(gs_rec_fixed(h, GS_REC_GPU_PC_BATCH, &r), -EBADMSG,
		     "a type with more than a fixed part has its own decoder");
	h = rec(GS_REC_WAKEUP, sizeof(*h));
	cr_expect_eq(gs_rec_fixed(h, GS_REC_WAKEUP, &r), 0);
}

/* One PC batch: 2 PCs, 3 counts, names "a\0bc\0". */
static struct gs_gpu_pc_batch *batch(void)
{
	const char names[] = "a\0bc";
	size_t size = sizeof(struct gs_gpu_pc_batch) + 2 * sizeof(struct gs_gpu_pc) +
		      3 * sizeof(struct gs_gpu_stall_count) + sizeof(names);
	struct gs_gpu_pc_batch *b = (void *)rec(GS_REC_GPU_PC_BATCH, (size + 7) & ~(size_t)7);
	b->n_pcs = 2;
	b->n_counts = 3;
	b->names_len = sizeof(names);
	struct gs_gpu_pc *pcs = (void *)(b + 1);
	pcs[0] = (struct gs_gpu_pc){ .name_off = 0, .first_count = 0, .n_counts = 2 };
	pcs[1] = (struct gs_gpu_pc){ .name_off = 2, .first_count = 2, .n_counts = 1 };
	memcpy((char *)(pcs + 2) + 3 * sizeof(struct gs_gpu_stall_count), names, sizeof(names));
	return b;
}

Test(codec, pc_batch)
{
	struct gs_rec_pc_batch_view v;
	struct gs_gpu_pc_batch *b = batch();
	struct gs_gpu_pc *pcs = (void *)(b + 1);
	cr_assert_eq(gs_rec_pc_batch(&b->hdr, &v), 0);
	cr_expect_str_eq(v.names + v.pcs[1].name_off, "bc");
	cr_expect_eq((const void *)v.counts, (const void *)(pcs + 2));
	b->n_pcs = 1u << 30;
	cr_expect_eq(gs_rec_pc_batch(&b->hdr, &v), -EINVAL, "n_pcs past the record");
	b = batch();
	pcs = (void *)(b + 1);
	pcs[1].first_count = 2, pcs[1].n_counts = 2;
	cr_expect_eq(gs_rec_pc_batch(&b->hdr, &v), -EINVAL, "counts past counts[]");
	b = batch();
	pcs = (void *)(b + 1);
	pcs[1].name_off = 5;
	cr_expect_eq(gs_rec_pc_batch(&b->hdr, &v), -EINVAL, "name_off past names[]");
	b = batch();
	b->names_len = 4; /* "a\0bc" without its NUL */
	cr_expect_eq(gs_rec_pc_batch(&b->hdr, &v), -EINVAL, "a name without its NUL");
	b = batch();
	b->hdr.size = sizeof(*b) - 8;
	cr_expect_eq(gs_rec_check(&b->hdr), -EINVAL, "shorter than the fixed part");
}

Test(codec, stall_table_and_fixed_records)
{
	const struct gs_gpu_stall_table *t;
	const struct gs_gpu_stall_reason *r;
	size_t size = sizeof(struct gs_gpu_stall_table) + 2 * sizeof(struct gs_gpu_stall_reason);
	struct gs_gpu_stall_table *st = (void *)rec(GS_REC_GPU_STALL_TABLE, size);
	st->n_reasons = 2;
	cr_assert_eq(gs_rec_stall_table(&st->hdr, &t, &r), 0);
	cr_expect_eq((const void *)r, (const void *)(st + 1));
	st->n_reasons = 3;
	cr_expect_eq(gs_rec_stall_table(&st->hdr, &t, &r), -EINVAL);
	st->n_reasons = 0x40000000u;
	cr_expect_eq(gs_rec_check(&st->hdr), -EINVAL, "n_reasons * size overflowing 32 bits");

	struct {
		uint16_t type;
		size_t size;
	} fixed[] = {
		{ GS_REC_PROC_EVENT, sizeof(struct gs_proc_event) },
		{ GS_REC_OFFCPU_END, sizeof(struct gs_offcpu_end) },
		{ GS_REC_GPU_CUBIN, sizeof(struct gs_gpu_cubin) },
		{ GS_REC_GPU_STATUS, sizeof(struct gs_gpu_status) },
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++) {
		struct gs_rec_hdr *h = rec(fixed[i].type, fixed[i].size);
		cr_expect_eq(gs_rec_check(h), 0, "type %u", fixed[i].type);
		h->size = (uint32_t)fixed[i].size - 8;
		cr_expect_eq(gs_rec_check(h), -EINVAL, "type %u short", fixed[i].type);
	}
}
