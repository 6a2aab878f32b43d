/* SPDX-License-Identifier: MIT */
/*
 * Test driver for the GPU path without the CLI: loads gpusample's BPF object
 * (bpf/sampler.c), attaches to the agent in PID the way gpusample does
 * (gpu/gpu_host.c), optionally several times, and prints what reached the
 * host as "key value" lines for tests/integration/t_gpu_*.sh.
 *
 * usage: gs_gpu_driver -p PID [-n ATTACHES] [-t SECONDS_ATTACHED] [-g GAP_S]
 *                      [-P PERIOD] [-S] [-w WAIT_FOR_AGENT_S] [-r EVENTS_PER_S] [-v]
 * -v prints every stall table in full.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bpf/sampler.h"
#include "gpu/gpu.h"
#include "gpusample/profile.h"
#include "gpusample/records_codec.h"
#include "gpusample/stall.h"
#include "python/python.h"
#include "gpusample.skel.h"

#define MAX_TABLES 16
#define MAX_CORR   65536

static struct {
	struct gs_gpu_host *h;
	struct gs_sampler *s;
	uint32_t tgid;
	/* tables by ctx */
	struct gs_gpu_stall_table *tab[MAX_TABLES];
	int n_tab;
	uint64_t batches, pcs, counts, samples, not_issued, counter_samples, total, dropped,
	    nonuser;
	uint64_t bad_refs, zero_pcs, seq_gaps, no_corr_flag, serialized_flag, corr_nonzero,
	    corr_matched;
	uint64_t launches, launch_weight, launch_stack, launch_py, launch_py_max, launch_ctx0;
	uint64_t cpu_samples, armed_status, disarmed_status, off_status, recovered_status, ctx_off;
	uint64_t cubins, cubins_replay, cubins_read, cubin_aliases, status_dropped, pcs_no_cubin;
	uint64_t crcs[32];
	int n_crcs;
	uint64_t ctx_samples[MAX_TABLES];
	uint32_t ctx_uid[MAX_TABLES];
	uint32_t *corr;
	size_t n_corr;
	uint64_t attach_ns;
	int64_t arm_ms[16];
	int n_arm;
	char kernels[64][128];
	uint64_t kernel_samples[64];
	int n_kernels;
} D;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static struct gs_gpu_stall_table *table_of(uint32_t ctx, int *slot)
{
	for (int i = 0; i < D.n_tab; i++)
		if (D.tab[i]->gpu.ctx_uid == ctx) {
			if (slot)
				*slot = i;
			return D.tab[i];
		}
	return NULL;
}

/* A cubin record named this key. */
static int crc_known(uint64_t crc)
{
	for (int i = 0; i < D.n_crcs; i++)
		if (D.crcs[i] == crc)
			return 1;
	return 0;
}

/* A PC batch the codec accepted (gs_rec_check in on_record). */
static void on_batch(const struct gs_rec_pc_batch_view *v)
{
	const struct gs_gpu_pc_batch *b = v->b;
	const struct gs_gpu_pc *pcs = v->pcs;
	const struct gs_gpu_stall_count *cnt = v->counts;
	const char *names = v->names;
	int slot = -1;
	struct gs_gpu_stall_table *t = table_of(b->gpu.ctx_uid, &slot);
	const struct gs_gpu_stall_reason *r = t ? (const void *)(t + 1) : NULL;

	D.batches++;
	D.pcs += b->n_pcs;
	D.counts += b->n_counts;
	D.total += b->total_samples;
	D.dropped += b->dropped_samples;
	D.nonuser += b->non_user_samples;
	if (b->flags & GS_GPU_BATCH_NO_CORRELATION)
		D.no_corr_flag++;
	if (b->flags & GS_GPU_BATCH_SERIALIZED)
		D.serialized_flag++;
	for (uint32_t i = 0; i < b->n_pcs; i++) {
		const struct gs_gpu_pc *p = &pcs[i];
		const char *name = p->name_off < b->names_len ? names + p->name_off : "?";
		uint64_t pc_samples = 0;
		int k;

		if (!p->cubin_crc && !p->pc_offset && !name[0])
			D.zero_pcs++; /* an all-zero CUPTI record passed on */
		else if (D.n_crcs && !gs_gpu_host_cubin(D.h, p->cubin_crc, NULL))
			D.pcs_no_cubin++; /* keyed by a CRC the host has no bytes for */
		if (p->correlation_id) {
			D.corr_nonzero++;
			for (size_t c = 0; c < D.n_corr; c++)
				if (D.corr[c] == p->correlation_id) {
					D.corr_matched++;
					break;
				}
		}
		for (uint32_t c = p->first_count;
		     c < (uint32_t)p->first_count + p->n_counts && c < b->n_counts; c++) {
			uint32_t flags = ~0u;
			for (uint32_t j = 0; r && j < t->n_reasons; j++)
				if (r[j].index == cnt[c].reason_index)
					flags = r[j].flags;
			if (flags == ~0u)
				D.bad_refs++;
			else if (gs_stall_kind(flags) == GS_STALL_NOT_ISSUED)
				D.not_issued += cnt[c].samples;
			else if (gs_stall_kind(flags) == GS_STALL_COUNTER)
				D.counter_samples += cnt[c].samples;
			else
				pc_samples += cnt[c].samples;
		}
		D.samples += pc_samples;
		if (slot >= 0)
			D.ctx_samples[slot] += pc_samples;
		for (k = 0; k < D.n_kernels; k++)
			if (!strcmp(D.kernels[k], name))
				break;
		if (k == D.n_kernels && k < 64)
			snprintf(D.kernels[D.n_kernels++], sizeof(D.kernels[0]), "%s", name);
		if (k < 64) {
			D.kernel_samples[k] += pc_samples;
			if (gs_kernel_name_hash(name) != p->name_hash)
				D.bad_refs++;
		}
	}
}

static int on_record(void *ctx, const struct gs_rec_hdr *rec)
{
	struct gs_rec_pc_batch_view bv;

	gs_gpu_host_on_record(D.h, rec);
	if (gs_rec_check(rec)) { /* the one codec: sizes and counts inside bounds */
		D.bad_refs++;
		return 0;
	}
	switch (rec->type) {
	case GS_REC_CPU_SAMPLE:
		D.cpu_samples++;
		break;
	case GS_REC_GPU_STALL_TABLE: {
		const struct gs_gpu_stall_table *t = (const void *)rec;
		int slot;
		if (!table_of(t->gpu.ctx_uid, &slot) && D.n_tab < MAX_TABLES) {
			D.tab[D.n_tab] = malloc(rec->size);
			memcpy(D.tab[D.n_tab], rec, rec->size);
			D.ctx_uid[D.n_tab++] = t->gpu.ctx_uid;
		}
		break;
	}
	case GS_REC_GPU_PC_BATCH:
		if (!gs_rec_pc_batch(rec, &bv))
			on_batch(&bv);
		break;
	case GS_REC_GPU_CUBIN: {
		const struct gs_gpu_cubin *c = (const void *)rec;
		D.cubins++;
		if (!crc_known(c->crc) && D.n_crcs < 32)
			D.crcs[D.n_crcs++] = c->crc;
		if (c->flags & GS_GPU_CUBIN_REPLAY)
			D.cubins_replay++;
		if (c->alias_of)
			D.cubin_aliases++;
		break;
	}
	case GS_REC_GPU_LAUNCH: {
		const struct gs_gpu_launch *l;
		struct gs_rec_cpu_view cv;
		if (gs_rec_gpu_launch(rec, &l, &cv)) /* gs_rec_check passed: cannot fail */
			abort();
		D.launches++;
		D.launch_weight += l->sample_every;
		if (!l->gpu.ctx_uid)
			D.launch_ctx0++;
		if (cv.n_user)
			D.launch_stack++;
		if (cv.n_python)
			D.launch_py++;
		if (cv.n_python > D.launch_py_max)
			D.launch_py_max = cv.n_python;
		if (D.n_corr < MAX_CORR)
			D.corr[D.n_corr++] = l->correlation_id;
		break;
	}
	case GS_REC_GPU_STATUS: {
		const struct gs_gpu_status *s = (const void *)rec;
		printf("status ctx=%u state=%u reason=%u result=%d session=%u msg=%s\n",
		       s->gpu.ctx_uid, s->state, s->reason, s->cupti_result, s->session,
		       s->message);
		if (s->state == GS_GPU_ST_ARMED && !s->gpu.ctx_uid) {
			D.armed_status++;
			if (D.n_arm < 16)
				D.arm_ms[D.n_arm++] =
				    ((int64_t)rec->ktime_ns - (int64_t)D.attach_ns) / 1000000;
		}
		if (s->state == GS_GPU_ST_DISARMED && !s->gpu.ctx_uid)
			D.disarmed_status++;
		if (s->state == GS_GPU_ST_OFF)
			s->gpu.ctx_uid ? D.ctx_off++ : D.off_status++;
		if (s->state == GS_GPU_ST_RECOVERED)
			D.recovered_status++;
		if (s->dropped_samples > D.status_dropped)
			D.status_dropped = s->dropped_samples;
		break;
	}
	}
	return 0;
}

static int poll_fn(void *ctx, int ms)
{
	return gs_sampler_poll(D.s, ms, on_record, NULL);
}

/* No unwind tables to prepare here: arm what is ready at once. */
static void arm_ready(void)
{
	uint32_t tgid;

	while ((tgid = gs_gpu_host_next_ready(D.h)))
		gs_gpu_host_arm(D.h, tgid);
}

static void run_for(double secs)
{
	uint64_t end = mono_ns() + (uint64_t)(secs * 1e9);

	while (mono_ns() < end && kill(D.tgid, 0) == 0) {
		gs_sampler_poll(D.s, 50, on_record, NULL);
		gs_gpu_host_poll(D.h);
		arm_ready();
	}
}

int main(int argc, char **argv)
{
	struct gs_sampler_opts so = { .frequency_hz = 49,
				      .kernel_stacks = false,
				      .follow_children = true };
	struct gs_gpu_host_opts go = { 0 };
	struct gs_target t = { .flags = GS_TARGET_FOLLOW_CHILDREN };
	struct gs_profile prof;
	struct gs_py *py;
	struct gs_py_cfg pcfg;
	char err[256], msg[256], sum[256];
	int attaches = 1, opt, unacked = 0, verbose = 0;
	double attached_s = 2, gap_s = 0.5, wait_s = 10;

	while ((opt = getopt(argc, argv, "p:n:t:g:P:Sw:r:v")) != -1) {
		switch (opt) {
		case 'p':
			D.tgid = atoi(optarg);
			break;
		case 'n':
			attaches = atoi(optarg);
			break;
		case 't':
			attached_s = atof(optarg);
			break;
		case 'g':
			gap_s = atof(optarg);
			break;
		case 'P':
			go.sampling_period = atoi(optarg);
			break;
		case 'S':
			go.serialized = true;
			break;
		case 'w':
			wait_s = atof(optarg);
			break;
		case 'r':
			go.launch_events_per_s = atoi(optarg);
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			fprintf(stderr, "usage: %s -p PID [-n N] [-t S] [-g S] [-P N] [-S]\n",
				argv[0]);
			return 2;
		}
	}
	if (!D.tgid)
		return 2;
	D.corr = calloc(MAX_CORR, sizeof(*D.corr));
	if (gs_sampler_open(&so, &D.s, err, sizeof(err))) {
		fprintf(stderr, "driver: %s\n", err);
		return 1;
	}
	gs_profile_init(&prof);
	py = gs_py_new(&prof);
	if (py && gs_py_discover(py, D.tgid, &pcfg, NULL, msg, sizeof(msg)) == 0 &&
	    gs_sampler_set_py_cfg(D.s, 1, &pcfg) == 0)
		t.py_cfg_id = 1;
	printf("python_cfg %u\n", t.py_cfg_id);
	t.root_tgid = D.tgid;
	gs_sampler_add_target(D.s, D.tgid, &t);
	if (gs_sampler_start(D.s, err, sizeof(err))) {
		fprintf(stderr, "driver: %s\n", err);
		return 1;
	}
	struct gpusample_bpf *skel = gs_sampler_skel(D.s);
	D.h = gs_gpu_host_new(skel->progs.gs_gpu_record, skel->progs.gs_gpu_launch, &go);

	for (int a = 0; a < attaches; a++) {
		uint64_t deadline = mono_ns() + (uint64_t)(wait_s * 1e9);
		int rc;

		while ((rc = gs_gpu_host_add_process(D.h, D.tgid)) == 0 && mono_ns() < deadline &&
		       kill(D.tgid, 0) == 0)
			run_for(0.02);
		if (rc > 0 && gs_gpu_host_next_ready(D.h) == D.tgid)
			rc = gs_gpu_host_arm(D.h, D.tgid);
		if (rc <= 0) {
			printf("attach_failed %d\n", rc);
			break;
		}
		D.attach_ns = mono_ns();
		printf("attached %d\n", a + 1);
		fflush(stdout);
		run_for(attached_s);
		unacked += gs_gpu_host_detach(D.h, poll_fn, NULL, 2000);
		printf("detached %d\n", a + 1);
		fflush(stdout);
		if (a + 1 < attaches)
			run_for(gap_s);
	}
	gs_sampler_stop(D.s);
	for (int i = 0; i < 64 && gs_sampler_poll(D.s, 0, on_record, NULL) > 0; i++)
		;
	gs_gpu_host_summary(D.h, sum, sizeof(sum));
	printf("summary %s\n", sum);
	printf("unacked %d\n", unacked);
	for (int i = 0; i < D.n_arm; i++)
		printf("arm_ms %" PRId64 "\n", D.arm_ms[i]);
#define P(k) printf(#k " %" PRIu64 "\n", (uint64_t)D.k)
	P(armed_status);
	P(disarmed_status);
	P(off_status);
	P(ctx_off);
	P(recovered_status);
	P(batches);
	P(pcs);
	P(counts);
	P(samples);
	P(not_issued);
	P(counter_samples);
	P(total);
	P(dropped);
	P(nonuser);
	P(bad_refs);
	P(zero_pcs);
	P(no_corr_flag);
	P(serialized_flag);
	P(corr_nonzero);
	P(corr_matched);
	P(launches);
	P(launch_weight);
	P(launch_stack);
	P(launch_py);
	P(launch_py_max);
	P(launch_ctx0);
	P(cpu_samples);
	P(cubins);
	P(cubins_replay);
	P(status_dropped);
	for (int i = 0; i < D.n_tab; i++)
		printf("stall_table ctx=%u device=%u n=%u samples=%" PRIu64 " first_index=%u\n",
		       D.tab[i]->gpu.ctx_uid, D.tab[i]->gpu.device, D.tab[i]->n_reasons,
		       D.ctx_samples[i], ((struct gs_gpu_stall_reason *)(D.tab[i] + 1))->index);
	for (int i = 0; i < D.n_kernels; i++) /* by samples, descending */
		for (int j = i + 1; j < D.n_kernels; j++)
			if (D.kernel_samples[j] > D.kernel_samples[i]) {
				char tmp[128];
				uint64_t v = D.kernel_samples[i];
				memcpy(tmp, D.kernels[i], sizeof(tmp));
				memcpy(D.kernels[i], D.kernels[j], sizeof(tmp));
				memcpy(D.kernels[j], tmp, sizeof(tmp));
				D.kernel_samples[i] = D.kernel_samples[j];
				D.kernel_samples[j] = v;
			}
	for (int i = 0; i < D.n_kernels; i++)
		printf("kernel %s %" PRIu64 "\n", D.kernels[i], D.kernel_samples[i]);
	for (int i = 0; verbose && i < D.n_tab; i++) {
		const struct gs_gpu_stall_reason *r = (const void *)(D.tab[i] + 1);
		printf("stall_table ctx=%u sm_count=%u clock_khz=%u period=%u\n",
		       D.tab[i]->gpu.ctx_uid, D.tab[i]->sm_count, D.tab[i]->clock_khz,
		       D.tab[i]->sampling_period);
		for (uint32_t k = 0; k < D.tab[i]->n_reasons; k++)
			printf("  reason %3u %-70s%s\n", r[k].index, r[k].name,
			       gs_stall_kind(r[k].flags) == GS_STALL_NOT_ISSUED ? " (not issued)"
			       : gs_stall_kind(r[k].flags) == GS_STALL_COUNTER  ? " (counter)"
										: "");
	}
	/* copies the host read and keeps: an alias key gives an earlier one */
	const void *copies[32];
	for (int i = 0; i < D.n_crcs; i++) {
		size_t sz = 0;
		const unsigned char *b = gs_gpu_host_cubin(D.h, D.crcs[i], &sz);
		int seen = 0;
		for (uint64_t k = 0; k < D.cubins_read; k++)
			seen |= copies[k] == b;
		if (b && sz > 4 && !memcmp(b, "\177ELF", 4) && !seen)
			copies[D.cubins_read++] = b;
	}
	P(cubins_read);
	P(cubin_aliases);
	P(pcs_no_cubin);
	gs_gpu_host_free(D.h);
	gs_sampler_close(D.s);
	return 0;
}
