"""Per-call overhead of the Python binding over irt_run itself, side by side on one machine:
bench/runtime_call.c (C, irt_run_n + irt_tensor_free per call) and irtool.Model.__call__ with a
numpy array and with a PyTorch tensor, on ../shared/torch-models/tiny_mlp (batch 4), rounds
interleaved ($ROUNDS, default 9); each figure is the best round's mean. Usage (from the checkout, after building
irtool and installing the package):
    build/pyvenv/bin/python bench/python_overhead.py [BUILD_DIR] [CALLS]
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import irtool

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
ROUNDS = int(os.environ.get("ROUNDS", "9"))
SHARED = os.environ.get("IRTOOL_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


def python_round(m, x):
    t = time.perf_counter()
    for _ in range(CALLS):
        m(x=x)
    return (time.perf_counter() - t) / CALLS * 1e6


def main():
    tiny = os.path.join(SHARED, "torch-models", "tiny_mlp")
    tmp = tempfile.mkdtemp(prefix="irtool-bench-")
    irx = irtool.compile(os.path.join(tiny, "model.onnx"), output=os.path.join(tmp, "tiny.irx"))
    x = np.load(os.path.join(tiny, "input_x.npy"))
    exe = os.path.join(tmp, "runtime_call")
    subprocess.run(["cc", "-O2", "-std=c11", "-I", ROOT, os.path.join(ROOT, "bench", "runtime_call.c"), "-L", BUILD,
                    "-lirtool-runtime", f"-Wl,-rpath,{BUILD}", "-o", exe], check=True)
    m = irtool.load(irx, threads=1)
    try:
        import torch
        xt = torch.from_numpy(x.copy())
    except ImportError:
        xt = None
    c, py, pt = [], [], []
    for _ in range(ROUNDS):
        c.append(float(subprocess.run([exe, irx, str(x.shape[0]), str(CALLS), "1"], check=True, capture_output=True,
                                      text=True).stdout))
        py.append(python_round(m, x))
        if xt is not None:
            pt.append(python_round(m, xt))
    print(f"tiny_mlp, x {list(x.shape)} f32, {CALLS} calls a round, best of {ROUNDS} interleaved rounds")
    print(f"  irt_run (C)               {min(c):7.2f} us/call")
    print(f"  irtool Model, numpy       {min(py):7.2f} us/call  (+{min(py) - min(c):.2f} us)")
    if pt:
        print(f"  irtool Model, torch       {min(pt):7.2f} us/call  (+{min(pt) - min(c):.2f} us)")


if __name__ == "__main__":
    main()
