"""irtool.load and Model: compiled artifacts run through libirtool-runtime (the _native C
extension). Inputs are passed as pointers into the caller's arrays (C-contiguous numpy arrays
and PyTorch CPU tensors are never copied); outputs are numpy arrays over the runtime's own
buffers, freed when the last array or view of them is gone.
"""
import sys

import numpy as np

from . import _native
from ._native import IrtoolError


_TORCH_NAMES = {}  # torch dtype -> the runtime's dtype name, filled on first use


def _torch_names(torch):
    return {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.int64: "i64",
            torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}


def _as_input(x):
    """What the extension passes to irt_run for x (numpy arrays it takes itself): a PyTorch CPU
    tensor, contiguous, as (tensor, data pointer, shape, dtype name), its memory used in place;
    anything else as a C-contiguous ndarray sharing x's memory where it can (DLPack, the buffer
    protocol, __array_interface__), copied only when not contiguous."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if not _TORCH_NAMES:
            _TORCH_NAMES.update(_torch_names(torch))
        name = _TORCH_NAMES.get(x.dtype)
        if name and not x.is_cuda and x.is_contiguous():
            return (x, x.data_ptr(), x.shape, name)
        x = x.detach().cpu().contiguous().numpy()
    elif hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        try:
            x = np.from_dlpack(x)
        except (RuntimeError, TypeError, BufferError):  # a device array, an old exporter
            x = np.asarray(x)
    return np.ascontiguousarray(x)


_native.set_converter(_as_input)


class TensorInfo:
    """An input or output of a model: name, dtype (a numpy dtype; the runtime's name, e.g.
    "string", where numpy has none) and shape (ints; a symbolic input dim is the symbol's
    name, an output dim known only at run time is None)."""
    __slots__ = ("name", "dtype", "shape")

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, shape

    def __repr__(self):
        dt = self.dtype.name if isinstance(self.dtype, np.dtype) else self.dtype
        return f"TensorInfo({self.name!r}, {dt}, {list(self.shape)})"


_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32, "u16": np.uint16,
          "u8": np.uint8, "bool": np.bool_}


class Model:
    """A loaded artifact. model(x=a), model(a) or model.run({"x": a}) returns {output name:
    ndarray}; errors raise IrtoolError with the runtime's message. Calls from several threads
    run concurrently (the GIL is released while the model runs)."""

    def __init__(self, path, threads=None):
        if threads is not None:
            _native.set_threads(int(threads))
        self._art = _native.load(path)
        self.run = self._art.run
        self.inputs = [self._info(True, i, n) for i, n in enumerate(self._art.input_names)]
        self.outputs = [self._info(False, i, n) for i, n in enumerate(self._art.output_names)]

    def _info(self, is_input, i, name):
        dt, shape = self._art.info(is_input, i)
        return TensorInfo(name, np.dtype(_NUMPY[dt]) if dt in _NUMPY else dt, shape)

    def __call__(self, *args, **kwargs):
        return self._art(*args, **kwargs)

    def __repr__(self):
        return f"<irtool.Model inputs={self.inputs} outputs={self.outputs}>"


def load(path, threads=None):
    """Loads a compiled artifact (.irx). threads sets the process-wide number of threads compiled
    code uses (OpenBLAS's and the runtime's pool; 0 = all cores); None leaves it unchanged."""
    return Model(path, threads)
