#!/usr/bin/env python3
"""Device kit workload: a training-shaped loop whose step time is measured.

  workload.py torch  [--steps N] [--wait-armed AGENT] [--out FILE]
      PyTorch on CUDA: MLP forward + backward + SGD, synchronized steps.
  workload.py driver LIBCUDA CUBIN_DIR [--steps N] [--wait-armed AGENT] [--out FILE]
      the CUDA/CUPTI double (dry run): axpy / reduce_sum / scale launched
      through the driver API from named Python functions, 3 per step.

--wait-armed AGENT: before the timed loop, run warm-up steps until the
gpusample agent (injected with CUDA_INJECTION64_PATH=AGENT) reports armed
(its exported gs_agent_armed), at most 60 s; without it, time at once.
--after-disarm FILE (with --wait-armed): after the timed loop, create FILE
(the check then detaches gpusample), run steps until the agent reports
disarmed (at most 60 s) and time N more steps.
Appends "LABEL step_ms MEDIAN steps N armed_wait_s S" (and, after a
disarm, "LABEL-after-disarm step_ms MEDIAN steps N disarm_wait_s S") to
--out (and stdout); LABEL is --label (default "run").
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("backend", choices=("torch", "driver"))
p.add_argument("libcuda", nargs="?")
p.add_argument("cubins", nargs="?")
p.add_argument("--steps", type=int, default=200)
p.add_argument("--wait-armed", default=None)
p.add_argument("--out", default=None)
p.add_argument("--label", default="run")
p.add_argument("--after-disarm", default=None)
args = p.parse_args()


def torch_step_fn():
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.GELU(),
                          nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(1024, 2048, device="cuda")
    y = torch.randn(1024, 1024, device="cuda")

    def forward():
        return nn.functional.mse_loss(model(x), y)

    def backward(loss):
        loss.backward()

    def optimizer_step():
        opt.step()
        opt.zero_grad(set_to_none=True)

    def train_step():
        loss = forward()
        backward(loss)
        optimizer_step()
        torch.cuda.synchronize()
    return train_step


def driver_step_fn():
    cu = ctypes.CDLL(args.libcuda)
    vp = ctypes.c_void_p

    def check(rc, what):
        if rc != 0:
            sys.exit(f"workload: {what} failed: CUresult {rc}")
    check(cu.cuInit(0), "cuInit")
    ctx = vp()
    check(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0), "cuCtxCreate")
    images, mods = [], []
    for name in ("kernels_lineinfo.sm_90.cubin", "kernels.sm_90.cubin"):
        with open(os.path.join(args.cubins, name), "rb") as f:
            images.append(ctypes.create_string_buffer(f.read()))
        m = vp()
        check(cu.cuModuleLoadData(ctypes.byref(m), images[-1]), "cuModuleLoadData")
        mods.append(m)
    fns = {}
    for mod, name in ((mods[0], b"axpy"), (mods[1], b"_Z10reduce_sumPKfPfi"),
                      (mods[1], b"_Z5scaleIfEvPT_S0_i")):
        fn = vp()
        check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name), "cuModuleGetFunction")
        fns[name] = fn

    def launch(name):
        check(cu.cuLaunchKernel(fns[name], 64, 1, 1, 256, 1, 1, 0, None, None, None), "cuLaunchKernel")

    def forward():
        launch(b"axpy")
        launch(b"_Z5scaleIfEvPT_S0_i")

    def backward():
        launch(b"_Z10reduce_sumPKfPfi")

    def train_step():
        forward()
        backward()
        time.sleep(0.002)   # ~3 launches per 2 ms, like the doubles' tests
    return train_step


step = torch_step_fn() if args.backend == "torch" else driver_step_fn()
for _ in range(5):
    step()                  # warm-up: kernels loaded, caches filled
wait = 0.0
if args.wait_armed:
    try:
        agent = ctypes.CDLL(args.wait_armed, mode=os.RTLD_NOLOAD)
        armed = ctypes.c_uint32.in_dll(agent, "gs_agent_armed")
    except (OSError, ValueError) as e:
        sys.exit(f"workload: agent {args.wait_armed} not loaded in this process ({e}): "
                 "is CUDA_INJECTION64_PATH set?")
    t0 = time.monotonic()
    while not armed.value:
        if time.monotonic() - t0 > 60:
            sys.exit("workload: the agent did not report armed within 60 s")
        step()
    wait = time.monotonic() - t0


def timed():
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def report(line):
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


report(f"{args.label} step_ms {timed():.3f} steps {args.steps} armed_wait_s {wait:.2f}")
if args.wait_armed and args.after_disarm:
    open(args.after_disarm, "w").close()
    t0 = time.monotonic()
    while armed.value:
        if time.monotonic() - t0 > 60:
            sys.exit("workload: the agent did not report disarmed within 60 s")
        step()
    wait = time.monotonic() - t0
    report(f"{args.label}-after-disarm step_ms {timed():.3f} steps {args.steps} "
           f"disarm_wait_s {wait:.2f}")
