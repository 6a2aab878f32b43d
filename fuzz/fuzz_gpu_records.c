// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: GPU agent records, as the target's agent writes them
 * into the ring buffer, through every host-side parser and the join:
 * gpu/gpu_host.c (state, stall tables, cubin reads under the caps),
 * gpu/cuda.c (stall tables, device facts, cubin ELF, comments) and
 * gpu/join.c (launches, PC batches, emit), each record through the
 * one codec (include/gpusample/records_codec.h) as in the session, whose
 * verdicts must agree (gs_rec_check, the typed decoders, gs_rec_stack and
 * the CPU stack's origin; an abort otherwise).  The agent runs in the
 * target, so every byte here is hostile.
 *
 * Input: records back to back, each starting with its struct gs_rec_hdr;
 * hdr.size (at least the header, 8-aligned as the BPF side requires) says
 * where the next begins.  Each record is copied into a buffer of exactly
 * hdr.size bytes, so ASan catches any read past it.  Cubin records read
 * from this process (tgid forced to ours); libcupti is off (--cupti none):
 * NVIDIA's code is not what is fuzzed.
 *
 * Build (until `make fuzz` has it):
 *   make BUILD=build-fuzz CC=clang \
 *     CFLAGS_EXTRA='-fsanitize=fuzzer-no-link,address,undefined' build-fuzz/libgpusample_core.a
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -I. \
 *     fuzz/fuzz_gpu_records.c build-fuzz/libgpusample_core.a \
 *     -Wl,-Bstatic -lbpf -ldw -lelf -lz -llzma -lbz2 -lzstd -liberty -Wl,-Bdynamic \
 *     -lpthread -ldl -lm -o build-fuzz/fuzz_gpu_records
 *   build-fuzz/fuzz_gpu_records -max_total_time=60 fuzz/corpus/gpu_records
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpusample/profile.h"
#include "gpusample/records.h"
#include "gpusample/records_codec.h"
#include "gpu/gpu.h"
#include "gpu/gpu.h"

struct run {
	struct gs_profile p;
	struct gs_gpu_host *h;
	struct gs_cuda *c;
	struct gs_join *j;
	uint32_t stack;
};

static volatile uint64_t frames_sink; /* keeps check_codec's frame reads */

/* The codec's decoders agree with gs_rec_check, and a CPU stack's view
 * stays inside its record (ASan checks every frame word read here). */
static uint64_t check_codec(const struct gs_rec_hdr *rec)
{
	struct gs_rec_cpu_view v;
	int rc = gs_rec_check(rec), stack = gs_rec_stack(rec, &v);
	uint64_t sum = 0;

	if (stack != -EBADMSG && stack != rc)
		abort(); /* a stack record: its decoder is gs_rec_check's verdict */
	if (stack)
		return 0;
	if (v.s->origin != (rec->type == GS_REC_GPU_LAUNCH     ? GS_ORIGIN_LAUNCH
			    : rec->type == GS_REC_OFFCPU_STACK ? GS_ORIGIN_OFFCPU
			    : rec->type == GS_REC_OFFCPU_WAKER ? GS_ORIGIN_WAKER
			    : rec->type == GS_REC_MEM_CALL     ? GS_ORIGIN_MEM
							       : GS_ORIGIN_TIMER))
		abort();
	for (uint32_t i = 0; i < v.n_kernel; i++)
		sum += v.kernel[i];
	for (uint32_t i = 0; i < v.n_user; i++)
		sum += v.user[i];
	for (uint32_t i = 0; i < v.n_python; i++)
		sum += v.py[i].code + v.py[i].lasti;
	return sum;
}

static void on_record(struct run *r, struct gs_rec_hdr *rec)
{
	const void *fixed;

	if (!gs_rec_fixed(rec, GS_REC_GPU_CUBIN, &fixed)) /* never another process's memory */
		((struct gs_gpu_cubin *)fixed)->gpu.tgid = (uint32_t)getpid();
	gs_gpu_host_on_record(r->h, rec);
	switch (rec->type) {
	case GS_REC_GPU_CUBIN: {
		const struct gs_gpu_cubin *cb;
		if (!gs_rec_fixed(rec, GS_REC_GPU_CUBIN, (const void **)&cb)) {
			size_t size = 0;
			const void *bytes = gs_gpu_host_cubin(r->h, cb->crc, &size);
			if (bytes && !gs_cuda_has_cubin(r->c, cb->crc))
				gs_cuda_add_cubin_borrowed(r->c, cb->crc, bytes, size, cb->gpu.tgid,
							   NULL, NULL);
		}
		break;
	}
	case GS_REC_GPU_STALL_TABLE:
		gs_cuda_stall_table_record(r->c, (const void *)rec, rec->size);
		break;
	case GS_REC_GPU_LAUNCH: {
		const struct gs_gpu_launch *l;
		struct gs_rec_cpu_view cv;
		if (!gs_rec_gpu_launch(rec, &l, &cv))
			gs_join_launch_record(r->j, l, r->stack,
					      gs_profile_intern(&r->p, "python3"), 0);
		break;
	}
	case GS_REC_GPU_PC_BATCH:
		gs_join_pc_batch_record(r->j, r->c, (const void *)rec, rec->size);
		break;
	default:
		break;
	}
}

/* Functions of a cubin image: the ELF reader on hostile bytes. */
static int count_fn(void *ctx, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	return ++*(int *)ctx > 100000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct gs_gpu_host_opts o = { .cubin_max_bytes = 1 << 20, .cubin_total_bytes = 4 << 20 };
	struct gs_join_stats st;
	struct run r;
	char why[256];
	int nf = 0;

	gs_profile_init(&r.p);
	r.c = gs_cuda_new(&r.p);
	o.cuda = r.c;
	r.h = gs_gpu_host_new(NULL, NULL, &o);
	r.j = gs_join_new(&r.p, 0);
	if (!r.h || !r.c || !r.j)
		abort();
	gs_cuda_set_cupti(r.c, "none", why, sizeof(why));
	gs_cuda_defer_lines(r.c, true); /* as the session does */
	struct gs_function f = { .name = gs_profile_intern(&r.p, "train_step") };
	struct gs_line l = { .function = gs_profile_add_function(&r.p, &f) };
	uint32_t loc = gs_profile_add_location(&r.p, 0, 0x1000, GS_FRAME_NATIVE, &l, 1);
	r.stack = (uint32_t)gs_profile_add_stack(&r.p, &loc, 1);

	gs_cuda_cubin_functions(data, len, count_fn, &nf);
	for (size_t off = 0; len - off >= sizeof(struct gs_rec_hdr);) {
		struct gs_rec_hdr h;
		memcpy(&h, data + off, sizeof(h));
		if (h.size < sizeof(h) || h.size > len - off || h.size > GS_GPU_REC_MAX)
			break;
		struct gs_rec_hdr *rec = malloc(h.size);
		memcpy(rec, data + off, h.size);
		if (!gs_rec_hdr_check(rec, h.size)) { /* the sampler's gate (bpf/sampler.c) */
			frames_sink += check_codec(rec);
			on_record(&r, rec);
		}
		free(rec);
		off += (h.size + 7) & ~(size_t)7;
		if (off > len)
			break;
	}
	gs_cuda_resolve_lines(r.c);
	gs_join_emit(r.j, &st);
	gs_cuda_add_comments(r.c);
	gs_join_free(r.j);
	gs_cuda_free(r.c);
	gs_gpu_host_free(r.h);
	gs_profile_free(&r.p);
	return 0;
}
