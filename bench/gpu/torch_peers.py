"""PyTorch peers for the GPU pack (run by run.sh on the GPU machine, beside export.py, which
defines the ../shared/torch-models modules): median latency of PyTorch eager and torch.compile
on the GPU for each module at the packed input shape, and torch.compile's cold start in a fresh
process, against irtool's artifacts of the same models (bin/irtool-run --repeat, whole call,
and bin/gpu_bench: device time between CUDA events).
Weights are PyTorch's initialisation (the timing does not depend on them).
Output: Markdown table rows starting with '|' (run.sh copies them into summary.txt)."""
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export as E  # noqa: E402  (the modules; its exports run only as a script)

MODELS = {
    "tiny_mlp": (E.TinyMLP, (4, 64)),
    "convnet": (E.ConvNet, (2, 1, 28, 28)),
    "encoder": (E.Encoder, (2, 10, 32)),
    "branchy": (E.Branchy, (3, 16)),
}
REPEAT = 200


def median_ms(fn, x_host):
    """Median of REPEAT whole calls: input copied to the GPU, run, output copied back (as
    irtool-run's whole call), and of the device-resident call alone."""
    x_dev = x_host.cuda()
    for _ in range(20):
        fn(x_dev)
    torch.cuda.synchronize()
    whole, dev = [], []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn(x_host.cuda()).cpu()
        whole.append((time.perf_counter() - t0) * 1e3)
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn(x_dev)
        torch.cuda.synchronize()
        dev.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(whole), statistics.median(dev)


def irtool_ms(name):
    """irtool-run's median whole call and gpu_bench's device time for the packed artifact."""
    d = os.path.join(HERE, "models", "torch_" + name)
    irx, x = os.path.join(d, "model.irx"), os.path.join(d, "in0.npy")
    if not os.path.exists(irx):
        return None, None
    whole = dev = None
    r = subprocess.run([os.path.join(HERE, "bin", "irtool-run"), irx, "--input", x, "--repeat", str(REPEAT)],
                       capture_output=True, text=True, timeout=120)
    for line in r.stdout.splitlines():
        if line.startswith("time:"):
            whole = float(line.split("median ")[1].split(" ms")[0])
    r = subprocess.run([os.path.join(HERE, "bin", "gpu_bench"), "time", irx, str(REPEAT)],
                       capture_output=True, text=True, timeout=120)
    for line in r.stdout.splitlines():
        if line.startswith("compute_ms"):
            dev = float(line.split()[1])
    return whole, dev


COLD = """
import sys, time, torch
t0 = time.perf_counter()
sys.path.insert(0, %r)
import export as E
m = E.Encoder().cuda().eval()
c = torch.compile(m)
with torch.no_grad():
    y = c(torch.randn(2, 10, 32).cuda()).cpu()
print("cold_s", time.perf_counter() - t0)
"""


def main():
    print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))
    print("| model | irtool whole call ms | irtool device ms | eager whole ms | eager device ms"
          " | torch.compile whole ms | torch.compile device ms | compile first call s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (cls, shape) in MODELS.items():
        torch.manual_seed(0)
        m = cls().cuda().eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            ew, ed = median_ms(m, x)
            c = torch.compile(m)
            t0 = time.perf_counter()
            c(x.cuda())
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            cw, cd = median_ms(c, x)
        iw, idev = irtool_ms(name)
        fmt = lambda v: "-" if v is None else "%.4f" % v  # noqa: E731
        print("| %s | %s | %s | %.4f | %.4f | %.4f | %.4f | %.1f |" % (name, fmt(iw), fmt(idev), ew, ed, cw, cd, first))
    r = subprocess.run([sys.executable, "-c", COLD % HERE], capture_output=True, text=True, timeout=200)
    cold = [l for l in r.stdout.splitlines() if l.startswith("cold_s")]
    print("| torch.compile cold start, encoder, new process (import, compile, first run) | %s s |"
          % (cold[0].split()[1][:6] if cold else "failed: " + r.stderr.strip().splitlines()[-1][:200]))


if __name__ == "__main__":
    main()
