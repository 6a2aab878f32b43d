// SPDX-License-Identifier: MIT
/*
 * CFI unwind tables (see bpf/cfi.h): .eh_frame -> rows with libdw, rows ->
 * BPF maps, processes -> sorted mapping arrays.
 *
 * Row building walks every FDE (dwarf_next_cfi, pointer encodings decoded
 * here because libdw keeps its FDE decoder private) and, inside each FDE,
 * asks libdw for the frame state of each row in turn (dwarf_cfi_addrframe
 * gives the row's [start, end)).  Each state is reduced to one of the rules
 * that BPF can follow; everything else is marked, never guessed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gpusample/procmaps.h"
#include "gpusample/records.h"
#include "bpf/cfi.h"

#define X86_64_RBP 6
#define X86_64_RSP 7
#define X86_64_RA 16

/* ---- rule reduction ------------------------------------------------------ */

static int64_t op_offset(const Dwarf_Op *op)
{
	return (int64_t)op->number;
}

/* The lazy PLT CFA expression written by GNU ld / lld for .plt:
 *   DW_OP_breg7 N; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litK;
 *   DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus */
static bool is_plt_expr(const Dwarf_Op *o, size_t n, int32_t *base, int16_t *thresh)
{
	if (n != 9 || o[0].atom != DW_OP_breg7 || o[1].atom != DW_OP_breg16 || o[1].number != 0 ||
	    o[2].atom != DW_OP_lit15 || o[3].atom != DW_OP_and || o[4].atom < DW_OP_lit0 ||
	    o[4].atom > DW_OP_lit31 || o[5].atom != DW_OP_ge || o[6].atom != DW_OP_lit3 ||
	    o[7].atom != DW_OP_shl || o[8].atom != DW_OP_plus)
		return false;
	*base = (int32_t)op_offset(&o[0]);
	*thresh = (int16_t)(o[4].atom - DW_OP_lit0);
	return true;
}

/* CFA = reg + off, as libdw reports a plain DW_CFA_def_cfa rule. */
static bool cfa_reg_off(const Dwarf_Op *o, size_t n, int *reg, int64_t *off)
{
	if (n != 1)
		return false;
	if (o[0].atom == DW_OP_bregx) {
		*reg = (int)o[0].number;
		*off = (int64_t)o[0].number2;
		return true;
	}
	if (o[0].atom >= DW_OP_breg0 && o[0].atom <= DW_OP_breg31) {
		*reg = o[0].atom - DW_OP_breg0;
		*off = op_offset(&o[0]);
		return true;
	}
	return false;
}

/* Register saved at CFA + off (DW_CFA_offset and friends): libdw gives
 * DW_OP_call_frame_cfa [DW_OP_plus_uconst off | DW_OP_consts off DW_OP_plus]. */
static bool reg_at_cfa(const Dwarf_Op *o, size_t n, int64_t *off)
{
	if (n < 1 || o[0].atom != DW_OP_call_frame_cfa)
		return false;
	if (n == 1) {
		*off = 0;
		return true;
	}
	if (n == 2 && o[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)o[1].number;
		return true;
	}
	if (n == 3 && o[1].atom == DW_OP_consts && o[2].atom == DW_OP_plus) {
		*off = (int64_t)o[1].number;
		return true;
	}
	return false;
}

/* Register rule as DW_OP_breg7 off (expression rule address = RSP + off),
 * which is how glibc's __restore_rt describes the sigcontext slots. */
static bool reg_at_rsp(const Dwarf_Op *o, size_t n, int64_t *off)
{
	/* libdw prefixes DW_CFA_expression rules with DW_OP_call_frame_cfa */
	if (n != 2 || o[0].atom != DW_OP_call_frame_cfa || o[1].atom != DW_OP_breg7)
		return false;
	*off = op_offset(&o[1]);
	return true;
}

/* Signal trampoline: CFA = *(RSP + oRSP); RIP at RSP + oRSP + 8 (struct
 * sigcontext keeps rsp, rip adjacent); RBP at RSP + oRBP. */
static void reduce_signal(Dwarf_Frame *f, const Dwarf_Op *cfa, size_t ncfa, struct gs_cfi_rule *r)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t rip_off, rbp_off;

	r->cfa_type = GS_CFA_EXPR;
	if (ncfa != 2 || cfa[0].atom != DW_OP_breg7 || cfa[1].atom != DW_OP_deref)
		return;
	if (dwarf_frame_register(f, X86_64_RA, mem, &ops, &n) != 0 || !reg_at_rsp(ops, n, &rip_off))
		return;
	if (rip_off != op_offset(&cfa[0]) + 8)
		return;
	if (dwarf_frame_register(f, X86_64_RBP, mem, &ops, &n) != 0 || !reg_at_rsp(ops, n, &rbp_off))
		return;
	if (rbp_off < INT16_MIN || rbp_off > INT16_MAX)
		return;
	r->cfa_type = GS_CFA_SIGNAL;
	r->cfa_off = (int32_t)op_offset(&cfa[0]);
	r->rbp_type = GS_RBP_CFA; /* read at RSP + rbp_off for SIGNAL rows */
	r->rbp_off = (int16_t)rbp_off;
}

/* Reduce libdw's frame state at one row to a rule BPF can follow. */
static void reduce_frame(Dwarf_Frame *f, bool signal, struct gs_cfi_rule *r)
{
	Dwarf_Op mem[3], *ops, *cfa;
	size_t n, ncfa;
	int reg;
	int64_t off;

	memset(r, 0, sizeof(*r));
	r->cfa_type = GS_CFA_EXPR;
	if (dwarf_frame_cfa(f, &cfa, &ncfa) != 0 || ncfa == 0)
		return;
	if (signal) {
		reduce_signal(f, cfa, ncfa, r);
		return;
	}
	/* Return address: undefined marks the outermost frame. */
	if (dwarf_frame_register(f, X86_64_RA, mem, &ops, &n) != 0)
		return;
	if (n == 0 && ops == mem) {
		r->cfa_type = GS_CFA_END;
		return;
	}
	if (!reg_at_cfa(ops, n, &off) || off != -8)
		return;

	if (cfa_reg_off(cfa, ncfa, &reg, &off) && (reg == X86_64_RSP || reg == X86_64_RBP)) {
		if (off < INT32_MIN || off > INT32_MAX)
			return;
		r->cfa_type = reg == X86_64_RSP ? GS_CFA_RSP : GS_CFA_RBP;
		r->cfa_off = (int32_t)off;
	} else if (ncfa == 2 && cfa[0].atom == DW_OP_breg6 && cfa[1].atom == DW_OP_deref &&
		   op_offset(&cfa[0]) >= INT32_MIN && op_offset(&cfa[0]) <= INT32_MAX) {
		r->cfa_type = GS_CFA_DEREF_RBP;
		r->cfa_off = (int32_t)op_offset(&cfa[0]);
	} else if (!is_plt_expr(cfa, ncfa, &r->cfa_off, &r->rbp_off)) {
		return; /* GS_CFA_EXPR */
	} else {
		r->cfa_type = GS_CFA_PLT;
		return; /* PLT stubs never touch RBP; rbp_off holds the threshold */
	}

	if (dwarf_frame_register(f, X86_64_RBP, mem, &ops, &n) != 0) {
		r->rbp_type = GS_RBP_LOST;
	} else if (n == 0) {
		r->rbp_type = ops == NULL ? GS_RBP_SAME : GS_RBP_LOST;
	} else if (reg_at_cfa(ops, n, &off) && off >= INT16_MIN && off <= INT16_MAX) {
		r->rbp_type = GS_RBP_CFA;
		r->rbp_off = (int16_t)off;
	} else if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_breg6 &&
		   op_offset(&ops[1]) >= INT16_MIN && op_offset(&ops[1]) <= INT16_MAX) {
		r->rbp_type = GS_RBP_RBP;
		r->rbp_off = (int16_t)op_offset(&ops[1]);
	} else {
		r->rbp_type = GS_RBP_LOST;
	}
}

/* ---- rule dedupe (open addressing on the 8-byte rule) -------------------- */

struct rule_set {
	struct gs_cfi_rule *rules;
	uint32_t n, cap;
	uint32_t *slots; /* id + 1, 0 = empty */
	uint32_t nslots;
};

static uint64_t rule_key(const struct gs_cfi_rule *r)
{
	uint64_t k;

	memcpy(&k, r, sizeof(k));
	return k;
}

static uint32_t rule_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return (uint32_t)k;
}

static int rule_set_grow(struct rule_set *s)
{
	uint32_t ns = s->nslots ? s->nslots * 2 : 256;
	uint32_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t h = rule_hash(rule_key(&s->rules[i])) & (ns - 1);

		while (slots[h])
			h = (h + 1) & (ns - 1);
		slots[h] = i + 1;
	}
	free(s->slots);
	s->slots = slots;
	s->nslots = ns;
	return 0;
}

/* Id of r in s (added when new); <0 on ENOMEM. */
static int64_t rule_set_id(struct rule_set *s, const struct gs_cfi_rule *r)
{
	uint64_t k = rule_key(r);
	uint32_t h;

	if ((s->n + 1) * 2 > s->nslots && rule_set_grow(s))
		return -ENOMEM;
	h = rule_hash(k) & (s->nslots - 1);
	while (s->slots[h]) {
		if (rule_key(&s->rules[s->slots[h] - 1]) == k)
			return s->slots[h] - 1;
		h = (h + 1) & (s->nslots - 1);
	}
	if (s->n == s->cap) {
		uint32_t nc = s->cap ? s->cap * 2 : 64;
		struct gs_cfi_rule *nr = realloc(s->rules, nc * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		s->rules = nr;
		s->cap = nc;
	}
	s->rules[s->n] = *r;
	s->slots[h] = s->n + 1;
	return s->n++;
}

static void rule_set_free(struct rule_set *s)
{
	free(s->rules);
	free(s->slots);
	memset(s, 0, sizeof(*s));
}

/* ---- FDE enumeration ------------------------------------------------------ */

struct raw_row {
	uint64_t pc;
	uint32_t rule; /* local id; UINT32_MAX = gap (GS_CFA_NONE) */
};

struct row_vec {
	struct raw_row *v;
	size_t n, cap;
};

static int row_push(struct row_vec *rv, uint64_t pc, uint32_t rule)
{
	if (rv->n == rv->cap) {
		size_t nc = rv->cap ? rv->cap * 2 : 4096;
		struct raw_row *nv = realloc(rv->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		rv->v = nv;
		rv->cap = nc;
	}
	rv->v[rv->n].pc = pc;
	rv->v[rv->n].rule = rule;
	rv->n++;
	return 0;
}

static uint64_t read_uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (*p < end) {
		uint8_t b = *(*p)++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t read_sleb(const uint8_t **p, const uint8_t *end)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;

	while (*p < end) {
		b = *(*p)++;
		if (shift < 64)
			v |= (int64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

/* Decode one DW_EH_PE-encoded value at *p; pc_base is the runtime (ELF
 * vaddr) address of *p for pcrel.  Returns -1 for encodings not handled. */
static int read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t pc_base,
			uint64_t *out)
{
	const uint8_t *q = *p;
	uint64_t v;

	if (enc == DW_EH_PE_omit)
		return -1;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		if (end - q < 8) return -1;
		memcpy(&v, q, 8); q += 8; break;
	case DW_EH_PE_udata2: { uint16_t x; if (end - q < 2) return -1; memcpy(&x, q, 2); v = x; q += 2; break; }
	case DW_EH_PE_sdata2: { int16_t x; if (end - q < 2) return -1; memcpy(&x, q, 2); v = (uint64_t)(int64_t)x; q += 2; break; }
	case DW_EH_PE_udata4: { uint32_t x; if (end - q < 4) return -1; memcpy(&x, q, 4); v = x; q += 4; break; }
	case DW_EH_PE_sdata4: { int32_t x; if (end - q < 4) return -1; memcpy(&x, q, 4); v = (uint64_t)(int64_t)x; q += 4; break; }
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		if (end - q < 8) return -1;
		memcpy(&v, q, 8); q += 8; break;
	case DW_EH_PE_uleb128: v = read_uleb(&q, end); break;
	case DW_EH_PE_sleb128: v = (uint64_t)read_sleb(&q, end); break;
	default: return -1;
	}
	switch (enc & 0x70) {
	case DW_EH_PE_absptr: break;
	case DW_EH_PE_pcrel: v += pc_base; break;
	default: return -1; /* datarel/textrel/funcrel: not used in x86-64 .eh_frame */
	}
	*p = q;
	*out = v;
	return 0;
}

/* FDE pointer encoding from a CIE's augmentation ('R'), default absptr. */
static uint8_t cie_fde_encoding(const Dwarf_CIE *cie)
{
	const char *a = cie->augmentation;
	const uint8_t *d = cie->augmentation_data;
	const uint8_t *end = d ? d + cie->augmentation_data_size : NULL;

	if (!a || a[0] != 'z' || !d)
		return DW_EH_PE_absptr;
	for (a++; *a && d < end; a++) {
		switch (*a) {
		case 'R':
			return *d;
		case 'L':
			d++;
			break;
		case 'P': {
			uint8_t penc = *d++;
			uint64_t dummy;

			/* the personality pointer's value does not matter, only its size */
			if (read_encoded(&d, end, penc & 0x0f, 0, &dummy))
				return DW_EH_PE_omit;
			break;
		}
		case 'S':
		case 'B':
			break;
		default:
			return DW_EH_PE_omit;
		}
	}
	return DW_EH_PE_absptr;
}

struct cie_cache {
	Dwarf_Off off[64];
	uint8_t enc[64];
	unsigned n, next;
};

static int cie_encoding(struct cie_cache *cc, Elf *elf, Elf_Data *data, Dwarf_Off cie_off,
			uint8_t *enc)
{
	Dwarf_CFI_Entry e;
	Dwarf_Off next;

	for (unsigned i = 0; i < cc->n; i++)
		if (cc->off[i] == cie_off) {
			*enc = cc->enc[i];
			return 0;
		}
	if (dwarf_next_cfi((const unsigned char *)elf_getident(elf, NULL), data, true, cie_off, &next,
			   &e) != 0 ||
	    !dwarf_cfi_cie_p(&e))
		return -1;
	*enc = cie_fde_encoding(&e.cie);
	unsigned slot = cc->n < 64 ? cc->n++ : (cc->next++ % 64);
	cc->off[slot] = cie_off;
	cc->enc[slot] = *enc;
	return 0;
}

/* Rows of one FDE [lo, hi), then a gap marker at hi. */
static int fde_rows(Dwarf_CFI *cfi, uint64_t lo, uint64_t hi, struct rule_set *rs,
		    struct row_vec *rv, struct gs_cfi_table *t)
{
	uint64_t addr = lo;
	int err;

	while (addr < hi) {
		Dwarf_Frame *f = NULL;
		Dwarf_Addr s, e;
		bool signal = false;
		struct gs_cfi_rule r;
		int64_t id;

		if (dwarf_cfi_addrframe(cfi, addr, &f) != 0)
			break;
		if (dwarf_frame_info(f, &s, &e, &signal) < 0) {
			free(f);
			break;
		}
		reduce_frame(f, signal, &r);
		free(f);
		t->n_expr += r.cfa_type == GS_CFA_EXPR;
		t->n_plt += r.cfa_type == GS_CFA_PLT;
		t->n_signal += r.cfa_type == GS_CFA_SIGNAL;
		id = rule_set_id(rs, &r);
		if (id < 0)
			return (int)id;
		if ((err = row_push(rv, addr, (uint32_t)id)))
			return err;
		if (e <= addr)
			break;
		addr = e;
	}
	return row_push(rv, hi, UINT32_MAX);
}

static int cmp_raw_row(const void *a, const void *b)
{
	const struct raw_row *x = a, *y = b;

	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	/* at one pc, a real rule sorts before a gap marker so it wins */
	return (x->rule == UINT32_MAX) - (y->rule == UINT32_MAX);
}

/* Sort, drop gap markers shadowed by an FDE starting at the same pc, merge
 * identical consecutive rules. */
static int finish_rows(struct row_vec *rv, struct rule_set *rs, struct gs_cfi_table *t)
{
	struct gs_cfi_rule none = { .cfa_type = GS_CFA_NONE };
	int64_t none_id = rule_set_id(rs, &none);
	struct gs_cfi_row *out;
	size_t n = 0;

	if (none_id < 0)
		return -ENOMEM;
	qsort(rv->v, rv->n, sizeof(*rv->v), cmp_raw_row);
	out = malloc((rv->n ? rv->n : 1) * sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < rv->n; i++) {
		uint32_t rule = rv->v[i].rule == UINT32_MAX ? (uint32_t)none_id : rv->v[i].rule;

		if (rv->v[i].pc > UINT32_MAX)
			continue; /* objects above 4 GiB of vaddr: not in 32-bit rows */
		if (i && rv->v[i - 1].pc == rv->v[i].pc)
			continue; /* the first (real) rule at this pc wins */
		if (n && out[n - 1].rule == rule)
			continue;
		out[n].pc = (uint32_t)rv->v[i].pc;
		out[n].rule = rule;
		n++;
	}
	t->rows = out;
	t->n_rows = (uint32_t)n;
	t->rules = rs->rules;
	t->n_rules = rs->n;
	rs->rules = NULL;
	return 0;
}

static int build_from_elf(Elf *elf, struct gs_cfi_table *t)
{
	GElf_Ehdr eh;
	Elf_Scn *scn = NULL;
	Elf_Data *data = NULL;
	GElf_Shdr sh_eh = { 0 };
	size_t shstrndx;
	Dwarf_CFI *cfi;
	struct rule_set rs = { 0 };
	struct row_vec rv = { 0 };
	struct cie_cache cc = { 0 };
	Dwarf_Off off = 0, next;
	int err = 0;

	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 || eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -EINVAL;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".eh_frame")) {
			sh_eh = sh;
			data = elf_getdata(scn, NULL);
			break;
		}
	}
	if (!data || !data->d_buf || !data->d_size)
		return -ENOENT;
	cfi = dwarf_getcfi_elf(elf);
	if (!cfi)
		return -ENOENT;

	for (;;) {
		Dwarf_CFI_Entry e;
		int rc = dwarf_next_cfi(eh.e_ident, data, true, off, &next, &e);
		const uint8_t *p, *end;
		uint64_t lo, len;
		uint8_t enc;

		if (rc != 0)
			break; /* 1 = end; -1 = malformed tail: keep what we have */
		off = next;
		if (dwarf_cfi_cie_p(&e))
			continue;
		if (cie_encoding(&cc, elf, data, e.fde.CIE_pointer, &enc) || enc == DW_EH_PE_omit)
			continue;
		p = e.fde.start;
		end = e.fde.end;
		if (read_encoded(&p, end, enc, sh_eh.sh_addr + (uint64_t)(p - (const uint8_t *)data->d_buf),
				 &lo) ||
		    read_encoded(&p, end, enc & 0x0f, 0, &len))
			continue;
		if (len == 0 || lo == 0)
			continue; /* discarded FDE (e.g. from a --gc-sections'd function) */
		t->n_fdes++;
		if ((err = fde_rows(cfi, lo, lo + len, &rs, &rv, t)))
			break;
	}
	if (!err)
		err = finish_rows(&rv, &rs, t);
	free(rv.v);
	rule_set_free(&rs);
	dwarf_cfi_end(cfi);
	return err;
}

int gs_cfi_table_build(const char *path, int fd, struct gs_cfi_table *t)
{
	bool own = fd < 0;
	Elf *elf;
	int err;

	memset(t, 0, sizeof(*t));
	elf_version(EV_CURRENT);
	if (own && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		err = -EINVAL;
	} else {
		err = build_from_elf(elf, t);
		elf_end(elf);
	}
	if (own)
		close(fd);
	if (err)
		gs_cfi_table_free(t);
	return err;
}

void gs_cfi_table_free(struct gs_cfi_table *t)
{
	free(t->rows);
	free(t->rules);
	memset(t, 0, sizeof(*t));
}

const struct gs_cfi_rule *gs_cfi_table_lookup(const struct gs_cfi_table *t, uint64_t pc)
{
	uint32_t lo = 0, hi = t->n_rows;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (pc < t->rows[mid].pc)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == 0)
		return NULL;
	const struct gs_cfi_rule *r = &t->rules[t->rows[lo - 1].rule];
	return r->cfa_type == GS_CFA_NONE ? NULL : r;
}

/* ---- BPF maps and processes ------------------------------------------------ */

#define GS_CFI_MAX_LOADS 8

struct cfi_obj {
	char file_key[48];  /* "maj:min:ino" from /proc/PID/maps */
	char build_id[41];  /* hex, "" if none */
	int status;         /* 0 table loaded, <0 why not (table_id 0: frame pointers) */
	uint32_t table_id;
	uint32_t n_pages;
	unsigned n_load;
	struct { uint64_t vaddr, offset, filesz; } load[GS_CFI_MAX_LOADS]; /* PF_X PT_LOADs */
};

struct cfi_proc {
	uint32_t tgid;
	uint64_t last_ns;
	uint64_t reread_ns;  /* current back-off between miss-driven re-reads */
	uint32_t n_files;    /* file-backed executable mappings at the last read */
};

#define REREAD_MIN_NS 100000000ULL   /* 100 ms */
#define REREAD_MAX_NS 5000000000ULL  /* 5 s */

struct gs_cfi {
	int procs_fd, tables_fd, rules_fd, miss_fd;
	struct rule_set rules; /* global rule ids = gs_cfi_rules indices */
	struct cfi_obj *objs;
	size_t n_objs, cap_objs;
	uint32_t next_table;
	struct cfi_proc *procs;
	size_t n_procs, cap_procs;
	struct gs_cfi_proc *scratch;
	struct gs_cfi_stats st;
	bool verbose;
	bool lazy;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int map_fd(struct bpf_object *obj, const char *name, char *err, size_t errlen)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
	int fd = m ? bpf_map__fd(m) : -1;

	if (fd < 0)
		snprintf(err, errlen,
			 "BPF map %s not found or not loaded: the BPF object must include "
			 "bpf/unwind.bpf.h and be loaded before gs_cfi_open", name);
	return fd;
}

int gs_cfi_open(struct bpf_object *obj, struct gs_cfi **out, char *err, size_t errlen)
{
	struct gs_cfi *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c || !(c->scratch = malloc(sizeof(*c->scratch)))) {
		free(c);
		snprintf(err, errlen, "out of memory for CFI tables");
		return -ENOMEM;
	}
	if ((c->procs_fd = map_fd(obj, "gs_cfi_procs", err, errlen)) < 0 ||
	    (c->tables_fd = map_fd(obj, "gs_cfi_tables", err, errlen)) < 0 ||
	    (c->rules_fd = map_fd(obj, "gs_cfi_rules", err, errlen)) < 0 ||
	    (c->miss_fd = map_fd(obj, "gs_cfi_miss", err, errlen)) < 0) {
		free(c->scratch);
		free(c);
		return -ENOENT;
	}
	c->next_table = 1; /* 0 = no table */
	elf_version(EV_CURRENT);
	*out = c;
	return 0;
}

void gs_cfi_set_lazy(struct gs_cfi *cfi, bool on)
{
	cfi->lazy = on;
}

void gs_cfi_set_verbose(struct gs_cfi *cfi, bool on)
{
	cfi->verbose = on;
}

void gs_cfi_close(struct gs_cfi *cfi)
{
	if (!cfi)
		return;
	rule_set_free(&cfi->rules);
	free(cfi->objs);
	free(cfi->procs);
	free(cfi->scratch);
	free(cfi);
}

void gs_cfi_stats(struct gs_cfi *cfi, struct gs_cfi_stats *st)
{
	*st = cfi->st;
	st->procs = (uint32_t)cfi->n_procs;
	st->rules = cfi->rules.n;
	/* rows (page-rounded mmapable arrays) + the preallocated rule array */
	st->bpf_bytes += (uint64_t)GS_CFI_MAX_RULES * sizeof(struct gs_cfi_rule);
}

/* Global rule id for a table-local rule; writes new rules to gs_cfi_rules. */
static int64_t global_rule(struct gs_cfi *c, const struct gs_cfi_rule *r)
{
	uint32_t before = c->rules.n;
	int64_t id = rule_set_id(&c->rules, r);
	uint32_t key;

	if (id < 0 || (uint32_t)id < before)
		return id;
	if (id >= GS_CFI_MAX_RULES)
		return -E2BIG;
	key = (uint32_t)id;
	if (bpf_map_update_elem(c->rules_fd, &key, r, BPF_ANY))
		return -errno;
	return id;
}

/* Page index (see bpf/cfi.h): for each page of vaddr, the row in effect at
 * its start and one past the last row starting inside it; indices count the
 * index entries themselves (rows follow them in the same array). */
static void fill_pages(const struct gs_cfi_table *t, struct gs_cfi_page *pages, uint32_t n_pages)
{
	uint32_t r = 0; /* first row with pc > page start */

	for (uint32_t i = 0; i < n_pages; i++) {
		uint64_t ps = (uint64_t)i << GS_CFI_PAGE_SHIFT, pe = ps + (1u << GS_CFI_PAGE_SHIFT);
		uint32_t e;

		while (r < t->n_rows && t->rows[r].pc <= ps)
			r++;
		e = r;
		while (e < t->n_rows && t->rows[e].pc < pe)
			e++;
		pages[i].lo = n_pages + (r ? r - 1 : 0);
		pages[i].hi = n_pages + e;
	}
}

/* Create the inner rows map, fill it through mmap, publish it at table_id. */
static int load_rows(struct gs_cfi *c, const struct gs_cfi_table *t, uint32_t table_id,
		     uint32_t *n_pages_out)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	uint32_t n_pages = (t->rows[t->n_rows - 1].pc >> GS_CFI_PAGE_SHIFT) + 1;
	size_t bytes = ((size_t)n_pages + t->n_rows) * sizeof(struct gs_cfi_row);
	size_t mbytes = (bytes + 4095) & ~(size_t)4095;
	int64_t *gid = malloc(t->n_rules * sizeof(*gid));
	struct gs_cfi_row *rows;
	int fd, err = 0;

	if (!gid)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_rules; i++)
		if ((gid[i] = global_rule(c, &t->rules[i])) < 0) {
			err = (int)gid[i];
			goto out;
		}
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gs_cfi_rows", sizeof(uint32_t),
			    sizeof(struct gs_cfi_row), n_pages + t->n_rows, &o);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	rows = mmap(NULL, mbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rows == MAP_FAILED) {
		err = -errno;
	} else {
		fill_pages(t, (struct gs_cfi_page *)rows, n_pages);
		for (uint32_t i = 0; i < t->n_rows; i++) {
			rows[n_pages + i].pc = t->rows[i].pc;
			rows[n_pages + i].rule = (uint32_t)gid[t->rows[i].rule];
		}
		munmap(rows, mbytes);
		if (bpf_map_update_elem(c->tables_fd, &table_id, &fd, BPF_ANY))
			err = -errno;
	}
	close(fd); /* the outer map holds the reference */
	if (!err) {
		c->st.bpf_bytes += mbytes;
		*n_pages_out = n_pages;
	}
out:
	free(gid);
	return err;
}

static struct cfi_obj *obj_new(struct gs_cfi *c)
{
	if (c->n_objs == c->cap_objs) {
		size_t nc = c->cap_objs ? c->cap_objs * 2 : 64;
		struct cfi_obj *no = realloc(c->objs, nc * sizeof(*no));

		if (!no)
			return NULL;
		c->objs = no;
		c->cap_objs = nc;
	}
	memset(&c->objs[c->n_objs], 0, sizeof(c->objs[0]));
	return &c->objs[c->n_objs++];
}

static void read_loads(Elf *elf, struct cfi_obj *o)
{
	size_t n = 0;

	if (elf_getphdrnum(elf, &n))
		return;
	for (size_t i = 0; i < n && o->n_load < GS_CFI_MAX_LOADS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		o->load[o->n_load].vaddr = ph.p_vaddr;
		o->load[o->n_load].offset = ph.p_offset;
		o->load[o->n_load].filesz = ph.p_filesz;
		o->n_load++;
	}
}

static void hex_build_id(Elf *elf, char out[41])
{
	const void *p;
	ssize_t n = dwelf_elf_gnu_build_id(elf, &p);

	out[0] = 0;
	if (n <= 0)
		return;
	if (n > 20)
		n = 20;
	for (ssize_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const uint8_t *)p)[i]);
}

/* Table for one mapped file: cached by file key, then by build-id.  NULL
 * when not cached and !build (lazy: the mapping stays pending). */
static struct cfi_obj *obj_for_file(struct gs_cfi *c, const char *file_key, const char *open_path,
				    const char *alt_path, bool build)
{
	struct cfi_obj *o, *same = NULL;
	struct gs_cfi_table t;
	char bid[41];
	Elf *elf;
	int fd, err;
	uint32_t n_pages = 0;
	uint64_t t0;

	for (size_t i = 0; i < c->n_objs; i++)
		if (!strcmp(c->objs[i].file_key, file_key))
			return &c->objs[i];
	if (!build)
		return NULL;
	fd = open(open_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && alt_path)
		fd = open(alt_path, O_RDONLY | O_CLOEXEC);
	if (!(o = obj_new(c))) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	snprintf(o->file_key, sizeof(o->file_key), "%s", file_key);
	if (fd < 0) {
		o->status = -errno;
		c->st.errors++;
		return o;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		o->status = -EINVAL;
		c->st.errors++;
		close(fd);
		return o;
	}
	hex_build_id(elf, bid);
	read_loads(elf, o);
	elf_end(elf);
	snprintf(o->build_id, sizeof(o->build_id), "%s", bid);
	for (size_t i = 0; bid[0] && i + 1 < c->n_objs; i++)
		if (!strcmp(c->objs[i].build_id, bid)) {
			same = &c->objs[i];
			break;
		}
	if (same) { /* same object under another path or inode: share its table */
		o->status = same->status;
		o->table_id = same->table_id;
		o->n_pages = same->n_pages;
		close(fd);
		return o;
	}

	t0 = now_ns();
	err = gs_cfi_table_build(open_path, fd, &t);
	close(fd);
	if (!err && t.n_rows == 0)
		err = -ENOENT;
	if (!err && c->next_table >= GS_CFI_MAX_TABLES)
		err = -E2BIG;
	if (!err)
		err = load_rows(c, &t, c->next_table, &n_pages);
	c->st.build_ns += now_ns() - t0;
	if (!err) {
		o->table_id = c->next_table++;
		o->n_pages = n_pages;
		c->st.tables++;
		c->st.rows += t.n_rows;
	} else if (err == -ENOENT) {
		c->st.no_eh_frame++;
	} else {
		c->st.errors++;
	}
	o->status = err;
	if (c->verbose)
		fprintf(stderr, "cfi: %s: %s%u rows, %u FDEs, %u expr, %.1f ms\n", alt_path ? alt_path : open_path,
			err ? strerror(-err) : "", t.n_rows, t.n_fdes, t.n_expr, (now_ns() - t0) / 1e6);
	gs_cfi_table_free(&t);
	return o;
}

static uint64_t mapping_bias(const struct cfi_obj *o, uint64_t start, uint64_t offset)
{
	for (unsigned i = 0; i < o->n_load; i++) {
		uint64_t lo = o->load[i].offset & ~(uint64_t)4095;

		if (offset >= lo && offset < o->load[i].offset + o->load[i].filesz)
			return start - offset + o->load[i].offset - o->load[i].vaddr;
	}
	if (o->n_load) /* offset outside every segment: trust the first one */
		return start - offset + o->load[0].offset - o->load[0].vaddr;
	return start - offset;
}

static struct cfi_proc *proc_find(struct gs_cfi *c, uint32_t tgid)
{
	for (size_t i = 0; i < c->n_procs; i++)
		if (c->procs[i].tgid == tgid)
			return &c->procs[i];
	return NULL;
}

static struct cfi_proc *proc_track(struct gs_cfi *c, uint32_t tgid)
{
	struct cfi_proc *p = proc_find(c, tgid);

	if (p)
		return p;
	if (c->n_procs == c->cap_procs) {
		size_t nc = c->cap_procs ? c->cap_procs * 2 : 64;
		struct cfi_proc *np = realloc(c->procs, nc * sizeof(*np));

		if (!np)
			return NULL;
		c->procs = np;
		c->cap_procs = nc;
	}
	p = &c->procs[c->n_procs++];
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	return p;
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct gs_cfi_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static bool wanted(uint64_t start, const uint64_t *want, size_t nwant)
{
	for (size_t i = 0; i < nwant; i++)
		if (want[i] == start)
			return true;
	return false;
}

/* Read the maps; build tables now (eager, or force) or only for mappings
 * in want. */
static int add_process(struct gs_cfi *c, uint32_t tgid, const uint64_t *want, size_t nwant,
		       bool force)
{
	struct gs_cfi_proc *pe = c->scratch;
	struct cfi_proc *p;
	char path[64], line[4096];
	uint32_t n_files = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", tgid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	memset(pe, 0, offsetof(struct gs_cfi_proc, m));
	while (fgets(line, sizeof(line), f)) {
		char key[48], open_path[128], alt[4200];
		struct gs_maps_line l;
		struct gs_cfi_mapping *m;
		struct cfi_obj *o;

		if (gs_maps_parse_line(line, &l) || !l.exec)
			continue;
		if (pe->n >= GS_CFI_MAX_MAPPINGS)
			break;
		m = &pe->m[pe->n++];
		memset(m, 0, sizeof(*m)); /* scratch reused across processes */
		m->start = l.start;
		m->end = l.end;
		if (!l.inode && (!l.path || !l.path[0] || !strncmp(l.path, "[anon", 5))) {
			m->table_id = GS_CFI_TABLE_ANON; /* JIT: scanned; known, so no miss */
			continue;
		}
		if (!l.inode || !l.path || l.path[0] != '/')
			continue; /* [vdso] and the like: frame pointers; known, so no miss */
		n_files++;
		snprintf(key, sizeof(key), "%x:%x:%llu", l.dev_major, l.dev_minor,
			 (unsigned long long)l.inode);
		snprintf(open_path, sizeof(open_path), "/proc/%u/map_files/%llx-%llx", tgid,
			 (unsigned long long)l.start, (unsigned long long)l.end);
		snprintf(alt, sizeof(alt), "/proc/%u/root%s", tgid, l.path);
		/* Lazy mode: an object gets its table when a sample first walks
		 * through it (BPF records the miss and wakes us up at once). */
		o = obj_for_file(c, key, open_path, alt,
				 force || !c->lazy || wanted(l.start, want, nwant));
		if (!o) {
			m->table_id = GS_CFI_TABLE_PENDING;
			m->bias = l.start - l.offset; /* fixed up when the table exists */
			continue;
		}
		if (o->status)
			continue;
		m->table_id = o->table_id;
		m->n_pages = o->n_pages;
		m->bias = mapping_bias(o, l.start, l.offset);
	}
	fclose(f);
	qsort(pe->m, pe->n, sizeof(pe->m[0]), cmp_mapping);
	if (bpf_map_update_elem(c->procs_fd, &tgid, pe, BPF_ANY))
		return -errno;
	p = proc_track(c, tgid);
	if (p) {
		p->last_ns = now_ns();
		p->n_files = n_files;
	}
	return 0;
}

int gs_cfi_add_process(struct gs_cfi *c, uint32_t tgid)
{
	return add_process(c, tgid, NULL, 0, false);
}

int gs_cfi_build_process(struct gs_cfi *c, uint32_t tgid)
{
	return add_process(c, tgid, NULL, 0, true);
}

int gs_cfi_fork(struct gs_cfi *c, uint32_t parent, uint32_t child)
{
	struct cfi_proc *p;

	if (bpf_map_lookup_elem(c->procs_fd, &parent, c->scratch))
		return gs_cfi_add_process(c, child);
	if (bpf_map_update_elem(c->procs_fd, &child, c->scratch, BPF_ANY))
		return -errno;
	p = proc_track(c, child);
	if (p)
		p->last_ns = now_ns();
	return 0;
}

void gs_cfi_remove_process(struct gs_cfi *c, uint32_t tgid)
{
	struct cfi_proc *p = proc_find(c, tgid);

	bpf_map_delete_elem(c->procs_fd, &tgid); /* its misses are dropped by refresh */
	if (p)
		*p = c->procs[--c->n_procs];
}

static int cmp_miss(const void *a, const void *b)
{
	const struct gs_cfi_miss_key *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

int gs_cfi_refresh(struct gs_cfi *c)
{
	static struct gs_cfi_miss_key keys[4096];
	static uint64_t starts[4096];
	struct gs_cfi_miss_key next, prev;
	size_t n = 0;
	int done = 0;

	/* Collect first, then delete: deleting while iterating restarts the walk. */
	while (n < 4096 && !bpf_map_get_next_key(c->miss_fd, n ? &prev : NULL, &next)) {
		keys[n++] = next;
		prev = next;
	}
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(c->miss_fd, &keys[i]);
	qsort(keys, n, sizeof(keys[0]), cmp_miss);
	for (size_t i = 0; i < n;) {
		uint32_t tgid = keys[i].tgid;
		struct cfi_proc *p = proc_find(c, tgid);
		bool reread = false;
		size_t ns = 0;

		for (; i < n && keys[i].tgid == tgid; i++) {
			if (keys[i].start)
				starts[ns++] = keys[i].start;
			else
				reread = true;
		}
		if (!p)
			continue; /* removed meanwhile */
		/* An unknown mapping: re-read maps, backing off while re-reads
		 * find nothing new (JIT code outside the snapshot would otherwise
		 * make us parse /proc/PID/maps of a big process every tick). */
		if (!p->reread_ns)
			p->reread_ns = REREAD_MIN_NS;
		if (reread && now_ns() - p->last_ns < p->reread_ns && !ns)
			continue;
		uint32_t before = p->n_files;
		if (add_process(c, tgid, starts, ns, false) == 0) {
			c->st.refreshes++;
			done++;
			p->reread_ns = p->n_files != before ? REREAD_MIN_NS
				     : p->reread_ns * 2 > REREAD_MAX_NS ? REREAD_MAX_NS : p->reread_ns * 2;
		}
	}
	return done;
}
