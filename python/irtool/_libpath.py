"""Finds irtool's shared libraries: $IRTOOL_LIB_DIR, then the copies installed with the package
(irtool/_lib), then the build tree of the checkout this package sits in (../build)."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(stem):
    dirs = []
    if os.environ.get("IRTOOL_LIB_DIR"):
        dirs.append(os.environ["IRTOOL_LIB_DIR"])
    dirs.append(os.path.join(_HERE, "_lib"))
    dirs.append(os.path.join(_HERE, "..", "..", "build"))
    for d in dirs:
        for name in (f"lib{stem}.so.0", f"lib{stem}.so"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                yield os.path.abspath(p)


def load_library(stem):
    """ctypes handle of lib<stem>.so; ImportError saying where it looked when it is missing."""
    for p in _candidates(stem):
        return ctypes.CDLL(p)
    raise ImportError(f"lib{stem}.so not found (set IRTOOL_LIB_DIR to the folder holding it, or build "
                      f"irtool first: ./setup.sh demo)")
