"""irtool.load and Model: running artifacts from Python with numpy arrays."""
import gc
import threading

import numpy as np
import pytest

import irtool


def test_matches_pytorch_by_name_position_and_dict(tiny_mlp):
    irx, x, y = tiny_mlp
    m = irtool.load(irx)
    for out in (m(x=x), m(x), m.run({"x": x}), m.run([x])):
        assert list(out) == ["y"]
        np.testing.assert_allclose(out["y"], y, rtol=1e-5, atol=1e-6)


def test_inputs_and_outputs_describe_the_artifact(artifacts):
    m = irtool.load(artifacts("attention"))
    assert [(i.name, i.dtype, i.shape) for i in m.inputs] == [("x", np.float32, ("B", "S", 32)),
                                                           ("mask", np.float32, ("B", "S", "S"))]
    assert m.outputs[0].dtype == np.float32 and len(m.outputs[0].shape) == 3
    assert "TensorInfo('x', float32, ['B', 'S', 32])" in repr(m)
    assert irtool.load(artifacts("mlp")).outputs[0].shape == ("B", 10)  # a batched output's dim 0


def test_symbolic_dims_bind_per_call(artifacts):
    m = irtool.load(artifacts("attention"))
    for b, s in ((1, 3), (2, 17)):
        x = np.random.default_rng(0).standard_normal((b, s, 32), dtype=np.float32)
        out = next(iter(m(x=x, mask=np.zeros((b, s, s), np.float32)).values()))
        assert out.shape == (b, s, 32) and np.isfinite(out).all()


def test_outputs_own_the_runtime_buffers(artifacts):
    m = irtool.load(artifacts("mlp"))
    y = m(x=np.ones((3, 64), np.float32))["y"]
    assert type(y.base).__name__ == "PyCapsule"  # the runtime's malloc'd buffer, not a copy
    view = y[1:]
    expect = y.copy()
    del m, y
    gc.collect()
    np.testing.assert_array_equal(view, expect[1:])  # alive as long as a view is


def test_non_contiguous_input_is_copied_correctly(artifacts):
    m = irtool.load(artifacts("mlp"))
    x = np.random.default_rng(1).standard_normal((64, 3), dtype=np.float32)
    np.testing.assert_array_equal(m(x=x.T)["y"], m(x=np.ascontiguousarray(x.T))["y"])


@pytest.mark.parametrize("kwargs, message", [
    ({"z": np.zeros((2, 64), np.float32)}, "unknown input 'z'; the artifact's inputs are 'x'"),
    ({"xx": np.zeros((2, 64), np.float32)}, "unknown input 'xx' (did you mean 'x'?)"),
    ({}, "missing input 'x' (the artifact's inputs are 'x')"),
    ({"x": np.zeros((2, 64))}, "input 'x' has dtype f64, the artifact was compiled for f32 (f32[B, 64])"),
    ({"x": np.zeros((2, 63), np.float32)}, "input 'x' dim 1 is 63, the artifact was compiled for 64 (f32[B, 64])"),
    ({"x": np.zeros((2, 2, 64), np.float32)}, "input 'x' has rank 3, the artifact was compiled for rank 2"),
    ({"x": np.zeros((100, 64), np.float32)}, "B = 100 is outside 1..64 (input 'x' dim 0)"),
    ({"x": np.zeros((2, 64), np.complex64)}, "numpy dtype complex64, which irtool has no dtype for"),
])
def test_mistakes_raise_the_runtime_message(artifacts, kwargs, message):
    m = irtool.load(artifacts("mlp"))
    with pytest.raises(irtool.IrtoolError) as e:
        m(**kwargs)
    assert message in str(e.value)


def test_counts_and_mixing(artifacts):
    m = irtool.load(artifacts("attention"))
    x = np.zeros((1, 2, 32), np.float32)
    with pytest.raises(irtool.IrtoolError, match=r"1 input given, the artifact takes 2 \('x', 'mask'\)"):
        m(x)
    with pytest.raises(irtool.IrtoolError, match="missing input 'mask'"):
        m(x=x)
    with pytest.raises(irtool.IrtoolError, match="either by position or by name"):
        m(x, mask=x)


def test_load_errors(tmp_path):
    with pytest.raises(irtool.IrtoolError, match="cannot open"):
        irtool.load(tmp_path / "missing.irx")
    bad = tmp_path / "bad.irx"
    bad.write_bytes(b"not an artifact at all" * 8)
    with pytest.raises(irtool.IrtoolError, match="not an irtool artifact"):
        irtool.load(bad)


def test_concurrent_calls(artifacts):
    m = irtool.load(artifacts("mlp"), threads=1)
    xs = [np.full((4, 64), i / 10, np.float32) for i in range(4)]
    want = [m(x=x)["y"] for x in xs]
    got = [None] * 4

    def work(i):
        for _ in range(50):
            got[i] = m(x=xs[i])["y"]
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)


def test_other_dlpack_exporters_share_memory():
    from irtool._runtime import _as_input

    class Exporter:  # the DLPack protocol alone, as a third-party array type offers it
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    a = np.arange(6, dtype=np.float32)
    assert _as_input(Exporter(a)).ctypes.data == a.ctypes.data
