/* SPDX-License-Identifier: MIT */
/*
 * The user-space walks of a dump: native frames by the CFI rows of
 * bpf/cfi.h, Python frames by the walker configuration of discovery, with
 * the reads going to proc/'s remote-memory reader instead of
 * bpf_probe_read_user: a sleeping thread cannot be walked from BPF (the
 * walkers read the current task's memory), and a sleepable iterator with
 * bpf_copy_from_user_task exists only from 5.18.  The native step takes
 * the rule's arithmetic from bpf/cfi.h (gs_cfi_cfa, gs_cfi_rbp), the very
 * functions the BPF step (bpf/unwind.bpf.h gs_unwind_cfi_step) calls: one
 * definition of the row semantics; the reads (a page window here, the
 * BPF window there) and the frame-pointer fallback are each side's own.
 * The Python step follows bpf/python.bpf.h gs_py_walk_step field by field
 * (the BPF one is shaped by the verifier: windows, masked offsets).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpusample/records.h"
#include "native/native.h"
#include "dump/dump_int.h"
#include "python/python.h"
#include "util/vec.h"

/* ---- reads of the target's stack: one page at a time ------------------- */

struct stack_win {
	uint32_t tgid;
	__u64 base; /* 0: empty */
	uint8_t page[4096];
};

static int win_read(struct stack_win *w, __u64 addr, __u64 *v)
{
	__u64 base = addr & ~4095ull, off = addr - base;

	if (off > 4096 - 8)
		return gs_proc_mem_read(w->tgid, addr, v, 8, NULL);
	if (base != w->base) {
		w->base = 0;
		if (gs_proc_mem_read(w->tgid, base, w->page, sizeof(w->page), NULL))
			return -EFAULT;
		w->base = base;
	}
	memcpy(v, w->page + off, 8);
	return 0;
}

/* ---- unwind tables per ELF object --------------------------------------- */

struct obj_table {
	bool tried;
	int err; /* build error: frame pointers only */
	struct gs_cfi_table t;
};

struct gs_dump_unwinder {
	struct gs_elf_cache *elf;
	struct obj_table *tables; /* by gs_elf_obj.id */
	size_t n_tables;          /* capacity, all zeroed until tried */
	struct stack_win win;
};

struct gs_dump_unwinder *gs_dump_unwinder_new(struct gs_elf_cache *elf)
{
	struct gs_dump_unwinder *u = calloc(1, sizeof(*u));

	if (u)
		u->elf = elf;
	return u;
}

void gs_dump_unwinder_free(struct gs_dump_unwinder *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->n_tables; i++)
		if (u->tables[i].tried && !u->tables[i].err)
			gs_cfi_table_free(&u->tables[i].t);
	free(u->tables);
	free(u);
}

static struct obj_table *table_of(struct gs_dump_unwinder *u, struct gs_elf_obj *o)
{
	if (o->id >= u->n_tables) {
		size_t had = u->n_tables;

		if (GS_GROW(u->tables, u->n_tables, (size_t)o->id + 1))
			return NULL;
		memset(u->tables + had, 0, (u->n_tables - had) * sizeof(*u->tables));
	}
	struct obj_table *t = &u->tables[o->id];

	if (!t->tried) {
		t->tried = true;
		t->err = o->fd < 0 ? -EBADF : gs_cfi_table_build(o->path, o->fd, &t->t);
	}
	return t->err ? NULL : t;
}

/* The rule in effect at runtime address pc (a return address minus one
 * above the leaf), NULL when none: no mapping, no file, no table, a gap. */
static const struct gs_cfi_rule *rule_at(struct gs_dump_unwinder *u, uint32_t tgid,
					 const struct gs_proc_maps *maps, __u64 pc)
{
	const struct gs_maps_line *l = gs_proc_maps_find(maps, pc);
	struct gs_elf_obj *o;
	struct obj_table *t;
	uint64_t vaddr;

	if (!l || !l->exec || !l->path || gs_elf_get_mapped(u->elf, tgid, l, &o))
		return NULL;
	if (!gs_elf_off_to_vaddr(o, l->offset + (pc - l->start), &vaddr))
		return NULL;
	t = table_of(u, o);
	return t ? gs_cfi_table_lookup(&t->t, vaddr) : NULL;
}

/* ---- the native walk ------------------------------------------------------ */

struct regs {
	__u64 pc, sp, bp;
	bool bp_ok, exact;
};

/* One frame-pointer step ([bp] saved RBP, [bp+8] return address): 1 stop,
 * 0 go on, <0 enum gs_unwind_err negated. */
static int fp_step(struct stack_win *w, struct regs *r)
{
	__u64 fr[2];

	if (!r->bp_ok || r->bp < r->sp || (r->bp & 7))
		return -GS_UNWIND_NO_TABLE;
	if (win_read(w, r->bp, &fr[0]) || win_read(w, r->bp + 8, &fr[1]))
		return -GS_UNWIND_READ_FAULT;
	if (!fr[1])
		return 1;
	r->sp = r->bp + 16;
	r->bp = fr[0];
	r->pc = fr[1];
	r->exact = false;
	return 0;
}

/* A signal trampoline frame: rt_sigframe at sp, saved rsp at +cfa_off, rip
 * right after it, rbp at +rbp_off (as unwind.bpf.h's gs_unwind_signal). */
static int signal_step(struct stack_win *w, struct regs *r, const struct gs_cfi_rule *c)
{
	__u64 sp, pc, bp;

	if (win_read(w, r->sp + (int64_t)c->cfa_off, &sp) ||
	    win_read(w, r->sp + (int64_t)c->cfa_off + 8, &pc) ||
	    win_read(w, r->sp + (int64_t)c->rbp_off, &bp))
		return -GS_UNWIND_READ_FAULT;
	r->sp = sp;
	r->bp = bp;
	r->bp_ok = true;
	r->pc = pc;
	r->exact = true; /* the interrupted PC, not a return address */
	return pc == 0;
}

/* One step by rule c: bpf/cfi.h's gs_cfi_cfa / gs_cfi_rbp, the arithmetic
 * the BPF walk uses, and the reads here. */
static int cfi_step(struct stack_win *w, struct regs *r, const struct gs_cfi_rule *c)
{
	__u64 cfa, ret, at, nbp;

	switch (gs_cfi_cfa(c, r->pc, r->sp, r->bp, r->bp_ok, &cfa)) {
	case GS_CFI_VALUE:
		break;
	case GS_CFI_LOAD:
		if (win_read(w, cfa, &cfa))
			return -GS_UNWIND_READ_FAULT;
		break;
	case GS_CFI_SIG:
		return signal_step(w, r, c);
	case GS_CFI_STOP:
		return 1;
	default:
		return -GS_UNWIND_BAD_RULE;
	}
	if (cfa <= r->sp) /* the caller's frame is above this one */
		return -GS_UNWIND_BAD_RULE;
	if (win_read(w, cfa - 8, &ret))
		return -GS_UNWIND_READ_FAULT;
	switch (gs_cfi_rbp(c, cfa, r->bp, r->bp_ok, &at)) {
	case GS_CFI_VALUE:
		nbp = at;
		break;
	case GS_CFI_LOAD:
		if (win_read(w, at, &nbp))
			return -GS_UNWIND_READ_FAULT;
		break;
	case GS_CFI_BAD:
		return -GS_UNWIND_BAD_RULE;
	default:
		nbp = at;
		r->bp_ok = false;
		break;
	}
	if (c->rbp_type == GS_RBP_CFA)
		r->bp_ok = true;
	r->bp = nbp;
	r->sp = cfa;
	r->pc = ret;
	r->exact = false;
	return ret == 0;
}

uint32_t gs_dump_unwind(struct gs_dump_unwinder *u, uint32_t tgid, const struct gs_proc_maps *maps,
			__u64 ip, __u64 sp, __u64 bp, bool bp_ok, __u64 *ips, uint32_t cap,
			uint16_t *err)
{
	struct regs r = { .pc = ip, .sp = sp, .bp = bp, .bp_ok = bp_ok, .exact = true };
	const struct gs_cfi_rule *c = NULL; /* the rule of the step that gave r */
	uint32_t n = 0;
	int rc = 0;

	u->win.tgid = tgid;
	u->win.base = 0;
	*err = GS_UNWIND_OK;
	while (r.pc) {
		const struct gs_maps_line *l;

		if (n == cap) {
			*err = GS_UNWIND_DEPTH;
			break;
		}
		/* A return address outside executable memory (a frame-pointer
		 * guess through a function without one lands on the stack) is
		 * no frame: the walk stops there, as the BPF walk's check of a
		 * guessed step (gs_unwind_is_ret). */
		if (n && (!(l = gs_proc_maps_find(maps, r.exact ? r.pc : r.pc - 1)) || !l->exec)) {
			*err = c ? GS_UNWIND_BAD_RULE : GS_UNWIND_NO_TABLE;
			break;
		}
		ips[n++] = r.pc;
		c = rule_at(u, tgid, maps, r.exact ? r.pc : r.pc - 1);
		rc = c ? cfi_step(&u->win, &r, c) : fp_step(&u->win, &r);
		if (rc) {
			if (rc < 0)
				*err = (uint16_t)-rc;
			break;
		}
	}
	return n;
}

/* ---- the Python walk ----------------------------------------------------- */

/* 3.12/3.13 FRAME_OWNED_BY_CSTACK; 3.14+: every owner from 3 on is not
 * Python code (bpf/python.bpf.h). */
#define PY_OWNED_BY_CSTACK 3
#define PY_REF_TAGS        7ull
#define PY_WALK_STEPS      (2 * GS_MAX_PY_FRAMES + 2)

static int rd64(uint32_t tgid, __u64 addr, __u64 *v)
{
	return gs_proc_mem_read(tgid, addr, v, 8, NULL);
}

/* One frame's record: lasti, entry mark, checksum; 1 = a C entry frame
 * (skipped: the frame below it starts an eval invocation). */
static int py_frame(uint32_t tgid, const struct gs_py_cfg *cfg, __u64 frame, __u64 code,
		    struct gs_py_frame *f)
{
	uint32_t ver = cfg->version_hex;
	int32_t fl[2];

	if (ver >= 0x030c0000) {
		uint8_t owner;

		if (gs_proc_mem_read(tgid, frame + cfg->fr_entry, &owner, 1, NULL))
			return -EFAULT;
		if (owner >= PY_OWNED_BY_CSTACK || (cfg->py_none && code == cfg->py_none))
			return 1;
	}
	memset(f, 0, sizeof(*f));
	f->code = code;
	if (ver < 0x030b0000) {
		int32_t lasti;

		if (gs_proc_mem_read(tgid, frame + cfg->fr_lasti, &lasti, 4, NULL))
			return -EFAULT;
		if (ver >= 0x030a0000 && lasti >= 0)
			lasti *= 2; /* 3.10 counts code units */
		f->lasti = lasti < 0 ? 0xffffffffu : (uint32_t)lasti;
		f->flags = GS_PYF_ENTRY;
	} else {
		__u64 ip, first = code + cfg->code_adaptive;
		uint8_t entry = 0;

		if (rd64(tgid, frame + cfg->fr_lasti, &ip))
			return -EFAULT;
		f->lasti = ip >= first && ip - first < 0xffffffffull ? (uint32_t)(ip - first)
								     : 0xffffffffu;
		if (ver < 0x030c0000 &&
		    !gs_proc_mem_read(tgid, frame + cfg->fr_entry, &entry, 1, NULL) && entry)
			f->flags = GS_PYF_ENTRY;
	}
	__u64 type;

	if (rd64(tgid, code + 8, &type) || type != cfg->code_type ||
	    gs_proc_mem_read(tgid, code + cfg->code_firstlineno, &fl[0], 4, NULL) ||
	    gs_proc_mem_read(tgid, code + cfg->code_argcount, &fl[1], 4, NULL)) {
		f->flags |= GS_PYF_BAD_CODE;
		return 0;
	}
	f->check = gs_py_checksum(fl[0], fl[1]);
	return 0;
}

uint32_t gs_dump_python(uint32_t tgid, const struct gs_py_cfg *cfg, __u64 fsbase,
			struct gs_py_frame *out, uint32_t cap, uint16_t *flags)
{
	int32_t key = cfg->tss_key;
	__u64 tstate = 0, frame = 0;
	uint32_t n = 0;

	if (!cfg->version_hex || !fsbase || (key != GS_PY_TSS_TLS && (key < 0 || key >= 32)))
		return 0;
	if (rd64(tgid,
		 key == GS_PY_TSS_TLS ? fsbase + (int64_t)(int32_t)cfg->tls_1stblock
				      : fsbase + cfg->tls_1stblock + (__u64)key * 16 + 8,
		 &tstate)) {
		*flags |= GS_CPU_PY_ERR;
		return 0;
	}
	if (!tstate)
		return 0; /* the thread never ran Python */
	if (rd64(tgid, tstate + cfg->ts_frame, &frame) ||
	    (cfg->version_hex >= 0x030b0000 && cfg->version_hex < 0x030d0000 && frame &&
	     rd64(tgid, frame + cfg->cframe_current, &frame))) {
		*flags |= GS_CPU_PY_ERR;
		return 0;
	}
	for (uint32_t step = 0; frame && step < PY_WALK_STEPS; step++) {
		__u64 code, next;
		int rc;

		if (rd64(tgid, frame + cfg->fr_code, &code) ||
		    rd64(tgid, frame + cfg->fr_back, &next)) {
			*flags |= GS_CPU_PY_ERR;
			return n;
		}
		code &= ~PY_REF_TAGS;
		if (n == cap) {
			*flags |= GS_CPU_PY_TRUNC;
			return n;
		}
		rc = py_frame(tgid, cfg, frame, code, &out[n]);
		if (rc < 0) {
			*flags |= GS_CPU_PY_ERR;
			return n;
		}
		if (rc == 1) { /* C entry frame */
			if (n)
				out[n - 1].flags |= GS_PYF_ENTRY;
		} else {
			n++;
		}
		frame = next;
	}
	if (frame)
		*flags |= GS_CPU_PY_TRUNC;
	return n;
}
