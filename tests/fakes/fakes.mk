# CUPTI + CUDA driver doubles for GPU-less tests of the GPU agent, and the
# host-side driver used by tests/integration/t_gpu_*.sh.  Included by the
# top-level Makefile (BUILD, CC, CFLAGS, TEST_HELPERS are defined there).
#
#   $(BUILD)/fakes/libcuda.so.1     driver double (SONAME libcuda.so.1)
#   $(BUILD)/fakes/libcupti.so.13   CUPTI double (SONAME libcupti.so.13)
#   $(BUILD)/fakes/gs_gpu_driver    attaches to the agent like gpusample does
#                                   (BPF + gpu/gpu_host.c) and summarizes
#   make gpu-cubins                 rebuild tests/fakes/cubins/*.cubin with nvcc
#                                   (committed, so CI needs no nvcc)

CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
FAKE_CFLAGS := -std=gnu11 -O1 -g -fPIC -Wall -Wextra -Wno-unused-parameter $(WERROR) \
	       -D_GNU_SOURCE -I$(CUDA_HOME)/include -Itests/fakes

$(BUILD)/fakes/libcuda.so.1: tests/fakes/fake_cuda.c tests/fakes/fake_drv.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ $< -lpthread -ldl

$(BUILD)/fakes/libcupti.so.13: tests/fakes/fake_cupti.c tests/fakes/fake_drv.h $(BUILD)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -fvisibility=hidden -shared -Wl,-soname,libcupti.so.13 -o $@ $< \
		$(BUILD)/fakes/libcuda.so.1 -Wl,-rpath,'$$ORIGIN' -lpthread -ldl

$(BUILD)/fakes/gs_gpu_driver: tests/fakes/gs_gpu_driver.c $(BUILD)/libgpusample_core.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgpusample_core.a $(STATIC_LIBS) $(SYS_LIBS)

GPU_CUBINS := tests/fakes/cubins/kernels.sm_90.cubin tests/fakes/cubins/kernels_lineinfo.sm_90.cubin
.PHONY: gpu-cubins
gpu-cubins: tests/fakes/kernels.cu
	$(NVCC) -arch=sm_90 -cubin -o tests/fakes/cubins/kernels.sm_90.cubin $<
	$(NVCC) -arch=sm_90 -cubin -lineinfo -o tests/fakes/cubins/kernels_lineinfo.sm_90.cubin $<

TEST_HELPERS += $(BUILD)/fakes/libcuda.so.1 $(BUILD)/fakes/libcupti.so.13 $(BUILD)/fakes/gs_gpu_driver

# A planted "libcupti" with a constructor (t_gpu_cupti_trust.sh).
$(BUILD)/fakes/planted/libcupti.so.13: tests/fakes/planted_cupti.c
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -shared -o $@ $< -ldl
TEST_HELPERS += $(BUILD)/fakes/planted/libcupti.so.13

# A libcupti that loops allocating with signals blocked (test_cuda: the
# wall around libcupti).
$(BUILD)/fakes/hostile/libcupti.so: tests/fakes/hostile_cupti.c
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -shared -o $@ $<
TEST_HELPERS += $(BUILD)/fakes/hostile/libcupti.so
$(BUILD)/tests/test_cuda: | $(BUILD)/fakes/hostile/libcupti.so

# The agent and the CUPTI double built with AddressSanitizer, for the GPU
# test leg that runs under it (t_gpu_exit_asan.sh: the test preloads the ASan
# runtime these link against).  The driver double stays uninstrumented: the
# CUPTI double's DT_NEEDED libcuda.so.1 is the one the app already loaded.
ASAN_FLAGS := -fsanitize=address -fno-omit-frame-pointer
$(BUILD)/fakes/asan/libgpusample_agent.so: $(AGENT_SRCS) $(wildcard gpu_sampler/*.h) include/gpusample/records.h include/gpusample/stall.h util/hash.h util/vec.h util/hashmap.h
	@mkdir -p $(dir $@)
	$(CC) $(AGENT_CFLAGS) $(ASAN_FLAGS) -shared -o $@ $(AGENT_SRCS)

$(BUILD)/fakes/asan/libcupti.so.13: tests/fakes/fake_cupti.c tests/fakes/fake_drv.h $(BUILD)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) $(ASAN_FLAGS) -fvisibility=hidden -shared -Wl,-soname,libcupti.so.13 -o $@ $< \
		$(BUILD)/fakes/libcuda.so.1 -Wl,-rpath,'$$ORIGIN/..' -lpthread -ldl
TEST_HELPERS += $(BUILD)/fakes/asan/libgpusample_agent.so $(BUILD)/fakes/asan/libcupti.so.13
