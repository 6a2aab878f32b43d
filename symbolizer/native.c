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
 * parsed.  Debug files (build-id / .gnu_debuglink under /usr/lib/debug) are
 * looked up lazily by libdwfl on the first lookup in the module.
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
#include "symbolizer/symbolizer.h"
#include "symbolizer/sym_internal.h"

#define MODCACHE_BUCKETS 1024

struct gs_sym_alias { uint64_t dev, ino; struct gs_sym_module *m; struct gs_sym_alias *next; };

struct gs_sym_modcache {
	struct gs_sym_module *b[MODCACHE_BUCKETS];
	struct gs_sym_alias *alias[MODCACHE_BUCKETS];
	size_t count;
};

static char *debuginfo_path; /* NULL: libdwfl's default ":.debug:/usr/lib/debug" */
static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static uint32_t hash_devino(uint64_t dev, uint64_t ino)
{
	uint64_t x = (dev * 0x9e3779b97f4a7c15ull) ^ ino;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(x ^ (x >> 32));
}

struct gs_sym_modcache *gs_sym_modcache_new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	return calloc(1, sizeof(struct gs_sym_modcache));
}

static void module_free(struct gs_sym_module *m)
{
	if (m->dwfl)
		dwfl_end(m->dwfl);
	if (m->fd >= 0)
		close(m->fd);
	free(m->key);
	free(m->path);
	free(m->file_name);
	free(m->loads);
	free(m->syms);
	free(m->maps);
	free(m);
}

void gs_sym_modcache_free(struct gs_sym_modcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < MODCACHE_BUCKETS; i++) {
		for (struct gs_sym_module *m = c->b[i], *n; m; m = n) {
			n = m->next;
			module_free(m);
		}
		for (struct gs_sym_alias *a = c->alias[i], *n; a; a = n) {
			n = a->next;
			free(a);
		}
	}
	free(c);
}

size_t gs_sym_modcache_count(const struct gs_sym_modcache *c)
{
	return c->count;
}

static struct gs_sym_module *alias_find(struct gs_sym_modcache *c, uint64_t dev, uint64_t ino)
{
	for (struct gs_sym_alias *a = c->alias[hash_devino(dev, ino) % MODCACHE_BUCKETS]; a; a = a->next)
		if (a->dev == dev && a->ino == ino)
			return a->m;
	return NULL;
}

static int alias_add(struct gs_sym_modcache *c, uint64_t dev, uint64_t ino, struct gs_sym_module *m)
{
	if (!ino)
		return 0;
	struct gs_sym_alias *a = malloc(sizeof(*a));
	if (!a)
		return -ENOMEM;
	uint32_t h = hash_devino(dev, ino) % MODCACHE_BUCKETS;
	*a = (struct gs_sym_alias){ dev, ino, m, c->alias[h] };
	c->alias[h] = a;
	return 0;
}

static struct gs_sym_module *key_find(struct gs_sym_modcache *c, const char *key)
{
	for (struct gs_sym_module *m = c->b[hash_str(key) % MODCACHE_BUCKETS]; m; m = m->next)
		if (!strcmp(m->key, key))
			return m;
	return NULL;
}

/* Build-id and PT_LOAD headers from the file; the Elf is not kept (libdwfl
 * opens its own from a dup of the fd when the module is first resolved). */
static void read_elf_facts(int fd, char build_id[41], GElf_Phdr **loads, size_t *n_loads)
{
	build_id[0] = 0;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return;
	const void *bid;
	ssize_t n = dwelf_elf_gnu_build_id(e, &bid);
	if (n > 0 && n <= 20) {
		for (ssize_t i = 0; i < n; i++)
			snprintf(build_id + 2 * i, 3, "%02x", ((const uint8_t *)bid)[i]);
	}
	size_t phnum = 0;
	if (elf_getphdrnum(e, &phnum) == 0 && phnum) {
		*loads = calloc(phnum, sizeof(GElf_Phdr));
		for (size_t i = 0; *loads && i < phnum; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
				(*loads)[(*n_loads)++] = ph;
		}
	}
	elf_end(e);
}

struct gs_sym_module *gs_sym_module_get(struct gs_sym_modcache *c, const char *path,
					const char *const *open_paths, size_t n_open,
					const char *file_name, uint64_t dev, uint64_t ino)
{
	struct gs_sym_module *m = alias_find(c, dev, ino);
	if (m)
		return m;
	int fd = -1;
	for (size_t i = 0; i < n_open && fd < 0; i++)
		fd = open(open_paths[i], O_RDONLY | O_CLOEXEC);
	char bid[41] = "";
	GElf_Phdr *loads = NULL;
	size_t n_loads = 0;
	if (fd >= 0)
		read_elf_facts(fd, bid, &loads, &n_loads);
	char key[64];
	if (bid[0])
		snprintf(key, sizeof(key), "%s", bid);
	else
		snprintf(key, sizeof(key), "%llx:%llu", (unsigned long long)dev, (unsigned long long)ino);
	/* Same build-id under another path or inode: reuse, only remember
	 * the inode.  A file we could not open is never shared by build-id. */
	if (fd >= 0 && (m = key_find(c, key))) {
		close(fd);
		free(loads);
		return alias_add(c, dev, ino, m) ? NULL : m;
	}
	m = calloc(1, sizeof(*m));
	if (!m || !(m->key = strdup(key)) || !(m->path = strdup(path)) ||
	    !(m->file_name = strdup(file_name ? file_name : path))) {
		if (m) {
			m->fd = -1;
			module_free(m);
		}
		free(loads);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	const char *slash = strrchr(m->path, '/');
	m->base = slash ? slash + 1 : m->path;
	memcpy(m->build_id, bid, sizeof(bid));
	m->fd = fd;
	m->dev = dev;
	m->ino = ino;
	m->loads = loads;
	m->n_loads = n_loads;
	if (fd >= 0)
		snprintf(m->open_path, sizeof(m->open_path), "/proc/self/fd/%d", fd);
	uint32_t h = hash_str(m->key) % MODCACHE_BUCKETS;
	m->next = c->b[h];
	c->b[h] = m;
	c->count++;
	return alias_add(c, dev, ino, m) ? NULL : m;
}

bool gs_sym_module_off_to_vaddr(const struct gs_sym_module *m, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < m->n_loads; i++) {
		const GElf_Phdr *ph = &m->loads[i];
		if (off >= ph->p_offset && off < ph->p_offset + ph->p_memsz) {
			*vaddr = off - ph->p_offset + ph->p_vaddr;
			return true;
		}
	}
	/* map offsets are page-aligned, p_offset may not be: use the segment
	 * whose page-aligned start matches. */
	for (size_t i = 0; i < m->n_loads; i++) {
		const GElf_Phdr *ph = &m->loads[i];
		uint64_t al = ph->p_align > 1 ? ph->p_align : 4096;
		if (al > 4096)
			al = 4096;
		uint64_t start = ph->p_offset & ~(al - 1);
		if (off >= start && off < ph->p_offset + ph->p_memsz) {
			*vaddr = off - ph->p_offset + ph->p_vaddr;
			return true;
		}
	}
	return false;
}

/* ---- libdwfl ------------------------------------------------------------ */

static bool module_open_dwfl(struct gs_sym_module *m)
{
	if (m->dwfl)
		return m->mod != NULL;
	if (m->fd < 0)
		return false;
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

/* One pass over .symtab (from the file or its debug file) or .dynsym into a
 * sorted array of function symbols. */
static void module_load_syms(struct gs_sym_module *m)
{
	m->syms_loaded = true;
	int n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return;
	m->syms = malloc((size_t)n * sizeof(*m->syms));
	if (!m->syms)
		return;
	size_t k = 0;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, NULL, NULL);
		if (!name || !*name || shndx == SHN_UNDEF)
			continue;
		int t = GELF_ST_TYPE(sym.st_info);
		if (t != STT_FUNC && t != STT_GNU_IFUNC && t != STT_NOTYPE)
			continue;
		if (t == STT_NOTYPE && (shndx == SHN_ABS || name[0] == '$' || name[0] == '.'))
			continue;
		m->syms[k++] = (struct gs_sym_elfsym){ addr - m->dwfl_bias, sym.st_size, name };
	}
	qsort(m->syms, k, sizeof(*m->syms), sym_cmp);
	/* drop duplicate addresses, keeping the preferred first entry */
	size_t w = 0;
	for (size_t i = 0; i < k; i++)
		if (!w || m->syms[w - 1].addr != m->syms[i].addr)
			m->syms[w++] = m->syms[i];
	m->n_syms = w;
}

static const struct gs_sym_elfsym *module_find_sym(struct gs_sym_module *m, uint64_t vaddr)
{
	if (!m->syms_loaded)
		module_load_syms(m);
	size_t lo = 0, hi = m->n_syms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* nearest symbol at or below; a sized one must contain vaddr, else a
	 * few earlier (enclosing) ones are tried */
	for (size_t i = lo, tries = 0; i > 0 && tries < 8; i--, tries++) {
		const struct gs_sym_elfsym *s = &m->syms[i - 1];
		if (!s->size)
			return tries == 0 ? s : NULL;
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

static int frame_from_die(struct gs_sym_frame *f, Dwarf_Die *fn)
{
	const char *n = die_linkage_name(fn);
	int err = set_names(f, n ? n : "[unknown]");
	if (err)
		return err;
	const char *file = dwarf_decl_file(fn);
	if (file && !(f->file = strdup(file)))
		return -ENOMEM;
	int ln = 0;
	if (dwarf_decl_line(fn, &ln) == 0)
		f->start_line = ln;
	return 0;
}

/* Inline chain at dwarf address a (DWARF-relative): scopes from the innermost
 * DIE outwards, as eu-addr2line -i does.  Frame 0 is the innermost inlined
 * callee (its line from the line table), each next frame its caller with the
 * DW_AT_call_line of the inlined_subroutine below it; the last frame is the
 * out-of-line function. */
static int dwarf_chain(Dwarf_Die *cudie, Dwarf_Addr a, int leaf_line, const char *leaf_file,
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
	if (n <= 0) {
		free(scopes);
		return 0;
	}
	int err = 0;
	int64_t line = leaf_line;
	for (int i = 0; i < n && r->n < GS_SYM_MAX_INLINE; i++) {
		if (!is_function_scope(&scopes[i]))
			continue;
		struct gs_sym_frame *f = &r->f[r->n++];
		if ((err = frame_from_die(f, &scopes[i])))
			break;
		f->line = line;
		if (!f->file && r->n == 1 && leaf_file && !(f->file = strdup(leaf_file))) {
			err = -ENOMEM;
			break;
		}
		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			break; /* the out-of-line function ends the chain */
		Dwarf_Attribute at;
		Dwarf_Word v = 0;
		line = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &at), &v) == 0 ? (int64_t)v : 0;
	}
	free(scopes);
	return err;
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

int gs_sym_module_resolve(struct gs_sym_module *m, uint64_t vaddr, struct gs_sym_result *r)
{
	memset(r, 0, sizeof(*r));
	if (!module_open_dwfl(m))
		return 0;
	Dwarf_Addr da = vaddr + m->dwfl_bias;
	const struct gs_sym_elfsym *sym = module_find_sym(m, vaddr);

	int leaf_line = 0;
	const char *leaf_file = NULL;
	Dwfl_Line *dl = dwfl_module_getsrc(m->mod, da);
	if (dl)
		leaf_file = dwfl_lineinfo(dl, NULL, &leaf_line, NULL, NULL, NULL);
	Dwarf_Addr cubias = 0;
	Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, da, &cubias);
	int err = 0;
	if (cudie) {
		r->has_dwarf = true;
		err = dwarf_chain(cudie, da - cubias, leaf_line, leaf_file, r);
		if (err)
			goto fail;
	}
	if (sym) {
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
