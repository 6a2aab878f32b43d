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

/* A CPU sample at at: k kernel, u user ips, p Python frames; its size. */
static size_t cpu_at(void *at, int k, int u, int p)
{
	struct gs_cpu_sample *s = at;
	size_t size = sizeof(*s) + ((size_t)k + u + 2 * p) * sizeof(__u64);
	s->hdr = (struct gs_rec_hdr){ .type = GS_REC_CPU_SAMPLE,
				      .version = GS_RECORDS_VERSION,
				      .size = (uint32_t)size };
	s->n_kernel = (uint8_t)k;
	s->n_user = (uint8_t)u;
	s->n_python = (uint16_t)p;
	for (int i = 0; i < k + u + 2 * p; i++)
		s->frames[i] = 0x1000 + (uint64_t)i;
	return size;
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
	h->size = (uint32_t)(n - 8);
	cr_expect_eq(gs_rec_cpu_sample(h, &v), -EINVAL, "frames past the record");
	cpu_at(buf, GS_MAX_KERNEL_FRAMES + 1, 0, 0);
	cr_expect_eq(gs_rec_cpu_sample(h, &v), -EINVAL, "more kernel frames than BPF takes");
	cpu_at(buf, 0, 0, 0);
	cr_expect_eq(gs_rec_offcpu_stack(h, &(const struct gs_offcpu_stack *){ 0 }, &v), -EBADMSG);

	/* off-CPU stack and GPU launch: the inner sample must fit the outer record */
	size_t fixed[] = { sizeof(struct gs_offcpu_stack), sizeof(struct gs_gpu_launch) };
	uint16_t types[] = { GS_REC_OFFCPU_STACK, GS_REC_GPU_LAUNCH };
	for (int t = 0; t < 2; t++) {
		h = rec(types[t], 0);
		size_t inner = cpu_at(buf + fixed[t], 1, 2, 1);
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
