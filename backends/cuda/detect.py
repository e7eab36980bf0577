"""Finding CUDA kernels in files: ``.cu``/``.cuh`` sources and KernelBench-style Python.

``.cu``: one kernel span per host entry function that launches kernels (``<<<...>>>``).
The span runs from where the file's own code begins (after includes and the annotation),
or from the end of the previous entry, to the end of that entry, so a candidate may
rewrite kernels, add helpers and change launch configurations while keeping the entry's
signature. A file with ``__global__`` kernels but no launcher gets one span per kernel
(compile-only).

Python: only KernelBench-style files are claimed: a top-level ``class Model`` and a
top-level ``def get_inputs`` (arbitrary Python, NKI kernels included, is never claimed).
When the file also defines ``class ModelNew`` the span is the candidate section (the CUDA
source strings, the ``load_inline`` call and ``ModelNew``); otherwise it is ``Model``, and a
candidate replaces it with code that defines ``ModelNew``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from autocomp.backends import cscan
from autocomp.backends.cuda.annotations import _LINE
from autocomp.model import KernelSpan

TARGET = "cuda"
PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


def is_python(path: str) -> bool:
    return path.lower().endswith(".py")


def detect(path: str, text: str) -> list[KernelSpan]:
    """Kernels in ``text``; empty when none. Never raises."""
    try:
        if is_python(path):
            return detect_kernelbench(text)
        return detect_cu(text)
    except (RecursionError, ValueError, MemoryError):
        return []


# -- .cu ---------------------------------------------------------------------------------
def detect_cu(text: str) -> list[KernelSpan]:
    if "__global__" not in text:
        return []
    funcs = cscan.find_functions(text, cxx=True, closed_only=True)
    masked = cscan.mask(text)
    annotated_entry = None
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and m.group(1).split()[:1] == ["entry"] and len(m.group(1).split()) == 2:
            annotated_entry = m.group(1).split()[1]
    entries = [f for f in funcs if f.is_host and ("<<<" in f.body(masked) or f.name == annotated_entry)]
    lines = cscan.LineIndex(text)
    spans: list[KernelSpan] = []
    if entries:
        start = cscan.code_start_line(text)
        for f in entries:
            end_line = lines.line(f.body_end - 1) + 1
            first = min(start, lines.line(f.start))
            spans.append(KernelSpan(f.name, TARGET, first, end_line))
            start = end_line
        return spans
    for f in funcs:
        if f.is_global:
            spans.append(
                KernelSpan(f.name, TARGET, lines.line(f.start), lines.line(f.body_end - 1) + 1)
            )
    return spans


# -- KernelBench-style Python ------------------------------------------------------------
@dataclass
class KbLayout:
    """Where the parts of a KernelBench-style file are (0-based lines)."""

    tree: ast.Module
    model: ast.ClassDef
    model_new: ast.ClassDef | None
    span_start: int
    span_end: int


def _node_start(node: ast.stmt) -> int:
    decos = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decos]) - 1


def _is_problem_node(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in PROBLEM_NAMES:
        return True
    return False


def kb_layout(text: str) -> KbLayout | None:
    """The layout of a KernelBench-style file, or None when ``text`` is not one."""
    if "Model" not in text or "get_inputs" not in text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    model = model_new = None
    has_inputs = False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            model = node
        elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            model_new = node
        elif isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            has_inputs = True
    if model is None or not has_inputs:
        return None
    lines = text.splitlines()
    if model_new is None:
        start, end = _node_start(model), model.end_lineno or model.lineno
    else:
        body = tree.body
        idx = body.index(model_new)
        first = idx
        while first > 0 and not _is_problem_node(body[first - 1]):
            first -= 1
        last = idx
        while last + 1 < len(body) and not _is_problem_node(body[last + 1]):
            last += 1
        start = _node_start(body[first])
        end = body[last].end_lineno or body[last].lineno
    # take in comment lines right above the span
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    return KbLayout(tree=tree, model=model, model_new=model_new, span_start=start, span_end=end)


def detect_kernelbench(text: str) -> list[KernelSpan]:
    layout = kb_layout(text)
    if layout is None:
        return []
    name = "ModelNew" if layout.model_new is not None else "Model"
    return [KernelSpan(name, TARGET, layout.span_start, layout.span_end)]
