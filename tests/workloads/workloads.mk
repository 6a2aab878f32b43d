# Extra workload rules (included by the Makefile).
#
# CFI unwinder workloads: built -O2 -fomit-frame-pointer so that only .eh_frame
# unwinding can follow them.  nofp_chain calls into libnofp.so (rpath $ORIGIN).
# GCC's code whatever CC is (make asan builds with clang): test_cfi expects
# the rows GCC writes (a DRAP realignment, the PLT).
NOFP_CFLAGS := -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls -fasynchronous-unwind-tables
NOFP_CC := gcc

$(BUILD)/workloads/libnofp.so: tests/workloads/nofp/libnofp.c
	@mkdir -p $(dir $@)
	$(NOFP_CC) $(NOFP_CFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/workloads/nofp_%: tests/workloads/nofp_%.c $(BUILD)/workloads/libnofp.so
	@mkdir -p $(dir $@)
	$(NOFP_CC) $(NOFP_CFLAGS) -o $@ $< -L$(BUILD)/workloads -lnofp -Wl,-rpath,'$$ORIGIN' -lpthread -lm

# CFI test driver: its own small BPF object including bpf/unwind.bpf.h, plus
# native/cfi.c and native/cfi_rows.c compiled in directly so it does not depend on the sampler's object;
# the core archive after it supplies proc/ (maps reader, ELF objects).
$(BUILD)/cfi_probe.bpf.o: tests/cfi/cfi_probe.bpf.c $(BPF_HDRS) bpf/cfi.h $(BUILD)/vmlinux.h
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/tests/cfi_probe: tests/cfi/cfi_probe.c native/cfi.c native/cfi_rows.c bpf/cfi.h native/cfi_int.h $(BUILD)/cfi_probe.skel.h $(BUILD)/libgpusample_core.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ tests/cfi/cfi_probe.c native/cfi.c native/cfi_rows.c $(BUILD)/libgpusample_core.a $(STATIC_LIBS) $(SYS_LIBS)

TEST_HELPERS += $(BUILD)/workloads/libnofp.so $(BUILD)/tests/cfi_probe

# Symbolizer tests: a C++ shared library (demangling, deleted mappings) that
# sym_inline dlopens; test_symbolizer finds both next to the workloads.
$(BUILD)/workloads/libsym_cxx.so: tests/workloads/sym_cxx.cpp
	@mkdir -p $(dir $@)
	g++ -O1 -g -fPIC -shared -fno-omit-frame-pointer -o $@ $<
TEST_HELPERS += $(BUILD)/workloads/libsym_cxx.so
$(BUILD)/tests/test_symbolizer: | $(BUILD)/workloads/sym_inline $(BUILD)/workloads/libsym_cxx.so

# test_cfi compares rows of libnofp.so with readelf.
$(BUILD)/tests/test_cfi: $(BUILD)/workloads/libnofp.so
# the same workload from clang: DWARF 5 without .debug_aranges, file index 0
$(BUILD)/workloads/sym_inline_clang: tests/workloads/sym_inline.c
	@mkdir -p $(dir $@)
	$(CLANG) -O1 -g -fno-omit-frame-pointer -o $@ $<
TEST_HELPERS += $(BUILD)/workloads/sym_inline_clang
$(BUILD)/tests/test_symbolizer: | $(BUILD)/workloads/sym_inline_clang
# libsym_cxx.so without DWARF, which lives in a .gnu_debuglink file beside it
$(BUILD)/workloads/libsym_cxx_dl.so: $(BUILD)/workloads/libsym_cxx.so
	objcopy --only-keep-debug $< $@.debug
	objcopy --strip-debug --add-gnu-debuglink=$@.debug $< $@
TEST_HELPERS += $(BUILD)/workloads/libsym_cxx_dl.so
$(BUILD)/tests/test_symbolizer: | $(BUILD)/workloads/libsym_cxx_dl.so

# CPU sampler: test_sampler runs build/workloads/fp_chain.
$(BUILD)/tests/test_sampler: | $(BUILD)/workloads/fp_chain
