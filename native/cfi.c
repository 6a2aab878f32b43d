// SPDX-License-Identifier: MIT
/*
 * CFI tables in BPF (see bpf/cfi.h): the tables of native/cfi_rows.c -> BPF
 * maps (page index, rows, one global rule set), processes -> sorted mapping
 * arrays in gs_cfi_procs, the builder thread of async mode, per-process
 * state in the process table, and the table's handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <gelf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "proc/proc.h"
#include "gpusample/profile.h"
#include "gpusample/records.h"
#include "native/cfi_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/hashmap.h"
#include "util/vec.h"
#include "util/membudget.h"
#include "util/escape.h"

/* ---- BPF maps and processes ------------------------------------------------ */

#define GS_CFI_MAX_LOADS 8

/* The preallocated gs_cfi_rules array counts against the budget too. */
#define RULES_BYTES ((uint64_t)GS_CFI_MAX_RULES * sizeof(struct gs_cfi_rule))

/* CFI state of one object of proc/'s ELF cache (by gs_elf_obj.id: files
 * with the same build-id are one object there, so they share a table). */
struct cfi_obj {
	int status; /* 0 table loaded, <0 why not (table_id 0: frame pointers) */
	uint32_t table_id;
	uint32_t n_pages;
	/* page-aligned ELF vaddr the table's page index starts at (its first
	 * row's page): BPF sees vaddr - base (the mapping's bias includes it),
	 * so the index spans the object's code, not 0 to its highest address */
	uint64_t base;
	unsigned n_load;
	struct {
		uint64_t vaddr, offset, filesz;
	} load[GS_CFI_MAX_LOADS]; /* PF_X PT_LOADs */
};

/* The vDSO's table: built once from gpusample's own vDSO (the kernel maps
 * the same image into every 64-bit process) and used for a target's
 * [vdso] mapping whose bytes are the same.  clock_gettime runs there
 * without a frame pointer, and a training loop timing its steps was
 * sampled in it as a bare [vdso] frame. */
#define GS_VDSO_MAX (64u << 10)
struct cfi_vdso {
	int state;   /* 0 not tried, 1 built (obj), <0 why not */
	size_t obj;  /* index in objs */
	size_t size; /* bytes of the image */
	uint8_t *image;
};

struct cfi_proc {
	uint32_t tgid;
	bool pending; /* mappings wait for tables being built: republish */
};

/* A re-read of one process's maps asked of proc/ (ask()): what our
 * maps_changed publishes when proc/ announces that process. */
struct cfi_ask {
	uint32_t tgid;
	const uint64_t *want; /* starts of the mappings BPF asked tables for */
	size_t nwant;
	bool done; /* published by maps_changed, with rc */
	int rc;
};

struct gs_cfi {
	int procs_fd, tables_fd, rules_fd, miss_fd;
	struct gs_cfi_rule_set rules; /* global rule ids = gs_cfi_rules indices */
	struct gs_elf_cache *elf;     /* shared with the symbolizer (gs_cfi_set_elf_cache) */
	struct gs_hmap by_elf;        /* gs_elf_obj.id -> index in objs */
	struct cfi_obj *objs;
	size_t n_objs, cap_objs;
	uint32_t next_table;
	uint32_t next_gen; /* gs_cfi_proc.gen of the next write */
	/* struct cfi_proc of each process with tables, in its slot of the
	 * session's table (gs_cfi_bind) or of our own */
	struct gs_proc_slots slots;
	struct gs_cfi_proc *scratch;
	struct gs_cfi_stats st;
	uint64_t budget;      /* of BPF map memory for the tables (gs_cfi_set_budget) */
	bool over_shared;     /* a table was refused by the run's shared budget */
	char over_first[160]; /* the first object over it, for the report */
	bool verbose;
	bool lazy;
	bool async;
	struct builder *b;  /* async: the builder thread */
	uint32_t collected; /* async jobs taken back from the thread */
			    /* inner maps not yet in gs_cfi_tables (flush_tables) */
#define GS_CFI_PUBLISH_BATCH 256
	uint32_t pend_id[GS_CFI_PUBLISH_BATCH];
	int pend_fd[GS_CFI_PUBLISH_BATCH];
	uint32_t n_pend;
	struct cfi_vdso vdso;
	struct cfi_ask *ask; /* the re-read being asked of proc/, or NULL */
};

static int flush_tables(struct gs_cfi *c);

/* ---- the builder thread ------------------------------------------------------
 * In async mode tables are built off the session thread, which must keep
 * reading the ring buffer and answering signals: a crafted or huge object
 * costs at most its bound there, never the run.  Jobs carry an object index
 * and an fd; the thread only parses (no BPF, no shared state but the queue);
 * the session thread collects finished jobs in gs_cfi_refresh, loads them
 * into BPF and republishes the processes waiting for them.  Until then their
 * mappings are GS_CFI_TABLE_PENDING (BPF: frame pointers, a miss). */


struct build_job {
	struct build_job *next;
	size_t obj;
	int fd;
	bool urgent;   /* a sample walked through the object: ahead of the rest */
	uint64_t size; /* the file's: shorter jobs first among the rest */
	char name[160];
	struct gs_cfi_table t;
	int err;
	uint64_t ns;
	uint64_t queued_ns; /* when queued: the verbose line's wait */
};

struct builder {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;             /* work queued, or a job finished */
	struct build_job *todo, *done; /* todo: urgent first, then by size */
	bool busy, quit;
	pid_t tid; /* the thread's, for its scheduling */
	atomic_bool cancel;
	_Atomic uint64_t rows; /* rows of the object being built */
	char current[160];
	uint32_t queued_total, done_total;
};

static void *builder_main(void *arg)
{
	struct builder *b = arg;

	/* Scheduling: gs_cfi_builder_sched (the session's choice). */
	pthread_mutex_lock(&b->mu);
	b->tid = gettid();
	pthread_cond_broadcast(&b->cv);
	for (;;) {
		struct build_job *j;
		struct gs_cfi_build_limits lim = { .cancel = &b->cancel, .rows = &b->rows };
		uint64_t t0;

		while (!b->quit && !b->todo)
			pthread_cond_wait(&b->cv, &b->mu);
		if (b->quit)
			break;
		j = b->todo;
		b->todo = j->next;
		b->busy = true;
		snprintf(b->current, sizeof(b->current), "%s", j->name);
		atomic_store(&b->rows, 0);
		pthread_mutex_unlock(&b->mu);

		t0 = gs_mono_ns();
		lim.deadline_ns = t0 + GS_CFI_BUILD_MAX_NS;
		j->err = gs_cfi_table_build_bounded(j->name, j->fd, &j->t, &lim, false);
		close(j->fd);
		j->ns = gs_mono_ns() - t0;

		pthread_mutex_lock(&b->mu);
		j->next = b->done;
		b->done = j;
		b->busy = false;
		b->done_total++;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

static int builder_start(struct gs_cfi *c)
{
	struct builder *b = calloc(1, sizeof(*b));
	sigset_t all, old;
	int rc;

	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
	/* Signals stay with the session thread (its poll must see Ctrl-C). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&b->th, NULL, builder_main, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		free(b);
		return -rc;
	}
	pthread_mutex_lock(&b->mu);
	while (!b->tid)
		pthread_cond_wait(&b->cv, &b->mu);
	pthread_mutex_unlock(&b->mu);
	c->b = b;
	return 0;
}

void gs_cfi_builder_sched(struct gs_cfi *c, bool rt, int nice)
{
	struct sched_param sp = { .sched_priority = rt ? 1 : 0 };

	if (!c->b)
		return;
	setpriority(PRIO_PROCESS, (id_t)c->b->tid, nice);
	sched_setscheduler(c->b->tid, rt ? SCHED_RR | SCHED_RESET_ON_FORK : SCHED_OTHER, &sp);
}

static void free_jobs(struct build_job *j)
{
	while (j) {
		struct build_job *next = j->next;

		if (j->fd >= 0)
			close(j->fd);
		gs_cfi_table_free(&j->t);
		free(j);
		j = next;
	}
}

static void builder_stop(struct gs_cfi *c)
{
	struct builder *b = c->b;

	if (!b)
		return;
	pthread_mutex_lock(&b->mu);
	b->quit = true;
	atomic_store(&b->cancel, true); /* the object in progress stops within ~16 rows */
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	pthread_join(b->th, NULL);
	free_jobs(b->todo);
	for (struct build_job *j = b->done; j; j = j->next)
		j->fd = -1; /* closed by the thread */
	free_jobs(b->done);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
	free(b);
	c->b = NULL;
}

/* Where job j goes in the queue: urgent jobs (FIFO) before the others,
 * those by size, so that a 16 MiB .eh_frame (libtorch_cpu: 0.5 s) does not
 * hold back the dozens of small libraries mapped with it. */
static struct build_job **queue_slot(struct builder *b, const struct build_job *j)
{
	struct build_job **at = &b->todo;

	while (*at && ((*at)->urgent > j->urgent ||
		       ((*at)->urgent == j->urgent && (j->urgent || (*at)->size <= j->size))))
		at = &(*at)->next;
	return at;
}

static int builder_queue(struct gs_cfi *c, size_t obj, int fd, const char *name, bool urgent)
{
	struct build_job *j = calloc(1, sizeof(*j)), **at;
	struct stat sb;

	if (!j)
		return -ENOMEM;
	size_t len = strlen(name);

	j->obj = obj;
	j->fd = fd;
	j->urgent = urgent;
	j->size = fstat(fd, &sb) ? UINT64_MAX : (uint64_t)sb.st_size;
	if (len >= sizeof(j->name)) { /* keep the end: the file name */
		name += len - (sizeof(j->name) - 1);
		len = sizeof(j->name) - 1;
	}
	memcpy(j->name, name, len);
	j->queued_ns = gs_mono_ns();
	pthread_mutex_lock(&c->b->mu);
	at = queue_slot(c->b, j);
	j->next = *at;
	*at = j;
	c->b->queued_total++;
	pthread_cond_signal(&c->b->cv);
	pthread_mutex_unlock(&c->b->mu);
	return 0;
}

/* Take the finished jobs (wait for all queued ones first if asked). */
static struct build_job *builder_take(struct gs_cfi *c, bool wait_all)
{
	struct builder *b = c->b;
	struct build_job *j;

	pthread_mutex_lock(&b->mu);
	while (wait_all && (b->todo || b->busy))
		pthread_cond_wait(&b->cv, &b->mu);
	j = b->done;
	b->done = NULL;
	pthread_mutex_unlock(&b->mu);
	return j;
}

static int map_fd(struct bpf_object *obj, const char *name, char *err, size_t errlen)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
	int fd = m ? bpf_map__fd(m) : -1;

	if (fd < 0)
		snprintf(err, errlen,
			 "BPF map %s not found or not loaded: the BPF object must include "
			 "bpf/unwind.bpf.h and be loaded before gs_cfi_open",
			 name);
	return fd;
}

int gs_cfi_open(struct bpf_object *obj, struct gs_cfi **out, char *err, size_t errlen)
{
	struct gs_cfi *c = calloc(1, sizeof(*c));
	struct gs_proc_handler h;

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
	c->budget = GS_CFI_BPF_BUDGET;
	gs_cfi_proc_handler(c, &h); /* alone, the own table's re-reads reach it */
	if (!(c->elf = gs_elf_cache_new()) ||
	    gs_proc_slots_init_handler(&c->slots, &h, sizeof(struct cfi_proc))) {
		gs_elf_cache_put(c->elf);
		free(c->scratch);
		free(c);
		snprintf(err, errlen, "out of memory for CFI tables (or libelf unusable)");
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

int gs_cfi_set_elf_cache(struct gs_cfi *cfi, struct gs_elf_cache *elf)
{
	if (cfi->n_objs)
		return -EBUSY; /* objects refer to the old cache's ids */
	gs_elf_cache_put(cfi->elf);
	cfi->elf = gs_elf_cache_ref(elf);
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
	builder_stop(cfi);
	flush_tables(cfi);
	gs_mem_release(GS_MEM_CFI_TABLES, cfi->st.bpf_bytes); /* the maps go with their fds */
	gs_cfi_rule_set_free(&cfi->rules);
	gs_hmap_free(&cfi->by_elf);
	gs_elf_cache_put(cfi->elf);
	free(cfi->objs);
	gs_proc_slots_fini(&cfi->slots);
	free(cfi->vdso.image);
	free(cfi->scratch);
	free(cfi);
}

void gs_cfi_stats(struct gs_cfi *cfi, struct gs_cfi_stats *st)
{
	*st = cfi->st;
	st->procs = (uint32_t)cfi->slots.n;
	st->rules = cfi->rules.n;
	/* rows (page-rounded mmapable arrays) + the preallocated rule array */
	st->bpf_bytes += RULES_BYTES;
	st->budget = cfi->budget;
}

void gs_cfi_set_budget(struct gs_cfi *cfi, uint64_t bytes)
{
	cfi->budget = bytes;
}

/* Global rule id for a table-local rule; writes new rules to gs_cfi_rules. */
static int64_t global_rule(struct gs_cfi *c, const struct gs_cfi_rule *r)
{
	uint32_t before = c->rules.n;
	int64_t id = gs_cfi_rule_set_id(&c->rules, r);
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

/* Page index (see bpf/cfi.h): for each page of vaddr from base, the row in
 * effect at its start and one past the last row starting inside it; indices
 * count the index entries themselves (rows follow them in the same array). */
static void fill_pages(const struct gs_cfi_table *t, uint64_t base, struct gs_cfi_page *pages,
		       uint32_t n_pages)
{
	uint32_t r = 0; /* first row with pc > page start */

	for (uint32_t i = 0; i < n_pages; i++) {
		uint64_t ps = base + ((uint64_t)i << GS_CFI_PAGE_SHIFT),
			 pe = ps + (1u << GS_CFI_PAGE_SHIFT);
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

/* Inner maps go into gs_cfi_tables in batches: every update of a map-in-map
 * waits for an RCU grace period (20-130 ms on a loaded machine), which one
 * at a time made attaching to PyTorch (314 objects) take 5-10 s. */
static int flush_tables(struct gs_cfi *c)
{
	uint32_t n = c->n_pend, fds[GS_CFI_PUBLISH_BATCH];
	int err = 0;

	if (!n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		fds[i] = (uint32_t)c->pend_fd[i];
	if (bpf_map_update_batch(c->tables_fd, c->pend_id, fds, &n, NULL)) {
		/* no batch updates for this map type (older kernels): one by one */
		for (uint32_t i = 0; i < c->n_pend; i++)
			if (bpf_map_update_elem(c->tables_fd, &c->pend_id[i], &c->pend_fd[i],
						BPF_ANY))
				err = -errno;
	}
	for (uint32_t i = 0; i < c->n_pend; i++)
		close(c->pend_fd[i]); /* the outer map holds the reference */
	c->n_pend = 0;
	return err;
}

static int queue_table(struct gs_cfi *c, uint32_t table_id, int fd)
{
	int err = c->n_pend == GS_CFI_PUBLISH_BATCH ? flush_tables(c) : 0;

	c->pend_id[c->n_pend] = table_id;
	c->pend_fd[c->n_pend++] = fd;
	return err;
}

/* Create the inner rows map, fill it through mmap, queue it for table_id.
 * The page index covers the rows' span only, from base (the first row's
 * page): a 15 KB library linked at 0xfff00000 had an index from 0, 8 MiB
 * of kernel memory (600 of them: 4.8 GB).  -ENOSPC: over the budget. */
static int load_rows(struct gs_cfi *c, const struct gs_cfi_table *t, uint32_t table_id,
		     uint32_t *n_pages_out, uint64_t *base_out)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	uint64_t base = t->rows[0].pc & ~(uint64_t)((1u << GS_CFI_PAGE_SHIFT) - 1);
	uint32_t n_pages = (uint32_t)((t->rows[t->n_rows - 1].pc - base) >> GS_CFI_PAGE_SHIFT) + 1;
	size_t entries = (size_t)n_pages + t->n_rows;
	size_t chunks = (entries + GS_CFI_CHUNK - 1) / GS_CFI_CHUNK;
	/* the array's elements are contiguous: one flat run of entries */
	size_t esize = GS_CFI_CHUNK * sizeof(struct gs_cfi_row);
	size_t mbytes = (chunks * esize + 4095) & ~(size_t)4095;
	int64_t *gid;
	struct gs_cfi_row *rows;
	int fd, err = 0;

	/* its own budget, then the run's shared one (kernel memory counts) */
	if (c->st.bpf_bytes + RULES_BYTES + mbytes > c->budget)
		return -ENOSPC;
	if (gs_mem_charge(GS_MEM_CFI_TABLES, mbytes)) {
		c->over_shared = true;
		return -ENOSPC;
	}
	if (!(gid = malloc(t->n_rules * sizeof(*gid)))) {
		gs_mem_release(GS_MEM_CFI_TABLES, mbytes);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->n_rules; i++)
		if ((gid[i] = global_rule(c, &t->rules[i])) < 0) {
			err = (int)gid[i];
			goto out;
		}
	/* chunks fit: pcs are 32 bit (2^20 pages), rows are bounded (8M) */
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gs_cfi_rows", sizeof(uint32_t), (uint32_t)esize,
			    (uint32_t)chunks, &o);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	rows = mmap(NULL, mbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rows == MAP_FAILED) {
		err = -errno;
	} else {
		fill_pages(t, base, (struct gs_cfi_page *)rows, n_pages);
		for (uint32_t i = 0; i < t->n_rows; i++) {
			rows[n_pages + i].pc = (uint32_t)(t->rows[i].pc - base);
			rows[n_pages + i].rule = (uint32_t)gid[t->rows[i].rule];
		}
		munmap(rows, mbytes);
		err = queue_table(c, table_id, fd);
	}
	if (err)
		close(fd);
	if (!err) {
		c->st.bpf_bytes += mbytes;
		*n_pages_out = n_pages;
		*base_out = base;
	}
out:
	if (err)
		gs_mem_release(GS_MEM_CFI_TABLES, mbytes);
	free(gid);
	return err;
}

static struct cfi_obj *obj_new(struct gs_cfi *c, uint32_t elf_id)
{
	if (GS_GROW(c->objs, c->cap_objs, c->n_objs + 1) ||
	    gs_hmap_put(&c->by_elf, elf_id, c->n_objs))
		return NULL;
	memset(&c->objs[c->n_objs], 0, sizeof(c->objs[0]));
	return &c->objs[c->n_objs++];
}

/* The executable PT_LOADs, for the mapping bias. */
static void copy_loads(const struct gs_elf_obj *eo, struct cfi_obj *o)
{
	for (size_t i = 0; i < eo->n_loads && o->n_load < GS_CFI_MAX_LOADS; i++) {
		const GElf_Phdr *ph = &eo->loads[i];

		if (!(ph->p_flags & PF_X))
			continue;
		o->load[o->n_load].vaddr = ph->p_vaddr;
		o->load[o->n_load].offset = ph->p_offset;
		o->load[o->n_load].filesz = ph->p_filesz;
		o->n_load++;
	}
}

/* A built table (or the reason there is none) becomes object o's status;
 * objects with the same build-id that waited for it get the same. */
static void finish_obj(struct gs_cfi *c, size_t idx, struct gs_cfi_table *t, int err, uint64_t ns,
		       const char *name)
{
	struct cfi_obj *o = &c->objs[idx];
	uint32_t n_pages = 0;
	uint64_t base = 0;

	if (!err && t->n_rows == 0)
		err = -ENOENT;
	if (!err && c->next_table >= GS_CFI_MAX_TABLES)
		err = -E2BIG;
	if (!err)
		err = load_rows(c, t, c->next_table, &n_pages, &base);
	c->st.build_ns += ns;
	if (!err) {
		o->table_id = c->next_table++;
		o->n_pages = n_pages;
		o->base = base;
		c->st.tables++;
		c->st.rows += t->n_rows;
		c->st.truncated += t->truncated;
	} else if (err == -ENOENT) {
		c->st.no_eh_frame++;
	} else if (err == -ENOSPC) { /* frame pointers there; named in the report */
		c->st.over_budget++;
		if (!c->over_first[0])
			snprintf(c->over_first, sizeof(c->over_first), "%s", name);
	} else {
		c->st.errors++;
	}
	o->status = err;
	if (c->verbose) {
		char shown[4 * 160]; /* the target names its libraries */

		gs_term_escape(name, shown, sizeof(shown));
		gs_log("cfi: %s: %s%u rows, %u FDEs, %u expr, %.1f ms%s\n", shown,
		       err ? strerror(-err) : "", t->n_rows, t->n_fdes, t->n_expr, ns / 1e6,
		       t->truncated ? " (bound reached: partial table)" : "");
	}
}

/* The cached CFI object of a mapped file, or NULL. */
static struct cfi_obj *obj_cached(struct gs_cfi *c, uint64_t dev, uint64_t ino)
{
	struct gs_elf_obj *eo = gs_elf_find(c->elf, dev, ino);
	uint64_t *v = eo ? gs_hmap_get(&c->by_elf, eo->id) : NULL;

	return v ? &c->objs[*v] : NULL;
}

/* Move object idx's queued job ahead of the others that no sample asked
 * for (a sample walked through it meanwhile). */
static void builder_promote(struct gs_cfi *c, size_t idx)
{
	struct builder *b = c->b;

	pthread_mutex_lock(&b->mu);
	for (struct build_job **at = &b->todo; *at; at = &(*at)->next) {
		struct build_job *j = *at;

		if (j->obj != idx)
			continue;
		if (!j->urgent) {
			*at = j->next;
			j->urgent = true;
			at = queue_slot(b, j);
			j->next = *at;
			*at = j;
		}
		break;
	}
	pthread_mutex_unlock(&b->mu);
}

/* Table for one mapped file: the file through proc/'s ELF cache, the
 * table by ELF object.  NULL when not cached and !build (lazy: the mapping
 * stays pending).  Async: the object comes back -EINPROGRESS and its table
 * is built by the thread, ahead of the rest if urgent (asked for by a
 * sample). */
static struct cfi_obj *obj_for_file(struct gs_cfi *c, uint32_t tgid, const struct gs_maps_line *l,
				    bool build, bool urgent)
{
	char open_path[128], alt[4200];
	uint64_t dev = makedev(l->dev_major, l->dev_minor);
	struct cfi_obj *o = obj_cached(c, dev, l->inode);
	struct gs_elf_obj *eo;
	struct gs_cfi_table t;
	int fd, err;
	uint64_t t0;

	if (o && o->status == -EINPROGRESS && urgent && c->b)
		builder_promote(c, (size_t)(o - c->objs));
	if (o || !build)
		return o;
	snprintf(open_path, sizeof(open_path), "/proc/%u/map_files/%llx-%llx", tgid,
		 (unsigned long long)l->start, (unsigned long long)l->end);
	snprintf(alt, sizeof(alt), "/proc/%u/root%s", tgid, l->path);
	const char *paths[] = { open_path, alt };
	if (gs_elf_get(c->elf, l->path, paths, 2, dev, l->inode, &eo))
		return NULL;
	uint64_t *same = gs_hmap_get(&c->by_elf, eo->id); /* same build-id, another file */
	if (same)
		return &c->objs[*same];
	if (!(o = obj_new(c, eo->id)))
		return NULL;
	copy_loads(eo, o);
	if (eo->fd < 0 || (fd = dup(eo->fd)) < 0) {
		o->status = eo->fd < 0 ? eo->err : -errno;
		c->st.errors++;
		return o;
	}
	size_t idx = (size_t)(o - c->objs);
	if (c->b) {
		if ((err = builder_queue(c, idx, fd, alt, urgent))) {
			close(fd);
			o->status = err;
			return o;
		}
		o->status = -EINPROGRESS;
		return o;
	}
	t0 = gs_mono_ns();
	err = gs_cfi_table_build(open_path, fd, &t);
	close(fd);
	finish_obj(c, idx, &t, err, gs_mono_ns() - t0, alt);
	gs_cfi_table_free(&t);
	return &c->objs[idx];
}

/* The executable PT_LOADs of the in-memory vDSO image (bounded by size). */
static void vdso_loads(const uint8_t *img, size_t size, struct cfi_obj *o)
{
	const Elf64_Ehdr *eh = (const void *)img;

	if (size < sizeof(*eh) || eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > size ||
	    eh->e_phnum > (size - eh->e_phoff) / sizeof(Elf64_Phdr))
		return;
	for (unsigned i = 0; i < eh->e_phnum && o->n_load < GS_CFI_MAX_LOADS; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, img + eh->e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		o->load[o->n_load].vaddr = ph.p_vaddr;
		o->load[o->n_load].offset = ph.p_offset;
		o->load[o->n_load].filesz = ph.p_filesz;
		o->n_load++;
	}
}

/* Our own vDSO's bytes and table (once). */
static int vdso_build(struct gs_cfi *c)
{
	struct cfi_vdso *v = &c->vdso;
	struct gs_proc_maps *snap;
	const struct gs_maps_line *l = NULL;
	struct gs_cfi_table t;
	struct cfi_obj *o;
	int fd, err;

	if (gs_proc_maps_read((uint32_t)getpid(), &snap))
		return -ENOENT;
	for (size_t i = 0; i < snap->n && !l; i++)
		if (snap->m[i].path && !strcmp(snap->m[i].path, "[vdso]"))
			l = &snap->m[i];
	err = !l ? -ENOENT : l->end - l->start > GS_VDSO_MAX ? -EFBIG : 0;
	if (!err) {
		v->size = l->end - l->start;
		err = (v->image = malloc(v->size)) ? 0 : -ENOMEM;
	}
	if (!err)
		memcpy(v->image, (const void *)(uintptr_t)l->start, v->size);
	gs_proc_maps_put(snap);
	if (err)
		return err;
	/* the builder reads files: the image through a memfd */
	if ((fd = memfd_create("gs-vdso", MFD_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, v->image, v->size) != (ssize_t)v->size) {
		close(fd);
		return -EIO;
	}
	err = gs_cfi_table_build("[vdso]", fd, &t);
	close(fd);
	if (err)
		return err;
	if (!(o = obj_new(c, UINT32_MAX))) { /* no ELF cache id is UINT32_MAX */
		gs_cfi_table_free(&t);
		return -ENOMEM;
	}
	v->obj = (size_t)(o - c->objs);
	vdso_loads(v->image, v->size, o);
	finish_obj(c, v->obj, &t, 0, 0, "[vdso]");
	gs_cfi_table_free(&t);
	return c->objs[v->obj].status ? c->objs[v->obj].status : 1;
}

/* The vDSO object for tgid's [vdso] mapping l, or NULL: only when its
 * bytes are our vDSO's (a remote read of at most GS_VDSO_MAX). */
static struct cfi_obj *obj_vdso(struct gs_cfi *c, uint32_t tgid, const struct gs_maps_line *l)
{
	struct cfi_vdso *v = &c->vdso;
	uint8_t buf[GS_VDSO_MAX];
	size_t got = 0;

	if (!v->state)
		v->state = vdso_build(c);
	if (v->state != 1 || l->end - l->start != v->size ||
	    gs_proc_mem_read(tgid, l->start, buf, v->size, &got) || got != v->size ||
	    memcmp(buf, v->image, v->size))
		return NULL;
	return &c->objs[v->obj];
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

int gs_cfi_bind(struct gs_cfi *c, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&c->slots, t, id);
}

static struct cfi_proc *proc_find(struct gs_cfi *c, uint32_t tgid)
{
	return gs_proc_slots_get(&c->slots, tgid, false);
}

static struct cfi_proc *proc_track(struct gs_cfi *c, uint32_t tgid)
{
	struct cfi_proc *p = gs_proc_slots_get(&c->slots, tgid, true);

	if (p && !p->tgid) /* new */
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

/* Publish tgid's executable mappings of snap (proc/'s); build tables now
 * (eager, or force) or only for mappings in want. */
static int publish(struct gs_cfi *c, uint32_t tgid, const struct gs_proc_maps *snap,
		   const uint64_t *want, size_t nwant, bool force)
{
	struct gs_cfi_proc *pe = c->scratch;
	struct cfi_proc *p;
	uint32_t pending = 0;

	memset(pe, 0, offsetof(struct gs_cfi_proc, m));
	for (size_t i = 0; i < snap->n; i++) {
		const struct gs_maps_line *l = &snap->m[i];
		struct gs_cfi_mapping *m;
		struct cfi_obj *o;

		if (!l->exec)
			continue;
		if (pe->n >= GS_CFI_MAX_MAPPINGS)
			break;
		m = &pe->m[pe->n++];
		memset(m, 0, sizeof(*m)); /* scratch reused across processes */
		m->start = l->start;
		m->end = l->end;
		if (!l->inode && (!l->path || !l->path[0] || !strncmp(l->path, "[anon", 5))) {
			m->table_id = GS_CFI_TABLE_ANON; /* JIT: scanned; known, so no miss */
			continue;
		}
		if (!l->inode && l->path && !strcmp(l->path, "[vdso]") &&
		    (o = obj_vdso(c, tgid, l))) {
			m->table_id = o->table_id;
			m->n_pages = o->n_pages;
			m->bias = mapping_bias(o, l->start, 0) + o->base;
			continue;
		}
		if (!l->inode || !l->path || l->path[0] != '/')
			continue; /* [vsyscall] and the like: frame pointers; known, so no miss */
		/* Lazy mode: an object gets its table when a sample first walks
		 * through it (BPF records the miss and wakes us up at once).
		 * With the builder thread nothing waits for a build, so every
		 * new object is queued at once: a library runs its constructors
		 * right after dlopen maps it, before any sample could ask, and
		 * the object a sample asked for goes first. */
		bool asked = wanted(l->start, want, nwant);
		o = obj_for_file(c, tgid, l, force || !c->lazy || asked || c->b, asked);
		pending += o && o->status == -EINPROGRESS;
		if (!o || o->status == -EINPROGRESS) {
			m->table_id = GS_CFI_TABLE_PENDING;
			m->bias = l->start - l->offset; /* fixed up when the table exists */
			continue;
		}
		if (o->status)
			continue;
		m->table_id = o->table_id;
		m->n_pages = o->n_pages;
		m->bias = mapping_bias(o, l->start, l->offset) + o->base;
	}
	qsort(pe->m, pe->n, sizeof(pe->m[0]), cmp_mapping);
	flush_tables(c); /* tables first: BPF may look a mapping's table up at once */
	pe->gen = ++c->next_gen ? c->next_gen : ++c->next_gen; /* never 0: see cfi.h */
	if (bpf_map_update_elem(c->procs_fd, &tgid, pe, BPF_ANY))
		return -errno;
	p = proc_track(c, tgid);
	if (p)
		p->pending = pending > 0;
	return 0;
}

/* Ask proc/ to re-read tgid's maps for why: our maps_changed publishes the
 * new snapshot (want: the mappings BPF asked tables for).  always: publish
 * the current snapshot also when proc/ read nothing new.  1 published, 0
 * not, <0 -errno (-EAGAIN: proc/ backs off). */
static int ask(struct gs_cfi *c, uint32_t tgid, unsigned why, const uint64_t *want, size_t nwant,
	       bool always)
{
	struct cfi_ask a = { .tgid = tgid, .want = want, .nwant = nwant }, *outer = c->ask;
	struct gs_proc *p;
	int rc;

	c->ask = &a; /* publishing may republish others: asks nest */
	rc = gs_proc_maps_reread(c->slots.t, tgid, why, 0);
	c->ask = outer;
	if (rc < 0 || a.done)
		return rc < 0 ? rc : a.rc < 0 ? a.rc : 1;
	if (!always)
		return 0;
	if (!(p = gs_proc_get(c->slots.t, tgid)) || !p->maps)
		return -ESRCH;
	rc = publish(c, tgid, p->maps, want, nwant, false);
	return rc < 0 ? rc : 1;
}

int gs_cfi_add_process(struct gs_cfi *c, uint32_t tgid)
{
	struct gs_proc *p;
	int rc;

	if (!proc_track(c, tgid))
		return -ENOMEM;
	p = gs_proc_get(c->slots.t, tgid);
	if (p && p->maps) /* read at attach */
		return publish(c, tgid, p->maps, NULL, 0, false);
	rc = ask(c, tgid, GS_MAPS_NOW, NULL, 0, false);
	return rc < 0 ? rc : 0;
}

/* Async: load what the thread finished, then republish the processes
 * that waited for it.  wait_all: first wait until the queue is empty. */
static int collect_built(struct gs_cfi *c, bool wait_all)
{
	struct build_job *j, *next;
	int n = 0;

	if (!c->b)
		return 0;
	for (j = builder_take(c, wait_all); j; j = next) {
		next = j->next;
		finish_obj(c, j->obj, &j->t, j->err, j->ns, j->name);
		if (c->verbose) {
			char shown[4 * 160];

			gs_term_escape(j->name, shown, sizeof(shown));
			gs_log("cfi: %s: loaded %.1f ms after it was queued\n", shown,
			       (gs_mono_ns() - j->queued_ns) / 1e6);
		}
		gs_cfi_table_free(&j->t);
		free(j);
		c->collected++;
		n++;
	}
	for (size_t i = 0; n && i < c->slots.n; i++) {
		struct cfi_proc *p = c->slots.all[i];

		/* new code mapped meanwhile is published with them */
		if (p->pending && ask(c, p->tgid, GS_MAPS_CHECK, NULL, 0, true) < 0)
			p->pending = false; /* gone */
	}
	return n;
}

int gs_cfi_set_async(struct gs_cfi *c)
{
	return c->b ? 0 : builder_start(c);
}

void gs_cfi_progress(struct gs_cfi *c, struct gs_cfi_progress *p)
{
	memset(p, 0, sizeof(*p));
	if (!c->b)
		return;
	pthread_mutex_lock(&c->b->mu);
	p->queued = c->b->queued_total;
	p->pending = c->b->queued_total - c->collected;
	if (c->b->busy) {
		snprintf(p->current, sizeof(p->current), "%s", c->b->current);
		p->rows = atomic_load(&c->b->rows);
	} else if (c->b->done) {
		/* all built: the wait is for tables not yet loaded into BPF maps */
		snprintf(p->current, sizeof(p->current), "%s", c->b->done->name);
		p->loading = true;
	}
	pthread_mutex_unlock(&c->b->mu);
}

bool gs_cfi_busy(struct gs_cfi *c)
{
	bool busy;

	if (!c->b)
		return false;
	pthread_mutex_lock(&c->b->mu);
	busy = c->b->queued_total != c->collected;
	pthread_mutex_unlock(&c->b->mu);
	return busy;
}

int gs_cfi_fork(struct gs_cfi *c, uint32_t parent, uint32_t child)
{
	struct cfi_proc *p;

	if (bpf_map_lookup_elem(c->procs_fd, &parent, c->scratch))
		return gs_cfi_add_process(c, child);
	if (bpf_map_update_elem(c->procs_fd, &child, c->scratch, BPF_ANY))
		return -errno;
	p = proc_track(c, child);
	return p ? 0 : -ENOMEM;
}

void gs_cfi_remove_process(struct gs_cfi *c, uint32_t tgid)
{
	bpf_map_delete_elem(c->procs_fd, &tgid); /* its misses are dropped by refresh */
	gs_proc_slots_drop(&c->slots, tgid);
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

	collect_built(c, false);
	/* Collect first, then delete: deleting while iterating restarts the walk. */
	while (n < 4096 && !bpf_map_get_next_key(c->miss_fd, n ? &prev : NULL, &next)) {
		keys[n++] = next;
		prev = next;
	}
	qsort(keys, n, sizeof(keys[0]), cmp_miss);
	for (size_t i = 0; i < n;) {
		uint32_t tgid = keys[i].tgid;
		struct cfi_proc *p = proc_find(c, tgid);
		bool reread = false;
		size_t ns = 0;

		for (; i < n && keys[i].tgid == tgid; i++) {
			if (keys[i].start) {
				starts[ns++] = keys[i].start;
				bpf_map_delete_elem(c->miss_fd, &keys[i]);
			} else {
				reread = true;
			}
		}
		const struct gs_cfi_miss_key unknown = { .tgid = tgid };
		if (!p) {
			bpf_map_delete_elem(c->miss_fd, &unknown); /* removed meanwhile */
			continue;
		}
		/* An unknown mapping: proc/ re-reads the maps, backing off while
		 * re-reads find nothing new (JIT code outside the snapshot would
		 * otherwise have a big process's maps parsed every tick).  Its
		 * key stays until then: BPF wakes us once per key, so a process
		 * in back-off cannot wake us at every sample.  Tables asked
		 * for: published now, with new code if the ranges changed. */
		int rc = ns ? ask(c, tgid, GS_MAPS_CHECK, starts, ns, true)
			    : ask(c, tgid, GS_MAPS_CODE_MISS, NULL, 0, false);

		if (rc == -EAGAIN)
			continue;
		if (reread)
			bpf_map_delete_elem(c->miss_fd, &unknown);
		if (rc > 0) {
			c->st.refreshes++;
			done++;
		}
	}
	return done;
}

/* ---- the process table's handler ------------------------------------------ */

static int cfi_h_attach(void *ctx, struct gs_proc *p, struct gs_elf_obj *o,
			const struct gs_maps_line *l)
{
	struct gs_cfi *c = ctx;

	if (!p->maps) /* proc/ could not read them: gone */
		return -ESRCH;
	if (!proc_track(c, p->tgid))
		return -ENOMEM;
	return publish(c, p->tgid, p->maps, NULL, 0, false);
}

static int cfi_h_fork(void *ctx, struct gs_proc *parent, struct gs_proc *child)
{
	return gs_cfi_fork(ctx, child->ppid, child->tgid);
}

static void cfi_h_detach(void *ctx, struct gs_proc *p, bool exec)
{
	if (!exec) /* an exec's attach replaces the process's mappings */
		gs_cfi_remove_process(ctx, p->tgid);
}

/* proc/ re-read the maps of p: publish them (a process we follow). */
static void cfi_h_maps_changed(void *ctx, struct gs_proc *p, const struct gs_proc_maps_change *ch)
{
	struct gs_cfi *c = ctx;
	struct cfi_ask *a = c->ask && c->ask->tgid == p->tgid ? c->ask : NULL;
	bool all = ch->why & GS_MAPS_BUILD_ALL;
	int rc;

	if (!proc_find(c, p->tgid)) /* not attached (yet): attach publishes */
		return;
	rc = publish(c, p->tgid, p->maps, a ? a->want : NULL, a ? a->nwant : 0, all);
	if (a) {
		a->done = true;
		a->rc = rc;
	}
	if (!rc && all && c->b) /* wanted whole now: wait for the builds */
		collect_built(c, true);
}

static void cfi_h_tick(void *ctx)
{
	gs_cfi_refresh(ctx);
}

/* Objects left without a table by the budget: their stacks use frame
 * pointers only (a loss the profile names). */
static void cfi_h_report(void *ctx, struct gs_profile *prof)
{
	struct gs_cfi *c = ctx;

	if (c->st.over_budget)
		gs_profile_add_note(
		    prof,
		    "%u object(s) without unwind tables: over the budget of %llu MiB "
		    "of BPF map memory for them%s (first: %s); frame pointers there",
		    c->st.over_budget, (unsigned long long)(c->budget >> 20),
		    c->over_shared ? " or the run's shared memory budget" : "", c->over_first);
}

void gs_cfi_proc_handler(struct gs_cfi *cfi, struct gs_proc_handler *h)
{
	*h = (struct gs_proc_handler){
		.name = "cfi",
		.ctx = cfi,
		.attach = cfi_h_attach,
		.fork = cfi_h_fork,
		.detach = cfi_h_detach,
		.maps_changed = cfi_h_maps_changed,
		.tick = cfi_h_tick,
		.report = cfi_h_report,
	};
}
