#!/usr/bin/env python3
"""A PyTorch-shaped CUDA program for the CUDA/CUPTI doubles.

Launches real sm_90 cubin kernels through the driver double's cuLaunchKernel
(ctypes), from named Python functions, so launch-site stacks have Python
frames.  Every step: train_step -> forward -> axpy; train_step -> backward ->
reduce_sum; and scale<float> from two call sites, 3:1: forward on 3 steps in
4, optimizer_step on the 4th (a kernel whose samples must split 3:1).  With CUDA_INJECTION64_PATH set the
driver double loads the gpusample agent in cuInit, as the real driver does.

With --primary the contexts are the devices' primary contexts
(cuDevicePrimaryCtxRetain), as the CUDA runtime (PyTorch) uses them.  With
--kineto-dir DIR a torch.profiler (Kineto) stand-in shares the process: it
subscribes to CUPTI (GS_CUPTI_PATH) as "Kineto" when asked through files in
DIR (see Kineto below).

usage: gpu_app.py LIBCUDA CUBIN_DIR [--seconds S] [--rate LAUNCHES_PER_S]
                  [--devices N] [--contexts N] [--start-file F] [--stop-file F]
                  [--primary] [--green] [--kineto-dir DIR] [--keep-contexts]
                  [--idle-file F]
Prints one line "gpu_app launches=N contexts=N primary_created=N green_refused=N" at exit;
exit status 0.
"""
import argparse
import ctypes
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("libcuda")
p.add_argument("cubins")
p.add_argument("--seconds", type=float, default=3.0)
p.add_argument("--rate", type=float, default=1000.0)
p.add_argument("--devices", type=int, default=1)
p.add_argument("--contexts", type=int, default=0,
               help="contexts, round-robin over the devices (default: one per device)")
p.add_argument("--start-file", default=None, help="touch this file once kernels are loaded")
p.add_argument("--stop-file", default=None, help="stop launching once this file exists")
p.add_argument("--late-module", type=float, default=0,
               help="load twins of the -lineinfo cubin as new modules from this many seconds "
               "into the run, one every 0.3 s")
p.add_argument("--late-count", type=int, default=1, help="how many late modules (distinct twins)")
p.add_argument("--twin", action="store_true",
               help="also load a twin of the -lineinfo cubin with one byte of axpy's code "
               "flipped, and launch its axpy from twin_forward (a near-identical cubin)")
p.add_argument("--primary", action="store_true",
               help="use the devices' primary contexts, as the CUDA runtime does")
p.add_argument("--green", action="store_true",
               help="use green contexts (cuGreenCtxCreate, cuCtxFromGreenCtx), current on this "
               "thread only")
p.add_argument("--kineto-dir", default=None, help="a Kineto stand-in driven by files in this folder")
p.add_argument("--idle-file", default=None,
               help="launch nothing while this file exists (a job gone quiet)")
p.add_argument("--keep-contexts", action="store_true",
               help="exit with the contexts and modules alive (the driver double destroys them "
               "at exit with FAKE_CUDA_EXIT_DESTROY=1)")
args = p.parse_args()

cu = ctypes.CDLL(args.libcuda)
vp = ctypes.c_void_p


def check(rc, what):
    if rc != 0:
        sys.exit(f"gpu_app: {what} failed: CUresult {rc}")


check(cu.cuInit(0), "cuInit")
n = ctypes.c_int()
check(cu.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
ndev = min(n.value, args.devices)
nctx = args.contexts or ndev

images = []
for name in ("kernels_lineinfo.sm_90.cubin", "kernels.sm_90.cubin"):
    with open(os.path.join(args.cubins, name), "rb") as f:
        images.append(ctypes.create_string_buffer(f.read()))

def twin_of(image, k=0):
    """The image with one byte (the k-th after the middle) of its .text.axpy section flipped."""
    import struct
    b = bytearray(image)
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    def sh(i):
        return struct.unpack_from("<IIQQQQ", b, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = sh(i)
        end = b.index(b"\0", stroff + name)
        if b[stroff + name:end] == b".text.axpy":
            b[off + size // 2 + k] ^= 0x01
            return ctypes.create_string_buffer(bytes(b), len(b))
    sys.exit("gpu_app: no .text.axpy in the -lineinfo cubin")


if args.twin or args.late_module:
    twin_image = twin_of(images[0].raw)
late_images = [twin_of(images[0].raw, 1 + k) for k in range(args.late_count if args.late_module else 0)]
if args.twin:
    images.append(twin_image)

ctxs, funcs = [], []
if args.primary:
    nctx = ndev  # one primary context per device
for i in range(nctx):
    ctx = vp()
    if args.primary:
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), i), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    elif args.green:
        green = vp()
        check(cu.cuGreenCtxCreate(ctypes.byref(green), None, i % ndev, 1), "cuGreenCtxCreate")
        check(cu.cuCtxFromGreenCtx(ctypes.byref(ctx), green), "cuCtxFromGreenCtx")
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    else:
        check(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, i % ndev), "cuCtxCreate")
    mods = []
    for img in images:
        m = vp()
        check(cu.cuModuleLoadData(ctypes.byref(m), img), "cuModuleLoadData")
        mods.append(m)
    fs = {}
    # axpy from the -lineinfo cubin, the others from the plain one
    for mod, name in ((mods[0], b"axpy"), (mods[1], b"_Z10reduce_sumPKfPfi"),
                      (mods[1], b"_Z5scaleIfEvPT_S0_i")):
        fn = vp()
        check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name), "cuModuleGetFunction")
        fs[name] = fn
    if args.twin:
        fn = vp()
        check(cu.cuModuleGetFunction(ctypes.byref(fn), mods[2], b"axpy"), "cuModuleGetFunction")
        fs[b"twin_axpy"] = fn
    ctxs.append((ctx, mods))
    funcs.append(fs)

launches = 0


class SubscriberParams(ctypes.Structure):
    """CUpti_SubscriberParams; allowMultipleSubscribers is CUPTI 13.2's."""
    _fields_ = [("structSize", ctypes.c_size_t), ("subscriberName", ctypes.c_char_p),
                ("oldSubscriberName", ctypes.c_void_p), ("oldSubscriberSize", ctypes.c_size_t),
                ("allowMultipleSubscribers", ctypes.c_uint8)]


class Kineto:
    """torch.profiler's CUPTI client, as far as subscribing goes: a
    cuptiSubscribe_v2 as "Kineto" (CUPTI names it "CUPTI for Kineto") with
    the cuLaunchKernel driver callback on, counting the callbacks it gets.
    Driven by files the test creates in DIR, each removed once done and
    answered by a line in DIR/log:
      sub        subscribe now            -> "sub rc=N old=NAME"
      sub_armed  subscribe once the gpusample agent is armed (gs_agent_armed)
      unsub      unsubscribe              -> "unsub rc=N callbacks=N"
      unsub_refused  unsubscribe once someone else was refused CUPTI since
                 the stand-in subscribed (the CUPTI double's call count)
    A sub or sub_armed file that says "multi" asks for CUPTI 13.2's
    multi-subscriber mode (allowMultipleSubscribers=1; honoured from CUPTI
    13.3 on an r610+ driver).
    """
    CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

    def __init__(self, folder):
        self.dir = folder
        # a job started without gpusample (t_gpu_inject): the loader's path
        self.cupti = ctypes.CDLL(os.environ.get("GS_CUPTI_PATH", "libcupti.so.13"))
        agent = os.environ.get("CUDA_INJECTION64_PATH")
        self.agent = ctypes.CDLL(agent) if agent else None
        self.h = vp()
        self.calls = 0
        self.cb = self.CB(self.on_callback)
        self.cupti.fake_cupti_calls.restype = ctypes.c_uint64
        self.subscribes = 0  # cuptiSubscribe calls in the process when we subscribed

    def on_callback(self, ud, domain, cbid, data):
        self.calls += 1

    def log(self, line):
        with open(os.path.join(self.dir, "log"), "a") as f:
            f.write(line + "\n")

    def subscribe(self, multi):
        old = ctypes.create_string_buffer(64)
        sp = SubscriberParams(32 + multi, b"Kineto", ctypes.cast(old, ctypes.c_void_p), 64, multi)
        rc = self.cupti.cuptiSubscribe_v2(ctypes.byref(self.h), self.cb, None, ctypes.byref(sp))
        if rc == 0:
            self.calls = 0
            self.subscribes = self.cupti.fake_cupti_calls(b"cuptiSubscribe")
            self.cupti.cuptiEnableCallback(1, self.h, 1, 307)  # DRIVER_API, cuLaunchKernel
        self.log(f"sub rc={rc} old={old.value.decode().replace(' ', '_') or '-'}")

    def poll(self):
        for name in ("sub", "sub_armed", "unsub", "unsub_refused"):
            path = os.path.join(self.dir, name)
            if not os.path.exists(path):
                continue
            if name == "sub_armed" and not (self.agent and ctypes.c_uint32.in_dll(self.agent, "gs_agent_armed").value):
                continue  # asked again at the next poll
            if name == "unsub_refused" and self.cupti.fake_cupti_calls(b"cuptiSubscribe") <= self.subscribes:
                continue
            with open(path) as f:
                multi = 1 if f.read().strip() == "multi" else 0
            os.remove(path)
            if name.startswith("unsub"):
                rc = self.cupti.cuptiUnsubscribe(self.h)
                self.log(f"unsub rc={rc} callbacks={self.calls}")
            else:
                self.subscribe(multi)


kineto = Kineto(args.kineto_dir) if args.kineto_dir else None


def launch(dev, name):
    global launches
    check(cu.cuCtxSetCurrent(ctxs[dev][0]), "cuCtxSetCurrent")
    check(cu.cuLaunchKernel(funcs[dev][name], 64, 1, 1, 256, 1, 1, 0, None, None, None),
          "cuLaunchKernel")
    launches += 1


SCALE = b"_Z5scaleIfEvPT_S0_i"


def forward(dev, step):
    launch(dev, b"axpy")
    if step % 4 != 3:
        launch(dev, SCALE)  # call site 1 of scale: 3 steps in 4


def twin_forward(dev):
    launch(dev, b"twin_axpy")


def backward(dev):
    launch(dev, b"_Z10reduce_sumPKfPfi")


def optimizer_step(dev, step):
    if step % 4 == 3:
        launch(dev, SCALE)  # call site 2 of scale: 1 step in 4


def train_step(dev, step):
    forward(dev, step)
    if args.twin:
        twin_forward(dev)
    backward(dev)
    optimizer_step(dev, step)


if args.start_file:
    open(args.start_file, "w").close()
start = time.monotonic()
step = 0
late_done = 0
while time.monotonic() - start < args.seconds:
    if late_done < len(late_images) and time.monotonic() - start >= args.late_module + 0.3 * late_done:
        for ctx, mods in ctxs:
            check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            m = vp()
            check(cu.cuModuleLoadData(ctypes.byref(m), late_images[late_done]), "cuModuleLoadData (late)")
            print(f"gpu_app: late module {late_done} at {time.monotonic() - start:.2f} s", file=sys.stderr, flush=True)
            mods.append(m)
        late_done += 1
    if args.stop_file and step % 16 == 0 and os.path.exists(args.stop_file):
        break
    if kineto and step % 8 == 0:
        kineto.poll()
    if args.idle_file and os.path.exists(args.idle_file):
        if args.stop_file and os.path.exists(args.stop_file):
            break
        time.sleep(0.05)
        start = time.monotonic() - step * 3 * nctx / args.rate  # no catching up afterwards
        continue
    for dev in range(nctx):  # dev: index of the context (and its functions)
        train_step(dev, step)
    step += 1
    # pace: 3 launches per context per step
    due = start + step * 3 * nctx / args.rate
    delay = due - time.monotonic()
    if delay > 0:
        time.sleep(delay)

for i, (ctx, mods) in enumerate([] if args.keep_contexts else ctxs):
    cu.cuCtxSetCurrent(ctx)
    for m in mods:
        cu.cuModuleUnload(m)
    if args.primary:
        check(cu.cuDevicePrimaryCtxRelease_v2(i), "cuDevicePrimaryCtxRelease")
    elif args.green:
        check(cu.cuGreenCtxDestroy(ctx), "cuGreenCtxDestroy")
    else:
        check(cu.cuCtxDestroy_v2(ctx), "cuCtxDestroy")
print(f"gpu_app launches={launches} contexts={len(ctxs)} "
      f"primary_created={cu.fake_cuda_primary_created()} "
      f"green_refused={cu.fake_cuda_green_refused()}", flush=True)
