/* SPDX-License-Identifier: MIT */
/*
 * GPU memory of a session: the uprobes on libcuda (gpu/gpumem_probe.h) in
 * every process of the job, their records paired and fed to the live set
 * (gpu/gpumem.h) as they arrive, and what it holds written into the
 * profile at the end.  Calls down only: gpu/, the profile, the session's
 * stack interning.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session_int.h"
#include "gpusample.skel.h"
#include "gpu/gpumem.h"
#include "gpu/gpumem_probe.h"
#include "gpusample/records_codec.h"
#include "util/hashmap.h"

int gs_memory_register(struct session *s)
{
	struct gpusample_bpf *skel = gs_sampler_skel(s->rt.sampler);
	const struct gs_proc_handler live = { .name = "gpu-memory" };
	struct gs_session_gpu *g = &s->gpu;
	struct gs_proc_handler h;
	int rc;

	/* Each process's probes are 22 uprobe links, closed by the session's
	 * reaper (each close waits for an RCU grace period). */
	if (!s->o->gpu || !s->o->gpu_memory)
		return 0;
	g->mem = gs_gpumem_new();
	g->mem_probe = gs_gpumem_probe_new(
	    gs_sampler_mem_enter_prog(s->rt.sampler), skel->progs.gs_mem_return,
	    skel->progs.gs_mem_free, s->rt.sym ? gs_sym_elf_cache(s->rt.sym) : NULL, s->rt.reaper);
	if (!g->mem || !g->mem_probe)
		return -ENOMEM;
	gs_gpumem_probe_handler(g->mem_probe, &h);
	if ((rc = gs_proc_register(s->rt.pt, &h)) < 0 ||
	    (rc = gs_gpumem_probe_bind(g->mem_probe, s->rt.pt, rc)) ||
	    (rc = gs_proc_register(s->rt.pt, &live)) < 0)
		return rc;
	return gs_gpumem_bind(g->mem, s->rt.pt, rc);
}

/* Times in the live set: ns since the window's start. */
static uint64_t since_t0(const struct session *s, uint64_t ktime_ns)
{
	return ktime_ns > s->window.t0_mono ? ktime_ns - s->window.t0_mono : 0;
}

static void on_call(struct session *s, const struct gs_rec_hdr *h)
{
	const struct gs_mem_call *c;
	struct gs_rec_cpu_view v;
	int64_t raw, stack;
	int fn;

	if (gs_rec_mem_call(h, &c, &v)) {
		s->out.counts[GS_C_records_malformed]++;
		return;
	}
	fn = gs_gpumem_probe_fn(s->gpu.mem_probe, v.s->tgid, c->ip);
	if (fn < 0 || !gs_gpumem_fn_info(fn)->alloc) {
		s->out.counts[GS_C_gpu_mem_unknown]++;
		return;
	}
	/* Without the uprobe's own kernel path into BPF. */
	v.kernel += v.n_kernel;
	v.n_kernel = 0;
	if ((raw = gs_session_intern(s, &v)) < 0)
		return;
	gs_thread_get(s->rt.pt, v.s->tgid, v.s->tid);
	stack = gs_session_stack(s, &s->stacks.raw.items[raw]);
	uint64_t args[4] = { c->args[0], c->args[1], c->args[2], c->args[3] };

	if (stack >= 0)
		gs_gpumem_call(s->gpu.mem, v.s->tgid, v.s->tid, c->hdr.ktime_ns, fn, args,
			       (uint32_t)stack);
}

static void on_ret(struct session *s, const struct gs_mem_ret *r)
{
	const struct gs_gpumem_ret ret = {
		.tid = r->tid,
		.result = r->result,
		.call_ns = r->call_ns,
		.t_ns = since_t0(s, r->hdr.ktime_ns),
		.out = r->out,
		.aux = r->aux,
		.out_ok = !(r->flags & GS_MEMRET_OUT_FAULT),
		.aux_ok = !(r->flags & GS_MEMRET_AUX_FAULT),
	};

	gs_gpumem_return(s->gpu.mem, r->tgid, &ret);
}

static void on_free(struct session *s, const struct gs_mem_free *f)
{
	int fn = gs_gpumem_probe_fn(s->gpu.mem_probe, f->tgid, f->ip);
	uint64_t args[2] = { f->args[0], f->args[1] };

	if (fn < 0 || gs_gpumem_free_call(s->gpu.mem, f->tgid, fn, args,
					  since_t0(s, f->hdr.ktime_ns)) == -EINVAL)
		s->out.counts[GS_C_gpu_mem_unknown]++;
}

void gs_memory_record(struct session *s, const struct gs_rec_hdr *h)
{
	const void *rec;

	if (!s->gpu.mem)
		return;
	if (h->type == GS_REC_MEM_CALL) {
		on_call(s, h);
	} else if (!gs_rec_fixed(h, h->type, &rec)) {
		if (h->type == GS_REC_MEM_RET)
			on_ret(s, rec);
		else if (h->type == GS_REC_MEM_FREE)
			on_free(s, rec);
	} else {
		s->out.counts[GS_C_records_malformed]++;
	}
}

void gs_memory_exit(struct session *s, uint32_t tgid)
{
	if (s->gpu.mem)
		gs_gpumem_exit(s->gpu.mem, tgid);
}

/* "2.0 GiB", "512.0 MiB", "12 B" */
static const char *human_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = -1;

	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Where stack stands, as a reader names it: the innermost Python frame
 * ("train.py:57 forward") and its callers ("> step > main"), else the
 * innermost native frame outside the driver; GS_STACK_WORDS frames at most,
 * then "> ...". */
#define GS_STACK_WORDS 3
static void describe_stack(const struct gs_profile *prof, uint32_t stack, char *buf, size_t len)
{
	const struct gs_stack *st = stack < prof->n_stacks ? &prof->stacks[stack] : NULL;
	const uint32_t *locs = st ? gs_profile_stack_locs(prof, st) : NULL;
	size_t first = 0, n = st ? st->n : 0, at = 0, words = 0;
	bool python = false;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (gs_profile_location(prof, locs[i])->kind == GS_FRAME_PYTHON) {
			first = i;
			python = true;
			break;
		}
	for (size_t i = first; i < n && at < len; i++) {
		const struct gs_location *l = gs_profile_location(prof, locs[i]);
		const struct gs_function *f;
		const struct gs_line *ln;

		if ((python && l->kind != GS_FRAME_PYTHON) || l->kind == GS_FRAME_KERNEL ||
		    !l->n_lines)
			continue;
		if (words == GS_STACK_WORDS) {
			snprintf(buf + at, len - at, " > ...");
			return;
		}
		ln = &prof->lines[l->first_line + l->n_lines - 1];
		f = gs_profile_function(prof, ln->function);
		if (!words && f->file && ln->line > 0)
			at += snprintf(buf + at, len - at, "%s:%lld %s",
				       base_name(gs_profile_str(prof, f->file)),
				       (long long)ln->line, gs_profile_str(prof, f->name));
		else
			at += snprintf(buf + at, len - at, "%s%s", words ? " > " : "",
				       gs_profile_str(prof, f->name));
		words++;
	}
	if (!words)
		snprintf(buf, len, "[unknown stack]");
}

/* Per process: the peak and what was live at it, the OOMs with their
 * stacks; then what was lost, by cause. */
static void note_process(struct session *s, size_t i)
{
	const struct gs_gpumem_proc *p = gs_gpumem_proc_at(s->gpu.mem, i);
	const struct gs_gpumem_stack_bytes *sb;
	char a[32], b[32], c[32], where[400], top[1200];
	size_t n, at = 0;

	if (!p->allocs && !p->ooms)
		return;
	gs_profile_add_comment(
	    &s->prof,
	    GS_MEMORY_COMMENT "pid %u: peak GPU memory %s at %.1f s, %s live at the end; %llu "
			      "allocations (%s), %llu frees, %llu out of memory; pinned host "
			      "memory peak %s",
	    p->tgid, human_bytes(p->peak_device, a, sizeof(a)), p->peak_ns / 1e9,
	    human_bytes(p->live[GS_GPUMEM_DEVICE] + p->live[GS_GPUMEM_PHYS], b, sizeof(b)),
	    (unsigned long long)p->allocs, human_bytes(p->alloc_bytes, c, sizeof(c)),
	    (unsigned long long)p->frees, (unsigned long long)p->ooms,
	    human_bytes(p->peak[GS_GPUMEM_PINNED], where, sizeof(where)));
	top[0] = '\0';
	if (p->peak_device && !gs_gpumem_by_stack(s->gpu.mem, i, GS_GPUMEM_AT_PEAK, &sb, &n)) {
		for (size_t k = 0; k < n && k < 3 && at < sizeof(top); k++) {
			describe_stack(&s->prof, sb[k].stack, where, sizeof(where));
			at += snprintf(top + at, sizeof(top) - at, "%s%s in %s", k ? "; " : "",
				       human_bytes(sb[k].bytes, a, sizeof(a)), where);
		}
		gs_profile_add_comment(&s->prof, GS_MEMORY_COMMENT "pid %u: live at the peak: %s",
				       p->tgid, top);
	}
	for (uint64_t k = 0; k < p->ooms && k < GS_GPUMEM_OOM_KEEP; k++) {
		describe_stack(&s->prof, p->oom[k].stack, where, sizeof(where));
		gs_profile_add_comment(&s->prof,
				       GS_MEMORY_COMMENT
				       "pid %u: out of memory at %s: asked %s with %s live (%s at "
				       "%.1f s)",
				       p->tgid, where, human_bytes(p->oom[k].size, a, sizeof(a)),
				       human_bytes(p->oom[k].live, b, sizeof(b)),
				       gs_gpumem_fn_info(p->oom[k].fn)->name, p->oom[k].t_ns / 1e9);
	}
	if (p->lost.unknown_frees || p->lost.capped || p->lost.bad_size || p->lost.reused)
		gs_profile_add_note(
		    &s->prof,
		    "pid %u: GPU memory: %llu frees of addresses not seen allocated (before the "
		    "attach, or forged), %llu allocations past the %u-entry cap, %llu with an "
		    "impossible size, %llu at an address still live (its free unseen)",
		    p->tgid, (unsigned long long)p->lost.unknown_frees,
		    (unsigned long long)p->lost.capped, GS_GPUMEM_LIVE_MAX,
		    (unsigned long long)p->lost.bad_size, (unsigned long long)p->lost.reused);
}

/* The profile stack of a live-set stack: GS_GPUMEM_STACK_OTHER (past the
 * per-process cap) is one special frame. */
static int64_t profile_stack(struct session *s, uint32_t stack)
{
	uint32_t loc;

	if (stack != GS_GPUMEM_STACK_OTHER)
		return stack;
	loc = gs_session_special(s, "[other GPU allocation stacks]");
	return loc ? gs_profile_add_stack(&s->prof, &loc, 1) : -ENOMEM;
}

/* gpu_alloc_space and gpu_inuse_space samples of process i: one per stack
 * that allocated in the window. */
static int add_samples(struct session *s, size_t i)
{
	const struct gs_gpumem_proc *p = gs_gpumem_proc_at(s->gpu.mem, i);
	const struct gs_gpumem_stack_bytes *sb;
	struct gs_hmap live = { 0 };
	struct gs_sample_ctx c = {
		.pid = p->tgid,
		.process_role = gs_profile_intern(&s->prof, gs_session_role(s, p->tgid)),
		.cuda_device = -1,
	};
	size_t n;
	int rc;

	gs_session_proc_labels(s, p->tgid, &c);
	if ((rc = gs_gpumem_by_stack(s->gpu.mem, i, GS_GPUMEM_LIVE, &sb, &n)))
		return rc;
	for (size_t k = 0; k < n && !rc; k++)
		rc = gs_hmap_put(&live, sb[k].stack, sb[k].bytes);
	if (!rc)
		rc = gs_gpumem_by_stack(s->gpu.mem, i, GS_GPUMEM_ALLOCATED, &sb, &n);
	for (size_t k = 0; k < n && !rc; k++) {
		const uint64_t *in = gs_hmap_get(&live, sb[k].stack);
		int64_t stack = profile_stack(s, sb[k].stack);
		struct gs_sample smp = { .stack = (uint32_t)stack };

		if (stack < 0) {
			rc = (int)stack;
			break;
		}
		smp.values[GS_V_GPU_ALLOC] = (int64_t)sb[k].bytes;
		smp.values[GS_V_GPU_INUSE] = in ? (int64_t)*in : 0;
		rc = gs_profile_add_sample(&s->prof, &smp, &c);
	}
	gs_hmap_free(&live);
	return rc;
}

/* Process i's device bytes over time, as the trace's counter track.  0 or
 * -ENOMEM. */
static int add_counter_track(struct session *s, size_t i)
{
	size_t n;
	const struct gs_gpumem_point *pt = gs_gpumem_series(s->gpu.mem, i, &n);
	uint32_t pid = gs_gpumem_proc_at(s->gpu.mem, i)->tgid;

	for (size_t k = 0; k < n; k++)
		if (gs_profile_add_counter(&s->prof, pid, "GPU memory", pt[k].t_ns,
					   (int64_t)pt[k].bytes))
			return -ENOMEM;
	return 0;
}

int gs_memory_finish(struct session *s)
{
	struct gs_session_gpu *g = &s->gpu;
	struct gs_sampler_stats st;
	uint64_t unmatched = 0, failed = 0;

	if (!g->mem)
		return 0;
	gs_gpumem_probe_notes(g->mem_probe, &s->prof);
	for (size_t i = 0; i < gs_gpumem_nprocs(g->mem); i++) {
		if (add_counter_track(s, i))
			return -ENOMEM;
		unmatched += gs_gpumem_proc_at(g->mem, i)->lost.unmatched;
		failed += gs_gpumem_proc_at(g->mem, i)->failed;
		note_process(s, i);
		if (add_samples(s, i))
			return -ENOMEM;
	}
	gs_sampler_stats(s->rt.sampler, &st);
	gs_profile_add_comment(
	    &s->prof,
	    "gpu memory: %u process(es) probed, %llu driver records, %llu over "
	    "the rate, %llu lost, %llu returns unmatched, %llu failed calls",
	    gs_gpumem_probe_count(g->mem_probe), (unsigned long long)st.gpu_mem_events,
	    (unsigned long long)st.gpu_mem_rate_limited, (unsigned long long)st.gpu_mem_lost,
	    (unsigned long long)unmatched, (unsigned long long)failed);
	if (st.gpu_mem_rate_limited || st.gpu_mem_lost)
		gs_profile_add_note(
		    &s->prof,
		    "%llu CUDA driver memory calls were not recorded (%llu over the rate of "
		    "%u per second and process, %llu with the ring buffer full): GPU live "
		    "bytes and peaks may be off",
		    (unsigned long long)(st.gpu_mem_rate_limited + st.gpu_mem_lost),
		    (unsigned long long)st.gpu_mem_rate_limited, GS_GPU_MEM_RATE_MAX,
		    (unsigned long long)st.gpu_mem_lost);
	return 0;
}

void gs_memory_detach(struct session *s)
{
	if (s->gpu.mem_probe)
		gs_gpumem_probe_detach(s->gpu.mem_probe);
}

void gs_memory_close(struct session *s)
{
	gs_gpumem_probe_free(s->gpu.mem_probe);
	gs_gpumem_free(s->gpu.mem);
	s->gpu.mem_probe = NULL;
	s->gpu.mem = NULL;
}
