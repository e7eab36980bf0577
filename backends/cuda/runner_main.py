"""What both GPU timers (:mod:`gpu_runner` for KernelBench problems, :mod:`cu_runner` for
annotated ``.cu`` files) do around their run: make the process non-dumpable before any
child exists, read the spec, check the one library the timer needs, and write the verdict
to the sandbox's result channel (descriptor 3), which no child holds."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import traceback
from typing import Any, Callable


def nondumpable() -> None:
    """No ptrace, /proc/<pid>/mem or environ of this process for its children."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def emit(result: dict[str, Any]) -> None:
    """The verdict on descriptor 3 (stdout only when run by hand, without the channel)."""
    data = json.dumps(result).encode()
    try:
        os.write(3, data)
        os.close(3)
    except OSError:
        sys.stdout.write(json.dumps(result) + "\n")


def timings(ref_ms: list[float], cand_ms: list[float], overhead_ms: list[float]) -> dict[str, Any]:
    """The figures of a timed run: each round trip (this process's clock) less the median
    transfer calibration measured on the reference's child, floored at 1 microsecond."""
    overhead = statistics.median(overhead_ms)
    floor = 1e-3
    return {"ref_ms": [max(m - overhead, floor) for m in ref_ms], "cand_ms": [max(m - overhead, floor) for m in cand_ms],
            "overhead_ms": overhead,
            "round_trip_ms": {"reference": statistics.median(ref_ms), "candidate": statistics.median(cand_ms)}}


def main(description: str, run: Callable[[dict[str, Any]], dict[str, Any]], needs: str, missing: str,
         argv: list[str] | None = None) -> int:
    """``python -m <timer> spec.json``: ``run(spec)`` gives the verdict; ``needs`` is the
    module the timer cannot work without, ``missing`` what to say when it is absent."""
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("spec")
    args = parser.parse_args(argv)
    nondumpable()
    with open(args.spec) as fh:
        spec = json.load(fh)
    try:
        importlib.import_module(needs)
    except ImportError:
        emit({"stage": "setup", "error": missing})
        return 0
    try:
        result = run(spec)
    except Exception:
        result = {"stage": "reference", "error": traceback.format_exc(limit=6)}
    emit(result)
    return 0
