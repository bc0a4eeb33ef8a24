"""irtool.compile, irtool.optimize and irtool.validate: the toolkit (libirtool: passes, LLVM
backend, interpreter), run in this process through the _cli extension, which calls the same
commands `irtool` runs. Importing this module loads LLVM; `import irtool` alone does not.
Not thread-safe: a command's output is captured by redirecting this process's stdout/stderr.
"""
import json
import os
import tempfile
import threading

from ._native import IrtoolError

_lock = threading.Lock()


def _run(cmd, args):
    from . import _cli  # here, not at import: it loads libirtool and LLVM
    with _lock:
        rc, out, err = _cli.run(cmd, [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args])
    if rc != 0:
        raise IrtoolError(err.strip() or f"irtool {cmd} failed (exit {rc})")
    return out


def _input_args(inputs, tmp):
    """--input NAME=FILE.npy arguments for {name: array} (arrays saved into tmp) or paths."""
    import numpy as np
    args = []
    for name, x in (inputs or {}).items():
        if isinstance(x, (str, os.PathLike)):
            path = os.fspath(x)
        else:
            if hasattr(x, "detach"):
                x = x.detach().cpu().numpy()
            path = os.path.join(tmp, f"input{len(args)}.npy")
            np.save(path, np.asarray(x))
        args += ["--input", f"{name}={path}"]
    return args


def compile(model, pipeline=None, target=None, output=None, inputs=None, validate=True, cache=True):
    """Compiles model (a .onnx, .ir or .irb path) into an artifact at output (default: the model's
    path with .irx) and returns that path. pipeline: passes before the backend's own ("a,b");
    target: "cpu", "cpu:NAME" or "cuda:sm_90"; inputs: {name: array or .npy path} fixes the
    shapes (without them, symbolic dims stay symbolic); validate=False skips the gate against
    the interpreter; cache=False bypasses the compile cache. The gate's failure, an unsupported
    op or a bad model raises IrtoolError with irtool's message."""
    model = os.fspath(model)
    if output is None:
        output = os.path.splitext(model)[0] + ".irx"
    with tempfile.TemporaryDirectory(prefix="irtool-") as tmp:
        args = [model, "-o", output] + _input_args(inputs, tmp)
        if pipeline:
            args += ["-p", pipeline]
        if target:
            args += ["--target", target]
        if not validate:
            args.append("--no-validate")
        if not cache:
            args.append("--no-cache")
        _run("compile", args)
    return os.fspath(output)


def optimize(model, pipeline, output):
    """Runs pipeline ("shape-infer,fuse", ...) on model and writes the result to output (.ir,
    .irb or .onnx by its extension); returns output."""
    _run("opt", [os.fspath(model), "-p", pipeline, "-o", output])
    return os.fspath(output)


def validate(reference, candidate=None, pipeline=None, inputs=None, random=1, seed=0, rtol=None, atol=None):
    """Compares candidate (a model or a compiled .irx) with reference, or reference after
    pipeline, on inputs ({name: array or .npy path}) or `random` generated input sets, and
    returns the report as a dict (irtool validate --json: "pass", "outputs", "first_divergence",
    ...). A failing comparison is a report with "pass": false, not an exception."""
    with tempfile.TemporaryDirectory(prefix="irtool-") as tmp:
        report = os.path.join(tmp, "report.json")
        args = [os.fspath(reference)] + ([os.fspath(candidate)] if candidate is not None else [])
        if pipeline:
            args += ["-p", pipeline]
        args += _input_args(inputs, tmp) if inputs else ["--random", str(random), "--seed", str(seed)]
        if rtol is not None:
            args += ["--rtol", str(rtol)]
        if atol is not None:
            args += ["--atol", str(atol)]
        args += ["--json", report]
        from . import _cli
        with _lock:
            rc, out, err = _cli.run("validate", args)
        if not os.path.exists(report):
            raise IrtoolError(err.strip() or f"irtool validate failed (exit {rc})")
        with open(report) as f:
            return json.load(f)
