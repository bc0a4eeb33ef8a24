"""PyTorch eager outputs of corpus/torch/encoder_dynamic at a third, larger shape ([5, 40, 32]):
the CLI test runs one artifact compiled with no bounds at the shapes of make_models.py and at
this one, which needs a larger workspace than either.
Rebuilds the encoder as make_models.py does (export.py's models in order under its seed; its
output at the stored input is checked against the stored one), then writes input_x3.npy and
output_y3.npy. Needs Debian's python3-torch; run with /usr/bin/python3 from this folder:
    /usr/bin/python3 encoder_more_shapes.py ../../../shared/torch-models/export.py
"""
import importlib.util, os, sys, tempfile
import numpy as np
import torch

spec = importlib.util.spec_from_file_location("export", sys.argv[1])
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)  # seeds torch with 1234
HERE = os.path.dirname(os.path.abspath(__file__))
ex.OUT = tempfile.mkdtemp()
ex.export("tiny_mlp", ex.TinyMLP(), (torch.randn(4, 64),), dyn={"x": {0: "batch"}, "y": {0: "batch"}})
ex.export("convnet", ex.ConvNet(), (torch.randn(2, 1, 28, 28),), dyn={"x": {0: "batch"}, "y": {0: "batch"}})
enc = ex.Encoder()
x_enc = torch.randn(2, 10, 32)
d = os.path.join(HERE, "encoder_dynamic")
enc.eval()
assert np.array_equal(x_enc.numpy(), np.load(os.path.join(d, "input_x.npy")))
assert np.allclose(enc(x_enc).detach().numpy(), np.load(os.path.join(d, "output_y.npy")), rtol=1e-5, atol=1e-6)
torch.manual_seed(4)
x3 = torch.randn(5, 40, 32)
np.save(os.path.join(d, "input_x3.npy"), x3.numpy())
np.save(os.path.join(d, "output_y3.npy"), enc(x3).detach().numpy())
print("wrote encoder_dynamic/input_x3.npy, output_y3.npy")
