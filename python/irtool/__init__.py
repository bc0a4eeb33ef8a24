"""irtool from Python: run compiled artifacts (.irx) with libirtool-runtime, and compile,
optimize and validate models with libirtool (loaded on first use only).

    import irtool
    m = irtool.load("model.irx")
    y = m(x=array)["y"]
"""
from ._runtime import IrtoolError, Model, TensorInfo, load

__all__ = ["IrtoolError", "Model", "TensorInfo", "load", "compile", "optimize", "validate"]


def __getattr__(name):
    # the toolkit (LLVM, the passes, the interpreter) is loaded only when one of these is used
    if name in ("compile", "optimize", "validate"):
        from . import _toolkit
        return getattr(_toolkit, name)
    raise AttributeError(f"module 'irtool' has no attribute {name!r}")
