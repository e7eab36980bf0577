"""Static checks on candidate code before it is built (verdict ``rejected``).

They guard the trust boundary, not style: candidate code may not name the harness's
symbols (``autocomp_*``), place code in another section (which could put it inside the
harness's address range, where the simulator honours measure and snapshot commands), or run
code outside the kernel call (a constructor could warm the accelerator before the measured
call); and a function kernel must keep the original's name and parameter list so the
harness calls it the same way.
"""

from __future__ import annotations

import re

from autocomp.backends.base import BackendError

from autocomp.backends.cscan import mask, split_top_level
from .detect import find_function
from .signature import ArrayParam, parse_param

_RESERVED = re.compile(r"autocomp", re.I)
_SECTION = re.compile(r"\bsection\s*\(|\.\s*(?:push)?section\b|\.org\b|#\s*pragma\s+GCC\s+(?:push_options|optimize)?\s*section")
_STARTUP = re.compile(r"\b(?:__)?(?:constructor|destructor)(?:__)?\b\s*[(),]|\binit_array\b|\batexit\s*\(")
_LINKER_TRICKS = re.compile(r"\b(?:__start_|__stop_|_start\b|tohost\b|fromhost\b)")


def reject_reason(code: str, kernel_name: str | None, original_params: list[ArrayParam] | None) -> str | None:
    """Why ``code`` may not be built, or None when it passes."""
    if not code.strip():
        return "the reply held no code for the kernel"
    if _RESERVED.search(code):
        return "names containing `autocomp` are reserved for the harness; rename them"
    if _SECTION.search(code):
        return "placing code or data in a named section (section attributes, .section/.org directives) is not allowed"
    if _STARTUP.search(mask(code)):
        return "code that runs outside the kernel call (constructor/destructor functions) is not allowed"
    if _LINKER_TRICKS.search(mask(code)):
        return "the kernel may not refer to the runtime's symbols (_start, tohost, fromhost, __start_/__stop_)"
    if kernel_name is None:
        return None
    fn = find_function(code, kernel_name)
    if fn is None:
        return f"the code must define the kernel function `{kernel_name}` (same name and parameters as the original)"
    if original_params is not None:
        clean = mask(code)
        raw = " ".join(fn.params(clean).split())
        parts = [] if raw in ("", "void") else split_top_level(raw)
        try:
            parsed = [parse_param(p, kernel_name) for p in parts]
        except BackendError as exc:
            return f"the kernel's parameter list changed: {exc}"
        want = [(p.ctype, tuple(d.replace(" ", "") for d in p.dims)) for p in original_params]
        got = [(ctype, tuple(d.replace(" ", "") for d in dims)) for _n, ctype, dims, _c in parsed]
        if want != got:
            return (
                f"`{kernel_name}` must keep the original parameter types and dimensions "
                f"({', '.join(p.c_declarator(p.name) for p in original_params)})"
            )
    return None
