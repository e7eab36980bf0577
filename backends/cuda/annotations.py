"""The ``// autocomp:`` annotation that tells the harness how to call a ``.cu`` kernel.

A ``.cu`` file holds kernels and a host entry function that takes *device* pointers and
scalars. Nothing in C++ says which pointers are inputs, which are outputs, or how big they
are, so the user writes it down once in comment lines (documented in
``docs/cuda-annotations.md``)::

    // autocomp: entry row_softmax
    // autocomp: input  x float [rows * cols]
    // autocomp: output y float [rows * cols]
    // autocomp: scalar rows int 4096
    // autocomp: scalar cols int 1024
    // autocomp: tolerance 1e-4          (optional; default by dtype)
    // autocomp: range x -2 2            (optional; input values drawn from [lo, hi))

Without an annotation a ``.cu`` file is still compiled and reported; only verification
needs it. Sizes are integer expressions over the scalars (``+ - * / % ( )``), evaluated
here with a tiny arithmetic evaluator, never with ``eval``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from autocomp.backends.base import BackendError

# dtype name -> (C type, bytes, is_float)
DTYPES: dict[str, tuple[str, int, bool]] = {
    "float": ("float", 4, True),
    "double": ("double", 8, True),
    "half": ("__half", 2, True),
    "bfloat16": ("__nv_bfloat16", 2, True),
    "int": ("int", 4, False),
    "int32": ("int", 4, False),
    "int64": ("long long", 8, False),
    "uint8": ("unsigned char", 1, False),
}

DEFAULT_TOLERANCE = {"float": 1e-4, "double": 1e-4, "half": 1e-2, "bfloat16": 1e-2}

_LINE = re.compile(r"^\s*//\s*autocomp:\s*(.*?)\s*$")


@dataclass
class Buffer:
    name: str
    dtype: str
    size_expr: str
    output: bool
    count: int = 0
    inout: bool = False  # read and written: filled like an input, compared like an output
    low: float = -1.0
    high: float = 1.0

    @property
    def ctype(self) -> str:
        return DTYPES[self.dtype][0]

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def is_float(self) -> bool:
        return DTYPES[self.dtype][2]


@dataclass
class Scalar:
    name: str
    dtype: str
    value: float


@dataclass
class Annotation:
    """Parsed ``// autocomp:`` lines of one ``.cu`` file."""

    entry: str
    buffers: list[Buffer] = field(default_factory=list)
    scalars: list[Scalar] = field(default_factory=list)
    tolerance: float | None = None
    line: int = 0  # 0-based line of the first annotation line, for error messages

    def buffer(self, name: str) -> Buffer | None:
        return next((b for b in self.buffers if b.name == name), None)

    def scalar(self, name: str) -> Scalar | None:
        return next((s for s in self.scalars if s.name == name), None)

    @property
    def outputs(self) -> list[Buffer]:
        return [b for b in self.buffers if b.output]

    def tolerance_for(self, buf: Buffer) -> float:
        if self.tolerance is not None:
            return self.tolerance
        return DEFAULT_TOLERANCE.get(buf.dtype, 0.0)

    def total_bytes(self) -> int:
        return sum(b.count * b.elem_bytes for b in self.buffers)


def has_annotation(text: str) -> bool:
    return any(_LINE.match(line) for line in text.splitlines())


def parse(text: str, path: str = "<cuda file>") -> Annotation | None:
    """The file's annotation, or None when it has none. Raises BackendError (with the
    line and what to write instead) when an annotation is present but malformed."""
    entry: str | None = None
    first = -1
    buffers: list[Buffer] = []
    scalars: list[Scalar] = []
    ranges: dict[str, tuple[float, float]] = {}
    tolerance: float | None = None
    for idx, raw in enumerate(text.splitlines()):
        m = _LINE.match(raw)
        if not m:
            continue
        if first < 0:
            first = idx
        words = m.group(1).split()
        where = f"{path}:{idx + 1}"
        if not words:
            continue
        key = words[0]
        try:
            if key == "entry" and len(words) == 2:
                entry = words[1]
            elif key in ("input", "output", "inout") and len(words) >= 4:
                name, dtype = words[1], words[2]
                size = " ".join(words[3:]).strip()
                if not (size.startswith("[") and size.endswith("]")):
                    raise ValueError("size must be written in brackets, e.g. [rows * cols]")
                _check_dtype(dtype)
                buffers.append(Buffer(name, dtype, size[1:-1].strip(), output=key != "input", inout=key == "inout"))
            elif key == "scalar" and len(words) == 4:
                _check_dtype(words[2])
                scalars.append(Scalar(words[1], words[2], float(words[3])))
            elif key == "tolerance" and len(words) == 2:
                tolerance = float(words[1])
            elif key == "range" and len(words) == 4:
                ranges[words[1]] = (float(words[2]), float(words[3]))
            else:
                raise ValueError(f"cannot read `{m.group(1)}`")
        except ValueError as exc:
            raise BackendError(
                f"{where}: bad autocomp annotation: {exc}. See docs/cuda-annotations.md; e.g. "
                "`// autocomp: input x float [n]`, `// autocomp: scalar n int 1024`."
            ) from None
    if first < 0:
        return None
    if entry is None:
        raise BackendError(f"{path}:{first + 1}: autocomp annotation has no `// autocomp: entry FUNCTION` line")
    env = {s.name: s.value for s in scalars}
    for b in buffers:
        try:
            b.count = int(evaluate_size(b.size_expr, env))
        except ValueError as exc:
            raise BackendError(f"{path}: size of buffer {b.name!r}: {exc}") from None
        if b.count <= 0:
            raise BackendError(f"{path}: buffer {b.name!r} has size {b.count}; sizes must be positive")
        if b.name in ranges:
            b.low, b.high = ranges.pop(b.name)
        elif not b.is_float:
            b.low, b.high = 0, 16
    if ranges:
        raise BackendError(f"{path}: `range` names unknown buffers: {', '.join(ranges)}")
    if not any(b.output for b in buffers):
        raise BackendError(f"{path}: the annotation declares no `output` buffer; nothing could be checked")
    return Annotation(entry=entry, buffers=buffers, scalars=scalars, tolerance=tolerance, line=first)


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"unknown type {dtype!r}; use one of {', '.join(DTYPES)}")


def evaluate_size(expr: str, env: dict[str, float]) -> float:
    """Integer arithmetic over scalar names; anything else is refused."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot parse size expression {expr!r}") from None

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ValueError(f"unknown name {node.id!r} in {expr!r}; declare it with `// autocomp: scalar`")
            return env[node.id]
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            for op, value in ops.items():
                if isinstance(node.op, op):
                    return value
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                if b == 0:
                    raise ValueError(f"division by zero in {expr!r}")
                return a // b if not isinstance(node.op, ast.Mod) else a % b
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"unsupported syntax in size expression {expr!r}")

    return ev(tree)
