/* SPDX-License-Identifier: MIT */
/*
 * Training steps seen from outside the job: a uretprobe (bpf/steps.bpf.h)
 * on torch::autograd::Engine::execute in each process that maps
 * libtorch_cpu (exported by PyTorch 1.13 and 2.x alike; every
 * loss.backward() runs it once).  This file is a handler of the process
 * table: it claims libtorch_cpu objects by that dynamic symbol, attaches
 * the uretprobe to each process mapping one (at first sight, after a dlopen:
 * maps_changed, in fork children), keeps the marks the ring buffer brings,
 * and at the end hands each process's main-thread marks to the profile
 * (gs_profile_label_steps: step and phase labels, the step table).  Where
 * the library exports the profiler's record_function_enter_new (2.x), a
 * second probe marks the optimizer's steps ("Optimizer.step#..." regions,
 * opened whether a profiler runs or not); they are the boundaries when
 * seen, so gradient accumulation's backwards make one step.
 *
 * Trust: the symbols are read only from a root-owned file that no one else
 * may write (what a distribution package installs); a libtorch the job's
 * user owns (a venv) gets no probe, and the profile says why.  The backward
 * probe reads nothing of the target; the optimizer probe reads 31 bytes of
 * the region's name (bpf/steps.bpf.h).
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "session/session_int.h"
#include "output/output.h"
#include "util/hashmap.h"
#include "util/vec.h"

/* The mangled prefix of torch::autograd::Engine::execute(edges, inputs,
 * keep_graph, create_graph, accumulate_grad, outputs): its parameter list
 * changed across releases, the name did not. */
#define ENGINE_EXECUTE "_ZN5torch8autograd6Engine7executeE"
/* torch::autograd::profiler::record_function_enter_new(const std::string &,
 * optional<std::string> const &): where Optimizer.step's region opens. */
#define RECORD_FUNCTION_ENTER "_ZN5torch8autograd8profiler25record_function_enter_newE"
#define OPT_KEY               (1ull << 40) /* probed: key of an object's second symbol */
/* Marks kept for the whole run: a 1000-per-second cap (BPF) over hours
 * stays far below; past it marks are counted, not kept. */
#define STEP_MARKS_MAX (1u << 22)
#define PROBED_NO      1
#define PROBED_NOROOT  2 /* libtorch_cpu, but not root-owned */
#define PROBED_YES     3 /* + (vaddr of Engine::execute << 2) */

struct step_mark {
	uint64_t ktime;
	uint32_t tid;
	uint32_t kind; /* enum gs_step_kind */
};

struct step_proc {
	uint32_t tgid;
	struct bpf_link *link, *opt_link;
	uint64_t base; /* start of the mapping the link is on (0: none) */
	struct step_mark *marks;
	size_t n_marks, cap_marks;
};

struct gs_session_steps {
	struct bpf_program *prog, *opt_prog;
	struct gs_proc_slots procs; /* struct step_proc */
	struct gs_elf_cache *elf;
	struct gs_link_reaper *reaper; /* the session's */
	struct gs_hmap probed;         /* gs_elf_obj.id -> PROBED_*; id | OPT_KEY -> 1 + vaddr of
				* record_function_enter_new (1: none) */
	size_t n_marks;                /* kept, all processes */
	uint64_t marks_dropped;        /* past STEP_MARKS_MAX */
	uint32_t attached, attach_failed, not_root;
	char not_root_path[160];
	char attach_err[200];
};

/* vaddrs of Engine::execute and record_function_enter_new in o's dynamic
 * symbols (0 when absent), in one pass. */
static void find_syms(const struct gs_elf_obj *o, uint64_t *exec, uint64_t *rfe)
{
	Elf_Scn *scn = NULL;

	*exec = *rfe = 0;
	if (!o->elf)
		return;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(d, (int)i, &sym) ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			n = elf_strptr(o->elf, sh.sh_link, sym.st_name);
			if (n && !strncmp(n, ENGINE_EXECUTE, sizeof(ENGINE_EXECUTE) - 1))
				*exec = sym.st_value;
			else if (n && !strncmp(n, RECORD_FUNCTION_ENTER,
					       sizeof(RECORD_FUNCTION_ENTER) - 1))
				*rfe = sym.st_value;
		}
	}
}

/* PROBED_* of object o, its symbols looked up the first time. */
static uint64_t *probed_slot(struct gs_session_steps *st, const struct gs_elf_obj *o)
{
	bool added;
	uint64_t *v = gs_hmap_slot(&st->probed, o->id, &added), exec, rfe, *w;

	if (v && added) {
		find_syms(o, &exec, &rfe);
		*v = exec ? PROBED_YES + (exec << 2) : PROBED_NO;
		if ((w = gs_hmap_slot(&st->probed, o->id | OPT_KEY, &added)))
			*w = 1 + rfe;
		v = gs_hmap_get(&st->probed, o->id); /* the insert may have moved it */
	}
	return v;
}

/* The file offset of vaddr (what a uprobe is placed at), by the PT_LOADs. */
static int vaddr_to_off(const struct gs_elf_obj *o, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < o->n_loads; i++) {
		const GElf_Phdr *ph = &o->loads[i];

		if (vaddr >= ph->p_vaddr && vaddr < ph->p_vaddr + ph->p_filesz) {
			*off = vaddr - ph->p_vaddr + ph->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* Root-owned, written by no one else: the file itself (map_files), not a
 * path the target controls. */
static bool root_owned(uint32_t tgid, const struct gs_maps_line *l)
{
	struct stat st;
	int fd = gs_proc_open_mapped(tgid, l);
	bool ok;

	if (fd < 0)
		return false;
	ok = !fstat(fd, &st) && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
	close(fd);
	return ok;
}

/* PROBED_* of the object mapped at l (asked once per object; a non-root
 * file is asked again per process: ownership is the file's). */
static uint64_t probe_object(struct gs_session_steps *st, uint32_t tgid,
			     const struct gs_maps_line *l, const struct gs_elf_obj *o)
{
	uint64_t *v = probed_slot(st, o);

	if (!v)
		return PROBED_NO;
	if (*v < PROBED_YES)
		return *v;
	if (!root_owned(tgid, l)) {
		if (!st->not_root++)
			snprintf(st->not_root_path, sizeof(st->not_root_path), "%s", l->path);
		return PROBED_NOROOT;
	}
	return *v;
}

/* The links go to the reaper: each close waits for an RCU grace period. */
static void detach_proc(struct gs_session_steps *st, struct step_proc *sp)
{
	gs_link_reaper_close(st->reaper, sp->link);
	gs_link_reaper_close(st->reaper, sp->opt_link);
	sp->link = sp->opt_link = NULL;
	sp->base = 0;
}

/* Attach the step probe to tgid's libtorch_cpu mapped at l (offset 0). */
static void attach_at(struct gs_session_steps *st, uint32_t tgid, const struct gs_maps_line *l,
		      const struct gs_elf_obj *o)
{
	struct step_proc *sp;
	char file[96];
	uint64_t v, off, *rfe;
	struct stat fs;

	if (!st->prog || (v = probe_object(st, tgid, l, o)) < PROBED_YES)
		return;
	sp = gs_proc_slots_get(&st->procs, tgid, true);
	if (!sp || (sp->link && sp->base == l->start))
		return;
	sp->tgid = tgid;
	detach_proc(st, sp);
	if (vaddr_to_off(o, v >> 2, &off))
		return;
	/* map_files: the kernel resolves it to the mapped file itself */
	snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", tgid,
		 (unsigned long long)l->start, (unsigned long long)l->end);
	if (stat(file, &fs) || fs.st_ino != l->inode ||
	    fs.st_dev != makedev(l->dev_major, l->dev_minor))
		return; /* unmapped meanwhile */
	sp->link = bpf_program__attach_uprobe(st->prog, true, (pid_t)tgid, file, (size_t)off);
	if (!sp->link) {
		if (!st->attach_failed++)
			snprintf(st->attach_err, sizeof(st->attach_err), "%s: %s", l->path,
				 strerror(errno));
		return;
	}
	sp->base = l->start;
	st->attached++;
	/* the optimizer's mark is a bonus: without it, backwards are the steps */
	rfe = gs_hmap_get(&st->probed, o->id | OPT_KEY);
	if (st->opt_prog && rfe && *rfe > 1 && !vaddr_to_off(o, *rfe - 1, &off))
		sp->opt_link = bpf_program__attach_uprobe(st->opt_prog, false, (pid_t)tgid, file,
							  (size_t)off);
}

static int h_probe(void *ctx, const struct gs_elf_obj *o)
{
	uint64_t *v = probed_slot(ctx, o);

	return v && *v >= PROBED_YES;
}

static int h_attach(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
		    const struct gs_maps_line *l)
{
	if (o && l)
		attach_at(ctx, p->tgid, l, o);
	return 0;
}

static void h_maps_changed(void *ctx, struct gs_proc *p, const struct gs_proc_maps_change *ch)
{
	struct gs_session_steps *st = ctx;

	for (size_t i = 0; i < ch->n_added; i++) {
		const struct gs_maps_line *l = ch->added[i];
		struct gs_elf_obj *o;

		if (!l->path || l->path[0] != '/' || !l->inode || l->offset ||
		    gs_elf_get_mapped(st->elf, p->tgid, l, &o))
			continue;
		attach_at(st, p->tgid, l, o);
	}
}

/* A fork child maps its parent's libtorch but the parent's probe filters
 * on the parent's pid: the child gets its own. */
static int h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *child)
{
	struct gs_session_steps *st = ctx;
	struct step_proc *sp = parent ? gs_proc_slots_get(&st->procs, parent->tgid, false) : NULL;
	const struct gs_maps_line *l;
	struct gs_elf_obj *o;

	if (!sp || !sp->link || !child->maps || !(l = gs_proc_maps_find(child->maps, sp->base)) ||
	    l->offset || gs_elf_get_mapped(st->elf, child->tgid, l, &o))
		return 0;
	attach_at(st, child->tgid, l, o);
	return 0;
}

static void h_detach(void *ctx, struct gs_proc *p, bool exec)
{
	struct gs_session_steps *st = ctx;
	struct step_proc *sp = gs_proc_slots_get(&st->procs, p->tgid, false);

	if (sp)
		detach_proc(st, sp);
}

static void h_release(void *ctx, struct gs_proc *p)
{
	h_detach(ctx, p, false);
}

int gs_steps_register(struct session *s)
{
	struct gs_session_steps *st = calloc(1, sizeof(*st));
	struct gs_proc_handler h = {
		.name = "steps",
		.probe = h_probe,
		.attach = h_attach,
		.fork = h_fork,
		.detach = h_detach,
		.maps_changed = h_maps_changed,
		.release = h_release,
	};
	int rc;

	if (!st)
		return -ENOMEM;
	s->rt.steps = st;
	st->prog = gs_sampler_step_prog(s->rt.sampler, false);
	st->opt_prog = gs_sampler_step_prog(s->rt.sampler, true);
	st->elf = gs_sym_elf_cache(s->rt.sym);
	st->reaper = s->rt.reaper;
	h.ctx = st;
	if ((rc = gs_proc_slots_init(&st->procs, "steps", sizeof(struct step_proc))) ||
	    (rc = gs_proc_register(s->rt.pt, &h)) < 0 ||
	    (rc = gs_proc_slots_bind(&st->procs, s->rt.pt, rc)))
		return rc;
	return 0;
}

void gs_steps_record(struct session *s, const struct gs_rec_hdr *h)
{
	struct gs_session_steps *st = s->rt.steps;
	const struct gs_step_mark *m;
	struct step_proc *sp;
	struct step_mark sm;

	if (!st)
		return;
	if (gs_rec_fixed(h, GS_REC_STEP_MARK, (const void **)&m)) {
		s->out.counts[GS_C_records_malformed]++;
		return;
	}
	/* only a process the probe was attached to has a state */
	sm = (struct step_mark){ .ktime = m->hdr.ktime_ns, .tid = m->tid, .kind = m->kind };
	sp = gs_proc_slots_get(&st->procs, m->tgid, false);
	if (!sp || st->n_marks >= STEP_MARKS_MAX ||
	    GS_PUSH(sp->marks, sp->n_marks, sp->cap_marks, sm))
		st->marks_dropped++;
	else
		st->n_marks++;
}

/* Stop the probes (with the sampler: after the drain nothing more comes). */
void gs_steps_detach(struct session *s)
{
	struct gs_session_steps *st = s->rt.steps;

	for (size_t i = 0; st && i < st->procs.n; i++)
		detach_proc(st, st->procs.all[i]);
}

static int by_time(const void *a, const void *b)
{
	const struct step_mark *x = a, *y = b;

	return x->ktime < y->ktime ? -1 : x->ktime > y->ktime;
}

/* A process's marks to the profile: those of its main thread (tid ==
 * tgid) are the step boundaries; backward returns on other threads are
 * counted and said. */
static int label_proc(struct session *s, struct step_proc *sp, uint64_t *times)
{
	const struct step_mark *m = sp->marks;
	size_t n_bwd = 0, n_opt = 0, other = 0, n = sp->n_marks;
	uint32_t tgid = sp->tgid;
	uint64_t *opt = times + n; /* times has room for 2 n */

	qsort(sp->marks, n, sizeof(*sp->marks), by_time); /* CPUs' records interleave */
	for (size_t i = 0; i < n; i++) {
		if (m[i].tid != tgid) {
			other++;
			continue;
		}
		if (m[i].ktime < s->window.t0_mono || m[i].ktime > s->window.t1_mono)
			continue; /* outside the window (marks made during the detach) */
		if (m[i].kind == GS_STEP_OPTIMIZER)
			opt[n_opt++] = m[i].ktime - s->window.t0_mono;
		else
			times[n_bwd++] = m[i].ktime - s->window.t0_mono;
	}
	if (other)
		gs_profile_add_note(&s->prof,
				    "pid %u: %zu backward or optimizer calls on threads other than "
				    "the main one are not step boundaries",
				    tgid, other);
	/* the optimizer's steps when it has them (several backwards per step:
	 * gradient accumulation), else each backward is a step */
	if (n_opt >= 2 || (n_opt && n_opt >= n_bwd))
		return gs_profile_label_steps(&s->prof, tgid, tgid, opt, n_opt, true, times, n_bwd);
	return gs_profile_label_steps(&s->prof, tgid, tgid, times, n_bwd, false, times, n_bwd);
}

int gs_steps_finish(struct session *s)
{
	struct gs_session_steps *st = s->rt.steps;
	struct gs_sampler_stats ss;
	uint64_t *times;
	int rc = 0;

	if (!st)
		return 0;
	gs_sampler_stats(s->rt.sampler, &ss);
	if (st->not_root)
		gs_profile_add_note(&s->prof,
				    "steps: %s is not root-owned (or is writable by others): no "
				    "step probe in %u process%s; install PyTorch system-wide to "
				    "see steps",
				    st->not_root_path, st->not_root, st->not_root == 1 ? "" : "es");
	if (st->attach_failed)
		gs_profile_add_note(
		    &s->prof, "steps: the backward probe failed in %u process%s (%s)",
		    st->attach_failed, st->attach_failed == 1 ? "" : "es", st->attach_err);
	if (ss.step_rate_limited)
		gs_profile_add_note(
		    &s->prof,
		    "steps: %llu backward or optimizer calls past the cap of 1000 per second and "
		    "process were not recorded",
		    (unsigned long long)ss.step_rate_limited);
	if (st->marks_dropped)
		gs_profile_add_note(&s->prof, "steps: %llu marks past the run's cap were dropped",
				    (unsigned long long)st->marks_dropped);
	if (!st->n_marks) {
		gs_profile_add_comment(&s->prof, "steps: none (no backward seen: %s)",
				       st->attached ? "an inference loop, or no training yet"
						    : "no process maps a root-owned libtorch_cpu");
		return 0;
	}
	times = malloc(2 * st->n_marks * sizeof(*times));
	if (!times)
		return -ENOMEM;
	for (size_t i = 0; i < st->procs.n && !rc; i++) {
		struct step_proc *sp = st->procs.all[i];

		if (sp->n_marks)
			rc = label_proc(s, sp, times);
	}
	free(times);
	return rc;
}

void gs_steps_free(struct session *s)
{
	struct gs_session_steps *st = s->rt.steps;

	if (!st)
		return;
	gs_steps_detach(s);
	for (size_t i = 0; i < st->procs.n; i++)
		free(((struct step_proc *)st->procs.all[i])->marks);
	gs_proc_slots_fini(&st->procs);
	gs_hmap_free(&st->probed);
	free(st);
	s->rt.steps = NULL;
}
