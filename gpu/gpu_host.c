/* SPDX-License-Identifier: MIT */
/* Host side of the GPU agent (see gpu_host.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "proc/proc.h"
#include "bpf/reaper.h"
#include "gpusample/procstat.h"
#include "gpusample/records_codec.h"
#include "gpusample/stall.h"
#include "gpu/gpu.h"
#include "util/clock.h"
#include "util/hashmap.h"
#include "util/vec.h"

#define AGENT_NAME             "libgpusample_agent.so"
#define GS_AGENT_THREAD        "gs-agent"  /* the agent's watcher thread (gpu_sampler/agent.c) */
#define GS_AGENT_USDT_PROVIDER "gpusample" /* gpu_sampler/emit.c's STAP_PROBE2 */
#define RESCAN_NS              500000000ull
#define RESCAN_MAX_NS          4000000000ull
#define INIT_WAIT_NS           3000000000ull /* rescan every tick this long after the agent appears */
#define CUBIN_MAX_DEFAULT      (64ull << 20)  /* per cubin: the largest seen are ~10 MB */
#define CUBIN_TOTAL_DEFAULT    (512ull << 20) /* all cubins of a session */
#define CUBIN_MAX_COUNT        65536u

struct gpu_proc {
	struct gs_gpu_proc_info info;
	struct bpf_link *rec_link, *launch_link;
	uint64_t cfg_addr;
	uint64_t agent_base;           /* start of the agent's offset-0 mapping when attached */
	struct gs_maps_line agent_map; /* that mapping (path: info.agent_path) */
	uint64_t error_base;           /* agent_base of the image an attach error was about */
	uint64_t last_scan_ns;
	uint64_t rescan_ns; /* back-off between scans while no agent is mapped */
	bool acked;
	bool off_sticky;       /* info.message holds the reason sampling went off */
	bool gone;             /* exited: never rescanned (the pid may be reused) */
	bool ready;            /* options written, probes not attached: waits for
				* gs_gpu_host_arm (listed by gs_gpu_host_next_ready) */
	uint64_t init_seen_ns; /* agent mapped but not initialized since then (0: not so) */
};

struct cubin {
	uint64_t crc;
	void *data;
	size_t size;
};

struct gs_gpu_host {
	struct bpf_program *rec_prog, *launch_prog;
	struct gs_gpu_host_opts o;
	/* struct gpu_proc of each process, in its slot of the session's table
	 * (gs_gpu_host_bind) or of our own; slots.all in order of first
	 * sight, kept after exit for the report */
	struct gs_proc_slots slots;
	struct cubin *cubins;
	size_t n_cubins, cap_cubins;
	struct gs_hmap cubin_by_crc; /* crc -> index into cubins */
	uint64_t cubin_bytes;        /* kept */
	struct gs_gpu_cubin_losses lost;
	uint32_t next_session;
	struct gs_elf_cache *elf; /* the session's (opts.elf) or our own */
	struct gs_hmap probed;    /* gs_elf_obj.id -> 1 not the agent, 2 the agent */
};

const char *gs_gpu_state_name(enum gs_gpu_proc_state s)
{
	switch (s) {
	case GS_GPU_PROC_NO_AGENT:
		return "no agent";
	case GS_GPU_PROC_ATTACHED:
		return "attached";
	case GS_GPU_PROC_ARMED:
		return "armed";
	case GS_GPU_PROC_OFF:
		return "off";
	case GS_GPU_PROC_DISARMED:
		return "disarmed";
	case GS_GPU_PROC_ERROR:
		return "error";
	}
	return "?";
}

struct gs_gpu_host *gs_gpu_host_new(struct bpf_program *record_prog,
				    struct bpf_program *launch_prog,
				    const struct gs_gpu_host_opts *o)
{
	struct gs_gpu_host *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->rec_prog = record_prog;
	h->launch_prog = launch_prog;
	if (o)
		h->o = *o;
	if (!h->o.cubin_max_bytes)
		h->o.cubin_max_bytes = CUBIN_MAX_DEFAULT;
	if (!h->o.cubin_total_bytes)
		h->o.cubin_total_bytes = CUBIN_TOTAL_DEFAULT;
	/* Sessions differ across gpusample runs so an agent never mistakes a
	 * new attach for the previous one. */
	h->next_session = ((uint32_t)time(NULL) << 8) ^ ((uint32_t)getpid() << 20);
	if (!h->next_session)
		h->next_session = 1;
	elf_version(EV_CURRENT);
	h->elf = h->o.elf ? gs_elf_cache_ref(h->o.elf) : gs_elf_cache_new();
	if (!h->elf || gs_proc_slots_init(&h->slots, "gpu", sizeof(struct gpu_proc))) {
		gs_elf_cache_put(h->elf);
		free(h);
		return NULL;
	}
	return h;
}

static struct gpu_proc *proc_at(const struct gs_gpu_host *h, size_t i)
{
	return h->slots.all[i];
}

/* The links go to the reaper: each close waits for an RCU grace period. */
static void proc_detach(struct gs_gpu_host *h, struct gpu_proc *p)
{
	gs_link_reaper_close_usdt(h->o.reaper, p->rec_link);
	gs_link_reaper_close_usdt(h->o.reaper, p->launch_link);
	p->rec_link = p->launch_link = NULL;
}

void gs_gpu_host_free(struct gs_gpu_host *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->slots.n; i++)
		proc_detach(h, proc_at(h, i));
	for (size_t i = 0; i < h->n_cubins; i++)
		free(h->cubins[i].data);
	free(h->cubins);
	gs_hmap_free(&h->cubin_by_crc);
	gs_hmap_free(&h->probed);
	gs_proc_slots_fini(&h->slots);
	gs_elf_cache_put(h->elf);
	free(h);
}

int gs_gpu_host_bind(struct gs_gpu_host *h, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&h->slots, t, id);
}

static struct gpu_proc *proc_find(struct gs_gpu_host *h, uint32_t tgid, bool create)
{
	struct gpu_proc *p = gs_proc_slots_get(&h->slots, tgid, create);

	if (p && !p->info.tgid) /* new */
		p->info.tgid = tgid;
	return p;
}

/* Is this mapped file the agent?  Recognised by its USDT notes (provider
 * "gpusample"), not its name: asked once per ELF object of the cache. */
static bool is_agent(struct gs_gpu_host *h, uint32_t tgid, const struct gs_maps_line *l,
		     struct gs_elf_obj **out)
{
	struct gs_elf_obj *o;
	bool added;

	if (gs_elf_get_mapped(h->elf, tgid, l, &o))
		return false;
	*out = o;
	uint64_t *v = gs_hmap_slot(&h->probed, o->id, &added);
	if (!v)
		return false;
	if (added)
		*v = 1 + (gs_elf_usdt_provider(o, GS_AGENT_USDT_PROVIDER) > 0);
	return *v == 2;
}

/* tgid's maps as the process table has them (a reference), re-read when
 * its executable ranges changed since (dlopen of the agent maps code; an
 * exec too): the re-read tells every handler of the new mappings.  A
 * process the table does not know yet (our own table, or a process asked
 * about before its first event) gets an entry first.  -ESRCH when it is
 * gone or exited; while proc/ backs off (-EAGAIN), the snapshot it has. */
static int table_maps(struct gs_gpu_host *h, uint32_t tgid, struct gs_proc_maps **out)
{
	struct gs_proc *p = gs_proc_get(h->slots.t, tgid);
	int rc;

	if (!p && !gs_proc_table_add(h->slots.t, tgid, 0))
		return -ENOMEM;
	rc = gs_proc_maps_reread(h->slots.t, tgid, GS_MAPS_CHECK, 0);
	if (rc < 0 && rc != -EAGAIN)
		return rc;
	p = gs_proc_get(h->slots.t, tgid);
	if (!p || !p->maps)
		return -ESRCH;
	*out = gs_proc_maps_get(p->maps);
	return 0;
}

/* The agent's path, its offset-0 mapping in tgid (m->path: NULL) and its
 * object in the ELF cache (*o, when o is not NULL). */
static int find_agent(struct gs_gpu_host *h, uint32_t tgid, char *path, size_t len,
		      struct gs_maps_line *m, struct gs_elf_obj **o)
{
	struct gs_elf_obj *obj = NULL;
	struct gs_proc_maps *snap;
	int found = 0, err = table_maps(h, tgid, &snap);

	if (err)
		return err;
	for (size_t i = 0; i < snap->n && !found; i++) {
		const struct gs_maps_line *l = &snap->m[i];

		/* A deleted file stays: an agent that gpusample --inject staged
		 * is removed at detach while the job keeps it mapped, and a
		 * later attach arms it through map_files (the file itself). */
		if (!l->path || l->path[0] != '/' || !l->inode || l->offset != 0 ||
		    !is_agent(h, tgid, l, &obj))
			continue;
		snprintf(path, len, "%s", l->path);
		*m = *l;
		m->path = NULL;
		if (o)
			*o = obj;
		found = 1;
	}
	gs_proc_maps_put(snap);
	return found;
}

/* The agent has finished InitializeInjection (libcupti is loaded, options
 * parsed) once its watcher thread runs.  Attaching earlier works, but the
 * unwind tables refreshed just before the attach would then miss libcupti,
 * and the first launch stacks (which pass through libcupti) would stop
 * there. */
static bool agent_ready(uint32_t tgid)
{
	char path[64], comm[32];
	struct dirent *d;
	bool ready = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%u/task", tgid);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!ready && (d = readdir(dir))) {
		char file[96];
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "/proc/%u/task/%.16s/comm", tgid, d->d_name);
		if (!(f = fopen(file, "re")))
			continue;
		if (fgets(comm, sizeof(comm), f) &&
		    !strncmp(comm, GS_AGENT_THREAD, strlen(GS_AGENT_THREAD)) &&
		    (comm[strlen(GS_AGENT_THREAD)] == '\n' || !comm[strlen(GS_AGENT_THREAD)]))
			ready = true;
		fclose(f);
	}
	closedir(dir);
	return ready;
}

/* Address of gs_agent_cfg in tgid: load bias + st_value of the dynamic
 * symbol, read from the agent's object in the ELF cache (is_agent opened
 * and checked it: no second open of a file the target maps). */
static int cfg_address(const struct gs_elf_obj *o, uint64_t base, uint64_t *addr)
{
	Elf_Scn *scn = NULL;
	uint64_t first_vaddr = UINT64_MAX;

	if (!o->elf)
		return o->err ? o->err : -ENOEXEC;
	for (size_t i = 0; i < o->n_loads; i++)
		if (o->loads[i].p_offset == 0)
			first_vaddr = o->loads[i].p_vaddr & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
	if (first_vaddr == UINT64_MAX)
		return -EINVAL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / (sh.sh_entsize ? sh.sh_entsize : 1); i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(d, i, &sym))
				continue;
			n = elf_strptr(o->elf, sh.sh_link, sym.st_name);
			if (n && !strcmp(n, "gs_agent_cfg") &&
			    sym.st_size >= sizeof(struct gs_gpu_agent_cfg)) {
				*addr = base - first_vaddr + sym.st_value;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* Low 32 bits of a process's start time (never 0 for a live one); 0 when
 * it is gone. */
static uint32_t proc_start(uint32_t pid)
{
	struct gs_proc_stat st;

	if (gs_proc_stat(pid, &st))
		return 0;
	return (uint32_t)st.start_time ? (uint32_t)st.start_time : 1;
}

/* Another live gpusample armed this agent and has not detached: its pid,
 * else 0.  (A dead owner's probes are gone and the agent disarmed itself.) */
static uint32_t live_owner(const struct gs_gpu_agent_cfg *cfg)
{
	if (!cfg->session || cfg->detach_req == cfg->session || !cfg->owner_pid ||
	    cfg->owner_pid == (uint32_t)getpid())
		return 0;
	return proc_start(cfg->owner_pid) == cfg->owner_start_lo ? cfg->owner_pid : 0;
}

static int proc_error(struct gpu_proc *p, int rc, const char *fmt, const char *arg)
{
	p->info.state = GS_GPU_PROC_ERROR;
	snprintf(p->info.message, sizeof(p->info.message), fmt, arg, strerror(-rc));
	return rc;
}

static int proc_attach(struct gs_gpu_host *h, struct gpu_proc *p, const char *map_path,
		       const struct gs_maps_line *m, const struct gs_elf_obj *o)
{
	struct gs_gpu_agent_cfg cfg;
	uint64_t base = m->start;
	uint32_t owner;
	int rc;

	if (strlen(map_path) >= sizeof(p->info.agent_path) || strlen(map_path) > PATH_MAX - 32)
		return proc_error(p, -ENAMETOOLONG, "agent path %s is too long (%s)", map_path);
	snprintf(p->info.agent_path, sizeof(p->info.agent_path), "%.*s",
		 (int)sizeof(p->info.agent_path) - 1, map_path);
	if ((rc = cfg_address(o, base, &p->cfg_addr)))
		return proc_error(
		    p, rc, "agent %s has no gs_agent_cfg (%s): agent and gpusample versions differ",
		    map_path);
	if ((rc = gs_proc_mem_read(p->info.tgid, p->cfg_addr, &cfg, sizeof(cfg), NULL)))
		return proc_error(p, rc, "cannot read the agent's options in %s (%s): run as root",
				  map_path);
	if (cfg.magic != GS_GPU_CFG_MAGIC || cfg.version != GS_GPU_CFG_VERSION)
		return proc_error(p, -EPROTO,
				  "agent %s speaks another options version (%s): use the agent "
				  "built with this gpusample",
				  map_path);
	if ((owner = live_owner(&cfg))) {
		p->info.state = GS_GPU_PROC_ERROR;
		p->info.reason = GS_GPU_R_OTHER_OWNER;
		snprintf(
		    p->info.message, sizeof(p->info.message),
		    "GPU agent already in use by gpusample pid %u: GPU sampling of this process "
		    "is left to it (one agent, one owner); this run has CPU samples only. Stop "
		    "pid %u first to get GPU samples here",
		    owner, owner);
		return -EBUSY;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.magic = GS_GPU_CFG_MAGIC;
	cfg.version = GS_GPU_CFG_VERSION;
	cfg.session = h->next_session++;
	if (!cfg.session)
		cfg.session = h->next_session++;
	cfg.sampling_period = h->o.sampling_period;
	cfg.collection_mode = h->o.serialized ? GS_GPU_MODE_SERIALIZED : GS_GPU_MODE_CONTINUOUS;
	cfg.launch_events_per_s = h->o.launch_events_per_s;
	cfg.drain_interval_ms = h->o.drain_interval_ms;
	cfg.hw_buffer_bytes = h->o.hw_buffer_bytes;
	cfg.scratch_bytes = h->o.scratch_bytes;
	cfg.owner_pid = (uint32_t)getpid();
	cfg.owner_start_lo = proc_start(cfg.owner_pid);
	if ((rc = gs_proc_mem_write(p->info.tgid, p->cfg_addr, &cfg, sizeof(cfg))))
		return proc_error(p, rc, "cannot pass options to the agent in %s (%s): run as root",
				  map_path);
	p->info.session = cfg.session;
	p->acked = false;
	p->off_sticky = false;
	p->agent_base = base;
	p->agent_map = *m;
	p->info.attach_ktime_ns = gs_mono_ns();
	p->info.armed_ktime_ns = 0;
	/* Attaching arms the agent: everything a launch stack walks through
	 * must have unwind tables before the first launch event, so the
	 * caller prepares them first (gs_gpu_host_next_ready), then arms. */
	p->ready = true;
	return 1;
}

/* Attach the USDT probes of a configured process (the record probe's
 * semaphore is what arms the agent).  map_path: its agent_path; not
 * inlined, so messages truncate at run time as in proc_attach. */
static __attribute__((noinline)) int proc_arm(struct gs_gpu_host *h, struct gpu_proc *p,
					      const char *map_path)
{
	char file[PATH_MAX];
	struct stat st;
	int rc;

	p->ready = false;
	/* map_files: libbpf and the kernel resolve it to the mapped file itself,
	 * never to where a path the target controls points by now; and only if
	 * that range still maps the file cfg_address read (an unmap and another
	 * mmap there since would put the probes into another file). */
	snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", p->info.tgid,
		 (unsigned long long)p->agent_map.start, (unsigned long long)p->agent_map.end);
	if (stat(file, &st) || st.st_ino != p->agent_map.inode ||
	    st.st_dev != makedev(p->agent_map.dev_major, p->agent_map.dev_minor))
		return proc_error(p, -ESTALE, "the agent %s was unmapped before arming (%s)",
				  map_path);
	/* The launch probe first: the record probe's semaphore is what arms.
	 * The reaper's lock: a USDT link it closes meanwhile would change
	 * libbpf's USDT manager under the attach (bpf/reaper.h). */
	gs_link_reaper_usdt_lock(h->o.reaper);
	p->launch_link = bpf_program__attach_usdt(h->launch_prog, p->info.tgid, file, "gpusample",
						  "launch", NULL);
	rc = p->launch_link ? 0 : -errno;
	if (p->launch_link) {
		p->rec_link = bpf_program__attach_usdt(h->rec_prog, p->info.tgid, file, "gpusample",
						       "record", NULL);
		rc = p->rec_link ? 0 : -errno;
	}
	gs_link_reaper_usdt_unlock(h->o.reaper);
	if (!p->launch_link)
		return proc_error(p, rc, "cannot attach to the agent's launch probe in %s (%s)",
				  map_path);
	if (!p->rec_link) {
		proc_detach(h, p);
		return proc_error(p, rc, "cannot attach to the agent's record probe in %s (%s)",
				  map_path);
	}
	p->info.state = GS_GPU_PROC_ATTACHED;
	snprintf(p->info.message, sizeof(p->info.message), "attached to %s", map_path);
	return 1;
}

/* Attach if the agent is mapped and initialized.  Safe to call any number
 * of times, in any order with exec events (the session sees those late):
 * an attachment stays as long as the same agent image is mapped at the same
 * address; after an exec (agent gone or mapped elsewhere) the old links and
 * cfg address are dropped first, so nothing is ever written into the new
 * image at a stale address. */
static int scan(struct gs_gpu_host *h, struct gpu_proc *p)
{
	char path[PATH_MAX];
	struct gs_maps_line m = { 0 };
	struct gs_elf_obj *obj = NULL;
	uint64_t base;
	int rc;

	p->last_scan_ns = gs_mono_ns();
	rc = find_agent(h, p->info.tgid, path, sizeof(path), &m, &obj);
	base = m.start;
	if (rc < 0)
		return rc; /* gone: the exit event cleans up */
	if (p->rec_link) {
		if (rc > 0 && base == p->agent_base)
			return 1; /* still the image we attached to */
		proc_detach(h, p);
		p->info.state = GS_GPU_PROC_NO_AGENT;
		snprintf(p->info.message, sizeof(p->info.message), "new program image (exec)");
	}
	if (p->ready) {
		if (rc > 0 && base == p->agent_base)
			return 1; /* configured, the caller arms it next */
		p->ready = false; /* exec'ed since: configure the new image */
	}
	if (p->info.state == GS_GPU_PROC_ERROR) {
		if (rc > 0 && base == p->error_base)
			return -EIO; /* reported once for this image; don't retry every tick */
		p->info.state = GS_GPU_PROC_NO_AGENT;
	}
	if (rc > 0 && !agent_ready(p->info.tgid)) {
		/* InitializeInjection runs right after the driver maps the agent
		 * (milliseconds); a forked child of a CUDA process never gets a
		 * watcher thread (CUDA does not survive fork) and must not be
		 * rescanned every tick forever. */
		if (!p->init_seen_ns)
			p->init_seen_ns = p->last_scan_ns;
		return 0;
	}
	p->init_seen_ns = 0;
	if (rc == 0)
		return 0;
	rc = proc_attach(h, p, path, &m, obj);
	if (rc < 0)
		p->error_base = base;
	return rc;
}

int gs_gpu_host_add_process(struct gs_gpu_host *h, uint32_t tgid)
{
	struct gpu_proc *p = proc_find(h, tgid, true);

	if (!p)
		return -ENOMEM;
	p->gone = false; /* a fork/exec event: alive (possibly a reused pid) */
	p->rescan_ns = RESCAN_NS;
	return scan(h, p);
}

int gs_gpu_host_agent_mapped(struct gs_gpu_host *h, uint32_t tgid)
{
	char path[PATH_MAX];
	struct gs_maps_line m;

	return find_agent(h, tgid, path, sizeof(path), &m, NULL);
}

void gs_gpu_host_remove_process(struct gs_gpu_host *h, uint32_t tgid)
{
	struct gpu_proc *p = proc_find(h, tgid, false);

	if (p) {
		proc_detach(h, p); /* info kept for the report */
		p->gone = true;
		p->ready = false;
	}
}

uint32_t gs_gpu_host_next_ready(const struct gs_gpu_host *h)
{
	for (size_t i = 0; i < h->slots.n; i++)
		if (proc_at(h, i)->ready && !proc_at(h, i)->gone)
			return proc_at(h, i)->info.tgid;
	return 0;
}

int gs_gpu_host_arm(struct gs_gpu_host *h, uint32_t tgid)
{
	struct gpu_proc *p = proc_find(h, tgid, false);

	if (!p || !p->ready || p->gone)
		return -ENOENT;
	int rc = proc_arm(h, p, p->info.agent_path);
	if (rc < 0)
		p->error_base = p->agent_base;
	return rc;
}

/* The poll's scan.  No agent is attached before its watcher thread runs
 * (scan would find it mapped and wait for the thread), so a process with no
 * such thread is passed over after a look at its threads' names: a few
 * small files, where the maps of a big job are hundreds of kilobytes to
 * parse.  While a mapped agent initializes (waiting_init), scan as ever. */
static int poll_scan(struct gs_gpu_host *h, struct gpu_proc *p, bool waiting_init)
{
	if (!waiting_init && !agent_ready(p->info.tgid)) {
		p->last_scan_ns = gs_mono_ns();
		return 0;
	}
	return scan(h, p);
}

void gs_gpu_host_poll(struct gs_gpu_host *h)
{
	uint64_t now = gs_mono_ns();

	for (size_t i = 0; i < h->slots.n; i++) {
		struct gpu_proc *p = proc_at(h, i);
		bool waiting_init = p->init_seen_ns && now - p->init_seen_ns < INIT_WAIT_NS;

		if (p->info.state != GS_GPU_PROC_NO_AGENT || p->gone || p->ready)
			continue;
		if (!p->rescan_ns)
			p->rescan_ns = RESCAN_NS;
		if (!waiting_init && now - p->last_scan_ns < p->rescan_ns)
			continue;
		/* Back off (0.5 s doubling to 4 s) while no agent shows up: the
		 * driver loads it at cuInit, early in a job. */
		if (poll_scan(h, p, waiting_init) == 0 && !p->init_seen_ns &&
		    p->rescan_ns < RESCAN_MAX_NS)
			p->rescan_ns *= 2;
	}
}

/* Index of the cubin with this crc, or -1. */
static ssize_t cubin_index(const struct gs_gpu_host *h, uint64_t crc)
{
	const uint64_t *v = gs_hmap_get(&h->cubin_by_crc, crc);
	return v ? (ssize_t)*v : -1;
}

static void lose_cubin(struct gs_gpu_host *h, uint64_t size, bool over_cap)
{
	h->lost.cubins++;
	h->lost.bytes += size;
	if (over_cap)
		h->lost.over_cap++;
}

/* Read a cubin the agent announced, within the caps: the sizes are the
 * target's word, so neither one record nor a flood of them may take more
 * than cubin_max_bytes / cubin_total_bytes of gpusample's memory. */
/* A second key of a cubin already stored: the same copy, not read again
 * (a key already taken keeps its cubin). */
static void alias_cubin(struct gs_gpu_host *h, const struct gs_gpu_cubin *c)
{
	ssize_t i = cubin_index(h, c->alias_of);

	if (i >= 0 && cubin_index(h, c->crc) < 0 &&
	    gs_hmap_put(&h->cubin_by_crc, c->crc, (uint64_t)i))
		lose_cubin(h, 0, false); /* no memory for the key */
}

static void store_cubin(struct gs_gpu_host *h, uint32_t tgid, const struct gs_gpu_cubin *c)
{
	struct cubin *b;
	void *data;

	if (c->alias_of) {
		alias_cubin(h, c);
		return;
	}
	if (!c->addr || !c->size || cubin_index(h, c->crc) >= 0)
		return;
	if (c->size > h->o.cubin_max_bytes || h->n_cubins >= CUBIN_MAX_COUNT ||
	    c->size > h->o.cubin_total_bytes - h->cubin_bytes) {
		lose_cubin(h, c->size, true);
		return;
	}
	if (h->n_cubins == h->cap_cubins) {
		size_t cap = h->cap_cubins ? h->cap_cubins * 2 : 32;
		b = realloc(h->cubins, cap * sizeof(*b));
		if (!b) {
			lose_cubin(h, c->size, false);
			return;
		}
		h->cubins = b;
		h->cap_cubins = cap;
	}
	data = malloc(c->size);
	if (!data || gs_proc_mem_read(tgid, c->addr, data, c->size, NULL)) {
		free(data);
		lose_cubin(h, c->size, false);
		return;
	}
	b = &h->cubins[h->n_cubins];
	b->crc = c->crc;
	b->data = data;
	b->size = c->size;
	if (gs_hmap_put(&h->cubin_by_crc, c->crc, h->n_cubins)) {
		free(data);
		lose_cubin(h, c->size, false);
		return;
	}
	h->n_cubins++;
	h->cubin_bytes += c->size;
}

void gs_gpu_host_cubin_losses(const struct gs_gpu_host *h, struct gs_gpu_cubin_losses *l)
{
	*l = h->lost;
	l->max_bytes = h->o.cubin_max_bytes;
	l->total_bytes = h->o.cubin_total_bytes;
	l->kept_bytes = h->cubin_bytes;
}

/* Warp samples of a batch: base stall reasons only (no _not_issued twins,
 * no counters, no index its context's table lacks), as the one store of
 * stall tables classifies them. */
static uint64_t batch_samples(struct gs_gpu_host *h, const struct gs_rec_pc_batch_view *v)
{
	const struct gs_gpu_common *g = &v->b->gpu;

	return h->o.cuda
		   ? gs_cuda_base_samples(h->o.cuda, g->tgid, g->ctx_uid, v->counts, v->b->n_counts)
		   : 0;
}

void gs_gpu_host_on_record(struct gs_gpu_host *h, const struct gs_rec_hdr *rec)
{
	struct gs_gpu_rec r;

	if (!gs_gpu_rec_decode(rec, &r))
		gs_gpu_host_record(h, &r);
}

void gs_gpu_host_record(struct gs_gpu_host *h, const struct gs_gpu_rec *r)
{
	const struct gs_rec_hdr *rec = r->hdr;
	struct gpu_proc *p = proc_find(h, r->gpu->tgid, true);

	if (!p)
		return;
	switch (r->type) {
	case GS_REC_GPU_STATUS: {
		const struct gs_gpu_status *s = r->status;
		/* Once sampling went off, that reason is what the report must
		 * say, not the "process exiting: 0 PC samples" that follows. */
		if (s->state == GS_GPU_ST_ARMED && !s->gpu.ctx_uid)
			p->off_sticky = false;
		if (s->state == GS_GPU_ST_ARMED && !s->gpu.ctx_uid &&
		    s->reason == GS_GPU_R_OTHER_SUBSCRIBER)
			snprintf(p->info.late_message, sizeof(p->info.late_message), "%.*s",
				 (int)sizeof(s->message), s->message);
		if (!p->off_sticky)
			snprintf(p->info.message, sizeof(p->info.message), "%.*s",
				 (int)sizeof(s->message), s->message); /* no NUL guaranteed */
		if (s->state == GS_GPU_ST_OFF && !s->gpu.ctx_uid)
			p->off_sticky = true;
		p->info.contexts = s->contexts;
		p->info.contexts_armed = s->contexts_armed;
		p->info.dropped_samples = s->dropped_samples;
		p->info.hw_buffer_full = s->hw_buffer_full;
		if (s->reason)
			p->info.reason = s->reason;
		if (s->state == GS_GPU_ST_RECOVERED && s->reason == GS_GPU_R_SCRATCH_FULL)
			p->info.scratch_full++;
		if (s->gpu.ctx_uid)
			return; /* per-context detail; the process state follows process records */
		if (s->state == GS_GPU_ST_ARMED) {
			p->info.state = GS_GPU_PROC_ARMED;
			if (!p->info.armed_ktime_ns)
				p->info.armed_ktime_ns = rec->ktime_ns;
		} else if (s->state == GS_GPU_ST_OFF) {
			p->info.state = GS_GPU_PROC_OFF;
		} else if (s->state == GS_GPU_ST_DISARMED) {
			if (p->info.state != GS_GPU_PROC_OFF)
				p->info.state = GS_GPU_PROC_DISARMED;
			if (s->session == p->info.session)
				p->acked = true;
		}
		return;
	}
	case GS_REC_GPU_CUBIN:
		store_cubin(h, r->gpu->tgid, r->cubin);
		return;
	case GS_REC_GPU_STALL_TABLE:
		return; /* kept by gs_cuda_stall_table: the one store */
	case GS_REC_GPU_PC_BATCH:
		p->info.batches++;
		p->info.samples += batch_samples(h, &r->batch);
		return;
	case GS_REC_GPU_LAUNCH:
		p->info.launch_events++;
		return;
	}
}

int gs_gpu_host_detach(struct gs_gpu_host *h, int (*poll)(void *ctx, int timeout_ms), void *ctx,
		       int timeout_ms)
{
	uint64_t deadline = gs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	int waiting = 0;

	for (size_t i = 0; i < h->slots.n; i++) {
		struct gpu_proc *p = proc_at(h, i);
		uint32_t req = p->info.session;
		char path[PATH_MAX];
		struct gs_maps_line m = { 0 };

		if (!p->rec_link)
			continue;
		/* Only into the image we attached to: after an unseen exec the
		 * address means something else. */
		if (find_agent(h, p->info.tgid, path, sizeof(path), &m, NULL) > 0 &&
		    m.start == p->agent_base &&
		    gs_proc_mem_write(p->info.tgid,
				      p->cfg_addr + offsetof(struct gs_gpu_agent_cfg, detach_req),
				      &req, sizeof(req)) == 0 &&
		    kill(p->info.tgid, 0) == 0)
			waiting++;
		else
			p->acked = true; /* gone: nothing to wait for */
	}
	while (waiting && gs_mono_ns() < deadline) {
		if (poll)
			poll(ctx, 20);
		waiting = 0;
		for (size_t i = 0; i < h->slots.n; i++) {
			struct gpu_proc *p = proc_at(h, i);
			if (p->rec_link && !p->acked && kill(p->info.tgid, 0) == 0)
				waiting++;
		}
	}
	for (size_t i = 0; i < h->slots.n; i++)
		proc_detach(h, proc_at(h, i));
	return waiting;
}

const void *gs_gpu_host_cubin(struct gs_gpu_host *h, uint64_t crc, size_t *size)
{
	ssize_t i = cubin_index(h, crc);

	if (i < 0)
		return NULL;
	if (size)
		*size = h->cubins[i].size;
	return h->cubins[i].data;
}

int gs_gpu_host_foreach(struct gs_gpu_host *h,
			int (*fn)(void *ctx, const struct gs_gpu_proc_info *p), void *ctx)
{
	for (size_t i = 0; i < h->slots.n; i++) {
		int rc = fn(ctx, &proc_at(h, i)->info);
		if (rc)
			return rc;
	}
	return 0;
}

static const char *reason_short(uint32_t r)
{
	switch (r) {
	case GS_GPU_R_NO_CUPTI:
		return "no libcupti";
	case GS_GPU_R_CUPTI_TOO_OLD:
		return "CUPTI too old";
	case GS_GPU_R_PRIVILEGES:
		return "insufficient privileges";
	case GS_GPU_R_OTHER_SUBSCRIBER:
		return "another CUPTI subscriber";
	case GS_GPU_R_HW_BUSY:
		return "hardware busy";
	case GS_GPU_R_UNSUPPORTED_DEVICE:
		return "unsupported device";
	case GS_GPU_R_SECOND_CONTEXT:
		return "second context on a GPU";
	case GS_GPU_R_OUT_OF_MEMORY:
		return "out of memory";
	case GS_GPU_R_HW_BUFFER_FULL:
		return "hardware buffer full";
	case GS_GPU_R_NO_DRIVER:
		return "no CUDA driver";
	case GS_GPU_R_BAD_CONFIG:
		return "options refused";
	case GS_GPU_R_OTHER_OWNER:
		return "agent in use by another gpusample";
	case GS_GPU_R_SCRATCH_FULL:
		return "scratch buffer full";
	default:
		return "CUPTI error";
	}
}

void gs_gpu_host_summary(struct gs_gpu_host *h, char *buf, size_t len)
{
	uint32_t armed = 0, ctx = 0, off = 0, reason = 0;
	uint64_t samples = 0;

	for (size_t i = 0; i < h->slots.n; i++) {
		const struct gs_gpu_proc_info *p = &proc_at(h, i)->info;
		samples += p->samples;
		if (p->state == GS_GPU_PROC_ARMED) {
			armed++;
			ctx += p->contexts_armed;
		} else if (p->state == GS_GPU_PROC_OFF || p->state == GS_GPU_PROC_ERROR) {
			off++;
			reason = p->reason;
		}
	}
	if (!armed && !off && !samples)
		snprintf(buf, len, "GPU: no agent");
	else if (!armed && off)
		snprintf(buf, len, "GPU: off (%s)", reason_short(reason));
	else
		snprintf(buf, len, "GPU: %u armed (%u ctx), %llu samples%s", armed, ctx,
			 (unsigned long long)samples, off ? ", some off" : "");
}

const char *gs_gpu_agent_path(char *buf, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	static const char *const rel[] = { "/" AGENT_NAME, "/../lib/gpusample/" AGENT_NAME };

	if (n <= 0)
		return NULL;
	exe[n] = 0;
	if (!(slash = strrchr(exe, '/')))
		return NULL;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(*rel); i++) {
		char path[PATH_MAX + 64], real[PATH_MAX];
		snprintf(path, sizeof(path), "%s%s", exe, rel[i]);
		if (access(path, R_OK) == 0 && realpath(path, real) && strlen(real) < len) {
			snprintf(buf, len, "%s", real);
			return buf;
		}
	}
	return NULL;
}
