/* SPDX-License-Identifier: MIT */
/*
 * Symbolizer: native (libdwfl) against a live workload that reports its own
 * addresses and source lines, deleted and exited mappings, perf maps, kallsyms,
 * demangling, and a timing of libtorch_cpu / libpython lookups.
 *
 * Needs the workloads next to the test binary: BUILD/workloads/sym_inline and
 * BUILD/workloads/libsym_cxx.so (make builds them with the test).
 */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpusample/profile.h"
#include "native/native.h"
#include "native/sym_internal.h"

/* ---- helpers ------------------------------------------------------------ */

static char wl_dir[PATH_MAX - 64];

static void find_workloads(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert(n > 0);
	exe[n] = 0;
	/* BUILD/tests/test_symbolizer -> BUILD/workloads */
	char *dir = dirname(dirname(exe));
	snprintf(wl_dir, sizeof(wl_dir), "%s/workloads", dir);
}

struct wl {
	pid_t pid;
	FILE *in, *out;
	char kv[32][2][512];
	int nkv;
};

/* Read key=value lines until "ok". */
static void wl_read(struct wl *w)
{
	char line[512];
	while (fgets(line, sizeof(line), w->out)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "ok"))
			return;
		char *eq = strchr(line, '=');
		cr_assert(eq, "workload said: %s", line);
		*eq = 0;
		cr_assert_neq(strcmp(line, "error"), 0, "workload error: %s", eq + 1);
		cr_assert(w->nkv < 32);
		snprintf(w->kv[w->nkv][0], 512, "%s", line);
		snprintf(w->kv[w->nkv][1], 512, "%s", eq + 1);
		w->nkv++;
	}
	cr_assert_fail("workload exited early");
}

static const char *wl_get(struct wl *w, const char *key)
{
	for (int i = w->nkv - 1; i >= 0; i--)
		if (!strcmp(w->kv[i][0], key))
			return w->kv[i][1];
	cr_assert_fail("workload did not print %s", key);
	return NULL;
}

static uint64_t wl_u64(struct wl *w, const char *key)
{
	return strtoull(wl_get(w, key), NULL, 0);
}

static void wl_start_bin(struct wl *w, const char *bin)
{
	find_workloads();
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", wl_dir, bin);
	cr_assert(access(path, X_OK) == 0, "build %s first (make test-helpers)", path);
	int in[2], out[2];
	cr_assert(pipe(in) == 0 && pipe(out) == 0);
	memset(w, 0, sizeof(*w));
	w->pid = fork();
	cr_assert(w->pid >= 0);
	if (!w->pid) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->in = fdopen(in[1], "w");
	w->out = fdopen(out[0], "r");
	setvbuf(w->in, NULL, _IOLBF, 0);
	wl_read(w);
}

static void wl_start(struct wl *w)
{
	wl_start_bin(w, "sym_inline");
}

static void wl_cmd(struct wl *w, const char *fmt, const char *arg)
{
	fprintf(w->in, fmt, arg);
	fprintf(w->in, "\n");
	fflush(w->in);
	wl_read(w);
}

/* Close stdin: the workload exits; reap it. */
static void wl_stop(struct wl *w)
{
	if (!w->pid)
		return;
	fclose(w->in);
	int st;
	waitpid(w->pid, &st, 0);
	fclose(w->out);
	w->pid = 0;
}

static struct gs_profile prof;
static struct gs_symbolizer *sym;
static struct wl wl;

static void setup(void)
{
	gs_profile_init(&prof);
	sym = gs_sym_new(&prof);
	cr_assert(sym);
}

static void teardown(void)
{
	if (wl.pid) {
		kill(wl.pid, SIGKILL);
		wl_stop(&wl);
	}
	gs_sym_free(sym);
	gs_profile_free(&prof);
}

static const char *S(gs_str s)
{
	return gs_profile_str(&prof, s);
}

static const struct gs_function *loc_fn(uint32_t loc, uint32_t i)
{
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_lt(i, l->n_lines);
	return gs_profile_function(&prof, prof.lines[l->first_line + i].function);
}

static int64_t loc_line(uint32_t loc, uint32_t i)
{
	const struct gs_location *l = gs_profile_location(&prof, loc);
	return prof.lines[l->first_line + i].line;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* ---- native ------------------------------------------------------------- */

TestSuite(symbolizer, .init = setup, .fini = teardown, .timeout = 120);

Test(symbolizer, function_entry_name_file_line)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	uint32_t loc = gs_sym_native(sym, wl.pid, wl_u64(&wl, "outer"), false);
	cr_assert(loc);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_eq(l->address, wl_u64(&wl, "outer"), "location address is the runtime address");
	cr_assert_eq(l->n_lines, 1);
	const struct gs_function *f = loc_fn(loc, 0);
	cr_assert_str_eq(S(f->name), "outer_fn");
	cr_assert_eq(f->system_name, 0, "C names have no separate system_name");
	cr_assert(ends_with(S(f->file), "tests/workloads/sym_inline.c"), "file %s", S(f->file));
	cr_assert_eq(f->start_line, (int64_t)wl_u64(&wl, "outer_decl_line"));
	cr_assert_eq(loc_line(loc, 0), (int64_t)wl_u64(&wl, "outer_decl_line"));
	/* mapping: the workload binary, with its build-id */
	cr_assert(l->mapping);
	const struct gs_mapping *m = &prof.mappings[l->mapping - 1];
	cr_assert(ends_with(S(m->file), "/sym_inline"), "mapping %s", S(m->file));
	cr_assert_eq(strlen(S(m->build_id)), 40);
	cr_assert(l->address >= m->start && l->address < m->limit);
	cr_assert(m->has_functions && m->has_filenames && m->has_lines);
	/* the same address again: the same location, nothing new */
	uint32_t n = prof.n_locations;
	cr_assert_eq(gs_sym_native(sym, wl.pid, wl_u64(&wl, "outer"), false), loc);
	cr_assert_eq(prof.n_locations, n);
}

static void check_inline_chain(const char *bin)
{
	wl_start_bin(&wl, bin);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	uint32_t loc = gs_sym_native(sym, wl.pid, wl_u64(&wl, "ret"), true);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_eq(l->address, wl_u64(&wl, "ret") - 1,
		     "return addresses are looked up (and kept) at addr-1");
	cr_assert_eq(l->n_lines, 3, "leaf_inl <- mid_inl <- outer_fn, got %u lines", l->n_lines);
	const char *names[] = { "leaf_inl", "mid_inl", "outer_fn" };
	const char *keys[] = { "leaf_line", "mid_line", "outer_line" };
	for (int i = 0; i < 3; i++) {
		cr_assert_str_eq(S(loc_fn(loc, i)->name), names[i]);
		cr_assert(ends_with(S(loc_fn(loc, i)->file), "sym_inline.c"), "file of %s: %s",
			  names[i], S(loc_fn(loc, i)->file));
		cr_assert_eq(loc_line(loc, i), (int64_t)wl_u64(&wl, keys[i]),
			     "line of %s: %" PRId64, names[i], loc_line(loc, i));
	}
	cr_assert(prof.mappings[l->mapping - 1].has_inlines);
}

Test(symbolizer, inline_chain_callee_first)
{
	check_inline_chain("sym_inline");
}

/* clang: DWARF 5, no .debug_aranges (libdwfl alone finds no CU), the
 * primary file as index 0 */
Test(symbolizer, inline_chain_clang_no_aranges)
{
	check_inline_chain("sym_inline_clang");
}

Test(symbolizer, exited_process_still_resolves)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	uint32_t tgid = wl.pid;
	uint64_t ret = wl_u64(&wl, "ret"), outer = wl_u64(&wl, "outer");
	wl_stop(&wl);
	cr_assert_eq(kill(tgid, 0), -1, "the workload is gone");
	gs_sym_exit(sym, tgid);
	cr_assert(gs_sym_has_process(sym, tgid));
	uint32_t loc = gs_sym_native(sym, tgid, ret, true);
	cr_assert_eq(gs_profile_location(&prof, loc)->n_lines, 3);
	cr_assert_str_eq(S(loc_fn(loc, 2)->name), "outer_fn");
	cr_assert_str_eq(S(loc_fn(gs_sym_native(sym, tgid, outer, false), 0)->name), "outer_fn");
}

Test(symbolizer, cxx_deleted_mapping_after_exit)
{
	if (geteuid())
		cr_skip_test("/proc/PID/map_files needs root");
	wl_start(&wl);
	char so[PATH_MAX];
	snprintf(so, sizeof(so), "%s/libsym_cxx.so", wl_dir);
	cr_assert(access(so, R_OK) == 0, "build %s first", so);
	wl_cmd(&wl, "dlcopy %s", so);
	uint64_t cxx = wl_u64(&wl, "cxx");
	cr_assert(cxx);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	struct gs_sym_mapping_info mi;
	cr_assert_eq(gs_sym_mapping_for(sym, wl.pid, cxx, &mi), 0);
	cr_assert(strstr(mi.path, "(deleted)"), "path %s", mi.path);
	cr_assert(mi.open_path, "a deleted file is opened through map_files");
	uint32_t tgid = wl.pid;
	wl_stop(&wl);
	uint32_t loc = gs_sym_native(sym, tgid, cxx, false);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_geq(l->n_lines, 1);
	const struct gs_function *f = loc_fn(loc, l->n_lines - 1);
	cr_assert_str_eq(S(f->name), "gs_test::Widget<int>::compute(int)");
	cr_assert_str_eq(S(f->system_name), "_ZN7gs_test6WidgetIiE7computeEi");
	cr_assert(ends_with(S(f->file), "sym_cxx.cpp"), "file %s", S(f->file));
	const struct gs_mapping *m = &prof.mappings[l->mapping - 1];
	cr_assert(strstr(S(m->file), "/tmp/gs-sym-"), "mapping %s", S(m->file));
	cr_assert_str_eq(S(m->build_id), mi.build_id);
}

/* The workload dlopens a copy of libsym_cxx.so: its function resolves. */
static void dlopen_after_snapshot_resolves(void)
{
	char so[PATH_MAX];
	snprintf(so, sizeof(so), "%s/libsym_cxx.so", wl_dir);
	wl_cmd(&wl, "dlcopy %s", so);
	uint32_t loc = gs_sym_native(sym, wl.pid, wl_u64(&wl, "cxx"), false);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_str_eq(S(loc_fn(loc, l->n_lines - 1)->name),
			 "gs_test::Widget<int>::compute(int)");
}

Test(symbolizer, dlopen_after_snapshot_rereads_maps)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	dlopen_after_snapshot_resolves();
	/* mappings of the first snapshot still resolve */
	cr_assert_str_eq(
	    S(loc_fn(gs_sym_native(sym, wl.pid, wl_u64(&wl, "outer"), false), 0)->name),
	    "outer_fn");
}

Test(symbolizer, miss_that_a_reread_cannot_help_keeps_the_rate_limit)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	/* nothing is mapped at page 1: the kernel says so without a re-read,
	 * so the re-read budget of the second is left for the dlopen below */
	cr_assert_str_eq(S(loc_fn(gs_sym_native(sym, wl.pid, 0x1000, false), 0)->name),
			 "[unknown]");
	dlopen_after_snapshot_resolves();
}

Test(perfmap, unchanged_file)
{
	char path[64];
	struct gs_perfmap pm;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/gs_test_perfmap_u.%d", getpid());
	unlink(path);
	cr_assert_eq(gs_perfmap_read(path, getuid(), &pm), -ENOENT);
	cr_assert(gs_perfmap_unchanged(&pm, path), "still absent");
	cr_assert_not(gs_perfmap_unchanged(&pm, ""), "no path: unknown");
	cr_assert((f = fopen(path, "w")));
	fprintf(f, "1000 10 first\n");
	fflush(f);
	cr_assert_not(gs_perfmap_unchanged(&pm, path), "created since");
	cr_assert_eq(gs_perfmap_read(path, getuid(), &pm), 0);
	cr_assert(gs_perfmap_unchanged(&pm, path));
	fprintf(f, "2000 10 second\n"); /* a JIT appends */
	fclose(f);
	cr_assert_not(gs_perfmap_unchanged(&pm, path), "appended since");
	gs_perfmap_free(&pm);
	unlink(path);
}

Test(symbolizer, fork_child_shares_snapshot)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	const uint32_t child = 0x3fffff00; /* not a live pid: only the shared snapshot can answer */
	cr_assert_eq(gs_sym_fork(sym, wl.pid, child), 0);
	uint32_t a = gs_sym_native(sym, wl.pid, wl_u64(&wl, "ret"), true);
	uint32_t b = gs_sym_native(sym, child, wl_u64(&wl, "ret"), true);
	cr_assert_eq(a, b);
	cr_assert_eq(gs_sym_exec(sym, child), -ESRCH);
}

Test(symbolizer, fork_child_reads_its_own_perf_map)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	wl_cmd(&wl, "%s", "fork");
	uint32_t child = (uint32_t)wl_u64(&wl, "child");
	uint64_t jit = wl_u64(&wl, "jit");
	cr_assert_eq(gs_sym_fork(sym, wl.pid, child), 0);
	/* the parent has no perf map and still has none: the child's own is
	 * what a miss in the shared snapshot must read */
	char path[128];
	cr_assert_eq(gs_perfmap_path(child, path, sizeof(path)), 0);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fprintf(f, "%" PRIx64 " 20 child_jitted\n", jit);
	fclose(f);
	uint32_t loc = gs_sym_native(sym, child, jit + 4, false);
	unlink(path);
	kill((pid_t)child, SIGKILL);
	cr_assert_str_eq(S(loc_fn(loc, 0)->name), "child_jitted");
}

Test(symbolizer, unknown_and_fallback_names)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	/* .rodata of the binary: a file mapping with no function symbol */
	uint64_t ro = wl_u64(&wl, "rodata");
	struct gs_sym_mapping_info mi;
	cr_assert_eq(gs_sym_mapping_for(sym, wl.pid, ro, &mi), 0);
	char want[64];
	snprintf(want, sizeof(want), "sym_inline+0x%" PRIx64, ro - mi.load_bias);
	uint32_t loc = gs_sym_native(sym, wl.pid, ro, false);
	cr_assert_str_eq(S(loc_fn(loc, 0)->name), want);
	/* nothing mapped at page 1 */
	loc = gs_sym_native(sym, wl.pid, 0x1000, false);
	cr_assert_str_eq(S(loc_fn(loc, 0)->name), "[unknown]");
	cr_assert_eq(gs_profile_location(&prof, loc)->mapping, 0);
	/* a process that never existed, twice (remembered, not re-read) */
	loc = gs_sym_native(sym, 0x3ffffff0, 0x401000, false);
	cr_assert_str_eq(S(loc_fn(loc, 0)->name), "[unknown]");
	cr_assert_eq(gs_sym_native(sym, 0x3ffffff0, 0x401000, false), loc);
	cr_assert_not(gs_sym_has_process(sym, 0x3ffffff0));
	/* tgid 0 (the idle task; no user space) */
	cr_assert_str_eq(S(loc_fn(gs_sym_native(sym, 0, 0x401000, false), 0)->name), "[unknown]");
	struct gs_sym_mapping_info none;
	cr_assert_eq(gs_sym_mapping_for(sym, 0, 0x401000, &none), -ESRCH);
	cr_assert_neq(gs_sym_add_process(sym, 0), 0);
	cr_assert_not(gs_sym_has_process(sym, 0));
}

struct foreach_ctx {
	uint64_t outer;
	bool saw_main, saw_libc;
	uint64_t main_bias;
};

static int foreach_cb(void *vctx, const struct gs_sym_mapping_info *m)
{
	struct foreach_ctx *c = vctx;
	if (ends_with(m->path, "/sym_inline")) {
		c->saw_main = true;
		c->main_bias = m->load_bias;
		cr_assert(c->outer >= m->start && c->outer < m->end);
	}
	if (strstr(m->path, "/libc.so"))
		c->saw_libc = true;
	cr_assert(m->open_path && access(m->open_path, R_OK) == 0, "%s", m->path);
	return 0;
}

/* Calls fn for every symbol of path's sections of type (SHT_SYMTAB or
 * SHT_DYNSYM), with the symbol's name, read with libelf. */
static void elf_each_sym(const char *path, Elf64_Word type,
			 void (*fn)(void *ctx, const char *name, const GElf_Sym *s), void *ctx)
{
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "%s", path);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	for (Elf_Scn *scn = NULL; e && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			if (gelf_getsym(d, (int)i, &s))
				fn(ctx, elf_strptr(e, sh.sh_link, s.st_name), &s);
		}
	}
	elf_end(e);
	close(fd);
}

struct sym_value {
	const char *name;
	uint64_t v;
};

static void match_sym(void *ctx, const char *name, const GElf_Sym *s)
{
	struct sym_value *sv = ctx;
	if (name && !strcmp(name, sv->name))
		sv->v = s->st_value;
}

/* st_value of a symbol, read with libelf, to check the PT_LOAD math */
static uint64_t elf_sym_value(const char *path, const char *name)
{
	struct sym_value sv = { name, 0 };
	elf_each_sym(path, SHT_SYMTAB, match_sym, &sv);
	return sv.v;
}

static bool has_section(const char *path, const char *want)
{
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	bool found = false;
	cr_assert(e && elf_getshdrstrndx(e, &shstrndx) == 0);
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && !strcmp(elf_strptr(e, shstrndx, sh.sh_name), want))
			found = true;
	}
	elf_end(e);
	close(fd);
	return found;
}

/* The workload's libsym_cxx_dl.so has its DWARF in the .gnu_debuglink file
 * beside it; *fn: the function at compute's address. */
static uint32_t debuglink_lookup(const struct gs_function **fn)
{
	wl_start(&wl);
	char so[PATH_MAX];
	snprintf(so, sizeof(so), "%s/libsym_cxx_dl.so", wl_dir);
	cr_assert(access(so, R_OK) == 0, "build %s first", so);
	cr_assert_not(has_section(so, ".debug_info"), "the library itself has no DWARF");
	cr_assert(has_section(so, ".gnu_debuglink"));
	wl_cmd(&wl, "dlopen %s", so);
	uint64_t addr = wl_u64(&wl, "base") + elf_sym_value(so, "_ZN7gs_test6WidgetIiE7computeEi");
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	uint32_t loc = gs_sym_native(sym, wl.pid, addr, false);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	*fn = loc_fn(loc, l->n_lines - 1);
	cr_assert_str_eq(S((*fn)->name), "gs_test::Widget<int>::compute(int)");
	return loc;
}

/* Issue 24: the directory of a target's library is the target user's; a
 * debug file there (a FIFO, a link to a root file) is never opened. */
Test(symbolizer, debuglink_beside_the_library_not_read)
{
	const struct gs_function *f;

	debuglink_lookup(&f);
	cr_assert_not(ends_with(S(f->file), "sym_cxx.cpp"), "read from beside the library: %s",
		      S(f->file));
}

/* The same debuglink file under /usr/lib/debug/DIR/ (root's) is read. */
Test(symbolizer, debuglink_debug_file)
{
	char so[PATH_MAX], real[PATH_MAX], dst[PATH_MAX + 64], cmd[4 * PATH_MAX + 256];
	const struct gs_function *f;

	if (geteuid())
		cr_skip_test("writes under /usr/lib/debug: root only");
	find_workloads();
	snprintf(so, sizeof(so), "%s/libsym_cxx_dl.so", wl_dir);
	cr_assert(realpath(so, real));
	snprintf(dst, sizeof(dst), "/usr/lib/debug%s.debug", real);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && cp '%s.debug' '%s'", dst, real,
		 dst);
	cr_assert_eq(system(cmd), 0);
	uint32_t loc = debuglink_lookup(&f);
	unlink(dst);
	/* the directories made for it, while empty */
	for (char *sl; (sl = strrchr(dst, '/')) && sl > dst + strlen("/usr/lib/debug");) {
		*sl = 0;
		if (rmdir(dst))
			break;
	}
	cr_assert(ends_with(S(f->file), "sym_cxx.cpp"), "DWARF from the debug file: %s",
		  S(f->file));
	cr_assert_gt(loc_line(loc, gs_profile_location(&prof, loc)->n_lines - 1), 0);
	cr_assert(prof.mappings[gs_profile_location(&prof, loc)->mapping - 1].has_lines);
}

Test(symbolizer, foreach_mapping_and_load_bias)
{
	wl_start(&wl);
	struct foreach_ctx c = { .outer = wl_u64(&wl, "outer") };
	cr_assert_eq(gs_sym_foreach_mapping(sym, wl.pid, foreach_cb, &c), 0);
	cr_assert(c.saw_main && c.saw_libc);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sym_inline", wl_dir);
	uint64_t v = elf_sym_value(path, "outer_fn");
	cr_assert(v);
	cr_assert_eq(c.outer - c.main_bias, v, "runtime - load_bias = ELF st_value");
}

/* ---- perf maps ---------------------------------------------------------- */

Test(perfmap, parse_and_find)
{
	const char text[] = "7f0000001000 40 py::foo:/x.py\n"
			    "0x7f0000002000 0x100 _ZN3c106detail7jit_fooEv\n"
			    "garbage line\n"
			    "7f0000000800 10 [early] with spaces\n";
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	struct gs_perfmap pm;
	cr_assert_eq(gs_perfmap_parse(f, &pm), 0);
	fclose(f);
	cr_assert_eq(pm.n, 3);
	cr_assert_str_eq(gs_perfmap_find(&pm, 0x7f0000001000)->name, "py::foo:/x.py");
	cr_assert_str_eq(gs_perfmap_find(&pm, 0x7f000000103f)->name, "py::foo:/x.py");
	cr_assert_null(gs_perfmap_find(&pm, 0x7f0000001040));
	cr_assert_str_eq(gs_perfmap_find(&pm, 0x7f00000020ff)->name, "_ZN3c106detail7jit_fooEv");
	cr_assert_str_eq(gs_perfmap_find(&pm, 0x7f0000000805)->name, "[early] with spaces");
	cr_assert_null(gs_perfmap_find(&pm, 0x7f0000000700));
	gs_perfmap_free(&pm);
}

/* The target writes its perf map: a link, another user's file, a FIFO and
 * an endless line are refused or skipped, not followed or buffered. */
Test(perfmap, untrusted_file)
{
	char path[64], link[64], fifo[64];
	struct gs_perfmap pm;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/gs_test_perfmap.%d", getpid());
	snprintf(link, sizeof(link), "/tmp/gs_test_perfmap_l.%d", getpid());
	snprintf(fifo, sizeof(fifo), "/tmp/gs_test_perfmap_f.%d", getpid());
	cr_assert_not_null(f = fopen(path, "w"));
	fputs("1000 10 first\n", f);
	for (int i = 0; i < 5000; i++) /* a 5000-byte line: skipped whole */
		fputc('7', f);
	fputs(" 10 long\n2000 10 after_long\n", f);
	fclose(f);
	cr_assert_eq(gs_perfmap_read(path, getuid(), &pm), 0);
	cr_assert_eq(pm.n, 2);
	cr_assert_str_eq(gs_perfmap_find(&pm, 0x1005)->name, "first");
	cr_assert_str_eq(gs_perfmap_find(&pm, 0x2005)->name, "after_long");
	gs_perfmap_free(&pm);
	/* the owner must be the process's user: not another user, and not
	 * root for a job that is not root */
	cr_assert_eq(chown(path, 12345, 12345), 0);
	cr_assert_eq(gs_perfmap_read(path, 777, &pm), -EPERM);
	cr_assert_eq(gs_perfmap_read(path, 12345, &pm), 0);
	gs_perfmap_free(&pm);
	cr_assert_eq(chown(path, 0, 0), 0);
	cr_assert_eq(gs_perfmap_read(path, 12345, &pm), -EPERM, "root's file in a user's view");
	cr_assert_eq(gs_perfmap_read(path, 0, &pm), 0, "a root job's own map");
	gs_perfmap_free(&pm);
	cr_assert_eq(chown(path, 12345, 12345), 0);
	cr_assert_eq(symlink(path, link), 0);
	cr_assert_eq(gs_perfmap_read(link, 12345, &pm), -EPERM, "a link is not followed");
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(gs_perfmap_read(fifo, getuid(), &pm), -EPERM, "a FIFO is not read (no hang)");
	unlink(path);
	unlink(link);
	unlink(fifo);
}

/* A job in its own root whose tmp is an absolute link (tmp -> /secret):
 * /proc/PID/root/tmp/... must resolve that link inside the job's root, not
 * in ours, where it would read a root-only directory's map. */
Test(perfmap, resolved_inside_the_jobs_root)
{
	char dir[64], outside[96], map[128], lnk[96], path[128];
	int go[2];
	struct gs_perfmap pm;
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/gs_test_jobroot.%d", getpid());
	snprintf(outside, sizeof(outside), "/var/tmp/gs_test_secret.%d", getpid());
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(mkdir(outside, 0700), 0);
	snprintf(map, sizeof(map), "%s/perf-1.map", outside);
	cr_assert_not_null(f = fopen(map, "w"));
	fputs("1000 10 root_only_secret\n", f);
	fclose(f);
	snprintf(lnk, sizeof(lnk), "%s/tmp", dir);
	cr_assert_eq(symlink(outside, lnk), 0);
	cr_assert_eq(pipe(go), 0);
	pid_t job = fork();
	if (job == 0) {
		char c;
		close(go[1]); /* the parent's end: its exit ends the wait */
		if (chroot(dir) || chdir("/"))
			_exit(1);
		(void)!read(go[0], &c, 1);
		_exit(0);
	}
	cr_assert_gt(job, 0);
	close(go[0]);
	snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-1.map", job);
	for (int i = 0; i < 200; i++) { /* until the child is in its root */
		char rl[64] = "";
		char rp[32];
		snprintf(rp, sizeof(rp), "/proc/%d/root", job);
		if (readlink(rp, rl, sizeof(rl) - 1) > 0 && strcmp(rl, dir) == 0)
			break;
		usleep(10000);
	}
	int err = gs_perfmap_read(path, 0, &pm);
	cr_assert_eq(err, -ENOENT, "the link led out of the job's root (%d)", err);
	cr_assert_eq(pm.n, 0);
	cr_assert(gs_perfmap_unchanged(&pm, path), "still absent inside its root");
	(void)!write(go[1], "x", 1);
	waitpid(job, NULL, 0);
	unlink(map);
	unlink(lnk);
	rmdir(outside);
	rmdir(dir);
}

/* Issue 24, item 8: hard links to one map are one parse, and all maps
 * together stay under the budget (cut, then not read, both counted). */
Test(perfmap, shared_and_budgeted)
{
	char path[3][64], lnk[8][64];
	struct gs_perfmap pm[8], other, third;
	struct gs_perfmap_stats a, b;
	FILE *f;

	for (int k = 0; k < 3; k++) {
		snprintf(path[k], sizeof(path[k]), "/tmp/gs_test_perfmap_s%d.%d", k, getpid());
		cr_assert_not_null(f = fopen(path[k], "w"));
		for (int i = 0; i < 20000; i++)
			fprintf(f, "%x 10 region_%d_%d\n", 0x100000 + i * 0x10, k, i);
		fclose(f);
	}
	gs_perfmap_stats(&a);
	for (int i = 0; i < 8; i++) {
		snprintf(lnk[i], sizeof(lnk[i]), "/tmp/gs_test_perfmap_h%d.%d", i, getpid());
		unlink(lnk[i]);
		cr_assert_eq(link(path[0], lnk[i]), 0);
		cr_assert_eq(gs_perfmap_read(lnk[i], getuid(), &pm[i]), 0);
		cr_assert_eq(pm[i].n, 20000);
		cr_assert_eq(pm[i].e, pm[0].e, "one parse for every link");
	}
	gs_perfmap_stats(&b);
	cr_assert_eq(b.files - a.files, 1);
	cr_assert_eq(b.shared - a.shared, 7);
	size_t one = b.bytes - a.bytes;
	cr_assert_gt(one, 20000 * 16);
	/* room for half a map more: the next is cut, the one after not read */
	size_t old = gs_perfmap_set_budget(b.bytes + one / 2);
	cr_assert_eq(gs_perfmap_read(path[1], getuid(), &other), 0);
	cr_assert(other.n > 0 && other.n < 20000, "cut at the budget: %zu", other.n);
	cr_assert_str_eq(gs_perfmap_find(&other, 0x100005)->name, "region_1_0");
	cr_assert_eq(gs_perfmap_read(path[2], getuid(), &third), 0);
	cr_assert_eq(third.n, 0, "budget spent: not read");
	gs_perfmap_stats(&b);
	cr_assert_leq(b.bytes - a.bytes, one + one / 2);
	cr_assert_eq(b.cut - a.cut, 1);
	cr_assert_eq(b.refused - a.refused, 1);
	cr_assert_str_neq(b.first, "");
	gs_perfmap_free(&third);
	gs_perfmap_free(&other);
	for (int i = 0; i < 8; i++) {
		gs_perfmap_free(&pm[i]);
		unlink(lnk[i]);
	}
	gs_perfmap_stats(&b);
	cr_assert_eq(b.bytes, a.bytes, "the last reader frees the parse");
	gs_perfmap_set_budget(old);
	for (int k = 0; k < 3; k++)
		unlink(path[k]);
}

Test(perfmap, nstgid_of_self)
{
	/* not in a container here: NStgid's last field is our pid */
	cr_assert_eq(gs_proc_nstgid((uint32_t)getpid()), getpid());
	cr_assert_eq(gs_proc_nstgid(0x3ffffff0), -ESRCH);
}

Test(symbolizer, perf_map_written_after_snapshot)
{
	wl_start(&wl);
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	uint64_t jit = wl_u64(&wl, "jit");
	char path[128];
	cr_assert_eq(gs_perfmap_path(wl.pid, path, sizeof(path)), 0);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fprintf(f, "%" PRIx64 " 20 jitted_plain\n%" PRIx64 " 100 _ZN3c106detail7jit_fooEv\n", jit,
		jit + 0x100);
	fclose(f);
	uint32_t a = gs_sym_native(sym, wl.pid, jit + 4, false);
	uint32_t b = gs_sym_native(sym, wl.pid, jit + 0x180, true);
	unlink(path);
	cr_assert_str_eq(S(loc_fn(a, 0)->name), "jitted_plain");
	cr_assert_str_eq(S(loc_fn(b, 0)->name), "c10::detail::jit_foo()");
	cr_assert_str_eq(S(loc_fn(b, 0)->system_name), "_ZN3c106detail7jit_fooEv");
	/* in the anonymous executable region but not in the map */
	cr_assert_str_eq(S(loc_fn(gs_sym_native(sym, wl.pid, jit + 0x40, false), 0)->name),
			 "[jit]");
}

/* ---- kernel ------------------------------------------------------------- */

/* address of want in /proc/kallsyms, and every global name at it (aliases
 * such as __x64_sys_getpid / __ia32_sys_getpid share one address) */
static uint64_t kallsyms_addr(const char *want, char *aliases, size_t len)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	if (!f)
		return 0;
	char line[512];
	uint64_t a = 0;
	while (!a && fgets(line, sizeof(line), f)) {
		char name[256], type;
		unsigned long long addr;
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 && !strcmp(name, want))
			a = addr;
	}
	rewind(f);
	aliases[0] = 0;
	while (a && fgets(line, sizeof(line), f)) {
		char name[256], type;
		unsigned long long addr;
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 && addr == a &&
		    type == 'T')
			snprintf(aliases + strlen(aliases), len - strlen(aliases), " %s ", name);
	}
	fclose(f);
	return a;
}

Test(symbolizer, kernel_symbol_from_kallsyms)
{
	char aliases[1024], want[300];
	uint64_t a = kallsyms_addr("__x64_sys_getpid", aliases, sizeof(aliases));
	if (!a)
		cr_skip_test("kallsyms addresses hidden (run as root)");
	uint32_t loc = gs_sym_kernel(sym, a + 4);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_eq(l->kind, GS_FRAME_KERNEL);
	snprintf(want, sizeof(want), " %s ", S(loc_fn(loc, 0)->name));
	cr_assert(strstr(aliases, want), "got %s, want one of %s", want, aliases);
	cr_assert_str_eq(S(prof.mappings[l->mapping - 1].file), "[kernel.kallsyms]");
	cr_assert_eq(gs_sym_kernel(sym, a + 4), loc);
	/* by default no kernel address in the profile: one location per
	 * function at 0, its mapping at 0 */
	cr_assert_eq(l->address, 0);
	cr_assert_eq(prof.mappings[l->mapping - 1].start, 0);
	cr_assert_eq(prof.mappings[l->mapping - 1].limit, 0);
	cr_assert_eq(gs_sym_kernel(sym, a), loc, "one location per function");
	for (uint32_t i = 1; i <= prof.n_locations; i++)
		cr_assert_lt(gs_profile_location(&prof, i)->address, 0xffff800000000000ull);
}

/* Asked for (GS_KERNEL_ADDRESSES=1): one location per address, kept. */
Test(symbolizer, kernel_addresses_kept_when_asked)
{
	char aliases[1024];
	uint64_t a = kallsyms_addr("__x64_sys_getpid", aliases, sizeof(aliases));
	if (!a)
		cr_skip_test("kallsyms addresses hidden (run as root)");
	gs_sym_keep_kernel_addresses(sym, true);
	uint32_t loc = gs_sym_kernel(sym, a + 4);
	const struct gs_location *l = gs_profile_location(&prof, loc);
	cr_assert_eq(l->address, a + 4);
	cr_assert_leq(prof.mappings[l->mapping - 1].start, a);
	cr_assert_eq(gs_sym_kernel(sym, a + 4), loc);
	cr_assert_neq(gs_sym_kernel(sym, a), loc, "one location per address");
}

Test(kallsyms, parse_modules_and_search)
{
	char tmp[] = "/tmp/gs-kallsyms-XXXXXX";
	int fd = mkstemp(tmp);
	const char text[] = "ffffffff81000000 T _stext\n"
			    "ffffffff81000100 t helper\n"
			    "ffffffff81200000 D some_data\n"
			    "ffffffff81000200 W weak_fn\n"
			    "ffffffffc0001000 t nv_probe\t[nvidia]\n"
			    "ffffffffc0002000 T nv_ioctl\t[nvidia]\n"
			    "ffffffffc0100000 t ext4_thing\t[ext4]\n";
	cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	struct gs_kallsyms k;
	cr_assert_eq(gs_kallsyms_load(&k, tmp), 0);
	unlink(tmp);
	cr_assert_eq(k.n, 6, "data symbols are skipped");
	cr_assert_str_eq(gs_kallsyms_find(&k, 0xffffffff81000150)->name, "helper");
	cr_assert_str_eq(gs_kallsyms_find(&k, 0xffffffff81000200)->name, "weak_fn");
	const struct gs_ksym *s = gs_kallsyms_find(&k, 0xffffffffc0002010);
	cr_assert_str_eq(s->name, "nv_ioctl");
	cr_assert_str_eq(k.modules[s->module], "nvidia");
	cr_assert_str_eq(k.modules[gs_kallsyms_find(&k, 0xffffffffc0100004)->module], "ext4");
	cr_assert_eq(gs_kallsyms_find(&k, 0xffffffff81000001)->module, 0);
	cr_assert_null(gs_kallsyms_find(&k, 0xffffffff80000000));
	gs_kallsyms_free(&k);
}

/* ---- demangling --------------------------------------------------------- */

Test(demangle, libtorch_names)
{
	struct {
		const char *in, *out;
	} t[] = {
		{ "_ZN2at6native10add_kernelERNS_18TensorIteratorBaseERKN3c106ScalarE",
		  "at::native::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)" },
		{ "_ZN3c1010Dispatcher4callIN2at6TensorEJRKS3_S5_EEET_RKNS_"
		  "19TypedOperatorHandleIFS6_DpT0_EEES9_",
		  "at::Tensor c10::Dispatcher::call<at::Tensor, at::Tensor const&, at::Tensor "
		  "const&>"
		  "(c10::TypedOperatorHandle<at::Tensor (at::Tensor const&, at::Tensor const&)> "
		  "const&, "
		  "at::Tensor const&, at::Tensor const&)" },
		{ "_ZN5torch8autograd6Engine11thread_mainERKSt10shared_ptrINS0_9GraphTaskEE",
		  "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask>"
		  " const&)" },
		{ "_ZN3c106detail7jit_fooEv@@LIBTORCH_1.0",
		  "c10::detail::jit_foo()@@LIBTORCH_1.0" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *d = gs_demangle(t[i].in);
		cr_assert(d, "%s", t[i].in);
		cr_assert_str_eq(d, t[i].out);
		free(d);
	}
	cr_assert_null(gs_demangle("main"));
	cr_assert_null(gs_demangle("_Zgarbage"));
	cr_assert_null(gs_demangle(NULL));
}

/* ---- big libraries: first-lookup latency -------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct mid_funcs {
	uint64_t base, *addrs;
	size_t n, cap;
};

/* the middle of each defined function of more than 4 bytes */
static void add_mid_func(void *ctx, const char *name, const GElf_Sym *s)
{
	struct mid_funcs *m = ctx;
	(void)name;
	if (GELF_ST_TYPE(s->st_info) == STT_FUNC && s->st_size > 4 && s->st_shndx != SHN_UNDEF &&
	    m->n < m->cap)
		m->addrs[m->n++] = m->base + s->st_value + s->st_size / 2;
}

/* dlopen lib in the workload, pick n function symbols of its .dynsym (every
 * step-th), resolve each at mid-function and check the name.  Prints
 * timings (first lookup, total) for the report. */
static void time_library(const char *lib, size_t n_want)
{
	wl_start(&wl);
	wl_cmd(&wl, "dlopen %s", lib);
	struct mid_funcs m = { .base = wl_u64(&wl, "base"), .cap = 1 << 16 };
	m.addrs = malloc(m.cap * sizeof(*m.addrs));
	elf_each_sym(lib, SHT_DYNSYM, add_mid_func, &m);
	uint64_t *addrs = m.addrs;
	size_t n = m.n;
	cr_assert_gt(n, 100);
	size_t step = n > n_want ? n / n_want : 1;
	double t0 = now_s();
	cr_assert_eq(gs_sym_add_process(sym, wl.pid), 0);
	double t1 = now_s();
	uint32_t first = gs_sym_native(sym, wl.pid, addrs[0], false);
	double t2 = now_s();
	size_t done = 1, named = 0, lines = 0;
	for (size_t i = step; i < n; i += step, done++) {
		uint32_t loc = gs_sym_native(sym, wl.pid, addrs[i], false);
		const struct gs_location *l = gs_profile_location(&prof, loc);
		const char *name = S(loc_fn(loc, l->n_lines - 1)->name);
		named += !strstr(name, ".so+0x") && strcmp(name, "[unknown]");
		lines += loc_line(loc, 0) > 0;
	}
	double t3 = now_s();
	cr_assert(first);
	fprintf(stderr,
		"symbolizer timing: %s: snapshot %.1f ms, first lookup %.1f ms, %zu more distinct "
		"addresses in %.1f ms (%.1f us each), %zu named, %zu with lines\n",
		lib, (t1 - t0) * 1e3, (t2 - t1) * 1e3, done - 1, (t3 - t2) * 1e3,
		(t3 - t2) * 1e6 / (double)(done > 1 ? done - 1 : 1), named + 1, lines);
	cr_assert_geq(named, (done - 1) * 9 / 10, "most dynsym functions resolve by name");
	cr_assert_lt(t3 - t1, 60.0, "symbolizing %zu addresses took %.1f s", done, t3 - t1);
	free(addrs);
}

/* The per-CU function index and libdw's dwarf_getscopes agree on every
 * inline chain of a sample of libpython addresses (DWARF, -O3, many
 * inlines). */
Test(symbolizer, cu_index_matches_getscopes)
{
	const char *lib = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0";
	struct stat st;
	cr_assert_eq(stat(lib, &st), 0, "%s not installed (pyenv 3.11.7)", lib);
	struct gs_sym_modcache *c = gs_sym_modcache_new(NULL);
	const char *paths[] = { lib };
	struct gs_sym_module *m = gs_sym_module_get(c, lib, paths, 1, lib, st.st_dev, st.st_ino);
	cr_assert(m && m->fd >= 0);
	/* every 64th code address of the text segment, a mix of inlined and
	 * plain code */
	const GElf_Phdr *text = NULL;
	for (size_t i = 0; i < m->n_loads; i++)
		if (m->loads[i].p_flags & PF_X)
			text = &m->loads[i];
	cr_assert(text);
	size_t compared = 0, inlined = 0;
	for (uint64_t a = text->p_vaddr; a < text->p_vaddr + text->p_memsz && compared < 3000;
	     a += 997) {
		struct gs_sym_result x, y;
		gs_sym_no_cu_index = false;
		cr_assert_eq(gs_sym_module_resolve(m, a, &x), 0);
		gs_sym_no_cu_index = true;
		cr_assert_eq(gs_sym_module_resolve(m, a, &y), 0);
		gs_sym_no_cu_index = false;
		cr_assert_eq(x.n, y.n, "chain length at %#" PRIx64 ": %d vs %d", a, x.n, y.n);
		for (int i = 0; i < x.n; i++) {
			cr_assert_str_eq(x.f[i].name, y.f[i].name, "at %#" PRIx64, a);
			cr_assert_eq(x.f[i].line, y.f[i].line, "at %#" PRIx64 " frame %d", a, i);
		}
		compared++;
		inlined += x.n > 1;
		gs_sym_result_clear(&x);
		gs_sym_result_clear(&y);
	}
	cr_assert_gt(inlined, compared / 10, "libpython -O3 has inline chains (%zu/%zu)", inlined,
		     compared);
	gs_sym_modcache_free(c);
}

TestSuite(timing, .init = setup, .fini = teardown, .timeout = 300);

Test(timing, libtorch_cpu)
{
	const char *lib = "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so";
	/* python3-torch is a test dependency (make test-deps): missing is a failure */
	cr_assert(access(lib, R_OK) == 0, "%s missing: install python3-torch (make test-deps)",
		  lib);
	time_library(lib, 2000);
}

Test(timing, libpython_dwarf)
{
	/* pyenv's CPythons (with DWARF) are optional: CI does not install them */
	const char *lib = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0";
	if (access(lib, R_OK))
		cr_skip_test("%s not installed", lib);
	time_library(lib, 2000);
}
