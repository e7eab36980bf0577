"""A small, forgiving scanner for C and C++/CUDA source, shared by the target backends.

Why it exists: the CUDA and Gemmini backends both need to find top-level function
definitions (name, parameter list, body) in kernel files, and both do it on every editor
keystroke over half-typed code, so nothing here may raise. A real parser would also need
the whole preprocessor (Gemmini kernels lean on macros such as ``row_align(1)`` and
``elem_t``; CUDA files on ``__global__`` and templates). Once comments, literals and
preprocessor lines are blanked out, the brace and parenthesis structure is enough, and
keeping one copy of that logic means both targets agree on what a function is.

Two dialects, chosen per call with ``cxx``:

* C (``cxx=False``, Gemmini): a definition is ``type name(params) {...}``; a return type
  (or storage class) must precede the name.
* C++/CUDA (``cxx=True``): also qualified and templated names (``ns::f``, ``f<T>``),
  trailing ``const``/``noexcept``/…, no return type needed (constructors, macros), and
  ``namespace``/``extern "C"`` blocks are searched too.

All offsets refer to the original text: masking keeps every character's position and
every newline.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# -- masking -----------------------------------------------------------------------------
_MASKED = re.compile(
    r"//[^\n]*"  # line comment
    r"|/\*.*?(?:\*/|\Z)"  # block comment; an unterminated one runs to the end
    r"|\"(?:\\.|[^\"\\\n])*(?:\"|(?=\n)|\Z)"  # string literal; an unterminated one stops at the line end
    r"|'(?:\\.|[^'\\\n])*(?:'|(?=\n)|\Z)"  # character literal, likewise
    r"|^[ \t]*\#(?:[^\n]*\\\n)*[^\n]*",  # preprocessor line, with backslash continuations
    re.DOTALL | re.MULTILINE,
)


def _spaces(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def mask(text: str) -> str:
    """A copy of ``text`` of the same length with comments, string and character literals
    (quotes included) and preprocessor lines turned into spaces. Newlines stay, so offsets
    and line numbers are the same as in ``text``."""
    return _MASKED.sub(_spaces, text)


# -- positions ---------------------------------------------------------------------------
def line_of(text: str, offset: int) -> int:
    """0-based line number of ``offset`` in ``text``."""
    return text.count("\n", 0, offset)


class LineIndex:
    """Offset to 0-based line in O(log n), for looking up many offsets in one text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1


_CLOSERS = {"{": "}", "(": ")", "[": "]", "<": ">"}


def match_bracket(clean: str, open_at: int) -> int:
    """Offset of the bracket that closes the one at ``open_at`` in masked text ``clean``;
    -1 when it is never closed."""
    open_ch = clean[open_at]
    close_ch = _CLOSERS[open_ch]
    depth = 0
    for k in range(open_at, len(clean)):
        ch = clean[k]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return k
    return -1


# -- function headers --------------------------------------------------------------------
# Words that can stand before "(...) {" without naming a function.
_NOT_FUNCTIONS = frozenset(
    {"if", "for", "while", "switch", "return", "sizeof", "catch", "do", "else", "case", "_Static_assert"}
)
_CXX_TRAILING = re.compile(r"(?:const|noexcept|override|final|__restrict__)\s*$")
_C_NAME = re.compile(r"[A-Za-z_]\w*$")
_CXX_NAME = re.compile(r"([A-Za-z_]\w*(?:::[A-Za-z_~]\w*)*)\s*(?:<[^<>]*>)?$")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NAMESPACE = re.compile(r"^(?:namespace\b[\w:\s]*|extern\s*)$")


@dataclass(frozen=True)
class Header:
    """A function declarator found in a header string; offsets are into that string."""

    name: str  # unqualified: "f" for "ns::f"
    name_start: int  # where the (possibly qualified) name begins
    params_open: int  # offset of "("
    params_close: int  # offset of ")"


def parse_header(header: str, *, cxx: bool = False) -> Header | None:
    """The declarator when masked ``header`` (the text before a ``{``) ends like a function
    definition's ``... name(params)``; None otherwise."""
    h = header.rstrip()
    if cxx:
        while True:
            m = _CXX_TRAILING.search(h)
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
    m = (_CXX_NAME if cxx else _C_NAME).search(before)
    if not m:
        return None
    name = m.group(0) if not cxx else m.group(1).split("::")[-1]
    if name in _NOT_FUNCTIONS:
        return None
    if not cxx and not _IDENT.search(before[: m.start()]):
        return None  # C: a return type (or storage class) must come first
    return Header(name, m.start(), open_at, close)


# -- function definitions ----------------------------------------------------------------
@dataclass(frozen=True)
class FunctionDef:
    """A top-level function definition, as offsets into the scanned text."""

    name: str
    start: int  # first character of the definition (return type or qualifiers)
    name_start: int  # first character of the (possibly qualified) name
    params_start: int  # just after "("
    params_end: int  # offset of ")"
    body_start: int  # offset of "{"
    body_end: int  # just after the matching "}"; len(text) when the body is never closed
    qualifiers: str  # masked text from ``start`` to the name: return type, storage, CUDA qualifiers
    closed: bool = True  # False for a body still open at the end of the text

    def params(self, text: str) -> str:
        return text[self.params_start : self.params_end]

    def body(self, text: str) -> str:
        return text[self.body_start : self.body_end]

    # CUDA execution space, read from the qualifiers (plain C functions are host functions).
    @property
    def is_global(self) -> bool:
        return "__global__" in self.qualifiers

    @property
    def is_device(self) -> bool:
        return "__device__" in self.qualifiers and "__host__" not in self.qualifiers

    @property
    def is_host(self) -> bool:
        return not self.is_global and not self.is_device


def find_functions(text: str, *, cxx: bool = False, closed_only: bool = False) -> list[FunctionDef]:
    """Top-level function definitions in ``text``, in order. Never raises.

    An unbalanced ``{`` ends the scan: a function whose body is still open is returned
    with ``closed=False`` and ``body_end == len(text)`` (left out with ``closed_only``), and
    nothing after it is found. With ``cxx``, ``namespace`` and ``extern "C"`` blocks are
    searched as well."""
    clean = mask(text)
    found: list[FunctionDef] = []
    _scan(clean, 0, len(clean), cxx, found)
    if closed_only:
        found = [f for f in found if f.closed]
    return found


def _scan(clean: str, start: int, stop: int, cxx: bool, found: list[FunctionDef]) -> None:
    item_start = start  # where the current top-level declaration began
    i = start
    while i < stop:
        ch = clean[i]
        if ch in ";}":  # "}" here is a stray closer in unbalanced code
            item_start = i + 1
        elif ch == "{":
            close = match_bracket(clean, i)
            header = clean[item_start:i]
            if cxx and _NAMESPACE.match(header.strip()):
                if close < 0:
                    return
                _scan(clean, i + 1, close, cxx, found)
            else:
                h = parse_header(header, cxx=cxx)
                if h is not None and "=" not in header[: h.name_start]:
                    first = item_start + len(header) - len(header.lstrip())
                    found.append(
                        FunctionDef(
                            name=h.name,
                            start=first,
                            name_start=item_start + h.name_start,
                            params_start=item_start + h.params_open + 1,
                            params_end=item_start + h.params_close,
                            body_start=i,
                            body_end=close + 1 if close >= 0 else len(clean),
                            qualifiers=clean[first : item_start + h.name_start],
                            closed=close >= 0,
                        )
                    )
                if close < 0:
                    return
            i = close + 1
            item_start = i
            continue
        i += 1


# -- parameter lists ---------------------------------------------------------------------
def split_top_level(text: str, sep: str = ",", brackets: str = "([{") -> list[str]:
    """``text`` split on ``sep`` outside the given kinds of brackets; parts are stripped
    and empty ones dropped."""
    opens = brackets
    closes = "".join(_CLOSERS[b] for b in brackets)
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def split_params(params: str) -> list[tuple[str, str]]:
    """C++ parameter list to (type, name) pairs: ``"const float* x, int n"`` ->
    ``[("const float*", "x"), ("int", "n")]``. Template arguments stay whole, default
    values are dropped, ``void`` means none, and an unnamed parameter gets name ``""``."""
    result = []
    for p in split_top_level(params, brackets="<(["):
        p = p.split("=")[0].strip()
        if not p or p == "void":
            continue
        m = re.search(r"([A-Za-z_]\w*)\s*$", p)
        if m and m.start() > 0 and p[: m.start()].strip():
            result.append((p[: m.start()].strip(), m.group(1)))
        else:
            result.append((p, ""))
    return result


# -- file layout -------------------------------------------------------------------------
def code_start_line(text: str) -> int:
    """0-based line where a file's own code begins: after the leading block of comments,
    blank lines, ``#include``s and ``#pragma once``, and the blank or ``// autocomp:``
    lines that follow it."""
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
    i = last_header + 1
    while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("// autocomp:")):
        i += 1
    return i


@dataclass(frozen=True)
class GlobalArray:
    """An array object declared at file scope, outside any function."""

    name: str
    decl_offset: int  # start of its declaration statement


_GLOBAL_ARRAY = re.compile(r"(?:^|[\s*])([A-Za-z_]\w*)\s*(\[[^;=]*\])")
_ARRAY_ATTRIBUTES = ("row_align", "__attribute__", "aligned")


def find_global_arrays(text: str, exclude: tuple[int, int] | None = None) -> list[GlobalArray]:
    """Arrays declared at file scope (``static elem_t A[N][N] row_align(1);``), skipping
    prototypes, typedefs, ``extern`` declarations and those whose declaration starts inside
    ``exclude`` (a [start, end) offset range). Used by Gemmini's test-program mode, so the
    ``row_align(..)`` attribute macro is understood."""
    clean = mask(text)
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
                if m.group(1) in _ARRAY_ATTRIBUTES:
                    continue
                result.append(GlobalArray(m.group(1), pos))
                break
    return result
