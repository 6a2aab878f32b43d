# gpusample — build, test, demo, install.
#   make            build/gpusample, build/libgpusample_agent.so, test helpers
#   make deps       install what building needs (root); make test-deps: the tests' too
#   make test       unit + integration tests (integration needs root)
#   make demo       profile the bundled training-like workload, print the report
#   make bench      benchmarks against peers (bench/README.md)
#   make install PREFIX=/usr/local
#   make compat     build/compat/: gpusample and the agent for glibc >= 2.31 (root)
#   make deb        build/gpusample_VERSION_ARCH.deb of the compat build (root)
#
# Sources are picked up by directory: every cli/ bpf/ symbolizer/ output/ *.c
# (except *.bpf.c) goes into gpusample; gpu_sampler/*.c into the agent.

PREFIX  ?= /usr/local
BUILD   ?= build
CC      ?= gcc
CLANG   ?= clang
BPFTOOL ?= bpftool
VERSION := 0.1.0

WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers $(WERROR) \
	   -D_GNU_SOURCE -DGS_VERSION=\"$(VERSION)\" -Iinclude -I. -I$(BUILD) -fno-omit-frame-pointer
ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
STATIC_LIBS_MODE :=
else ifeq ($(SANITIZE),fuzz)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
STATIC_LIBS_MODE :=
else
STATIC_LIBS_MODE := -Wl,-Bstatic
endif

# libbpf, libdw, libelf, zlib (and libdw's compressors) statically, libc dynamic.
STATIC_LIBS := $(STATIC_LIBS_MODE) -lbpf -ldw -lelf -lz -llzma -lbz2 -lzstd -liberty -Wl,-Bdynamic
SYS_LIBS    := -lpthread -ldl -lm

ARCH := x86
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -I$(BUILD) -Ibpf -I/usr/include/$(shell uname -m)-linux-gnu -Wall -Wno-unused-function

CORE_DIRS := util proc bpf native python gpu symbolizer session output inject dump
CORE_SRCS := $(filter-out %.bpf.c,$(foreach d,$(CORE_DIRS),$(wildcard $(d)/*.c)))
CLI_SRCS  := $(wildcard cli/*.c)
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_HDRS  := $(wildcard bpf/*.bpf.h) $(wildcard include/gpusample/*.h)
SKELS     := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/%.skel.h)

AGENT_SRCS := $(wildcard gpu_sampler/*.c) util/hashmap.c
AGENT      := $(BUILD)/libgpusample_agent.so

.PHONY: all deps test-deps test unit integration demo bench bench-tools install deb compat clean asan fuzz fuzz-build \
	format format-check compile_commands.json
# Keep generated BPF objects and skeletons: they are inputs of every object.
.SECONDARY:
all: $(BUILD)/gpusample $(AGENT) test-helpers

deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok: scripts/install-deps.sh
	./scripts/install-deps.sh build
	@mkdir -p $(BUILD) && touch $@
test-deps: $(BUILD)/.test-deps-ok
$(BUILD)/.test-deps-ok: scripts/install-deps.sh
	./scripts/install-deps.sh test
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/vmlinux.h:
	@mkdir -p $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) $(BUILD)/vmlinux.h
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# Header dependencies come from the compiler (-MMD -MP): touching one .c or a
# header rebuilds only what includes it.  Skeletons are order-only: they must
# exist before any compile, and the .d files track who includes them.
$(BUILD)/obj/%.o: %.c | $(SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@
-include $(CORE_OBJS:.o=.d) $(CLI_OBJS:.o=.d)

# The HTML report's script and style (output/html_report.js, .css) are
# files of their own (linted and tested as such) compiled into gpusample as
# byte arrays: $(BUILD)/html_assets.h, included by output/html.c.
HTML_ASSETS := output/html_report.js output/html_report.css
$(BUILD)/html_assets.h: $(HTML_ASSETS)
	@mkdir -p $(BUILD)
	{ for a in js css; do printf 'static const unsigned char gs_html_%s[] = {\n' $$a; \
	  od -An -v -tx1 output/html_report.$$a | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  printf '0};\n'; done; } > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/output/html.o: $(BUILD)/html_assets.h

$(BUILD)/libgpusample_core.a: $(CORE_OBJS)
	@rm -f $@
	ar rcs $@ $^

# Full RELRO (bind now): the GOT is read-only before main, in gpusample (root,
# reading target-controlled data) and in the agent (inside the job).
RELRO := -Wl,-z,relro,-z,now
$(BUILD)/gpusample: $(CLI_OBJS) $(BUILD)/libgpusample_core.a
	$(CC) $(LDFLAGS) $(RELRO) -o $@ $(CLI_OBJS) $(BUILD)/libgpusample_core.a $(STATIC_LIBS) $(SYS_LIBS)

# The agent: C only, libc only; of util/ only the libc-only pieces (hash.h,
# vec.h, hashmap.c).  dlopen and pthread_create are in libc since glibc
# 2.34; the compat build (glibc 2.31) finds them in libdl and libpthread,
# linked only where needed (--as-needed).
CUDA_INC ?= /usr/local/cuda/include
AGENT_LIBS := -Wl,--as-needed -ldl -lpthread -Wl,--no-as-needed
AGENT_CFLAGS := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter $(WERROR) \
		-D_GNU_SOURCE -Iinclude -I. -Igpu_sampler -I$(CUDA_INC)
$(AGENT): $(AGENT_SRCS) $(wildcard gpu_sampler/*.h) include/gpusample/records.h include/gpusample/stall.h util/hash.h util/vec.h util/hashmap.h
	@mkdir -p $(BUILD)
	@test -f $(CUDA_INC)/cupti.h || { echo "the GPU agent needs CUDA's headers (cupti.h) in $(CUDA_INC):" \
		"install the CUDA toolkit there, or make CUDA_INC=DIR" >&2; exit 1; }
	$(if $(AGENT_SRCS),$(CC) $(AGENT_CFLAGS) -shared -o $@ $(AGENT_SRCS) -Wl$(comma)--no-undefined -Wl$(comma)-z$(comma)defs $(RELRO) $(AGENT_LIBS),touch $@)
comma := ,

# ---- tests ---------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
# Criterion tests of the outputs that run real viewers (node, speedscope in
# headless Chromium): integration tests (t_viewers.sh runs them), not units.
VIEWER_SRCS := $(wildcard tests/viewers/test_*.c)
VIEWER_BINS := $(VIEWER_SRCS:tests/viewers/%.c=$(BUILD)/tests/viewers/%)
WORKLOAD_SRCS := $(wildcard tests/workloads/*.c)
WORKLOAD_BINS := $(WORKLOAD_SRCS:tests/workloads/%.c=$(BUILD)/workloads/%)

# Test helper programs and fakes (GPU double etc.) are added here by their
# owners.  Unit-test binaries are not in `all`: each links the static
# libraries (about 2 s apiece), so `make` after touching one .c stays at a
# second; `make unit`, `make test` and `make asan` build them.
TEST_HELPERS := $(WORKLOAD_BINS)
# bench/*.c: benchmark programs over the core archive (bench/outputs.sh);
# like unit tests, built on demand: `make bench-tools` (and `make bench`).
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
-include tests/fakes/fakes.mk
-include tests/gpu/devkit.mk
-include tests/workloads/workloads.mk
-include tests/unit/cuda/cuda.mk

test-helpers: $(TEST_HELPERS)

# Unit tests may also test cli/ functions (options, /proc parsing): the cli
# objects but main go into an archive linked before the core, so a test pulls
# in only what it calls.
$(BUILD)/libgpusample_cli.a: $(filter-out $(BUILD)/obj/cli/main.o,$(CLI_OBJS))
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libgpusample_cli.a $(BUILD)/libgpusample_core.a $(SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgpusample_cli.a $(BUILD)/libgpusample_core.a -lcriterion $(STATIC_LIBS) $(SYS_LIBS)

# test_gpu_host maps the agent (never runs it) to be found in its own maps.
$(BUILD)/tests/test_gpu_host: | $(AGENT)

$(BUILD)/tests/viewers/%: tests/viewers/%.c $(BUILD)/libgpusample_cli.a $(BUILD)/libgpusample_core.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgpusample_cli.a $(BUILD)/libgpusample_core.a -lcriterion $(STATIC_LIBS) $(SYS_LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libgpusample_core.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgpusample_core.a $(STATIC_LIBS) $(SYS_LIBS)

# Default workload flags: frame pointers (the FP-unwinding tests rely on them);
# workloads.mk overrides per binary where a test needs -fomit-frame-pointer.
$(BUILD)/workloads/%: tests/workloads/%.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline -o $@ $< -lpthread -lm

unit: $(UNIT_BINS)
	@./tests/run_unit.sh $(UNIT_BINS)

integration: test-deps all $(VIEWER_BINS)
	@./tests/integration/run.sh

# Unit tests, then integration tests (root: real eBPF on real processes).
test: test-deps all $(UNIT_BINS) $(VIEWER_BINS)
	@./tests/run_all.sh $(UNIT_BINS)

# clang: its UBSan also stops on pointer arithmetic on NULL (an empty
# array's &a[0]), which GCC's lets through and the clang fuzz build finds.
asan:
	$(MAKE) BUILD=build-asan SANITIZE=1 CC=$(CLANG) all $(UNIT_SRCS:tests/unit/%.c=build-asan/tests/%)
	./tests/run_unit.sh $(UNIT_SRCS:tests/unit/%.c=build-asan/tests/%)

# ---- fuzzing ----------------------------------------------------------------
# fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput; it is linked against the
# core archive built by clang with -fsanitize=fuzzer-no-link,address,undefined
# in build-fuzz/, and runs FUZZ_SECONDS on its seeds fuzz/corpus/<name>/
# (fuzz/run.sh: new inputs in build-fuzz/corpus/<name>/, findings in
# build-fuzz/crashes/<name>/ fail the run).  New harnesses are picked up.
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := build-fuzz
FUZZ_SRCS    := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS    := $(FUZZ_SRCS:fuzz/%.c=$(FUZZ_BUILD)/fuzz/%)

fuzz-build:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(CLANG) SANITIZE=fuzz WERROR= $(FUZZ_BINS)

$(FUZZ_BUILD)/fuzz/%: fuzz/%.c $(FUZZ_BUILD)/libgpusample_core.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_BUILD)/libgpusample_core.a $(STATIC_LIBS) $(SYS_LIBS)

fuzz: fuzz-build
	./fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

# ---- developer habits ---------------------------------------------------------
# clang-format (.clang-format) over every C file we own; format-check fails
# listing the files that differ, format rewrites them.
FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' 2>/dev/null | grep -v '^tests/node_modules/')
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	@bad=$$(for f in $(FORMAT_SRCS); do clang-format "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted (run make format):"; echo "$$bad"; exit 1; fi

# The compilation database for clangd/clang-tidy, from the variables above.
compile_commands.json:
	@CC='$(CC)' FLAGS='$(CFLAGS) -MMD -MP' SRCS='$(CORE_SRCS) $(CLI_SRCS) $(UNIT_SRCS) $(VIEWER_SRCS) $(WORKLOAD_SRCS)' \
	AFLAGS='$(AGENT_CFLAGS)' ASRCS='$(AGENT_SRCS)' CLANG='$(CLANG)' BFLAGS='$(BPF_CFLAGS)' \
	BSRCS='$(BPF_SRCS)' ./scripts/compile-db.py > $@.tmp && mv $@.tmp $@

demo: deps all
	./scripts/install-deps.sh demo
	./scripts/demo.sh

bench-tools: $(BENCH_BINS)

bench: test-deps all bench-tools
	GS_BENCH_DEPS=1 ./scripts/install-deps.sh test
	./bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/gpusample
	install -m 0755 $(BUILD)/gpusample $(DESTDIR)$(PREFIX)/bin/gpusample
	install -m 0755 $(AGENT) $(DESTDIR)$(PREFIX)/lib/gpusample/libgpusample_agent.so

# The man page (packaging/gpusample.1, from README.md's Usage) and the
# Debian package (scripts/build-deb.sh: dpkg-shlibdeps, dpkg-deb).
$(BUILD)/gpusample.1: packaging/gpusample.1
	@mkdir -p $(BUILD)
	sed -e 's/@VERSION@/$(VERSION)/' -e "s/@DATE@/$$(git log -1 --format=%cs 2>/dev/null || date +%F)/" $< > $@
# The package holds the compat build: gpusample and the agent compiled in
# a Debian 11 root (scripts/build-compat.sh), asking for no glibc newer than
# 2.31, so they run on, and load into jobs of, Debian 11 / Ubuntu 20.04 and
# newer.  Both need root (a chroot) and the root (make test-deps, or built
# on the first run: about 4 minutes, 430 MB in /var/cache/gpusample).
compat: $(SKELS) $(BUILD)/html_assets.h
	./scripts/build-compat.sh $(BUILD)
deb: compat $(BUILD)/gpusample.1
	GS_SHLIBDEPS_ROOT=$${GS_BULLSEYE_ROOT:-/var/cache/gpusample/bullseye-root} \
		./scripts/build-deb.sh $(BUILD) $(VERSION) $(BUILD)/compat

clean:
	rm -rf $(BUILD) build-asan $(FUZZ_BUILD)
