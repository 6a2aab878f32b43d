# PyTorch CPU loop for the CFI tests: matmuls (BLAS / oneDNN), elementwise
# ops and autograd, from Python.  Usage: python3 torch_loop.py SECONDS
import sys, time
import torch

torch.set_num_threads(1)

def step(x, w):
    y = torch.relu(x @ w)
    loss = (y * y).mean()
    loss.backward()
    return loss.item()

def main(secs):
    x = torch.randn(256, 256)
    w = torch.randn(256, 256, requires_grad=True)
    print("ready", flush=True)
    t = time.time()
    while time.time() - t < secs:
        step(x, w)
        w.grad = None

main(float(sys.argv[1]))
