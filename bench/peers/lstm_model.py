# Makes the LSTM of the README's recurrent figures: PyTorch nn.LSTM(256, 256, num_layers=2,
# batch_first=True) on x[1, 100, 256], exported to ONNX opset 17, and times PyTorch eager on one
# thread. Usage: /usr/bin/python3 bench/peers/lstm_model.py OUT_DIR
# Then: irtool bench OUT_DIR/lstm.onnx --backend llvm --input x=OUT_DIR/x.npy --threads 1
#       node bench/peers/ort_bench.js OUT_DIR/lstm.onnx --input x=OUT_DIR/x.npy
import os, sys, time
import numpy as np
import torch

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


class M(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.l = torch.nn.LSTM(256, 256, num_layers=2, batch_first=True)

    def forward(s, x):
        return s.l(x)[0]


m = M().eval()
x = torch.randn(1, 100, 256)
torch.onnx.export(m, (x,), os.path.join(out, "lstm.onnx"), input_names=["x"], output_names=["y"], opset_version=17)
np.save(os.path.join(out, "x.npy"), x.numpy())
torch.set_num_threads(1)
with torch.no_grad():
    for _ in range(3):
        m(x)
    t = time.perf_counter()
    for _ in range(20):
        m(x)
print("pytorch_eager_ms=%.3f" % ((time.perf_counter() - t) / 20 * 1e3))
