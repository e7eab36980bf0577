"""Child process for the real Neuron SDK tier (``python -m autocomp.backends.nki.neuron_child``).

Request on stdin (JSON): ``action`` ("probe" | "inputs" | "simulate" | "benchmark"), ``file``,
``function``, ``seeds``, ``inputs`` (npz + dtypes), ``result``, ``arrays``, ``nonce``,
``warmup``, ``iters``, ``extra_path`` (only used to put a test double first on sys.path).
It calls the SDK's public entry points only: ``simulate_kernel``/``simulate`` and
``benchmark(...).benchmark_result.nc_latency.get_latency_percentile``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from typing import Any

import numpy as np


def _sdk(style: str) -> Any:
    return importlib.import_module("nki" if style == "new" else "neuronxcc.nki")


def _style_of(text: str) -> str:
    from autocomp.backends.nki.detect import api_style

    styles = api_style(text)
    return "old" if styles == {"old"} else "new"


def probe() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for style, mod in (("new", "nki.language"), ("old", "neuronxcc.nki.language")):
        try:
            importlib.import_module(mod)
            root = importlib.import_module("nki" if style == "new" else "neuronxcc")
            found[style] = str(getattr(root, "__version__", "unknown version"))
        except Exception:
            found[style] = None
    return found


def _load(path: str, function: str) -> tuple[Any, Any]:
    spec = importlib.util.spec_from_file_location("autocomp_nki_neuron_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, function)


def _raw(fn: Any) -> Any:
    for attr in ("func", "__wrapped__", "fn"):
        inner = getattr(fn, attr, None)
        if callable(inner):
            return inner
    return fn


def simulate(sdk: Any, fn: Any, args: list[np.ndarray]) -> list[np.ndarray]:
    if hasattr(sdk, "simulate_kernel"):
        out = sdk.simulate_kernel(fn, *args)
    else:
        out = sdk.simulate(fn)(*args)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(o) for o in outs if o is not None]


def benchmark(sdk: Any, fn: Any, args: list[np.ndarray], warmup: int, iters: int) -> dict[str, float]:
    bench = sdk.benchmark(warmup=warmup, iters=iters)(_raw(fn))
    bench(*args)
    latency = bench.benchmark_result.nc_latency
    # The SDK reports microseconds.
    return {"p50_ms": float(latency.get_latency_percentile(50)) / 1000.0,
            "p99_ms": float(latency.get_latency_percentile(99)) / 1000.0}


def main() -> int:
    req = json.loads(sys.stdin.read())
    sys.path[:0] = [p for p in req.get("extra_path", []) if isinstance(p, str)]
    from autocomp.backends.nki.portable import load_arrays, save_arrays
    from autocomp.backends.nki.runner import _make_inputs

    out: dict[str, Any] = {"nonce": req["nonce"], "status": "ok"}
    try:
        if req["action"] == "probe":
            out["sdk"] = probe()
        else:
            text = open(req["file"], encoding="utf-8").read()
            sdk = _sdk(_style_of(text))
            module, fn = _load(req["file"], req["function"])
            seeds = [int(s) for s in req.get("seeds", [0])]
            arrays: dict[str, np.ndarray] = {}
            if req["action"] == "inputs":
                for s in seeds:
                    for i, a in enumerate(_make_inputs(module, _raw(fn), s)):
                        arrays[f"s{s}_in{i}"] = a
            else:
                src = load_arrays(req["inputs"]["path"], req["inputs"]["dtypes"])
                for s in seeds:
                    n = sum(1 for k in src if k.startswith(f"s{s}_in"))
                    args = [src[f"s{s}_in{i}"] for i in range(n)]
                    if req["action"] == "simulate":
                        for i, o in enumerate(simulate(sdk, fn, args)):
                            arrays[f"s{s}_out{i}"] = o
                    elif req["action"] == "benchmark":
                        out["latency"] = benchmark(sdk, fn, args, int(req.get("warmup", 5)), int(req.get("iters", 20)))
                        break
            out["dtypes"] = save_arrays(req["arrays"], arrays)
    except Exception as exc:
        out = {"nonce": req["nonce"], "status": "error", "message": f"{type(exc).__name__}: {exc}"}
    with open(req["result"], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
