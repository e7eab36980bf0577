"""A kernel's tunable integer constants and the space of their values.

A :class:`Tunable` is one integer constant of the kernel's file (a ``#define``, a ``const``
integer, a Python module constant or default argument, a launch dimension) with the values
worth trying; a :class:`Space` is the tunables plus the constraints a configuration must meet
before it is worth an evaluation (scratchpad rows, PSUM bytes, threads per block, divisibility
of the problem's shapes, a user's ``require`` line). Each target's ``tunables`` module
(``backends/<t>/tunables.py``) finds them; nothing here knows a target.

A configuration (``{name: value}``) becomes candidate code with :meth:`Space.code_for`: the
kernel span with the literals inside it replaced, and constants defined outside the span
redefined at its top (``#undef``/``#define`` in C, an assignment in Python), so that the
candidate is ordinary code for the span that the evaluator, the cache and the beam treat like
any other. :meth:`Space.file_for` gives the whole file with each definition edited in place,
which is what ``autocomp tune --write`` writes.

User ranges come from comments anywhere in the file::

    // autocomp: tune TI in 4, 8, 16, 32
    # autocomp: tune TILE_N in 128..512 step 128
    // autocomp: tune require TI * TJ <= 64
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

# ---------------------------------------------------------------------------- directives
_DIRECTIVE = re.compile(r"(?://|#)\s*autocomp:\s*tune\s+(?P<body>[^\n]*)", re.I)
_RANGE = re.compile(r"^(?P<lo>-?\d+)\s*\.\.\s*(?P<hi>-?\d+)(?:\s+step\s+(?P<step>\d+))?$")
_MAX_VALUES = 4096


class DirectiveError(ValueError):
    """A ``autocomp: tune`` comment that cannot be read; the message names the line."""


@dataclass
class Directives:
    ranges: dict[str, list[int]] = field(default_factory=dict)
    requires: list[str] = field(default_factory=list)
    lines: set[int] = field(default_factory=set)  # 0-based lines holding a directive
    errors: list[str] = field(default_factory=list)


def parse_values(text: str) -> list[int]:
    """``4, 8, 16`` or ``128..512 step 128`` (inclusive; step 1 when not given)."""
    text = text.strip().rstrip("*/").strip()
    m = _RANGE.match(text)
    if m:
        lo, hi, step = int(m["lo"]), int(m["hi"]), int(m["step"] or 1)
        if step <= 0 or hi < lo:
            raise DirectiveError(f"empty range {text!r}")
        if (hi - lo) // step + 1 > _MAX_VALUES:
            raise DirectiveError(f"range {text!r} has more than {_MAX_VALUES} values")
        return list(range(lo, hi + 1, step))
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise DirectiveError("no values")
    try:
        values = [int(p, 0) for p in parts]
    except ValueError:
        raise DirectiveError(f"values must be integers: {text!r}") from None
    return sorted(dict.fromkeys(values))


def parse_directives(text: str) -> Directives:
    """Every ``autocomp: tune NAME in VALUES`` and ``autocomp: tune require EXPR`` comment."""
    out = Directives()
    for m in _DIRECTIVE.finditer(text):
        line = text.count("\n", 0, m.start())
        body = m["body"].strip().rstrip("*/").strip()
        out.lines.add(line)
        req = re.match(r"require\s+(.+)$", body)
        if req:
            out.requires.append(req.group(1).strip())
            continue
        rng = re.match(r"(?P<name>[A-Za-z_]\w*)\s+in\s+(?P<values>.+)$", body)
        if not rng:
            out.errors.append(f"line {line + 1}: expected `autocomp: tune NAME in 4, 8, 16` or `... in 128..512 step 128`")
            continue
        try:
            out.ranges[rng["name"]] = parse_values(rng["values"])
        except DirectiveError as exc:
            out.errors.append(f"line {line + 1}: {exc}")
    return out


# ---------------------------------------------------------------------------- safe arithmetic
_BIN = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.Pow: operator.pow,
}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
        ast.NotEq: operator.ne}


class NotConstant(ValueError):
    """The expression uses something other than integers and known names."""


def _trunc_div(a: int, b: int) -> int:  # C integer division
    if b == 0:
        raise NotConstant("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def safe_eval(expr: str | ast.AST, env: dict[str, int], c_division: bool = False) -> int:
    """Integer arithmetic, comparisons and ``and``/``or``/``not`` over ``env``; NotConstant
    for anything else (calls, attributes, unknown names). Never runs code."""
    node = ast.parse(expr.strip(), mode="eval").body if isinstance(expr, str) else expr

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, bool)):
            return int(n.value)
        if isinstance(n, ast.Name):
            if n.id in env:
                return int(env[n.id])
            raise NotConstant(n.id)
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            if isinstance(n.op, ast.USub):
                return -v
            if isinstance(n.op, ast.UAdd):
                return v
            if isinstance(n.op, ast.Not):
                return int(not v)
            if isinstance(n.op, ast.Invert):
                return ~v
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Div):
                if c_division:
                    return _trunc_div(a, b)
                if b == 0:
                    raise NotConstant("division by zero")
                return a // b if a % b == 0 else int(a / b)
            fn = _BIN.get(type(n.op))
            if fn is None:
                raise NotConstant(type(n.op).__name__)
            if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                raise NotConstant("division by zero")
            if isinstance(n.op, ast.Pow) and (b < 0 or b > 64):
                raise NotConstant("power")
            return int(fn(a, b))
        if isinstance(n, ast.Compare):
            left = ev(n.left)
            for op, right in zip(n.ops, n.comparators):
                r = ev(right)
                fn = _CMP.get(type(op))
                if fn is None or not fn(left, r):
                    return 0
                left = r
            return 1
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return int(all(vals)) if isinstance(n.op, ast.And) else int(any(vals))
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        raise NotConstant(type(n).__name__)

    try:
        return ev(node)
    except RecursionError:
        raise NotConstant("too deep") from None


_C_CAST = re.compile(
    r"\(\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:u?int(?:8|16|32|64)?_t|int|long(?:\s+long)?|short|char|size_t|"
    r"uintptr_t|elem_t|acc_t|float|double)\s*\)"
)
_C_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")


def c_to_python(expr: str, sizes: dict[str, int] | None = None) -> str:
    """A C integer expression in Python syntax (casts dropped, suffixes removed, ``&&``,
    ``||``, ``!``, ``sizeof(T)`` with ``sizes``); the caller evaluates it with
    :func:`safe_eval` (``c_division=True``)."""
    def size(m: re.Match[str]) -> str:
        t = " ".join(m.group(1).split())
        if sizes and t in sizes:
            return str(sizes[t])
        return " __sizeof__ "  # not evaluable

    e = re.sub(r"sizeof\s*\(\s*([\w ]+?)\s*\)", size, expr)
    e = _C_CAST.sub(" ", e)
    e = _C_SUFFIX.sub(r"\1", e)
    e = e.replace("&&", " and ").replace("||", " or ")
    e = re.sub(r"!(?!=)", " not ", e)
    return e


def c_eval(expr: str, env: dict[str, int], sizes: dict[str, int] | None = None) -> int:
    try:
        return safe_eval(c_to_python(expr, sizes), env, c_division=True)
    except (SyntaxError, ValueError, TypeError, OverflowError, MemoryError):
        raise NotConstant(expr) from None


# ---------------------------------------------------------------------------- the space
@dataclass
class Tunable:
    """One integer constant the tuner may change.

    ``start``/``end`` are the offsets of its value literal in the file; ``in_span`` says
    whether that literal lies inside the kernel's lines (then it is replaced in the
    candidate code; otherwise the candidate redefines the name at its top)."""

    name: str
    value: int
    values: list[int]
    kind: str  # define | const | module | default | launch
    line: int  # 0-based line of the definition
    start: int
    end: int
    in_span: bool
    source: str = "proposed"  # "comment" (a user's range) or "proposed" (the target's)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "values": list(self.values), "kind": self.kind,
                "line": self.line + 1, "source": self.source, "note": self.note}


@dataclass
class Constraint:
    """A rule a configuration must meet: ``check(env)`` True/False, or None when it cannot
    tell (then the configuration is kept)."""

    description: str
    check: Callable[[dict[str, int]], bool | None]


@dataclass
class Space:
    """The tunables of one kernel and the rules that prune configurations."""

    tunables: list[Tunable]
    constraints: list[Constraint]
    file_text: str
    span_start: int  # 0-based first line of the kernel
    span_end: int  # exclusive
    language: str  # "c" or "python"
    env: dict[str, int] = field(default_factory=dict)  # other known constants (shapes, hardware)
    notes: list[str] = field(default_factory=list)
    directive_lines: set[int] = field(default_factory=set)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tunables]

    def baseline(self) -> dict[str, int]:
        return {t.name: t.value for t in self.tunables}

    def size(self) -> int:
        return math.prod(len(t.values) for t in self.tunables) if self.tunables else 0

    def why_invalid(self, config: dict[str, int]) -> str | None:
        """The first rule ``config`` breaks, or None."""
        env = {**self.env, **config}
        for c in self.constraints:
            try:
                ok = c.check(env)
            except (NotConstant, ZeroDivisionError, OverflowError, ValueError, TypeError):
                ok = None
            if ok is False:
                return c.description
        return None

    def configs(self) -> Iterator[dict[str, int]]:
        """Every combination of values, in order (valid or not)."""
        for values in itertools.product(*(t.values for t in self.tunables)):
            yield dict(zip(self.names, values))

    def valid_configs(self) -> list[dict[str, int]]:
        return [c for c in self.configs() if self.why_invalid(c) is None]

    # -- turning a configuration into code ---------------------------------------------
    def _line_offsets(self) -> tuple[int, int]:
        lines = self.file_text.splitlines(keepends=True)
        start = sum(len(l) for l in lines[: self.span_start])
        end = start + sum(len(l) for l in lines[self.span_start : self.span_end])
        return start, end

    def code_for(self, config: dict[str, int]) -> str:
        """The kernel span's code under ``config`` (the original span when it changes
        nothing): in-span literals replaced, out-of-span constants redefined at the top.
        Lines holding ``autocomp: tune`` comments inside the span lose the comment (the
        candidate text may not name the harness), keeping line numbers."""
        s0, s1 = self._line_offsets()
        code = self.file_text[s0:s1]
        edits = sorted(
            ((t.start - s0, t.end - s0, str(config[t.name])) for t in self.tunables
             if t.in_span and t.name in config and config[t.name] != t.value),
            reverse=True,
        )
        for a, b, text in edits:
            code = code[:a] + text + code[b:]
        changed = [t for t in self.tunables if not t.in_span and t.name in config and config[t.name] != t.value]
        if not edits and not changed:
            return self.file_text[s0:s1]
        code = _strip_directives(code, self.language)
        prefix = ""
        for t in changed:
            if self.language == "c":
                prefix += f"#undef {t.name}\n#define {t.name} {config[t.name]}\n"
            else:
                prefix += f"{t.name} = {config[t.name]}\n"
        return prefix + code

    def file_for(self, config: dict[str, int], file_text: str | None = None) -> str:
        """The whole file with every tunable's definition set to ``config`` in place."""
        text = self.file_text if file_text is None else file_text
        if text != self.file_text:
            raise ValueError("the file changed since its tunables were found")
        for t in sorted(self.tunables, key=lambda t: t.start, reverse=True):
            if t.name in config and config[t.name] != t.value:
                text = text[: t.start] + str(config[t.name]) + text[t.end :]
        return text

    def to_json(self) -> dict[str, Any]:
        return {"tunables": [t.to_json() for t in self.tunables], "size": self.size(),
                "constraints": [c.description for c in self.constraints], "notes": list(self.notes)}


def _strip_directives(code: str, language: str) -> str:
    mark = "//" if language == "c" else "#"
    return re.sub(r"(?://|#)\s*autocomp:\s*tune\b[^\n]*", mark, code, flags=re.I)


def powers_of_two_around(value: int, lo: int = 1, hi: int | None = None, spread: int = 8) -> list[int]:
    """Powers of two from value/spread to value*spread (within [lo, hi]), plus value."""
    if value <= 0:
        return [value]
    bottom = max(lo, 1, value // spread)
    top = value * spread if hi is None else min(hi, value * spread)
    out = {value}
    p = 1
    while p <= top:
        if p >= bottom:
            out.add(p)
        p *= 2
    return sorted(v for v in out if v >= lo and (hi is None or v <= hi))


def apply_user_ranges(tunables: list[Tunable], directives: Directives) -> list[Tunable]:
    """A user's ``tune NAME in ...`` replaces the proposed values (their current value is
    kept in the list so the baseline is one of the configurations)."""
    for t in tunables:
        if t.name in directives.ranges:
            t.values = sorted(set(directives.ranges[t.name]) | {t.value})
            t.source = "comment"
            t.note = "from the file's `autocomp: tune` comment"
    return tunables


def require_constraints(directives: Directives, evaluate: Callable[[str, dict[str, int]], int]) -> list[Constraint]:
    out = []
    for expr in directives.requires:
        out.append(Constraint(f"require {expr} (from the file)", lambda env, e=expr: bool(evaluate(e, env))))
    return out


def names_in(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


def unique(values: Iterable[int]) -> list[int]:
    return sorted(dict.fromkeys(values))
