"""Find NKI kernels in Python source: functions decorated ``@nki.jit``, ``@nki_jit``,
``@jit`` (imported from nki), ``@nki.baremetal`` and friends.

Detection is pure AST work (no import, no execution) and never raises: the editor calls
it on every keystroke.
"""

from __future__ import annotations

import ast

from autocomp.model import KernelSpan

_DECORATOR_ATTRS = {"jit", "baremetal", "benchmark", "profile", "simulate_kernel", "trace"}
_DECORATOR_NAMES = {"nki_jit", "jit", "baremetal"}


def _nki_aliases(tree: ast.Module) -> set[str]:
    """Names bound to an NKI module (``nki``, ``neuronxcc.nki as nki``, …)."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "nki" or a.name.startswith("nki.") or a.name.startswith("neuronxcc.nki"):
                    aliases.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in ("neuronxcc", "nki") or node.module.startswith(("neuronxcc.nki", "nki.", "torch_neuronx")):
                for a in node.names:
                    aliases.add(a.asname or a.name)
    return aliases


def _is_nki_decorator(dec: ast.expr, aliases: set[str]) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Attribute) and target.attr in _DECORATOR_ATTRS:
        base = target.value
        while isinstance(base, ast.Attribute):
            base = base.value
        return isinstance(base, ast.Name) and (base.id in aliases or base.id in ("nki", "neuronxcc"))
    if isinstance(target, ast.Name):
        return target.id == "nki_jit" or (target.id in _DECORATOR_NAMES and target.id in aliases)
    return False


def find_kernels(text: str, target: str = "nki") -> list[KernelSpan]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    aliases = _nki_aliases(tree)
    spans: list[KernelSpan] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_nki_decorator(d, aliases) for d in node.decorator_list):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            spans.append(KernelSpan(name=node.name, target=target, start_line=start, end_line=node.end_lineno or node.lineno))
    return spans


def api_style(text: str) -> set[str]:
    """Which API families the file imports: "new" (``import nki``), "old" (``neuronxcc.nki``)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    styles: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for n in names:
            if n == "nki" or n.startswith("nki."):
                styles.add("new")
            elif n.startswith("neuronxcc"):
                styles.add("old")
    return styles
