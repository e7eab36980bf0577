"""Tunable integer constants of a C/C++/CUDA kernel, shared by the Gemmini and CUDA targets'
``tunables`` modules (as :mod:`.cscan` is shared by their detectors).

Found: ``#define NAME <integer>`` and ``const``/``constexpr``/``static const`` integer
declarations initialised with a literal, used inside the kernel's lines; with ``launch=True``
also a plain ``int NAME = <integer>;`` inside the kernel that a ``<<<grid, block>>>`` launch
uses. Left alone: constants that are part of the problem (named in the kernel's signature,
or used outside the kernel besides their definition), hexadecimal literals (flags, masks,
addresses) and values below 1. Rules derived from the code: a loop stepping by a tunable
must divide its bound, and ``X / T`` with a tunable ``T`` must divide ``X`` (divisibility of
the problem's shapes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from autocomp.backends.cscan import mask, match_bracket, split_top_level
from autocomp.tuning.space import Constraint, NotConstant, Tunable, c_eval, names_in

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+(?P<value>[^\n]*?)[ \t]*(?://[^\n]*|/\*[^\n]*)?$", re.M)
_INT_LITERAL = re.compile(r"^\(?\s*(?P<num>[1-9]\d*|0)[uUlL]*\s*\)?$")
_CONST_DECL = re.compile(
    r"\b(?:static\s+)?(?:const(?:expr)?\s+(?:static\s+)?|constexpr\s+)"
    r"(?:unsigned\s+|signed\s+)?(?:u?int(?:8|16|32|64)?_t|int|long(?:\s+long)?|short|size_t|unsigned)\s+"
    r"(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<num>[1-9]\d*)[uUlL]*\s*;"
)
_LOCAL_INT = re.compile(
    r"\b(?:unsigned\s+)?(?:int|size_t|unsigned|u?int32_t)\s+(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<num>[1-9]\d*)[uUlL]*\s*;"
)
_LAUNCH = re.compile(r"<<<(?P<cfg>.*?)>>>", re.S)


@dataclass
class Found:
    """An integer constant of the file (a tunable when the target keeps it)."""

    name: str
    value: int
    kind: str
    line: int
    start: int
    end: int
    in_span: bool


def span_offsets(text: str, start_line: int, end_line: int) -> tuple[int, int]:
    lines = text.splitlines(keepends=True)
    a = sum(len(l) for l in lines[:start_line])
    return a, a + sum(len(l) for l in lines[start_line:end_line])


def define_env(texts: Iterable[str], rounds: int = 4) -> dict[str, int]:
    """Values of the ``#define``s in ``texts`` that are integer constant expressions of each
    other (``#define DIM 16``, ``#define ACC_ROWS (1024)``, ``#define N (4 * DIM)``)."""
    bodies: dict[str, str] = {}
    for text in texts:
        for m in _DEFINE.finditer(text):
            if "(" in m["name"]:
                continue
            bodies.setdefault(m["name"], m["value"])
    env: dict[str, int] = {}
    for _ in range(rounds):
        for name, body in bodies.items():
            if name in env or not body.strip():
                continue
            try:
                env[name] = c_eval(body, env)
            except NotConstant:
                continue
    return env


def find_constants(text: str, start_line: int, end_line: int, *, launch: bool = False) -> list[Found]:
    """Integer constants defined with a decimal literal (``#define``s anywhere in the file,
    ``const``/``constexpr`` declarations, and with ``launch`` the block-size variables of
    launches inside the kernel)."""
    s0, s1 = span_offsets(text, start_line, end_line)
    clean = mask(text)
    found: list[Found] = []
    seen: set[str] = set()
    for m in _DEFINE.finditer(text):
        if not _is_directive(text, clean, m.start()):
            continue
        lit = _INT_LITERAL.match(m["value"])
        if not lit or m["name"] in seen:
            continue
        num_at = m.start("value") + m["value"].index(lit["num"])
        seen.add(m["name"])
        found.append(Found(m["name"], int(lit["num"]), "define", text.count("\n", 0, m.start()), num_at,
                           num_at + len(lit["num"]), s0 <= m.start() < s1))
    for m in _CONST_DECL.finditer(clean):
        if m["name"] in seen:
            continue
        seen.add(m["name"])
        found.append(Found(m["name"], int(m["num"]), "const", text.count("\n", 0, m.start()), m.start("num"),
                           m.end("num"), s0 <= m.start() < s1))
    if launch:
        cfg_names: set[str] = set()
        for lm in _LAUNCH.finditer(clean, s0, s1):
            parts = split_top_level(lm["cfg"])
            if len(parts) >= 2:
                cfg_names |= names_in(parts[1])
                cfg_names |= names_in(parts[0]) & names_in(parts[1])
        for m in _LOCAL_INT.finditer(clean, s0, s1):
            if m["name"] in cfg_names and m["name"] not in seen:
                seen.add(m["name"])
                found.append(Found(m["name"], int(m["num"]), "launch", text.count("\n", 0, m.start()), m.start("num"),
                                   m.end("num"), True))
    return found


def _is_directive(text: str, clean: str, offset: int) -> bool:
    """A ``#define`` at ``offset`` that is not inside a comment: preprocessor lines are
    blanked by :func:`mask` like comments, so check the line is not in a block comment."""
    before = text[:offset]
    opened = before.rfind("/*")
    return opened == -1 or before.rfind("*/") > opened


def usage(text: str, start_line: int, end_line: int, found: Found, signature: str = "") -> tuple[bool, bool, bool]:
    """(used inside the kernel, used outside it besides the definition, in the signature)."""
    s0, s1 = span_offsets(text, start_line, end_line)
    clean = mask(text)
    # Preprocessor lines are blanked by mask(); a #define's body can use another define.
    pattern = re.compile(rf"\b{re.escape(found.name)}\b")
    inside = outside = False
    for m in pattern.finditer(text):
        at = m.start()
        if not clean[at : m.end()].strip():
            # in a comment, a string or a preprocessor line: count only #define bodies and #if
            line_start = text.rfind("\n", 0, at) + 1
            line = text[line_start : text.find("\n", at) if text.find("\n", at) != -1 else len(text)]
            if not re.match(r"\s*#\s*(define|if|elif)", line) or not _is_directive(text, clean, at):
                continue
            if re.match(rf"\s*#\s*define\s+{re.escape(found.name)}\b", line):
                continue  # its own definition
        if found.start <= at <= found.end + 64 and found.kind != "define" and _is_decl(text, at, found):
            continue
        if s0 <= at < s1:
            inside = True
        else:
            outside = True
    return inside, outside, bool(pattern.search(signature))


def _is_decl(text: str, at: int, found: Found) -> bool:
    # the name in `const int NAME = 4;` is its declaration, not a use
    return text.count("\n", 0, at) == found.line and at < found.start


def kernel_signature(text: str, start_line: int, end_line: int, name: str) -> str:
    """The parameter list of function ``name`` inside the span ("" when not found)."""
    s0, s1 = span_offsets(text, start_line, end_line)
    clean = mask(text)
    m = re.compile(rf"\b{re.escape(name)}\s*\(").search(clean, s0, s1)
    if not m:
        return ""
    close = match_bracket(clean, m.end() - 1)
    return clean[m.end() : close] if close > 0 else ""


# ---------------------------------------------------------------------------- rules
def divisibility_rules(text: str, start_line: int, end_line: int, names: set[str], env: dict[str, int],
                       sizes: dict[str, int] | None = None) -> list[Constraint]:
    """``for (v = 0; v < BOUND; v += STEP)`` with a tunable in STEP: BOUND % STEP == 0;
    ``X / T`` with a tunable ``T`` (a name, after an operand chain of names, numbers, ``*``
    and ``/``): X % T == 0."""
    s0, s1 = span_offsets(text, start_line, end_line)
    clean = mask(text)[s0:s1]
    rules: dict[str, Constraint] = {}

    def add(numer: str, denom: str) -> None:
        key = f"({' '.join(numer.split())}) % ({' '.join(denom.split())}) == 0"
        if key in rules:
            return

        def check(e: dict[str, int], n: str = numer, d: str = denom) -> bool | None:
            try:
                a, b = c_eval(n, e, sizes), c_eval(d, e, sizes)
            except NotConstant:
                return None
            return b > 0 and a % b == 0

        rules[key] = Constraint(f"{' '.join(denom.split())} divides {' '.join(numer.split())}", check)

    for m in re.finditer(r"\bfor\s*\(", clean):
        close = match_bracket(clean, m.end() - 1)
        if close <= 0:
            continue
        parts = clean[m.end() : close].split(";")
        if len(parts) != 3:
            continue
        init, cond, incr = (p.strip() for p in parts)
        inc = re.match(r"(?P<v>\w+)\s*\+=\s*(?P<step>.+)$", incr) or re.match(r"(?P<v>\w+)\s*=\s*(?P=v)\s*\+\s*(?P<step>.+)$", incr)
        if not inc or not (names_in(inc["step"]) & names):
            continue
        bound = re.match(rf"{re.escape(inc['v'])}\s*<\s*(?P<b>.+)$", cond)
        start = re.search(r"=\s*(?P<s>[^=].*)$", init)
        if not bound or (start and start["s"].strip() not in ("0", "0u")):
            continue
        add(bound["b"], inc["step"])
    tokens = [(t.group(0), t.start()) for t in re.finditer(r"[A-Za-z_]\w*|\d+[uUlL]*|\S", clean)]
    for i, (tok, _at) in enumerate(tokens):
        if tok != "/" or i + 1 >= len(tokens) or tokens[i + 1][0] not in names:
            continue
        if i + 2 < len(tokens) and tokens[i + 2][0] in ("(", "["):
            continue
        j = i - 1
        chain: list[str] = []
        while j >= 0 and re.match(r"[A-Za-z_]\w*$|\d", tokens[j][0]):
            chain.insert(0, tokens[j][0])
            if j - 1 >= 0 and tokens[j - 1][0] in ("*", "/") and j - 2 >= 0 and re.match(r"[A-Za-z_]\w*$|\d", tokens[j - 2][0]):
                chain.insert(0, tokens[j - 1][0])
                j -= 2
                continue
            break
        if chain and (j - 1 < 0 or tokens[j - 1][0] not in (".", "->", ")", "]")):
            add(" ".join(chain), tokens[i + 1][0])
    return list(rules.values())


def to_tunable(f: Found, values: list[int], note: str) -> Tunable:
    return Tunable(f.name, f.value, sorted(set(values) | {f.value}), f.kind, f.line, f.start, f.end, f.in_span,
                   "proposed", note)
