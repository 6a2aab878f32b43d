/* SPDX-License-Identifier: MIT */
/*
 * gs_sym_*: the processes' maps snapshots (in their slots of the process
 * table: gs_sym_bind, or of a table of its own), the location cache
 * and the translation of resolved frames into profile functions, lines,
 * locations and mappings.  See symbolizer.h for the contract.
 *
 * Location cache keys: (profile mapping id, address) for addresses in a file
 * module, so every process that maps a library at the same place shares the
 * location; (snapshot id | SNAP_NS, address) for JIT / anonymous / unknown
 * addresses; (KERNEL_NS, address) for kernel text; (ENTRY_NS | mapping id,
 * address) for a stripped libc's entry frame named from its caller.
 *
 * Not thread-safe: one session thread symbolizes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include "native/native.h"
#include "native/sym_internal.h"
#include "util/hash.h"
#include "util/hashmap.h"
#include "util/vec.h"
#include "util/clock.h"

#define SNAP_NS   (1ull << 62)
#define KERNEL_NS (1ull << 63)
#define NOPROC_NS (3ull << 62)
/* (ENTRY_NS | mapping id, address): a stripped libc's __libc_start_call_main
 * named from its caller (gs_sym_entry_frame). */
#define ENTRY_NS (1ull << 61)
/* (KERNEL_FN_NS, symbol start): the one location of a kernel function
 * when kernel addresses are not kept (bit 62 clear: no SNAP_NS id). */
#define KERNEL_FN_NS (KERNEL_NS | 1)
/* A miss re-reads the perf map of a live process at most this often (its
 * maps: proc/'s GS_MAPS_ADDR_MISS rule). */
#define PERFMAP_INTERVAL_NS 1000000000ull

struct proc {
	uint32_t tgid;
	bool exited;
	uint64_t last_perf_ns;
	struct gs_sym_snapshot *snap;
};

struct loc_slot {
	uint64_t k1, k2;
	uint32_t loc;
};

struct kmod_map {
	uint64_t start, end;
	uint32_t mapping;
};

struct gs_symbolizer {
	struct gs_profile *p;
	struct gs_sym_modcache *mc;
	struct gs_proc_slots slots; /* struct proc of each process (gs_sym_bind) */
	struct loc_slot *locs;      /* the location cache's entries */
	size_t n_locs, cap_locs;
	struct gs_hmap loc_index; /* hash(k1, k2) -> index in locs */
	uint32_t next_snap_id;
	uint32_t asking; /* the tgid whose first read we asked proc/ for */
	struct gs_kallsyms ks;
	struct kmod_map *kmods; /* per kallsyms module index */
	bool kernel_addresses;  /* keep them in locations and mappings */
};

struct gs_profile *gs_sym_profile(struct gs_symbolizer *s)
{
	return s->p;
}

struct gs_symbolizer *gs_sym_new(struct gs_profile *p)
{
	struct gs_symbolizer *s = calloc(1, sizeof(*s));
	struct gs_proc_handler h;

	if (!s)
		return NULL;
	s->p = p;
	s->kernel_addresses = getenv("GS_KERNEL_ADDRESSES") &&
			      !strcmp(getenv("GS_KERNEL_ADDRESSES"), "1");
	s->mc = gs_sym_modcache_new(NULL);
	gs_sym_proc_handler(s, &h); /* alone, the own table's re-reads reach it */
	if (!s->mc || gs_proc_slots_init_handler(&s->slots, &h, sizeof(struct proc))) {
		gs_sym_free(s);
		return NULL;
	}
	return s;
}

struct gs_elf_cache *gs_sym_elf_cache(struct gs_symbolizer *s)
{
	return gs_sym_modcache_elf(s->mc);
}

void gs_sym_free(struct gs_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->slots.n; i++)
		gs_sym_snapshot_put(((struct proc *)s->slots.all[i])->snap);
	gs_proc_slots_fini(&s->slots);
	free(s->locs);
	gs_hmap_free(&s->loc_index);
	gs_sym_modcache_free(s->mc);
	gs_kallsyms_free(&s->ks);
	free(s->kmods);
	free(s);
}

/* ---- process table ------------------------------------------------------ */

int gs_sym_bind(struct gs_symbolizer *s, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&s->slots, t, id);
}

static struct proc *proc_find(struct gs_symbolizer *s, uint32_t tgid)
{
	return gs_proc_slots_get(&s->slots, tgid, false);
}

static struct proc *proc_insert(struct gs_symbolizer *s, uint32_t tgid)
{
	struct proc *pr = gs_proc_slots_get(&s->slots, tgid, true);

	if (pr && !pr->tgid) /* new */
		pr->tgid = tgid;
	return pr;
}

static void proc_set_snap(struct proc *pr, struct gs_sym_snapshot *snap)
{
	gs_sym_snapshot_put(pr->snap);
	pr->snap = snap;
}

/* proc/'s snapshot of tgid, read now (fresh) or when there is none. */
static struct gs_proc_maps *table_maps(struct gs_symbolizer *s, uint32_t tgid, bool fresh)
{
	struct gs_proc *p = gs_proc_get(s->slots.t, tgid);

	if (p && (fresh || !p->maps)) {
		s->asking = tgid; /* our maps_changed: this call takes it */
		gs_proc_maps_reread(s->slots.t, tgid, GS_MAPS_NOW, 0);
		s->asking = 0;
	}
	return p ? p->maps : NULL;
}

/* A snapshot of tgid made from raw (proc/'s). */
static int snapshot_from(struct gs_symbolizer *s, uint32_t tgid, struct gs_proc_maps *raw,
			 struct gs_sym_snapshot **out)
{
	if (!raw)
		return -ESRCH;
	return gs_sym_snapshot_make(s->mc, tgid, ++s->next_snap_id, raw, out);
}

static int snapshot_new(struct gs_symbolizer *s, uint32_t tgid, bool fresh)
{
	struct gs_sym_snapshot *snap;
	struct proc *pr = proc_insert(s, tgid);
	int err;

	if (!pr)
		return -ENOMEM;
	if ((err = snapshot_from(s, tgid, table_maps(s, tgid, fresh), &snap)))
		return err;
	proc_set_snap(pr, snap);
	pr->exited = false;
	return 0;
}

int gs_sym_add_process(struct gs_symbolizer *s, uint32_t tgid)
{
	struct proc *pr = proc_find(s, tgid);
	if (pr && pr->snap)
		return 0;
	return snapshot_new(s, tgid, false);
}

/* Process for an address lookup: snapshot it at first sight; one that cannot
 * be read (gone, kernel thread) is remembered without a snapshot so that
 * its other addresses do not retry. */
static struct proc *proc_get(struct gs_symbolizer *s, uint32_t tgid)
{
	struct proc *pr = proc_find(s, tgid);
	if (!pr && gs_sym_add_process(s, tgid) != 0 && (pr = proc_insert(s, tgid)))
		pr->exited = true;
	if (!pr)
		pr = proc_find(s, tgid);
	return pr && pr->snap ? pr : NULL;
}

int gs_sym_exec(struct gs_symbolizer *s, uint32_t tgid)
{
	return snapshot_new(s, tgid, true);
}

int gs_sym_fork(struct gs_symbolizer *s, uint32_t parent, uint32_t child)
{
	struct proc *pp = proc_find(s, parent);
	if (!pp || !pp->snap)
		return snapshot_new(s, child, false);
	struct gs_sym_snapshot *snap = pp->snap;
	struct proc *pc = proc_insert(s, child);
	if (!pc)
		return -ENOMEM;
	snap->refs++;
	proc_set_snap(pc, snap);
	pc->exited = false;
	return 0;
}

void gs_sym_exit(struct gs_symbolizer *s, uint32_t tgid)
{
	struct proc *pr = proc_find(s, tgid);
	if (pr)
		pr->exited = true; /* keep the snapshot: its samples come later */
}

void gs_sym_retire(struct gs_symbolizer *s, uint32_t tgid)
{
	struct proc *pr = proc_find(s, tgid);

	if (pr && pr->exited)
		proc_set_snap(pr, NULL);
}

bool gs_sym_has_process(struct gs_symbolizer *s, uint32_t tgid)
{
	struct proc *pr = proc_find(s, tgid);
	return pr && pr->snap;
}

static int map_cmp(const void *a, const void *b)
{
	const struct gs_sym_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Take proc/'s newer snapshot raw of a live process (dlopen after attach).
 * Mappings of the old snapshot that no longer exist (dlclose) are kept so
 * that earlier samples in them still resolve. */
static int adopt(struct gs_symbolizer *s, struct proc *pr, struct gs_proc_maps *raw)
{
	struct gs_sym_snapshot *snap, *old = pr->snap;
	int err = snapshot_from(s, pr->tgid, raw, &snap);

	if (err) {
		if (err == -ESRCH)
			pr->exited = true;
		return err;
	}
	size_t keep = 0;
	for (size_t i = 0; i < old->n; i++)
		if (old->maps[i].mod && !gs_sym_snapshot_find(snap, old->maps[i].start))
			keep++;
	if (keep) {
		struct gs_sym_map *nm = realloc(snap->maps, (snap->n + keep) * sizeof(*nm));
		if (!nm) {
			gs_sym_snapshot_put(snap);
			return -ENOMEM;
		}
		snap->maps = nm;
		size_t n = snap->n;
		for (size_t i = 0; i < old->n; i++) {
			const struct gs_sym_map *om = &old->maps[i];
			if (!om->mod || gs_sym_snapshot_find(snap, om->start))
				continue;
			nm[n] = *om;
			/* the old snapshot's text goes away with it */
			nm[n].path = om->path ? strdup(om->path) : NULL;
			nm[n].own_path = nm[n].path != NULL;
			n++;
		}
		snap->n = n;
		qsort(snap->maps, snap->n, sizeof(*snap->maps), map_cmp);
	}
	proc_set_snap(pr, snap);
	return 0;
}

/* Whether proc/'s mapping l at a is not the snapshot's m there. */
static bool differs(const struct gs_sym_map *m, const struct gs_maps_line *l)
{
	if (!m || !l)
		return m || l;
	return m->start != l->start || m->end != l->end || m->ino != l->inode ||
	       m->dev != makedev(l->dev_major, l->dev_minor) || m->exec != l->exec ||
	       (l->inode && m->offset != l->offset);
}

/* Whether the perf map behind an address outside every module may name it
 * now: a fork child's snapshot is its parent's, perf map included, or the
 * file changed.  At most once per PERFMAP_INTERVAL_NS. */
static bool perfmap_may_help(struct proc *pr, const struct gs_sym_map *m)
{
	uint64_t t = gs_mono_ns();

	if ((m && m->mod) || (pr->last_perf_ns && t - pr->last_perf_ns < PERFMAP_INTERVAL_NS) ||
	    (pr->snap->tgid == pr->tgid &&
	     gs_perfmap_unchanged(&pr->snap->perf, pr->snap->perf_path)))
		return false;
	pr->last_perf_ns = t;
	return true;
}

/* A miss at a (unresolvable in the snapshot): proc/ re-reads the maps when
 * its rule says that can help (GS_MAPS_ADDR_MISS), and a snapshot of proc/
 * newer than ours is taken when its mapping at a is not ours; the perf map
 * is read again when it may name a.  A miss that cannot be helped leaves
 * the rate limits alone, so a library mapped meanwhile is found at its own
 * first miss. */
static int reread_miss(struct gs_symbolizer *s, struct proc *pr, const struct gs_sym_map *m,
		       uint64_t a)
{
	struct gs_proc *p;

	if (pr->exited)
		return -EAGAIN;
	if (gs_proc_maps_reread(s->slots.t, pr->tgid, GS_MAPS_ADDR_MISS, a) == -ESRCH) {
		pr->exited = true;
		return -EAGAIN;
	}
	p = gs_proc_get(s->slots.t, pr->tgid);
	if (!p || !p->maps)
		return -EAGAIN;
	if (p->maps != pr->snap->raw && differs(m, gs_proc_maps_find(p->maps, a)))
		return adopt(s, pr, p->maps);
	return perfmap_may_help(pr, m) ? adopt(s, pr, p->maps) : -EAGAIN;
}

/* ---- location cache ----------------------------------------------------- */

struct loc_q {
	const struct gs_symbolizer *s;
	uint64_t k1, k2;
};

static bool loc_eq(const void *ctx, uint64_t val)
{
	const struct loc_q *q = ctx;
	const struct loc_slot *e = &q->s->locs[val];
	return e->k1 == q->k1 && e->k2 == q->k2;
}

static uint64_t loc_hash(uint64_t k1, uint64_t k2)
{
	return gs_hash_combine(gs_mix64(k1), k2);
}

static uint32_t loc_get(struct gs_symbolizer *s, uint64_t k1, uint64_t k2)
{
	struct loc_q q = { s, k1, k2 };
	uint64_t *v = gs_hmap_find_by(&s->loc_index, loc_hash(k1, k2), loc_eq, &q);
	return v ? s->locs[*v].loc : 0;
}

/* Cache loc under (k1, k2); an allocation failure leaves it uncached. */
static uint32_t loc_put(struct gs_symbolizer *s, uint64_t k1, uint64_t k2, uint32_t loc)
{
	if (!loc)
		return 0;
	struct loc_q q = { s, k1, k2 };
	uint64_t *v = gs_hmap_find_by(&s->loc_index, loc_hash(k1, k2), loc_eq, &q);
	if (v) {
		s->locs[*v].loc = loc;
		return loc;
	}
	struct loc_slot e = { k1, k2, loc };
	if (GS_PUSH(s->locs, s->n_locs, s->cap_locs, e))
		return loc;
	if (gs_hmap_add(&s->loc_index, loc_hash(k1, k2), s->n_locs - 1))
		s->n_locs--;
	return loc;
}


/* ---- profile construction ----------------------------------------------- */

static uint32_t add_function(struct gs_symbolizer *s, const char *name, const char *system_name,
			     const char *file, int64_t start_line)
{
	struct gs_function f = {
		.name = gs_profile_intern(s->p, name && *name ? name : "[unknown]"),
		.system_name = gs_profile_intern(s->p, system_name),
		.file = gs_profile_intern(s->p, file),
		.start_line = start_line,
	};
	if (f.name == (gs_str)-1 || f.system_name == (gs_str)-1 || f.file == (gs_str)-1)
		return 0;
	return gs_profile_add_function(s->p, &f);
}

/* One-line location named `name` (fallbacks, perf maps, kernel). */
static uint32_t add_named_location(struct gs_symbolizer *s, uint32_t mapping, uint64_t addr,
				   enum gs_frame_kind kind, const char *name,
				   const char *system_name)
{
	uint32_t fid = add_function(s, name, system_name, NULL, 0);
	if (!fid)
		return 0;
	struct gs_line l = { .function = fid, .line = 0 };
	return gs_profile_add_location(s->p, mapping, addr, kind, &l, 1);
}

static uint32_t module_mapping(struct gs_symbolizer *s, const struct gs_sym_map *m)
{
	struct gs_sym_module *mod = m->mod;
	for (size_t i = 0; i < mod->n_maps; i++)
		if (mod->maps[i].bias == m->load_bias)
			return mod->maps[i].mapping_id;
	struct gs_mapping gm = {
		.start = m->start,
		.limit = m->end,
		.offset = m->offset,
		.file = gs_profile_intern(s->p, mod->path),
		.build_id = gs_profile_intern(s->p, mod->build_id),
	};
	if (gm.file == (gs_str)-1 || gm.build_id == (gs_str)-1)
		return 0;
	uint32_t id = gs_profile_add_mapping(s->p, &gm);
	struct gs_sym_bias_map *nm = realloc(mod->maps, (mod->n_maps + 1) * sizeof(*nm));
	if (!id || !nm)
		return id;
	mod->maps = nm;
	mod->maps[mod->n_maps++] = (struct gs_sym_bias_map){ m->load_bias, id };
	return id;
}

static uint32_t resolve_in_module(struct gs_symbolizer *s, const struct gs_sym_map *m, uint64_t a)
{
	uint32_t mid = module_mapping(s, m);
	if (!mid)
		return 0;
	uint32_t loc = loc_get(s, mid, a);
	if (loc)
		return loc;
	uint64_t vaddr = a - m->load_bias;
	struct gs_sym_result r;
	if (!m->has_bias || gs_sym_module_resolve(m->mod, vaddr, &r))
		memset(&r, 0, sizeof(r));
	if (!r.n) {
		/* "libfoo.so+0x1234": the ELF vaddr (what addr2line -e libfoo.so
		 * takes) of the function's entry from .eh_frame when the symbol
		 * was stripped, so one function is one name; else of the address. */
		char name[300];
		uint64_t fn = m->has_bias ? vaddr : a - m->start + m->offset;

		if (m->has_bias)
			gs_sym_module_function_start(m->mod, vaddr, &fn);
		snprintf(name, sizeof(name), "%s+0x%" PRIx64, m->mod->base, fn);
		return loc_put(s, mid, a,
			       add_named_location(s, mid, a, GS_FRAME_NATIVE, name, NULL));
	}
	struct gs_line lines[GS_SYM_MAX_INLINE];
	bool ok = true, files = false, nums = false;
	for (int i = 0; i < r.n; i++) {
		const struct gs_sym_frame *f = &r.f[i];
		lines[i].function = add_function(s, f->name, f->system_name, f->file,
						 f->start_line);
		lines[i].line = f->line;
		ok = ok && lines[i].function;
		files |= f->file != NULL;
		nums |= f->line > 0;
	}
	loc = ok ? gs_profile_add_location(s->p, mid, a, GS_FRAME_NATIVE, lines, (uint32_t)r.n) : 0;
	if (loc) {
		/* truthful flags: what this profile's locations actually carry */
		struct gs_mapping *gm = &s->p->mappings[mid - 1];
		gm->has_functions = true;
		gm->has_filenames |= files;
		gm->has_lines |= nums;
		gm->has_inlines |= r.n > 1;
	}
	gs_sym_result_clear(&r);
	return loc_put(s, mid, a, loc);
}

/* Address outside any file module: perf map, else a pseudo-mapping name
 * ("[vdso]"), "[jit]" for anonymous executable memory, else "[unknown]". */
static uint32_t resolve_other(struct gs_symbolizer *s, const struct gs_sym_snapshot *snap,
			      const struct gs_sym_map *m, uint64_t a)
{
	uint64_t k1 = SNAP_NS | snap->id;
	uint32_t loc = loc_get(s, k1, a);
	if (loc)
		return loc;
	const struct gs_perfmap_entry *pe = gs_perfmap_find(&snap->perf, a);
	const char *name = "[unknown]";
	char *dem = NULL;
	if (pe)
		name = dem = gs_demangle(pe->name);
	if (pe && !dem)
		name = pe->name;
	else if (!pe && m && m->path && m->path[0] == '[')
		name = m->path;
	else if (!pe && m && !m->path && m->exec)
		name = "[jit]"; /* anonymous executable memory: oneDNN, CPython 3.12+ trampolines */
	loc = add_named_location(s, 0, a, GS_FRAME_NATIVE, name, dem ? pe->name : NULL);
	free(dem);
	return loc_put(s, k1, a, loc);
}

static bool resolvable(const struct gs_sym_snapshot *snap, const struct gs_sym_map *m, uint64_t a)
{
	return (m && m->mod) || gs_perfmap_find(&snap->perf, a);
}

uint32_t gs_sym_native(struct gs_symbolizer *s, uint32_t tgid, uint64_t addr, bool is_return_addr)
{
	/* a return address points after the call: look up the call itself */
	uint64_t a = is_return_addr && addr ? addr - 1 : addr;
	struct proc *pr = proc_get(s, tgid);
	if (!pr) {
		uint32_t loc = loc_get(s, NOPROC_NS, a);
		return loc ? loc
			   : loc_put(
				 s, NOPROC_NS, a,
				 add_named_location(s, 0, a, GS_FRAME_NATIVE, "[unknown]", NULL));
	}
	const struct gs_sym_map *m = gs_sym_snapshot_find(pr->snap, a);
	if (!resolvable(pr->snap, m, a)) {
		uint32_t loc = loc_get(s, SNAP_NS | pr->snap->id, a);
		if (loc)
			return loc;
		if (reread_miss(s, pr, m, a) == 0)
			m = gs_sym_snapshot_find(pr->snap, a);
	}
	if (m && m->mod)
		return resolve_in_module(s, m, a);
	return resolve_other(s, pr->snap, m, a);
}

/* The function name of location loc's innermost line, or "". */
static const char *loc_name(const struct gs_profile *p, uint32_t loc)
{
	const struct gs_location *l = gs_profile_location(p, loc);

	if (!l->n_lines)
		return "";
	return gs_profile_str(p, gs_profile_function(p, p->lines[l->first_line].function)->name);
}

/* "__libc_start_main", "__libc_start_main@@GLIBC_2.34", "..._impl". */
static bool is_libc_start_main(const char *n)
{
	size_t l = strlen("__libc_start_main");

	return !strncmp(n, "__libc_start_main", l) &&
	       (!n[l] || n[l] == '@' || !strcmp(n + l, "_impl"));
}

uint32_t gs_sym_entry_frame(struct gs_symbolizer *s, uint32_t loc, uint32_t caller)
{
	const struct gs_location *l;
	const char *n;
	uint64_t addr;
	uint32_t mid, named;

	if (!loc || !caller || !is_libc_start_main(loc_name(s->p, caller)))
		return loc;
	n = loc_name(s->p, loc);
	if (strncmp(n, "libc.so", 7) || !strstr(n, "+0x"))
		return loc;
	l = gs_profile_location(s->p, loc);
	mid = l->mapping;
	addr = l->address;
	named = loc_get(s, ENTRY_NS | mid, addr);
	if (named)
		return named;
	named = add_named_location(s, mid, addr, GS_FRAME_NATIVE, "__libc_start_call_main", NULL);
	return named ? loc_put(s, ENTRY_NS | mid, addr, named) : loc;
}

/* ---- kernel ------------------------------------------------------------- */

static int kernel_load(struct gs_symbolizer *s)
{
	int err = gs_kallsyms_load(&s->ks, NULL);
	if (err)
		return err;
	s->kmods = calloc(s->ks.n_modules, sizeof(*s->kmods));
	if (!s->kmods)
		return -ENOMEM;
	for (size_t i = 0; i < s->ks.n_modules; i++)
		s->kmods[i].start = UINT64_MAX;
	for (size_t i = 0; i < s->ks.n; i++) {
		struct kmod_map *km = &s->kmods[s->ks.s[i].module];
		if (s->ks.s[i].addr < km->start)
			km->start = s->ks.s[i].addr;
		if (s->ks.s[i].addr + 1 > km->end)
			km->end = s->ks.s[i].addr + 1;
	}
	return 0;
}

static uint32_t kernel_mapping(struct gs_symbolizer *s, uint32_t module)
{
	struct kmod_map *km = &s->kmods[module];
	if (km->mapping)
		return km->mapping;
	char name[256];
	if (module)
		snprintf(name, sizeof(name), "[%s]", s->ks.modules[module]);
	else
		snprintf(name, sizeof(name), "[kernel.kallsyms]");
	struct gs_mapping gm = {
		.start = s->kernel_addresses ? km->start : 0,
		.limit = s->kernel_addresses ? km->end : 0,
		.file = gs_profile_intern(s->p, name),
		.has_functions = true,
	};
	if (gm.file == (gs_str)-1)
		return 0;
	return km->mapping = gs_profile_add_mapping(s->p, &gm);
}

void gs_sym_keep_kernel_addresses(struct gs_symbolizer *s, bool keep)
{
	s->kernel_addresses = keep;
}

/* The location of kernel symbol k (NULL: unknown) at addr: one per address
 * when addresses are kept, else one per function at address 0 (the
 * kernel's layout, which KASLR hides, stays out of the profile). */
static uint32_t kernel_location(struct gs_symbolizer *s, const struct gs_ksym *k, uint64_t addr)
{
	uint64_t key = k ? k->addr : 0;
	uint32_t loc = s->kernel_addresses ? 0 : loc_get(s, KERNEL_FN_NS, key);

	if (loc)
		return loc;
	if (!k) {
		loc = add_named_location(s, 0, s->kernel_addresses ? addr : 0, GS_FRAME_KERNEL,
					 "[unknown]", NULL);
	} else {
		uint32_t mid = kernel_mapping(s, k->module);
		char *dem = gs_demangle(k->name);
		loc = add_named_location(s, mid, s->kernel_addresses ? addr : 0, GS_FRAME_KERNEL,
					 dem ? dem : k->name, dem ? k->name : NULL);
		free(dem);
	}
	return s->kernel_addresses ? loc : loc_put(s, KERNEL_FN_NS, key, loc);
}

uint32_t gs_sym_kernel(struct gs_symbolizer *s, uint64_t addr)
{
	uint32_t loc = loc_get(s, KERNEL_NS, addr);
	if (loc)
		return loc;
	if (!s->ks.loaded && kernel_load(s))
		s->ks.all_zero = true; /* unreadable: every frame "[unknown]" */
	const struct gs_ksym *k = s->kmods ? gs_kallsyms_find(&s->ks, addr) : NULL;
	return loc_put(s, KERNEL_NS, addr, kernel_location(s, k, addr));
}

/* ---- mapping queries ---------------------------------------------------- */

static void fill_info(const struct gs_sym_map *m, struct gs_sym_mapping_info *out)
{
	memset(out, 0, sizeof(*out));
	out->path = m->path;
	out->open_path = m->mod && m->mod->fd >= 0 ? m->mod->open_path : NULL;
	out->start = m->start;
	out->end = m->end;
	out->offset = m->offset;
	out->load_bias = m->has_bias ? m->load_bias : 0;
	if (m->mod)
		memcpy(out->build_id, m->mod->build_id, sizeof(out->build_id));
}

int gs_sym_mapping_for(struct gs_symbolizer *s, uint32_t tgid, uint64_t addr,
		       struct gs_sym_mapping_info *out)
{
	struct proc *pr = proc_get(s, tgid);
	if (!pr)
		return -ESRCH;
	const struct gs_sym_map *m = gs_sym_snapshot_find(pr->snap, addr);
	if (!resolvable(pr->snap, m, addr) && reread_miss(s, pr, m, addr) == 0)
		m = gs_sym_snapshot_find(pr->snap, addr);
	if (!m || !m->path || m->path[0] != '/')
		return -ENOENT;
	fill_info(m, out);
	return 0;
}

int gs_sym_foreach_mapping(struct gs_symbolizer *s, uint32_t tgid,
			   int (*fn)(void *ctx, const struct gs_sym_mapping_info *m), void *ctx)
{
	struct proc *pr = proc_get(s, tgid);
	if (!pr)
		return -ESRCH;
	struct gs_sym_snapshot *snap = pr->snap;
	snap->refs++; /* fn may call back into us (mapping_for -> reread) */
	int ret = 0;
	for (size_t i = 0; i < snap->n && !ret; i++) {
		const struct gs_sym_map *m = &snap->maps[i];
		if (!m->exec || !m->mod)
			continue;
		struct gs_sym_mapping_info info;
		fill_info(m, &info);
		ret = fn(ctx, &info);
	}
	gs_sym_snapshot_put(snap);
	return ret;
}

/* ---- the process table's handler ------------------------------------------ */

/* proc/ read p's maps just now: the snapshot is made from them. */
static int sym_h_attach(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
			const struct gs_maps_line *l)
{
	struct proc *pr = proc_find(ctx, p->tgid);

	if (!p->image && pr && pr->snap)
		return 0;
	return snapshot_new(ctx, p->tgid, false);
}

static int sym_h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *child)
{
	if (gs_sym_has_process(ctx, child->ppid))
		return gs_sym_fork(ctx, child->ppid, child->tgid);
	return gs_sym_add_process(ctx, child->tgid);
}

static void sym_h_detach(void *ctx, struct gs_proc *p, bool exec)
{
	if (!exec) /* an exec's attach takes a new snapshot */
		gs_sym_exit(ctx, p->tgid);
}

static void sym_h_retire(void *ctx, struct gs_proc *p)
{
	gs_sym_retire(ctx, p->tgid);
}

/* A re-read asked for GS_MAPS_NOW (libraries known to be mapped): taken at
 * once.  Other re-reads are taken at this process's next miss: a snapshot
 * is a new key for the locations of code outside every module, so it
 * changes only when a miss needs it. */
static void sym_h_maps_changed(void *ctx, struct gs_proc *p, const struct gs_proc_maps_change *ch)
{
	struct gs_symbolizer *s = ctx;
	struct proc *pr = proc_find(s, p->tgid);

	if (GS_MAPS_WHY(ch->why) != GS_MAPS_NOW || s->asking == p->tgid || !pr || !pr->snap ||
	    pr->exited)
		return;
	adopt(s, pr, p->maps);
}

/* Libraries left without an fd by the ELF cache's bound, or skipped for
 * their headers: their frames are unsymbolized and their stacks use frame
 * pointers only. */
static void sym_h_report(void *ctx, struct gs_profile *prof)
{
	struct gs_elf_stats es;

	gs_elf_stats(gs_sym_elf_cache(ctx), &es);
	if (es.fd_refused)
		gs_profile_add_note(
		    prof,
		    "%zu of %zu libraries not kept open (at most %zu file "
		    "descriptors, RLIMIT_NOFILE less %d): no symbols or unwind tables "
		    "in them; raise the soft limit (ulimit -n) to get them",
		    es.fd_refused, es.objects, es.max_fds, GS_ELF_FD_RESERVE);
	if (es.skipped)
		gs_profile_add_note(
		    prof,
		    "%zu object(s) skipped: ELF headers out of bounds (first: %s: %s); "
		    "no symbols or unwind tables in them",
		    es.skipped, es.first_skipped->path, es.first_skipped->skipped);
	struct gs_perfmap_stats ps;
	gs_perfmap_stats(&ps);
	if (ps.cut || ps.refused)
		gs_profile_add_note(prof,
				    "perf maps over their memory budget (%zu MiB, all files): %zu "
				    "cut, %zu not read (first: %s); JIT code there is unnamed",
				    (size_t)GS_PERFMAP_TOTAL_BYTES >> 20, ps.cut, ps.refused,
				    ps.first);
	gs_sym_debug_report(prof);
	gs_sym_debuginfod_report(prof);
}

void gs_sym_report(struct gs_symbolizer *s, struct gs_profile *prof)
{
	sym_h_report(s, prof);
}

void gs_sym_proc_handler(struct gs_symbolizer *s, struct gs_proc_handler *h)
{
	*h = (struct gs_proc_handler){
		.name = "native",
		.ctx = s,
		.attach = sym_h_attach,
		.fork = sym_h_fork,
		.detach = sym_h_detach,
		.retire = sym_h_retire,
		.maps_changed = sym_h_maps_changed,
		.report = sym_h_report,
	};
}
