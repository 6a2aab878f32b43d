# `make devkit`: build/devkit, everything the GPU device check needs on a
# host that has only a driver, Python and PyTorch (no compiler, no bpftool,
# no Go): the gpusample binary (libbpf, libdw, libelf linked in; libc only),
# the agent, pcsamp_probe (CUPTI PC sampling alone), the workload, the
# check script, the doubles' cubins, and the CUDA/CUPTI doubles for a dry
# run here (build/devkit/check.sh --double).  Included by the Makefile.
DEVKIT := $(BUILD)/devkit
.PHONY: devkit
devkit: $(BUILD)/gpusample $(AGENT) $(BUILD)/fakes/libcuda.so.1 $(BUILD)/fakes/libcupti.so.13 \
	tests/gpu/devkit/check.sh tests/gpu/devkit/workload.py tests/gpu/devkit/pcsamp_probe.c $(GPU_CUBINS)
	@mkdir -p $(DEVKIT)/double $(DEVKIT)/cubins
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra $(WERROR) -D_GNU_SOURCE -I$(CUDA_HOME)/include \
		-o $(DEVKIT)/pcsamp_probe tests/gpu/devkit/pcsamp_probe.c -ldl -lpthread
	cp $(BUILD)/gpusample $(AGENT) tests/gpu/devkit/check.sh tests/gpu/devkit/workload.py $(DEVKIT)/
	cp $(GPU_CUBINS) $(DEVKIT)/cubins/
	cp $(BUILD)/fakes/libcuda.so.1 $(BUILD)/fakes/libcupti.so.13 $(DEVKIT)/double/
	@echo "devkit: $(DEVKIT) ($$(du -sh $(DEVKIT) | cut -f1)); on the GPU host: sudo ./check.sh"
