"""Writing an optimized kernel back into its file without losing anything the user typed.

The kernel is replaced only where the exact text that was optimized still stands: at its
original lines, or (after edits above it) at the single place the original text occurs
now. Otherwise nothing is written and the caller says why.
"""

from __future__ import annotations

from autocomp.model import Problem


class StaleKernel(Exception):
    pass


def rewrite_kernel(current_file: str, problem: Problem, new_code: str) -> str:
    original = problem.code
    if problem.span.text_of(current_file) == original:
        return problem.span.replace_in(current_file, new_code)
    if original and current_file.count(original) == 1:
        start = current_file.index(original)
        replacement = new_code if new_code.endswith("\n") or not original.endswith("\n") else new_code + "\n"
        return current_file[:start] + replacement + current_file[start + len(original) :]
    raise StaleKernel(
        f"{problem.path}: the kernel `{problem.name}` changed since the run began; nothing was written. "
        "Run again on the current code, or use `autocomp show RUN` to see the best version."
    )
