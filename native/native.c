/* SPDX-License-Identifier: MIT */
/*
 * ELF modules: open once, cache by build-id (dev:inode when there is none),
 * resolve ELF vaddrs to symbol + DWARF file:line + inline chain with libdwfl.
 *
 * Cost model (matters for libtorch_cpu.so, 115 MB): the ELF is mmap'ed, the
 * symbol table is read once into a sorted array on the first lookup (libdwfl's
 * own dwfl_module_addrsym scans every symbol per call), and DWARF is reached
 * through dwfl_module_addrdie (aranges -> one CU) and dwfl_module_getsrc (that
 * CU's line table), so only the CUs that contain sampled addresses are
 * parsed.  Debug files (build-id / .gnu_debuglink under /usr/lib/debug,
 * debuginfo.c) are looked up lazily by libdwfl on the first lookup in the
 * module.
 *
 * The target's user may own these files and truncate them while mapped:
 * every libdwfl call for a module runs under gs_sym_guarded (guard.c), so a
 * SIGBUS marks that module broken instead of killing gpusample; our own
 * reads (build-id, PT_LOADs) use libelf's pread mode (ELF_C_READ).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include "native/native.h"
#include "native/sym_internal.h"
#include "util/hashmap.h"

/* The symbolizer's state per ELF object of proc/'s cache, by object id. */
struct gs_sym_modcache {
	struct gs_elf_cache *elf;
	struct gs_hmap by_obj; /* gs_elf_obj.id -> struct gs_sym_module * */
	size_t count;
};

/* Not libdwfl's standard search: it opens paths next to the library, in a
 * directory the target's user writes (debuginfo.c). */
static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = gs_sym_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

struct gs_sym_modcache *gs_sym_modcache_new(struct gs_elf_cache *elf)
{
	struct gs_sym_modcache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->elf = elf ? gs_elf_cache_ref(elf) : gs_elf_cache_new();
	if (!c->elf) {
		free(c);
		return NULL;
	}
	return c;
}

struct gs_elf_cache *gs_sym_modcache_elf(struct gs_sym_modcache *c)
{
	return c->elf;
}

static void cu_free(struct gs_sym_cu *cu);

static void module_free(struct gs_sym_module *m)
{
	if (m->dwfl && !m->broken) /* broken: libdwfl state is mid-update, leak it */
		dwfl_end(m->dwfl);
	gs_sym_debug_release(m);
	if (m->dynsym_elf)
		elf_end(m->dynsym_elf);
	free(m->path);
	free(m->file_name);
	free(m->syms);
	free(m->maps);
	for (size_t i = 0; i < m->n_cus; i++)
		cu_free(m->cus[i]);
	free(m->cus);
	free(m->cu_ranges);
	free(m);
}

void gs_sym_modcache_free(struct gs_sym_modcache *c)
{
	if (!c)
		return;
	uint64_t key, val;
	for (size_t it = 0; gs_hmap_next(&c->by_obj, &it, &key, &val);)
		module_free((struct gs_sym_module *)(uintptr_t)val);
	gs_hmap_free(&c->by_obj);
	gs_elf_cache_put(c->elf);
	free(c);
}

size_t gs_sym_modcache_count(const struct gs_sym_modcache *c)
{
	return c->count;
}

static struct gs_sym_module *module_new(struct gs_elf_obj *o, const char *path,
					const char *file_name)
{
	struct gs_sym_module *m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path)) ||
	    !(m->file_name = strdup(file_name ? file_name : path))) {
		if (m)
			module_free(m);
		return NULL;
	}
	const char *slash = strrchr(m->path, '/');
	m->base = slash ? slash + 1 : m->path;
	m->obj = o;
	m->key = o->key;
	memcpy(m->build_id, o->build_id, sizeof(m->build_id));
	m->fd = o->fd;
	m->dev = o->dev;
	m->ino = o->ino;
	m->loads = o->loads;
	m->n_loads = o->n_loads;
	if (m->fd >= 0)
		snprintf(m->open_path, sizeof(m->open_path), "/proc/self/fd/%d", m->fd);
	return m;
}

struct gs_sym_module *gs_sym_module_get(struct gs_sym_modcache *c, const char *path,
					const char *const *open_paths, size_t n_open,
					const char *file_name, uint64_t dev, uint64_t ino)
{
	struct gs_elf_obj *o;
	bool added;
	if (gs_elf_get(c->elf, path, open_paths, n_open, dev, ino, &o))
		return NULL;
	uint64_t *slot = gs_hmap_slot(&c->by_obj, o->id, &added);
	if (!slot)
		return NULL;
	if (!added)
		return (struct gs_sym_module *)(uintptr_t)*slot;
	struct gs_sym_module *m = module_new(o, path, file_name);
	if (!m) {
		gs_hmap_del(&c->by_obj, o->id, NULL);
		return NULL;
	}
	*slot = (uintptr_t)m;
	c->count++;
	return m;
}

bool gs_sym_module_off_to_vaddr(const struct gs_sym_module *m, uint64_t off, uint64_t *vaddr)
{
	return gs_elf_off_to_vaddr(m->obj, off, vaddr);
}

/* ---- libdwfl ------------------------------------------------------------ */

static bool module_open_dwfl(struct gs_sym_module *m)
{
	if (m->dwfl)
		return m->mod != NULL;
	if (m->fd < 0 || m->no_dwarf)
		return false;
	/* libdw inflates compressed sections whole, at the sizes they claim */
	if (gs_sym_debug_admit(m, m->fd, m->path)) {
		m->no_dwarf = true;
		return false;
	}
	m->dwfl = dwfl_begin(&dwfl_cbs);
	if (!m->dwfl)
		return false;
	int fd = dup(m->fd);
	if (fd < 0)
		return false;
	dwfl_report_begin(m->dwfl);
	m->mod = dwfl_report_elf(m->dwfl, m->base, m->file_name, fd, 0, false);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod) {
		close(fd);
		return false;
	}
	void **userdata = NULL;
	dwfl_module_info(m->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	if (userdata) /* the debug file search's (debuginfo.c) */
		*userdata = m;
	Dwarf_Addr bias = 0;
	if (!dwfl_module_getelf(m->mod, &bias)) {
		m->mod = NULL;
		return false;
	}
	m->dwfl_bias = bias;
	return true;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct gs_sym_elfsym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* prefer sized symbols, then the shorter (usually the public) name */
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	return (int)strlen(x->name) - (int)strlen(y->name);
}

/* Is sym (in section shndx, named name) a function for the sorted array? */
static bool is_function(const GElf_Sym *sym, GElf_Word shndx, const char *name)
{
	int t = GELF_ST_TYPE(sym->st_info);

	if (!name || !*name || shndx == SHN_UNDEF)
		return false;
	if (t != STT_FUNC && t != STT_GNU_IFUNC && t != STT_NOTYPE)
		return false;
	return t != STT_NOTYPE || (shndx != SHN_ABS && name[0] != '$' && name[0] != '.');
}

/* The .dynsym of a module libdw must not see (no_dwarf: its compressed
 * sections were refused), through an Elf of its own in libelf's pread mode:
 * only when the table and its strings are neither compressed nor over
 * GS_SYM_DYNSYM_MAX (libelf reads them whole).  Symbols (n of them) in
 * m->syms, or n 0. */
static size_t module_read_dynsym(struct gs_sym_module *m)
{
	Elf *e = m->fd >= 0 ? elf_begin(m->fd, ELF_C_READ, NULL) : NULL;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh, str;
	Elf_Data *d;
	size_t k = 0, n;

	if (!e)
		return 0;
	m->dynsym_elf = e; /* the names live in it */
	while ((scn = elf_nextscn(e, scn)) && (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM))
		;
	if (!scn || !sh.sh_entsize || (sh.sh_flags & SHF_COMPRESSED) ||
	    sh.sh_size > GS_SYM_DYNSYM_MAX || !gelf_getshdr(elf_getscn(e, sh.sh_link), &str) ||
	    str.sh_type != SHT_STRTAB || (str.sh_flags & SHF_COMPRESSED) ||
	    str.sh_size > GS_SYM_DYNSYM_MAX || !(d = elf_getdata(scn, NULL)))
		return 0;
	n = sh.sh_size / sh.sh_entsize;
	if (!(m->syms = malloc(n * sizeof(*m->syms))))
		return 0;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(d, (int)i, &sym))
			break;
		name = elf_strptr(e, sh.sh_link, sym.st_name);
		if (is_function(&sym, sym.st_shndx, name))
			m->syms[k++] = (struct gs_sym_elfsym){ sym.st_value, sym.st_size, name };
	}
	return k;
}

/* One pass over .symtab (from the file or its debug file) or .dynsym into a
 * sorted array of function symbols. */
static void module_load_syms(struct gs_sym_module *m)
{
	size_t k = 0;

	m->syms_loaded = true;
	if (m->no_dwarf) {
		k = module_read_dynsym(m);
	} else {
		int n = dwfl_module_getsymtab(m->mod);
		if (n <= 0 || !(m->syms = malloc((size_t)n * sizeof(*m->syms))))
			return;
		for (int i = 1; i < n; i++) {
			GElf_Sym sym;
			GElf_Addr addr;
			GElf_Word shndx;
			const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx,
								   NULL, NULL);
			if (is_function(&sym, shndx, name))
				m->syms[k++] = (struct gs_sym_elfsym){ addr - m->dwfl_bias,
								       sym.st_size, name };
		}
	}
	if (!m->syms)
		return;
	qsort(m->syms, k, sizeof(*m->syms), sym_cmp);
	/* drop duplicate addresses, keeping the preferred first entry */
	size_t w = 0;
	for (size_t i = 0; i < k; i++)
		if (!w || m->syms[w - 1].addr != m->syms[i].addr)
			m->syms[w++] = m->syms[i];
	m->n_syms = w;
}

static const GElf_Phdr *load_of(const struct gs_sym_module *m, uint64_t vaddr)
{
	for (size_t i = 0; i < m->n_loads; i++)
		if (vaddr - m->loads[i].p_vaddr < m->loads[i].p_memsz)
			return &m->loads[i];
	return NULL;
}

static const struct gs_sym_elfsym *module_find_sym(struct gs_sym_module *m, uint64_t vaddr)
{
	/* only code has functions: .rodata past the last symbol is no part
	 * of _fini */
	const GElf_Phdr *seg = load_of(m, vaddr);
	if (m->n_loads && (!seg || !(seg->p_flags & PF_X)))
		return NULL;
	if (!m->syms_loaded)
		module_load_syms(m);
	size_t lo = GS_UPPER_BOUND(m->syms, m->n_syms, addr, vaddr);
	if (!lo)
		return NULL;
	/* nearest symbol at or below; a sized one must contain vaddr, else a
	 * few earlier (enclosing) ones are tried; an unsized one (assembly)
	 * counts when it is the nearest and in the same segment */
	for (size_t i = lo, tries = 0; i > 0 && tries < 8; i--, tries++) {
		const struct gs_sym_elfsym *s = &m->syms[i - 1];
		if (!s->size)
			return tries == 0 && load_of(m, s->addr) == seg ? s : NULL;
		if (vaddr < s->addr + s->size)
			return s;
	}
	return NULL;
}

static char *xstrdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* name (demangled) and system_name (mangled when different) of a raw name */
static int set_names(struct gs_sym_frame *f, const char *raw)
{
	char *d = gs_demangle(raw);
	if (d && strcmp(d, raw)) {
		f->name = d;
		f->system_name = strdup(raw);
		if (!f->system_name)
			return -ENOMEM;
	} else {
		free(d);
		f->name = strdup(raw);
	}
	return f->name ? 0 : -ENOMEM;
}

static const char *die_linkage_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	return n;
}

static bool is_function_scope(Dwarf_Die *d)
{
	int t = dwarf_tag(d);
	return t == DW_TAG_subprogram || t == DW_TAG_inlined_subroutine || t == DW_TAG_entry_point;
}

/* dwarf_decl_file, plus DWARF 5's file 0 (clang uses it for the primary
 * source; libdw 0.188's dwarf_decl_file rejects index 0). */
static const char *decl_file(Dwarf_Die *fn)
{
	const char *file = dwarf_decl_file(fn);
	if (file)
		return file;
	Dwarf_Attribute a;
	Dwarf_Word idx;
	if (!dwarf_attr_integrate(fn, DW_AT_decl_file, &a) || dwarf_formudata(&a, &idx))
		return NULL;
	/* the file table of the CU holding the attribute (the abstract origin
	 * may be in another unit) */
	Dwarf_Die cu;
	Dwarf_Files *files;
	size_t n;
	if (!dwarf_diecu(fn, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, &n) || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

static int frame_from_die(struct gs_sym_frame *f, Dwarf_Die *fn)
{
	const char *n = die_linkage_name(fn);
	int err = set_names(f, n ? n : "[unknown]");
	if (err)
		return err;
	const char *file = decl_file(fn);
	if (file && !(f->file = strdup(file)))
		return -ENOMEM;
	int ln = 0;
	if (dwarf_decl_line(fn, &ln) == 0)
		f->start_line = ln;
	return 0;
}

/* Frames from scopes[0..n) (innermost first; non-function scopes skipped):
 * frame 0 is the innermost inlined callee with the line-table line, each
 * next frame its caller with the DW_AT_call_line of the inlined_subroutine
 * below it; the out-of-line function ends the chain. */
static int chain_frames(Dwarf_Die *scopes, int n, int leaf_line, const char *leaf_file,
			struct gs_sym_result *r)
{
	int64_t line = leaf_line;
	for (int i = 0; i < n && r->n < GS_SYM_MAX_INLINE; i++) {
		if (!is_function_scope(&scopes[i]))
			continue;
		struct gs_sym_frame *f = &r->f[r->n++];
		int err = frame_from_die(f, &scopes[i]);
		if (err)
			return err;
		f->line = line;
		if (!f->file && r->n == 1 && leaf_file && !(f->file = strdup(leaf_file)))
			return -ENOMEM;
		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			break;
		Dwarf_Attribute at;
		Dwarf_Word v = 0;
		line = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &at), &v) == 0
			   ? (int64_t)v
			   : 0;
	}
	return 0;
}

/* Fallback: libdw's scope search, as eu-addr2line -i does (walks the CU's
 * DIE tree on every call). */
static int getscopes_chain(Dwarf_Die *cudie, Dwarf_Addr a, int leaf_line, const char *leaf_file,
			   struct gs_sym_result *r)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes(cudie, a, &scopes);
	if (n <= 0) {
		free(scopes);
		return 0;
	}
	Dwarf_Die inner = scopes[0];
	free(scopes);
	scopes = NULL;
	n = dwarf_getscopes_die(&inner, &scopes);
	int err = n > 0 ? chain_frames(scopes, n, leaf_line, leaf_file, r) : 0;
	free(scopes);
	return err;
}

/* ---- per-CU function index ------------------------------------------------
 * dwarf_getscopes walks the whole CU per address, which costs ~1 ms per
 * lookup in libpython's ceval.c and far more in template-heavy libtorch CUs.
 * Instead each CU that holds a sampled address is walked once into its
 * function ranges: entries (subprogram / inlined_subroutine pc ranges) in DIE
 * order, and "tops" (ranges of outermost subprograms, sorted) that point at
 * the span of entries under them.  A lookup is a binary search for the top,
 * then a scan of its span; matching entries come outer first. */

struct cu_ent {
	uint64_t lo, hi;
	Dwarf_Die die;
};
struct cu_top {
	uint64_t lo, hi;
	uint32_t first, end;
};
struct gs_sym_cu {
	Dwarf_Off off;
	struct cu_ent *e;
	size_t n, cap;
	struct cu_top *t;
	size_t nt, capt;
	bool oom;
};

static bool push_ent(struct gs_sym_cu *cu, uint64_t lo, uint64_t hi, Dwarf_Die *die)
{
	if (gs_grow_from((void **)&cu->e, &cu->cap, cu->n + 1, sizeof(*cu->e), 256))
		return !(cu->oom = true);
	cu->e[cu->n++] = (struct cu_ent){ lo, hi, *die };
	return true;
}

static bool push_top(struct gs_sym_cu *cu, uint64_t lo, uint64_t hi, uint32_t first, uint32_t end)
{
	if (gs_grow_from((void **)&cu->t, &cu->capt, cu->nt + 1, sizeof(*cu->t), 64))
		return !(cu->oom = true);
	cu->t[cu->nt++] = (struct cu_top){ lo, hi, first, end };
	return true;
}

/* Tags whose children may hold code ranges; types, variables and
 * parameters are skipped (most of a C++ CU). */
static bool may_hold_code(int tag)
{
	switch (tag) {
	case DW_TAG_namespace:
	case DW_TAG_lexical_block:
	case DW_TAG_subprogram:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_entry_point:
	case DW_TAG_try_block:
	case DW_TAG_catch_block:
	case DW_TAG_module:
	case DW_TAG_with_stmt:
		return true;
	default:
		return false;
	}
}

static void cu_walk(struct gs_sym_cu *cu, Dwarf_Die *parent, bool in_top, int depth)
{
	Dwarf_Die child;
	if (depth > 128 || dwarf_child(parent, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);
		if (!may_hold_code(tag))
			continue;
		bool fn = is_function_scope(&child);
		uint32_t first = (uint32_t)cu->n;
		if (fn) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;
			while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0)
				if (hi > lo && !push_ent(cu, lo, hi, &child))
					return;
		}
		bool top = fn && !in_top && tag == DW_TAG_subprogram && cu->n > first;
		cu_walk(cu, &child, in_top || top, depth + 1);
		if (top)
			for (uint32_t i = first; i < cu->n && cu->e[i].die.addr == child.addr; i++)
				if (!push_top(cu, cu->e[i].lo, cu->e[i].hi, first, (uint32_t)cu->n))
					return;
	} while (!cu->oom && dwarf_siblingof(&child, &child) == 0);
}

static int top_cmp(const void *a, const void *b)
{
	const struct cu_top *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void cu_free(struct gs_sym_cu *cu)
{
	free(cu->e);
	free(cu->t);
	free(cu);
}

/* The index of cudie's CU, built on first use; NULL on ENOMEM. */
static struct gs_sym_cu *module_cu(struct gs_sym_module *m, Dwarf_Die *cudie)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	size_t lo = 0, hi = m->n_cus;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->cus[mid]->off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < m->n_cus && m->cus[lo]->off == off)
		return m->cus[lo];
	struct gs_sym_cu *cu = calloc(1, sizeof(*cu));
	struct gs_sym_cu **ncus = realloc(m->cus, (m->n_cus + 1) * sizeof(*ncus));
	if (!cu || !ncus) {
		free(cu);
		if (ncus)
			m->cus = ncus;
		return NULL;
	}
	m->cus = ncus;
	cu->off = off;
	cu_walk(cu, cudie, false, 0);
	if (cu->oom) {
		cu_free(cu);
		return NULL;
	}
	qsort(cu->t, cu->nt, sizeof(*cu->t), top_cmp);
	memmove(&m->cus[lo + 1], &m->cus[lo], (m->n_cus - lo) * sizeof(*ncus));
	m->cus[lo] = cu;
	m->n_cus++;
	return cu;
}

/* Function scopes containing a, innermost first, into out[]; count or -1
 * when the index has no function there. */
static int cu_scopes(const struct gs_sym_cu *cu, uint64_t a, Dwarf_Die *out, int max)
{
	size_t lo = GS_UPPER_BOUND(cu->t, cu->nt, lo, a);
	for (size_t k = lo; k > 0 && lo - k < 4; k--) {
		const struct cu_top *t = &cu->t[k - 1];
		if (a >= t->hi)
			continue;
		int n = 0;
		for (uint32_t i = t->first; i < t->end; i++)
			if (a >= cu->e[i].lo && a < cu->e[i].hi && n < max &&
			    (!n || out[n - 1].addr != cu->e[i].die.addr))
				out[n++] = cu->e[i].die;
		/* DIE order is outer first: reverse to innermost first */
		for (int i = 0; i < n / 2; i++) {
			Dwarf_Die d = out[i];
			out[i] = out[n - 1 - i];
			out[n - 1 - i] = d;
		}
		return n ? n : -1;
	}
	return -1;
}

/* CU lookup without .debug_aranges: the ranges of every CU DIE (unit
 * headers and the CU DIE's own attributes only, not the CUs' contents),
 * built once per module on the first miss. */
struct cu_range {
	uint64_t lo, hi;
	Dwarf_Off die_off;
};

static int range_cmp(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void build_cu_ranges(struct gs_sym_module *m, Dwarf *dw)
{
	m->cu_ranges_built = true;
	size_t cap = 0;
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cudie;
		if (dwarf_offdie(dw, off + hsize, &cudie)) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t ro = 0;
			while ((ro = dwarf_ranges(&cudie, ro, &base, &lo, &hi)) > 0) {
				if (hi <= lo)
					continue;
				if (gs_grow_from(&m->cu_ranges, &cap, m->n_cu_ranges + 1,
						 sizeof(struct cu_range), 256))
					return;
				((struct cu_range *)m->cu_ranges)[m->n_cu_ranges++] =
				    (struct cu_range){ lo, hi, off + hsize };
			}
		}
		off = next;
	}
	qsort(m->cu_ranges, m->n_cu_ranges, sizeof(struct cu_range), range_cmp);
}

static Dwarf_Die *cu_by_range(struct gs_sym_module *m, Dwarf_Addr da, Dwarf_Addr *bias,
			      Dwarf_Die *out)
{
	Dwarf *dw = dwfl_module_getdwarf(m->mod, bias);
	if (!dw)
		return NULL;
	if (!m->cu_ranges_built)
		build_cu_ranges(m, dw);
	uint64_t a = da - *bias;
	const struct cu_range *r = m->cu_ranges;
	size_t lo = GS_UPPER_BOUND(r, m->n_cu_ranges, lo, a);
	if (!lo || a >= r[lo - 1].hi)
		return NULL;
	return dwarf_offdie(dw, r[lo - 1].die_off, out);
}

bool gs_sym_no_cu_index;

static int dwarf_chain(struct gs_sym_module *m, Dwarf_Die *cudie, Dwarf_Addr a, int leaf_line,
		       const char *leaf_file, struct gs_sym_result *r)
{
	struct gs_sym_cu *cu = gs_sym_no_cu_index ? NULL : module_cu(m, cudie);
	Dwarf_Die scopes[GS_SYM_MAX_INLINE];
	int n = cu ? cu_scopes(cu, a, scopes, GS_SYM_MAX_INLINE) : -1;
	if (n > 0)
		return chain_frames(scopes, n, leaf_line, leaf_file, r);
	return getscopes_chain(cudie, a, leaf_line, leaf_file, r);
}

void gs_sym_result_clear(struct gs_sym_result *r)
{
	for (int i = 0; i < r->n; i++) {
		free(r->f[i].name);
		free(r->f[i].system_name);
		free(r->f[i].file);
	}
	memset(r, 0, sizeof(*r));
}

static int function_start(struct gs_sym_module *m, uint64_t vaddr, uint64_t *start)
{
	Dwarf_Addr cfi_bias, lo, hi;
	Dwarf_Frame *frame = NULL;
	Dwarf_CFI *cfi;
	bool signal;

	if (!m->mod || !(cfi = dwfl_module_eh_cfi(m->mod, &cfi_bias)))
		return -ENOENT;
	/* CFI addresses + cfi_bias = dwfl addresses = ELF vaddr + dwfl_bias */
	if (dwarf_cfi_addrframe(cfi, vaddr + m->dwfl_bias - cfi_bias, &frame) || !frame)
		return -ENOENT;
	if (dwarf_frame_info(frame, &lo, &hi, &signal) < 0) {
		free(frame);
		return -ENOENT;
	}
	free(frame);
	*start = lo + cfi_bias - m->dwfl_bias;
	return 0;
}

/* A module refused to libdw: its .dynsym name, if any. */
static int resolve_dynsym(struct gs_sym_module *m, uint64_t vaddr, struct gs_sym_result *r)
{
	const struct gs_sym_elfsym *sym = module_find_sym(m, vaddr);
	int err;

	if (!sym)
		return 0;
	r->from_symtab = true;
	if ((err = set_names(&r->f[r->n++], sym->name)))
		gs_sym_result_clear(r);
	return err;
}

static int resolve(struct gs_sym_module *m, uint64_t vaddr, struct gs_sym_result *r)
{
	if (!module_open_dwfl(m))
		return m->no_dwarf ? resolve_dynsym(m, vaddr, r) : 0;
	Dwarf_Addr da = vaddr + m->dwfl_bias;
	const struct gs_sym_elfsym *sym = module_find_sym(m, vaddr);

	int leaf_line = 0;
	const char *leaf_file = NULL;
	Dwfl_Line *dl = dwfl_module_getsrc(m->mod, da);
	if (dl)
		leaf_file = dwfl_lineinfo(dl, NULL, &leaf_line, NULL, NULL, NULL);
	Dwarf_Addr cubias = 0;
	Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, da, &cubias), cubuf;
	if (!cudie && (cudie = cu_by_range(m, da, &cubias, &cubuf))) {
		/* no .debug_aranges (clang's default): libdwfl found no CU */
		Dwarf_Line *l = dwarf_getsrc_die(cudie, da - cubias);
		if (l && dwarf_lineno(l, &leaf_line) == 0)
			leaf_file = dwarf_linesrc(l, NULL, NULL);
	}
	int err = 0;
	if (cudie) {
		r->has_dwarf = true;
		err = dwarf_chain(m, cudie, da - cubias, leaf_line, leaf_file, r);
		if (err)
			goto fail;
	}
	/* an unsized symbol (assembly, or the nearest one below) is a guess:
	 * DWARF's function wins over it */
	if (sym && (sym->size || !r->n)) {
		r->from_symtab = true;
		/* The ELF symbol names the out-of-line function best (qualified
		 * C++ linkage name, .cold parts); DWARF's DW_AT_name is bare. */
		struct gs_sym_frame *f;
		if (r->n) {
			f = &r->f[r->n - 1];
			free(f->name);
			free(f->system_name);
			f->name = f->system_name = NULL;
		} else {
			f = &r->f[r->n++];
			f->line = leaf_line;
			if (leaf_file && !(f->file = strdup(leaf_file)))
				goto nomem;
		}
		if ((err = set_names(f, sym->name)))
			goto fail;
	} else if (!r->n && leaf_file) {
		/* line info without any symbol: keep the file:line */
		struct gs_sym_frame *f = &r->f[r->n++];
		f->line = leaf_line;
		if (!(f->file = xstrdup_or_null(leaf_file)) || !(f->name = strdup("[unknown]")))
			goto nomem;
	}
	return 0;
nomem:
	err = -ENOMEM;
fail:
	gs_sym_result_clear(r);
	return err;
}

/* ---- guarded entry points (native/guard.c) --------------------------- */

struct guarded_call {
	struct gs_sym_module *m;
	uint64_t vaddr;
	struct gs_sym_result *r;
	uint64_t *start;
};

static int call_resolve(void *arg)
{
	struct guarded_call *c = arg;

	return resolve(c->m, c->vaddr, c->r);
}

static int call_function_start(void *arg)
{
	struct guarded_call *c = arg;

	return function_start(c->m, c->vaddr, c->start);
}

/* A fault marks the module broken: later lookups fail at once. */
static int guarded(struct gs_sym_module *m, int (*fn)(void *), struct guarded_call *c)
{
	int rc;

	if (m->broken)
		return -EFAULT;
	rc = gs_sym_guarded(fn, c);
	if (rc == -EFAULT)
		m->broken = true;
	return rc;
}

int gs_sym_module_resolve(struct gs_sym_module *m, uint64_t vaddr, struct gs_sym_result *r)
{
	struct guarded_call c = { .m = m, .vaddr = vaddr, .r = r };
	int rc;

	memset(r, 0, sizeof(*r));
	rc = guarded(m, call_resolve, &c);
	if (rc == -EFAULT)
		gs_sym_result_clear(r);
	return rc;
}

int gs_sym_module_function_start(struct gs_sym_module *m, uint64_t vaddr, uint64_t *start)
{
	struct guarded_call c = { .m = m, .vaddr = vaddr, .start = start };

	return guarded(m, call_function_start, &c);
}
