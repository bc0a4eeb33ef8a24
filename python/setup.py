"""Builds the irtool Python package from this checkout, offline: the _native extension against
libirtool-runtime, with the checkout's built libraries copied into irtool/_lib (found there by
the extension's rpath and by irtool._lib). Build irtool first (./setup.sh demo, or cmake);
IRTOOL_BUILD_DIR names another build tree than ../build.
    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation --no-index ./python
"""
import glob
import os
import shutil

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers"]
BUILD = os.path.abspath(os.environ.get("IRTOOL_BUILD_DIR", os.path.join(ROOT, "build")))


class BuildExt(build_ext):
    """Copies libirtool-runtime.so.0 and libirtool.so.0 beside the extension (irtool/_lib)."""

    def run(self):
        libs = [p for stem in ("irtool-runtime", "irtool") for p in glob.glob(os.path.join(BUILD, f"lib{stem}.so.0*"))]
        if not any("irtool-runtime" in p for p in libs):
            raise SystemExit(f"irtool: {BUILD}/libirtool-runtime.so.0 not found: build irtool first "
                             "(./setup.sh demo) or set IRTOOL_BUILD_DIR")
        super().run()
        dest = os.path.join(self.build_lib, "irtool", "_lib")
        os.makedirs(dest, exist_ok=True)
        for p in libs:
            shutil.copy2(p, os.path.join(dest, os.path.basename(p)))
        for stem in ("irtool-runtime", "irtool"):  # the sonames the extension and ctypes open
            full = sorted(glob.glob(os.path.join(dest, f"lib{stem}.so.0.*")))
            if full and not os.path.exists(os.path.join(dest, f"lib{stem}.so.0")):
                os.symlink(os.path.basename(full[-1]), os.path.join(dest, f"lib{stem}.so.0"))


setup(
    name="irtool",
    version="0.1.0",
    description="Run irtool's compiled models (.irx) from Python; compile, optimize and validate models",
    packages=["irtool"],
    ext_modules=[Extension(
        "irtool._native", ["irtool/_native.c"],
        include_dirs=[ROOT, numpy.get_include()],
        library_dirs=[BUILD], libraries=["irtool-runtime"],
        runtime_library_dirs=["$ORIGIN/_lib"],
        extra_compile_args=CFLAGS),
        # the toolkit: the CLI's commands (all of tools/ but its main) over libirtool
        Extension(
            "irtool._cli", ["irtool/_cli.c"] + sorted(p for p in glob.glob(os.path.join(ROOT, "tools", "*.c"))
                                                      if not p.endswith("irtool.c")),
            include_dirs=[ROOT, os.path.join(ROOT, "ir")],
            library_dirs=[BUILD], libraries=["irtool"],
            runtime_library_dirs=["$ORIGIN/_lib"],
            extra_compile_args=CFLAGS + ["-D_GNU_SOURCE"])],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
)
