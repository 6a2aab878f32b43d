// SPDX-License-Identifier: MIT
/* GPU PC symbolization: see cuda.h. */
#include "gpu/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "gpusample/records.h"
#include "gpusample/records_codec.h"
#include "gpu/cuda_internal.h"
#include "native/native.h"
#include "proc/proc.h"
#include "util/membudget.h"

struct cubin {
	uint64_t crc;
	const void *bytes;
	bool owned;
	size_t len;
	char *origin;
	uint32_t pid;
	uint32_t mapping; /* 0 until the first location */
	int8_t line_info; /* -1 not yet looked at, 0 no line sections, 1 has them */
};

/* A location whose source line is looked up later (gs_cuda_resolve_lines). */
struct pending_line {
	uint32_t loc;
	uint64_t crc, pc_offset;
	gs_str mangled;
};

struct kfunc {
	gs_str name, system_name;
};

struct stall_ent {
	uint32_t index;
	uint8_t kind;
	gs_str reason;
};

/* One context's stall table: the last one its agent sent. */
struct stall_table {
	uint32_t context;
	int32_t device;
	struct stall_ent *ents;
	size_t n;
};

/* One device of a process: facts and run counters for its comment. */
struct device {
	uint64_t seq; /* order of first sight across processes: the comments' */
	uint32_t pid;
	int32_t device;
	bool have_info;
	char name[64], mode[32];
	uint32_t sm_clock_khz, sm_count, period_exp;
	uint64_t total, dropped, non_user, drains;
};

/* What one process made here, in its slot of the process table: use
 * against the caps (gpu.h GS_CUDA_*), its contexts' stall tables and its
 * devices (each in order of arrival). */
struct cuda_proc {
	uint32_t kernels, locations;
	uint64_t name_bytes;
	struct stall_table *tables;
	size_t n_tables, cap_tables;
	struct device *devices;
	size_t n_devices, cap_devices;
};

struct gs_cuda {
	struct gs_profile *p;

	/* libcupti */
	bool cupti_tried;
	void *cupti;
	gs_cupti_sass_fn sass;
	gs_cupti_crc_fn crc;
	char *cupti_info;
	char *cupti_path;  /* --cupti, checked */
	char skipped[256]; /* why the first untrusted candidate was not loaded */
	uint64_t sass_failures, sass_no_line, sass_lines;
	uint64_t stall_tables_refused; /* past GS_CUDA_STALL_CONTEXTS_PER_PID */
	uint64_t devices_refused;      /* records of devices past GS_CUDA_DEVICES_PER_PID */
	/* the wall around libcupti (gs_cuda_set_cupti_limits) and what it cut */
	uint32_t wall_ms;
	uint64_t wall_mem;
	uint64_t walled; /* locations left without a line by the wall */
	char walled_why[96];

	struct cubin *cubins;
	size_t n_cubins, cap_cubins;
	struct gs_kmap cubin_by_crc;   /* (crc, 0, 0) -> cubins index */
	struct gs_kmap mapping_by_crc; /* (crc, 1, 0) -> mapping id (cubin-less CRCs too) */
	struct gs_kmap announced;      /* (crc, 0, 0): the agent announced it, kept or not */
	struct gs_kmap unannounced;    /* (crc, 0, 0): PC records name it, never announced */
	uint64_t unannounced_kernels;

	struct kfunc *kfuncs;
	size_t n_kfuncs, cap_kfuncs;
	struct gs_kmap kfunc_by_key; /* (crc, mangled gs_str, 0) -> kfuncs index */
	struct gs_kmap loc_cache;    /* (crc, mangled gs_str, pcOffset) -> location id */

	/* Per process (struct cuda_proc, in the process table's slots once
	 * bound by gs_cuda_bind, else in a table of its own): stall tables,
	 * devices and use against the caps on what PC records can make
	 * (gpu.h); the use in total, and what went past them to the [other
	 * kernels] location. */
	struct gs_proc_slots slots;
	uint64_t n_locations, name_bytes;
	uint32_t other_loc;
	struct gs_cuda_cap_losses lost;
	struct gs_kmap unknown_stalls; /* (index, 0, 0) -> gs_str "stall_<index>" */

	bool defer_lines;
	struct pending_line *pending;
	size_t n_pending, cap_pending;

	uint64_t next_device_seq;
	uint64_t mem_charged; /* to the run's memory budget (util/membudget.h) */
};

struct gs_cuda *gs_cuda_new(struct gs_profile *p)
{
	struct gs_cuda *c = calloc(1, sizeof(*c));

	if (!c || gs_proc_slots_init(&c->slots, "cuda", sizeof(struct cuda_proc))) {
		free(c);
		return NULL;
	}
	c->p = p;
	c->wall_ms = GS_CUPTI_WALL_MS;
	c->wall_mem = GS_CUPTI_WALL_MEM;
	return c;
}

int gs_cuda_bind(struct gs_cuda *c, struct gs_proc_table *t, int id)
{
	return gs_proc_slots_bind(&c->slots, t, id);
}

void gs_cuda_free(struct gs_cuda *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_cubins; i++) {
		if (c->cubins[i].owned)
			free((void *)c->cubins[i].bytes);
		free(c->cubins[i].origin);
	}
	free(c->cubins);
	for (size_t i = 0; i < c->slots.n; i++) {
		struct cuda_proc *u = c->slots.all[i];

		for (size_t k = 0; k < u->n_tables; k++)
			free(u->tables[k].ents);
		free(u->tables);
		free(u->devices);
	}
	free(c->kfuncs);
	free(c->pending);
	gs_proc_slots_fini(&c->slots);
	gs_kmap_free(&c->unknown_stalls);
	gs_kmap_free(&c->cubin_by_crc);
	gs_kmap_free(&c->mapping_by_crc);
	gs_kmap_free(&c->announced);
	gs_kmap_free(&c->unannounced);
	gs_kmap_free(&c->kfunc_by_key);
	gs_kmap_free(&c->loc_cache);
	free(c->cupti_path);
	free(c->cupti_info);
	gs_mem_release(GS_MEM_GPU_STORES, c->mem_charged);
	/* libcupti stays loaded: it keeps internal state and threads that are
	 * not safe to unmap, and a second gs_cuda would load it again anyway. */
	free(c);
}

/* ---- libcupti ------------------------------------------------------------ */

/* A directory or file root could be handed by someone else: owned by
 * another user, or writable by group or others (a sticky /tmp included). */
static int untrusted_node(const char *path, bool dir, char *why, size_t len)
{
	struct stat st;

	if (lstat(path, &st))
		return snprintf(why, len, "%s: %s", path, strerror(errno)), -errno;
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return snprintf(why, len, "%s is not a %s", path,
				dir ? "directory" : "regular file"),
		       -EPERM;
	if (st.st_uid != 0)
		return snprintf(why, len, "%s is owned by uid %u, not root", path, st.st_uid),
		       -EPERM;
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return snprintf(why, len, "%s is writable by group or others (mode %03o)", path,
				st.st_mode & 0777),
		       -EPERM;
	return 0;
}

int gs_cuda_trusted_lib(const char *path, char *real, size_t real_len, char *why, size_t len)
{
	char buf[PATH_MAX];

	if (!path || !*path)
		return snprintf(why, len, "empty path"), -EINVAL;
	if (!realpath(path, buf))
		return snprintf(why, len, "%s: %s", path, strerror(errno)), -errno;
	int rc = untrusted_node(buf, false, why, len);
	/* Every directory from the file up to /: symlinks are resolved, so
	 * none of them can be swapped by a user who cannot write there. */
	for (char *slash = strrchr(buf, '/'); !rc && slash; slash = strrchr(buf, '/')) {
		*slash = 0;
		rc = untrusted_node(buf[0] ? buf : "/", true, why, len);
		if (!buf[0])
			break;
	}
	if (rc)
		return rc;
	if (!realpath(path, buf) || strlen(buf) >= real_len)
		return snprintf(why, len, "%s: path too long", path), -ENAMETOOLONG;
	snprintf(real, real_len, "%s", buf);
	return 0;
}

int gs_cuda_set_cupti(struct gs_cuda *c, const char *path, char *why, size_t len)
{
	char real[PATH_MAX];

	if (path && !strcmp(path, "none")) {
		c->cupti_tried = true;
		free(c->cupti_info);
		c->cupti_info = strdup("libcupti disabled by --cupti none: GPU source lines "
				       "unavailable");
		return 0;
	}
	int rc = gs_cuda_trusted_lib(path, real, sizeof(real), why, len);
	if (rc)
		return rc;
	free(c->cupti_path);
	c->cupti_path = strdup(real);
	return c->cupti_path ? 0 : -ENOMEM;
}

/* dlopen one trusted candidate; keep it only if it has both offline entry
 * points.  Untrusted files are skipped before dlopen ever sees them: a
 * library's constructor runs at load, as root. */
static bool try_cupti(struct gs_cuda *c, const char *path)
{
	char real[PATH_MAX], why[PATH_MAX + 64];

	if (gs_cuda_trusted_lib(path, real, sizeof(real), why, sizeof(why))) {
		if (!c->skipped[0])
			snprintf(c->skipped, sizeof(c->skipped), "%.200s", why);
		return false;
	}
	void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
	void *sass = dlsym(h, "cuptiGetSassToSourceCorrelation");
	void *crc = dlsym(h, "cuptiGetCubinCrc");
	if (!sass || !crc) {
		dlclose(h);
		return false;
	}
	c->cupti = h;
	c->sass = (gs_cupti_sass_fn)sass;
	c->crc = (gs_cupti_crc_fn)crc;
	c->cupti_info = strdup(real);
	return true;
}

static bool try_glob(struct gs_cuda *c, const char *pattern)
{
	glob_t g;
	bool ok = false;
	if (glob(pattern, 0, NULL, &g) != 0)
		return false;
	/* highest version last in sort order: try from the end */
	for (size_t i = g.gl_pathc; i-- > 0 && !ok;)
		ok = try_cupti(c, g.gl_pathv[i]);
	globfree(&g);
	return ok;
}

/* Only root-owned system locations, in this order: the toolkit, versioned
 * toolkits, the distribution's package, then PyTorch wheels installed
 * system-wide (nvidia-cuda-cupti-cu12: nvidia/cuda_cupti/lib; CUDA 13
 * wheels: nvidia/cu13/lib).  Never the target's maps or /proc/PID/root,
 * never the environment (a sudo caller's CUDA_HOME or VIRTUAL_ENV). */
static const char *const cupti_search[] = {
	"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*",
	"/usr/local/cuda/lib64/libcupti.so*",
	"/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so*",
	"/usr/local/cuda/lib/libcupti.so*",
	"/usr/local/cuda-*/extras/CUPTI/lib64/libcupti.so*",
	"/usr/local/cuda-*/lib64/libcupti.so*",
	"/usr/local/cuda-*/lib/libcupti.so*",
	"/usr/lib/x86_64-linux-gnu/libcupti.so*",
	"/usr/lib64/libcupti.so*",
	"/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib/libcupti.so*",
	"/usr/local/lib/python3*/site-packages/nvidia/cu13/lib/libcupti.so*",
	"/usr/lib/python3/dist-packages/nvidia/cuda_cupti/lib/libcupti.so*",
	"/usr/local/lib/python3*/dist-packages/nvidia/cuda_cupti/lib/libcupti.so*",
	"/usr/local/lib/python3*/site-packages/nvidia/cuda_cupti/lib/libcupti.so*",
	"/opt/conda/lib/python3*/site-packages/nvidia/cuda_cupti/lib/libcupti.so*",
};

int gs_cuda_load_cupti(struct gs_cuda *c)
{
	if (c->cupti_tried)
		return c->cupti ? 0 : -ENOENT;
	c->cupti_tried = true;

	if (c->cupti_path) {
		if (try_cupti(c, c->cupti_path))
			return 0;
		c->cupti_info = strdup("the libcupti given with --cupti has no offline SASS "
				       "correlation (cuptiGetSassToSourceCorrelation): GPU source "
				       "lines unavailable");
		return -ENOENT;
	}
	for (size_t i = 0; i < sizeof(cupti_search) / sizeof(cupti_search[0]); i++)
		if (try_glob(c, cupti_search[i]))
			return 0;
	char msg[512];
	snprintf(msg, sizeof(msg),
		 "libcupti not found in the CUDA toolkit (/usr/local/cuda): GPU "
		 "source lines unavailable; install the toolkit's CUPTI or give --cupti PATH (a "
		 "root-owned file, not group/other-writable)%s%s",
		 c->skipped[0] ? "; not loaded: " : "", c->skipped);
	c->cupti_info = strdup(msg);
	return -ENOENT;
}

const char *gs_cuda_cupti_info(const struct gs_cuda *c)
{
	return c->cupti_info;
}

int gs_cuda_cubin_crc(struct gs_cuda *c, const void *cubin, size_t len, uint64_t *crc)
{
	(void)c;
	if (!cubin || !len)
		return -EINVAL;
	*crc = gs_cubin_hash(cubin, len);
	return 0;
}

/* ---- cubins -------------------------------------------------------------- */

static struct cubin *find_cubin(const struct gs_cuda *c, uint64_t crc)
{
	uint32_t i;
	return gs_kmap_get(&c->cubin_by_crc, crc, 0, 0, &i) ? &c->cubins[i] : NULL;
}

bool gs_cuda_has_cubin(const struct gs_cuda *c, uint64_t crc)
{
	return find_cubin(c, crc) != NULL;
}

static int add_cubin(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len, uint32_t pid,
		     const char *origin, uint64_t *crc_out, bool copy)
{
	if (!cubin || !len)
		return -EINVAL;
	if (!crc) {
		int err = gs_cuda_cubin_crc(c, cubin, len, &crc);
		if (err)
			return err;
	}
	if (crc_out)
		*crc_out = crc;
	if (find_cubin(c, crc))
		return 0;
	if (gs_grow((void **)&c->cubins, &c->cap_cubins, c->n_cubins + 1, sizeof(struct cubin)))
		return -ENOMEM;
	struct cubin *cb = &c->cubins[c->n_cubins];
	memset(cb, 0, sizeof(*cb));
	void *copy_of = copy ? malloc(len) : NULL;
	cb->origin = origin && *origin ? strdup(origin) : NULL;
	if ((copy && !copy_of) || (origin && *origin && !cb->origin)) {
		free(copy_of);
		free(cb->origin);
		return -ENOMEM;
	}
	if (copy)
		memcpy(copy_of, cubin, len);
	cb->bytes = copy ? copy_of : cubin;
	cb->owned = copy;
	cb->len = len;
	cb->crc = crc;
	cb->pid = pid;
	cb->line_info = -1;
	if (gs_kmap_put(&c->cubin_by_crc, crc, 0, 0, (uint32_t)c->n_cubins)) {
		free(copy_of);
		free(cb->origin);
		return -ENOMEM;
	}
	c->n_cubins++;
	return 0;
}

int gs_cuda_add_cubin(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len, uint32_t pid,
		      const char *origin, uint64_t *crc_out)
{
	return add_cubin(c, crc, cubin, len, pid, origin, crc_out, true);
}

int gs_cuda_add_cubin_borrowed(struct gs_cuda *c, uint64_t crc, const void *cubin, size_t len,
			       uint32_t pid, const char *origin, uint64_t *crc_out)
{
	return add_cubin(c, crc, cubin, len, pid, origin, crc_out, false);
}

int gs_cuda_cubin_functions(const void *cubin, size_t len,
			    int (*fn)(void *ctx, const char *name, uint64_t size), void *ctx)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	Elf *e = elf_memory((char *)cubin, len);
	if (!e)
		return -EINVAL;
	int ret = -ENOENT;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		ret = 0;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n && !ret; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, s.st_name);
			if (name && *name)
				ret = fn(ctx, name, s.st_size);
		}
		break;
	}
	elf_end(e);
	return ret;
}

/* ---- source lines -------------------------------------------------------- */

int gs_cuda_source_line(struct gs_cuda *c, uint64_t crc, const char *function, uint64_t pc_offset,
			char *file, size_t file_len, uint32_t *line)
{
	*line = 0;
	if (file_len)
		file[0] = 0;
	struct cubin *cb = find_cubin(c, crc);
	if (!cb || !function || gs_cuda_load_cupti(c))
		return -ENOENT;
	struct gs_cupti_sass_params prm = {
		.size = sizeof(prm),
		.cubin = cb->bytes,
		.functionName = function,
		.cubinSize = cb->len,
		.pcOffset = pc_offset,
	};
	int rc = c->sass(&prm);
	/* No line info shows up as line 0 / NULL file, with CUPTI_SUCCESS or not. */
	if (prm.lineNumber && prm.fileName) {
		const char *f = prm.fileName;
		if (f[0] != '/' && prm.dirName && prm.dirName[0])
			snprintf(file, file_len, "%s/%s", prm.dirName, f);
		else
			snprintf(file, file_len, "%s", f);
		*line = prm.lineNumber;
	}
	free(prm.fileName);
	free(prm.dirName);
	if (rc != 0 && !*line)
		return -EINVAL;
	return 0;
}

/* Whether a cubin has line tables at all (nvcc -lineinfo or -G): checked
 * once per cubin from its section names, so cubins without them never cost
 * a cuptiGetSassToSourceCorrelation call per PC. */
static bool cubin_line_info(struct cubin *cb)
{
	if (cb->line_info >= 0)
		return cb->line_info;
	cb->line_info = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	Elf *e = elf_memory((char *)cb->bytes, cb->len);
	size_t shstrndx;
	if (e && !elf_getshdrstrndx(e, &shstrndx)) {
		for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
			GElf_Shdr sh;
			const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name)
							       : NULL;
			if (n && (!strcmp(n, ".debug_line") || !strcmp(n, ".nv_debug_line_sass"))) {
				cb->line_info = 1;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	return cb->line_info;
}

void gs_cuda_defer_lines(struct gs_cuda *c, bool defer)
{
	c->defer_lines = defer;
}

/* ---- locations ----------------------------------------------------------- */

static uint32_t cubin_mapping(struct gs_cuda *c, uint64_t crc)
{
	uint32_t id;
	if (gs_kmap_get(&c->mapping_by_crc, crc, 1, 0, &id))
		return id;
	struct cubin *cb = find_cubin(c, crc);
	char buf[64], hex[17];
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)crc);
	snprintf(buf, sizeof(buf), "cubin:%llx", (unsigned long long)crc);
	struct gs_mapping m = {
		.start = 0,
		.limit = cb && cb->len ? cb->len : 1,
		.offset = 0,
		.file = gs_profile_intern(c->p, cb && cb->origin ? cb->origin : buf),
		.build_id = gs_profile_intern(c->p, hex),
		.has_functions = true,
	};
	if (m.file == (gs_str)-1 || m.build_id == (gs_str)-1)
		return 0;
	id = gs_profile_add_mapping(c->p, &m);
	if (!id || gs_kmap_put(&c->mapping_by_crc, crc, 1, 0, id))
		return 0;
	if (cb)
		cb->mapping = id;
	return id;
}

int gs_cuda_cubin_announced(struct gs_cuda *c, uint64_t crc)
{
	return gs_kmap_put(&c->announced, crc, 0, 0, 1);
}

bool gs_cuda_cubin_unannounced(const struct gs_cuda *c, uint64_t crc)
{
	uint32_t v;

	return !find_cubin(c, crc) && !gs_kmap_get(&c->announced, crc, 0, 0, &v);
}

void gs_cuda_unannounced(const struct gs_cuda *c, uint64_t *kernels, uint64_t *cubins)
{
	*kernels = c->unannounced_kernels;
	*cubins = c->unannounced.n;
}

static struct kfunc *kernel_function(struct gs_cuda *c, uint64_t crc, gs_str mangled,
				     const char *function)
{
	uint32_t i;
	if (gs_kmap_get(&c->kfunc_by_key, crc, mangled, 0, &i))
		return &c->kfuncs[i];
	if (gs_grow((void **)&c->kfuncs, &c->cap_kfuncs, c->n_kfuncs + 1, sizeof(struct kfunc)))
		return NULL;
	struct kfunc *k = &c->kfuncs[c->n_kfuncs];
	if (gs_cuda_cubin_unannounced(c, crc)) {
		c->unannounced_kernels++;
		if (gs_kmap_put(&c->unannounced, crc, 0, 0, 1))
			return NULL;
	}
	char *dem = gs_demangle(function);
	if (dem && strcmp(dem, function) != 0) {
		k->name = gs_profile_intern(c->p, dem);
		k->system_name = mangled;
	} else {
		k->name = mangled;
		k->system_name = 0;
	}
	free(dem);
	if (k->name == (gs_str)-1)
		return NULL;
	if (gs_kmap_put(&c->kfunc_by_key, crc, mangled, 0, (uint32_t)c->n_kfuncs))
		return NULL;
	return &c->kfuncs[c->n_kfuncs++];
}

/* The one location PC records past the caps fold into: function
 * "[other kernels]" in a mapping of that name. */
static uint32_t other_location(struct gs_cuda *c)
{
	if (c->other_loc)
		return c->other_loc;
	gs_str name = gs_profile_intern(c->p, "[other kernels]");
	if (name == (gs_str)-1)
		return 0;
	struct gs_mapping m = { .start = 0, .limit = 1, .file = name, .has_functions = true };
	uint32_t mapping = gs_profile_add_mapping(c->p, &m);
	struct gs_function f = { .name = name };
	uint32_t fid = mapping ? gs_profile_add_function(c->p, &f) : 0;
	struct gs_line l = { .function = fid };
	c->other_loc = fid ? gs_profile_add_location(c->p, mapping, 0, GS_FRAME_GPU_PC, &l, 1) : 0;
	return c->other_loc;
}

void gs_cuda_cap_losses(const struct gs_cuda *c, struct gs_cuda_cap_losses *l)
{
	*l = c->lost;
}

uint32_t gs_cuda_location(struct gs_cuda *c, uint64_t crc, const char *function, uint64_t pc_offset)
{
	return gs_cuda_location_pid(c, 0, crc, function, pc_offset);
}

uint32_t gs_cuda_location_pid(struct gs_cuda *c, uint32_t pid, uint64_t crc, const char *function,
			      uint64_t pc_offset)
{
	if (!function || !*function)
		function = "[unknown kernel]";
	/* Looked up before anything is interned: a name past the caps must
	 * cost no memory (PC records can carry a new name each). */
	int64_t known = gs_profile_find_str(c->p, function);
	uint32_t id, ki;
	if (known > 0 && gs_kmap_get(&c->loc_cache, crc, (uint64_t)known, pc_offset, &id))
		return id;
	bool new_kernel = known <= 0 ||
			  !gs_kmap_get(&c->kfunc_by_key, crc, (uint64_t)known, 0, &ki);
	struct cuda_proc *u = gs_proc_slots_get(&c->slots, pid, true);
	if (!u)
		return 0;
	size_t len = strlen(function);
	if (new_kernel &&
	    (u->kernels >= GS_CUDA_KERNELS_PER_PID || c->n_kfuncs >= GS_CUDA_KERNELS_TOTAL ||
	     u->name_bytes + len > GS_CUDA_NAME_BYTES_PER_PID ||
	     c->name_bytes + len > GS_CUDA_NAME_BYTES_TOTAL)) {
		c->lost.kernels++;
		return other_location(c);
	}
	if (u->locations >= GS_CUDA_LOCATIONS_PER_PID ||
	    c->n_locations >= GS_CUDA_LOCATIONS_TOTAL) {
		c->lost.locations++;
		return other_location(c);
	}
	/* the run's shared budget: a location, and a kernel's two names */
	uint64_t cost = GS_CUDA_LOCATION_BYTES + (new_kernel ? 2 * len + GS_CUDA_KERNEL_BYTES : 0);
	if (gs_mem_charge(GS_MEM_GPU_STORES, cost)) {
		if (new_kernel)
			c->lost.kernels++;
		else
			c->lost.locations++;
		return other_location(c);
	}
	c->mem_charged += cost;
	gs_str mangled = gs_profile_intern(c->p, function);
	if (mangled == (gs_str)-1)
		return 0;

	uint32_t mapping = cubin_mapping(c, crc);
	size_t had = c->n_kfuncs;
	struct kfunc *k = kernel_function(c, crc, mangled, function);
	if (!mapping || !k)
		return 0;
	if (c->n_kfuncs > had) {
		/* the mangled name and the demangled one */
		size_t bytes = len + 1 +
			       (k->system_name ? strlen(gs_profile_str(c->p, k->name)) + 1 : 0);
		u->kernels++;
		u->name_bytes += bytes;
		c->name_bytes += bytes;
	}
	u->locations++;
	c->n_locations++;

	struct gs_function f = { .name = k->name, .system_name = k->system_name };
	uint32_t fid = gs_profile_add_function(c->p, &f);
	if (!fid)
		return 0;
	struct gs_line l = { .function = fid, .line = 0 };
	id = gs_profile_add_location(c->p, mapping, pc_offset, GS_FRAME_GPU_PC, &l, 1);
	if (!id || gs_kmap_put(&c->loc_cache, crc, mangled, pc_offset, id))
		return 0;
	struct cubin *cb = find_cubin(c, crc);
	if (!cb)
		return id;
	if (!cubin_line_info(cb)) {
		c->sass_no_line++;
		return id;
	}
	if (gs_grow((void **)&c->pending, &c->cap_pending, c->n_pending + 1, sizeof(*c->pending)))
		return id; /* no line for this one, the location stands */
	c->pending[c->n_pending++] = (struct pending_line){ id, crc, pc_offset, mangled };
	if (!c->defer_lines)
		gs_cuda_resolve_lines(c);
	return id;
}

/* One location's source line (rc, file, line: gs_cuda_source_line's): its
 * Line gets a function with the .cu file (pprof -lines prints kernel
 * file.cu:N) and the line. */
static int apply_line(struct gs_cuda *c, const struct pending_line *pl, int rc, const char *file,
		      uint32_t line)
{
	const char *function = gs_profile_str(c->p, pl->mangled);

	if (rc == -EINVAL)
		c->sass_failures++;
	else if (!rc && !line)
		c->sass_no_line++;
	if (rc || !line)
		return 0;
	c->sass_lines++;
	struct kfunc *k = kernel_function(c, pl->crc, pl->mangled, function);
	if (!k)
		return -ENOMEM;
	struct gs_function f = { .name = k->name,
				 .system_name = k->system_name,
				 .file = gs_profile_intern(c->p, file) };
	if (f.file == (gs_str)-1)
		return -ENOMEM;
	uint32_t fid = gs_profile_add_function(c->p, &f);
	if (!fid)
		return -ENOMEM;
	struct gs_location *loc = &c->p->locations[pl->loc - 1];
	c->p->lines[loc->first_line] = (struct gs_line){ .function = fid, .line = line };
	c->p->mappings[loc->mapping - 1].has_filenames = true;
	c->p->mappings[loc->mapping - 1].has_lines = true;
	return 0;
}

/* ---- libcupti behind a wall ----------------------------------------------
 * The cubins come from the target (the agent channel): a mutated one made
 * libcupti loop allocating (6.4 GB in 37 s) in root's gpusample, deaf to
 * SIGINT and SIGTERM, and no profile was written (issue 24).  So every
 * cuptiGetSassToSourceCorrelation runs in a child process under
 * RLIMIT_AS (its address space now plus wall_mem) and RLIMIT_CPU, killed
 * when the batch passes wall_ms; the results come back over a pipe, one
 * record per location.  Locations without a result keep their kernel name
 * without a line, counted, and the profile says why. */

struct wall_rec {
	uint32_t idx, line;
	int32_t rc;
	uint32_t file_len;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool write_all(int fd, const void *b, size_t n)
{
	for (const char *p = b; n;) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* n bytes by deadline (CLOCK_MONOTONIC ms): 0, -ETIMEDOUT or -EPIPE (the
 * child ended). */
static int read_by(int fd, void *b, size_t n, uint64_t deadline)
{
	for (char *p = b; n;) {
		uint64_t now = mono_ms();
		struct pollfd pfd = { fd, POLLIN, 0 };

		if (now >= deadline)
			return -ETIMEDOUT;
		int k = poll(&pfd, 1, (int)(deadline - now < 1000 ? deadline - now : 1000));
		if (k <= 0)
			continue; /* a signal to gpusample, or a second passed */
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void wall_child(struct gs_cuda *c, int wfd)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	struct rlimit as = { pages * (uint64_t)sysconf(_SC_PAGESIZE) + c->wall_mem, 0 };
	struct rlimit cpu = { c->wall_ms / 1000 + 1, c->wall_ms / 1000 + 2 };
	as.rlim_max = as.rlim_cur;
	if (setrlimit(RLIMIT_AS, &as) || setrlimit(RLIMIT_CPU, &cpu))
		_exit(2);
	/* The parent's handlers are not the child's: a libcupti that aborts or
	 * faults here must just die (the parent counts it), not run the
	 * profile writer's SIGTERM path or a crash reporter in this copy. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	for (size_t i = 0; i < c->n_pending; i++) {
		const struct pending_line *pl = &c->pending[i];
		char file[PATH_MAX];
		struct wall_rec r = { .idx = (uint32_t)i };

		r.rc = gs_cuda_source_line(c, pl->crc, gs_profile_str(c->p, pl->mangled),
					   pl->pc_offset, file, sizeof(file), &r.line);
		r.file_len = (uint32_t)strnlen(file, sizeof(file) - 1);
		if (!write_all(wfd, &r, sizeof(r)) || !write_all(wfd, file, r.file_len))
			_exit(3);
	}
	_exit(0);
}

static int resolve_walled(struct gs_cuda *c)
{
	int fds[2], err = 0;
	size_t got = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return 0; /* no lines, the locations stand */
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		return 0;
	}
	if (!pid) {
		close(fds[0]);
		wall_child(c, fds[1]);
	}
	close(fds[1]);
	uint64_t deadline = mono_ms() + c->wall_ms;
	int rc = 0;
	while (got < c->n_pending && !err) {
		struct wall_rec r;
		char file[PATH_MAX];

		if ((rc = read_by(fds[0], &r, sizeof(r), deadline)))
			break;
		if (r.idx >= c->n_pending || r.file_len >= sizeof(file) ||
		    (rc = read_by(fds[0], file, r.file_len, deadline))) {
			rc = rc ? rc : -EPROTO;
			break;
		}
		file[r.file_len] = 0;
		err = apply_line(c, &c->pending[r.idx], r.rc, file, r.line);
		got++;
	}
	close(fds[0]);
	int st = 0;
	if (got < c->n_pending)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got < c->n_pending) {
		c->walled += c->n_pending - got;
		if (!c->walled_why[0])
			snprintf(c->walled_why, sizeof(c->walled_why), "%s",
				 rc == -ETIMEDOUT ? "stopped at its time limit"
				 : WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL
				     ? "died (over its memory or CPU limit, or a crash)"
				     : "stopped (over its memory or CPU limit)");
	}
	return err;
}

int gs_cuda_set_cupti_limits(struct gs_cuda *c, uint32_t wall_ms, uint64_t mem_bytes)
{
	if (!wall_ms || mem_bytes < (16u << 20))
		return -EINVAL;
	c->wall_ms = wall_ms;
	c->wall_mem = mem_bytes;
	return 0;
}

int gs_cuda_resolve_lines(struct gs_cuda *c)
{
	int err = 0;

	if (c->n_pending && !gs_cuda_load_cupti(c))
		err = resolve_walled(c);
	c->n_pending = 0;
	return err;
}

/* ---- stall reasons ------------------------------------------------------- */

#define STALL_PREFIX  "smsp__pcsamp_warps_issue_stalled_"
#define PCSAMP_PREFIX "smsp__pcsamp_"

void gs_cuda_stall_short(const char *name, char *buf, size_t len)
{
	if (!len)
		return;
	const char *s = name ? name : "";
	if (!strncmp(s, STALL_PREFIX, strlen(STALL_PREFIX)))
		s += strlen(STALL_PREFIX);
	else if (!strncmp(s, PCSAMP_PREFIX, strlen(PCSAMP_PREFIX)))
		s += strlen(PCSAMP_PREFIX);
	size_t n = strlen(s), suf = strlen(GS_STALL_NOT_ISSUED_SUFFIX);
	if (n > suf && !strcmp(s + n - suf, GS_STALL_NOT_ISSUED_SUFFIX))
		n -= suf; /* the twin shares its base's short name */
	if (n >= len)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
}

static struct stall_table *find_table(struct gs_cuda *c, uint32_t pid, uint32_t context)
{
	struct cuda_proc *u = gs_proc_slots_get(&c->slots, pid, false);

	for (size_t i = 0; u && i < u->n_tables; i++)
		if (u->tables[i].context == context)
			return &u->tables[i];
	return NULL;
}

static int kind_in(const struct stall_table *t, uint32_t index)
{
	for (size_t k = 0; t && k < t->n; k++)
		if (t->ents[k].index == index)
			return t->ents[k].kind;
	return -ENOENT;
}

int gs_cuda_stall_kind(struct gs_cuda *c, uint32_t pid, uint32_t context, uint32_t index)
{
	return kind_in(find_table(c, pid, context), index);
}

uint64_t gs_cuda_base_samples(struct gs_cuda *c, uint32_t pid, uint32_t context,
			      const struct gs_gpu_stall_count *counts, uint32_t n)
{
	const struct stall_table *t = find_table(c, pid, context); /* once per batch */
	uint64_t sum = 0;

	for (uint32_t i = 0; t && i < n; i++)
		if (kind_in(t, counts[i].reason_index) == GS_STALL_BASE)
			sum += counts[i].samples;
	return sum;
}

int gs_cuda_add_stall_table(struct gs_cuda *c, uint32_t pid, uint32_t context, int32_t device,
			    size_t n, const uint32_t *indices, const uint32_t *flags,
			    const char *const *names)
{
	struct stall_ent *ents = calloc(n ? n : 1, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char buf[128];
		ents[i].index = indices[i];
		ents[i].kind = (uint8_t)gs_stall_kind(flags[i]);
		gs_cuda_stall_short(names[i], buf, sizeof(buf));
		ents[i].reason = gs_profile_intern(c->p, buf[0] ? buf : "unnamed");
		if (ents[i].reason == (gs_str)-1) {
			free(ents);
			return -ENOMEM;
		}
	}
	struct stall_table *t = find_table(c, pid, context);
	struct cuda_proc *u = t ? NULL : gs_proc_slots_get(&c->slots, pid, true);
	if (!t && u && u->n_tables >= GS_CUDA_STALL_CONTEXTS_PER_PID) {
		c->stall_tables_refused++;
		free(ents);
		return -ENOSPC;
	}
	if (!t) {
		if (!u || gs_grow((void **)&u->tables, &u->cap_tables, u->n_tables + 1,
				  sizeof(struct stall_table))) {
			free(ents);
			return -ENOMEM;
		}
		t = &u->tables[u->n_tables++];
		t->ents = NULL;
	}
	free(t->ents);
	t->context = context;
	t->device = device;
	t->ents = ents;
	t->n = n;
	return 0;
}

int gs_cuda_fold_stalls(struct gs_cuda *c, uint32_t pid, uint32_t context,
			const struct gs_cuda_stall_in *in, size_t n_in,
			struct gs_cuda_stall_out *out, size_t max, size_t *n_out)
{
	const struct stall_table *t = find_table(c, pid, context);
	size_t n = 0;
	*n_out = 0;
	for (size_t i = 0; i < n_in; i++) {
		if (!in[i].samples)
			continue;
		const struct stall_ent *e = NULL;
		for (size_t k = 0; t && k < t->n && !e; k++)
			if (t->ents[k].index == in[i].index)
				e = &t->ents[k];
		struct stall_ent unknown;
		if (!e) {
			/* The index is the target's word: a name per index only
			 * for the first GS_CUDA_UNKNOWN_STALLS of them. */
			uint32_t r;
			unknown.kind = GS_STALL_BASE;
			if (gs_kmap_get(&c->unknown_stalls, in[i].index, 0, 0, &r)) {
				unknown.reason = r;
			} else {
				char buf[32];
				bool room = c->unknown_stalls.n < GS_CUDA_UNKNOWN_STALLS;
				if (room)
					snprintf(buf, sizeof(buf), "stall_%u", in[i].index);
				unknown.reason = gs_profile_intern(c->p,
								   room ? buf : "stall_other");
				if (unknown.reason == (gs_str)-1 ||
				    (room && gs_kmap_put(&c->unknown_stalls, in[i].index, 0, 0,
							 unknown.reason)))
					return -ENOMEM;
			}
			e = &unknown;
		}
		if (e->kind == GS_STALL_COUNTER)
			continue;
		size_t k = 0;
		while (k < n && out[k].reason != e->reason)
			k++;
		if (k == n) {
			if (n == max)
				return -ENOSPC;
			out[n++] = (struct gs_cuda_stall_out){ .reason = e->reason };
		}
		if (e->kind == GS_STALL_NOT_ISSUED)
			out[k].not_issued += in[i].samples;
		else
			out[k].samples += in[i].samples;
	}
	*n_out = n;
	return 0;
}

/* ---- devices and comments ------------------------------------------------ */

/* pid's line of device: found or made.  0, -ENOMEM, or -ENOSPC past
 * GS_CUDA_DEVICES_PER_PID (counted). */
static int get_device(struct gs_cuda *c, uint32_t pid, int32_t device, struct device **out)
{
	struct cuda_proc *u = gs_proc_slots_get(&c->slots, pid, true);

	if (!u)
		return -ENOMEM;
	for (size_t i = 0; i < u->n_devices; i++)
		if (u->devices[i].device == device) {
			*out = &u->devices[i];
			return 0;
		}
	if (u->n_devices >= GS_CUDA_DEVICES_PER_PID) { /* device ids come from the target */
		c->devices_refused++;
		return -ENOSPC;
	}
	if (gs_grow((void **)&u->devices, &u->cap_devices, u->n_devices + 1, sizeof(struct device)))
		return -ENOMEM;
	struct device *d = &u->devices[u->n_devices++];
	memset(d, 0, sizeof(*d));
	d->seq = c->next_device_seq++;
	d->pid = pid;
	d->device = device;
	*out = d;
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct device *x = *(const struct device *const *)a,
			    *y = *(const struct device *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every process's devices in the order they were first seen (the
 * comments keep the order of arrival across processes): a malloc'ed array
 * of *n, NULL and -ENOMEM when there are some but no memory. */
static int devices_by_arrival(struct gs_cuda *c, const struct device ***out, size_t *n)
{
	const struct device **v;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < c->slots.n; i++)
		k += ((struct cuda_proc *)c->slots.all[i])->n_devices;
	if (!k)
		return 0;
	if (!(v = malloc(k * sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0; i < c->slots.n; i++) {
		const struct cuda_proc *u = c->slots.all[i];

		for (size_t j = 0; j < u->n_devices; j++)
			v[(*n)++] = &u->devices[j];
	}
	qsort(v, k, sizeof(*v), by_seq);
	*out = v;
	return 0;
}

int gs_cuda_set_device(struct gs_cuda *c, uint32_t pid, int32_t device,
		       const struct gs_cuda_device_info *info)
{
	struct device *d;
	int err = get_device(c, pid, device, &d);
	if (err)
		return err;
	d->have_info = true;
	snprintf(d->name, sizeof(d->name), "%s", info->name ? info->name : "");
	snprintf(d->mode, sizeof(d->mode), "%s", info->mode ? info->mode : "");
	d->sm_clock_khz = info->sm_clock_khz;
	d->sm_count = info->sm_count;
	d->period_exp = info->period_exp >= 5 && info->period_exp <= 31 ? info->period_exp : 0;
	return 0;
}

void gs_cuda_add_counts(struct gs_cuda *c, uint32_t pid, int32_t device, uint64_t total,
			uint64_t dropped, uint64_t non_user)
{
	struct device *d;
	if (get_device(c, pid, device, &d))
		return;
	d->total += total;
	d->dropped += dropped;
	d->non_user += non_user;
	d->drains++;
}

int gs_cuda_add_comments(struct gs_cuda *c)
{
	const struct device **devs;
	size_t n_devs;
	int err = devices_by_arrival(c, &devs, &n_devs);
	for (size_t i = 0; i < n_devs && !err; i++) {
		const struct device *d = devs[i];
		char facts[256] = "";
		if (d->have_info) {
			int n = snprintf(facts, sizeof(facts), " (%s%s%u SMs, SM clock %u MHz)",
					 d->name, d->name[0] ? ", " : "", d->sm_count,
					 d->sm_clock_khz / 1000);
			if (d->period_exp && n > 0 && (size_t)n < sizeof(facts)) {
				/* period_exp is 5..31 (checked where it is set) */
				double ns = d->sm_clock_khz ? ldexp(1.0, (int)d->period_exp) * 1e6 /
								  d->sm_clock_khz
							    : 0;
				snprintf(facts + n, sizeof(facts) - n,
					 ": PC sampling %s, period 2^%u cycles = %.1f us per "
					 "sample per SM",
					 d->mode[0] ? d->mode : "", d->period_exp, ns / 1000);
			}
		}
		err = gs_profile_add_comment(
		    c->p,
		    "gpu pid %u device %d%s; samples total %llu, dropped %llu, "
		    "in non-user kernels %llu",
		    d->pid, d->device, facts, (unsigned long long)d->total,
		    (unsigned long long)d->dropped, (unsigned long long)d->non_user);
	}
	free(devs);
	if (!err && c->stall_tables_refused)
		err = gs_profile_add_comment(c->p,
					     "gpu stall tables: %llu refused, past %u contexts of "
					     "one process (their reasons are named stall_<index>)",
					     (unsigned long long)c->stall_tables_refused,
					     GS_CUDA_STALL_CONTEXTS_PER_PID);
	if (!err && c->devices_refused)
		err = gs_profile_add_comment(
		    c->p,
		    "gpu devices: %llu record(s) of devices past %u in one "
		    "process left out of the device lines",
		    (unsigned long long)c->devices_refused, GS_CUDA_DEVICES_PER_PID);
	if (!err && c->walled)
		err = gs_profile_add_comment(
		    c->p,
		    "gpu source lines: libcupti %s (%u ms, %llu MiB more "
		    "memory, run apart from gpusample): %llu GPU locations "
		    "keep their kernel name without a line",
		    c->walled_why, c->wall_ms, (unsigned long long)(c->wall_mem >> 20),
		    (unsigned long long)c->walled);
	if (!err && c->n_cubins && c->cupti_tried && !c->cupti)
		err = gs_profile_add_comment(c->p, "gpu source lines: %s", c->cupti_info);
	else if (!err && c->sass_no_line && !c->sass_lines)
		err = gs_profile_add_comment(c->p, "gpu source lines: none of the sampled cubins "
						   "have line info (build with nvcc -lineinfo)");
	return err;
}

/* ---- wire records -------------------------------------------------------- */

int gs_cuda_stall_table_record(struct gs_cuda *c, const struct gs_gpu_stall_table *rec, size_t size)
{
	struct gs_gpu_rec v;

	if (gs_gpu_rec_decode_as(rec, size, GS_REC_GPU_STALL_TABLE, &v))
		return -EINVAL;
	return gs_cuda_stall_table(c, v.table.t, v.table.reasons);
}

int gs_cuda_stall_table(struct gs_cuda *c, const struct gs_gpu_stall_table *rec,
			const struct gs_gpu_stall_reason *r)
{
	size_t n = rec->n_reasons;
	uint32_t *idx = calloc(n ? n : 1, sizeof(*idx));
	uint32_t *flags = calloc(n ? n : 1, sizeof(*flags));
	char(*names)[GS_GPU_STALL_NAME_LEN] = calloc(n ? n : 1, sizeof(*names));
	const char **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	int err = -ENOMEM;
	if (!idx || !flags || !names || !ptrs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		idx[i] = r[i].index;
		flags[i] = r[i].flags;
		memcpy(names[i], r[i].name, GS_GPU_STALL_NAME_LEN - 1); /* force a NUL */
		ptrs[i] = names[i];
	}
	int32_t device = (int32_t)rec->gpu.device;
	err = gs_cuda_add_stall_table(c, rec->gpu.tgid, rec->gpu.ctx_uid, device, n, idx, flags,
				      ptrs);
	if (err)
		goto out;
	struct device *d;
	if ((err = get_device(c, rec->gpu.tgid, device, &d)))
		goto out;
	d->have_info = true;
	if (rec->sm_count)
		d->sm_count = rec->sm_count;
	if (rec->clock_khz)
		d->sm_clock_khz = rec->clock_khz;
	/* CUPTI's range; anything else from the target is not a period */
	if (rec->sampling_period >= 5 && rec->sampling_period <= 31)
		d->period_exp = rec->sampling_period;
	if (rec->collection_mode == GS_GPU_MODE_CONTINUOUS)
		snprintf(d->mode, sizeof(d->mode), "continuous");
	else if (rec->collection_mode == GS_GPU_MODE_SERIALIZED)
		snprintf(d->mode, sizeof(d->mode), "kernel-serialized");
out:
	free(idx);
	free(flags);
	free(names);
	free(ptrs);
	return err;
}
