"""Tunable constants of an NKI kernel (``autocomp tune``; see :mod:`autocomp.tuning`).

Tunables: module-level integer constants the kernel uses and nothing else in the file uses
(``TILE_N = 128``; a constant ``get_inputs`` also reads is part of the problem), and integer
default arguments of the kernel (``def k(a, b, TILE_K=128)``). Proposed values: powers of two
from a quarter of the current value (at least 16: smaller tiles leave the engines idle) to eight
times it. Rules, from the kernel's own code with the
input shapes of the original run (the interpreter's oracle) and NeuronCore's limits
(:data:`autocomp.backends.nki.interp.core.LIMITS`):

- every on-chip allocation (``nl.ndarray``/``nl.zeros``/… with ``buffer=nl.sbuf|nl.psum``)
  has at most 128 partitions and fits its bytes per partition (PSUM: a 2 KiB bank; SBUF:
  192 KiB);
- ``nc_matmul``'s stationary tile has a free size of at most 128, the moving one at most 512;
- ``nl.affine_range(X // T)`` (and ``range``, ``sequential_range``) with a tunable ``T``: T
  divides X.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from autocomp.model import Problem
from autocomp.tuning.space import (
    Constraint, NotConstant, Space, Tunable, apply_user_ranges, parse_directives, powers_of_two_around,
    require_constraints, safe_eval,
)

DTYPE_BYTES = {"float32": 4, "fp32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2, "uint16": 2,
               "int8": 1, "uint8": 1, "float8_e4m3": 1, "float8_e5m2": 1, "float8_e4m3fn": 1, "bool_": 1, "tfloat32": 4}
ALLOC = {"ndarray", "zeros", "ones", "full", "empty", "zeros_like", "ndarray_like", "rand", "random_seed_tile"}
RANGES = {"affine_range", "sequential_range", "static_range", "range"}


def _limits() -> dict[str, int]:
    try:
        from autocomp.backends.nki.interp.core import LIMITS

        return dict(LIMITS)
    except Exception:  # the interpreter needs numpy; the rules then use the published figures
        return {"pmax": 128, "sbuf_bytes_per_partition": 192 * 1024, "psum_tile_bytes_per_partition": 2048,
                "stationary_fmax": 128, "moving_fmax": 512}


def _offsets(text: str) -> list[int]:
    out, total = [], 0
    for line in text.splitlines(keepends=True):
        out.append(total)
        total += len(line)
    out.append(total)
    return out


async def find_space(problem: Problem, backend: Any = None) -> Space:
    text = problem.file_text
    directives = parse_directives(text)
    s, e = problem.span.start_line, problem.span.end_line
    empty = Space([], [], text, s, e, "python", notes=list(directives.errors), directive_lines=directives.lines)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return empty
    kernel = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == problem.name), None)
    if kernel is None:
        return empty
    offs = _offsets(text)

    def at(node: ast.AST) -> tuple[int, int]:
        return offs[node.lineno - 1] + node.col_offset, offs[node.end_lineno - 1] + node.end_col_offset

    used_in_kernel = {n.id for n in ast.walk(kernel) if isinstance(n, ast.Name)}
    module_ints: dict[str, int] = {}
    candidates: list[Tunable] = []
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
            name, value = stmt.targets[0].id, stmt.value.value
            module_ints[name] = value
            elsewhere = any(isinstance(n, ast.Name) and n.id == name for other in tree.body if other is not stmt
                            and other is not kernel for n in ast.walk(other))
            named = name in directives.ranges
            if directives.ranges and not named:
                continue
            if not named and (value < 1 or name not in used_in_kernel or elsewhere):
                continue
            a, b = at(stmt.value)
            candidates.append(Tunable(name, value, powers_of_two_around(value, max(16, value // 4), 1 << 16), "module", stmt.lineno - 1, a, b,
                                      s <= stmt.lineno - 1 < e, note="powers of two around the current value"))
    args = kernel.args
    positional = args.posonlyargs + args.args
    for arg, default in list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]:
        if isinstance(default, ast.Constant) and type(default.value) is int:
            named = arg.arg in directives.ranges
            if (directives.ranges and not named) or (not named and default.value < 1):
                continue
            a, b = at(default)
            candidates.append(Tunable(arg.arg, default.value, powers_of_two_around(default.value, max(16, default.value // 4), 1 << 16), "default",
                                      default.lineno - 1, a, b, True, note="powers of two around the current value"))
    apply_user_ranges(candidates, directives)
    names = {t.name for t in candidates}
    env = {k: v for k, v in module_ints.items() if k not in names}
    shapes, itemsizes = await _input_shapes(problem, backend, kernel)
    constraints = _rules(kernel, names, shapes, itemsizes, _limits())
    constraints += require_constraints(directives, lambda expr, en: safe_eval(expr, en))
    notes = list(directives.errors)
    if not shapes:
        notes.append("input shapes unknown: divisibility and capacity rules that need them are skipped")
    return Space(candidates, constraints, text, s, e, "python", env=env, notes=notes, directive_lines=directives.lines)


async def _input_shapes(problem: Problem, backend: Any, kernel: ast.FunctionDef) -> tuple[dict[str, tuple], dict[str, int]]:
    """Shapes and item sizes of the kernel's array arguments, from the original's run in the
    interpreter (the oracle the evaluation computes anyway)."""
    harness = getattr(backend, "harness", None)
    if harness is None:
        return {}, {}
    try:
        oracle = await harness.oracle(problem)
        arrays = oracle.inputs[oracle.seeds[0]]
    except Exception:
        return {}, {}
    params = [a.arg for a in kernel.args.posonlyargs + kernel.args.args]
    shapes = {p: tuple(int(d) for d in a.shape) for p, a in zip(params, arrays)}
    sizes = {p: int(a.dtype.itemsize) for p, a in zip(params, arrays)}
    return shapes, sizes


def _attr_name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _rules(kernel: ast.FunctionDef, names: set[str], shapes: dict[str, tuple], itemsizes: dict[str, int],
           limits: dict[str, int]) -> list[Constraint]:
    # Symbolic definitions inside the kernel: NAME = expr, (A, B) = x.shape.
    defs: dict[str, ast.AST] = {}
    known: dict[str, int] = {}
    for node in ast.walk(kernel):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        tgt, val = node.targets[0], node.value
        if isinstance(tgt, ast.Tuple) and isinstance(val, ast.Attribute) and val.attr == "shape" and isinstance(val.value, ast.Name):
            shape = shapes.get(val.value.id)
            if shape and len(shape) == len(tgt.elts):
                for el, d in zip(tgt.elts, shape):
                    if isinstance(el, ast.Name):
                        known.setdefault(el.id, d)
        elif isinstance(tgt, ast.Name) and tgt.id not in defs:
            defs[tgt.id] = val

    def resolve(expr: ast.AST, env: dict[str, int], depth: int = 0) -> int:
        if depth > 20:
            raise NotConstant("too deep")

        class Sub(ast.NodeTransformer):
            def visit_Subscript(self, n: ast.Subscript) -> ast.AST:
                if (isinstance(n.value, ast.Attribute) and n.value.attr == "shape" and isinstance(n.value.value, ast.Name)
                        and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, int)):
                    shape = shapes.get(n.value.value.id)
                    if shape and -len(shape) <= n.slice.value < len(shape):
                        return ast.Constant(shape[n.slice.value])
                raise NotConstant("subscript")

            def visit_Call(self, n: ast.Call) -> ast.AST:
                if _attr_name(n.func) == "par_dim" and n.args:
                    return self.visit(n.args[0])
                raise NotConstant("call")

            def visit_Name(self, n: ast.Name) -> ast.AST:
                if n.id in env:
                    return ast.Constant(env[n.id])
                if n.id in known:
                    return ast.Constant(known[n.id])
                if n.id in defs:
                    return ast.Constant(resolve(defs[n.id], env, depth + 1))
                raise NotConstant(n.id)

        import copy

        tree = Sub().visit(copy.deepcopy(expr))
        return safe_eval(tree, {})

    def mentions(expr: ast.AST) -> bool:
        seen: set[str] = set()
        stack = [expr]
        while stack:
            n = stack.pop()
            for sub in ast.walk(n):
                if isinstance(sub, ast.Name):
                    if sub.id in names:
                        return True
                    if sub.id in defs and sub.id not in seen:
                        seen.add(sub.id)
                        stack.append(defs[sub.id])
        return False

    rules: list[Constraint] = []
    tiles: dict[str, list[ast.AST]] = {}  # name -> shape elements of its allocation
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            call = node.value
            if isinstance(call, ast.Call) and _attr_name(call.func) in ALLOC and call.args and isinstance(call.args[0], ast.Tuple):
                tiles[node.targets[0].id] = list(call.args[0].elts)
        if not isinstance(node, ast.Call):
            continue
        fname = _attr_name(node.func)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if fname in ALLOC and node.args and isinstance(node.args[0], ast.Tuple) and mentions(node.args[0]):
            buffer = _attr_name(kw.get("buffer", ast.Name("sbuf")))
            if buffer not in ("sbuf", "psum"):
                continue
            elts = list(node.args[0].elts)
            dtype = kw.get("dtype")
            nbytes = 4
            if isinstance(dtype, ast.Attribute) and dtype.attr == "dtype" and isinstance(dtype.value, ast.Name):
                nbytes = itemsizes.get(dtype.value.id, 4)
            elif dtype is not None:
                nbytes = DTYPE_BYTES.get(_attr_name(dtype), 4)
            pidx = next((i for i, el in enumerate(elts) if isinstance(el, ast.Call) and _attr_name(el.func) == "par_dim"), 0)
            cap = limits["psum_tile_bytes_per_partition"] if buffer == "psum" else limits["sbuf_bytes_per_partition"]
            src = ast.unparse(node.args[0])

            def fits(env: dict[str, int], elts: list = elts, pidx: int = pidx, nbytes: int = nbytes, cap: int = cap) -> bool:
                dims = [resolve(el, env) for el in elts]
                free = math.prod(d for i, d in enumerate(dims) if i != pidx)
                return 0 < dims[pidx] <= limits["pmax"] and free * nbytes <= cap

            rules.append(Constraint(f"{buffer} tile {src}: at most {limits['pmax']} partitions and {cap} bytes per partition", fits))
        elif fname in RANGES and node.args and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.FloorDiv):
            left, right = node.args[0].left, node.args[0].right
            if not mentions(right):
                continue

            def divides(env: dict[str, int], left: ast.AST = left, right: ast.AST = right) -> bool:
                d = resolve(right, env)
                return d > 0 and resolve(left, env) % d == 0

            rules.append(Constraint(f"{ast.unparse(right)} divides {ast.unparse(left)}", divides))
        elif fname in ("nc_matmul", "matmul") and fname == "nc_matmul":
            stationary = kw.get("stationary", node.args[1] if len(node.args) > 1 and "dst" in kw else (node.args[0] if node.args else None))
            moving = kw.get("moving", node.args[2] if len(node.args) > 2 and "dst" in kw else (node.args[1] if len(node.args) > 1 else None))
            for operand, lim, what in ((stationary, limits["stationary_fmax"], "stationary"), (moving, limits["moving_fmax"], "moving")):
                if not isinstance(operand, ast.Name) or operand.id not in tiles:
                    continue
                elts = tiles[operand.id]
                if not any(mentions(el) for el in elts):
                    continue

                def free_ok(env: dict[str, int], elts: list = elts, lim: int = lim) -> bool:
                    dims = [resolve(el, env) for el in elts]
                    return math.prod(dims[1:]) <= lim

                rules.append(Constraint(f"nc_matmul {what} tile {operand.id}: free size at most {lim}", free_ok))
    # one rule per description
    unique: dict[str, Constraint] = {}
    for r in rules:
        unique.setdefault(r.description, r)
    return list(unique.values())
