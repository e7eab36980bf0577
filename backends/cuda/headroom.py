"""The headroom line of the CUDA plan prompt: a roofline floor for the problem on the GPU
that measured it, so the model knows how far the measured time is from what the memory
system and the arithmetic units allow.

floor = max(bytes moved / peak HBM bandwidth, FLOPs / peak FLOP/s)

- bytes: every input read once and every output written once. For annotated ``.cu`` files
  the buffers and their sizes come from the annotations; for KernelBench-style Python the
  inputs come from ``get_inputs()`` read statically (module-level integer constants and
  ``torch.randn``/``rand``/``zeros``/``ones``/``empty``/``randint`` shapes; nothing is run), the
  output only when it is known (a matrix product); otherwise the floor counts the inputs
  alone, which is still a lower bound.
- FLOPs: ``2*M*N*K`` for a reference that is a matrix product (``torch.matmul``, ``mm``,
  ``bmm`` or ``@`` of the two inputs); else no compute floor.
- peaks: the vendor datasheet figures below (dense, no sparsity; FP32 on CUDA cores for
  32-bit data, the FP16/BF16 tensor-core figure for 16-bit data). They are a model, not a
  measurement: sustained bandwidth is typically 80-90% of the datasheet figure. On the
  H200 this project was lent, a device-to-device copy sustained about 4.3 TB/s of the
  datasheet's 4.8 and an 8192^3 bf16 matrix product about 790 of its 989 dense TFLOP/s
  (PyTorch, measured on that machine in 2026-10; public H200 spec pages agree with the table).

Without a known GPU (no timed run, or a GPU not in the table) there is no line.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from autocomp.model import Evaluation, Problem


@dataclass(frozen=True)
class Peaks:
    name: str
    hbm_bytes_per_s: float
    fp32_flops: float
    fp16_tensor_flops: float
    source: str


# (pattern on the device name, peaks). Order matters: the first match wins.
# Figures: NVIDIA datasheets (H200: "NVIDIA H200 Tensor Core GPU" datasheet; H100: "NVIDIA H100
# Tensor Core GPU" datasheet, SXM5 / PCIe / NVL columns; A100: "NVIDIA A100 Tensor Core GPU"
# datasheet; L40S, L4, A10: their product datasheets). Tensor figures are the dense ones
# (the datasheets print the 2:4-sparse figure, twice these).
_TABLE: tuple[tuple[str, Peaks], ...] = (
    (r"H200\s*NVL", Peaks("H200 NVL", 4.8e12, 60e12, 835e12, "NVIDIA H200 NVL datasheet")),
    (r"H200", Peaks("H200", 4.8e12, 67e12, 989e12, "NVIDIA H200 SXM datasheet")),
    (r"H100\s*NVL", Peaks("H100 NVL", 3.9e12, 60e12, 835e12, "NVIDIA H100 NVL datasheet")),
    (r"H100\s*PCIe", Peaks("H100 PCIe", 2.0e12, 51e12, 756e12, "NVIDIA H100 PCIe datasheet")),
    (r"H100", Peaks("H100 SXM", 3.35e12, 67e12, 989e12, "NVIDIA H100 SXM5 datasheet")),
    (r"A100.*80\s*GB.*PCIe", Peaks("A100 80GB PCIe", 1.935e12, 19.5e12, 312e12, "NVIDIA A100 datasheet")),
    (r"A100.*80\s*GB", Peaks("A100 80GB SXM", 2.039e12, 19.5e12, 312e12, "NVIDIA A100 datasheet")),
    (r"A100", Peaks("A100 40GB", 1.555e12, 19.5e12, 312e12, "NVIDIA A100 datasheet")),
    (r"L40S", Peaks("L40S", 0.864e12, 91.6e12, 362e12, "NVIDIA L40S datasheet")),
    (r"\bL4\b", Peaks("L4", 0.3e12, 30.3e12, 121e12, "NVIDIA L4 datasheet")),
    (r"\bA10\b", Peaks("A10", 0.6e12, 31.2e12, 125e12, "NVIDIA A10 datasheet")),
)


def peaks_for(device: str) -> Peaks | None:
    for pattern, peaks in _TABLE:
        if re.search(pattern, device, re.I):
            return peaks
    return None


@dataclass(frozen=True)
class Work:
    bytes: int
    flops: int | None
    half: bool  # 16-bit data (the tensor-core figure applies)
    outputs_counted: bool


# ---- reading the problem ------------------------------------------------------------------
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8, "double": 8,
                "int32": 4, "int": 4, "int64": 8, "long": 8, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
_MAKERS = {"randn", "rand", "zeros", "ones", "empty", "randint", "full"}


def _int(node: ast.AST, env: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)):
        a, b = _int(node.left, env), _int(node.right, env)
        return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.FloorDiv: a // b if b else 0,
                ast.Pow: a ** b if 0 <= b < 64 else 0}[type(node.op)]
    raise ValueError("not an integer constant")


def _tensor(node: ast.AST, env: dict[str, int]) -> tuple[tuple[int, ...], int] | None:
    """(shape, element bytes) of a ``torch.randn(...)``-like expression (possibly scaled)."""
    if isinstance(node, ast.BinOp):
        return _tensor(node.left, env) or _tensor(node.right, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MAKERS:
        args = list(node.args)
        if node.func.attr == "randint":
            args = [a for a in args if isinstance(a, (ast.Tuple, ast.List))][:1]
        elif node.func.attr == "full":
            args = args[:1]
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            args = list(args[0].elts)
        shape = tuple(_int(a, env) for a in args)
        elem = 8 if node.func.attr == "randint" else 4
        for kw in node.keywords:
            if kw.arg == "dtype" and isinstance(kw.value, ast.Attribute):
                elem = _DTYPE_BYTES.get(kw.value.attr, elem)
        return shape, elem
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("half", "bfloat16", "float"):
        inner = _tensor(node.func.value, env)
        return (inner[0], 4 if node.func.attr == "float" else 2) if inner else None
    return None


def _python_work(text: str) -> Work | None:
    tree = ast.parse(text)
    env: dict[str, int] = {}
    inputs: list[tuple[tuple[int, ...], int]] | None = None
    forward = ""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                env[node.targets[0].id] = _int(node.value, env)
            except (ValueError, ZeroDivisionError):
                pass
        elif isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            rets = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
            if len(rets) != 1 or not isinstance(rets[0].value, (ast.List, ast.Tuple)):
                return None
            found = [_tensor(e, env) for e in rets[0].value.elts]
            if any(f is None for f in found):
                return None
            inputs = found  # type: ignore[assignment]
        elif isinstance(node, ast.ClassDef) and node.name == "Model":
            forward = ast.get_source_segment(text, node) or ""
    if not inputs:
        return None
    total = sum(math.prod(s) * e for s, e in inputs)
    half = all(e == 2 for _s, e in inputs)
    flops = None
    counted = False
    if re.search(r"torch\.(matmul|mm|bmm)\(|\s@\s", forward) and len(inputs) == 2:
        (sa, ea), (sb, _eb) = inputs
        if len(sa) >= 2 and len(sb) >= 2 and sa[-1] == sb[-2] and sa[:-2] == sb[:-2]:
            batch, m, k, n = math.prod(sa[:-2]), sa[-2], sa[-1], sb[-1]
            flops = 2 * batch * m * n * k
            total += batch * m * n * ea
            counted = True
    return Work(total, flops, half, counted)


def problem_work(problem: Problem) -> Work | None:
    """Bytes (and FLOPs where known) the problem must move, or None when unreadable."""
    try:
        if problem.path.endswith(".cu"):
            from .annotations import parse

            ann = parse(problem.file_text, problem.path)
            if ann is None or not ann.buffers:
                return None
            half = all(b.elem_bytes == 2 for b in ann.buffers if b.is_float)
            return Work(ann.total_bytes(), None, half, True)
        return _python_work(problem.file_text)
    except Exception:  # noqa: BLE001 - a problem we cannot read statically gets no line
        return None


# ---- the line -----------------------------------------------------------------------------
def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def headroom_line(work: Work, ms: float, device: str) -> str:
    """The line for a version measured at ``ms`` on ``device``; "" for an unknown GPU."""
    peaks = peaks_for(device)
    if peaks is None or ms <= 0 or work.bytes <= 0:
        return ""
    mem_ms = work.bytes / peaks.hbm_bytes_per_s * 1e3
    what = "inputs read once and outputs written once" if work.outputs_counted else "inputs read once; outputs not counted"
    parts = [f"{_si(work.bytes, 'B')} ({what}) at {peaks.hbm_bytes_per_s / 1e12:g} TB/s = {mem_ms:.4g} ms"]
    floor, bound = mem_ms, "memory"
    if work.flops:
        peak = peaks.fp16_tensor_flops if work.half else peaks.fp32_flops
        kind = "FP16/BF16 tensor-core, dense" if work.half else "FP32"
        flop_ms = work.flops / peak * 1e3
        parts.append(f"{_si(work.flops, 'FLOP')} at {peak / 1e12:g} TFLOP/s {kind} = {flop_ms:.4g} ms")
        if flop_ms > floor:
            floor, bound = flop_ms, "compute"
    return (
        f"roofline floor on {peaks.name} (a model from {peaks.source} peaks, not a measurement): "
        + "; ".join(parts)
        + f"; floor {floor:.4g} ms ({bound}-bound). This version takes {ms / floor:.1f}x that floor "
        "(sustained bandwidth is typically 80-90% of peak)."
    )


def device_of(evaluation: Evaluation) -> str:
    """The GPU a timed evaluation ran on, from its metric source ("runner clock, H200, ...")."""
    metric = evaluation.metrics.get("ms")
    if metric is None:
        return ""
    parts = [p.strip() for p in metric.source.split(",")]
    return parts[1] if len(parts) > 1 else ""


def headroom(problem: Problem, evaluation: Evaluation, device: str | None = None) -> str:
    metric = evaluation.metrics.get("ms")
    device = device if device is not None else device_of(evaluation)
    if metric is None or not device:
        return ""
    work = problem_work(problem)
    return headroom_line(work, metric.value, device) if work else ""
