"""A PyTorch module exported with a dynamic batch, compiled by irtool, loaded and compared with
eager PyTorch at three batch sizes. After `./setup.sh demo` and the Python install line of
docs/python.md:  .venv/bin/python examples/pytorch/compile_and_run.py"""
import os
import tempfile

import numpy as np
import torch

import irtool


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                        torch.nn.Linear(64, 10))

    def forward(self, x):
        return torch.softmax(self.body(x), dim=-1)


torch.manual_seed(0)
net = Net().eval()
tmp = tempfile.mkdtemp(prefix="irtool-example-")
onnx_path = os.path.join(tmp, "net.onnx")
torch.onnx.export(net, torch.zeros(1, 32), onnx_path, input_names=["x"], output_names=["probs"],
                  dynamic_axes={"x": {0: "batch"}, "probs": {0: "batch"}}, opset_version=17)
model = irtool.load(irtool.compile(onnx_path, output=os.path.join(tmp, "net.irx")))
print(model)
for batch in (1, 8, 33):
    x = torch.randn(batch, 32)
    with torch.no_grad():
        want = net(x).numpy()
    got = model(x=x)["probs"]
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-6)
    print(f"batch {batch:2d}: max |irtool - PyTorch| = {np.abs(got - want).max():.2e}  {'match' if ok else 'MISMATCH'}")
