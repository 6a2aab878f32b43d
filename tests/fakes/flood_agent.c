/* SPDX-License-Identifier: MIT */
/*
 * A hostile "agent" for t_safe_gpu_flood.sh (issue 24, items 5 and 6): a
 * library that speaks the gpusample agent's USDT protocol (provider
 * "gpusample", probes "record" and "launch" with semaphores, an exported
 * gs_agent_cfg, a "gs-agent" thread) but no CUDA at all.  Preloaded into any
 * program, it waits until a gpusample arms it, then floods for
 * GS_FLOOD_SECONDS (default 10):
 *   GS_FLOOD=launch  launch events, every other one with a new kernel hash,
 *                    the rest of 16 kernels, each with a new correlation id,
 *                    never a PC batch (item 5)
 *   GS_FLOOD=pc      PC batches whose PCs carry unique kernel names (about
 *                    GS_FLOOD_NAME bytes each, default 200) and offsets (item 6)
 *   GS_FLOOD=both    both, alternating (default)
 * It writes "armed" and, at the end, "sent launches N pcs N" to
 * GS_FLOOD_OUT when set.  Built by the test with the system's sys/sdt.h.
 */
#define _GNU_SOURCE
#define _SDT_HAS_SEMAPHORES 1
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>

#include "gpusample/records.h"

__extension__ unsigned short gpusample_record_semaphore __attribute__((unused))
__attribute__((section(".probes"))) __attribute__((visibility("hidden")));
__extension__ unsigned short gpusample_launch_semaphore __attribute__((unused))
__attribute__((section(".probes"))) __attribute__((visibility("hidden")));

__attribute__((visibility("default"))) struct gs_gpu_agent_cfg gs_agent_cfg = {
	.magic = GS_GPU_CFG_MAGIC,
	.version = GS_GPU_CFG_VERSION,
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void emit_record(void *rec, uint64_t sz)
{
	if (__atomic_load_n(&gpusample_record_semaphore, __ATOMIC_RELAXED))
		STAP_PROBE2(gpusample, record, rec, sz);
}

static __attribute__((noinline)) void emit_launch(struct gs_gpu_launch *l)
{
	uint64_t sz = sizeof(*l);

	if (__atomic_load_n(&gpusample_launch_semaphore, __ATOMIC_RELAXED))
		STAP_PROBE2(gpusample, launch, l, sz);
}

static uint64_t n_launch, n_pc;

static void flood_launches(uint32_t *seq)
{
	for (int i = 0; i < 256; i++) {
		struct gs_gpu_launch l = {
			.hdr = { GS_REC_GPU_LAUNCH, GS_RECORDS_VERSION, sizeof(l), 0 },
			/* odd: a new kernel each; even: one of 16 kernels */
			.name_hash = 0x9e3779b97f4a7c15ull * (*seq & 1 ? *seq + 1 : *seq % 32 + 1) |
				     1,
			.correlation_id = *seq + 1,
			.cbid = 307,
			.sample_every = 1,
			.seq = *seq,
		};
		(*seq)++;
		emit_launch(&l);
		n_launch++;
	}
}

/* One batch: as many PCs with unique names of name_len bytes as fit. */
static void flood_pcs(uint64_t *uniq, size_t name_len)
{
	static _Alignas(8) unsigned char buf[GS_GPU_REC_MAX];
	struct gs_gpu_pc_batch *b = (void *)buf;
	size_t per = sizeof(struct gs_gpu_pc) + sizeof(struct gs_gpu_stall_count) + name_len + 1;
	uint32_t n = (uint32_t)((sizeof(buf) - sizeof(*b) - 8) / per);

	memset(buf, 0, sizeof(buf));
	struct gs_gpu_pc *pcs = (void *)(b + 1);
	struct gs_gpu_stall_count *counts = (void *)(pcs + n);
	char *names = (char *)(counts + n);
	for (uint32_t i = 0; i < n; i++, (*uniq)++) {
		char *nm = names + i * (name_len + 1);
		int k = snprintf(nm, name_len + 1, "_Z11flood_%016llx_", (unsigned long long)*uniq);
		for (size_t c = (size_t)k; c < name_len; c++)
			nm[c] = 'a' + (char)((*uniq + c) % 26);
		nm[name_len] = 0;
		pcs[i] = (struct gs_gpu_pc){
			.cubin_crc = 0x1234567,
			.pc_offset = (*uniq % 4096) * 16,
			.name_hash = gs_kernel_name_hash(nm),
			.name_off = i * (uint32_t)(name_len + 1),
			.first_count = (uint16_t)i,
			.n_counts = 1,
		};
		counts[i] = (struct gs_gpu_stall_count){ (uint32_t)(*uniq % 7), 3 };
	}
	size_t size = sizeof(*b) + n * (sizeof(*pcs) + sizeof(*counts)) + n * (name_len + 1);
	size = (size + 7) & ~(size_t)7;
	b->hdr = (struct gs_rec_hdr){ GS_REC_GPU_PC_BATCH, GS_RECORDS_VERSION, (uint32_t)size, 0 };
	b->gpu.ctx_uid = 1;
	b->gpu.device = 0;
	b->total_samples = 3 * n;
	b->n_pcs = n;
	b->n_counts = n;
	b->names_len = n * (uint32_t)(name_len + 1);
	b->flags = GS_GPU_BATCH_FIRST | GS_GPU_BATCH_LAST;
	emit_record(b, size);
	n_pc += n;
}

static void *flood(void *arg)
{
	const char *mode = getenv("GS_FLOOD"), *out = getenv("GS_FLOOD_OUT");
	const char *secs_s = getenv("GS_FLOOD_SECONDS"), *nl = getenv("GS_FLOOD_NAME");
	double secs = secs_s ? atof(secs_s) : 10, end;
	size_t name_len = nl ? strtoul(nl, NULL, 10) : 200;
	int launches = !mode || strcmp(mode, "pc"), pcs = !mode || strcmp(mode, "launch");
	uint32_t seq = 0;
	uint64_t uniq = 0;
	FILE *f;

	(void)arg;
	prctl(PR_SET_NAME, "gs-agent");
	if (name_len < 40 || name_len > 4000)
		name_len = 200;
	while (!__atomic_load_n(&gpusample_record_semaphore, __ATOMIC_RELAXED))
		usleep(20000);
	if (out && (f = fopen(out, "w"))) {
		fputs("armed\n", f);
		fclose(f);
	}
	for (end = now_s() + secs; now_s() < end;) {
		if (launches)
			flood_launches(&seq);
		if (pcs)
			flood_pcs(&uniq, name_len);
		/* paced so that the ring buffer mostly keeps up: the point is
		 * what gpusample keeps, not what BPF drops */
		usleep(launches && pcs ? 200 : 100);
	}
	if (out && (f = fopen(out, "a"))) {
		fprintf(f, "sent launches %llu pcs %llu\n", (unsigned long long)n_launch,
			(unsigned long long)n_pc);
		fclose(f);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;

	if (!pthread_create(&t, NULL, flood, NULL))
		pthread_detach(t);
}
