/* SPDX-License-Identifier: MIT */
/* Ranks from the environment (proc/environ.c), process roles of distributed
 * jobs (session/procs.c), and -o template expansion (cli/options.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "session/session.h"
#include "session/procs.h"

static struct gs_rank_env parse(const char *const *env)
{
	struct gs_rank_env r = GS_RANK_ENV_UNKNOWN;

	for (; *env; env++)
		gs_rank_env_entry(&r, *env, strlen(*env));
	return r;
}

Test(rank_env, torchrun_worker)
{
	const char *env[] = { "PATH=/usr/bin", "LOCAL_RANK=1", "RANK=5",
			      "GROUP_RANK=2",  "WORLD_SIZE=8", NULL };
	struct gs_rank_env r = parse(env);

	cr_assert_eq(r.rank, 5);
	cr_assert_eq(r.local_rank, 1);
	cr_assert_eq(r.world_size, 8);
	cr_assert_eq(r.node_rank, 2);
	cr_assert_eq(r.src[0], GS_RANK_TORCH);
}

Test(rank_env, torch_beats_slurm_in_any_order)
{
	const char *a[] = { "SLURM_PROCID=3", "RANK=5", "SLURM_NODEID=1", "SLURM_NTASKS=4", NULL };
	const char *b[] = { "RANK=5", "SLURM_PROCID=3", NULL };
	struct gs_rank_env ra = parse(a), rb = parse(b);

	cr_assert_eq(ra.rank, 5);
	cr_assert_eq(ra.src[0], GS_RANK_TORCH);
	cr_assert_eq(ra.node_rank, 1); /* no GROUP_RANK: Slurm's node id */
	cr_assert_eq(ra.world_size, 4);
	cr_assert_eq(rb.rank, 5);
}

Test(rank_env, slurm_and_ompi_alone)
{
	const char *s[] = { "SLURM_PROCID=7", "SLURM_LOCALID=3", NULL };
	const char *o[] = { "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=9",
			    NULL };
	struct gs_rank_env rs = parse(s), ro = parse(o);

	cr_assert_eq(rs.rank, 7);
	cr_assert_eq(rs.local_rank, 3);
	cr_assert_eq(rs.src[0], GS_RANK_SLURM);
	cr_assert_eq(ro.rank, 2);
	cr_assert_eq(ro.src[0], GS_RANK_OMPI);
	cr_assert_eq(ro.world_size, 4);
}

Test(rank_env, untrusted_values_ignored)
{
	const char *env[] = { "RANK=",   "RANK=1x", "RANK=-1", "RANK=99999999999",      "RANK= 1",
			      "XRANK=3", "RANKS=4", "RANK",    "LOCAL_RANK=2147483647", NULL };
	struct gs_rank_env r = parse(env);

	cr_assert_eq(r.rank, -1);
	cr_assert_eq(r.src[0], GS_RANK_NONE);
	cr_assert_eq(r.local_rank, 2147483647);
}

Test(rank_env, block_parse_unterminated_tail)
{
	const char blk[] = "A=1\0RANK=4\0WORLD_SIZE=1"; /* no final NUL */
	struct gs_rank_env r = GS_RANK_ENV_UNKNOWN;

	gs_rank_env_parse(&r, blk, sizeof(blk) - 1);
	cr_assert_eq(r.rank, 4);
	cr_assert_eq(r.world_size, 1);
}

/* A real process: /proc/PID/environ of a child whose environment is larger
 * than one read chunk, the rank variables after the big entries. */
Test(rank_env, proc_environ_of_child)
{
	/* One string may be at most 128 KiB (MAX_ARG_STRLEN): four of 50 KB. */
	static char big[4][50000];
	char *envp[] = { big[0], big[1],         "RANK=3",       big[2],
			 big[3], "LOCAL_RANK=1", "WORLD_SIZE=4", NULL };
	struct gs_rank_env r;
	pid_t pid;
	int rc;

	for (int i = 0; i < 4; i++) {
		memset(big[i], 'x', sizeof(big[i]) - 1);
		memcpy(big[i], "BIG=", 4);
	}
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		execve("/bin/sleep", (char *[]){ "sleep", "5", NULL }, envp);
		_exit(127);
	}
	/* Wait until the exec happened: the task is named "sleep" before the
	 * new image's environment is in place, so read until the rank shows
	 * (a reader that cannot find it fails below after 2 s). */
	for (int i = 0; i < 200; i++) {
		struct gs_proc_stat st;

		if (!gs_proc_stat((uint32_t)pid, &st) && !strcmp(st.comm, "sleep") &&
		    !(rc = gs_proc_rank_env((uint32_t)pid, &r)) && r.rank >= 0)
			break;
		usleep(10000);
	}
	rc = gs_proc_rank_env((uint32_t)pid, &r);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_eq(rc, 0);
	cr_assert_eq(r.rank, 3);
	cr_assert_eq(r.local_rank, 1);
	cr_assert_eq(r.world_size, 4);
	cr_assert_eq(gs_proc_rank_env(0x7ffffff0u, &r), -ENOENT);
	cr_assert_eq(r.rank, -1);
}

/* ---- roles ---------------------------------------------------------------- */

/* The session's process states in a table of their own: parents, roots and
 * ranks are the table entries', as the session's table keeps them. */
static struct gs_procinfo *add(struct gs_proc_slots *t, uint32_t pid, uint32_t ppid, bool root,
			       int64_t rank, uint8_t src, uint64_t samples)
{
	struct gs_procinfo *p = gs_procs_add(t, pid, ppid);

	cr_assert_not_null(p);
	cr_assert_eq(p->proc->tgid, pid);
	p->is_root = root;
	gs_procs_set_main(p, root);
	if (rank >= 0) {
		p->proc->ranks.rank = rank;
		p->proc->ranks.src[0] = src;
	}
	p->cpu_samples = samples;
	return p;
}

static struct gs_proc_slots new_procs(void)
{
	struct gs_proc_slots t;

	cr_assert_eq(gs_proc_slots_init(&t, "session", sizeof(struct gs_procinfo)), 0);
	return t;
}

static const char *role(struct gs_proc_slots *t, uint32_t pid)
{
	return gs_procs_role(gs_procs_get(t, pid));
}

static const struct gs_proc *entry(struct gs_proc_slots *t, uint32_t pid)
{
	return gs_procs_get(t, pid)->proc;
}

Test(roles, torchrun_two_ranks_and_their_workers)
{
	struct gs_proc_slots t = new_procs();

	add(&t, 100, 1, true, -1, 0, 50);                                         /* torchrun */
	add(&t, 101, 100, false, 0, GS_RANK_TORCH, 500);                          /* rank 0 */
	add(&t, 102, 100, false, 1, GS_RANK_TORCH, 490);                          /* rank 1 */
	gs_procs_set_dataloader(add(&t, 103, 101, false, 0, GS_RANK_TORCH, 900)); /* rank 0's */
	add(&t, 104, 102, false, 1, GS_RANK_TORCH, 10); /* a helper of rank 1 */
	cr_assert_eq(entry(&t, 104)->root, 100);
	gs_procs_assign_roles(&t);
	cr_assert_str_eq(role(&t, 100), "other");
	cr_assert_eq(entry(&t, 100)->ranks.rank, -1); /* a launcher: no rank labels */
	cr_assert_str_eq(role(&t, 101), "main");
	cr_assert_str_eq(role(&t, 102), "main");
	cr_assert_str_eq(role(&t, 103), "dataloader");
	cr_assert_str_eq(role(&t, 104), "other");
	cr_assert_eq(entry(&t, 104)->ranks.rank, 1);
	gs_proc_slots_fini(&t);
}

Test(roles, torchrun_under_srun_launcher_loses_its_slurm_rank)
{
	struct gs_proc_slots t = new_procs();

	add(&t, 200, 1, true, 2, GS_RANK_SLURM, 30);     /* torchrun, SLURM_PROCID=2 */
	add(&t, 201, 200, false, 4, GS_RANK_TORCH, 400); /* RANK=4 */
	add(&t, 202, 200, false, 5, GS_RANK_TORCH, 400);
	gs_procs_assign_roles(&t);
	cr_assert_str_eq(role(&t, 200), "other");
	cr_assert_eq(entry(&t, 200)->ranks.rank, -1);
	cr_assert_str_eq(role(&t, 201), "main");
	cr_assert_str_eq(role(&t, 202), "main");
	gs_proc_slots_fini(&t);
}

Test(roles, attach_to_one_rank)
{
	struct gs_proc_slots t = new_procs();

	add(&t, 300, 0, true, 1, GS_RANK_TORCH, 100);
	gs_procs_set_dataloader(add(&t, 301, 300, false, 1, GS_RANK_TORCH, 200));
	gs_procs_assign_roles(&t);
	cr_assert_str_eq(role(&t, 300), "main");
	cr_assert_str_eq(role(&t, 301), "dataloader");
	gs_proc_slots_fini(&t);
}

Test(roles, no_ranks_wrapper_hands_main_to_busiest_child)
{
	struct gs_proc_slots t = new_procs();

	add(&t, 400, 1, true, -1, 0, 1); /* bash -c */
	add(&t, 401, 400, false, -1, 0, 500);
	gs_procs_set_dataloader(add(&t, 402, 401, false, -1, 0, 900));
	gs_procs_assign_roles(&t);
	cr_assert_str_eq(role(&t, 400), "other");
	cr_assert_str_eq(role(&t, 401), "main");
	cr_assert_str_eq(role(&t, 402), "dataloader");
	gs_proc_slots_fini(&t);
}

/* A DataLoader worker stays one whatever the main rule says, and a state
 * starts with its parent's comm (a fork child; its Python state is the
 * Python plug-in's: test_runtimes). */
Test(roles, dataloader_sticks_and_child_inherits)
{
	struct gs_proc_slots t = new_procs();
	struct gs_procinfo *r = add(&t, 500, 0, true, -1, 0, 10), *c;

	snprintf(r->comm, sizeof(r->comm), "python3");
	c = add(&t, 501, 500, false, -1, 0, 1);
	cr_assert_str_eq(c->comm, "python3");
	cr_assert_eq(c->proc->ppid, 500);
	cr_assert_eq(c->proc->root, 500);
	gs_procs_set_dataloader(r);
	gs_procs_set_main(r, true);
	cr_assert_str_eq(role(&t, 500), "dataloader");
	cr_assert_eq(gs_procs_add(&t, 501, 999), c); /* known: as is */
	cr_assert_eq(c->proc->ppid, 500);
	cr_assert_eq(t.n, 2);
	cr_assert_eq(t.all[0], r); /* in order of creation */
	cr_assert_eq(t.all[1], c);
	gs_proc_slots_fini(&t);
}

/* ---- -o templates ------------------------------------------------------------ */

static int expand(const char *tmpl, int64_t rank, char *out, size_t len)
{
	struct gs_prefix_vars v = { .host = "node-7.cluster", .pid = 4242, .rank = rank };
	char err[256];

	return gs_expand_prefix(tmpl, &v, out, len, err, sizeof(err));
}

Test(prefix, host_pid_rank)
{
	char out[256];

	cr_assert_eq(expand("prof-%h-%p", -1, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "prof-node-7.cluster-4242");
	cr_assert_eq(expand("/tmp/r%r/%h.%%p", 3, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/tmp/r3/node-7.cluster.%p");
	cr_assert_eq(expand("plain", -1, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "plain");
}

Test(prefix, errors)
{
	char out[256], err[256];
	struct gs_prefix_vars v = { .host = "../../etc/x", .pid = 1, .rank = -1 };

	cr_assert_eq(expand("p-%r", -1, out, sizeof(out)), -EINVAL);
	cr_assert_eq(expand("p-%x", 0, out, sizeof(out)), -EINVAL);
	cr_assert_eq(expand("p-%", 0, out, sizeof(out)), -EINVAL);
	cr_assert_eq(expand("prof-%h-%p", 0, out, 10), -ENAMETOOLONG);
	/* A host name never climbs out of the directory. */
	cr_assert_eq(gs_expand_prefix("d/%h", &v, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "d/.._.._etc_x");
}
