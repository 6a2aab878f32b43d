/* SPDX-License-Identifier: MIT */
/*
 * GPU side of a session: attach to the agent in each target (bpf/gpu_host),
 * feed its records to the cubin symbolizer and the join as they arrive (so
 * memory stays bounded over long runs: the join aggregates), and write the
 * joined GPU samples into the profile at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "session/session_int.h"
#include "gpusample.skel.h"
#include "util/log.h"

enum { LIB_OTHER, LIB_AGENT, LIB_DRIVER };

/* Which code a launch-stack frame belongs to: the agent's callback path
 * (agent, libcupti), the driver, or the program. */
static int lib_kind_of_path(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "libgpusample_agent", 18) || !strncmp(base, "libcupti", 8))
		return LIB_AGENT;
	return strncmp(base, "libcuda.so", 10) ? LIB_OTHER : LIB_DRIVER;
}

/* Right before the agent in tgid is armed (the GPU handler's prepare
 * hook): its launch stacks run through the agent, libcupti and libcuda,
 * mapped since the last maps snapshot of the unwinder, which would
 * otherwise only learn of them from the first launch stacks it failed to
 * walk (those would then all stop at the agent's first frame, and the join
 * would hang GPU samples under them). */
static void prepare_process(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;

	/* The agent has just loaded libcupti: every handler learns of the
	 * maps now (the symbolizer before the first launch records are
	 * trimmed: launch_frames_to_skip), and every table is built now, as
	 * for the processes there at attach: lazily, each object of the
	 * launch path (agent, libcupti, libcuda, libffi or libtorch_cuda, ...)
	 * would get its table only after a stack first walked into it.  Paid
	 * once per GPU process, before its agent arms. */
	gs_proc_maps_reread(s->rt.pt, tgid, GS_MAPS_NOW | GS_MAPS_BUILD_ALL, 0);
}

int gs_gpu_open(struct session *s)
{
	struct gpusample_bpf *skel = gs_sampler_skel(s->rt.sampler);
	struct gs_gpu_host_opts o = {
		.sampling_period = s->o->gpu_period_log2,
		.serialized = s->o->gpu_serialized,
		.scratch_bytes = (uint64_t)s->o->gpu_scratch_mib << 20,
		.hw_buffer_bytes = (uint64_t)s->o->gpu_hwbuf_mib << 20,
		.elf = s->rt.sym ? gs_sym_elf_cache(s->rt.sym) : NULL,
		.reaper = s->rt.reaper,
	};

	if (!s->o->gpu)
		return 0;
	s->gpu.cuda = gs_cuda_new(&s->prof);
	if (!s->gpu.cuda)
		return -ENOMEM;
	o.cuda = s->gpu.cuda; /* the one store of stall tables */
	/* Source lines after collection, off the ring-buffer loop. */
	gs_cuda_defer_lines(s->gpu.cuda, true);
	if (s->o->cupti) {
		char why[PATH_MAX + 64];
		int rc = gs_cuda_set_cupti(s->gpu.cuda, s->o->cupti, why, sizeof(why));
		if (rc) {
			gs_log(
			    "--cupti %s refused: %s; give a libcupti that only "
			    "root can write (e.g. /usr/local/cuda/extras/CUPTI/lib64/libcupti.so), "
			    "or --cupti none\n",
			    s->o->cupti, why);
			return rc;
		}
	}
	s->gpu.host = gs_gpu_host_new(skel->progs.gs_gpu_record,
				      gs_sampler_launch_prog(s->rt.sampler), &o);
	if (!s->gpu.host) {
		/* CPU profiling goes on; the report says why there is no GPU data. */
		gs_profile_add_note(&s->prof,
				    "GPU sampling off: cannot set up the GPU agent host side");
	}
	return 0;
}

/* RmProfilingAdminOnly from the NVIDIA driver's parameters: 1 when only
 * admin (root, CAP_SYS_ADMIN) processes may use the GPU's performance
 * counters, 0 when anyone may, -1 when unknown (no driver).  The file
 * comes from the nvidia module; GS_NVIDIA_PARAMS names another one for
 * tests.  Under `sudo -E` that name is the caller's, so it is opened like
 * every other file root reads for someone else: no symlink followed, no
 * FIFO waited on, and only a root-owned regular file is believed. */
static int rm_profiling_admin_only(void)
{
	const char *path = getenv("GS_NVIDIA_PARAMS");
	char line[256];
	int v = -1, fd;
	struct stat st;
	FILE *f;

	fd = open(path && *path ? path : "/proc/driver/nvidia/params",
		  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != 0 || !(f = fdopen(fd, "r"))) {
		close(fd);
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RmProfilingAdminOnly: %d", &v) == 1)
			break;
	fclose(f);
	return v == 0 || v == 1 ? v : -1;
}

/* sudo gpusample -- CMD runs CMD as the invoking user: with the driver's
 * default RmProfilingAdminOnly=1, CUPTI then refuses PC sampling.  Say so
 * before the run, with both ways out. */
static void check_gpu_privileges(struct session *s)
{
	const char *uid = getenv("SUDO_UID"), *user = getenv("SUDO_USER");

	if (s->o->as_root || geteuid() != 0 || !uid || !strtoul(uid, NULL, 10) ||
	    rm_profiling_admin_only() != 1)
		return;
	gs_log("the NVIDIA driver lets only admin users sample GPU PCs "
	       "(RmProfilingAdminOnly=1) and CMD will run as %s (uid %s): GPU sampling will be "
	       "refused.  Rerun with --as-root, or set the nvidia module option "
	       "NVreg_RestrictProfilingToAdminUsers=0\n",
	       user && *user ? user : "the sudo user", uid);
	gs_profile_add_note(
	    &s->prof,
	    "the command ran as uid %s while the NVIDIA driver restricts "
	    "GPU profiling to admin users (RmProfilingAdminOnly=1): use --as-root or "
	    "NVreg_RestrictProfilingToAdminUsers=0 for GPU samples",
	    uid);
}

void gs_gpu_launch_env(struct session *s)
{
	char path[512];
	const char *have = getenv("CUDA_INJECTION64_PATH");
	int n = 0;

	if (!s->o->gpu)
		return;
	check_gpu_privileges(s);
	if (have && *have) {
		/* Someone else's injection library: leave it, and say so. */
		if (!strstr(have, "libgpusample_agent"))
			gs_log("CUDA_INJECTION64_PATH is already set (%s); "
			       "GPU sampling needs the gpusample agent there\n",
			       have);
	} else if (gs_gpu_agent_path(path, sizeof(path))) {
		snprintf(s->gpu.agent_env[0], sizeof(s->gpu.agent_env[0]),
			 "CUDA_INJECTION64_PATH=%s", path);
		s->gpu.launch_env[n++] = s->gpu.agent_env[0];
	} else {
		gs_log("libgpusample_agent.so not found next to gpusample; "
		       "GPU sampling off (reinstall with make install)\n");
	}
	/* subscribe=launch: the agent subscribes to CUPTI in
	 * InitializeInjection, before the job loads its first module, so every
	 * cubin is seen (a dormant agent holds no subscription and misses the
	 * modules loaded meanwhile); it gives CUPTI back at disarm. */
	snprintf(s->gpu.agent_env[1], sizeof(s->gpu.agent_env[1]),
		 "GS_AGENT_OPTS=subscribe=launch,period=%u%s%s%.0u%s%.0u", s->o->gpu_period_log2,
		 s->o->gpu_serialized ? ",mode=serialized" : "",
		 s->o->gpu_scratch_mib ? ",scratch=" : "", s->o->gpu_scratch_mib << 20,
		 s->o->gpu_hwbuf_mib ? ",hwbuf=" : "", s->o->gpu_hwbuf_mib << 20);
	s->gpu.launch_env[n++] = s->gpu.agent_env[1];
	s->gpu.launch_env[n] = NULL;
}

void gs_gpu_start(struct session *s)
{
	if (!s->gpu.host)
		return;
	s->gpu.join = gs_join_new(&s->prof, s->window.t0_mono);
	if (s->gpu.join && gs_join_bind(s->gpu.join, s->rt.pt, s->gpu.join_slot)) {
		gs_join_free(s->gpu.join); /* no join: GPU records are not read */
		s->gpu.join = NULL;
	}
}

static void inject_fork(void *ctx, uint32_t parent, uint32_t child)
{
	gs_gpu_inject_fork(ctx, parent, child);
}

static void inject_gone(void *ctx, uint32_t tgid)
{
	gs_gpu_inject_gone(ctx, tgid);
}

static void inject_tick(void *ctx)
{
	gs_gpu_inject_tick(ctx);
}

int gs_gpu_register(struct session *s)
{
	const struct gs_proc_handler cuda = { .name = "gpu-cuda" }, join = { .name = "gpu-join" };
	struct gs_proc_handler h;
	int rc;

	s->gpu.plugin = (struct gs_gpu_plugin){
		.host = s->gpu.host,
		.hooks = { s, prepare_process, inject_fork, inject_gone, inject_tick },
	};
	gs_gpu_proc_handler(&s->gpu.plugin, &h);
	if ((rc = gs_proc_register(s->rt.pt, &h)) < 0 || !s->gpu.host)
		return rc < 0 ? rc : 0;
	if ((rc = gs_gpu_host_bind(s->gpu.host, s->rt.pt, rc)) ||
	    (rc = gs_proc_register(s->rt.pt, &cuda)) < 0 ||
	    (rc = gs_cuda_bind(s->gpu.cuda, s->rt.pt, rc)) ||
	    (rc = gs_proc_register(s->rt.pt, &join)) < 0)
		return rc;
	s->gpu.join_slot = rc;
	return 0;
}

static void on_cubin(struct session *s, const struct gs_gpu_cubin *c)
{
	size_t size = 0;
	const void *bytes = gs_gpu_host_cubin(s->gpu.host, c->crc, &size);

	gs_cuda_cubin_announced(s->gpu.cuda, c->crc); /* not kept is not "never announced" */

	if (!bytes || gs_cuda_has_cubin(s->gpu.cuda, c->crc))
		return;
	gs_cuda_add_cubin_borrowed(s->gpu.cuda, c->crc, bytes, size, c->gpu.tgid, NULL, NULL);
}

/* The file mapping addr in tgid, from the process table's snapshot (re-read
 * once when the kernel's mapping at addr is not the snapshot's): NULL when
 * none maps it. */
static const char *mapped_path(struct session *s, uint32_t tgid, uint64_t addr)
{
	const struct gs_proc *p = gs_proc_get(s->rt.pt, tgid);
	const struct gs_maps_line *l = p && p->maps ? gs_proc_maps_find(p->maps, addr) : NULL;

	if (p && !l && gs_proc_maps_reread(s->rt.pt, tgid, GS_MAPS_ADDR_MISS, addr) > 0)
		l = gs_proc_maps_find(p->maps, addr);
	return l && l->path && l->path[0] == '/' ? l->path : NULL;
}

static int lib_kind(struct session *s, uint32_t tgid, uint64_t addr)
{
	const char *path = mapped_path(s, tgid, addr);

	return path ? lib_kind_of_path(path) : LIB_OTHER;
}

/* Leaf user frames of a launch stack that are the agent's own callback
 * path (agent, libcupti, the driver's internals) and not the program's: the
 * stack then starts at the driver API the program called (the outermost
 * libcuda frame: cuLaunchKernel...), so GPU samples hang right under it in
 * every viewer.  When the native walk ended inside that path, the
 * outermost driver frame is still the best leaf there is (the Python frames
 * come on top of it); 0 when there is none (kept as is). */
static uint32_t launch_frames_to_skip(struct session *s, const struct gs_rec_cpu_view *v)
{
	uint32_t i, driver = UINT32_MAX;

	for (i = 0; i < v->n_user; i++) {
		int k = lib_kind(s, v->s->tgid, v->user[i]);

		if (k == LIB_OTHER)
			break;
		if (k == LIB_DRIVER)
			driver = i;
	}
	if (driver != UINT32_MAX)
		return driver;
	return i == v->n_user ? 0 : i;
}

/* A launch of a new kernel past the join's kernel caps is dropped (and
 * counted) before its stack costs a symbolization; 1 when admitted. */
static int launch_admit(struct session *s, const struct gs_gpu_launch *l, struct gs_rec_cpu_view *v)
{
	uint32_t skip;

	if (!gs_join_launch_admit(s->gpu.join, l->gpu.tgid, l->name_hash,
				  l->cbid == GS_CBID_GRAPH_LAUNCH ||
				      l->cbid == GS_CBID_GRAPH_LAUNCH_PTSZ))
		return 0;
	/* Without its kernel frames (the uprobe's own path into BPF, never
	 * the program's) and the agent's callback path. */
	skip = launch_frames_to_skip(s, v);
	v->kernel += v->n_kernel;
	v->n_kernel = 0;
	v->user += skip;
	v->n_user -= skip;
	return 1;
}

void gs_gpu_launch_stack(struct session *s, const struct gs_gpu_launch *l,
			 const struct gs_rec_cpu_view *v, uint32_t stack, const char *role)
{
	char comm[GS_COMM_LEN + 1];

	memcpy(comm, v->s->comm, GS_COMM_LEN);
	comm[GS_COMM_LEN] = '\0';
	gs_join_launch_record(s->gpu.join, l, stack, gs_profile_intern(&s->prof, comm),
			      gs_profile_intern(&s->prof, role));
}

bool gs_gpu_on(const struct session *s)
{
	return s->gpu.host && s->gpu.join;
}

int gs_gpu_record(struct session *s, struct gs_gpu_rec *r)
{
	gs_gpu_host_record(s->gpu.host, r);
	switch (r->type) {
	case GS_REC_GPU_CUBIN:
		on_cubin(s, r->cubin);
		return 0;
	case GS_REC_GPU_STALL_TABLE:
		gs_cuda_stall_table(s->gpu.cuda, r->table.t, r->table.reasons);
		return 0;
	case GS_REC_GPU_PC_BATCH:
		gs_join_pc_batch(s->gpu.join, s->gpu.cuda, &r->batch);
		return 0;
	case GS_REC_GPU_LAUNCH:
		return launch_admit(s, r->launch.l, &r->launch.stack);
	default:
		return 0;
	}
}

void gs_gpu_detach(struct session *s, int (*poll)(void *ctx, int timeout_ms))
{
	int late;

	if (!s->gpu.host)
		return;
	/* The agents drain and disarm first, so their last batches arrive
	 * before the probes go away. */
	late = gs_gpu_host_detach(s->gpu.host, poll, s, 2000);
	gs_gpu_inject_end(s); /* the agents are disarmed: their staged files go */
	if (late > 0)
		gs_profile_add_note(&s->prof,
				    "%d GPU agent(s) did not acknowledge the detach in 2 s; "
				    "their last GPU samples may be missing",
				    late);
}

static const char *reason_hint(const struct gs_gpu_proc_info *p)
{
	static const char prefix[] = "GPU sampling off: "; /* the agent's own wording */

	if (!p->message[0])
		return gs_gpu_state_name(p->state);
	return strncmp(p->message, prefix, sizeof(prefix) - 1) ? p->message
							       : p->message + sizeof(prefix) - 1;
}

static int note_process(void *ctx, const struct gs_gpu_proc_info *i)
{
	struct session *s = ctx;
	struct gs_procinfo *p = gs_procs_get(&s->rt.procs, i->tgid);
	const char *late;

	if (!p)
		return 0;
	switch (i->state) {
	case GS_GPU_PROC_NO_AGENT:
		break;
	case GS_GPU_PROC_OFF:
	case GS_GPU_PROC_ERROR:
		snprintf(p->gpu, sizeof(p->gpu), "off: %.80s", reason_hint(i));
		gs_profile_add_note(&s->prof, "pid %u: GPU sampling off: %s", i->tgid,
				    reason_hint(i));
		break;
	default:
		late = strstr(i->late_message, "GPU sampling started late");
		if (late)
			gs_profile_add_note(&s->prof, "pid %u: %s", i->tgid, late);
		snprintf(p->gpu, sizeof(p->gpu), "%s, %llu samples, %llu dropped",
			 gs_gpu_state_name(i->state), (unsigned long long)i->samples,
			 (unsigned long long)i->dropped_samples);
		break;
	}
	if (i->scratch_full)
		gs_profile_add_note(
		    &s->prof,
		    "pid %u: the CUPTI scratch buffer overflowed %llu time(s): "
		    "PC records were lost and sampling restarted with a bigger buffer; "
		    "start with a larger --gpu-scratch",
		    i->tgid, (unsigned long long)i->scratch_full);
	if (i->hw_buffer_full)
		gs_profile_add_note(&s->prof,
				    "pid %u: the GPU hardware buffer overflowed %llu time(s) "
				    "(%llu samples dropped); use a longer --gpu-period or a bigger "
				    "--gpu-hwbuf",
				    i->tgid, (unsigned long long)i->hw_buffer_full,
				    (unsigned long long)i->dropped_samples);
	return 0;
}

/* -p mode: a CUDA process without the agent gets one line saying how to
 * enable GPU sampling next time.  Uses CUDA: libcuda's code is mapped (the
 * table's last snapshot: the process may have exited since). */
static bool has_cuda(const struct gs_proc *p)
{
	const struct gs_proc_maps *m = p->maps;

	for (size_t i = 0; m && i < m->n; i++)
		if (m->m[i].exec && m->m[i].path && m->m[i].path[0] == '/' &&
		    strstr(m->m[i].path, "/libcuda.so"))
			return true;
	return false;
}

static void note_missing_agents(struct session *s)
{
	char path[512];

	for (size_t i = 0; i < s->rt.procs.n; i++) {
		struct gs_procinfo *p = s->rt.procs.all[i];

		if (p->gpu[0] || !p->is_root || !has_cuda(p->proc))
			continue;
		snprintf(p->gpu, sizeof(p->gpu), "no agent");
		gs_profile_add_note(&s->prof,
				    "pid %u uses CUDA but has no gpusample agent: start the job "
				    "with CUDA_INJECTION64_PATH=%s to get GPU samples (or, on "
				    "CPython 3.14+, attach with --inject)",
				    p->proc->tgid,
				    gs_gpu_agent_path(path, sizeof(path))
					? path
					: "<prefix>/lib/gpusample/libgpusample_agent.so");
	}
}

static void note_cubin_losses(struct session *s)
{
	struct gs_gpu_cubin_losses l;

	gs_gpu_host_cubin_losses(s->gpu.host, &l);
	gs_profile_add_comment(
	    &s->prof,
	    "gpu cubins kept: %llu MiB; not kept: %llu (%llu MiB "
	    "announced), %llu of them over the caps (%llu MiB per cubin, %llu MiB "
	    "in all)",
	    (unsigned long long)(l.kept_bytes >> 20), (unsigned long long)l.cubins,
	    (unsigned long long)(l.bytes >> 20), (unsigned long long)l.over_cap,
	    (unsigned long long)(l.max_bytes >> 20), (unsigned long long)(l.total_bytes >> 20));
	if (l.cubins)
		gs_profile_add_note(&s->prof,
				    "%llu cubins (%llu MiB announced) were not kept%s: "
				    "their GPU samples are attributed per kernel and pcOffset, "
				    "without source lines",
				    (unsigned long long)l.cubins,
				    (unsigned long long)(l.bytes >> 20),
				    l.over_cap ? " (over gpusample's cubin memory caps)" : "");
}

/* GPU records lost on the way are counted apart from CPU samples: a full
 * ring buffer costs GPU samples and launch stacks, not CPU samples. */
static void note_gpu_losses(struct session *s)
{
	struct gs_sampler_stats st;

	gs_sampler_stats(s->rt.sampler, &st);
	gs_profile_add_comment(&s->prof,
			       "gpu records lost: %llu (ring buffer full), rejected: %llu",
			       (unsigned long long)st.gpu_lost, (unsigned long long)st.gpu_bad);
	if (st.gpu_lost)
		gs_profile_add_note(&s->prof,
				    "%llu GPU records (PC batches, launch stacks) were lost: "
				    "the ring buffer was full; GPU samples are undercounted (try a "
				    "lower -F or a longer --gpu-period)",
				    (unsigned long long)st.gpu_lost);
	uint32_t launch_rate, record_rate;
	gs_sampler_gpu_rates(s->rt.sampler, &launch_rate, &record_rate);
	if (st.gpu_rate_limited)
		gs_profile_add_note(
		    &s->prof,
		    "%llu GPU records and launch events were dropped in BPF: their "
		    "process sent more than %u launch events or %u agent records in "
		    "a second, far above what gpusample's agent sends",
		    (unsigned long long)st.gpu_rate_limited, launch_rate, record_rate);
	if (st.gpu_bad)
		gs_profile_add_note(&s->prof,
				    "%llu GPU records from the agent were malformed and "
				    "dropped (agent and gpusample versions differ?)",
				    (unsigned long long)st.gpu_bad);
	note_cubin_losses(s);
}

/* Kernels of modules the job loaded while its agent was dormant: a dormant
 * agent holds no CUPTI subscription (torch.profiler may use CUPTI), so it
 * never saw those modules, and their cubins cannot be had afterwards. */
static void note_unannounced(struct session *s, uint64_t samples)
{
	uint64_t kernels, cubins;

	gs_cuda_unannounced(s->gpu.cuda, &kernels, &cubins);
	if (!kernels)
		return;
	gs_profile_add_note(
	    &s->prof,
	    "%llu GPU samples of %llu kernels (%llu cubins) have no source "
	    "lines: their modules were loaded before gpusample attached, while the agent "
	    "was dormant (not subscribed to CUPTI), so their cubins were never seen; they "
	    "are attributed per kernel and pcOffset.  For source lines run the job under "
	    "gpusample -- CMD, or start it with GS_AGENT_OPTS=subscribe=init",
	    (unsigned long long)samples, (unsigned long long)kernels, (unsigned long long)cubins);
}

/* What the caps on kernels, locations, launch history and correlation ids
 * (gpu/gpu.h, gpu/gpu.h) cut, by cause: counters and one
 * note naming them. */
static void note_caps(struct session *s, const struct gs_join_stats *st)
{
	struct gs_cuda_cap_losses l;

	gs_cuda_cap_losses(s->gpu.cuda, &l);
	s->out.counts[GS_C_gpu_kernels_capped] = st->kernels_capped + l.kernels;
	s->out.counts[GS_C_gpu_locations_capped] = l.locations;
	s->out.counts[GS_C_gpu_launches_trimmed] = st->launches_trimmed;
	s->out.counts[GS_C_gpu_corrs_capped] = st->corrs_capped;
	if (!st->kernels_capped && !l.kernels && !l.locations && !st->launches_trimmed &&
	    !st->corrs_capped)
		return;
	gs_profile_add_note(
	    &s->prof,
	    "GPU records past gpusample's memory caps: %llu launch events of new kernels "
	    "dropped (kernel caps %u per process, %u in all), %llu PC records of new kernels "
	    "and %llu of new locations under [other kernels] (kernel caps %u per process, %u "
	    "in all, %llu/%llu MiB of names; location caps %u, %u), %llu launch events cut "
	    "from their kernel's time window (history caps %u per kernel, %u per process, %u "
	    "in all), %llu correlation ids dropped (caps %u per process, %u in all)",
	    (unsigned long long)st->kernels_capped, GS_JOIN_KERNELS_PER_PID, GS_JOIN_KERNELS_TOTAL,
	    (unsigned long long)l.kernels, (unsigned long long)l.locations, GS_CUDA_KERNELS_PER_PID,
	    GS_CUDA_KERNELS_TOTAL, (unsigned long long)(GS_CUDA_NAME_BYTES_PER_PID >> 20),
	    (unsigned long long)(GS_CUDA_NAME_BYTES_TOTAL >> 20), GS_CUDA_LOCATIONS_PER_PID,
	    GS_CUDA_LOCATIONS_TOTAL, (unsigned long long)st->launches_trimmed,
	    GS_JOIN_LAUNCHES_PER_KERNEL, GS_JOIN_LAUNCHES_PER_PID, GS_JOIN_LAUNCHES_TOTAL,
	    (unsigned long long)st->corrs_capped, GS_JOIN_CORRS_PER_PID, GS_JOIN_CORRS_TOTAL);
}

int gs_gpu_finish(struct session *s)
{
	struct gs_join_stats st = { 0 };
	int rc = 0;

	if (!s->gpu.host)
		return 0;
	note_gpu_losses(s);
	int lines_rc = gs_cuda_resolve_lines(s->gpu.cuda);
	gs_gpu_host_foreach(s->gpu.host, note_process, s);
	gs_gpu_inject_notes(s);
	note_missing_agents(s);
	if (s->gpu.join) {
		rc = gs_join_emit(s->gpu.join, &st);
		if (!rc && st.samples[GS_JOIN_UNKNOWN])
			gs_profile_add_note(
			    &s->prof,
			    "%llu GPU samples are under [unknown launch] "
			    "(gpu_attribution=unknown): no launch of their kernel was seen "
			    "(launched before gpusample attached, or every launch skipped by "
			    "1-in-N launch sampling); attach earlier or run the job under "
			    "gpusample -- CMD",
			    (unsigned long long)st.samples[GS_JOIN_UNKNOWN]);
	}
	s->out.counts[GS_C_gpu_unknown_launch] = st.samples[GS_JOIN_UNKNOWN];
	s->out.counts[GS_C_gpu_unannounced] = st.unannounced;
	note_caps(s, &st);
	note_unannounced(s, st.unannounced);
	gs_cuda_add_comments(s->gpu.cuda);
	return rc ? rc : lines_rc;
}

void gs_gpu_close(struct session *s)
{
	gs_gpu_inject_end(s);
	if (s->gpu.join)
		gs_join_free(s->gpu.join);
	if (s->gpu.host)
		gs_gpu_host_free(s->gpu.host);
	if (s->gpu.cuda)
		gs_cuda_free(s->gpu.cuda);
	s->gpu.join = NULL;
	s->gpu.host = NULL;
	s->gpu.plugin.host = NULL; /* the table may outlive the host */
	s->gpu.cuda = NULL;
}
