"""Static checks on a candidate kernel before it runs.

The candidate is untrusted text from an LLM. It runs in its own process anyway, but a
kernel that reaches outside the NKI API (imports, the interpreter's internals, host NumPy
on tensor data, ``getattr`` tricks) could compute its result without NKI instructions and
fool the cost estimate. Such code is REJECTED here with the line and the reason. Mixing the
two NKI API styles in one file is rejected too, as the real compiler would.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from autocomp.backends.nki.detect import api_style

_BANNED_NAMES = {
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "input", "breakpoint", "memoryview", "object", "super", "type", "os", "sys", "subprocess", "importlib",
    "builtins", "inspect", "gc", "ctypes", "pickle", "threading", "multiprocessing", "signal", "shutil", "pathlib",
    "io", "socket", "exit", "quit", "help", "dir", "id", "classmethod", "staticmethod", "property",
}
_NUMPY_OK = {
    "float32", "float16", "bfloat16", "int32", "int16", "int8", "uint8", "uint16", "uint32", "bool_", "float64",
    "newaxis", "dtype", "float8_e4m3", "float8_e5m2", "add", "subtract", "multiply", "divide", "maximum", "minimum",
    "exp", "tanh", "sqrt", "log", "power", "true_divide", "sum", "max", "min", "prod", "amax", "amin",
}
_OLDER_ONLY = {"load", "store", "matmul", "load_transpose2d", "transpose", "sum", "mean", "prod"}


@dataclass
class StaticIssue:
    line: int  # 1-based line in the whole file
    message: str
    kind: str = "rejected"  # or "syntax"


def _numpy_aliases(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "numpy":
                    out.add(a.asname or "numpy")
    return out


def _language_aliases(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.endswith("nki.language") and a.asname:
                    out.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module in ("nki", "neuronxcc.nki"):
            for a in node.names:
                if a.name == "language":
                    out.add(a.asname or "language")
    return out


def check_candidate(file_text: str, start_line: int, code: str, function: str, original_code: str) -> list[StaticIssue]:
    """Issues with ``code`` (the kernel span, placed at 0-based ``start_line`` in the file)."""
    try:
        span_tree = ast.parse(code)
    except SyntaxError as exc:
        return [StaticIssue(start_line + (exc.lineno or 1), f"syntax error: {exc.msg}", "syntax")]
    try:
        file_tree = ast.parse(file_text)
    except SyntaxError as exc:
        return [StaticIssue(exc.lineno or 0, f"syntax error: {exc.msg}", "syntax")]
    issues: list[StaticIssue] = []
    off = start_line

    def issue(node: ast.AST, msg: str) -> None:
        issues.append(StaticIssue(off + getattr(node, "lineno", 1), msg))

    funcs = [n for n in span_tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    if not funcs:
        return [StaticIssue(off + 1, f"the replacement must define the kernel function {function!r}")]
    try:
        orig = next(n for n in ast.parse(original_code).body if isinstance(n, ast.FunctionDef) and n.name == function)
        if [a.arg for a in orig.args.args] != [a.arg for a in funcs[0].args.args]:
            issue(funcs[0], f"the kernel signature changed: expected parameters {[a.arg for a in orig.args.args]}")
    except (SyntaxError, StopIteration):
        pass

    styles = api_style(file_text)
    if len(styles) > 1:
        issues.append(StaticIssue(1, "the file imports both `nki` and `neuronxcc.nki`; use one NKI API style per kernel"))
    numpy_names = _numpy_aliases(file_tree)
    lang_names = _language_aliases(file_tree)
    for node in ast.walk(span_tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            issue(node, "imports inside the kernel are not allowed; use the file's NKI imports")
        elif isinstance(node, ast.Name) and node.id in _BANNED_NAMES:
            issue(node, f"`{node.id}` is not allowed in a kernel (only the NKI API and plain Python arithmetic)")
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            issue(node, f"`{node.id}` is not allowed in a kernel")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                issue(node, f"private attribute `.{node.attr}` is not allowed in a kernel")
            elif isinstance(node.value, ast.Name) and node.value.id in numpy_names and node.attr not in _NUMPY_OK:
                issue(node, f"`{node.value.id}.{node.attr}` computes on the host; kernels compute with NKI instructions")
            elif (isinstance(node.value, ast.Name) and node.value.id in lang_names and styles == {"new"}
                  and node.attr in _OLDER_ONLY):
                issue(node, f"`{node.value.id}.{node.attr}` belongs to the older neuronxcc.nki API; with `import nki` "
                      "use nisa instructions with dst=")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            issue(node, "global/nonlocal state is not allowed in a kernel")
    return issues
