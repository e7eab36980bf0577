"""A small, forgiving scanner for C source: enough structure to find top-level function
definitions, their parameter lists and bodies, and top-level declarations.

Why not a real C parser: detection runs on every keystroke on half-written code, and
kernels use macros (``row_align(1)``, ``elem_t``) a parser would need the whole
preprocessor for. We only need brace/paren structure with comments and strings blanked out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS_NOT_FUNCS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "_Static_assert"}


def blank_comments(text: str) -> str:
    """``text`` with comments, string/char literals and preprocessor lines replaced by
    spaces (newlines kept), so offsets and line numbers stay valid."""
    out = list(text)
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c in " \t":
            i += 1
            continue
        if at_line_start and c == "#":
            # A preprocessor line, including backslash continuations.
            j = i
            while j < n:
                if text[j] == "\n" and (j == 0 or text[j - 1] != "\\"):
                    break
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            for k in range(i + 1, j - 1):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class FunctionDef:
    """A top-level function definition located in a file."""

    name: str
    start: int  # offset of the first character of the declaration (return type)
    params_start: int  # offset just after '('
    params_end: int  # offset of ')'
    body_start: int  # offset of '{'
    body_end: int  # offset just after the matching '}' (== len(text) when unbalanced)

    def params(self, text: str) -> str:
        return text[self.params_start : self.params_end]

    def body(self, text: str) -> str:
        return text[self.body_start : self.body_end]


def line_of(text: str, offset: int) -> int:
    """0-based line number of ``offset``."""
    return text.count("\n", 0, offset)


def _matching(clean: str, start: int, open_c: str, close_c: str) -> int:
    """Offset of the bracket closing the one at ``start``; -1 when unbalanced."""
    depth = 0
    for k in range(start, len(clean)):
        ch = clean[k]
        if ch == open_c:
            depth += 1
        elif ch == close_c:
            depth -= 1
            if depth == 0:
                return k
    return -1


def find_functions(text: str) -> list[FunctionDef]:
    """Every top-level ``type name(params) {...}`` in ``text``."""
    clean = blank_comments(text)
    found: list[FunctionDef] = []
    depth = 0
    i, n = 0, len(clean)
    stmt_start = 0  # where the current top-level declaration began
    while i < n:
        ch = clean[i]
        if ch == "{":
            if depth == 0:
                fn = _function_before(clean, stmt_start, i)
                close = _matching(clean, i, "{", "}")
                end = n if close < 0 else close + 1
                if fn is not None:
                    name, p_open, p_close = fn
                    found.append(FunctionDef(name, _first_nonspace(clean, stmt_start), p_open + 1, p_close, i, end))
                    i = end
                    stmt_start = end
                    continue
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                stmt_start = i + 1
        elif ch == ";" and depth == 0:
            stmt_start = i + 1
        i += 1
    return found


def _first_nonspace(clean: str, pos: int) -> int:
    while pos < len(clean) and clean[pos].isspace():
        pos += 1
    return pos


def _function_before(clean: str, stmt_start: int, brace: int) -> tuple[str, int, int] | None:
    """If the text between ``stmt_start`` and ``brace`` is a function header, return
    (name, offset of '(', offset of ')')."""
    header = clean[stmt_start:brace]
    k = len(header.rstrip())
    if k == 0 or header[k - 1] != ")":
        # Allow trailing attributes after the parameter list only as __attribute__((..)).
        stripped = re.sub(r"__attribute__\s*\(\(.*?\)\)\s*$", "", header.rstrip())
        k = len(stripped.rstrip())
        if k == 0 or stripped[k - 1] != ")":
            return None
        header = stripped
    p_close = stmt_start + k - 1
    # walk back to the matching '('
    depth = 0
    j = p_close
    while j >= stmt_start:
        ch = clean[j]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    if j < stmt_start:
        return None
    p_open = j
    before = clean[stmt_start:p_open].rstrip()
    m = re.search(r"([A-Za-z_]\w*)$", before)
    if not m:
        return None
    name = m.group(1)
    if name in _KEYWORDS_NOT_FUNCS or "=" in before:
        return None
    # A return type (or storage class) must precede the name.
    if not _IDENT.search(before[: m.start()]):
        return None
    return name, p_open, p_close


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True)
class GlobalArray:
    """A top-level array object declared outside any function (harness-file mode)."""

    name: str
    decl_offset: int


_GLOBAL_ARRAY = re.compile(r"(?:^|[\s*])([A-Za-z_]\w*)\s*(\[[^;=]*\])")


def find_global_arrays(text: str, exclude: tuple[int, int] | None = None) -> list[GlobalArray]:
    """Names of arrays declared at file scope (``static elem_t A[N][N] row_align(1);``),
    skipping those whose declaration lies inside ``exclude`` (a [start, end) offset range)."""
    clean = blank_comments(text)
    result: list[GlobalArray] = []
    depth = 0
    stmt_start = 0
    in_initializer = False
    for i, ch in enumerate(clean):
        if ch == "{":
            if depth == 0:
                in_initializer = "=" in clean[stmt_start:i]
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
            if depth == 0 and not in_initializer:
                stmt_start = i + 1
        elif ch == ";" and depth == 0:
            in_initializer = False
            stmt = clean[stmt_start:i]
            pos = stmt_start
            stmt_start = i + 1
            if "(" in stmt.split("[", 1)[0] and "row_align" not in stmt and "__attribute__" not in stmt:
                continue  # a prototype, not an object
            if re.search(r"\b(typedef|extern)\b", stmt):
                continue
            if exclude and exclude[0] <= pos < exclude[1]:
                continue
            head = stmt.split("=", 1)[0]
            for m in _GLOBAL_ARRAY.finditer(head):
                if m.group(1) in ("row_align", "__attribute__", "aligned"):
                    continue
                result.append(GlobalArray(m.group(1), pos))
                break
    return result
