"""Writing an optimized kernel back into its file without losing anything the user typed,
through the one re-anchoring rule (autocomp.anchor): in place, moved after edits elsewhere,
or merged with edits inside the kernel; otherwise nothing is written and the caller says why.
"""

from __future__ import annotations

from typing import Any

from autocomp.anchor import Conflict, apply_placement, place
from autocomp.model import Problem


class StaleKernel(Conflict):
    pass


def current_span(backend: Any, path: str, text: str, name: str) -> tuple[int, int] | None:
    """The kernel's lines in ``text``, found again by name (None if it is gone)."""
    if backend is None:
        return None
    try:
        spans = backend.detect(path, text)
    except Exception:
        return None
    span = next((s for s in spans if s.name == name), None)
    return (span.start_line, span.end_line) if span else None


def rewrite_kernel(current_file: str, problem: Problem, new_code: str, backend: Any = None) -> str:
    try:
        placement = place(
            current_file, problem.code, problem.span.start_line, new_code,
            current=current_span(backend, problem.path, current_file, problem.name), name=f"the kernel `{problem.name}`",
        )
    except Conflict as exc:
        raise StaleKernel(
            f"{problem.path}: {exc}; nothing was written. "
            "Run again on the current code, or use `autocomp show RUN` to see the best version."
        ) from None
    return apply_placement(current_file, placement)
