/* SPDX-License-Identifier: MIT */
/* CPython discovery (finding the interpreter, its version and layout) and
 * the per-process address spaces (see python.h); the code-object cache is
 * in python_code.c. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include "proc/proc.h"
#include "util/hashmap.h"
#include "util/vec.h"
#include "python/python_int.h"


/* Call fn on every value of m (pointers stored as u64). */
static void map_each(const struct gs_hmap *m, void (*fn)(void *))
{
	uint64_t k, v;

	for (size_t it = 0; gs_hmap_next(m, &it, &k, &v);)
		fn((void *)(uintptr_t)v);
}

struct gs_py *gs_py_new(struct gs_profile *profile)
{
	struct gs_py *py = calloc(1, sizeof(*py));

	if (py && gs_proc_slots_init(&py->slots, "python", sizeof(struct py_proc))) {
		free(py);
		return NULL;
	}
	if (py)
		py->p = profile;
	return py;
}

static void code_free_v(void *c)
{
	gs_py_code_free(c);
}

static void space_put(struct py_space *sp)
{
	if (!sp || --sp->refs > 0)
		return;
	map_each(&sp->codes, code_free_v);
	gs_hmap_free(&sp->codes);
	free(sp->pids);
	free(sp);
}

void gs_py_free(struct gs_py *py)
{
	if (!py)
		return;
	for (size_t i = 0; i < py->slots.n; i++) {
		struct py_proc *pp = py->slots.all[i];

		space_put(pp->sp);
		space_put(pp->retired);
	}
	gs_proc_slots_fini(&py->slots);
	gs_hmap_free(&py->locs);
	free(py);
}

int gs_py_bind(struct gs_py *py, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&py->slots, t, id);
}

static int space_add_pid(struct py_space *sp, uint32_t tgid)
{
	for (uint32_t i = 0; i < sp->n_pids; i++)
		if (sp->pids[i] == tgid)
			return 0;
	if (sp->n_pids == sp->cap_pids) {
		uint32_t cap = sp->cap_pids ? sp->cap_pids * 2 : 4;
		uint32_t *n = realloc(sp->pids, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		sp->pids = n;
		sp->cap_pids = cap;
	}
	sp->pids[sp->n_pids++] = tgid;
	return 0;
}

static void space_del_pid(struct py_space *sp, uint32_t tgid)
{
	for (uint32_t i = 0; i < sp->n_pids; i++)
		if (sp->pids[i] == tgid) {
			memmove(&sp->pids[i], &sp->pids[i + 1],
				(sp->n_pids - i - 1) * sizeof(uint32_t));
			sp->n_pids--;
			return;
		}
}

static void forget(struct gs_py *py, uint32_t tgid)
{
	struct py_proc *pp = proc_of(py, tgid, false);
	struct py_space *sp = pp ? pp->sp : NULL;

	if (!sp)
		return;
	space_del_pid(sp, tgid);
	pp->sp = NULL;
	space_put(sp);
}

static int attach(struct gs_py *py, uint32_t tgid, struct py_space *sp)
{
	struct py_proc *pp;
	int err;

	forget(py, tgid);
	if (!(pp = proc_of(py, tgid, true)))
		return -ENOMEM;
	if ((err = space_add_pid(sp, tgid)))
		return err;
	pp->sp = sp;
	sp->refs++;
	return 0;
}

/* ---------------------------------------------------------------------------
 * Target memory (rd: python_int.h).
 */
static int rd_u64(uint32_t pid, uint64_t addr, uint64_t *v)
{
	return rd(pid, addr, v, 8);
}

/* ---------------------------------------------------------------------------
 * ELF files mapped by the target.
 */
struct elf_syms {
	uint64_t runtime, version, gilstate, none, code_type, frame_type, bytes_type;
	uint64_t getversion, tss_getspecific, pyruntime_section;
	bool has_runtime;
};

enum {
	S_RUNTIME,
	S_VERSION,
	S_GILSTATE,
	S_NONE,
	S_CODE,
	S_FRAME,
	S_BYTES,
	S_GETVERSION,
	S_GETSPECIFIC,
	S_EVAL,
	S_EVAL_COLD,
	S_NR
};
static const char *const sym_names[S_NR] = {
	"_PyRuntime",
	"Py_Version",
	"PyGILState_GetThisThreadState",
	"_Py_NoneStruct",
	"PyCode_Type",
	"PyFrame_Type",
	"PyBytes_Type",
	"Py_GetVersion",
	"pthread_getspecific",
	"_PyEval_EvalFrameDefault",
	"_PyEval_EvalFrameDefault.cold",
};

struct elf_file {
	int fd;
	Elf *elf;
	uint64_t bias;           /* runtime = vaddr + bias */
	uint64_t sym[S_NR];      /* vaddr, 0 = absent */
	uint64_t sym_size[S_NR]; /* st_size */
	uint64_t pyruntime_sec;
	char path[256];
};

static void elf_close(struct elf_file *f)
{
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	f->elf = NULL;
	f->fd = -1;
}

static void scan_symtab(struct elf_file *f, Elf_Scn *scn, GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym s;

		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		const char *name = elf_strptr(f->elf, sh->sh_link, s.st_name);

		if (!name || (name[0] != '_' && name[0] != 'P' && name[0] != 'p'))
			continue;
		for (int k = 0; k < S_NR; k++)
			if (!f->sym[k] && !strcmp(name, sym_names[k])) {
				f->sym[k] = s.st_value;
				f->sym_size[k] = s.st_size;
				break;
			}
	}
}

/* Read the symbols of fd (owned from here on); bias from the mapping
 * (start, offset). */
static int elf_open(struct elf_file *f, int fd, uint64_t start, uint64_t off)
{
	GElf_Ehdr eh;
	size_t shstrndx, nph;

	memset(f, 0, sizeof(*f));
	f->fd = fd;
	elf_version(EV_CURRENT);
	if (gs_elf_headers_check(f->fd, NULL)) { /* before libelf allocates */
		elf_close(f);
		return -EFBIG;
	}
	f->elf = elf_begin(f->fd, ELF_C_READ, NULL); /* pread: no SIGBUS if it shrinks */
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF || !gelf_getehdr(f->elf, &eh) ||
	    elf_getshdrstrndx(f->elf, &shstrndx) || elf_getphdrnum(f->elf, &nph)) {
		elf_close(f);
		return -ENOEXEC;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(f->elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    off >= (ph.p_offset & ~0xfffull) && off < ph.p_offset + ph.p_filesz) {
			f->bias = start - (ph.p_vaddr + (off - ph.p_offset));
			break;
		}
	}
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(f->elf, scn));) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *name = elf_strptr(f->elf, shstrndx, sh.sh_name);

		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
			scan_symtab(f, scn, &sh);
		else if (name && !strcmp(name, ".PyRuntime"))
			f->pyruntime_sec = sh.sh_addr;
	}
	return 0;
}

/* Read len bytes at vaddr from the file (through the section holding it). */
static int elf_read(struct elf_file *f, uint64_t vaddr, void *buf, size_t len)
{
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(f->elf, scn));) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !sh.sh_addr ||
		    vaddr < sh.sh_addr || vaddr + len > sh.sh_addr + sh.sh_size)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);

		if (!d || !d->d_buf || vaddr - sh.sh_addr + len > d->d_size)
			return -EIO;
		memcpy(buf, (char *)d->d_buf + (vaddr - sh.sh_addr), len);
		return 0;
	}
	return -ENOENT;
}

struct map_ent {
	uint64_t start, end, off, inode;
	unsigned dev_major, dev_minor;
	char path[256];
};

/* proc/'s snapshot of tgid, re-read first when its executable ranges
 * changed (libpython mapped since: discovery retries while ld.so loads).
 * A reference, or NULL and *err. */
static struct gs_proc_maps *table_maps(struct gs_py *py, uint32_t tgid, int *err)
{
	struct gs_proc *p;

	*err = -ENOMEM;
	if (!gs_proc_table_slot(py->slots.t, tgid, py->slots.id, true)) /* alone: an entry */
		return NULL;
	*err = gs_proc_maps_reread(py->slots.t, tgid, GS_MAPS_CHECK, 0);
	p = gs_proc_get(py->slots.t, tgid);
	if (*err == -ESRCH || !p || !p->maps)
		return NULL;
	*err = 0;
	return gs_proc_maps_get(p->maps);
}

/* File-backed mappings of tgid, one per distinct path (the one with the
 * lowest offset), in /proc/PID/maps order. */
static int read_maps(struct gs_py *py, uint32_t tgid, struct map_ent **out, int *n_out)
{
	struct map_ent *v = NULL;
	size_t n = 0, cap = 0;
	int err;
	struct gs_proc_maps *snap = table_maps(py, tgid, &err);

	if (!snap)
		return err ? err : -ESRCH;
	for (size_t i = 0; i < snap->n && !err; i++) {
		const struct gs_maps_line *l = &snap->m[i];
		struct map_ent e = { l->start,     l->end,       l->offset, l->inode,
				     l->dev_major, l->dev_minor, "" };
		size_t k;

		if (!l->path || l->path[0] != '/' || strstr(l->path, " (deleted)"))
			continue;
		snprintf(e.path, sizeof(e.path), "%s", l->path);
		for (k = 0; k < n && strcmp(v[k].path, e.path); k++)
			;
		if (k == n)
			err = GS_PUSH(v, n, cap, e);
	}
	gs_proc_maps_put(snap);
	if (err || n > INT_MAX) {
		free(v);
		return err ? err : -E2BIG;
	}
	*out = v;
	*n_out = (int)n;
	return 0;
}

/* Only the very file the kernel mapped (proc/: dev:inode checked), never
 * one a link the target planted on its path leads to. */
static int open_mapped(uint32_t tgid, const struct map_ent *m, struct elf_file *f)
{
	struct gs_maps_line l = { .start = m->start,
				  .end = m->end,
				  .offset = m->off,
				  .inode = m->inode,
				  .dev_major = m->dev_major,
				  .dev_minor = m->dev_minor,
				  .path = (char *)m->path };
	int fd = gs_proc_open_mapped(tgid, &l);

	if (fd < 0)
		return fd;
	if (elf_open(f, fd, m->start, m->off))
		return -ENOENT;
	snprintf(f->path, sizeof(f->path), "%s", m->path);
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* ---------------------------------------------------------------------------
 * Offsets per minor version for 3.8-3.12 (x86-64; reference §4.2, verified
 * with gdb on the pyenv builds), cross-checked at start against
 * PyCode_Type.tp_members and PyFrame_Type.tp_members (<= 3.10).  3.13 on:
 * read from the target's own _Py_DebugOffsets (dbg_table below).  The
 * struct py_table they fill is in python_int.h.
 */

static const struct py_table tables[] = {
	{ 8, 24, 0, 24, 32, 104, 0, 16, 40, 104, 112, 0, 120, 0, 48, 72, 0x570, 16, 32, 16, 32 },
	{ 9, 24, 0, 24, 32, 104, 0, 16, 40, 104, 112, 0, 120, 0, 48, 72, 0x248, 16, 32, 16, 32 },
	{ 10, 24, 0, 24, 32, 96, 0, 16, 40, 104, 112, 0, 120, 0, 48, 72, 0x248, 16, 32, 16, 32 },
	{ 11, 56, 8, 48, 32, 56, 68, 56, 72, 112, 120, 128, 136, 184, 48, 72, 0x250, 16, 32, 16, 32 },
	{ 12, 56, 0, 8, 0, 56, 70, 52, 68, 112, 120, 128, 136, 192, 40, 56, 0x608, 16, 32, 16, 32 },
};
#define PY_TABLE_LAST 12 /* newer: _Py_DebugOffsets */

/*
 * _Py_DebugOffsets (CPython 3.13+, Include/internal/pycore_debug_offsets.h;
 * 3.13: pycore_runtime.h): the interpreter's own description of its
 * layout, at the start of _PyRuntime, for out-of-process readers.  It is a
 * struct of u64 words whose own layout changes between minor versions
 * (3.14 added interpreter and frame fields, 3.15 thread-state ones), so
 * each layout of it is known here by the word index of every field read.
 * The values are what a patch release may move; they are bounded and
 * cross-checked against PyCode_Type's members before use.  A minor version
 * newer than the last one known is read with the last layout, and says so.
 */
struct dbg_table {
	uint32_t minor; /* first minor version with this layout */
	uint8_t ts_size, ts_frame;
	uint8_t fr_size, fr_back, fr_exec, fr_ip, fr_owner;
	uint8_t co_size, co_filename, co_name, co_qualname, co_table, co_firstlineno, co_argcount,
	    co_adaptive;
	uint8_t ob_size, ob_type;
	uint8_t by_size, by_ob_size, by_sval;
	uint8_t str_size, str_state, str_length, str_ascii, str_compact; /* 0: absent */
	uint16_t tss_off; /* as py_table.tss_off; 0: decode only */
};

static const struct dbg_table dbg_tables[] = {
	{ 13, 19, 23, 28, 29, 30, 31, 33, 34, 35, 36, 37, 38,   39,
	  40, 43, 44, 45, 64, 65, 66, 67, 68, 69, 70, 0,  0x870 },
	{ 14, 22, 26, 31, 32, 33, 34, 36, 39, 40, 41, 42, 43, 44,
	  45, 48, 50, 51, 74, 75, 76, 77, 78, 79, 80, 0,  0 },
	{ 15, 22, 26, 39, 40, 41, 42, 44, 47, 48, 49, 50, 51, 52,
	  53, 56, 58, 59, 86, 87, 88, 89, 90, 91, 92, 93, 0 },
};
#define DBG_WORDS     96 /* words read: above every index in dbg_tables */
#define PY_KNOWN_LAST 15

struct discover {
	uint32_t tgid;
	char *msg;
	size_t msglen;
	char build[320]; /* "CPython 3.11.7 (/path)" for messages */
};

static int fail(struct discover *d, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct discover *d, int err, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (d->msg && d->msglen)
		snprintf(d->msg, d->msglen, "pid %u: %s%s%s", d->tgid, d->build[0] ? d->build : "",
			 d->build[0] ? ": " : "", buf);
	return err;
}

/* PyMemberDef {name, type, offset, flags, doc}: find name's offset. */
static int member_offset(uint32_t pid, uint64_t type_obj, const char *name, int64_t *off)
{
	uint64_t members;

	if (rd_u64(pid, type_obj + 240, &members) || !members) /* tp_members */
		return -EFAULT;
	for (int i = 0; i < 64; i++) {
		struct {
			uint64_t name;
			int32_t type, pad;
			int64_t offset;
			int32_t flags, pad2;
			uint64_t doc;
		} m;
		char s[32] = {};

		if (rd(pid, members + (uint64_t)i * sizeof(m), &m, sizeof(m)))
			return -EFAULT;
		if (!m.name)
			return -ENOENT;
		if (rd(pid, m.name, s, sizeof(s) - 1))
			continue;
		if (!strcmp(s, name)) {
			*off = m.offset;
			return 0;
		}
	}
	return -ENOENT;
}

static int check_member_opt(struct discover *d, uint64_t type_obj, const char *tname,
			    const char *name, uint32_t want, bool optional)
{
	int64_t off;
	int err = member_offset(d->tgid, type_obj, name, &off);

	if (err == -ENOENT && optional)
		return 0;   /* a getter in this version (3.10 f_lasti): nothing to compare */
	if (err == -EFAULT) /* libpython mapped but not relocated yet (just exec'd) */
		return fail(d, -EAGAIN, "interpreter not initialized yet");
	if (err)
		return fail(d, -EPROTO, "cannot read %s.tp_members[%s] (%s); unsupported build",
			    tname, name, strerror(-err));
	if (off != (int64_t)want)
		return fail(d, -EPROTO,
			    "%s.%s is at offset %" PRId64
			    ", expected %u: unsupported build of this "
			    "version (Python frames off)",
			    tname, name, off, want);
	return 0;
}

static int check_member(struct discover *d, uint64_t type_obj, const char *tname, const char *name,
			uint32_t want)
{
	return check_member_opt(d, type_obj, tname, name, want, false);
}

static int check_layout(struct discover *d, const struct py_table *t, const struct elf_syms *s)
{
	uint32_t pid = d->tgid;
	int err;
	uint64_t basicsize;

	if ((err = check_member(d, s->code_type, "PyCode_Type", "co_argcount", t->co_argcount)) ||
	    (err = check_member(d, s->code_type, "PyCode_Type", "co_firstlineno",
				t->co_firstlineno)) ||
	    (err = check_member(d, s->code_type, "PyCode_Type", "co_filename", t->co_filename)) ||
	    (err = check_member(d, s->code_type, "PyCode_Type", "co_name", t->co_name)) ||
	    (err = check_member(d, s->code_type, "PyCode_Type",
				t->minor <= 9 ? "co_lnotab" : "co_linetable", t->co_table)))
		return err;
	if (t->co_qualname &&
	    (err = check_member(d, s->code_type, "PyCode_Type", "co_qualname", t->co_qualname)))
		return err;
	if (t->minor <= 10 && s->frame_type &&
	    ((err = check_member_opt(d, s->frame_type, "PyFrame_Type", "f_back", t->fr_back,
				     true)) ||
	     (err = check_member_opt(d, s->frame_type, "PyFrame_Type", "f_code", t->fr_code,
				     true)) ||
	     (err = check_member_opt(d, s->frame_type, "PyFrame_Type", "f_lasti", t->fr_lasti,
				     true))))
		return err;
	if (t->code_size) {
		if (rd_u64(pid, s->code_type + 32, &basicsize))
			return fail(d, -EPROTO, "cannot read PyCode_Type.tp_basicsize");
		if (basicsize != t->code_size)
			return fail(d, -EPROTO,
				    "PyCode_Type.tp_basicsize is %" PRIu64 ", expected %u: "
				    "unsupported build (Python frames off)",
				    basicsize, t->code_size);
	}
	if (s->bytes_type) { /* tp_basicsize = ob_sval + 1 (33 so far) */
		if (rd_u64(pid, s->bytes_type + 32, &basicsize) ||
		    basicsize != (uint64_t)t->bytes_sval + 1)
			return fail(d, -EPROTO,
				    "PyBytes_Type.tp_basicsize is not %u: unsupported build",
				    t->bytes_sval + 1);
	}
	return 0;
}

/* 3.13+: fill t from the _Py_DebugOffsets at the start of _PyRuntime
 * (dbg_tables).  Every value is bounded by what the readers can hold:
 * frame fields inside the BPF walker's 128-byte window, code-object fields
 * inside read_code's 256-byte read, string and bytes headers inside
 * read_str's 72 bytes.  note: a line for the report when the version is
 * newer than the layouts known ("" otherwise). */
static int read_debug_offsets(struct discover *d, uint64_t runtime, uint32_t version_hex,
			      struct py_table *t, char *note, size_t notelen)
{
	uint64_t o[DBG_WORDS];
	const struct dbg_table *k = NULL;
	uint32_t minor = (version_hex >> 16) & 255;

	char why[256];
	int err = gs_py_debug_words(d->tgid, runtime, version_hex, o, DBG_WORDS, why, sizeof(why));

	if (err)
		return fail(d, err, "%s%s", why,
			    err == -EAGAIN    ? ""
			    : err == -ENOTSUP ? " (its frames and code objects are laid out and "
						"tagged differently); native stacks only"
					      : ": unsupported build (Python frames off)");
	for (size_t i = 0; i < sizeof(dbg_tables) / sizeof(dbg_tables[0]); i++)
		if (dbg_tables[i].minor <= minor)
			k = &dbg_tables[i];
	if (!k)
		return fail(d, -ENOTSUP, "no _Py_DebugOffsets layout for this version");
	if (minor > PY_KNOWN_LAST && note && notelen)
		snprintf(note, notelen,
			 "pid %u: %s: Python %u.%u is newer than the versions known "
			 "(3.8 to 3.%u): its layout is read from its _Py_DebugOffsets as "
			 "laid out in 3.%u; check its Python frames",
			 d->tgid, d->build, version_hex >> 24, minor, PY_KNOWN_LAST, k->minor);
	uint64_t ts_size = o[k->ts_size], fr_size = o[k->fr_size], co_size = o[k->co_size];
	uint64_t by_size = o[k->by_size], str_size = o[k->str_size];
	uint64_t ascii = o[k->str_ascii], compact = k->str_compact ? o[k->str_compact] : ascii + 16;
	/* field, its struct's size, the most the readers allow */
	struct {
		const char *what;
		uint64_t v, size, lim;
	} c[] = {
		{ "thread_state.current_frame", o[k->ts_frame], ts_size, 65536 - 8 },
		{ "interpreter_frame.previous", o[k->fr_back], fr_size, 112 },
		{ "interpreter_frame.executable", o[k->fr_exec], fr_size, 112 },
		{ "interpreter_frame.instr_ptr", o[k->fr_ip], fr_size, 112 },
		{ "interpreter_frame.owner", o[k->fr_owner], fr_size, 112 },
		{ "code_object.filename", o[k->co_filename], co_size, 248 },
		{ "code_object.name", o[k->co_name], co_size, 248 },
		{ "code_object.qualname", o[k->co_qualname], co_size, 248 },
		{ "code_object.linetable", o[k->co_table], co_size, 248 },
		{ "code_object.firstlineno", o[k->co_firstlineno], co_size, 124 },
		{ "code_object.argcount", o[k->co_argcount], co_size, 124 },
		{ "code_object.co_code_adaptive", o[k->co_adaptive], co_size, 65536 },
		{ "bytes_object.ob_size", o[k->by_ob_size], by_size, 64 },
		{ "bytes_object.ob_sval", o[k->by_sval], by_size, 64 },
		{ "unicode_object.length", o[k->str_length], str_size, 64 },
		{ "unicode_object.state", o[k->str_state], str_size, 64 },
		/* word 5 in every layout so far (runtime_state comes first) */
		{ "runtime_state.interpreters_head", o[5], o[3], 65536 - 8 },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (c[i].v >= c[i].size || c[i].v >= c[i].lim || c[i].size > (1u << 20))
			return fail(d, -EPROTO,
				    "_Py_DebugOffsets.%s is %" PRIu64 " (struct size %" PRIu64
				    "): out of bounds, unsupported build (Python frames off)",
				    c[i].what, c[i].v, c[i].size);
	/* the walker reads ob_type at 8 and co_firstlineno/co_argcount past it */
	if (o[k->ob_size] != 16 || o[k->ob_type] != 8 || o[k->co_firstlineno] < 16 ||
	    o[k->co_argcount] < 16 || ascii < 24 || ascii > 128 || compact < ascii || compact > 128)
		return fail(d, -EPROTO,
			    "_Py_DebugOffsets: object header or string sizes look wrong "
			    "(ob_type %" PRIu64 ", PyASCIIObject %" PRIu64 "): unsupported build "
			    "(Python frames off)",
			    o[k->ob_type], ascii);
	*t = (struct py_table){
		.minor = minor,
		.ts_frame = (uint16_t)o[k->ts_frame],
		.fr_back = (uint16_t)o[k->fr_back],
		.fr_code = (uint16_t)o[k->fr_exec],
		.fr_lasti = (uint16_t)o[k->fr_ip],
		.fr_entry = (uint16_t)o[k->fr_owner],
		.co_argcount = (uint16_t)o[k->co_argcount],
		.co_firstlineno = (uint16_t)o[k->co_firstlineno],
		.co_filename = (uint16_t)o[k->co_filename],
		.co_name = (uint16_t)o[k->co_name],
		.co_qualname = (uint16_t)o[k->co_qualname],
		.co_table = (uint16_t)o[k->co_table],
		.code_size = (uint16_t)o[k->co_adaptive],
		.ascii_size = (uint16_t)ascii,
		.compact_size = (uint16_t)compact,
		.tss_off = k->minor == minor ? k->tss_off : 0,
		.str_length = (uint16_t)o[k->str_length],
		.str_state = (uint16_t)o[k->str_state],
		.bytes_size = (uint16_t)o[k->by_ob_size],
		.bytes_sval = (uint16_t)o[k->by_sval],
		.interp_head = (uint16_t)o[5],
	};
	return 0;
}

int gs_py_debug_words(uint32_t pid, uint64_t runtime, uint32_t version_hex, uint64_t *o,
		      size_t nwords, char *msg, size_t msglen)
{
	if (nwords < 3 || rd(pid, runtime, o, nwords * 8))
		return snprintf(msg, msglen, "cannot read _Py_DebugOffsets at _PyRuntime"), -EAGAIN;
	if (memcmp(o, "xdebugpy", 8))
		return snprintf(msg, msglen,
				"_PyRuntime does not start with the _Py_DebugOffsets cookie "
				"\"xdebugpy\""),
		       -EPROTO;
	if ((o[1] >> 16) != (version_hex >> 16))
		return snprintf(msg, msglen,
				"_Py_DebugOffsets.version 0x%" PRIx64 " does not match "
				"Py_Version 0x%x",
				o[1], version_hex),
		       -EPROTO;
	if (o[2])
		return snprintf(msg, msglen, "free-threaded build (%u.%ut): not supported",
				version_hex >> 24, (version_hex >> 16) & 255),
		       -ENOTSUP;
	return 0;
}

int gs_py_debug_offsets(uint32_t pid, uint64_t runtime, uint32_t version_hex, struct py_table *t,
			char *note, size_t notelen, char *msg, size_t msglen)
{
	struct discover d = { .tgid = pid, .msg = msg, .msglen = msglen };

	if (note && notelen)
		note[0] = 0;
	return read_debug_offsets(&d, runtime, version_hex, t, note, notelen);
}

/* Offset of the TSS key (Py_tss_t._key) in _PyRuntime, from the first
 * instructions of PyGILState_GetThisThreadState:
 *   shared lib: mov GOT(%rip),%rax; ... lea OFF(%rax),%reg -> OFF + 4
 *   static exe: mov OFF(%rip),%edi                        -> target - runtime
 * (reference §4.1; OTel decodeStub does the same). */
static int decode_tss_off(struct elf_file *f, uint64_t fn, uint64_t runtime_vaddr, int64_t *off)
{
	uint8_t c[48];

	if (elf_read(f, fn, c, sizeof(c)))
		return -ENOENT;
	for (size_t i = 0; i + 7 <= sizeof(c); i++) {
		/* REX.W lea r64, [r/m + disp32] with mod=10, rm != rsp */
		if ((c[i] == 0x48 || c[i] == 0x4c) && c[i + 1] == 0x8d && (c[i + 2] >> 6) == 2 &&
		    (c[i + 2] & 7) != 4) {
			int32_t disp;

			memcpy(&disp, &c[i + 3], 4);
			if (disp > 0 && disp < 0x100000) {
				*off = disp + 4;
				return 0;
			}
		}
		/* 3.14 static exe: cmpl $0,disp32(%rip) on _is_initialized, then
		 * the Py_tss_t's address to PyThread_tss_get: mov $abs,%edi or
		 * lea disp32(%rip),%rdi.  Both must name the same Py_tss_t (a
		 * cmpq on another field has a REX prefix and is not taken). */
		if (c[i] == 0x83 && c[i + 1] == 0x3d && c[i + 6] == 0 &&
		    (i == 0 || c[i - 1] != 0x48)) {
			int32_t disp;

			memcpy(&disp, &c[i + 2], 4);
			uint64_t a = fn + i + 7 + (int64_t)disp;

			for (size_t j = i + 7; j + 7 <= sizeof(c); j++) {
				uint32_t imm;
				int32_t d2;

				memcpy(&imm, &c[j + 1], 4);
				memcpy(&d2, &c[j + 3], 4);
				if ((c[j] == 0xbf && imm == a) ||
				    (c[j] == 0x48 && c[j + 1] == 0x8d && c[j + 2] == 0x3d &&
				     fn + j + 7 + (int64_t)d2 == a)) {
					int64_t t = (int64_t)a - (int64_t)runtime_vaddr;

					if (t > 0 && t < 0x100000) {
						*off = t + 4;
						return 0;
					}
				}
			}
		}
		/* mov disp32(%rip),%edi */
		if (c[i] == 0x8b && c[i + 1] == 0x3d && i + 6 <= sizeof(c)) {
			int32_t disp;

			memcpy(&disp, &c[i + 2], 4);
			int64_t t = (int64_t)(fn + i + 6) + disp - (int64_t)runtime_vaddr;

			if (t > 0 && t < 0x100000) {
				*off = t;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* 3.15+: PyGILState_GetThisThreadState returns a static thread-local
 * (no TSS key): its offset from the thread pointer, from
 *   local exec (static exe):  mov %fs:disp32,%rax
 *   initial exec:             mov GOT(%rip),%rax; mov %fs:(%rax),%rax
 *                             (the GOT slot, read from the target, holds it)
 * A shared libpython built for dynamic TLS (__tls_get_addr) is not decoded. */
static int decode_tls_gilstate(struct elf_file *f, uint32_t pid, uint64_t fn, int64_t *off)
{
	uint8_t c[32];

	if (elf_read(f, fn, c, sizeof(c)))
		return -ENOENT;
	for (size_t i = 0; i + 9 <= sizeof(c); i++) {
		int32_t disp;

		if (c[i] == 0x64 && c[i + 1] == 0x48 && c[i + 2] == 0x8b && c[i + 3] == 0x04 &&
		    c[i + 4] == 0x25) {
			memcpy(&disp, &c[i + 5], 4);
			if (disp < 0 && disp > -0x100000) {
				*off = disp;
				return 0;
			}
		}
		if (c[i] == 0x48 && c[i + 1] == 0x8b && c[i + 2] == 0x05 && i + 11 <= sizeof(c) &&
		    c[i + 7] == 0x64 && c[i + 8] == 0x48 && c[i + 9] == 0x8b && c[i + 10] == 0x00) {
			int64_t slot;

			memcpy(&disp, &c[i + 3], 4);
			if (rd(pid, fn + i + 7 + (int64_t)disp + f->bias, &slot, 8))
				return -EAGAIN; /* not relocated / mapped yet */
			if (slot < 0 && slot > -0x100000) {
				*off = slot;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* glibc pthread_getspecific: add $0x31,%rax; shl $4,%rax; add %fs:0x10,%rax
 * (2.34+), or lea 0x31(%rdi),%eax; shl $4,%rax (2.31, in libpthread.so.0)
 * -> specific_1stblock = 0x31 << 4 (0x310 on glibc 2.31 and 2.36 x86-64). */
static int decode_1stblock(struct elf_file *f, uint64_t fn, uint32_t *off)
{
	uint8_t c[64];

	if (elf_read(f, fn, c, sizeof(c)))
		return -ENOENT;
	for (size_t i = 0; i + 8 <= sizeof(c); i++)
		if (c[i] == 0x48 && c[i + 1] == 0x83 && c[i + 2] == 0xc0 && c[i + 4] == 0x48 &&
		    c[i + 5] == 0xc1 && c[i + 6] == 0xe0 && c[i + 7] == 0x04) {
			*off = (uint32_t)c[i + 3] << 4;
			return 0;
		} else if (c[i] == 0x8d && c[i + 1] == 0x47 && c[i + 3] == 0x48 &&
			   c[i + 4] == 0xc1 && c[i + 5] == 0xe0 && c[i + 6] == 0x04) {
			*off = (uint32_t)c[i + 2] << 4;
			return 0;
		}
	return -ENOENT;
}

/* Whether the string at link-time address at reads "MAJOR.MINOR..." of a
 * Python 2 or 3; copied to out then. */
static bool version_at(struct elf_file *f, uint64_t at, char *out, size_t len)
{
	char s[32] = {};
	unsigned a, b;

	if (elf_read(f, at, s, sizeof(s) - 1) && elf_read(f, at, s, 8))
		return false;
	if (sscanf(s, "%u.%u", &a, &b) != 2 || a < 2 || a > 3)
		return false;
	snprintf(out, len, "%s", s);
	return true;
}

/* PY_VERSION string for builds without Py_Version (< 3.11): Py_GetVersion
 * passes it as the 4th snprintf argument: lea disp(%rip),%rcx in a
 * position-independent build, mov $imm32,%ecx (an absolute address) in a
 * non-PIE executable (Debian 11's python3.9).  Each candidate is checked
 * by the text it points at. */
static int version_from_getversion(struct elf_file *f, uint64_t fn, char *out, size_t len)
{
	uint8_t c[96];

	if (elf_read(f, fn, c, sizeof(c)))
		return -ENOENT;
	for (size_t i = 0; i + 7 <= sizeof(c); i++) {
		int32_t disp;
		uint32_t imm;

		if (c[i] == 0x48 && c[i + 1] == 0x8d && c[i + 2] == 0x0d) {
			memcpy(&disp, &c[i + 3], 4);
			if (version_at(f, fn + i + 7 + disp, out, len))
				return 0;
		}
		if (c[i] == 0xb9) { /* mov $imm32,%ecx */
			memcpy(&imm, &c[i + 1], 4);
			if (version_at(f, imm, out, len))
				return 0;
		}
	}
	return -ENOENT;
}

static uint32_t hex_from_string(const char *v)
{
	unsigned a = 0, b = 0, c = 0;

	sscanf(v, "%u.%u.%u", &a, &b, &c);
	return a << 24 | b << 16 | c << 8 | 0xf0;
}

static int find_interpreter(struct discover *d, struct map_ent *maps, int n, struct elf_file *f)
{
	/* Pass 0: files named like an interpreter; pass 1: every other file
	 * (a renamed or embedded interpreter).  The test is the symbol, not the
	 * name. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			bool named = strstr(base_name(maps[i].path), "python") != NULL;

			if (named != (pass == 0))
				continue;
			if (open_mapped(d->tgid, &maps[i], f))
				continue;
			if ((f->sym[S_RUNTIME] || f->pyruntime_sec) && f->sym[S_GILSTATE])
				return 0;
			elf_close(f);
		}
	return -ENOENT;
}

/* pthread_getspecific is in libc.so.6 from glibc 2.34 on, in
 * libpthread.so.0 before. */
static int find_libc_1stblock(struct discover *d, struct map_ent *maps, int n, uint32_t *off)
{
	for (int i = 0; i < n; i++) {
		const char *b = base_name(maps[i].path);

		if (!strstr(b, "libc") && !strstr(b, "libpthread"))
			continue;
		struct elf_file f;

		if (open_mapped(d->tgid, &maps[i], &f))
			continue;
		int err = f.sym[S_GETSPECIFIC] ? decode_1stblock(&f, f.sym[S_GETSPECIFIC], off)
					       : -ENOENT;

		elf_close(&f);
		if (!err)
			return 0;
	}
	return -ENOENT;
}

/* .eh_frame_hdr's sorted table of function starts (the usual encoding:
 * udata4 count, datarel sdata4 pairs).  Returns the number of entries, 0
 * when absent or otherwise encoded; *hdr, *base: the section and its
 * address (caller frees *hdr). */
static uint32_t ehhdr_table(struct elf_file *f, uint8_t **hdr, uint64_t *base)
{
	size_t shstrndx;

	*hdr = NULL;
	if (elf_getshdrstrndx(f->elf, &shstrndx))
		return 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(f->elf, scn));) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(f->elf, shstrndx, sh.sh_name)) ||
		    strcmp(name, ".eh_frame_hdr") || sh.sh_size < 12 || sh.sh_size > (64u << 20))
			continue;
		uint8_t *h = malloc(sh.sh_size);
		uint32_t n;

		if (!h || elf_read(f, sh.sh_addr, h, sh.sh_size) || h[0] != 1 || h[2] != 0x03 ||
		    h[3] != 0x3b || (h[1] & 0x0f) != 0x0b) {
			free(h);
			return 0;
		}
		memcpy(&n, h + 8, 4);
		if (n > (sh.sh_size - 12) / 8) {
			free(h);
			return 0;
		}
		*hdr = h;
		*base = sh.sh_addr;
		return n;
	}
	return 0;
}

/* The .cold part of the eval loop in an interpreter whose symbol table is
 * stripped (only _PyEval_EvalFrameDefault, a dynamic symbol, is named): GCC
 * may move most of the loop there (Debian's 3.14 and 3.15: a 1 KiB entry
 * and 84 KiB of .cold, where most eval activations' return addresses lie).
 * It is the unwind-table function (from .eh_frame_hdr: its start up to the
 * next one's) that the most jumps out of the named part land in, at least
 * 3 (a tail call lands once in each callee).  Link addresses; 0, 0 when
 * none stands out. */
static void eval_cold_from_jumps(struct elf_file *f, uint64_t fn, uint64_t size,
				 struct gs_py_range *out)
{
	struct {
		uint64_t lo, hi;
		int n;
	} cand[8] = {};
	uint8_t *hdr = NULL, *c = size >= 16 && size <= (1u << 20) ? malloc(size) : NULL;
	uint64_t base = 0;
	uint32_t nt = c ? ehhdr_table(f, &hdr, &base) : 0;
	int best = -1;

	*out = (struct gs_py_range){ 0, 0 };
	if (!nt || elf_read(f, fn, c, size)) {
		free(c);
		free(hdr);
		return;
	}
	for (uint64_t i = 0; i + 6 <= size; i++) {
		int32_t rel, e;
		uint64_t to, lo, hi;
		uint32_t l = 0, r = nt;

		if (c[i] == 0x0f && (c[i + 1] & 0xf0) == 0x80) { /* jcc rel32 */
			memcpy(&rel, &c[i + 2], 4);
			to = fn + i + 6 + (int64_t)rel;
		} else if (c[i] == 0xe9) { /* jmp rel32 */
			memcpy(&rel, &c[i + 1], 4);
			to = fn + i + 5 + (int64_t)rel;
		} else {
			continue;
		}
		if (to >= fn && to < fn + size)
			continue;
		while (r - l > 1) { /* last entry starting at or below `to` */
			uint32_t m = l + (r - l) / 2;

			memcpy(&e, hdr + 12 + (size_t)m * 8, 4);
			if (base + (int64_t)e <= to)
				l = m;
			else
				r = m;
		}
		memcpy(&e, hdr + 12 + (size_t)l * 8, 4);
		lo = base + (int64_t)e;
		if (lo > to || l + 1 >= nt)
			continue;
		memcpy(&e, hdr + 12 + (size_t)(l + 1) * 8, 4);
		hi = base + (int64_t)e;
		for (int k = 0; k < 8; k++)
			if (!cand[k].n || (cand[k].lo == lo && cand[k].hi == hi)) {
				cand[k].lo = lo;
				cand[k].hi = hi;
				cand[k].n++;
				break;
			}
	}
	for (int k = 0; k < 8; k++)
		if (cand[k].n >= 3 && (best < 0 || cand[k].n > cand[best].n))
			best = k;
	if (best >= 0)
		*out = (struct gs_py_range){ cand[best].lo, cand[best].hi };
	free(c);
	free(hdr);
}

/* The eval loop's code, for the merge (gs_py_eval_ranges). */
static void eval_ranges(struct elf_file *f, struct gs_py_range *r)
{
	static const int syms[GS_PY_EVAL_RANGES] = { S_EVAL, S_EVAL_COLD };

	for (int i = 0; i < GS_PY_EVAL_RANGES; i++) {
		uint64_t v = f->sym[syms[i]], size = f->sym_size[syms[i]];

		r[i] = v && size ? (struct gs_py_range){ v + f->bias, v + f->bias + size }
				 : (struct gs_py_range){ 0, 0 };
	}
	if (!r[1].hi && r[0].hi) { /* no .cold symbol: stripped */
		eval_cold_from_jumps(f, f->sym[S_EVAL], f->sym_size[S_EVAL], &r[1]);
		if (r[1].hi) {
			r[1].lo += f->bias;
			r[1].hi += f->bias;
		}
	}
}

static int discover(struct gs_py *py, struct discover *d, struct gs_py_cfg *cfg,
		    struct gs_py_info *info, struct py_layout *lay)
{
	struct map_ent *maps = NULL;
	struct elf_file f = { .fd = -1 };
	struct elf_syms s = {};
	int n = 0, err;
	char ver[32] = "";
	uint32_t hex = 0;

	if ((err = read_maps(py, d->tgid, &maps, &n)))
		return err == -ESRCH ? err : fail(d, err, "cannot read /proc/%u/maps", d->tgid);
	if ((err = find_interpreter(d, maps, n, &f))) {
		/* An old Python (no _PyRuntime before 3.7) still gets a note. */
		for (int i = 0; i < n; i++)
			if (strstr(base_name(maps[i].path), "python2") ||
			    strstr(base_name(maps[i].path), "libpython2")) {
				snprintf(d->build, sizeof(d->build), "%s", maps[i].path);
				err = fail(d, -ENOTSUP,
					   "Python 2 is not supported (native stacks only)");
				break;
			}
		free(maps);
		return err;
	}
	s.runtime = (f.sym[S_RUNTIME] ? f.sym[S_RUNTIME] : f.pyruntime_sec) + f.bias;
	s.gilstate = f.sym[S_GILSTATE];
	s.none = f.sym[S_NONE] ? f.sym[S_NONE] + f.bias : 0;
	s.code_type = f.sym[S_CODE] ? f.sym[S_CODE] + f.bias : 0;
	s.frame_type = f.sym[S_FRAME] ? f.sym[S_FRAME] + f.bias : 0;
	s.bytes_type = f.sym[S_BYTES] ? f.sym[S_BYTES] + f.bias : 0;
	/* Version: Py_Version (3.11+), else the PY_VERSION literal. */
	if (f.sym[S_VERSION] && !elf_read(&f, f.sym[S_VERSION], &hex, 4)) {
		snprintf(ver, sizeof(ver), "%u.%u.%u", hex >> 24, (hex >> 16) & 255,
			 (hex >> 8) & 255);
	} else if (f.sym[S_GETVERSION] &&
		   !version_from_getversion(&f, f.sym[S_GETVERSION], ver, sizeof(ver))) {
		ver[strcspn(ver, " ")] = 0;
		hex = hex_from_string(ver);
	} else {
		snprintf(d->build, sizeof(d->build), "CPython (%s)", f.path);
		err = fail(d, -ENOTSUP,
			   "cannot tell the Python version (no Py_Version, no "
			   "Py_GetVersion): Python frames off");
		goto out;
	}
	snprintf(d->build, sizeof(d->build), "CPython %s (%s)", ver, f.path);
	if (info) {
		memset(info, 0, sizeof(*info));
		info->version_hex = hex;
		snprintf(info->version, sizeof(info->version), "%s", ver);
		snprintf(info->path, sizeof(info->path), "%s", f.path);
		info->runtime_addr = s.runtime;
	}
	uint32_t major = hex >> 24, minor = (hex >> 16) & 255;
	const struct py_table *t = NULL;
	struct py_table dyn;
	char note[720] = "";

	for (size_t i = 0; major == 3 && i < sizeof(tables) / sizeof(tables[0]); i++)
		if (tables[i].minor == minor)
			t = &tables[i];
	if (!t && major == 3 && minor > PY_TABLE_LAST) {
		/* 3.13+: the layout the interpreter publishes (a patch release
		 * that moves a field, or a newer minor version, still works) */
		if ((err = read_debug_offsets(d, s.runtime, hex, &dyn, note, sizeof(note))))
			goto out;
		t = &dyn;
	}
	if (!t) {
		err = fail(d, -ENOTSUP,
			   "Python %u.%u is not supported (3.8 and newer are); native "
			   "stacks only",
			   major, minor);
		goto out;
	}
	if (strstr(base_name(f.path), "t.so") ||
	    (minor >= 13 && base_name(f.path)[strlen(base_name(f.path)) - 1] == 't')) {
		err = fail(d, -ENOTSUP,
			   "free-threaded build (%u.%ut): not supported; native stacks only", major,
			   minor);
		goto out;
	}
	if (!s.code_type || !s.none || !s.gilstate) {
		err = fail(d, -EPROTO,
			   "PyCode_Type/_Py_NoneStruct/PyGILState_GetThisThreadState "
			   "not found in the dynamic symbols: unsupported build");
		goto out;
	}
	/* TSS key: decode PyGILState_GetThisThreadState, else the table.
	 * Read it before the layout cross-checks: it is set by Py_Initialize,
	 * so once it is, ld.so has finished relocating libpython (right after
	 * exec, a half-relocated tp_members table reads as garbage). */
	int64_t tss_off = 0, tls_off = 0;
	bool tls = false;

	if (decode_tss_off(&f, s.gilstate, s.runtime - f.bias, &tss_off)) {
		if (minor >= 15 && !decode_tls_gilstate(&f, d->tgid, s.gilstate, &tls_off)) {
			tls = true;
		} else if (!t->tss_off) {
			err = fail(d, -EPROTO,
				   "cannot find the thread-state key in "
				   "PyGILState_GetThisThreadState: unsupported build "
				   "(Python frames off)");
			goto out;
		} else {
			tss_off = t->tss_off + 4;
		}
	}
	/* Py_tss_t {int _is_initialized; pthread_key_t _key} */
	int32_t tss[2] = { 0, GS_PY_TSS_TLS };

	if (tls) {
		/* No key to tell "initialized": the runtime's interpreter list */
		uint64_t head = 0;

		if (rd_u64(d->tgid, s.runtime + t->interp_head, &head)) {
			err = fail(d, -EAGAIN, "cannot read _PyRuntime");
			goto out;
		}
		if (!head) {
			err = fail(d, -EAGAIN, "interpreter not initialized yet");
			goto out;
		}
	} else {
		if (rd(d->tgid, s.runtime + (uint64_t)tss_off - 4, tss, sizeof(tss))) {
			/* ld.so may not have mapped libpython's data segment yet */
			err = fail(d, -EAGAIN,
				   "cannot read the thread-state key at _PyRuntime+0x%" PRIx64,
				   (uint64_t)tss_off);
			goto out;
		}
		if (tss[0] == 0) { /* interpreter still starting: ask again later */
			err = fail(d, -EAGAIN, "interpreter not initialized yet");
			goto out;
		}
		if (tss[0] != 1 || tss[1] < 0 || tss[1] >= 32) {
			/* -EAGAIN: within milliseconds of exec the key reads as garbage
			 * for a moment (seen with spawn workers once samples of young
			 * processes are read at once; likely ld.so mapping libpython's
			 * span before its data segment).  The session retries for a few
			 * seconds, then reports this message. */
			err =
			    fail(d, -EAGAIN,
				 "thread-state key at _PyRuntime+0x%" PRIx64 " looks wrong "
				 "(initialized %d, key %d): unsupported build (Python frames off)",
				 (uint64_t)tss_off, tss[0], tss[1]);
			goto out;
		}
	}
	if ((err = check_layout(d, t, &s)))
		goto out;
	uint32_t first = 0;

	if (tls) {
		first = (uint32_t)(int32_t)tls_off; /* GS_PY_TSS_TLS: records.h */
	} else if (find_libc_1stblock(d, maps, n, &first)) {
		/* -EAGAIN, not -ENOTSUP: right after exec, the maps read above
		 * can predate ld.so mapping libc while the interpreter got
		 * initialized during our ELF scans (seen under load).  A retry
		 * reads fresh maps; the session reports this message if it
		 * never succeeds (musl, static libc). */
		err = fail(d, -EAGAIN,
			   "no glibc pthread_getspecific found (musl or static libc): "
			   "Python frames off");
		goto out;
	}
	memset(cfg, 0, sizeof(*cfg));
	cfg->version_hex = hex;
	cfg->tss_key = tss[1];
	cfg->tls_1stblock = first;
	cfg->py_none = minor >= 13 ? s.none : 0;
	cfg->code_type = s.code_type;
	cfg->ts_frame = t->ts_frame;
	cfg->cframe_current = t->cframe_current;
	cfg->fr_back = t->fr_back;
	cfg->fr_code = t->fr_code;
	cfg->fr_lasti = t->fr_lasti;
	cfg->fr_entry = t->fr_entry;
	cfg->code_adaptive = t->code_size;
	cfg->code_firstlineno = t->co_firstlineno;
	cfg->code_argcount = t->co_argcount;
	*lay = (struct py_layout){
		.version_hex = hex,
		.co_argcount = t->co_argcount,
		.co_firstlineno = t->co_firstlineno,
		.co_filename = t->co_filename,
		.co_name = t->co_name,
		.co_qualname = t->co_qualname,
		.co_table = t->co_table,
		.ascii_size = t->ascii_size,
		.compact_size = t->compact_size,
		.str_length = t->str_length,
		.str_state = t->str_state,
		.bytes_size = t->bytes_size,
		.bytes_sval = t->bytes_sval,
		.code_type = s.code_type,
	};
	eval_ranges(&f, lay->eval);
	if (note[0] && d->msg && d->msglen) /* works, with a caveat for the report */
		snprintf(d->msg, d->msglen, "%s", note);
	err = 0;
out:
	elf_close(&f);
	free(maps);
	(void)py;
	return err;
}

int gs_py_discover(struct gs_py *py, uint32_t tgid, struct gs_py_cfg *cfg, struct gs_py_info *info,
		   char *msg, size_t msglen)
{
	struct discover d = { .tgid = tgid, .msg = msg, .msglen = msglen };
	struct py_layout lay;
	struct py_space *sp;
	int err;

	if (msg && msglen)
		msg[0] = 0;
	err = discover(py, &d, cfg, info, &lay);
	if (err == -ESRCH && msg && msglen)
		snprintf(msg, msglen, "pid %u: process exited before its Python runtime was read",
			 tgid);
	if (err)
		return err;
	/* Same address space already known (re-discovery of a fork child)? */
	sp = space_of(py, tgid);
	if (sp && !memcmp(&sp->lay, &lay, sizeof(lay)))
		return 0;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->lay = lay;
	err = attach(py, tgid, sp);
	if (err)
		free(sp);
	return err;
}

int gs_py_fork(struct gs_py *py, uint32_t parent, uint32_t child)
{
	struct py_space *sp = space_of(py, parent);

	return sp ? attach(py, child, sp) : 0;
}

void gs_py_exec(struct gs_py *py, uint32_t tgid)
{
	struct py_proc *pp = proc_of(py, tgid, false);
	struct py_space *sp = pp ? pp->sp : NULL;

	if (!sp)
		return;
	/* Samples taken before the exec still name code objects of the old
	 * image: keep its cache reachable for this tgid. */
	space_put(pp->retired);
	space_del_pid(sp, tgid);
	pp->sp = NULL;
	pp->retired = sp;
}

uint32_t gs_py_eval_ranges(struct gs_py *py, uint32_t tgid, struct gs_py_range *out, uint32_t cap)
{
	struct py_space *sp = space_of(py, tgid);
	uint32_t n = 0;

	if (!sp) /* exec'd into a non-Python image */
		sp = retired_of(py, tgid);
	for (uint32_t i = 0; sp && i < GS_PY_EVAL_RANGES && n < cap; i++)
		if (sp->lay.eval[i].hi)
			out[n++] = sp->lay.eval[i];
	return n;
}

void gs_py_exit(struct gs_py *py, uint32_t tgid)
{
	/* Keep the tgid -> space link: samples recorded before the exit still
	 * need the layout; reads simply fail for it and fall back to others. */
	(void)py;
	(void)tgid;
}
