"""PyTorch eager peer for irtool bench: one thread, torch.no_grad(), in-process, after warm-up.

usage: /usr/bin/python3 torch_bench.py EXPORT_PY MODEL_NAME [--onnx MODEL.onnx] INPUT.npy
       [--iterations N] [--warmup W]
MODEL_NAME is one of export.py's models (tiny_mlp, convnet, encoder). With --onnx, the ONNX
initializers whose names match the module's state_dict are loaded into the module (the export's
own weights); otherwise export.py's freshly seeded weights are used (the timing does not depend
on the weight values). Prints one JSON line with median/min/p90 ms.
"""
import argparse, importlib.util, json, resource, sys, time
import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("export_py"); p.add_argument("model"); p.add_argument("input")
p.add_argument("--onnx"); p.add_argument("--iterations", "-n", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
a = p.parse_args()

spec = importlib.util.spec_from_file_location("export", a.export_py)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)  # seeds torch; the __main__ block does not run
classes = {"tiny_mlp": ex.TinyMLP, "convnet": ex.ConvNet, "encoder": ex.Encoder}
if a.model not in classes:
    sys.exit(f"torch_bench: no PyTorch module for '{a.model}'")
m = classes[a.model]()
loaded = 0
if a.onnx:
    try:
        import onnx, onnx.numpy_helper
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(a.onnx).graph.initializer}
        sd = m.state_dict()
        with torch.no_grad():
            for k, v in sd.items():
                if k in inits and tuple(inits[k].shape) == tuple(v.shape):
                    v.copy_(torch.from_numpy(inits[k].copy())); loaded += 1
    except ImportError:
        pass
m.eval()
torch.set_num_threads(1)
x = torch.from_numpy(np.load(a.input))
times = []
with torch.no_grad():
    for it in range(-a.warmup, a.iterations):
        t = time.perf_counter()
        m(x)
        dt = (time.perf_counter() - t) * 1e3
        if it >= 0:
            times.append(dt)
times.sort()
p90 = int((a.iterations - 1) * 0.9 + 0.5)
print(json.dumps({"peer": "pytorch-eager", "version": torch.__version__, "threads": torch.get_num_threads(),
                  "weights_from_onnx": loaded, "iterations": a.iterations, "warmup": a.warmup,
                  "median_ms": round(times[a.iterations // 2], 3), "min_ms": round(times[0], 3),
                  "p90_ms": round(times[p90], 3),
                  "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
