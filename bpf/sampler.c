/* SPDX-License-Identifier: MIT */
/* CPU sampler: loader and reader of bpf/gpusample.bpf.c (see sampler.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <zlib.h>

#include "bpf/sampler.h"
#include "gpusample/records_codec.h"
#include "bpf/common.bpf.h"
#include "gpusample.skel.h"

#define GS_RINGBUF_MIN (4u << 20)
#define GS_RINGBUF_MAX (256u << 20)

struct gs_sampler {
	struct gpusample_bpf *skel;
	struct gs_sampler_opts opts;
	struct ring_buffer *rb;
	struct bpf_link **cpu_links; /* one per online CPU; owns its perf fd */
	int n_cpu_links;
	struct bpf_link *tp_links[5];
	uint64_t *target_filter; /* mmap of the BPF array (GS_TFILTER_SLOTS) */
	bool started;
	/* current poll */
	gs_record_fn fn;
	void *fn_ctx;
	int handled;
	uint64_t malformed;
	char *prog_logs; /* GS_STATS_LOG bytes per program (opts.verifier_stats) */
	struct gs_bpf_features features;
	bool compat; /* the gs_*_compat programs are loaded */
	int cycles;  /* CPUs sampled on hardware cycles (the others on cpu-clock) */
};

/* Log bytes per program at BPF_LOG_STATS.  The kernel fails a load whose
 * log overflows (ENOSPC), and 64 KiB was not enough for gs_sample on 6.18;
 * calloc'ed and touched only as far as the kernel writes, and only for
 * `gpusample check`. */
#define GS_STATS_LOG (4 << 20)

static void errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- libbpf logging ----------------------------------------------------- */

/* libbpf stays quiet unless GS_DEBUG is set (GS_DEBUG=2 adds libbpf's debug
 * level).  The first warning after a reset is kept so that a failed load can
 * say why in one line. */
static char libbpf_warn[256];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	const char *dbg = getenv("GS_DEBUG");
	int verbosity = dbg && *dbg ? atoi(dbg) > 1 ? 2 : 1 : 0;

	if (level == LIBBPF_WARN && !libbpf_warn[0]) {
		va_list ap2;

		va_copy(ap2, ap);
		vsnprintf(libbpf_warn, sizeof(libbpf_warn), fmt, ap2);
		va_end(ap2);
		libbpf_warn[strcspn(libbpf_warn, "\n")] = 0;
		if (!strncmp(libbpf_warn, "libbpf: ", 8))
			memmove(libbpf_warn, libbpf_warn + 8, strlen(libbpf_warn + 8) + 1);
	}
	if (verbosity == 0 || (level == LIBBPF_DEBUG && verbosity < 2))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void gs_bpf_quiet_libbpf(void)
{
	libbpf_warn[0] = 0;
	libbpf_set_print(libbpf_print);
}

const char *gs_bpf_last_warning(void)
{
	return libbpf_warn;
}

/* ---- helpers exposed for tests ----------------------------------------- */

int gs_parse_cpu_list(const char *s, bool *cpus, int max)
{
	int n = 0;

	memset(cpus, 0, max * sizeof(*cpus));
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b;

		if (end == s || a < 0)
			return -EINVAL;
		b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a)
				return -EINVAL;
			s = end;
		}
		if (b >= max)
			return -ERANGE;
		for (long c = a; c <= b; c++)
			if (!cpus[c]) {
				cpus[c] = true;
				n++;
			}
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return n;
}

/* The options' rates, else GS_GPU_RATE_MAX="LAUNCHES,RECORDS" from the
 * environment (tests that study the host's own caps raise them), else the
 * defaults. */
static void gpu_rates(const struct gs_sampler_opts *o, volatile const __u32 *launch,
		      volatile const __u32 *record)
{
	unsigned l = GS_GPU_LAUNCH_RATE_MAX, r = GS_GPU_RECORD_RATE_MAX;
	const char *env = getenv("GS_GPU_RATE_MAX");

	if (env && sscanf(env, "%u,%u", &l, &r) != 2)
		l = GS_GPU_LAUNCH_RATE_MAX, r = GS_GPU_RECORD_RATE_MAX;
	*(__u32 *)launch = o->gpu_launch_rate ? o->gpu_launch_rate : (l ? l : 1);
	*(__u32 *)record = o->gpu_record_rate ? o->gpu_record_rate : (r ? r : 1);
}

void gs_sampler_gpu_rates(const struct gs_sampler *s, uint32_t *launch, uint32_t *record)
{
	*launch = s->skel->rodata->gpu_launch_rate;
	*record = s->skel->rodata->gpu_record_rate;
}

uint32_t gs_sampler_offcpu_rate(const struct gs_sampler_opts *o)
{
	return o->offcpu_rate ? o->offcpu_rate : GS_OFF_DEFAULT_RATE;
}

uint32_t gs_sampler_offcpu_idle_rate(const struct gs_sampler_opts *o)
{
	uint32_t r = gs_sampler_offcpu_rate(o) / GS_OFF_IDLE_SHARE;

	return r ? r : 1;
}

uint32_t gs_ringbuf_size(uint32_t requested, uint32_t n_cpus, uint32_t frequency_hz)
{
	uint64_t want, sz;

	if (requested)
		want = requested; /* caller's choice, rounded up to a valid size */
	else
		want = (uint64_t)n_cpus * frequency_hz * GS_CPU_SAMPLE_MAX_SIZE;
	if (!requested && want < GS_RINGBUF_MIN)
		want = GS_RINGBUF_MIN;
	if (want > GS_RINGBUF_MAX)
		want = GS_RINGBUF_MAX;
	sz = 4096; /* kernel: power of 2, multiple of the page size */
	while (sz < want)
		sz <<= 1;
	return sz;
}

/* ---- open / load ----------------------------------------------------- */

/* Read a small proc/sysfs file (one read) into buf as a C string. */
static int read_small_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	return 0;
}

static int read_int_file(const char *path, long *out)
{
	char buf[64];
	int rc = read_small_file(path, buf, sizeof(buf));

	if (rc)
		return rc;
	*out = strtol(buf, NULL, 10);
	return 0;
}

static int online_cpus(bool *cpus, int max)
{
	char buf[4096];
	int rc = read_small_file("/sys/devices/system/cpu/online", buf, sizeof(buf));

	if (rc)
		return rc;
	return gs_parse_cpu_list(buf, cpus, max);
}

/* Which sched_process_exit program this kernel can run: the tracepoint got
 * a `bool group_dead` argument in 6.16; older kernels pass the task only. */
static bool exit_tp_has_group_dead(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	bool ret = false;
	int id;

	if (!btf)
		return false;
	id = btf__find_by_name_kind(btf, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
	if (id > 0) {
		t = btf__type_by_id(btf, btf__resolve_type(btf, id)); /* pointer */
		if (t && btf_is_ptr(t))
			t = btf__type_by_id(btf, t->type);
		ret = t && btf_is_func_proto(t) && btf_vlen(t) >= 3; /* (void *, task, bool) */
	}
	btf__free(btf);
	return ret;
}

/* What the programs need of the kernel's config: CONFIG_HZ (0: unknown)
 * and CONFIG_KASAN (doubles x86-64's kernel stacks).  From
 * /boot/config-RELEASE, else /proc/config.gz (both root-owned kernel
 * files); a kernel with neither (many containers) gets the defaults. */
struct kernel_config {
	uint32_t hz;
	bool kasan;
};

static void read_kernel_config(struct kernel_config *kc)
{
	char path[256], line[256];
	struct utsname u;
	gzFile f = NULL;
	uint32_t hz;

	kc->hz = 0;
	kc->kasan = false;
	if (!uname(&u)) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "rb"); /* reads plain files too */
	}
	if (!f)
		f = gzopen("/proc/config.gz", "rb");
	if (!f)
		return;
	while (gzgets(f, line, sizeof(line))) {
		if (sscanf(line, "CONFIG_HZ=%u", &hz) == 1 && hz <= 10000)
			kc->hz = hz;
		else if (!strcmp(line, "CONFIG_KASAN=y\n"))
			kc->kasan = true;
	}
	gzclose(f);
}

uint32_t gs_bpf_thread_size(void)
{
	struct kernel_config kc;

	read_kernel_config(&kc);
	return kc.kasan ? 32768 : 16384;
}

/* The compat programs (gs_*_compat, bpf/unwind.bpf.h) where the kernel lacks
 * what the others use; GS_BPF_COMPAT=1 forces them (tests, and a way out
 * should a kernel's verifier refuse the others). */
static bool want_compat(const struct gs_bpf_features *f)
{
	const char *env = getenv("GS_BPF_COMPAT");

	if (env && !strcmp(env, "1"))
		return true;
	return !(f->bpf_loop && f->task_storage && f->task_pt_regs && f->current_task_btf);
}


/* Load either the compat programs or the others, never both. */
static void pick_programs(struct gs_sampler *s)
{
	struct gpusample_bpf *k = s->skel;
	struct bpf_program *off[2] = { k->progs.gs_off_switch, k->progs.gs_off_switch_compat };
	struct bpf_program *wake[2] = { k->progs.gs_off_waking, k->progs.gs_off_waking_compat };
	bool c = s->compat;

	bpf_program__set_autoload(c ? k->progs.gs_sample : k->progs.gs_sample_compat, false);
	bpf_program__set_autoload(c ? k->progs.gs_gpu_launch : k->progs.gs_gpu_launch_compat,
				  false);
	bpf_program__set_autoload(c ? k->progs.gs_mem_enter : k->progs.gs_mem_enter_compat, false);
	bpf_program__set_autoload(off[!c], false);
	bpf_program__set_autoload(wake[!c], false);
	if (!s->opts.offcpu) {
		bpf_program__set_autoload(off[c], false);
		bpf_program__set_autoload(wake[c], false);
	}
	if (!c)
		return;
	if (!s->features.task_storage)
		bpf_map__set_autocreate(k->maps.offcpu_fast, false);
	bpf_map__set_map_flags(k->maps.offcpu_fast_h, 0);
	bpf_map__set_map_flags(k->maps.gs_cfi_procs, 0);
	bpf_map__set_max_entries(k->maps.gs_cfi_procs, GS_CFI_COMPAT_PROCS);
}

void gs_bpf_features_probe(struct gs_bpf_features *f)
{
	f->bpf_loop = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) > 0;
	f->task_storage = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) > 0;
	f->task_pt_regs = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs,
						  NULL) > 0;
	f->current_task_btf = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT,
						      BPF_FUNC_get_current_task_btf, NULL) > 0;
}

static bool debug_level2(void)
{
	const char *d = getenv("GS_DEBUG");

	return d && atoi(d) >= 2;
}

/* Give every program a log buffer at BPF_LOG_STATS: the verifier then
 * reports its processed-instruction count on every kernel (verified_insns
 * in the program info is 5.16+). */
static int keep_verifier_stats(struct gs_sampler *s)
{
	struct bpf_program *p;
	int n = 0, i = 0;

	bpf_object__for_each_program(p, s->skel->obj) n++;
	s->prog_logs = calloc(n ? n : 1, GS_STATS_LOG);
	if (!s->prog_logs)
		return -ENOMEM;
	bpf_object__for_each_program(p, s->skel->obj)
	{
		bpf_program__set_log_level(p, 4 /* BPF_LOG_STATS */);
		bpf_program__set_log_buf(p, s->prog_logs + (size_t)i++ * GS_STATS_LOG,
					 GS_STATS_LOG);
	}
	return 0;
}

static const char *perm_hint(void)
{
	return geteuid() ? "run as root (sudo) or grant CAP_BPF and CAP_PERFMON"
			 : "the kernel refused even root: check lockdown "
			   "(/sys/kernel/security/lockdown), "
			   "SELinux/AppArmor and kernel.unprivileged_bpf_disabled";
}

int gs_sampler_open(const struct gs_sampler_opts *o, struct gs_sampler **out, char *err,
		    size_t errlen)
{
	static bool cpus[4096];
	struct kernel_config kc;
	struct gs_sampler *s;
	long max_rate = 100000;
	int n_cpus, rc;

	*out = NULL;
	libbpf_set_print(libbpf_print);
	if (read_int_file("/proc/sys/kernel/perf_event_max_sample_rate", &max_rate) == 0 &&
	    (o->frequency_hz < 1 || o->frequency_hz > max_rate)) {
		errf(err, errlen,
		     "sampling frequency %u Hz is out of range: this kernel allows 1..%ld Hz "
		     "(sysctl kernel.perf_event_max_sample_rate); choose a lower -F",
		     o->frequency_hz, max_rate);
		return -EINVAL;
	}
	if (o->frequency_hz < 1) {
		errf(err, errlen, "sampling frequency must be at least 1 Hz");
		return -EINVAL;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		errf(err, errlen,
		     "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): it was built "
		     "without CONFIG_DEBUG_INFO_BTF; gpusample needs a kernel with BTF (5.8 or "
		     "newer, as shipped by current distributions)");
		return -ENOTSUP;
	}
	n_cpus = online_cpus(cpus, sizeof(cpus) / sizeof(cpus[0]));
	if (n_cpus <= 0) {
		errf(err, errlen,
		     "cannot read the online CPUs from /sys/devices/system/cpu/online: %s",
		     strerror(n_cpus ? -n_cpus : EINVAL));
		return n_cpus ? n_cpus : -EINVAL;
	}

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *o;
	/* libbpf 1.x raises RLIMIT_MEMLOCK itself on kernels that still charge
	 * BPF memory to it (before 5.11). */
	libbpf_warn[0] = 0;
	s->skel = gpusample_bpf__open();
	if (!s->skel) {
		rc = -errno;
		errf(err, errlen, "cannot open the BPF object: %s (%s)", strerror(-rc),
		     libbpf_warn[0] ? libbpf_warn : "no detail");
		goto fail;
	}
	s->skel->rodata->kernel_stacks = o->kernel_stacks;
	s->skel->rodata->follow_children = o->follow_children;
	s->skel->rodata->gs_rb_bytes = gs_ringbuf_size(o->ringbuf_bytes, n_cpus, o->frequency_hz);
	bpf_map__set_max_entries(s->skel->maps.events, (uint32_t)s->skel->rodata->gs_rb_bytes);
	/* the unwinder's PC cache: one element per CPU (unwind.bpf.h) */
	if (libbpf_num_possible_cpus() > 0)
		bpf_map__set_max_entries(s->skel->maps.gs_pc_cache, libbpf_num_possible_cpus());
	if (exit_tp_has_group_dead())
		bpf_program__set_autoload(s->skel->progs.gs_proc_exit_live, false);
	else
		bpf_program__set_autoload(s->skel->progs.gs_proc_exit_gd, false);
	if (!o->follow_children)
		bpf_program__set_autoload(s->skel->progs.gs_proc_fork, false);
	read_kernel_config(&kc);
	s->skel->rodata->gs_config_hz = kc.hz;
	s->skel->rodata->gs_thread_size = kc.kasan ? 32768 : 16384;
	s->skel->rodata->offcpu_rate = gs_sampler_offcpu_rate(o);
	s->skel->rodata->offcpu_idle_rate = gs_sampler_offcpu_idle_rate(o);
	gpu_rates(o, &s->skel->rodata->gpu_launch_rate, &s->skel->rodata->gpu_record_rate);
	gs_bpf_features_probe(&s->features);
	s->compat = want_compat(&s->features);
	pick_programs(s);

	/* GS_DEBUG=2 wants libbpf's whole verifier log of a failed load,
	 * which libbpf prints only without a caller's log buffer: the counts
	 * come from verified_insns then (5.16+). */
	if (o->verifier_stats && !debug_level2() && (rc = keep_verifier_stats(s)))
		goto fail;
	libbpf_warn[0] = 0;
	rc = gpusample_bpf__load(s->skel);
	if (rc) {
		/* The verifier also answers EACCES; without privileges it is a
		 * permission problem, with them a rejected program. */
		if ((rc == -EPERM || rc == -EACCES) && geteuid() != 0)
			errf(err, errlen, "loading the BPF programs was refused (%s): %s",
			     strerror(-rc), perm_hint());
		else if (rc == -EPERM)
			errf(err, errlen,
			     "loading the BPF programs was refused (EPERM): %s (libbpf: %s)",
			     perm_hint(), libbpf_warn[0] ? libbpf_warn : "no detail");
		else
			errf(err, errlen,
			     "loading the BPF programs failed: %s (libbpf: %s); rerun with "
			     "GS_DEBUG=1 "
			     "for the verifier log",
			     strerror(-rc), libbpf_warn[0] ? libbpf_warn : "no detail");
		goto fail;
	}
	s->rb = NULL;
	s->target_filter = mmap(NULL, GS_TFILTER_SLOTS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
				MAP_SHARED, bpf_map__fd(s->skel->maps.target_filter), 0);
	if (s->target_filter == MAP_FAILED) {
		rc = -errno;
		s->target_filter = NULL;
		errf(err, errlen, "cannot map the BPF target filter: %s", strerror(-rc));
		goto fail;
	}
	*out = s;
	return 0;
fail:
	gpusample_bpf__destroy(s->skel);
	free(s->prog_logs);
	free(s);
	return rc < 0 ? rc : -EINVAL;
}

/* The target filter counts `targets` entries per slot; BPF inserts (fork)
 * and deletes (exit) too, so count only what this call really inserted or
 * deleted, atomically (the same memory BPF adds to). */
static void filter_count(struct gs_sampler *s, uint32_t tgid, int delta)
{
	__atomic_fetch_add(&s->target_filter[tgid & (GS_TFILTER_SLOTS - 1)],
			   (uint64_t)(int64_t)delta, __ATOMIC_SEQ_CST);
}

int gs_sampler_add_target(struct gs_sampler *s, uint32_t tgid, const struct gs_target *t)
{
	int rc = bpf_map__update_elem(s->skel->maps.targets, &tgid, sizeof(tgid), t, sizeof(*t),
				      BPF_NOEXIST);

	if (!rc) {
		filter_count(s, tgid, 1);
		return 0;
	}
	if (rc != -EEXIST)
		return rc;
	return bpf_map__update_elem(s->skel->maps.targets, &tgid, sizeof(tgid), t, sizeof(*t),
				    BPF_EXIST);
}

int gs_sampler_remove_target(struct gs_sampler *s, uint32_t tgid)
{
	int rc = bpf_map__delete_elem(s->skel->maps.targets, &tgid, sizeof(tgid), 0);

	if (!rc)
		filter_count(s, tgid, -1);
	return rc;
}

int gs_sampler_set_py_cfg(struct gs_sampler *s, uint32_t id, const struct gs_py_cfg *cfg)
{
	if (id < 1 || id >= bpf_map__max_entries(s->skel->maps.py_cfgs))
		return -EINVAL;
	return bpf_map__update_elem(s->skel->maps.py_cfgs, &id, sizeof(id), cfg, sizeof(*cfg),
				    BPF_ANY);
}

/* ---- start / stop ------------------------------------------------------ */

static int on_ring_record(void *ctx, void *data, size_t size)
{
	struct gs_sampler *s = ctx;
	const struct gs_rec_hdr *h = data;
	int rc;

	if (gs_rec_hdr_check(data, size)) {
		s->malformed++;
		return 0;
	}
	s->handled++;
	rc = s->fn ? s->fn(s->fn_ctx, h) : 0;
	return rc < 0 ? rc : 0;
}

/* The hardware cycles event where a PMU exists: its overflow interrupt is
 * an NMI, so a sample lands where the code ran even with interrupts off;
 * cpu-clock (an hrtimer) waits for them to be on again and piles that time
 * on the instruction that re-enables them (pvm_irq_enable on a VM).  Most
 * VMs have no PMU: cycles fails to open (ENOENT, EOPNOTSUPP) and cpu-clock
 * samples instead. */
static int open_cpu_event(uint32_t freq, int cpu, bool cycles)
{
	struct perf_event_attr a = {
		.type = cycles ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = cycles ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK,
		.freq = 1,
		.sample_freq = freq,
	};
	int fd = syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int attach_cpu_events(struct gs_sampler *s, char *err, size_t errlen)
{
	static bool cpus[4096];
	int max = sizeof(cpus) / sizeof(cpus[0]);
	int n = online_cpus(cpus, max), rc;

	if (n <= 0) {
		errf(err, errlen, "cannot read /sys/devices/system/cpu/online");
		return n ? n : -EINVAL;
	}
	s->cpu_links = calloc(n, sizeof(*s->cpu_links));
	if (!s->cpu_links)
		return -ENOMEM;
	for (int cpu = 0; cpu < max && s->n_cpu_links < n; cpu++) {
		struct bpf_link *l;
		int fd;

		if (!cpus[cpu])
			continue;
		fd = open_cpu_event(s->opts.frequency_hz, cpu, true);
		if (fd >= 0)
			s->cycles++;
		else
			fd = open_cpu_event(s->opts.frequency_hz, cpu, false);
		if (fd == -ENODEV)
			continue; /* went offline since we read the list */
		if (fd < 0) {
			long paranoid = 2;

			read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);
			if (fd == -EACCES || fd == -EPERM)
				errf(err, errlen,
				     "perf_event_open on CPU %d refused (%s): %s "
				     "(kernel.perf_event_paranoid is %ld; system-wide sampling "
				     "needs CAP_PERFMON or paranoid <= -1)",
				     cpu, strerror(-fd), perm_hint(), paranoid);
			else if (fd == -EINVAL)
				errf(
				    err, errlen,
				    "perf_event_open on CPU %d rejected %u Hz (EINVAL): the kernel "
				    "may have lowered kernel.perf_event_max_sample_rate; choose a "
				    "lower -F",
				    cpu, s->opts.frequency_hz);
			else
				errf(err, errlen,
				     "perf_event_open (cpu-clock) on CPU %d failed: %s", cpu,
				     strerror(-fd));
			return fd;
		}
		l = bpf_program__attach_perf_event(
		    s->compat ? s->skel->progs.gs_sample_compat : s->skel->progs.gs_sample, fd);
		if (!l) {
			rc = -errno;
			close(fd);
			errf(err, errlen, "attaching the sampling program to CPU %d failed: %s%s%s",
			     cpu, strerror(-rc), rc == -EPERM || rc == -EACCES ? ": " : "",
			     rc == -EPERM || rc == -EACCES ? perm_hint() : "");
			return rc;
		}
		s->cpu_links[s->n_cpu_links++] = l;
	}
	return 0;
}

static int attach_tracepoints(struct gs_sampler *s, char *err, size_t errlen)
{
	struct bpf_program *progs[] = {
		s->skel->progs.gs_proc_fork,    s->skel->progs.gs_proc_exec,
		s->skel->progs.gs_proc_exit_gd, s->skel->progs.gs_proc_exit_live,
		s->skel->progs.gs_off_switch,   s->skel->progs.gs_off_switch_compat,
		s->skel->progs.gs_off_waking,   s->skel->progs.gs_off_waking_compat,
	};
	int n = 0;

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_link *l;

		if (!bpf_program__autoload(progs[i]))
			continue;
		if (n == (int)(sizeof(s->tp_links) / sizeof(s->tp_links[0])))
			return -E2BIG;
		l = bpf_program__attach(progs[i]);
		if (!l) {
			int rc = -errno;

			errf(err, errlen, "attaching %s failed: %s",
			     bpf_program__section_name(progs[i]), strerror(-rc));
			return rc;
		}
		s->tp_links[n++] = l;
	}
	return 0;
}

int gs_sampler_start(struct gs_sampler *s, char *err, size_t errlen)
{
	int rc;

	if (s->started)
		return -EALREADY;
	if (!s->rb) {
		s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_ring_record, s,
					 NULL);
		if (!s->rb) {
			rc = -errno;
			errf(err, errlen, "cannot map the BPF ring buffer: %s", strerror(-rc));
			return rc;
		}
	}
	/* Process-tree handlers first, so no fork between here and the first
	 * sample goes unnoticed. */
	rc = attach_tracepoints(s, err, errlen);
	if (!rc)
		rc = attach_cpu_events(s, err, errlen);
	if (rc) {
		gs_sampler_stop(s);
		return rc;
	}
	s->started = true;
	return 0;
}

void gs_sampler_stop(struct gs_sampler *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n_cpu_links; i++)
		bpf_link__destroy(s->cpu_links[i]); /* closes the perf event fd too */
	free(s->cpu_links);
	s->cpu_links = NULL;
	s->n_cpu_links = 0;
	for (size_t i = 0; i < sizeof(s->tp_links) / sizeof(s->tp_links[0]); i++) {
		bpf_link__destroy(s->tp_links[i]);
		s->tp_links[i] = NULL;
	}
	s->started = false;
}

/* ---- reading ----------------------------------------------------------- */

int gs_sampler_poll(struct gs_sampler *s, int timeout_ms, gs_record_fn fn, void *ctx)
{
	int rc;

	if (!s->rb)
		return -EINVAL;
	s->fn = fn;
	s->fn_ctx = ctx;
	s->handled = 0;
	/* Samples are written without wakeups, so epoll only returns early for
	 * proc events (forced wakeups); consume everything afterwards either
	 * way.  A signal (EINTR) still drains. */
	rc = ring_buffer__poll(s->rb, timeout_ms);
	if (rc < 0 && rc != -EINTR)
		return rc;
	rc = ring_buffer__consume(s->rb);
	if (rc < 0)
		return rc;
	return s->handled;
}

void gs_sampler_stats(struct gs_sampler *s, struct gs_sampler_stats *st)
{
	int ncpu = libbpf_num_possible_cpus();
	struct gs_stats *per;
	uint64_t c[GS_STAT_MAX] = { 0 };
	__u32 zero = 0;

	memset(st, 0, sizeof(*st));
	if (ncpu <= 0)
		return;
	per = calloc(ncpu, sizeof(*per));
	if (!per)
		return;
	if (bpf_map__lookup_elem(s->skel->maps.stats, &zero, sizeof(zero), per, ncpu * sizeof(*per),
				 0) == 0) {
		for (int cpu = 0; cpu < ncpu; cpu++)
			for (int i = 0; i < GS_STAT_MAX; i++)
				c[i] += per[cpu].c[i];
	}
	free(per);
	st->samples = c[GS_STAT_SAMPLES];
	st->lost = c[GS_STAT_LOST] + c[GS_STAT_SCRATCH_ERR] + s->malformed;
	st->proc_events = c[GS_STAT_PROC_EVENTS];
	for (int i = 0; i < GS_UNWIND_NR; i++)
		st->unwind_err[i] = c[GS_STAT_UNWIND0 + i];
	st->py_errors = c[GS_STAT_PY_ERR];
	st->py_truncated = c[GS_STAT_PY_TRUNC];
	st->kstack_errors = c[GS_STAT_KSTACK_ERR];
	st->children_unfollowed = c[GS_STAT_TARGETS_FULL];
	st->off_stacks = c[GS_STAT_OFF_STACKS];
	st->off_ends = c[GS_STAT_OFF_ENDS];
	st->off_unsampled = c[GS_STAT_OFF_UNSAMPLED];
	st->off_threads_full = c[GS_STAT_OFF_THR_FULL];
	st->off_unseeded = c[GS_STAT_OFF_UNSEEDED];
	st->off_wakers = c[GS_STAT_OFF_WAKERS];
	st->gpu_records = c[GS_STAT_GPU_RECORDS];
	st->gpu_launches = c[GS_STAT_GPU_LAUNCHES];
	st->gpu_lost = c[GS_STAT_GPU_LOST];
	st->gpu_bad = c[GS_STAT_GPU_BAD];
	st->gpu_rate_limited = c[GS_STAT_GPU_RATE];
	st->step_marks = c[GS_STAT_STEP_MARKS];
	st->step_rate_limited = c[GS_STAT_STEP_RATE];
	st->step_lost = c[GS_STAT_STEP_LOST];
	st->gpu_mem_events = c[GS_STAT_MEM_EVENTS];
	st->gpu_mem_rate_limited = c[GS_STAT_MEM_RATE];
	st->gpu_mem_lost = c[GS_STAT_MEM_LOST];
}

/* ---- off-CPU accounting ------------------------------------------------ */

void gs_sampler_offcpu_window(struct gs_sampler *s, uint64_t t0_ns)
{
	s->skel->bss->offcpu_t0 = t0_ns;
}

int gs_sampler_offcpu_seed(struct gs_sampler *s, uint32_t tid, const struct gs_offcpu_thr *v)
{
	return bpf_map__update_elem(s->skel->maps.offcpu_thr, &tid, sizeof(tid), v, sizeof(*v),
				    BPF_NOEXIST);
}

int gs_sampler_offcpu_each(struct gs_sampler *s, gs_offcpu_thr_fn fn, void *ctx)
{
	struct bpf_map *m = s->skel->maps.offcpu_thr;
	struct gs_offcpu_thr v;
	uint32_t key, next;
	void *prev = NULL;
	int rc;

	while (bpf_map__get_next_key(m, prev, &next, sizeof(next)) == 0) {
		key = next;
		prev = &key;
		if (bpf_map__lookup_elem(m, &key, sizeof(key), &v, sizeof(v), 0))
			continue; /* deleted meanwhile (thread exit) */
		if ((rc = fn(ctx, key, &v)))
			return rc;
	}
	return 0;
}

void gs_sampler_close(struct gs_sampler *s)
{
	if (!s)
		return;
	gs_sampler_stop(s);
	if (s->target_filter)
		munmap(s->target_filter, GS_TFILTER_SLOTS * sizeof(uint64_t));
	ring_buffer__free(s->rb);
	gpusample_bpf__destroy(s->skel);
	free(s->prog_logs);
	free(s);
}

static long prog_insns(struct gs_sampler *s, int i, int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	const char *at;
	long n;

	if (s->prog_logs) {
		at = strstr(s->prog_logs + (size_t)i * GS_STATS_LOG, "processed ");
		if (at && sscanf(at, "processed %ld insns", &n) == 1)
			return n;
	}
	if (!bpf_obj_get_info_by_fd(fd, &info, &len) && info.verified_insns)
		return info.verified_insns;
	return -1;
}

int gs_sampler_prog_stats(struct gs_sampler *s, struct gs_prog_stat *out, int max)
{
	struct bpf_program *p;
	int n = 0, i = 0;

	bpf_object__for_each_program(p, s->skel->obj)
	{
		int fd = bpf_program__fd(p);

		if (fd >= 0 && n < max) {
			snprintf(out[n].name, sizeof(out[n].name), "%s", bpf_program__name(p));
			out[n].insns = prog_insns(s, i, fd);
			n++;
		}
		i++;
	}
	return n;
}

struct gpusample_bpf *gs_sampler_skel(struct gs_sampler *s)
{
	return s->skel;
}

bool gs_sampler_compat(struct gs_sampler *s)
{
	return s->compat;
}

const char *gs_sampler_event(struct gs_sampler *s)
{
	if (!s->cycles)
		return "cpu-clock";
	return s->cycles == s->n_cpu_links ? "cycles" : "cycles (cpu-clock on some CPUs)";
}


struct bpf_program *gs_sampler_mem_enter_prog(struct gs_sampler *s)
{
	return s->compat ? s->skel->progs.gs_mem_enter_compat : s->skel->progs.gs_mem_enter;
}

struct bpf_program *gs_sampler_launch_prog(struct gs_sampler *s)
{
	return s->compat ? s->skel->progs.gs_gpu_launch_compat : s->skel->progs.gs_gpu_launch;
}

struct bpf_program *gs_sampler_step_prog(struct gs_sampler *s, bool optimizer)
{
	return optimizer ? s->skel->progs.gs_step_opt : s->skel->progs.gs_step_mark;
}

int gs_sampler_prog_fds(struct gs_sampler *s, int *fds, int max)
{
	struct bpf_program *p;
	int n = 0;

	bpf_object__for_each_program(p, s->skel->obj)
	{
		int fd = bpf_program__fd(p);

		if (fd >= 0 && n < max - 1)
			fds[n++] = fd;
	}
	if (n < max)
		fds[n] = -1;
	return n;
}
