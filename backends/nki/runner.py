"""The child process that runs one NKI kernel file on the interpreter.

Run as ``python -I -m autocomp.backends.nki.runner`` in a private temp dir, with a JSON
request on stdin (never in argv or the environment, so the kernel cannot see where its
results go). It never decides a verdict: it reports the outputs, the arguments after the
run, the outputs of a run with every ``affine_range`` reversed, and the trace; the parent
compares everything itself.

Request keys: ``file``, ``function``, ``mode`` ("oracle": make inputs with the file's
``get_inputs``; "candidate": read them from ``inputs``), ``seeds``, ``inputs`` (npz path
and dtype manifest), ``poison`` (argument indices to fill with NaN first), ``result`` and
``arrays`` (where to write), ``reorder`` (bool), ``source_dir`` (the original file's folder,
appended to sys.path for the file's own sibling imports).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import time
import traceback
from typing import Any

import numpy as np


def _error(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"status": "error", "error": {**extra, "kind": kind, "message": message}}


def _kernel_frames(tb: Any, kernel_file: str) -> str:
    """Traceback lines from the kernel file only (the interpreter's frames are noise)."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename == kernel_file]
    return "".join(f"  {kernel_file}:{f.lineno}: {f.line}\n" for f in frames[-3:])


def _annotation_inputs(module: Any, fn: Any, seed: int) -> list[np.ndarray] | None:
    """Inputs from ``INPUT_SPECS = {"a": ("float32", (128, 512)), ...}`` when there is no get_inputs."""
    specs = getattr(module, "INPUT_SPECS", None)
    if not isinstance(specs, dict):
        return None
    from autocomp.backends.nki.interp.core import DTYPES

    rng = np.random.default_rng(seed)
    params = list(inspect.signature(fn).parameters)
    arrays = []
    for name in params:
        if name not in specs:
            raise ValueError(f"INPUT_SPECS has no entry for kernel parameter {name!r}")
        dtype, shape = specs[name]
        dt = DTYPES.get(dtype) or np.dtype(dtype)
        if dt.kind in "iu":
            arrays.append(rng.integers(0, 16, size=tuple(shape)).astype(dt))
        else:
            arrays.append(rng.standard_normal(tuple(shape)).astype(np.float32).astype(dt))
    return arrays


def _make_inputs(module: Any, fn: Any, seed: int) -> list[np.ndarray]:
    get_inputs = getattr(module, "get_inputs", None)
    if get_inputs is None:
        arrays = _annotation_inputs(module, fn, seed)
        if arrays is None:
            raise ValueError("the kernel file defines neither get_inputs() nor INPUT_SPECS; add one (see the NKI target docs)")
        return arrays
    np.random.seed(seed)
    nparams = len(inspect.signature(get_inputs).parameters)
    result = get_inputs(np.random.default_rng(seed)) if nparams >= 1 else get_inputs()
    if isinstance(result, dict):
        params = list(inspect.signature(getattr(fn, "func", fn)).parameters)
        result = [result[p] for p in params if p in result]
    arrays = [np.asarray(x) for x in (result if isinstance(result, (list, tuple)) else [result])]
    if not arrays:
        raise ValueError("get_inputs() returned no arrays")
    return arrays


def _poisoned(arr: np.ndarray) -> np.ndarray:
    from autocomp.backends.nki.interp.core import is_float

    out = np.array(arr, copy=True)
    if is_float(out.dtype):
        out[...] = np.nan
    elif out.dtype.kind in "iu":
        out[...] = np.iinfo(out.dtype).max
    return out


def run(request: dict[str, Any]) -> dict[str, Any]:
    from autocomp.backends.nki.interp import install
    from autocomp.backends.nki.interp.errors import NkiError
    from autocomp.backends.nki.interp.install import execute
    from autocomp.backends.nki.portable import load_arrays, save_arrays
    from autocomp.backends.nki.trace import trace_to_json

    install()
    if request.get("source_dir"):
        # After site-packages, so a file there cannot shadow numpy or the interpreter.
        sys.path.append(str(request["source_dir"]))
    path = request["file"]
    spec = importlib.util.spec_from_file_location("autocomp_nki_kernel", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["autocomp_nki_kernel"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        return _error("compile", f"{path}:{exc.lineno}: {exc.msg}", line=exc.lineno or 0)
    except NkiError as exc:
        return _error("nki", exc.render(), **{k: v for k, v in exc.to_json().items() if k not in ("kind", "message")})
    except Exception as exc:
        return _error("import", f"loading {path} failed: {type(exc).__name__}: {exc}\n{_kernel_frames(exc.__traceback__, path)}")
    fn = getattr(module, request["function"], None)
    if fn is None:
        return _error("import", f"{path} has no function {request['function']!r}")
    names = list(inspect.signature(getattr(fn, "func", fn)).parameters)

    seeds = [int(s) for s in request["seeds"]]
    arrays: dict[str, np.ndarray] = {}
    if request["mode"] == "oracle":
        inputs = {}
        for seed in seeds:
            try:
                inputs[seed] = _make_inputs(module, getattr(fn, "func", fn), seed)
            except Exception as exc:
                return _error("inputs", f"making inputs for seed {seed} failed: {type(exc).__name__}: {exc}")
            for i, a in enumerate(inputs[seed]):
                arrays[f"s{seed}_in{i}"] = a
    else:
        src = load_arrays(request["inputs"]["path"], request["inputs"]["dtypes"])
        inputs = {}
        for seed in seeds:
            n = sum(1 for k in src if k.startswith(f"s{seed}_in"))
            inputs[seed] = [src[f"s{seed}_in{i}"] for i in range(n)]
    poison = set(int(i) for i in request.get("poison", []))
    grid = getattr(module, "GRID", ())  # SPMD launch grid, e.g. GRID = (4,)
    grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))

    result: dict[str, Any] = {"status": "ok", "nonce": request["nonce"], "counts": {}}
    start = time.perf_counter()
    stage = "run"
    try:
        for n, seed in enumerate(seeds):
            args = [(_poisoned(a) if i in poison else a) for i, a in enumerate(inputs[seed])]
            res = execute(fn, args, kernel_file=path, names=names, grid=grid)
            result["counts"][str(seed)] = [len(res.outputs), len(res.args_after)]
            for i, o in enumerate(res.outputs):
                arrays[f"s{seed}_out{i}"] = o
            for i, a in enumerate(res.args_after):
                arrays[f"s{seed}_after{i}"] = a
            if n == 0:
                result["trace"] = trace_to_json(res.trace)
                result["interp_seconds"] = time.perf_counter() - start
                if request.get("reorder", True):
                    stage = "reorder"
                    rev = execute(fn, args, kernel_file=path, reverse_affine=True, names=names, grid=grid)
                    for i, o in enumerate(rev.outputs):
                        arrays[f"rev_out{i}"] = o
                    result["rev_count"] = len(rev.outputs)
                    stage = "run"
    except NkiError as exc:
        err = _error("nki", exc.render(), **{k: v for k, v in exc.to_json().items() if k not in ("kind", "message")})
        err["error"]["stage"] = stage
        return err
    except RecursionError:
        return _error("runtime", "recursion too deep", stage=stage)
    except Exception as exc:
        where = _kernel_frames(exc.__traceback__, path)
        return _error("runtime", f"{type(exc).__name__}: {exc}\n{where}".strip(), stage=stage)
    result["seconds"] = time.perf_counter() - start
    result["dtypes"] = save_arrays(request["arrays"], arrays)
    return result


def main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        result = run(request)
    except MemoryError:
        result = _error("runtime", "the kernel ran out of memory in the interpreter")
    result["nonce"] = request["nonce"]
    with open(request["result"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
