"""Schedules: the sequence of plans on a finished run's best path, kept in the store and
reused on similar kernels (the Autocomp paper's schedule reuse, section 4.3).

A kernel's *signature* is what similarity is judged on: its operation kind (from the
kernel's name, else the operations its code calls) and its shapes (the array dimensions of
its parameters, with the file's ``#define``/``NAME = value`` constants resolved; else the
shapes its input generator builds; else the sizes a harness annotation declares). Nothing
here names a target: the same reading works for C kernels and Python ones, and runs are only
ever compared with runs of the same target.

``resolve_reuse(store, problem, "auto")`` picks the most similar finished run of the same
target and operation kind that has a schedule, and says which and why; ``resolve_reuse(store,
problem, RUN)`` takes that run's schedule after checking it can apply.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any

from autocomp.errors import UserError
from autocomp.model import Problem

# Operation kinds, most specific first: a kernel named ``conv_gemm`` is a convolution.
OP_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("conv", ("conv", "convolution", "conv2d", "conv1d", "loop_conv_ws")),
    ("attention", ("attention", "attn", "sdpa", "flash")),
    ("matmul", ("gemm", "matmul", "mm", "bmm", "gemv", "loop_ws", "nc_matmul", "linear", "dot")),
    ("softmax", ("softmax",)),
    ("layernorm", ("layernorm", "layer_norm")),
    ("rmsnorm", ("rmsnorm", "rms_norm")),
    ("activation", ("gelu", "relu", "silu", "sigmoid", "tanh")),
    ("reduction", ("reduce", "mean", "sum", "argmax", "max")),
    ("transpose", ("transpose",)),
)
SIMILAR_ENOUGH = 0.5  # below this, ``auto`` starts an ordinary search instead
RECENT_RUNS = 1000  # how many of the newest runs are considered (code actions ask often)


@dataclass
class Signature:
    op: str
    shapes: list[list[int]] = field(default_factory=list)

    def describe(self) -> str:
        shapes = ", ".join("x".join(str(d) for d in s) for s in self.shapes) or "unknown shapes"
        return f"{self.op} [{shapes}]"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": [list(s) for s in self.shapes]}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Signature":
        d = d or {}
        return cls(str(d.get("op", "other")), [[int(x) for x in s] for s in d.get("shapes", [])])


def _words(text: str) -> list[str]:
    """Identifier pieces: ``gemmLarge_v2`` -> gemm, large, v2, plus the whole identifiers."""
    out: list[str] = []
    for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        low = ident.lower()
        out.append(low)
        for part in re.split(r"_+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", ident)):
            if part:
                out.append(part.lower())
    return out


def operation_kind(name: str, code: str) -> str:
    name_words = set(_words(name))
    for op, keys in OP_KEYWORDS:
        if name_words & set(keys):
            return op
    counts = {}
    code_words = _words(code)
    for op, keys in OP_KEYWORDS:
        n = sum(1 for w in code_words if w in keys)
        if n:
            counts[op] = n
    if not counts:
        return "other"
    order = [op for op, _ in OP_KEYWORDS]
    return max(counts, key=lambda op: (counts[op], -order.index(op)))


_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+(.+?)\s*(?://.*)?$", re.M)
_ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*=\s*([0-9][0-9_]*)\s*(?:#.*)?$", re.M)
_ANNOTATED = re.compile(r"autocomp:\s*scalar\s+([A-Za-z_]\w*)\s+\w+\s+(\d+)")


def _constants(text: str) -> dict[str, str]:
    consts: dict[str, str] = {}
    for name, value in _DEFINE.findall(text):
        consts.setdefault(name, value)
    for name, value in _ASSIGN.findall(text):
        consts.setdefault(name, value)
    for name, value in _ANNOTATED.findall(text):
        consts.setdefault(name, value)
    return consts


def _eval_int(expr: str, consts: dict[str, str], depth: int = 0) -> int | None:
    """An integer constant expression (+ - * / // % and parentheses over literals and
    constants); None for anything else. Never evaluates code."""
    if depth > 8:
        return None
    expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr.strip())
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name) and node.id in consts:
            return _eval_int(consts[node.id], consts, depth + 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = ev(node.operand)
            return None if v is None else -v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.Div, ast.FloorDiv)) and b:
                return a // b
            if isinstance(node.op, ast.Mod) and b:
                return a % b
        return None

    return ev(tree)


def _c_param_shapes(code: str, consts: dict[str, str]) -> list[list[int]]:
    head = code.split("{", 1)[0]
    if "(" not in head:
        return []
    params = head[head.index("(") + 1 : head.rfind(")") if ")" in head else len(head)]
    shapes: list[list[int]] = []
    for param in params.split(","):
        dims = re.findall(r"\[([^\]]*)\]", param)
        if not dims:
            continue
        values = [_eval_int(d, consts) for d in dims]
        if all(v is not None and v > 0 for v in values):
            shapes.append([int(v) for v in values])  # type: ignore[arg-type]
    return shapes


_SHAPE_CALL = re.compile(r"\b(?:randn|rand|randint|zeros|ones|empty|standard_normal|normal|uniform|random)\s*\(\s*(\(?[^()]*\)?)")


def _input_shapes(text: str, consts: dict[str, str]) -> list[list[int]]:
    """Shapes built by an input generator (``get_inputs``): ``torch.randn(M, K)``,
    ``rng.standard_normal((512, 512))``."""
    match = re.search(r"def\s+get_inputs\s*\([^)]*\)\s*(?:->[^:]*)?:(.*?)(?=^\S|\Z)", text, re.S | re.M)
    body = match.group(1) if match else ""
    shapes: list[list[int]] = []
    for args in _SHAPE_CALL.findall(body):
        inner = args.strip().strip("()")
        parts = [p for p in (x.strip() for x in inner.split(",")) if p and "=" not in p]
        values = [_eval_int(p, consts) for p in parts]
        if values and all(v is not None and v > 0 for v in values):
            shapes.append([int(v) for v in values])  # type: ignore[arg-type]
    return shapes


def signature_of(problem: Problem) -> Signature:
    consts = _constants(problem.file_text)
    op = operation_kind(problem.name, problem.code)
    shapes = _c_param_shapes(problem.code, consts) or _input_shapes(problem.file_text, consts)
    if not shapes:
        sizes = [int(v) for _n, v in _ANNOTATED.findall(problem.file_text)]
        shapes = [sizes] if sizes else []
    return Signature(op, shapes)


def _dim_closeness(a: int, b: int) -> float:
    """1 for equal sizes, 0.5 for a factor of 16 apart (log scale)."""
    return 1.0 / (1.0 + abs(math.log2(max(a, 1) / max(b, 1))) / 4.0)


def shape_similarity(a: list[list[int]], b: list[list[int]]) -> float:
    if not a or not b:
        return 0.0
    scores = []
    for sa, sb in zip(a, b):
        dims = [_dim_closeness(x, y) for x, y in zip(sa, sb)]
        rank = min(len(sa), len(sb)) / max(len(sa), len(sb))
        scores.append(rank * (sum(dims) / len(dims) if dims else 0.0))
    count = min(len(a), len(b)) / max(len(a), len(b))
    return count * sum(scores) / len(scores)


def similarity(a: Signature, b: Signature) -> float:
    """0..1: 0.5 for the same operation kind plus up to 0.5 for close shapes; a different
    operation kind scores at most 0.25."""
    shapes = shape_similarity(a.shapes, b.shapes)
    if a.op == b.op and a.op != "other":
        return 0.5 + 0.5 * shapes
    return 0.25 * shapes


# -- finding runs to reuse ---------------------------------------------------------------


class ReuseError(UserError, ValueError):
    """A ``--reuse`` request that cannot be honoured; the message says why and what to do."""


@dataclass
class Match:
    run_id: str
    kernel: str
    path: str
    score: float
    signature: Signature
    plans: list[str]
    speedup: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "kernel": self.kernel,
            "path": self.path,
            "similarity": round(self.score, 3),
            "signature": self.signature.to_json(),
            "plans": len(self.plans),
            "speedup": self.speedup,
        }


@dataclass
class ReuseChoice:
    """What a search starts from: a source run's plans, and the sentence saying why."""

    source: str
    plans: list[str]
    reason: str
    similarity: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "plans": list(self.plans), "reason": self.reason, "similarity": self.similarity}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ReuseChoice":
        return cls(str(d["source"]), [str(p) for p in d.get("plans", [])], str(d.get("reason", "")), d.get("similarity"))


def similar_runs(store: Any, problem: Problem, minimum: float = SIMILAR_ENOUGH, exclude: str | None = None) -> list[Match]:
    """Finished runs of the same target with a non-empty schedule, most similar first
    (ties: the larger speedup, then the most recent)."""
    mine = signature_of(problem)
    matches: list[Match] = []
    for order, run_id in enumerate(store.run_ids()[-RECENT_RUNS:]):
        if run_id == exclude:
            continue
        meta = store.run_meta(run_id) or {}
        if meta.get("status") != "finished" or meta.get("target") != problem.target:
            continue
        schedule = store.schedule(run_id)
        if not schedule or not schedule.get("plans"):
            continue
        theirs = Signature.from_json(schedule.get("signature"))
        score = similarity(mine, theirs)
        if score < minimum:
            continue
        speed = meta.get("speedup")
        matches.append(Match(run_id, str(meta.get("kernel", "?")), str(meta.get("path", "")), score, theirs, list(schedule["plans"]), speed))
        matches[-1]._order = order  # type: ignore[attr-defined]
    matches.sort(key=lambda m: (-round(m.score, 6), -(m.speedup or 0.0), -m._order))  # type: ignore[attr-defined]
    return matches


def resolve_reuse(store: Any, problem: Problem, spec: str, exclude: str | None = None) -> ReuseChoice | None:
    """The schedule to start from for ``--reuse spec`` (``auto`` or a run id); None when
    ``auto`` finds nothing similar enough (the reason is then in :func:`no_match_reason`)."""
    mine = signature_of(problem)
    if spec == "auto":
        found = similar_runs(store, problem, exclude=exclude)
        if not found:
            return None
        best = found[0]
        return ReuseChoice(
            best.run_id,
            best.plans,
            f"reusing run {best.run_id} ({best.kernel}): the most similar finished {problem.target} run, "
            f"similarity {best.score:.2f} ({best.signature.describe()} vs this kernel's {mine.describe()}), "
            f"its best path has {len(best.plans)} plan(s)"
            + (f" and reached {best.speedup:.2f}x" if best.speedup else ""),
            best.score,
        )
    meta = store.run_meta(spec)
    if meta is None:
        raise ReuseError(f"no run {spec!r} in the store (list them with `autocomp runs`)")
    if meta.get("target") != problem.target:
        raise ReuseError(f"run {spec} optimized a {meta.get('target')} kernel; its schedule does not apply to a {problem.target} kernel")
    if meta.get("status") != "finished":
        raise ReuseError(f"run {spec} is {meta.get('status', 'unknown')}, not finished: finish it (autocomp optimize --resume {spec}) first")
    schedule = store.schedule(spec)
    if not schedule or not schedule.get("plans"):
        raise ReuseError(f"run {spec} found no improvement, so it has no schedule to reuse")
    theirs = Signature.from_json(schedule.get("signature"))
    score = similarity(mine, theirs)
    return ReuseChoice(
        spec,
        list(schedule["plans"]),
        f"reusing run {spec} ({meta.get('kernel')}), as asked: similarity {score:.2f} "
        f"({theirs.describe()} vs this kernel's {mine.describe()}), {len(schedule['plans'])} plan(s)",
        score,
    )


def no_match_reason(store: Any, problem: Problem) -> str:
    mine = signature_of(problem)
    return (
        f"no finished {problem.target} run with a schedule is similar enough to this kernel ({mine.describe()}; "
        f"at least {SIMILAR_ENOUGH} needed, which takes the same operation kind): running an ordinary search"
    )
