"""irtool.compile, optimize and validate (libirtool in process), and that `import irtool` alone
does not load the toolkit."""
import os
import subprocess
import sys

import numpy as np
import pytest

import irtool

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MLP = os.path.join(ROOT, "corpus", "mlp.ir")


def test_import_loads_no_toolkit(artifacts):
    code = ("import irtool, numpy as np; m = irtool.load(%r); m(x=np.zeros((1, 64), np.float32)); "
            "maps = open('/proc/self/maps').read(); print('LLVM' in maps, 'libirtool.so' in maps)") % artifacts("mlp")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_compile_with_inputs_fixes_the_shape(tmp_path):
    irx = irtool.compile(MLP, output=tmp_path / "m.irx", inputs={"x": np.zeros((3, 64), np.float32)}, cache=False)
    m = irtool.load(irx)
    assert m.inputs[0].shape == (3, 64)


def test_compile_errors_carry_the_message(tmp_path):
    with pytest.raises(irtool.IrtoolError, match="unknown pass 'fsue'"):
        irtool.compile(MLP, pipeline="fsue", output=tmp_path / "m.irx")
    with pytest.raises(irtool.IrtoolError, match="cannot open"):
        irtool.compile(tmp_path / "none.onnx", output=tmp_path / "m.irx")
    assert not (tmp_path / "m.irx").exists()


def test_optimize_writes_the_result(tmp_path):
    out = irtool.optimize(MLP, "shape-infer,fuse", tmp_path / "fused.ir")
    assert "irtool.fused" in open(out).read()


def test_validate_returns_the_report(artifacts):
    r = irtool.validate(MLP, pipeline="shape-infer,fuse", random=2)
    assert r["pass"] is True and r["outputs"]
    r = irtool.validate(MLP, artifacts("mlp"))
    assert r["pass"] is True
