"""The headroom line of the Gemmini plan prompt: how far a measured kernel is from the
floors the configured array imposes.

- compute floor: every MAC of the problem on a ``DIM`` x ``DIM`` array with every PE busy
  every cycle, ``MACs / DIM^2`` cycles (``DIM`` read from the timing model's
  ``sim/timing_params.h``);
- data floor: each input and output byte crossing the DMA once, at ``DMA_BEAT_BYTES`` per
  cycle.

MACs are read from the signature: an output ``[...][J]`` (rows ``I`` = the product of the
leading dimensions) and a 2-D input ``[K][J]`` give ``I * J * K`` (a GEMM's B, a
convolution's ``[KH*KW*C_in][C_out]`` weights). Kernels of another shape get no line.
"""

from __future__ import annotations

import math
import os
import re
from functools import lru_cache

from autocomp.model import Evaluation, Problem

from .detect import find_function
from .signature import Signature, parse_signature

_PARAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim", "timing_params.h")


@lru_cache(maxsize=1)
def model_constants() -> dict[str, int]:
    """DIM and DMA_BEAT_BYTES of the timing model (defaults 16 and 16 when unreadable)."""
    found = {"DIM": 16, "DMA_BEAT_BYTES": 16}
    try:
        text = open(_PARAMS, encoding="utf-8").read()
    except OSError:
        return found
    for name in found:
        m = re.search(rf"constexpr\s+\w+\s+{name}\s*=\s*(\d+)\s*;", text)
        if m:
            found[name] = int(m.group(1))
    return found


def macs_of(sig: Signature) -> int | None:
    """Multiply-accumulates of a GEMM- or convolution-shaped signature, else None."""
    best = None
    for out in sig.outputs:
        if not out.shape or len(out.shape) < 2:
            continue
        j = out.shape[-1]
        rows = math.prod(out.shape[:-1])
        for w in sig.inputs:
            if w.shape and len(w.shape) == 2 and w.shape[1] == j and w.shape[0] > 1:
                macs = rows * j * w.shape[0]
                best = max(best or 0, macs)
    return best


@lru_cache(maxsize=64)
def _floors(file_text: str, name: str) -> tuple[int, int, int, int] | None:
    fn = find_function(file_text, name)
    if fn is None:
        return None
    try:
        sig = parse_signature(file_text, fn)
    except Exception:  # noqa: BLE001 - no headroom for kernels the harness reads differently
        return None
    macs = macs_of(sig)
    if not macs:
        return None
    consts = model_constants()
    dim = consts["DIM"]
    moved = sum(math.prod(p.shape) * p.elem_size for p in sig.params if p.shape)
    return macs, dim, -(-macs // (dim * dim)), -(-moved // consts["DMA_BEAT_BYTES"])


def headroom(problem: Problem, evaluation: Evaluation) -> str:
    floors = _floors(problem.file_text, problem.span.name)
    metric = evaluation.metrics.get("cycles")
    if floors is None or metric is None or not metric.value:
        return ""
    macs, dim, compute, data = floors
    floor = max(compute, data)
    return (
        f"compute floor {compute:,} cycles ({macs:,} MACs / {dim}x{dim} PEs, every PE busy every cycle); "
        f"data floor {data:,} cycles (inputs and outputs crossing the DMA once); "
        f"this version takes {metric.value / floor:.1f}x the larger floor."
    )
