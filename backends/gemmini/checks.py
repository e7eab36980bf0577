"""Cheap text checks on candidate code before it is built (verdict ``rejected``).

These only give friendlier, earlier messages. What holds the trust boundary is built in:
the kernel is compiled alone and its object file is checked (sections, instructions,
external symbols: :mod:`.objcheck`), the linked ELF is checked for kernel code in the
harness's range, the model checks the harness's bytes and the measurement protocol, the
clock cannot be written, and everything runs in the sandbox. The one rule enforced only
here is that a function kernel keeps the original's name and parameter list, so the harness
calls it the same way (a kernel that changes them otherwise fails to link or computes wrong
results).
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
