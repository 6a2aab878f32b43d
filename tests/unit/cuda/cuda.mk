# Fixture cubins for tests/unit/test_cuda.c (included from the Makefile).
# With nvcc, build them fresh from kernels.cu (sm_90, with and without
# -lineinfo); without it, use the committed copies.  `make cuda-fixtures`
# refreshes the committed copies after kernels.cu changes.
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
CUDA_FIX_DIR := $(BUILD)/cuda
CUDA_FIXTURES := $(CUDA_FIX_DIR)/kernels_li.cubin $(CUDA_FIX_DIR)/kernels_noli.cubin

ifneq ($(NVCC),)
$(CUDA_FIX_DIR)/kernels_li.cubin: tests/unit/cuda/kernels.cu
	@mkdir -p $(dir $@)
	$(NVCC) -cubin -arch=sm_90 -lineinfo -o $@ $<
$(CUDA_FIX_DIR)/kernels_noli.cubin: tests/unit/cuda/kernels.cu
	@mkdir -p $(dir $@)
	$(NVCC) -cubin -arch=sm_90 -o $@ $<
else
$(CUDA_FIX_DIR)/%.cubin: tests/unit/cuda/%.cubin
	@mkdir -p $(dir $@)
	cp $< $@
endif

.PHONY: cuda-fixtures
cuda-fixtures: $(CUDA_FIXTURES)
	cp $(CUDA_FIXTURES) tests/unit/cuda/

# The test binaries read the fixtures from here; the real CUPTI header (when
# installed) lets test_cuda check the struct mirrors in symbolizer/.
CUDA_FIX_CFLAGS := -DGS_CUDA_FIXTURES=\"$(CUDA_FIX_DIR)\" -DGS_CUDA_SOURCE=\"tests/unit/cuda/kernels.cu\"
$(BUILD)/tests/test_cuda $(BUILD)/tests/test_join_pprof: $(CUDA_FIXTURES)
$(BUILD)/tests/test_join_pprof: private CFLAGS += $(CUDA_FIX_CFLAGS)
$(BUILD)/tests/test_cuda: private CFLAGS += $(CUDA_FIX_CFLAGS) \
	$(if $(wildcard /usr/local/cuda/include/cupti_pcsampling.h),-isystem /usr/local/cuda/include)
TEST_HELPERS += $(CUDA_FIXTURES)
