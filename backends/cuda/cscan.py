"""A small, forgiving scanner for CUDA C++ source: finds top-level functions and their
extents without a real parser.

Why not a parser: detection runs on every keystroke in the editor and must never fail on
half-typed code, and the shapes we need (``__global__`` kernels, host launchers, their
parameter lists) are visible from brace and parenthesis structure once comments, strings
and preprocessor lines are masked out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_IDENT = re.compile(r"[A-Za-z_]\w*")


_MASKED = re.compile(
    r"//[^\n]*"                               # line comment
    r"|/\*.*?(?:\*/|\Z)"                      # block comment (unterminated: to the end)
    r"|\"(?:\\.|[^\"\\\n])*(?:\"|(?=\n)|\Z)"      # string literal (unterminated: to the line end)
    r"|'(?:\\.|[^'\\\n])*(?:'|(?=\n)|\Z)"         # character literal
    r"|^[ \t]*\#(?:[^\n]*\\\n)*[^\n]*",            # preprocessor line with continuations
    re.DOTALL | re.MULTILINE,
)


def _blank_match(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def mask(text: str) -> str:
    """Same-length copy of ``text`` with comments, string/char literals and preprocessor
    lines replaced by spaces (newlines kept), so offsets and line numbers still match."""
    return _MASKED.sub(_blank_match, text)


@dataclass
class CFunction:
    """A top-level function definition: header (return type, qualifiers, name, params)
    and body, as offsets into the original text."""

    name: str
    header_start: int
    body_start: int  # offset of "{"
    end: int  # offset just past "}"
    params: str  # text between the parameter parentheses (masked)
    qualifiers: str  # header text before the name (masked)
    is_global: bool
    is_device: bool
    launches: bool  # body contains a <<< >>> launch
    body: str = field(repr=False, default="")

    @property
    def is_host(self) -> bool:
        return not self.is_global and not self.is_device


def line_of(text: str, offset: int) -> int:
    """0-based line number of ``offset``."""
    return text.count("\n", 0, offset)


class LineIndex:
    """Offset -> line lookups in O(log n), for files with many functions."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        import bisect

        return bisect.bisect_right(self.starts, offset) - 1


def _match(masked: str, open_at: int, open_ch: str, close_ch: str) -> int:
    """Offset of the bracket closing the one at ``open_at``; -1 when unbalanced."""
    depth = 0
    for j in range(open_at, len(masked)):
        ch = masked[j]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _header_name(header: str) -> tuple[str, str, str] | None:
    """(name, qualifiers, params) when ``header`` ends like a function declarator."""
    h = header.rstrip()
    # trailing qualifiers after the parameter list
    while True:
        m = re.search(r"(const|noexcept|override|final|__restrict__)\s*$", h)
        if not m:
            break
        h = h[: m.start()].rstrip()
    if not h.endswith(")"):
        return None
    close = len(h) - 1
    depth = 0
    open_at = -1
    for j in range(close, -1, -1):
        if h[j] == ")":
            depth += 1
        elif h[j] == "(":
            depth -= 1
            if depth == 0:
                open_at = j
                break
    if open_at <= 0:
        return None
    before = h[:open_at].rstrip()
    m = re.search(r"([A-Za-z_]\w*(?:::[A-Za-z_~]\w*)*)\s*(<[^<>]*>)?$", before)
    if not m:
        return None
    name = m.group(1).split("::")[-1]
    if name in {"if", "for", "while", "switch", "return", "sizeof", "catch"}:
        return None
    return name, before[: m.start()], h[open_at + 1 : close]


def functions(text: str) -> list[CFunction]:
    """Top-level function definitions, descending into ``namespace`` and ``extern "C"``
    blocks. Never raises; unbalanced code simply yields fewer functions."""
    masked = mask(text)
    found: list[CFunction] = []
    _scan(text, masked, 0, len(masked), found)
    return found


def _scan(text: str, masked: str, start: int, stop: int, found: list[CFunction]) -> None:
    item_start = start
    i = start
    while i < stop:
        ch = masked[i]
        if ch == ";":
            item_start = i + 1
        elif ch == "{":
            close = _match(masked, i, "{", "}")
            if close < 0:
                return
            header = masked[item_start:i]
            stripped = header.strip()
            if re.match(r"^(namespace\b[\w:\s]*|extern\s*)$", stripped):
                _scan(text, masked, i + 1, close, found)
            else:
                parsed = _header_name(header)
                if parsed and "=" not in parsed[1]:
                    name, quals, params = parsed
                    hs = item_start + (len(header) - len(header.lstrip()))
                    body = masked[i : close + 1]
                    found.append(
                        CFunction(
                            name=name,
                            header_start=hs,
                            body_start=i,
                            end=close + 1,
                            params=params,
                            qualifiers=quals,
                            is_global="__global__" in quals,
                            is_device="__device__" in quals and "__host__" not in quals,
                            launches="<<<" in body,
                            body=text[i : close + 1],
                        )
                    )
            i = close + 1
            item_start = i
            continue
        i += 1


def split_params(params: str) -> list[tuple[str, str]]:
    """``"const float* x, int n"`` -> ``[("const float*", "x"), ("int", "n")]``.
    A parameter without a name gets an empty name."""
    out: list[tuple[str, str]] = []
    depth = 0
    cur = ""
    for ch in params:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    result = []
    for p in out:
        p = p.split("=")[0].strip()
        if not p or p == "void":
            continue
        m = re.search(r"([A-Za-z_]\w*)\s*$", p)
        if m and m.start() > 0 and p[: m.start()].strip():
            result.append((p[: m.start()].strip(), m.group(1)))
        else:
            result.append((p, ""))
    return result


def code_start_line(text: str) -> int:
    """First line after the leading block of comments, blank lines, ``#include``s and
    ``#pragma``s: where a ``.cu`` file's own code begins."""
    lines = text.splitlines()
    in_block = False
    last_header = -1
    for idx, raw in enumerate(lines):
        s = raw.strip()
        if in_block:
            last_header = idx
            if "*/" in s:
                in_block = False
            continue
        if not s or s.startswith("//"):
            continue
        if s.startswith("/*"):
            last_header = idx
            in_block = "*/" not in s
            continue
        if s.startswith("#include") or s.startswith("#pragma once"):
            last_header = idx
            continue
        break
    # skip blank lines after the header block
    i = last_header + 1
    while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("// autocomp:")):
        i += 1
    return i
