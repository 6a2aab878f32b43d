// SPDX-License-Identifier: MIT
/*
 * CFI rows (see bpf/cfi.h): an ELF object's .eh_frame -> a sorted table of
 * rows and the rules they use.  Pure: no BPF, no processes, no shared state;
 * the BPF-map side (native/cfi.c) and fuzz/fuzz_cfi.c call it.
 *
 * Row building walks every FDE (dwarf_next_cfi, pointer encodings decoded
 * here because libdw keeps its FDE decoder private) and runs each FDE's CFA
 * program once, emitting a row at each location advance (the libdw
 * reference, gs_cfi_table_build_libdw, asks dwarf_cfi_addrframe per row
 * instead).  Each state is reduced to one of the rules that BPF can follow;
 * everything else is marked, never guessed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include "gpusample/records.h"
#include "native/cfi_int.h"
#include "proc/proc.h"
#include "util/clock.h"
#include "util/hashmap.h"
#include "util/vec.h"

/* Bounds on one object's table (docs/SECURITY.md: nothing the target
 * controls is trusted for sizes): its .eh_frame, its rows, and the time spent
 * (GS_CFI_BUILD_MAX_NS, native/cfi_int.h).  libtorch_cpu.so, the largest object
 * seen: ~30 MB of .eh_frame, 1.4M rows, 1.7 s (PyTorch 2.14's: 16 MiB,
 * 2.4M rows, 0.2-0.7 s, bench/cfi_build.sh). */
#define GS_CFI_MAX_EH_FRAME (256u << 20)
#define GS_CFI_MAX_OBJ_ROWS (1u << 23)

/* 0 = go on; -ETIME = a bound was hit (keep what we have); -ECANCELED. */
static int check_limits(const struct gs_cfi_build_limits *lim, size_t rows)
{
	if (lim->rows)
		atomic_store_explicit(lim->rows, rows, memory_order_relaxed);
	if (lim->cancel && atomic_load_explicit(lim->cancel, memory_order_relaxed))
		return -ECANCELED;
	if (rows >= GS_CFI_MAX_OBJ_ROWS || (lim->deadline_ns && gs_mono_ns() > lim->deadline_ns))
		return -ETIME;
	return 0;
}

#define X86_64_RBP 6
#define X86_64_RSP 7
#define X86_64_RA  16

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
	if ((uint64_t)rip_off != (uint64_t)op_offset(&cfa[0]) + 8)
		return;
	if (dwarf_frame_register(f, X86_64_RBP, mem, &ops, &n) != 0 ||
	    !reg_at_rsp(ops, n, &rbp_off))
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

/* ---- rule dedupe (util/hashmap.h keyed by the 8-byte rule) -------------- */

static uint64_t rule_key(const struct gs_cfi_rule *r)
{
	uint64_t k;

	memcpy(&k, r, sizeof(k));
	return k;
}

int64_t gs_cfi_rule_set_id(struct gs_cfi_rule_set *s, const struct gs_cfi_rule *r)
{
	uint64_t k = rule_key(r);
	uint64_t *id = gs_hmap_get(&s->ids, k);

	if (id)
		return (int64_t)*id;
	if (s->n == s->cap) {
		uint32_t nc = s->cap ? s->cap * 2 : 64;
		struct gs_cfi_rule *nr = realloc(s->rules, nc * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		s->rules = nr;
		s->cap = nc;
	}
	if (gs_hmap_put(&s->ids, k, s->n))
		return -ENOMEM;
	s->rules[s->n] = *r;
	return s->n++;
}

void gs_cfi_rule_set_free(struct gs_cfi_rule_set *s)
{
	free(s->rules);
	gs_hmap_free(&s->ids);
	memset(s, 0, sizeof(*s));
}

/* ---- FDE enumeration ------------------------------------------------------ */

/* 8 bytes: rows are 32-bit (bpf/cfi.h); a pc above 4 GiB is not kept. */
struct raw_row {
	uint32_t pc;
	uint32_t rule; /* local id; UINT32_MAX = gap (GS_CFA_NONE) */
};

/* The rows one FDE pushed: v[first, first + n), ascending. */
struct fde_run {
	uint64_t lo;
	size_t first, n;
};

struct row_vec {
	struct raw_row *v;
	size_t n, cap;
	struct fde_run *runs; /* every FDE's rows, in .eh_frame order */
	size_t n_runs, cap_runs;
};

/* Ask for transparent huge pages under a big buffer: a first build of
 * libtorch_cpu touches ~60 MiB of fresh memory, and its 4 KiB page faults
 * were a third of the build on a VM.  Advice only: no error. */
static void hint_huge(void *p, size_t bytes)
{
	uintptr_t lo = ((uintptr_t)p + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1),
		  hi = ((uintptr_t)p + bytes) & ~(uintptr_t)((2u << 20) - 1);

	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

static int row_reserve(struct row_vec *rv, size_t n)
{
	struct raw_row *nv = n > rv->cap ? realloc(rv->v, n * sizeof(*nv)) : rv->v;

	if (!nv)
		return -ENOMEM;
	rv->v = nv;
	rv->cap = n > rv->cap ? n : rv->cap;
	hint_huge(rv->v, rv->cap * sizeof(*rv->v));
	return 0;
}

/* An FDE's rows start at rv->n (run_end closes the run). */
static int run_begin(struct row_vec *rv, uint64_t lo)
{
	if (gs_grow((void **)&rv->runs, &rv->cap_runs, rv->n_runs + 1, sizeof(*rv->runs)))
		return -ENOMEM;
	rv->runs[rv->n_runs] = (struct fde_run){ .lo = lo, .first = rv->n };
	return 0;
}

static void run_end(struct row_vec *rv)
{
	rv->runs[rv->n_runs].n = rv->n - rv->runs[rv->n_runs].first;
	rv->n_runs++;
}

static int row_push(struct row_vec *rv, uint64_t pc, uint32_t rule)
{
	if (pc > UINT32_MAX)
		return 0; /* objects above 4 GiB of vaddr: not in 32-bit rows */
	if (rv->n == rv->cap && row_reserve(rv, rv->cap ? rv->cap * 2 : 4096))
		return -ENOMEM;
	rv->v[rv->n].pc = (uint32_t)pc;
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
	uint64_t v = 0; /* unsigned: shifts into bit 63 are defined */
	unsigned shift = 0;
	uint8_t b = 0;

	while (*p < end) {
		b = *(*p)++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

/* a * b wrapping (hostile CFI scales offsets by hostile factors) */
static int64_t wmul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
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
		if (end - q < 8)
			return -1;
		memcpy(&v, q, 8);
		q += 8;
		break;
	case DW_EH_PE_udata2: {
		uint16_t x;
		if (end - q < 2)
			return -1;
		memcpy(&x, q, 2);
		v = x;
		q += 2;
		break;
	}
	case DW_EH_PE_sdata2: {
		int16_t x;
		if (end - q < 2)
			return -1;
		memcpy(&x, q, 2);
		v = (uint64_t)(int64_t)x;
		q += 2;
		break;
	}
	case DW_EH_PE_udata4: {
		uint32_t x;
		if (end - q < 4)
			return -1;
		memcpy(&x, q, 4);
		v = x;
		q += 4;
		break;
	}
	case DW_EH_PE_sdata4: {
		int32_t x;
		if (end - q < 4)
			return -1;
		memcpy(&x, q, 4);
		v = (uint64_t)(int64_t)x;
		q += 4;
		break;
	}
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		if (end - q < 8)
			return -1;
		memcpy(&v, q, 8);
		q += 8;
		break;
	case DW_EH_PE_uleb128:
		v = read_uleb(&q, end);
		break;
	case DW_EH_PE_sleb128:
		v = (uint64_t)read_sleb(&q, end);
		break;
	default:
		return -1;
	}
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		v += pc_base;
		break;
	default:
		return -1; /* datarel/textrel/funcrel: not used in x86-64 .eh_frame */
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

/* ---- linear CFA program execution ------------------------------------------
 * One pass over an FDE's instructions (after its CIE's initial ones) gives
 * every row in order: linear in the FDE's size.  (libdw's dwarf_cfi_addrframe
 * re-runs the program from the FDE start for each row asked for: quadratic,
 * which a crafted 800 KB .eh_frame turned into 71 s.)  Only what BPF can use
 * is tracked: the CFA rule and the rules of RBP (6) and the return address
 * (16); each row's state is reduced exactly as reduce_frame reduces libdw's. */

enum reg_rule { RR_SAME, RR_UNDEF, RR_OFFSET, RR_OTHER, RR_EXPR };

struct reg_state {
	uint8_t rule;        /* enum reg_rule (RR_OTHER: val_offset, register, val_expression) */
	int64_t off;         /* RR_OFFSET: saved at CFA + off */
	const uint8_t *expr; /* RR_EXPR block */
	size_t expr_len;
};

struct frame_state {
	bool cfa_expr, cfa_bad;
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *cfa_e;
	size_t cfa_elen;
	struct reg_state rbp, ra;
};

/* A decoded DWARF expression op: enough for the shapes reduce_frame knows. */
struct xop {
	uint8_t atom;
	int64_t num;
	uint64_t num2;
};

/* Decode up to max ops of block; -1 if it holds an op not decoded here (no
 * shape we recognize contains one) or is malformed. */
static int decode_ops(const uint8_t *p, size_t len, struct xop *o, int max)
{
	const uint8_t *end = p + len;
	int n = 0;

	while (p < end) {
		uint8_t a = *p++;

		if (n == max)
			return -1;
		o[n] = (struct xop){ .atom = a };
		if (a >= DW_OP_breg0 && a <= DW_OP_breg31)
			o[n].num = read_sleb(&p, end);
		else if (a == DW_OP_bregx) {
			o[n].num2 = read_uleb(&p, end);
			o[n].num = read_sleb(&p, end);
		} else if (a == DW_OP_plus_uconst || a == DW_OP_constu)
			o[n].num = (int64_t)read_uleb(&p, end);
		else if (a == DW_OP_consts)
			o[n].num = read_sleb(&p, end);
		else if (!((a >= DW_OP_lit0 && a <= DW_OP_lit31) || a == DW_OP_deref ||
			   a == DW_OP_and || a == DW_OP_ge || a == DW_OP_shl || a == DW_OP_plus))
			return -1;
		n++;
	}
	return n;
}

/* Register saved at an address CFA + off: DW_CFA_offset, or an expression
 * rule that computes that (reg_at_cfa's shapes without libdw's prefix). */
static bool rule_at_cfa(const struct reg_state *r, int64_t *off)
{
	struct xop o[3];
	int n;

	if (r->rule == RR_OFFSET) {
		*off = r->off;
		return true;
	}
	if (r->rule != RR_EXPR || (n = decode_ops(r->expr, r->expr_len, o, 3)) < 0)
		return false;
	if (n == 0)
		*off = 0;
	else if (n == 1 && o[0].atom == DW_OP_plus_uconst)
		*off = o[0].num;
	else if (n == 2 && o[0].atom == DW_OP_consts && o[1].atom == DW_OP_plus)
		*off = o[0].num;
	else
		return false;
	return true;
}

/* Expression rule "address = breg<reg> off". */
static bool rule_breg(const struct reg_state *r, uint8_t breg, int64_t *off)
{
	struct xop o[1];

	if (r->rule != RR_EXPR || decode_ops(r->expr, r->expr_len, o, 1) != 1 || o[0].atom != breg)
		return false;
	*off = o[0].num;
	return true;
}

static void reduce_signal_state(const struct frame_state *fs, struct gs_cfi_rule *r)
{
	struct xop c[3];
	int64_t rip_off, rbp_off;

	r->cfa_type = GS_CFA_EXPR;
	if (!fs->cfa_expr || decode_ops(fs->cfa_e, fs->cfa_elen, c, 3) != 2 ||
	    c[0].atom != DW_OP_breg7 || c[1].atom != DW_OP_deref)
		return;
	if (!rule_breg(&fs->ra, DW_OP_breg7, &rip_off) ||
	    (uint64_t)rip_off != (uint64_t)c[0].num + 8)
		return;
	if (!rule_breg(&fs->rbp, DW_OP_breg7, &rbp_off) || rbp_off < INT16_MIN ||
	    rbp_off > INT16_MAX)
		return;
	r->cfa_type = GS_CFA_SIGNAL;
	r->cfa_off = (int32_t)c[0].num;
	r->rbp_type = GS_RBP_CFA;
	r->rbp_off = (int16_t)rbp_off;
}

/* The CFA part of reduce_frame. false: GS_CFA_EXPR, or a PLT row (done). */
static bool reduce_cfa_state(const struct frame_state *fs, struct gs_cfi_rule *r)
{
	struct xop o[10];
	Dwarf_Op d[9];
	int n;

	if (!fs->cfa_expr) {
		if ((fs->cfa_reg != X86_64_RSP && fs->cfa_reg != X86_64_RBP) ||
		    fs->cfa_off < INT32_MIN || fs->cfa_off > INT32_MAX)
			return false;
		r->cfa_type = fs->cfa_reg == X86_64_RSP ? GS_CFA_RSP : GS_CFA_RBP;
		r->cfa_off = (int32_t)fs->cfa_off;
		return true;
	}
	n = decode_ops(fs->cfa_e, fs->cfa_elen, o, 10);
	if (n == 2 && o[0].atom == DW_OP_breg6 && o[1].atom == DW_OP_deref &&
	    o[0].num >= INT32_MIN && o[0].num <= INT32_MAX) {
		r->cfa_type = GS_CFA_DEREF_RBP;
		r->cfa_off = (int32_t)o[0].num;
		return true;
	}
	if (n != 9)
		return false;
	for (int i = 0; i < 9; i++)
		d[i] = (Dwarf_Op){ .atom = o[i].atom, .number = (Dwarf_Word)o[i].num };
	if (is_plt_expr(d, 9, &r->cfa_off, &r->rbp_off))
		r->cfa_type = GS_CFA_PLT;
	return false;
}

static void reduce_state(const struct frame_state *fs, bool signal, struct gs_cfi_rule *r)
{
	int64_t off;

	memset(r, 0, sizeof(*r));
	r->cfa_type = GS_CFA_EXPR;
	if (fs->cfa_bad || (fs->cfa_expr && !fs->cfa_elen))
		return;
	if (signal) {
		reduce_signal_state(fs, r);
		return;
	}
	if (fs->ra.rule == RR_UNDEF) {
		r->cfa_type = GS_CFA_END;
		return;
	}
	if (!rule_at_cfa(&fs->ra, &off) || off != -8)
		return;
	if (!reduce_cfa_state(fs, r))
		return;
	if (fs->rbp.rule == RR_SAME)
		r->rbp_type = GS_RBP_SAME;
	else if (rule_at_cfa(&fs->rbp, &off) && off >= INT16_MIN && off <= INT16_MAX) {
		r->rbp_type = GS_RBP_CFA;
		r->rbp_off = (int16_t)off;
	} else if (rule_breg(&fs->rbp, DW_OP_breg6, &off) && off >= INT16_MIN && off <= INT16_MAX) {
		r->rbp_type = GS_RBP_RBP;
		r->rbp_off = (int16_t)off;
	} else {
		r->rbp_type = GS_RBP_LOST;
	}
}

struct cfa_prog {
	const Dwarf_CIE *cie;
	uint8_t enc;        /* FDE pointer encoding (DW_CFA_set_loc operands) */
	uint64_t sec_vaddr; /* vaddr of the section start (pcrel) */
	const uint8_t *sec; /* section start */
	bool signal;
};

static struct reg_state *tracked(struct frame_state *fs, uint64_t reg)
{
	return reg == X86_64_RBP ? &fs->rbp : reg == X86_64_RA ? &fs->ra : NULL;
}

#define GS_CFA_STATE_STACK 32

struct exec_ctx {
	const struct cfa_prog *pg;
	struct frame_state fs, init;
	struct frame_state stack[GS_CFA_STATE_STACK];
	unsigned depth;
	uint64_t loc, hi;
	/* row sink; NULL while running the CIE's initial instructions */
	int (*emit)(void *arg, uint64_t pc, const struct frame_state *fs);
	void *arg;
};

/* Move to new_loc: the state so far is the row [loc, new_loc). */
static int advance(struct exec_ctx *x, uint64_t new_loc)
{
	int err;

	if (!x->emit || new_loc <= x->loc)
		return 0; /* no row in between (a backwards set_loc is ignored) */
	if (x->loc < x->hi && (err = x->emit(x->arg, x->loc, &x->fs)))
		return err;
	x->loc = new_loc;
	return x->loc >= x->hi ? 1 : 0; /* past the FDE: done */
}

static void set_rule(struct exec_ctx *x, uint64_t reg, uint8_t rule, int64_t off, const uint8_t *e,
		     size_t elen)
{
	struct reg_state *r = tracked(&x->fs, reg);

	if (r)
		*r = (struct reg_state){ .rule = rule, .off = off, .expr = e, .expr_len = elen };
}

/* One instruction at *p.  0 = go on, 1 = past the FDE, <0 = malformed. */
static int exec_one(struct exec_ctx *x, const uint8_t **p, const uint8_t *end)
{
	const Dwarf_CIE *cie = x->pg->cie;
	uint8_t op = *(*p)++, low = op & 0x3f;
	uint64_t reg, v, caf = cie->code_alignment_factor;
	int64_t daf = cie->data_alignment_factor;
	struct reg_state *r;

	switch (op & 0xc0) {
	case DW_CFA_advance_loc:
		return advance(x, x->loc + low * caf);
	case DW_CFA_offset:
		set_rule(x, low, RR_OFFSET, wmul((int64_t)read_uleb(p, end), daf), NULL, 0);
		return 0;
	case DW_CFA_restore:
		if ((r = tracked(&x->fs, low)))
			*r = *tracked(&x->init, low);
		return 0;
	}
	switch (op) {
	case DW_CFA_nop:
		return 0;
	case DW_CFA_set_loc: {
		uint64_t base = x->pg->sec_vaddr + (uint64_t)(*p - x->pg->sec);

		if (read_encoded(p, end, x->pg->enc, base, &v))
			return -EINVAL;
		return advance(x, v);
	}
	case DW_CFA_advance_loc1:
	case DW_CFA_advance_loc2:
	case DW_CFA_advance_loc4: {
		size_t n = op == DW_CFA_advance_loc1 ? 1 : op == DW_CFA_advance_loc2 ? 2 : 4;
		uint32_t d = 0;

		if ((size_t)(end - *p) < n)
			return -EINVAL;
		memcpy(&d, *p, n); /* little-endian x86-64 */
		*p += n;
		return advance(x, x->loc + d * caf);
	}
	case DW_CFA_offset_extended:
		reg = read_uleb(p, end);
		set_rule(x, reg, RR_OFFSET, wmul((int64_t)read_uleb(p, end), daf), NULL, 0);
		return 0;
	case DW_CFA_offset_extended_sf:
		reg = read_uleb(p, end);
		set_rule(x, reg, RR_OFFSET, wmul(read_sleb(p, end), daf), NULL, 0);
		return 0;
	case DW_CFA_GNU_negative_offset_extended:
		reg = read_uleb(p, end);
		set_rule(x, reg, RR_OFFSET, wmul(wmul((int64_t)read_uleb(p, end), daf), -1), NULL,
			 0);
		return 0;
	case DW_CFA_restore_extended:
		if ((r = tracked(&x->fs, read_uleb(p, end))))
			*r = *tracked(&x->init, r == &x->fs.rbp ? X86_64_RBP : X86_64_RA);
		return 0;
	case DW_CFA_undefined:
		set_rule(x, read_uleb(p, end), RR_UNDEF, 0, NULL, 0);
		return 0;
	case DW_CFA_same_value:
		set_rule(x, read_uleb(p, end), RR_SAME, 0, NULL, 0);
		return 0;
	case DW_CFA_register:
		reg = read_uleb(p, end);
		read_uleb(p, end);
		set_rule(x, reg, RR_OTHER, 0, NULL, 0);
		return 0;
	case DW_CFA_val_offset:
	case DW_CFA_val_offset_sf:
		reg = read_uleb(p, end);
		read_uleb(p, end);
		set_rule(x, reg, RR_OTHER, 0, NULL, 0);
		return 0;
	case DW_CFA_remember_state:
		if (x->depth == GS_CFA_STATE_STACK)
			return -E2BIG;
		x->stack[x->depth++] = x->fs;
		return 0;
	case DW_CFA_restore_state:
		if (!x->depth)
			return -EINVAL;
		x->fs = x->stack[--x->depth];
		return 0;
	case DW_CFA_def_cfa:
		x->fs.cfa_reg = read_uleb(p, end);
		x->fs.cfa_off = (int64_t)read_uleb(p, end);
		x->fs.cfa_expr = x->fs.cfa_bad = false;
		return 0;
	case DW_CFA_def_cfa_sf:
		x->fs.cfa_reg = read_uleb(p, end);
		x->fs.cfa_off = wmul(read_sleb(p, end), daf);
		x->fs.cfa_expr = x->fs.cfa_bad = false;
		return 0;
	case DW_CFA_def_cfa_register:
		x->fs.cfa_reg = read_uleb(p, end);
		x->fs.cfa_bad |= x->fs.cfa_expr; /* no register rule to change */
		return 0;
	case DW_CFA_def_cfa_offset:
		x->fs.cfa_off = (int64_t)read_uleb(p, end);
		x->fs.cfa_bad |= x->fs.cfa_expr;
		return 0;
	case DW_CFA_def_cfa_offset_sf:
		x->fs.cfa_off = wmul(read_sleb(p, end), daf);
		x->fs.cfa_bad |= x->fs.cfa_expr;
		return 0;
	case DW_CFA_def_cfa_expression:
		v = read_uleb(p, end);
		if (v > (uint64_t)(end - *p))
			return -EINVAL;
		x->fs.cfa_expr = true;
		x->fs.cfa_bad = false;
		x->fs.cfa_e = *p;
		x->fs.cfa_elen = v;
		*p += v;
		return 0;
	case DW_CFA_expression:
	case DW_CFA_val_expression:
		reg = read_uleb(p, end);
		v = read_uleb(p, end);
		if (v > (uint64_t)(end - *p))
			return -EINVAL;
		set_rule(x, reg, op == DW_CFA_expression ? RR_EXPR : RR_OTHER, 0, *p, v);
		*p += v;
		return 0;
	case DW_CFA_GNU_args_size:
		read_uleb(p, end);
		return 0;
	default:
		return -EINVAL; /* unknown: the rest of this FDE is not understood */
	}
}

static int exec_prog(struct exec_ctx *x, const uint8_t *p, const uint8_t *end)
{
	int rc = 0;

	while (p < end && !(rc = exec_one(x, &p, end)))
		;
	return rc;
}

/* The CIE's initial state: x86-64 ABI defaults (CFA = RSP + 8, RA at
 * CFA - 8, RBP callee-saved, as libdw's backend sets them), then the CIE's
 * initial instructions. */
static int cie_initial_state(const struct cfa_prog *pg, struct frame_state *out)
{
	struct exec_ctx x = { .pg = pg };

	x.fs.cfa_reg = X86_64_RSP;
	x.fs.cfa_off = 8;
	x.fs.ra = (struct reg_state){ .rule = RR_OFFSET, .off = -8 };
	x.fs.rbp.rule = RR_SAME;
	x.init = x.fs;
	if (exec_prog(&x, pg->cie->initial_instructions, pg->cie->initial_instructions_end) < 0)
		return -EINVAL;
	*out = x.fs;
	return 0;
}

struct row_sink {
	struct gs_cfi_rule_set *rs;
	struct row_vec *rv;
	struct gs_cfi_table *t;
	const struct gs_cfi_build_limits *lim;
	bool signal;
};

static int sink_row(void *arg, uint64_t pc, const struct frame_state *fs)
{
	struct row_sink *k = arg;
	struct gs_cfi_rule r;
	int64_t id;
	int err;

	if ((k->rv->n & 255) == 0 && (err = check_limits(k->lim, k->rv->n)))
		return err;
	reduce_state(fs, k->signal, &r);
	k->t->n_expr += r.cfa_type == GS_CFA_EXPR;
	k->t->n_plt += r.cfa_type == GS_CFA_PLT;
	k->t->n_signal += r.cfa_type == GS_CFA_SIGNAL;
	id = gs_cfi_rule_set_id(k->rs, &r);
	if (id < 0)
		return (int)id;
	return row_push(k->rv, pc, (uint32_t)id);
}

/* Rows of one FDE [lo, hi) from its instructions [ins, end), then a gap
 * marker at hi.  A malformed tail ends the FDE's rows there (as libdw). */
static int fde_rows_linear(const struct cfa_prog *pg, const struct frame_state *init,
			   const uint8_t *ins, const uint8_t *end, uint64_t lo, uint64_t hi,
			   struct row_sink *k)
{
	struct exec_ctx x = {
		.pg = pg, .fs = *init, .init = *init, .loc = lo, .hi = hi, .emit = sink_row, .arg = k
	};
	int rc = exec_prog(&x, ins, end);

	if (rc == -ETIME || rc == -ECANCELED || rc == -ENOMEM) {
		row_push(k->rv, x.loc, UINT32_MAX);
		return rc;
	}
	if (rc >= 0 && x.loc < hi && (rc = sink_row(k, x.loc, &x.fs)) && rc != -EINVAL) {
		row_push(k->rv, x.loc, UINT32_MAX);
		return rc;
	}
	return row_push(k->rv, hi, UINT32_MAX);
}

struct cie_ent {
	Dwarf_Off off;
	uint8_t enc;
	bool signal, init_ok;
	Dwarf_CIE cie;
	struct frame_state init;
};

struct cie_cache {
	struct cie_ent e[64];
	unsigned n, next;
};

/* The CIE at cie_off, decoded once: FDE pointer encoding, signal-frame
 * flag ('S'), and its initial state for the linear builder. */
static const struct cie_ent *cie_lookup(struct cie_cache *cc, Elf *elf, Elf_Data *data,
					uint64_t sec_vaddr, Dwarf_Off cie_off)
{
	Dwarf_CFI_Entry e;
	Dwarf_Off next;
	struct cie_ent *c;

	for (unsigned i = 0; i < cc->n; i++)
		if (cc->e[i].off == cie_off)
			return &cc->e[i];
	if (dwarf_next_cfi((const unsigned char *)elf_getident(elf, NULL), data, true, cie_off,
			   &next, &e) != 0 ||
	    !dwarf_cfi_cie_p(&e))
		return NULL;
	c = &cc->e[cc->n < 64 ? cc->n++ : (cc->next++ % 64)];
	c->off = cie_off;
	c->cie = e.cie;
	c->enc = cie_fde_encoding(&e.cie);
	c->signal = e.cie.augmentation && strchr(e.cie.augmentation, 'S');
	struct cfa_prog pg = {
		.cie = &c->cie, .enc = c->enc, .sec_vaddr = sec_vaddr, .sec = data->d_buf
	};
	c->init_ok = cie_initial_state(&pg, &c->init) == 0;
	return c;
}

/* Rows of one FDE [lo, hi), then a gap marker at hi. */
static int fde_rows(Dwarf_CFI *cfi, uint64_t lo, uint64_t hi, struct gs_cfi_rule_set *rs,
		    struct row_vec *rv, struct gs_cfi_table *t,
		    const struct gs_cfi_build_limits *lim)
{
	uint64_t addr = lo;
	int err;

	while (addr < hi) {
		if ((rv->n & 15) == 0 && (err = check_limits(lim, rv->n))) {
			row_push(rv, addr, UINT32_MAX); /* the rest of this FDE: no rule */
			return err;
		}
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
		id = gs_cfi_rule_set_id(rs, &r);
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

static int cmp_run(const void *a, const void *b)
{
	const struct fde_run *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Rows in pc order into t->rows: per pc the first real rule wins over gap
 * markers (an FDE ending where the next one starts), identical consecutive
 * rules merge. */
struct row_out {
	struct gs_cfi_row *out;
	size_t n;
	uint32_t none_id;
	bool open; /* a group (rows at pc) is being read */
	bool real; /* it has a real rule */
	uint32_t pc, rule;
};

static void out_flush(struct row_out *o)
{
	uint32_t rule = o->real ? o->rule : o->none_id;

	if (o->open && !(o->n && o->out[o->n - 1].rule == rule))
		o->out[o->n++] = (struct gs_cfi_row){ .pc = o->pc, .rule = rule };
	o->open = false;
}

static void out_row(struct row_out *o, const struct raw_row *r)
{
	if (o->open && r->pc == o->pc) {
		if (!o->real && r->rule != UINT32_MAX) {
			o->real = true;
			o->rule = r->rule;
		}
		return;
	}
	out_flush(o);
	o->open = true;
	o->pc = r->pc;
	o->real = r->rule != UINT32_MAX;
	o->rule = r->rule;
}

/* Whether the rows are in pc order already (equal pcs in any order). */
static bool rows_sorted(const struct raw_row *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i].pc < v[i - 1].pc)
			return false;
	return true;
}

/* Whether the FDEs, sorted by start, give the rows in pc order: each FDE's
 * rows ascend and .eh_frame is ordered by input section, not address
 * (libtorch_cpu: 80,899 of 353,399 FDEs start below their predecessor,
 * cold parts of functions), so sorting FDEs instead of rows sorts 7x fewer
 * elements (the row sort was 40% of that 2.4M-row build).  Overlapping
 * FDEs (or a run cut by a bound): false. */
static bool runs_sort(struct row_vec *rv)
{
	size_t total = 0;
	uint32_t last = 0;

	for (size_t i = 0; i < rv->n_runs; i++)
		total += rv->runs[i].n;
	if (total != rv->n)
		return false;
	qsort(rv->runs, rv->n_runs, sizeof(*rv->runs), cmp_run);
	for (size_t i = 0; i < rv->n_runs; i++) {
		const struct fde_run *r = &rv->runs[i];

		if (!r->n)
			continue;
		if (rv->v[r->first].pc < last || !rows_sorted(rv->v + r->first, r->n))
			return false;
		last = rv->v[r->first + r->n - 1].pc;
	}
	return true;
}

static int finish_rows(struct row_vec *rv, struct gs_cfi_rule_set *rs, struct gs_cfi_table *t)
{
	struct gs_cfi_rule none = { .cfa_type = GS_CFA_NONE };
	int64_t none_id = gs_cfi_rule_set_id(rs, &none);
	struct row_out o = { 0 };

	if (none_id < 0)
		return -ENOMEM;
	o.none_id = (uint32_t)none_id;
	if (!(o.out = malloc((rv->n ? rv->n : 1) * sizeof(*o.out))))
		return -ENOMEM;
	hint_huge(o.out, rv->n * sizeof(*o.out));
	if (!rows_sorted(rv->v, rv->n) && runs_sort(rv)) {
		for (size_t i = 0; i < rv->n_runs; i++)
			for (size_t k = 0; k < rv->runs[i].n; k++)
				out_row(&o, &rv->v[rv->runs[i].first + k]);
	} else {
		if (!rows_sorted(rv->v, rv->n))
			qsort(rv->v, rv->n, sizeof(*rv->v), cmp_raw_row);
		for (size_t i = 0; i < rv->n; i++)
			out_row(&o, &rv->v[i]);
	}
	out_flush(&o);
	t->rows = o.out;
	t->n_rows = (uint32_t)o.n;
	t->rules = rs->rules;
	t->n_rules = rs->n;
	rs->rules = NULL;
	return 0;
}

/* The ELF entry point is the outermost frame of a process (the kernel
 * jumps there with the initial stack), but ld.so's _start and
 * _dl_start_user have no FDE: every stack sampled while the loader maps
 * and relocates ended there as a walk without a table.  Where no FDE
 * covers the entry, a row says "outermost" from it to the next FDE (at
 * most 256 bytes: the start-up stub).  A library's entry, if any, is
 * covered by its FDE and left alone. */
#define GS_CFI_ENTRY_SPAN 256
static int entry_rows(struct row_vec *rv, struct gs_cfi_rule_set *rs, uint64_t entry)
{
	struct gs_cfi_rule end = { .cfa_type = GS_CFA_END };
	uint64_t next = entry + GS_CFI_ENTRY_SPAN;
	int64_t id;
	int err;

	if (!entry || entry > UINT32_MAX - GS_CFI_ENTRY_SPAN)
		return 0;
	for (size_t i = 0; i < rv->n_runs; i++) {
		const struct fde_run *r = &rv->runs[i];

		if (!r->n)
			continue;
		/* an FDE's last row is its end (a gap marker) */
		if (r->lo <= entry && entry < rv->v[r->first + r->n - 1].pc)
			return 0;
		if (r->lo > entry && r->lo < next)
			next = r->lo;
	}
	if ((id = gs_cfi_rule_set_id(rs, &end)) < 0)
		return (int)id;
	if ((err = run_begin(rv, entry)) || (err = row_push(rv, entry, (uint32_t)id)) ||
	    (err = row_push(rv, next, UINT32_MAX)))
		return err;
	run_end(rv);
	return 0;
}

static int build_from_elf(Elf *elf, struct gs_cfi_table *t, const struct gs_cfi_build_limits *lim,
			  bool libdw)
{
	GElf_Ehdr eh;
	Elf_Scn *scn = NULL;
	Elf_Data *data = NULL;
	GElf_Shdr sh_eh = { 0 };
	size_t shstrndx;
	Dwarf_CFI *cfi;
	struct gs_cfi_rule_set rs = { 0 };
	struct row_vec rv = { 0 };
	struct cie_cache cc = { 0 };
	Dwarf_Off off = 0, next;
	int err = 0;

	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64)
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
			if (sh.sh_size > GS_CFI_MAX_EH_FRAME)
				return -EFBIG;
			sh_eh = sh;
			data = elf_getdata(scn, NULL);
			break;
		}
	}
	if (!data || !data->d_buf || !data->d_size)
		return -ENOENT;
	cfi = libdw ? dwarf_getcfi_elf(elf) : NULL;
	if (libdw && !cfi)
		return -ENOENT;

	/* about 7 bytes of .eh_frame per row: one allocation instead of a
	 * dozen doublings and copies (pages are touched only as rows land),
	 * never past the rows bound (64 MiB) whatever the .eh_frame claims */
	size_t guess = data->d_size / 4 + 4096;
	if (row_reserve(&rv, guess < GS_CFI_MAX_OBJ_ROWS ? guess : GS_CFI_MAX_OBJ_ROWS))
		return -ENOMEM;
	struct row_sink sink = { .rs = &rs, .rv = &rv, .t = t, .lim = lim };
	for (;;) {
		Dwarf_CFI_Entry e;
		int rc = dwarf_next_cfi(eh.e_ident, data, true, off, &next, &e);
		const struct cie_ent *ce;
		const uint8_t *p, *end;
		uint64_t lo, len, aug;

		if (rc != 0)
			break; /* 1 = end; -1 = malformed tail: keep what we have */
		off = next;
		if (dwarf_cfi_cie_p(&e))
			continue;
		ce = cie_lookup(&cc, elf, data, sh_eh.sh_addr, e.fde.CIE_pointer);
		if (!ce || ce->enc == DW_EH_PE_omit)
			continue;
		p = e.fde.start;
		end = e.fde.end;
		if (read_encoded(&p, end, ce->enc,
				 sh_eh.sh_addr + (uint64_t)(p - (const uint8_t *)data->d_buf),
				 &lo) ||
		    read_encoded(&p, end, ce->enc & 0x0f, 0, &len))
			continue;
		if (len == 0 || lo == 0)
			continue; /* discarded FDE (e.g. from a --gc-sections'd function) */
		t->n_fdes++;
		if ((err = run_begin(&rv, lo)))
			break;
		if (libdw) {
			if ((err = fde_rows(cfi, lo, lo + len, &rs, &rv, t, lim)))
				break;
			run_end(&rv);
			continue;
		}
		/* instructions follow the FDE's augmentation data */
		aug = ce->cie.augmentation && ce->cie.augmentation[0] == 'z'
			  ? read_uleb(&p, end)
			  : ce->cie.fde_augmentation_data_size;
		if (!ce->init_ok || aug > (uint64_t)(end - p)) {
			run_end(&rv);
			continue;
		}
		struct cfa_prog pg = { .cie = &ce->cie,
				       .enc = ce->enc,
				       .sec_vaddr = sh_eh.sh_addr,
				       .sec = data->d_buf,
				       .signal = ce->signal };
		sink.signal = ce->signal;
		if ((err = fde_rows_linear(&pg, &ce->init, p + aug, end, lo, lo + len, &sink)))
			break;
		run_end(&rv);
	}
	if (err == -ETIME) { /* bounded: a table for the FDEs done so far */
		t->truncated = 1;
		err = 0;
	}
	if (!err)
		err = entry_rows(&rv, &rs, eh.e_entry);
	if (!err)
		err = finish_rows(&rv, &rs, t);
	free(rv.v);
	free(rv.runs);
	gs_cfi_rule_set_free(&rs);
	if (cfi)
		dwarf_cfi_end(cfi);
	return err;
}

int gs_cfi_table_build_bounded(const char *path, int fd, struct gs_cfi_table *t,
			       const struct gs_cfi_build_limits *lim, bool libdw)
{
	bool own = fd < 0;
	Elf *elf;
	int err;

	memset(t, 0, sizeof(*t));
	elf_version(EV_CURRENT);
	if (own && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	elf = gs_elf_headers_check(fd, NULL) ? NULL : elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		err = -EINVAL;
	} else {
		err = build_from_elf(elf, t, lim, libdw);
		elf_end(elf);
	}
	if (own)
		close(fd);
	if (err)
		gs_cfi_table_free(t);
	return err;
}

int gs_cfi_table_build(const char *path, int fd, struct gs_cfi_table *t)
{
	struct gs_cfi_build_limits lim = { .deadline_ns = gs_mono_ns() + GS_CFI_BUILD_MAX_NS };

	return gs_cfi_table_build_bounded(path, fd, t, &lim, false);
}

int gs_cfi_table_build_libdw(const char *path, int fd, struct gs_cfi_table *t)
{
	struct gs_cfi_build_limits lim = { .deadline_ns = gs_mono_ns() + GS_CFI_BUILD_MAX_NS };

	return gs_cfi_table_build_bounded(path, fd, t, &lim, true);
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
