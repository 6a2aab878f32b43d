/* SPDX-License-Identifier: MIT */
/* proc/table.c: the one process table and its handler calls, on real
 * processes (this test and forked children) and real ELF objects. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpusample/procstat.h"
#include "proc/proc.h"

/* A handler that logs its calls as "name:op:tgid[:detail]" lines. */
struct log {
	char buf[8192];
	int probes, attached_objs;
	char exe[4096];
	bool saw_exe;
};

struct rec {
	const char *name;
	struct log *log;
	int id;
};

static void add(struct log *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct log *g, const char *fmt, ...)
{
	size_t n = strlen(g->buf);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->buf + n, sizeof(g->buf) - n, fmt, ap);
	va_end(ap);
}

static int r_attach(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
		    const struct gs_maps_line *l)
{
	struct rec *r = ctx;

	if (o) {
		r->log->attached_objs++;
		cr_assert(l && l->offset == 0 && l->path);
		r->log->saw_exe |= !strcmp(l->path, r->log->exe);
		return 0;
	}
	add(r->log, "%s:attach:%u:%u ", r->name, p->tgid, p->image);
	p->slot[r->id] = r; /* per-handler state hangs off the entry */
	return 0;
}

static int r_fork(void *ctx, struct gs_proc *parent, struct gs_proc *child)
{
	struct rec *r = ctx;

	add(r->log, "%s:fork:%u:%u ", r->name, parent ? parent->tgid : 0, child->tgid);
	child->slot[r->id] = parent ? parent->slot[r->id] : r;
	return 0;
}

static void r_detach(void *ctx, struct gs_proc *p, bool exec)
{
	struct rec *r = ctx;

	add(r->log, "%s:detach:%u:%s ", r->name, p->tgid, exec ? "exec" : "exit");
}

static void r_tick(void *ctx)
{
	struct rec *r = ctx;

	add(r->log, "%s:tick ", r->name);
}

static void r_report(void *ctx, struct gs_profile *prof)
{
	struct rec *r = ctx;

	add(r->log, "%s:report ", r->name);
}

static void r_release(void *ctx, struct gs_proc *p)
{
	struct rec *r = ctx;

	add(r->log, "%s:release:%u ", r->name, p->tgid);
}

static void r_retire(void *ctx, struct gs_proc *p)
{
	struct rec *r = ctx;

	add(r->log, "%s:retire:%u ", r->name, p->tgid);
}

/* Claims the test binary itself, whatever its path. */
static int r_probe(void *ctx, const struct gs_elf_obj *o)
{
	struct rec *r = ctx;

	r->log->probes++;
	return !strcmp(o->path, r->log->exe);
}

static struct gs_proc_handler handler(struct rec *r, bool probe)
{
	return (struct gs_proc_handler){
		.name = r->name,
		.ctx = r,
		.probe = probe ? r_probe : NULL,
		.attach = r_attach,
		.fork = r_fork,
		.detach = r_detach,
		.tick = r_tick,
		.report = r_report,
		.release = r_release,
		.retire = r_retire,
	};
}

static pid_t child_that_waits(void)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

Test(proc_table, events_reach_handlers_in_order)
{
	static struct log g;
	struct rec a = { "a", &g, 0 }, b = { "b", &g, 0 };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_proc_handler ha = handler(&a, false), hb = handler(&b, false);
	uint32_t me = (uint32_t)getpid();

	cr_assert(t);
	cr_assert_eq(a.id = gs_proc_register(t, &ha), 0);
	cr_assert_eq(b.id = gs_proc_register(t, &hb), 1);
	struct gs_proc *p = gs_proc_table_seen(t, me, 1);
	cr_assert(p && p->tgid == me && p->root == me && p->image == 0);
	cr_assert_eq(p->slot[0], &a);
	cr_assert_eq(p->slot[1], &b);
	cr_assert_eq(gs_proc_table_seen(t, me, 1), p, "a known tgid is not attached again");
	cr_assert_eq(gs_proc_register(t, &ha), -EBUSY);

	struct gs_proc *c = gs_proc_table_fork(t, me, 4000001);
	cr_assert(c && c->root == me && c->ppid == me);
	cr_assert_eq(c->slot[1], &b, "the child starts from its parent's state");
	cr_assert_eq(gs_proc_table_exec(t, 4000001, me), c);
	cr_assert_eq(c->image, 1);
	gs_proc_table_exit(t, 4000001);
	gs_proc_table_exit(t, 4000001); /* twice: detached once */
	cr_assert(c->exited);
	cr_assert_eq(gs_proc_get(t, 4000001), c, "an exited process keeps its entry");
	gs_proc_table_exit(t, 4000002); /* unknown: nothing */
	struct gs_proc *o = gs_proc_table_fork(t, 4000003, 4000004);
	cr_assert(o && o->root == 4000004, "an orphan fork is its own root");
	gs_proc_table_tick(t);
	gs_proc_table_report(t, NULL);
	cr_assert_eq(gs_proc_count(t), 3);
	cr_assert_eq(gs_proc_at(t, 1), c);
	cr_assert_null(gs_proc_at(t, 3));
	gs_proc_table_free(t);

	char want[1024];
	snprintf(want, sizeof(want),
		 "a:attach:%u:0 b:attach:%u:0 "
		 "a:fork:%u:4000001 b:fork:%u:4000001 "
		 "b:detach:4000001:exec a:detach:4000001:exec "
		 "a:attach:4000001:1 b:attach:4000001:1 "
		 "b:detach:4000001:exit a:detach:4000001:exit "
		 "a:fork:0:4000004 b:fork:0:4000004 "
		 "a:tick b:tick a:report b:report "
		 "a:release:%u b:release:%u a:release:4000001 b:release:4000001 "
		 "a:release:4000004 b:release:4000004 ",
		 me, me, me, me, me, me);
	cr_assert_str_eq(g.buf, want);
}

/* pid_max wraps: a pid that exited during the run is handed to a new
 * process, whose fork record must bring the entry back to life. */
Test(proc_table, fork_onto_an_exited_pid_is_a_new_process)
{
	static struct log g;
	struct rec a = { "a", &g, 0 };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_proc_handler ha = handler(&a, false);
	uint32_t me = (uint32_t)getpid();

	cr_assert(t);
	cr_assert_eq(a.id = gs_proc_register(t, &ha), 0);
	cr_assert(gs_proc_table_seen(t, me, 1));
	struct gs_proc *c = gs_proc_table_fork(t, 4000040, 4000041);
	cr_assert(c && c->root == 4000041);
	gs_proc_table_exit(t, 4000041);
	cr_assert(c->exited);
	cr_assert_eq(gs_proc_table_fork(t, me, 4000041), c, "one entry per tgid");
	cr_assert_not(c->exited, "the new process is alive");
	cr_assert_eq(c->ppid, me);
	cr_assert_eq(c->root, me, "its root is its new parent's");
	cr_assert_eq(c->image, 1);
	gs_proc_table_exit(t, 4000041);
	cr_assert(c->exited, "and its own exit is seen");
	gs_proc_table_free(t);
	cr_assert(strstr(g.buf, "a:detach:4000041:exit a:fork:"), "%s", g.buf);
	cr_assert(strstr(g.buf, ":4000041 a:detach:4000041:exit a:release"), "%s", g.buf);
}

Test(proc_table, probe_claims_objects_once_and_fork_shares_maps)
{
	static struct log g;
	struct rec a = { "a", &g, 0 };
	struct gs_elf_cache *elf = gs_elf_cache_new();
	struct gs_proc_table *t;
	struct gs_proc_handler ha = handler(&a, true);
	ssize_t n = readlink("/proc/self/exe", g.exe, sizeof(g.exe) - 1);

	cr_assert_gt(n, 0);
	cr_assert(elf && (t = gs_proc_table_new(elf)));
	gs_elf_cache_put(elf); /* the table holds its own reference */
	cr_assert_eq(gs_proc_register(t, &ha), 0);

	pid_t kid = child_that_waits();
	struct gs_proc *p = gs_proc_table_seen(t, (uint32_t)getpid(), 1);
	cr_assert(p && p->maps && p->maps->n > 3);
	cr_assert(g.saw_exe, "the claimed object is attached with its mapping");
	cr_assert_eq(g.attached_objs, 1, "only the claimed object");
	int probes = g.probes;
	cr_assert_gt(probes, 1, "every mapped ELF file is probed (libc, ld.so, ...)");

	struct gs_proc *c = gs_proc_table_fork(t, (uint32_t)getpid(), (uint32_t)kid);
	cr_assert_eq(c->maps, p->maps, "a fork child shares the snapshot");
	cr_assert_eq(p->maps->refs, 2);
	gs_proc_table_exec(t, (uint32_t)kid, (uint32_t)getpid());
	cr_assert(c->maps && c->maps != p->maps, "exec reads the child's own maps");
	cr_assert_eq(p->maps->refs, 1);
	cr_assert_eq(g.attached_objs, 2, "the child's image attached again");
	cr_assert_eq(g.probes, probes, "objects are probed once, not per process");
	/* A fork record for a child seen first by its samples: the record is
	 * the truth, the child takes the parent's snapshot. */
	struct gs_proc_maps *own = c->maps;
	cr_assert_eq(gs_proc_table_fork(t, (uint32_t)getpid(), (uint32_t)kid), c);
	cr_assert_eq(c->maps, p->maps);
	cr_assert_neq(c->maps, own);
	reap(kid);
	gs_proc_table_free(t);
}

/* A DataLoader worker that exited and whose stacks are symbolized: the
 * handlers drop their snapshots (retire, in reverse order) and the entry
 * its maps, so a run that re-creates workers every epoch keeps no maps per
 * exited worker; a live process (a pid handed out again) is not retired. */
Test(proc_table, retire_drops_an_exited_process_maps)
{
	static struct log g;
	struct rec a = { "a", &g, 0 }, b = { "b", &g, 0 };
	struct gs_elf_cache *elf = gs_elf_cache_new();
	struct gs_proc_table *t;
	struct gs_proc_handler ha = handler(&a, true), hb = handler(&b, false);
	uint32_t me = (uint32_t)getpid();

	cr_assert_gt(readlink("/proc/self/exe", g.exe, sizeof(g.exe) - 1), 0);
	cr_assert(elf && (t = gs_proc_table_new(elf)));
	gs_elf_cache_put(elf);
	cr_assert_eq(gs_proc_register(t, &ha), 0);
	cr_assert_eq(gs_proc_register(t, &hb), 1);
	struct gs_proc *p = gs_proc_table_seen(t, me, 1);
	cr_assert(p && p->maps);
	struct gs_proc *c = gs_proc_table_fork(t, me, 4000061);
	cr_assert_eq(c->maps, p->maps);
	cr_assert_eq(p->maps->refs, 2);
	cr_assert_eq(gs_proc_table_retire(t, 4000061), -EBUSY, "alive: not retired");
	cr_assert_eq(gs_proc_table_retire(t, 4000062), -ENOENT);
	gs_proc_table_exit(t, 4000061);
	g.buf[0] = 0;
	cr_assert_eq(gs_proc_table_retire(t, 4000061), 0);
	cr_assert_null(c->maps, "the exited worker's snapshot reference is dropped");
	cr_assert_eq(p->maps->refs, 1, "the parent's snapshot stays");
	cr_assert_str_eq(g.buf, "b:retire:4000061 a:retire:4000061 ");
	cr_assert_eq(gs_proc_get(t, 4000061), c, "the entry stays for the profile");
	gs_proc_table_free(t);
}

Test(proc_table, slots_of_processes_a_component_found_itself)
{
	static struct log g;
	struct rec a = { "a", &g, 0 }, b = { "b", &g, 1 };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_proc_handler ha = handler(&a, false), hb = handler(&b, false);
	int x;

	gs_proc_register(t, &ha);
	gs_proc_register(t, &hb);
	cr_assert_null(gs_proc_table_slot(t, 4000010, 1, false));
	cr_assert_null(gs_proc_table_slot(t, 4000010, 2, true), "not a registered id");
	void **slot = gs_proc_table_slot(t, 4000010, 1, true);
	cr_assert(slot);
	*slot = &x;
	cr_assert_eq(gs_proc_table_slot(t, 4000010, 1, false), slot);
	gs_proc_table_exit(t, 4000010); /* never announced: no detach */
	cr_assert_str_eq(g.buf, "", "made without calling any handler");
	cr_assert_eq(gs_proc_get(t, 4000010)->slot[1], &x);

	/* Its fork record announces it, with the parent's root. */
	struct gs_proc *pa = gs_proc_table_seen(t, 4000011, 1);
	gs_proc_table_fork(t, 4000011, 4000010);
	struct gs_proc *c = gs_proc_get(t, 4000010);
	cr_assert(c->announced && c->root == pa->root && c->ppid == 4000011);
	cr_assert_eq(gs_proc_table_seen(t, 4000010, 4000011), c);
	/* Its own parent (tgid 0 as the idle task reports it): its own root. */
	cr_assert_eq(gs_proc_table_slot(t, 0, 0, true) ? gs_proc_get(t, 0)->root : 1, 0);
	/* One made by a slot and then first seen is attached once, and
	 * takes its parent from the sighting. */
	gs_proc_table_slot(t, 4000012, 0, true);
	cr_assert_eq(gs_proc_get(t, 4000012)->root, 4000012);
	gs_proc_table_seen(t, 4000012, 4000011);
	gs_proc_table_seen(t, 4000012, 1);
	cr_assert_eq(gs_proc_get(t, 4000012)->ppid, 4000011);
	cr_assert_eq(gs_proc_get(t, 4000012)->root, pa->root);
	cr_assert_str_eq(g.buf, "a:attach:4000011:0 b:attach:4000011:0 "
				"a:fork:4000011:4000010 b:fork:4000011:4000010 "
				"a:attach:4000012:0 b:attach:4000012:0 ");
	gs_proc_table_free(t);
}

Test(proc_table, register_bound)
{
	static struct log g;
	struct rec a = { "a", &g, 0 };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_proc_handler ha = handler(&a, true);

	for (int i = 0; i < GS_PROC_MAX_HANDLERS; i++)
		cr_assert_eq(gs_proc_register(t, &ha), i);
	cr_assert_eq(gs_proc_register(t, &ha), -ENOSPC);
	/* Without an ELF cache nothing is probed or snapshotted. */
	struct gs_proc *p = gs_proc_table_seen(t, (uint32_t)getpid(), 1);
	cr_assert(p && !p->maps && g.probes == 0);
	gs_proc_table_free(t);
}

Test(proc_table, component_slots_alone_then_bound)
{
	struct gs_proc_slots s;
	struct st {
		uint64_t v[3];
	};

	cr_assert_eq(gs_proc_slots_init(&s, "alone", sizeof(struct st)), 0);
	cr_assert_null(gs_proc_slots_get(&s, 4000020, false));
	struct st *own = gs_proc_slots_get(&s, 4000020, true);
	cr_assert(own && !own->v[0] && !own->v[2], "a zeroed state");
	own->v[0] = 7;
	cr_assert_eq(gs_proc_slots_get(&s, 4000020, true), own, "made once");
	cr_assert_eq(s.n, 1);

	static struct log g;
	struct rec a = { "a", &g, 0 }, b = { "b", &g, 1 };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_proc_handler ha = handler(&a, false), hb = handler(&b, false);
	gs_proc_register(t, &ha);
	int id = gs_proc_register(t, &hb);
	cr_assert_eq(gs_proc_slots_bind(&s, t, id), -EBUSY, "states exist");
	gs_proc_slots_fini(&s);
	cr_assert_eq(gs_proc_slots_init(&s, "bound", sizeof(struct st)), 0);
	cr_assert_eq(gs_proc_slots_bind(&s, t, id), 0); /* drops the own table */

	struct gs_proc *p = gs_proc_table_seen(t, 4000021, 1);
	p->slot[1] = NULL; /* the logging handler's mark: the slot is the component's */
	struct st *x = gs_proc_slots_get(&s, 4000021, true);
	cr_assert_eq(p->slot[1], x, "the bound id's slot of the session's entry");
	struct st *y = gs_proc_slots_get(&s, 4000022, true);
	struct st *z = gs_proc_slots_get(&s, 4000023, true);
	cr_assert(y && z && s.n == 3);
	gs_proc_slots_drop(&s, 4000021);
	cr_assert_null(p->slot[1]);
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.all[0], z, "the last state moved into the dropped one's place");
	cr_assert_eq(s.all[1], y);
	gs_proc_slots_drop(&s, 4000023);
	cr_assert(s.n == 1 && s.all[0] == y);
	gs_proc_slots_drop(&s, 4000099); /* none: nothing */
	gs_proc_slots_fini(&s);          /* the session's table is not ours to free */
	cr_assert_eq(gs_proc_get(t, 4000021), p);
	gs_proc_table_free(t);
}

/* ---- ranks and role carried by the entry ------------------------------------ */

static int64_t rank_at_attach;

static int rank_attach(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
		       const struct gs_maps_line *l)
{
	rank_at_attach = p->ranks.rank;
	return 0;
}

/* Until pid runs comm and its environment is readable: an exec sets the
 * name before the new image's environment is in place. */
static bool wait_comm(pid_t pid, const char *comm)
{
	for (int i = 0; i < 500; i++) {
		struct gs_proc_stat st;
		struct gs_rank_env r;

		if (!gs_proc_stat((uint32_t)pid, &st) && !strcmp(st.comm, comm) &&
		    !gs_proc_rank_env((uint32_t)pid, &r) && r.rank >= 0)
			return true;
		usleep(10000);
	}
	return false;
}

/* A shell with RANK=3 that, a second later, becomes `sleep` with RANK=7. */
static pid_t ranked_child(void)
{
	char *envp[] = { "PATH=/bin:/usr/bin", "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", NULL };
	char *argv[] = { "sh", "-c", "sleep 1; exec env RANK=7 sleep 30", NULL };
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execve("/bin/sh", argv, envp);
		_exit(127);
	}
	cr_assert(wait_comm(pid, "sh"), "the child runs the shell");
	return pid;
}

Test(proc_table, entry_carries_ranks_and_role)
{
	const struct gs_proc_handler h = { .name = "ranks", .attach = rank_attach };
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	pid_t pid = ranked_child();
	uint32_t c = (uint32_t)pid;

	cr_assert_geq(gs_proc_register(t, &h), 0);
	struct gs_proc *p = gs_proc_table_seen(t, c, (uint32_t)getpid());
	cr_assert(p);
	cr_assert_eq(p->ranks.rank, 3);
	cr_assert_eq(p->ranks.local_rank, 1);
	cr_assert_eq(p->ranks.world_size, 4);
	cr_assert_eq(p->ranks.node_rank, -1);
	cr_assert_eq(p->ranks.src[0], GS_RANK_TORCH);
	cr_assert_eq(rank_at_attach, 3, "read before the handlers attach");
	cr_assert_eq(p->role, GS_ROLE_OTHER);
	cr_assert_str_eq(gs_proc_role_name(p->role), "other");
	cr_assert_str_eq(gs_proc_role_name(GS_ROLE_MAIN), "main");
	cr_assert_str_eq(gs_proc_role_name(GS_ROLE_DATALOADER), "dataloader");
	cr_assert_str_eq(gs_proc_role_name(200), "other");

	/* A fork child shares the environment; so does one first seen after
	 * it is gone (unreadable), and one a component made before the event. */
	struct gs_proc *f = gs_proc_table_fork(t, c, 4000020);
	cr_assert_eq(f->ranks.rank, 3);
	struct gs_proc *g = gs_proc_table_seen(t, 4000021, c);
	cr_assert_eq(g->ranks.rank, 3);
	cr_assert_eq(g->root, p->root);
	struct gs_proc *a = gs_proc_table_add(t, 4000022, c);
	cr_assert(a && !a->announced && a->ppid == c && a->root == p->root);
	cr_assert_eq(a->ranks.local_rank, 1);
	cr_assert_eq(gs_proc_table_add(t, 4000022, 1), a);
	cr_assert_eq(a->ppid, 1, "not announced: the last parent given");
	cr_assert_eq(a->ranks.rank, -1, "and its (unknown) ranks");
	cr_assert_eq(gs_proc_table_add(t, c, 1), p);
	cr_assert_eq(p->ppid, (uint32_t)getpid(), "announced: as is");

	/* An exec: the new image's environment; unreadable is unknown. */
	gs_proc_table_exec(t, 4000020, c);
	cr_assert_eq(f->ranks.rank, -1);
	cr_assert(wait_comm(pid, "sleep"), "the shell execs sleep");
	gs_proc_table_exec(t, c, 0);
	cr_assert_eq(p->ranks.rank, 7);
	cr_assert_eq(p->ranks.local_rank, 1);
	cr_assert_eq(rank_at_attach, 7);
	reap(pid);
	gs_proc_table_free(t);
}

/* A handler that keeps what maps_changed told it. */
struct seen_change {
	struct gs_proc_table *t;
	int calls;
	unsigned why;
	size_t n_added, n_removed;
	bool added_at, removed_at; /* the mapping at `at` was among them */
	uint64_t at;
	int nested; /* what a re-read asked from maps_changed returned */
};

static void on_maps_changed(void *ctx, struct gs_proc *p, const struct gs_proc_maps_change *ch)
{
	struct seen_change *c = ctx;

	c->calls++;
	c->why = ch->why;
	c->n_added = ch->n_added;
	c->n_removed = ch->n_removed;
	c->added_at = c->removed_at = false;
	for (size_t i = 0; i < ch->n_added; i++)
		c->added_at |= ch->added[i]->start == c->at && ch->added[i]->exec;
	for (size_t i = 0; i < ch->n_removed; i++)
		c->removed_at |= ch->removed[i]->start == c->at;
	c->nested = gs_proc_maps_reread(c->t, p->tgid, GS_MAPS_NOW, 0);
}

/* Re-reads asked of the table: diffed, announced, and held to their rules. */
Test(proc_table, maps_reread_diffs_and_backs_off)
{
	struct seen_change c = { 0 };
	struct gs_proc_handler h = { .name = "m", .ctx = &c, .maps_changed = on_maps_changed };
	uint32_t me = (uint32_t)getpid();
	struct gs_proc *p;
	FILE *f;
	void *code;
	int fd;

	c.t = gs_proc_table_new(NULL);
	cr_assert_eq(gs_proc_register(c.t, &h), 0);
	p = gs_proc_table_seen(c.t, me, 1);
	cr_assert(p && p->maps && p->maps->n, "a maps_changed handler has the maps read at attach");
	cr_assert_eq(c.calls, 0, "attach is no change");
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_CHECK, 0), 0, "nothing new");
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_ADDR_MISS, 4096), 0,
		     "nothing at page 1, then or now");

	/* new code: an executable mapping of a file */
	cr_assert((f = tmpfile()));
	fd = fileno(f);
	cr_assert_eq(ftruncate(fd, 8192), 0);
	code = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	cr_assert(code != MAP_FAILED);
	c.at = (uint64_t)(uintptr_t)code;
	usleep(GS_MAPS_MISS_MIN_NS / 1000 + 1000);
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_CODE_MISS, 0), 1);
	cr_assert(c.calls == 1 && c.added_at && !c.removed_at && c.why == GS_MAPS_CODE_MISS);
	cr_assert_eq(c.nested, 0, "no second read while the first is announced");
	cr_assert(gs_proc_maps_find(p->maps, c.at));
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_CODE_MISS, 0), -EAGAIN, "backs off");

	/* asked now: announced even when nothing changed (of the test's file:
	 * this process's anonymous mappings may come and go with its
	 * allocator, ASan's above all) */
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_NOW | GS_MAPS_BUILD_ALL, 0), 1);
	cr_assert(c.calls == 2 && !c.added_at && !c.removed_at);
	cr_assert_eq(c.why, GS_MAPS_NOW | GS_MAPS_BUILD_ALL);

	/* code gone: the exec ranges changed, so a check reads */
	munmap(code, 8192);
	fclose(f);
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_CHECK, 0), 1);
	cr_assert(c.calls == 3 && c.removed_at && !c.added_at);
	/* an address miss within a second of the last such (or NOW) read */
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_ADDR_MISS, c.at), -EAGAIN);
	cr_assert_eq(gs_proc_maps_reread(c.t, 4000099, GS_MAPS_NOW, 0), -ESRCH, "no entry");
	gs_proc_table_exit(c.t, me);
	cr_assert_eq(gs_proc_maps_reread(c.t, me, GS_MAPS_NOW, 0), -ESRCH, "exited");
	cr_assert_eq(c.calls, 3);
	gs_proc_table_free(c.t);
}

Test(proc_table, threads_one_entry_per_tgid_tid)
{
	struct gs_proc_table *t = gs_proc_table_new(NULL);
	struct gs_thread *a, *b, *c;
	struct gs_proc *p;

	cr_assert_not_null(t);
	cr_assert_null(gs_thread_find(t, 4000, 4001));
	a = gs_thread_get(t, 4000, 4001); /* the process is made with it, announced to no one */
	cr_assert_not_null(a);
	p = gs_proc_get(t, 4000);
	cr_assert_not_null(p);
	cr_assert_not(p->announced);
	cr_assert_eq(a->tgid, 4000);
	cr_assert_eq(a->tid, 4001);
	cr_assert_eq(a->off.pend_stack, -1);
	cr_assert_eq(a->off.seed_raw, -1);
	a->cpu_samples = 7;
	/* many more threads: entries stay where they are */
	for (uint32_t tid = 4002; tid < 4200; tid++)
		cr_assert_not_null(gs_thread_get(t, 4000, tid));
	cr_assert_eq(gs_thread_get(t, 4000, 4001), a);
	cr_assert_eq(gs_thread_find(t, 4000, 4001)->cpu_samples, 7);
	/* the same tid in another process is another thread */
	b = gs_thread_get(t, 5000, 4001);
	cr_assert_not_null(b);
	cr_assert_neq(a, b);
	cr_assert_eq(gs_thread_count(p), 199);
	cr_assert_eq(gs_thread_at(p, 0), a);
	cr_assert_null(gs_thread_at(p, 199));
	/* tid 0 is no thread of a target */
	cr_assert_null(gs_thread_get(t, 4000, 0));
	/* a process first seen by its thread is announced later as usual */
	c = gs_thread_get(t, 5000, 5001);
	cr_assert_eq(gs_proc_table_seen(t, 5000, 1), gs_proc_get(t, 5000));
	cr_assert_eq(gs_thread_find(t, 5000, 5001), c);
	gs_proc_table_free(t); /* frees the threads (ASan/valgrind: no leak) */
}
