"""Finding Gemmini kernels in C files.

Two shapes are recognised:

* **A kernel function**: a top-level C function that calls the Gemmini API
  (``gemmini_*``, the short-name dialect ``mvin``/``preload``/…, or the library's
  ``tiled_matmul_auto``/``tiled_conv_auto``), or, in a file that includes ``gemmini.h``,
  any function with array parameters. Its harness is generated from its signature.
* **An Autocomp-style harness file**: a whole test program in which the lines between
  ``// SUBSTITUTE HERE`` and ``// SUBSTITUTE END`` are the kernel. The file's own
  ``main`` runs it; outputs are compared through the file's global arrays.
"""

from __future__ import annotations

import re

from autocomp.model import KernelSpan

from autocomp.backends.cscan import FunctionDef, find_functions, line_of, mask

TARGET = "gemmini"
SUBSTITUTE_BEGIN = "// SUBSTITUTE HERE"
SUBSTITUTE_END = "// SUBSTITUTE END"
SUBSTITUTE_NAME = "substitute"

SHORT_NAMES = (
    "config_ex",
    "config_ld",
    "config_st",
    "config_norm",
    "mvin",
    "mvin2",
    "mvin3",
    "mvout",
    "preload",
    "compute_preloaded",
    "compute_accumulated",
    "fence",
)
_API_CALL = re.compile(
    r"\b(?:gemmini_\w+|tiled_matmul\w*|tiled_conv\w*|tiled_resadd\w*|"
    + "|".join(SHORT_NAMES)
    + r")\s*\("
)
_INCLUDES_GEMMINI = re.compile(r'^\s*#\s*include\s*[<"](?:[\w./]*/)?gemmini\.h[>"]', re.M)
_ARRAY_PARAM = re.compile(r"\[[^\]]*\]")

HINT = (
    "A Gemmini kernel is a C function that calls the Gemmini API (gemmini_*, mvin/preload/"
    "compute_preloaded/mvout, tiled_matmul_auto) or, in a file that includes gemmini.h, a "
    "function with array parameters such as `void matmul(const elem_t A[M][K], const elem_t "
    "B[K][N], elem_t C[M][N])`; or mark the kernel lines of a test program with "
    "`// SUBSTITUTE HERE` and `// SUBSTITUTE END`."
)


def includes_gemmini(text: str) -> bool:
    return bool(_INCLUDES_GEMMINI.search(text))


def is_kernel_function(fn: FunctionDef, clean: str, gemmini_file: bool) -> bool:
    """Whether ``fn`` (located in the comment-blanked text ``clean``) is a kernel."""
    if fn.name == "main":
        return False
    if _API_CALL.search(fn.body(clean)):
        return True
    return gemmini_file and bool(_ARRAY_PARAM.search(fn.params(clean)))


def substitute_span(text: str) -> KernelSpan | None:
    """The span between the SUBSTITUTE markers (exclusive of both marker lines)."""
    lines = text.splitlines()
    begin = end = None
    for i, line in enumerate(lines):
        s = line.strip()
        if begin is None and s.startswith(SUBSTITUTE_BEGIN):
            begin = i
        elif begin is not None and s.startswith(SUBSTITUTE_END):
            end = i
            break
    if begin is None or end is None:
        return None
    return KernelSpan(SUBSTITUTE_NAME, TARGET, begin + 1, end)


def function_spans(text: str) -> list[KernelSpan]:
    """Kernel functions of ``text`` as whole-line spans (from the return type's line
    through the closing brace's line)."""
    clean = mask(text)
    gemmini_file = includes_gemmini(text)
    spans: list[KernelSpan] = []
    for fn in find_functions(text):
        if fn.body_end > len(text) or not clean[fn.body_end - 1 : fn.body_end] == "}":
            continue  # unbalanced while the user is typing
        if is_kernel_function(fn, clean, gemmini_file):
            start = line_of(text, fn.start)
            end = line_of(text, fn.body_end - 1) + 1
            spans.append(KernelSpan(fn.name, TARGET, start, end))
    return spans


def detect_kernels(text: str) -> list[KernelSpan]:
    """All Gemmini kernels in ``text``; never raises."""
    try:
        sub = substitute_span(text)
        if sub is not None:
            return [sub]
        return function_spans(text)
    except Exception:  # detection runs on half-typed buffers; it must not fail loudly
        return []


def find_function(text: str, name: str) -> FunctionDef | None:
    """The top-level definition of ``name`` in ``text``."""
    return next((f for f in find_functions(text) if f.name == name), None)
