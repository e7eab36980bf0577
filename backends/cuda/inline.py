"""CUDA source held in Python strings (KernelBench's ``load_inline`` style), made
compilable on its own with plain ``nvcc`` — no torch headers.

Compiling a translation unit that includes ``torch/extension.h`` takes minutes on a small
machine, and CPU torch cannot build CUDA extensions at all. The device code is what we
want ptxas figures for, so: the torch-facing host wrapper (anything mentioning ``torch::``,
``at::``, ``Tensor``, ``PYBIND11`` …) and torch includes are blanked out, and the rest is
compiled with the CUDA headers a torch include would have brought in forced in with
``-include``. Blanking keeps every remaining line at its original line number, so nvcc's
line numbers map straight back into the Python file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from autocomp.backends import cscan

TORCH_MARKERS = re.compile(r"\btorch::|\bat::|\bc10::|\bTensor\b|\bTORCH_|\bAT_[A-Z]|PYBIND11|pybind11|\bC10_")
TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"](torch|ATen|c10|pybind11|THC)/")
# headers a torch include would have made visible to the device code
FORCED_INCLUDES = ("cuda_fp16.h", "cuda_bf16.h", "cstdint", "cfloat", "cmath")


@dataclass
class InlineSource:
    """One Python string constant holding CUDA code."""

    variable: str  # the name it is assigned to, or "" when not a simple assignment
    first_line: int  # 0-based line in the Python file of the string's first line
    source: str


def cuda_strings(text: str, start_line: int = 0, end_line: int | None = None) -> list[InlineSource]:
    """String constants containing ``__global__`` whose first line lies in
    ``[start_line, end_line)``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            target = node.targets[0]
            if isinstance(target, ast.Name):
                names[id(node.value)] = target.id
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
            first = node.lineno - 1
            if first < start_line or (end_line is not None and first >= end_line):
                continue
            found.append(InlineSource(names.get(id(node), ""), first, node.value))
    found.sort(key=lambda s: s.first_line)
    return found


def _blank(chars: list[str], start: int, end: int) -> None:
    for k in range(start, end):
        if chars[k] != "\n":
            chars[k] = " "


def standalone(source: str) -> tuple[str, list[str]]:
    """(source with torch-facing parts blanked, names of the blanked functions)."""
    chars = list(source)
    # torch includes and torch-using macros
    offset = 0
    for line in source.splitlines(keepends=True):
        s = line.strip()
        if s.startswith("#") and (TORCH_INCLUDE.match(line) or TORCH_MARKERS.search(line)):
            _blank(chars, offset, offset + len(line))
        offset += len(line)
    masked = cscan.mask(source)
    dropped: list[str] = []
    for start, end, name in _top_level_items(masked):
        while start < end and masked[start].isspace():
            start += 1
        if TORCH_MARKERS.search(source[start:end]):
            _blank(chars, start, end)
            if name:
                dropped.append(name)
    return "".join(chars), dropped


def _top_level_items(masked: str) -> list[tuple[int, int, str]]:
    """(start, end, function name or "") for each top-level declaration or definition."""
    items: list[tuple[int, int, str]] = []
    i, n = 0, len(masked)
    start = 0
    while i < n:
        ch = masked[i]
        if ch == ";":
            if masked[start:i].strip():
                items.append((start, i + 1, ""))
            start = i + 1
        elif ch == "{":
            close = cscan.match_bracket(masked, i)
            if close < 0:
                break
            parsed = cscan.parse_header(masked[start:i], cxx=True)
            if parsed or re.match(r"^\s*(namespace\b|extern\b)", masked[start:i]):
                items.append((start, close + 1, parsed.name if parsed else ""))
                start = close + 1
            i = close + 1
            continue
        i += 1
    return items
