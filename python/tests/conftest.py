"""Shared fixtures: artifacts compiled once per session with irtool.compile (in process) from
the checkout's corpus and, when ../shared is present, its torch-models."""
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("IRTOOL_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """compile(name) -> path of corpus/<name>.ir compiled for any batch/symbolic dims."""
    import irtool
    out = tmp_path_factory.mktemp("irx")
    made = {}

    def compile(name):
        if name not in made:
            made[name] = irtool.compile(os.path.join(ROOT, "corpus", name + ".ir"), output=str(out / (name + ".irx")),
                                        cache=False)
        return made[name]
    return compile


@pytest.fixture(scope="session")
def tiny_mlp(tmp_path_factory):
    """(artifact path, input x, PyTorch's output y) of ../shared/torch-models/tiny_mlp."""
    import numpy as np
    import irtool
    d = os.path.join(SHARED, "torch-models", "tiny_mlp")
    if not os.path.isdir(d):
        pytest.skip(f"{d} not found (../shared absent)")
    irx = irtool.compile(os.path.join(d, "model.onnx"), output=str(tmp_path_factory.mktemp("tiny") / "tiny.irx"),
                         cache=False)
    return irx, np.load(os.path.join(d, "input_x.npy")), np.load(os.path.join(d, "output_y.npy"))
