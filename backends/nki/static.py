"""Static checks on a candidate kernel before it runs.

The candidate is untrusted text from an LLM. Its whole file is checked against the
allowlist of the NKI language subset (:mod:`autocomp.backends.nki.validate`): anything
outside nl/nisa calls, arithmetic, loops over NKI ranges, tile indexing and helpers that do
the same is REJECTED here with the line and the reason. The kernel signature must stay the
original's, and one file uses one NKI API style, as the real compiler requires. The OS
sandbox the kernel then runs in is the first line of defence; this is the second.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from autocomp.backends.nki.detect import api_style
from autocomp.backends.nki.validate import validate_file


@dataclass
class StaticIssue:
    line: int  # 1-based line in the whole file
    message: str
    kind: str = "rejected"  # or "syntax"


def check_candidate(file_text: str, start_line: int, code: str, function: str, original_code: str,
                    original_file: str | None = None) -> list[StaticIssue]:
    """Issues with ``code`` (the kernel span, placed at 0-based ``start_line`` in ``file_text``).

    ``original_file``: the user's file; its top-level statements that the candidate file
    keeps unchanged are the user's code and are not checked themselves (the kernel and the
    functions it calls always are). Without it, every statement of ``file_text`` is checked.
    When ``file_text`` is the original file itself, it is the user's code, which the oracle
    runs trusted: only what the Neuron compiler would refuse is reported, not the allowlist
    written for LLM rewrites (``autocomp eval`` takes AWS's samples as they are)."""
    try:
        span_tree = ast.parse(code)
    except SyntaxError as exc:
        return [StaticIssue(start_line + (exc.lineno or 1), f"syntax error: {exc.msg}", "syntax")]
    try:
        ast.parse(file_text)
    except SyntaxError as exc:
        return [StaticIssue(exc.lineno or 0, f"syntax error: {exc.msg}", "syntax")]
    issues: list[StaticIssue] = []
    funcs = [n for n in span_tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    if not funcs:
        return [StaticIssue(start_line + 1, f"the replacement must define the kernel function {function!r}")]
    try:
        orig = next(n for n in ast.parse(original_code).body if isinstance(n, ast.FunctionDef) and n.name == function)
        if [a.arg for a in orig.args.args] != [a.arg for a in funcs[0].args.args]:
            issues.append(StaticIssue(start_line + funcs[0].lineno,
                                      f"the kernel signature changed: expected parameters {[a.arg for a in orig.args.args]}"))
    except (SyntaxError, StopIteration):
        pass
    if len(api_style(file_text)) > 1:
        issues.append(StaticIssue(1, "the file imports both `nki` and `neuronxcc.nki`; use one NKI API style per kernel"))
    own = original_file is not None and file_text == original_file
    issues += [StaticIssue(i.line, i.message) for i in validate_file(file_text, function, original_file)
               if not own or i.rule == "compiler"]
    return sorted(issues, key=lambda i: i.line)
