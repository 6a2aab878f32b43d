/* SPDX-License-Identifier: MIT */
/* Uprobes on libcuda's memory entry points (see gpumem_probe.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/libbpf.h>

#include "bpf/reaper.h"
#include "gpu/gpu.h"
#include "gpu/gpumem_probe.h"
#include "gpusample/profile.h"
#include "proc/proc.h"
#include "util/clock.h"

struct mproc {
	uint32_t tgid;
	bool probed, gone;
	int n_fns;                 /* entry points probed */
	uint64_t base;             /* start of libcuda's offset-0 mapping */
	uint64_t rel[GS_MEMFN_NR]; /* entry points from base, 0: not exported */
	struct bpf_link *links[GS_MEMFN_NR][2];
	struct gs_maps_line map; /* that mapping (path: the copy below) */
	char path[512];
	uint64_t next_scan_ns, backoff_ns;
	char why[320]; /* why it was not probed, "" when it was or was never tried */
};

struct gs_gpumem_probe {
	struct bpf_program *enter, *ret, *free;
	struct gs_elf_cache *elf;
	struct gs_link_reaper *reaper;
	struct gs_proc_slots slots;
	unsigned probed;
	bool detached; /* the run ended: nothing more is probed */
};

struct gs_gpumem_probe *gs_gpumem_probe_new(struct bpf_program *enter, struct bpf_program *ret,
					    struct bpf_program *free_prog, struct gs_elf_cache *elf,
					    struct gs_link_reaper *reaper)
{
	struct gs_gpumem_probe *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->enter = enter;
	g->ret = ret;
	g->free = free_prog;
	g->reaper = reaper;
	g->elf = elf ? gs_elf_cache_ref(elf) : gs_elf_cache_new();
	if (!g->elf || gs_proc_slots_init(&g->slots, "gpumem", sizeof(struct mproc))) {
		gs_elf_cache_put(g->elf);
		free(g);
		return NULL;
	}
	return g;
}

/* The links go to the reaper: each close waits for an RCU grace period. */
static void unprobe(struct gs_gpumem_probe *g, struct mproc *p)
{
	for (int i = 0; i < GS_MEMFN_NR; i++)
		for (int k = 0; k < 2; k++) {
			gs_link_reaper_close(g->reaper, p->links[i][k]);
			p->links[i][k] = NULL;
		}
	p->probed = false;
}

void gs_gpumem_probe_free(struct gs_gpumem_probe *g)
{
	if (!g)
		return;
	gs_gpumem_probe_detach(g);
	gs_proc_slots_fini(&g->slots);
	gs_elf_cache_put(g->elf);
	free(g);
}

void gs_gpumem_probe_detach(struct gs_gpumem_probe *g)
{
	g->detached = true;
	for (size_t i = 0; i < g->slots.n; i++)
		unprobe(g, g->slots.all[i]);
}

int gs_gpumem_probe_bind(struct gs_gpumem_probe *g, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&g->slots, t, id);
}

static struct mproc *slot(struct gs_gpumem_probe *g, uint32_t tgid, bool create)
{
	struct mproc *p = gs_proc_slots_get(&g->slots, tgid, create);

	if (p && !p->tgid) {
		p->tgid = tgid;
		p->backoff_ns = GS_GPUMEM_RESCAN_NS;
		p->next_scan_ns = gs_mono_ns() + p->backoff_ns;
	}
	return p;
}

static bool is_libcuda(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	return base && !strncmp(base + 1, "libcuda.so", 10);
}

int gs_gpumem_symbols(Elf *elf, const GElf_Phdr *loads, size_t n_loads, uint64_t rel[GS_MEMFN_NR],
		      uint64_t off[GS_MEMFN_NR])
{
	uint64_t first = UINT64_MAX, page = (uint64_t)sysconf(_SC_PAGESIZE);
	Elf_Scn *scn = NULL;
	int found = 0;

	memset(rel, 0, GS_MEMFN_NR * sizeof(*rel));
	memset(off, 0, GS_MEMFN_NR * sizeof(*off));
	if (!elf)
		return -ENOEXEC;
	for (size_t i = 0; i < n_loads; i++)
		if (loads[i].p_offset == 0)
			first = loads[i].p_vaddr & ~(page - 1);
	if (first == UINT64_MAX)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(d, (int)i, &sym) ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
			    !sym.st_value)
				continue;
			n = elf_strptr(elf, sh.sh_link, sym.st_name);
			for (int f = 0; n && f < GS_MEMFN_NR; f++) {
				if (rel[f] || strcmp(n, gs_gpumem_fn_info(f)->name))
					continue;
				/* the file offset of the code: its PT_LOAD's */
				for (size_t k = 0; k < n_loads; k++) {
					const GElf_Phdr *ph = &loads[k];

					if (sym.st_value >= ph->p_vaddr &&
					    sym.st_value < ph->p_vaddr + ph->p_filesz &&
					    sym.st_value >= first) {
						rel[f] = sym.st_value - first;
						off[f] = sym.st_value - ph->p_vaddr + ph->p_offset;
						found++;
						break;
					}
				}
			}
		}
	}
	return found;
}

/* Not inlined: messages truncate at run time, not in the compiler's view. */
static __attribute__((noinline)) int refuse(struct mproc *p, int rc, const char *fmt, const char *a,
					    const char *b)
{
	snprintf(p->why, sizeof(p->why), fmt, a, b);
	return rc;
}

/* Probe libcuda (object o, its offset-0 mapping l) in p. */
static int probe_object(struct gs_gpumem_probe *g, struct mproc *p, const struct gs_elf_obj *o,
			const struct gs_maps_line *l)
{
	char real[PATH_MAX], why[PATH_MAX + 96], file[96];
	uint64_t off[GS_MEMFN_NR];
	struct stat st;
	int n;

	if (g->detached || (p->probed && p->base == l->start))
		return 0;
	unprobe(g, p);
	if (!l->path || strlen(l->path) >= sizeof(p->path))
		return refuse(p, -ENAMETOOLONG, "libcuda's path is too long%s%s", "", "");
	if (gs_cuda_trusted_lib(l->path, real, sizeof(real), why, sizeof(why)))
		return refuse(p, -EPERM, "libcuda %.80s not probed: %.100s", l->path, why);
	if (stat(real, &st) || st.st_ino != l->inode ||
	    st.st_dev != makedev(l->dev_major, l->dev_minor))
		return refuse(p, -ESTALE, "libcuda %.80s not probed: %.80s is not the mapped file",
			      l->path, real);
	n = gs_gpumem_symbols(o->elf, o->loads, o->n_loads, p->rel, off);
	if (n <= 0)
		return refuse(p, n ? n : -ENOENT,
			      "libcuda %.80s not probed: it exports no CUDA memory entry point%s",
			      l->path, "");
	/* the mapped file itself, never what the path names by now */
	snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", p->tgid,
		 (unsigned long long)l->start, (unsigned long long)l->end);
	for (int f = 0; f < GS_MEMFN_NR; f++) {
		const struct gs_gpumem_fn_info *fi = gs_gpumem_fn_info(f);

		if (!p->rel[f])
			continue;
		p->links[f][0] = bpf_program__attach_uprobe(fi->alloc ? g->enter : g->free, false,
							    (pid_t)p->tgid, file, off[f]);
		if (fi->alloc && p->links[f][0])
			p->links[f][1] = bpf_program__attach_uprobe(g->ret, true, (pid_t)p->tgid,
								    file, off[f]);
		if (!p->links[f][0] || (fi->alloc && !p->links[f][1])) {
			int rc = -errno;

			unprobe(g, p);
			snprintf(p->why, sizeof(p->why), "libcuda %.80s: cannot attach to %s (%s)",
				 l->path, fi->name, strerror(-rc));
			return rc;
		}
	}
	p->n_fns = n;
	p->map = *l;
	snprintf(p->path, sizeof(p->path), "%s", l->path);
	p->map.path = p->path;
	p->base = l->start;
	p->probed = true;
	p->why[0] = '\0';
	g->probed++;
	return 0;
}

static int h_probe(void *ctx, const struct gs_elf_obj *o)
{
	return is_libcuda(o->path);
}

static int h_attach(void *ctx, struct gs_proc *pr, struct gs_elf_obj *o,
		    const struct gs_maps_line *l)
{
	struct gs_gpumem_probe *g = ctx;
	struct mproc *p = slot(g, pr->tgid, true);

	if (!p)
		return -ENOMEM;
	p->gone = false;
	if (!o || !l || l->offset != 0)
		return 0;
	return probe_object(g, p, o, l);
}

static void h_maps_changed(void *ctx, struct gs_proc *pr, const struct gs_proc_maps_change *ch)
{
	struct gs_gpumem_probe *g = ctx;
	struct mproc *p;
	struct gs_elf_obj *o;

	for (size_t i = 0; i < ch->n_added; i++) {
		const struct gs_maps_line *l = ch->added[i];

		if (l->offset != 0 || !l->inode || !is_libcuda(l->path))
			continue;
		if (!(p = slot(g, pr->tgid, true)) || (p->probed && p->base == l->start))
			continue;
		if (!gs_elf_get_mapped(g->elf, pr->tgid, l, &o))
			probe_object(g, p, o, l);
	}
}

static int h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *child)
{
	struct gs_gpumem_probe *g = ctx;
	struct mproc *pp = parent ? slot(g, parent->tgid, false) : NULL;
	struct mproc *c = slot(g, child->tgid, true);
	struct gs_elf_obj *o;

	if (!c)
		return -ENOMEM;
	c->gone = false;
	if (!pp || !pp->probed || gs_elf_get_mapped(g->elf, child->tgid, &pp->map, &o))
		return 0;
	return probe_object(g, c, o, &pp->map);
}

static void h_detach(void *ctx, struct gs_proc *pr, bool exec)
{
	struct mproc *p = slot(ctx, pr->tgid, false);

	if (!p)
		return;
	unprobe(ctx, p);
	p->gone = !exec;
}

/* Unprobed processes: has one mapped libcuda since (a dlopen, as PyTorch
 * does at CUDA init)?  A check of the executable ranges, backing off. */
static void h_tick(void *ctx)
{
	struct gs_gpumem_probe *g = ctx;
	uint64_t now = gs_mono_ns();

	if (!g->slots.t)
		return;
	for (size_t i = 0; i < g->slots.n; i++) {
		struct mproc *p = g->slots.all[i];

		if (p->probed || p->gone || p->why[0] || now < p->next_scan_ns)
			continue;
		p->next_scan_ns = now + p->backoff_ns;
		if (p->backoff_ns < GS_GPUMEM_RESCAN_MAX_NS)
			p->backoff_ns *= 2;
		gs_proc_maps_reread(g->slots.t, p->tgid, GS_MAPS_CHECK, 0);
	}
}

void gs_gpumem_probe_handler(struct gs_gpumem_probe *g, struct gs_proc_handler *h)
{
	*h = (struct gs_proc_handler){
		.name = "gpumem",
		.ctx = g,
		.probe = h_probe,
		.attach = h_attach,
		.fork = h_fork,
		.detach = h_detach,
		.maps_changed = h_maps_changed,
		.tick = h_tick,
	};
}

int gs_gpumem_probe_fn(struct gs_gpumem_probe *g, uint32_t tgid, uint64_t ip)
{
	struct mproc *p = slot(g, tgid, false);

	for (int f = 0; p && f < GS_MEMFN_NR; f++)
		if (p->rel[f] && p->base + p->rel[f] == ip)
			return f;
	return -ENOENT;
}

void gs_gpumem_probe_notes(struct gs_gpumem_probe *g, struct gs_profile *prof)
{
	for (size_t i = 0; i < g->slots.n; i++) {
		const struct mproc *p = g->slots.all[i];

		if (p->why[0])
			gs_profile_add_note(prof, "pid %u: GPU memory not tracked: %s", p->tgid,
					    p->why);
		else if (p->n_fns)
			gs_profile_add_comment(
			    prof,
			    "gpu memory: pid %u: %d of %d CUDA memory entry points "
			    "probed in %s",
			    p->tgid, p->n_fns, GS_MEMFN_NR, p->path);
	}
}

unsigned gs_gpumem_probe_count(const struct gs_gpumem_probe *g)
{
	return g->probed;
}
