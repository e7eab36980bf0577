"""Rules of the older Neuron compiler (``neuronxcc.nki``) that Python does not have, checked
on the kernel's AST before it runs.

That compiler parses the kernel and traces an ``affine_range`` / ``sequential_range`` /
``range`` loop once, with a symbolic index (NKI 0.7+ instead unrolls Python loops and
resolves branches while specializing, so these rules are the older API's). Python runs such
kernels happily, so without these checks the interpreter would pass code that does not
compile, and a search would keep it; Autocomp's own recorded LayerNorm search
(ucb-bar/autocomp's visualizer sample run) has a candidate the toolchain refused for each:

- **block scope** (``err_local_variable_used_out_of_scope``): a tensor made inside a traced
  ``if``/``else`` or loop body may not be read after it; the documented fix is to allocate
  before the block and write into it (``tmp[...] = ...``). An ``if`` on shapes or constants
  is plain Python while tracing and opens no scope.
- **slice size**: a slice whose size moves with a loop index (``t[:, s:min(s + 512, n)]``)
  cannot be traced ("slice with variable size is not supported").
- **mixed indexing** (``err_unsupported_mixing_basic_advanced_tensor_indexing``): one
  subscript may not combine slices with ``nl.arange`` / ``nl.mgrid`` index expressions.

Which names hold tensors or index expressions is decided from the code, conservatively: a
name is reported only when the code shows what it holds.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterator

# NKI functions whose result is not a tile: index expressions, ranges, program ids, host
# helpers. Any other nki.language / nki.isa call makes a tensor.
NOT_TENSORS = frozenset({
    "arange", "mgrid", "ds", "par_dim", "affine_range", "sequential_range", "static_range", "program_id",
    "num_programs", "program_ndim", "spmd_dim", "nc", "device_print", "random_seed", "finfo", "iinfo", "static_cast",
    "tile_size",
    "get_nc_version", "dtype", "bfloat16", "float32", "float16", "int32", "uint32", "int8", "uint8", "bool_",
})
VIEW_METHODS = frozenset({"reshape", "view", "broadcast_to", "ap", "slice", "select", "permute", "expand_dim",
                          "squeeze_dim", "broadcast", "flatten_dims", "reshape_dim"})
_BLOCKS = (ast.If, ast.For, ast.While)


def out_of_scope_uses(fn: ast.FunctionDef, nki_call: Callable[[ast.expr], str | None]) -> Iterator[tuple[ast.Name, str]]:
    """(use, message) for each read of a tensor name outside the block that bound it.
    ``nki_call(func)`` names the NKI function a call's callee is (``"load"``), else None."""
    symbolic = _symbolic_names(fn, nki_call)
    bindings = list(_bindings(fn.body, (), lambda s: _scoped(s, symbolic, nki_call)))
    tensors = _tensor_names(bindings, nki_call)
    for use, blocks in _loads(fn.body, ()):
        if use.id not in tensors:
            continue
        # The binding that reaches this read in program order: the last one before it.
        before = [b for b in bindings if b.name == use.id and _before(b.stmt, use)]
        if not before:
            continue
        last = max(before, key=lambda b: (b.stmt.lineno, b.stmt.col_offset))
        if not last.creates_tensor(tensors, nki_call) or not last.blocks:
            continue
        inner = last.blocks[-1]
        if inner in blocks:
            continue
        kind = {ast.If: "if/else", ast.For: "for", ast.While: "while"}[type(inner)]
        yield use, (f"`{use.id}` is a tensor bound inside the {kind} block at line {inner.lineno} (line "
                    f"{last.stmt.lineno}) and read here, outside that block; NKI scopes a tensor to the block that "
                    f"binds it and the Neuron compiler refuses this (\"local variable referenced outside of its parent "
                    f"scope\"): allocate it before the block (`{use.id} = nl.ndarray(...)`) and write into it "
                    f"(`{use.id}[...] = ...`)")


class _Binding:
    def __init__(self, name: str, stmt: ast.stmt, value: ast.expr | None, blocks: tuple) -> None:
        self.name, self.stmt, self.value, self.blocks = name, stmt, value, blocks

    def makes_tensor(self, tensors: set[str], nki_call: Callable[[ast.expr], str | None]) -> bool:
        """The name holds a tensor afterwards (a new one, an alias or a view)."""
        return self.value is not None and _is_tensor_expr(self.value, tensors, nki_call)

    def creates_tensor(self, tensors: set[str], nki_call: Callable[[ast.expr], str | None]) -> bool:
        """The value is a tensor made here (an NKI call, arithmetic on tensors), which the
        compiler scopes to this block; an alias or a view of a tensor made outside is not
        (``x = x_raw`` in a branch, read after it: AWS's conv kernels do this)."""
        v = self.value
        return (isinstance(v, (ast.Call, ast.BinOp, ast.UnaryOp)) and self.makes_tensor(tensors, nki_call)
                and not (isinstance(v, ast.Call) and nki_call(v.func) is None))


# Loops the compiler traces once with a symbolic index (Python's range included; a
# static_range is unrolled in Python, so its body is no scope).
SYMBOLIC_LOOPS = frozenset({"affine_range", "sequential_range"})


def _symbolic_loop(s: ast.stmt, nki_call: Callable[[ast.expr], str | None]) -> bool:
    if not isinstance(s, ast.For) or not isinstance(s.iter, ast.Call):
        return False
    return (nki_call(s.iter.func) in SYMBOLIC_LOOPS
            or isinstance(s.iter.func, ast.Name) and s.iter.func.id == "range")


def _symbolic_names(fn: ast.FunctionDef, nki_call: Callable[[ast.expr], str | None]) -> set[str]:
    """Loop indices of symbolic loops and every name computed from one (to a fixed point):
    an ``if`` on such a value is a traced branch, not a Python one."""
    loops = {n for s in ast.walk(fn) if _symbolic_loop(s, nki_call) for n in _names(s.target)}
    assigns = [(t, s.value) for s in ast.walk(fn) if isinstance(s, ast.Assign) for t in s.targets]
    return _closure(loops, lambda names: {n for t, v in assigns if any(r.id in names for r in _names_read(v))
                                          for n in _names(t)})


def _closure(start: set[str], step: Callable[[set[str]], set[str]]) -> set[str]:
    """``start`` grown by ``step(names)`` until nothing new comes (names defined from names)."""
    names = set(start)
    while True:
        more = step(names) - names
        if not more:
            return names
        names |= more


def _scoped(s: ast.stmt, symbolic: set[str], nki_call: Callable[[ast.expr], str | None]) -> bool:
    """Whether a control statement's bodies are tensor scopes: a symbolic loop, a ``while``,
    or an ``if`` whose test depends on a symbolic value. An ``if`` on shapes or constants is
    decided while tracing, as Python, and opens no scope."""
    if isinstance(s, ast.For):
        return _symbolic_loop(s, nki_call)
    if isinstance(s, ast.If):
        return any(n.id in symbolic for n in _names_read(s.test))
    return isinstance(s, ast.While)


def _bindings(stmts: list[ast.stmt], blocks: tuple, scoped: Callable[[ast.stmt], bool]) -> Iterator[_Binding]:
    """Plain assignments (``x = ...``, tuple targets included) with the scoped control blocks
    around them; other bindings (loop targets, ``+=``) are recorded without a value (they end
    a tensor binding's reach but never start one)."""
    for s in stmts:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                for name in _names(t):
                    yield _Binding(name, s, s.value, blocks)
        elif isinstance(s, (ast.AnnAssign, ast.AugAssign)) and isinstance(s.target, ast.Name):
            yield _Binding(s.target.id, s, s.value if isinstance(s, ast.AnnAssign) else None, blocks)
        if isinstance(s, _BLOCKS):
            inner = blocks + (s,) if scoped(s) else blocks
            if isinstance(s, ast.For):
                for name in _names(s.target):
                    yield _Binding(name, s, None, inner)
            yield from _bindings(s.body, inner, scoped)
            yield from _bindings(s.orelse, inner, scoped)
        elif isinstance(s, ast.With):
            yield from _bindings(s.body, blocks, scoped)


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    return []


def _tensor_names(bindings: list[_Binding], nki_call: Callable[[ast.expr], str | None]) -> set[str]:
    """Names some assignment binds to a tensor (to a fixed point: ``y = x + 1`` after ``x``)."""
    return _closure(set(), lambda tensors: {b.name for b in bindings if b.makes_tensor(tensors, nki_call)})


def _is_tensor_expr(e: ast.expr, tensors: set[str], nki_call: Callable[[ast.expr], str | None]) -> bool:
    if isinstance(e, ast.Call):
        name = nki_call(e.func)
        if name is not None:
            return name not in NOT_TENSORS
        if isinstance(e.func, ast.Attribute) and e.func.attr in VIEW_METHODS:
            return _is_tensor_expr(e.func.value, tensors, nki_call)
        return False
    if isinstance(e, ast.Name):
        return e.id in tensors
    if isinstance(e, ast.BinOp):
        return _is_tensor_expr(e.left, tensors, nki_call) or _is_tensor_expr(e.right, tensors, nki_call)
    if isinstance(e, ast.UnaryOp):
        return _is_tensor_expr(e.operand, tensors, nki_call)
    if isinstance(e, ast.Subscript):
        return _is_tensor_expr(e.value, tensors, nki_call)
    return False


def _loads(stmts: list[ast.stmt], blocks: tuple) -> Iterator[tuple[ast.Name, tuple]]:
    """Every read of a name with the control blocks around it (nested functions, lambdas and
    comprehensions are left out: their names are their own)."""
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, _BLOCKS):
            head = s.test if isinstance(s, (ast.If, ast.While)) else s.iter
            yield from ((n, blocks) for n in _names_read(head))
            yield from _loads(s.body, blocks + (s,))
            yield from _loads(s.orelse, blocks + (s,))
            continue
        if isinstance(s, ast.With):
            for item in s.items:
                yield from ((n, blocks) for n in _names_read(item.context_expr))
            yield from _loads(s.body, blocks)
            continue
        yield from ((n, blocks) for n in _names_read(s))


def _names_read(node: ast.AST) -> Iterator[ast.Name]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            yield n
        stack.extend(ast.iter_child_nodes(n))


def _before(stmt: ast.stmt, use: ast.Name) -> bool:
    """Whether ``stmt`` (a binding) comes before the read in the source: it ends before the
    read starts (the right-hand side of ``x = x + 1`` reads the earlier ``x``)."""
    end = (getattr(stmt, "end_lineno", stmt.lineno), getattr(stmt, "end_col_offset", 0))
    if isinstance(stmt, _BLOCKS):  # a for target binds at the loop's head
        end = (stmt.target.end_lineno, stmt.target.end_col_offset) if isinstance(stmt, ast.For) else end
    return end <= (use.lineno, use.col_offset)


# ---------------------------------------------------------------------------- slice sizes
# A value as a polynomial over atoms: {(factor, ...): coefficient}, () the constant term. A
# factor is a loop index, a name that is constant during the trace, or an expression the
# analysis does not open (min/max, //, %, a call), marked symbolic when a loop index is in it.
Poly = dict


def variable_size_slices(fn: ast.FunctionDef, nki_call: Callable[[ast.expr], str | None]) -> Iterator[tuple[ast.Slice, str]]:
    """(slice, message) for each ``t[lo:hi]`` whose size ``hi - lo`` depends on a symbolic
    loop index: the compiler traces such a loop once and refuses a slice it cannot size
    ("slice with variable size is not supported"), e.g. ``min(start + 512, n)`` for a tail."""
    loops = {n for s in ast.walk(fn) if _symbolic_loop(s, nki_call) for n in _names(s.target)}
    if not loops:
        return
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    defs: dict[str, list[ast.expr | None]] = {}
    for s in ast.walk(fn):
        if isinstance(s, ast.Assign):
            for t in s.targets:
                for n in _names(t):
                    defs.setdefault(n, []).append(s.value if isinstance(t, ast.Name) else None)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)) and isinstance(s.target, ast.Name):
            defs.setdefault(s.target.id, []).extend([None, None])
        elif isinstance(s, ast.For) and not _symbolic_loop(s, nki_call):
            for n in _names(s.target):
                defs.setdefault(n, []).extend([None, None])
    symbolic = _symbolic_names(fn, nki_call)
    analysis = _Polynomials(loops, symbolic, params, defs)
    for node in ast.walk(fn):
        if not isinstance(node, ast.Subscript):
            continue
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            if not isinstance(part, ast.Slice) or part.lower is None or part.upper is None:
                continue
            lo, hi = analysis.poly(part.lower), analysis.poly(part.upper)
            if lo is None or hi is None:
                continue
            size = _add(hi, lo, -1)
            moving = [m for m, c in size.items() if c and any(analysis.is_symbolic(f) for f in m)]
            if moving:
                yield part, (f"the slice `{ast.unparse(part.lower)}:{ast.unparse(part.upper)}` changes size with the loop "
                             f"index (it is {ast.unparse(part.upper)} - ({ast.unparse(part.lower)})): the Neuron compiler "
                             "traces an affine_range/sequential_range/range loop once, with a symbolic index, and refuses a "
                             "slice whose size it cannot fix (\"slice with variable size is not supported\"); slice a fixed "
                             "size and mask the tail instead (mask=index < n)")


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


class _Polynomials:
    """Polynomials of index expressions, names opened through their single assignment."""

    def __init__(self, loops: set[str], symbolic: set[str], params: set[str], defs: dict) -> None:
        self.loops, self.symbolic, self.params, self.defs = loops, symbolic, params, defs
        self.opaque: dict[str, bool] = {}  # factor -> whether a loop index is in it
        self.depth = 0

    def is_symbolic(self, factor: str) -> bool:
        return factor in self.loops or self.opaque.get(factor, False)

    def _atom(self, e: ast.expr) -> Poly:
        key = ast.dump(e)
        if key not in self.opaque:
            self.opaque[key] = any(n.id in self.symbolic for n in _names_read(e))
        return {(key,): 1}

    def poly(self, e: ast.expr) -> Poly | None:
        """``e`` as a polynomial; None when it depends on a loop index in a way not followed
        (a name assigned more than once from loop values): nothing is claimed then."""
        if self.depth > 40:
            return None
        self.depth += 1
        try:
            return self._poly(e)
        finally:
            self.depth -= 1

    def _poly(self, e: ast.expr) -> Poly | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return {(): e.value} if e.value else {}
        if isinstance(e, ast.Name):
            if e.id in self.loops:
                return {(e.id,): 1}
            values = self.defs.get(e.id, [])
            if len(values) == 1 and values[0] is not None and e.id not in self.params:
                return self.poly(values[0])
            if e.id in self.symbolic:
                return None
            return {(f"name:{e.id}",): 1}  # constant while tracing
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            p = self.poly(e.operand)
            return None if p is None else {m: -c for m, c in p.items()}
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = self.poly(e.left), self.poly(e.right)
            if a is None or b is None:
                return None
            if isinstance(e.op, ast.Mult):
                return _mul(a, b)
            return _add(a, b, 1 if isinstance(e.op, ast.Add) else -1)
        if any(isinstance(n, ast.Name) and n.id in self.symbolic and len(self.defs.get(n.id, [])) > 1
               and n.id not in self.loops for n in _names_read(e)):
            return None
        return self._atom(e)


# ---------------------------------------------------------------------------- mixed indexing
INDEX_MAKERS = frozenset({"arange", "mgrid"})


def mixed_indexing(fn: ast.FunctionDef, nki_call: Callable[[ast.expr], str | None]) -> Iterator[tuple[ast.Subscript, str]]:
    """(subscript, message) for ``t[i_p, a:b]``: a slice beside an ``nl.arange`` / ``nl.mgrid``
    index expression in one subscript."""
    assigns = [(t, s.value) for s in ast.walk(fn) if isinstance(s, ast.Assign) for t in s.targets]
    index = _closure(set(), lambda known: {t.id for t, v in assigns
                                           if isinstance(t, ast.Name) and _is_index_expr(v, known, nki_call)})
    for node in ast.walk(fn):
        if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
            continue
        parts = node.slice.elts
        if any(isinstance(p, ast.Slice) for p in parts) and any(_is_index_expr(p, index, nki_call) for p in parts):
            yield node, (f"`{ast.unparse(node)}` mixes slices with nl.arange/nl.mgrid index expressions; the Neuron "
                         "compiler refuses this (\"Mixing basic tensor indexing and advanced tensor indexing is not "
                         "supported\"): index every axis with index expressions (nl.arange(n)[None, :] for a range) "
                         "or every axis with slices")


def _is_index_expr(e: ast.expr, index: set[str], nki_call: Callable[[ast.expr], str | None]) -> bool:
    if isinstance(e, ast.Call):
        return nki_call(e.func) in INDEX_MAKERS
    if isinstance(e, ast.Name):
        return e.id in index
    if isinstance(e, ast.Subscript):  # nl.arange(n)[:, None], nl.mgrid[0:4, 0:8]
        return _is_index_expr(e.value, index, nki_call) or nki_call(e.value) in INDEX_MAKERS
    if isinstance(e, ast.Attribute) and e.attr in ("p", "x", "y", "z"):  # an mgrid's axes
        return _is_index_expr(e.value, index, nki_call)
    if isinstance(e, ast.BinOp):
        return _is_index_expr(e.left, index, nki_call) or _is_index_expr(e.right, index, nki_call)
    return False


# ---------------------------------------------------------------------------- Python state
# Methods that change a Python container in place: state a loop body can carry to the next
# iteration without rebinding a name.
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
                      "sort", "reverse", "add", "discard", "__setitem__", "__iadd__"})


def python_state_across_iterations(fn: ast.FunctionDef, nki_call: Callable[[ast.expr], str | None],
                                   helpers: dict[str, ast.FunctionDef]) -> ast.AST | None:
    """The first place in an ``affine_range`` body (or in a helper called from one) where
    Python state may pass from one iteration to the next, else None. The older compiler
    traces such a body once, so that state means something else on hardware than in the
    interpreter's run of every iteration; the reorder proof (reorder_proof) is then not
    offered and the reversed-loop run decides.

    State is: a name the body assigns and also reads before assigning it in the same
    iteration (``off += 128``; a tensor name is left out: what a tensor carries is
    instructions, which the trace shows); a container changed in place (``.append``, an item
    or attribute stored) that the iteration did not make itself, unless it is a tensor or a
    parameter; a helper that changes its arguments or module names in place; ``global`` or
    ``nonlocal``. A name bound fresh in every iteration (``q_off = i * 128``) is not state."""
    scoped = [s for s in ast.walk(fn) if isinstance(s, (ast.Global, ast.Nonlocal))]
    if scoped:
        return scoped[0]
    tensors = _tensor_names(list(_bindings(fn.body, (), lambda s: False)), nki_call)
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    for loop in ast.walk(fn):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and nki_call(loop.iter.func) == "affine_range"):
            continue
        walker = _StateWalk(_assigned(loop.body), tensors, params, nki_call, helpers)
        found = walker.block(loop.body, set(_names(loop.target)))[0]
        if found is not None:
            return found
    return None


def _assigned(stmts: list[ast.stmt]) -> set[str]:
    """Every name a block binds (nested functions' own names aside)."""
    out: set[str] = set()
    stack: list[ast.AST] = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _base_name(e: ast.expr) -> ast.Name | None:
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return e if isinstance(e, ast.Name) else None


class _StateWalk:
    """One affine_range body in program order, with the names each point has certainly
    bound in the current iteration (``defined``)."""

    def __init__(self, assigned: set[str], tensors: set[str], params: set[str],
                 nki_call: Callable[[ast.expr], str | None], helpers: dict[str, ast.FunctionDef]) -> None:
        self.assigned, self.tensors, self.params = assigned, tensors, params
        self.nki_call, self.helpers = nki_call, helpers
        self.seen: set[str] = set()

    def block(self, stmts: list[ast.stmt], defined: set[str]) -> tuple[ast.AST | None, set[str]]:
        defined = set(defined)
        for s in stmts:
            found = self.stmt(s, defined)
            if found is not None:
                return found, defined
        return None, defined

    def stmt(self, s: ast.stmt, defined: set[str]) -> ast.AST | None:
        if isinstance(s, (ast.Global, ast.Nonlocal)):
            return s
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            found = self.expr(s.value, defined) or self.stores(targets, defined)
            defined.update(n for t in targets for n in _names(t))
            return found
        if isinstance(s, ast.AugAssign):
            t = s.target
            if isinstance(t, ast.Name) and t.id not in defined and t.id not in self.tensors:
                return s  # reads the value an earlier iteration left
            found = self.expr(s.value, defined) or self.stores([t], defined)
            if isinstance(t, ast.Name):
                defined.add(t.id)
            return found
        if isinstance(s, ast.If):
            found = self.expr(s.test, defined)
            if found is not None:
                return found
            found, body = self.block(s.body, defined)
            if found is not None:
                return found
            found, orelse = self.block(s.orelse, defined)
            defined |= body & orelse
            return found
        if isinstance(s, (ast.For, ast.While)):
            found = self.expr(s.iter if isinstance(s, ast.For) else s.test, defined)
            if found is not None:
                return found
            inner = defined | (set(_names(s.target)) if isinstance(s, ast.For) else set())
            found, after = self.block(s.body, inner)
            if found is None and isinstance(s, ast.For):
                # (an NKI loop runs at least once: what its body binds is bound after it)
                defined |= after
            return found or self.block(s.orelse, defined)[0]
        if isinstance(s, ast.With):
            for item in s.items:
                found = self.expr(item.context_expr, defined)
                if found is not None:
                    return found
                if item.optional_vars is not None:
                    defined.update(_names(item.optional_vars))
            found, after = self.block(s.body, defined)
            defined |= after
            return found
        if isinstance(s, ast.Try):
            for part in (s.body, s.orelse, s.finalbody, *[h.body for h in s.handlers]):
                found = self.block(part, defined)[0]
                if found is not None:
                    return found
            return None
        return self.expr(s, defined)

    def stores(self, targets: list[ast.expr], defined: set[str]) -> ast.AST | None:
        for t in targets:
            for part in ast.walk(t):
                if isinstance(part, (ast.Subscript, ast.Attribute)) and isinstance(part.ctx, ast.Store):
                    base = _base_name(part)
                    if base is None or self._foreign(base.id, defined):
                        return part
                    found = self.expr(part.slice if isinstance(part, ast.Subscript) else part.value, defined)
                    if found is not None:
                        return found
        return None

    def _foreign(self, name: str, defined: set[str]) -> bool:
        """A container this iteration did not make: changing it in place is state."""
        return name not in defined and name not in self.tensors and name not in self.params

    def expr(self, e: ast.AST | None, defined: set[str]) -> ast.AST | None:
        if e is None:
            return None
        local = {n.id for c in ast.walk(e) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
                 if isinstance(n, ast.Name)}
        for n in ast.walk(e):
            if isinstance(n, ast.NamedExpr):
                return n
            if (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.assigned
                    and n.id not in defined and n.id not in local and n.id not in self.tensors):
                return n  # the value an earlier iteration left
            if not isinstance(n, ast.Call):
                continue
            func = n.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS and self.nki_call(func) is None:
                base = _base_name(func.value)
                if base is None or (base.id not in defined and base.id not in self.tensors):
                    return n
            if isinstance(func, ast.Name) and func.id in self.helpers and func.id not in self.seen:
                self.seen.add(func.id)
                found = self._helper(self.helpers[func.id])
                if found is not None:
                    return n
        return None

    def _helper(self, helper: ast.FunctionDef) -> ast.AST | None:
        """A helper cannot rebind the caller's names; it can change, in place, what it was
        given or what the module holds."""
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(helper)):
            return helper
        given = {a.arg for a in helper.args.args + helper.args.kwonlyargs + helper.args.posonlyargs}
        inner = _StateWalk(set(), self.tensors, given, self.nki_call, self.helpers)
        inner.seen = self.seen
        return inner.block(helper.body, set())[0]
