"""PyTorch tensors as inputs (DLPack, no copy when contiguous) and a module exported with dynamic
axes, compiled and compared with eager. Skipped where PyTorch is not installed."""
import numpy as np
import pytest

import irtool

torch = pytest.importorskip("torch", reason="PyTorch not installed (Debian: apt-get install python3-torch)")


def test_torch_tensors_in(tiny_mlp):
    irx, x, y = tiny_mlp
    m = irtool.load(irx)
    t = torch.from_numpy(x.copy())
    np.testing.assert_allclose(m(x=t)["y"], y, rtol=1e-5, atol=1e-6)
    g = t.clone().requires_grad_(True)  # detached for the run, as eager inference would
    np.testing.assert_allclose(m(x=g)["y"], y, rtol=1e-5, atol=1e-6)
    nc = torch.from_numpy(np.ascontiguousarray(x.T)).T  # a non-contiguous view: copied
    np.testing.assert_allclose(m(x=nc)["y"], y, rtol=1e-5, atol=1e-6)


def test_tensor_memory_is_passed_in_place():
    from irtool._runtime import _as_input
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    owner, ptr, shape, dtype = _as_input(t)
    assert owner is t and ptr == t.data_ptr() and tuple(shape) == (3, 4) and dtype == "f32"
    assert _as_input(t.T).flags.c_contiguous  # a non-contiguous view is copied


def test_exported_module_matches_eager(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    onnx = tmp_path / "net.onnx"
    torch.onnx.export(net, torch.zeros(2, 8), str(onnx), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17)
    m = irtool.load(irtool.compile(onnx, output=tmp_path / "net.irx", cache=False))
    assert m.inputs[0].shape == ("batch", 8)
    for b in (1, 5):
        x = torch.randn(b, 8)
        with torch.no_grad():
            want = net(x).numpy()
        np.testing.assert_allclose(m(x=x)["y"], want, rtol=1e-4, atol=1e-5)
