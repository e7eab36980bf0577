"""An allowlist for the NKI language subset, checked on the parsed AST of a candidate file.

The Neuron compiler traces a kernel: calls into ``nki.language`` / ``nki.isa``, Python
arithmetic on shapes and indices, loops over NKI ranges, tile indexing, and helper functions
that do the same. That subset is all a candidate may use. Everything else is refused with
the line: imports other than the NKI modules, NumPy dtypes/ops, ``ml_dtypes`` and ``math``;
modules used as values; dunder and private names and attributes; attribute access on
anything but an NKI module, a tile or one of a few known attributes; ``getattr``/``eval``/
``open``/… (any builtin outside a small set); default arguments that are not constants;
``global``/``nonlocal``; writes to module-level objects; classes,
``try``/``with``/``while``; decorators other than ``@nki.jit``. A plain ``def`` inside a
kernel (a helper such as an index builder: the Neuron compiler traces it like any Python) is
checked with the same rules, sees the enclosing function's names, and can only be called;
``list.append`` is allowed on lists the kernel itself holds in local variables.

This is the second line of defence. The first is by construction: the kernel's Python runs
in a process of its own (:mod:`autocomp.backends.nki.tracer`) that holds handles, never
tensor values, the trace or the result channel, inside the OS sandbox (no network, no
environment, no host files, its own PID namespace); the interpreter streams each instruction
to the parent, which computes the cost. A construct this allowlist misses can therefore
reach neither the host nor the verdict; the allowlist keeps candidates inside what the
Neuron compiler accepts and names the offending line.

What is trusted: top-level statements of the original file that the candidate file keeps
unchanged (the original kernel is the oracle; its file's imports, ``get_inputs`` and
``if __name__ == "__main__":`` block are the user's). Function bodies are never trusted:
the kernel and every function it calls are checked, whoever wrote them.
"""

from __future__ import annotations

import ast
import builtins
import types
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from autocomp.backends.nki.tracer_rules import mixed_indexing, out_of_scope_uses, variable_size_slices

# Builtins a kernel may call (never use as values): shape arithmetic and loop helpers.
SAFE_BUILTINS = frozenset({
    "range", "len", "min", "max", "abs", "int", "float", "bool", "tuple", "list", "enumerate", "zip", "divmod",
    "round", "print", "slice", "map", "filter", "sorted", "reversed", "sum", "any", "all",
})
# Methods of strings a kernel may call (names and messages it builds); ``format`` is not one:
# its replacement fields read attributes (``"{0.__class__}".format(x)``).
STRING_METHODS = frozenset({"replace", "join", "split", "strip", "lower", "upper", "startswith", "endswith"})
# Types ``isinstance(x, T)`` may test (shape and argument checks: ``isinstance(axis, int)``).
ISINSTANCE_TYPES = frozenset({"int", "float", "bool", "tuple", "list", "slice"})
# NumPy functions a kernel may call on host numbers (shape arithmetic, as math.prod; dtype
# facts; index arrays, as AWS's pooling kernel builds its windows with np.arange): on a tile
# they have no values to read (the kernel's process holds handles), and a host array they
# make becomes tile data only as an index, a mask or an nl.shared_constant, where it is a
# trace-time constant (the kernel's process never sees an input's values to compute from).
NUMPY_HOST_CALLS = frozenset({"prod", "dtype", "finfo", "iinfo", "ceil", "floor", "arange"})
# Exception classes a kernel may raise (``raise ValueError("shape")``), only in ``raise``.
RAISABLE = frozenset({"ValueError", "AssertionError", "NotImplementedError", "TypeError", "RuntimeError"})
# Attributes of values (tiles, tensors, dtypes, index grids) a kernel may read.
VALUE_ATTRS = frozenset({"shape", "dtype", "ndim", "buffer", "itemsize", "reshape", "view", "broadcast_to", "ap", "p", "x", "y", "z",
                         "min", "max", "bits", "slice", "select", "permute", "expand_dim", "squeeze_dim", "broadcast",
                         "flatten_dims", "reshape_dim"})
# Host NumPy constructors allowed only as the value of nl.shared_constant (a trace-time
# constant such as an identity matrix).
CONSTANT_MAKERS = frozenset({"identity", "eye", "tri", "ones", "zeros", "full", "arange"})
VALUE_METHODS = frozenset({"reshape", "view", "broadcast_to", "ap", "slice", "select", "permute", "expand_dim",
                           "squeeze_dim", "broadcast", "flatten_dims", "reshape_dim"})
# Decorators that mark a kernel (all run the kernel as written).
JIT_NAMES = frozenset({"jit", "baremetal", "benchmark", "profile", "trace", "nki_jit"})
NUMPY_DTYPES = frozenset({
    "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16",
    "uint8", "bool_", "float8_e4m3", "float8_e5m2", "float8_e4m3fn",
})
MATH_NAMES = frozenset({"ceil", "floor", "prod", "gcd", "isqrt", "sqrt", "log2", "exp", "pi", "e", "inf"})
_DANGEROUS = frozenset({
    "getattr", "setattr", "delattr", "hasattr", "eval", "exec", "compile", "open", "globals", "locals", "vars", "dir",
    "__import__", "type", "object", "super", "id", "input", "breakpoint", "memoryview", "classmethod", "staticmethod",
    "property", "exit", "quit", "help", "callable", "iter", "next", "format",
    "repr", "str", "bytes", "bytearray", "dict", "set", "frozenset", "issubclass", "hash",
})
_BUILTIN_NAMES = frozenset(dir(builtins))
ALLOWED_MODULES = ("nki", "neuronxcc", "numpy", "ml_dtypes", "math", "functools", "operator", "torch_neuronx",
                   "__future__")
OPERATOR_NAMES = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "neg", "and_", "or_", "xor"})


@dataclass
class Issue:
    line: int  # 1-based line in the file
    message: str
    # "compiler": code the Neuron compiler refuses (tracer_rules), which holds for the user's
    # own file too; "allowlist": outside the subset an LLM's rewrite may use
    rule: str = "allowlist"


# ---------------------------------------------------------------------------- the API tree
class Api:
    """A node of the NKI API: a module or namespace (``children``) or a leaf object.

    ``call`` says whether a leaf may be called, ``value`` whether it may be used as a value
    (passed as ``op=``/``dtype=``); ``decorator`` marks ``jit`` and friends."""

    def __init__(self, name: str, children: dict[str, "Api"] | None = None, *, call: bool = False, value: bool = False,
                 decorator: bool = False, module: bool = False) -> None:
        self.name = name
        self.children = children
        self.call = call
        self.value = value
        self.decorator = decorator
        self.module = module


def _leaf_tree(name: str, obj: Any) -> Api:
    if isinstance(obj, types.SimpleNamespace) or (isinstance(obj, type) and name.endswith(".tile_size")):
        kids = {k: Api(f"{name}.{k}", value=True) for k, v in vars(obj).items()
                if not k.startswith("_") and isinstance(v, (int, float, str))}
        return Api(name, kids)
    return Api(name, call=callable(obj) and not isinstance(obj, str), value=True)


@lru_cache(maxsize=None)
def api_tree(style: str) -> Api:
    """The interpreter's ``nki`` (style "new") or ``neuronxcc.nki`` (style "old") module as a tree."""
    from autocomp.backends.nki.interp.install import _isa_attrs, _language_attrs

    prefix = "nki" if style == "new" else "neuronxcc.nki"
    lang = Api(f"{prefix}.language", {k: _leaf_tree(f"nl.{k}", v) for k, v in _language_attrs(style).items()
                                      if not k.startswith("_")}, module=True)
    isa = Api(f"{prefix}.isa", {k: _leaf_tree(f"nisa.{k}", v) for k, v in _isa_attrs(style).items()
                                if not k.startswith("_")}, module=True)
    from autocomp.backends.nki.interp import compiler

    ncc: dict[str, Api] = {}
    for k, v in compiler.ATTRS.items():
        if isinstance(v, compiler._Allocator):
            ncc[k] = Api(f"ncc.{k}", {m: Api(f"ncc.{k}.{m}", call=True, value=True) for m in ("alloc", "mod_alloc", "auto_alloc")})
        else:
            ncc[k] = Api(f"ncc.{k}", call=True, value=True, decorator=k not in ("no_reorder", "multi_buffer"))
    kids: dict[str, Api] = {"language": lang, "isa": isa, "compiler": Api(f"{prefix}.compiler", ncc, module=True),
                            "tensor": Api(f"{prefix}.tensor", value=True)}
    for name in JIT_NAMES - {"nki_jit"}:
        kids[name] = Api(f"{prefix}.{name}", decorator=True)
    if style == "old":
        kids["typing"] = Api(f"{prefix}.typing", {"tensor": Api("nt.tensor", value=True)}, module=True)
    return Api(prefix, kids, module=True)


def _numpy_tree() -> Api:
    from autocomp.backends.nki.interp import isa

    ops = set(isa.BINARY) | set(isa.UNARY) | {"sum", "max", "min", "prod", "amax", "amin", "mean", "true_divide",
                                              "power", "maximum", "minimum", "exp", "tanh", "sqrt", "log", "newaxis"}
    kids = {n: Api(f"np.{n}", value=True, call=n in NUMPY_HOST_CALLS) for n in NUMPY_DTYPES | ops | NUMPY_HOST_CALLS}
    return Api("numpy", kids, module=True)


def _root_for(module: str) -> Api | None:
    """The tree node an imported dotted module name stands for."""
    parts = module.split(".")
    if parts[0] == "nki":
        node: Api | None = api_tree("new")
        rest = parts[1:]
    elif parts[0] == "neuronxcc":
        node = Api("neuronxcc", {"nki": api_tree("old")}, module=True)
        rest = parts[1:]
    elif parts[0] == "numpy":
        node, rest = _numpy_tree(), parts[1:]
    elif parts[0] == "ml_dtypes":
        node = Api("ml_dtypes", {n: Api(f"ml_dtypes.{n}", value=True) for n in NUMPY_DTYPES}, module=True)
        rest = parts[1:]
    elif parts[0] == "math":
        import math

        node = Api("math", {n: Api(f"math.{n}", call=callable(getattr(math, n)), value=not callable(getattr(math, n)))
                            for n in MATH_NAMES}, module=True)
        rest = parts[1:]
    elif parts[0] == "functools":  # reduce(mul, shape, 1): shape arithmetic
        node, rest = Api("functools", {"reduce": Api("functools.reduce", call=True)}, module=True), parts[1:]
    elif parts[0] == "operator":  # the arithmetic operators, as values for reduce (never attrgetter & co)
        node = Api("operator", {n: Api(f"operator.{n}", call=True, value=True) for n in OPERATOR_NAMES}, module=True)
        rest = parts[1:]
    elif parts[0] == "torch_neuronx":
        jit = Api("nki_jit", decorator=True)
        ops = Api("torch_neuronx.xla_impl.ops", {"nki_jit": jit}, module=True)
        node = Api("torch_neuronx", {"nki_jit": jit, "xla_impl": Api("xla_impl", {"ops": ops}, module=True)}, module=True)
        rest = parts[1:]
    else:
        return None
    for p in rest:
        if node is None or not node.children or p not in node.children:
            return None
        node = node.children[p]
    return node


# ---------------------------------------------------------------------------- module scan
@dataclass
class Binding:
    node: ast.stmt
    kind: str  # "import", "def", "const", "other"
    trusted: bool
    api: Api | None = None  # for "import": what the name stands for (None: a foreign module)


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__" and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)
            and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value == "__main__")


def _bound_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))]


class Validator:
    """Checks one candidate file. ``trusted_dumps``: ``ast.dump`` of the original file's
    top-level statements (kept unchanged, they are the user's own code)."""

    def __init__(self, tree: ast.Module, kernel: str, trusted_dumps: set[str]) -> None:
        self.tree = tree
        self.kernel = kernel
        self.trusted_dumps = trusted_dumps
        self.issues: list[Issue] = []
        self.bindings: dict[str, list[Binding]] = {}
        self.checked: set[str] = set()
        self._seen: set[tuple[int, str]] = set()
        self.style: set[str] = set()

    # -- reporting ----------------------------------------------------------------------
    def issue(self, node: ast.AST, message: str, rule: str = "allowlist") -> None:
        key = (getattr(node, "lineno", 0), message)
        if key not in self._seen:
            self._seen.add(key)
            self.issues.append(Issue(getattr(node, "lineno", 0), message, rule))

    # -- module level -------------------------------------------------------------------
    def run(self) -> list[Issue]:
        for stmt in self.tree.body:
            trusted = ast.dump(stmt) in self.trusted_dumps
            self._bind_module_stmt(stmt, trusted)
            if not trusted:
                self._check_module_stmt(stmt)
        kernels = self.bindings.get(self.kernel, [])
        if not kernels:
            self.issues.append(Issue(1, f"the file has no kernel function {self.kernel!r}"))
        self._check_callee(self.kernel, self.tree)
        self.issues.sort(key=lambda i: i.line)
        return self.issues

    def _bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)

    def _bind_module_stmt(self, stmt: ast.stmt, trusted: bool, nested: bool = False) -> None:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    self._bind(a.asname, Binding(stmt, "import", trusted, _root_for(a.name)))
                else:
                    top = a.name.split(".")[0]
                    self._bind(top, Binding(stmt, "import", trusted, _root_for(top)))
            self._note_style(stmt)
        elif isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                api = None if stmt.level or not stmt.module else _root_for(f"{stmt.module}.{a.name}")
                if stmt.module == "__future__":
                    continue
                self._bind(a.asname or a.name, Binding(stmt, "import", trusted, api))
            self._note_style(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "def" if isinstance(stmt, ast.FunctionDef) and not nested else "other"
            self._bind(stmt.name, Binding(stmt, kind, trusted))
        elif isinstance(stmt, ast.Assign) and not nested:
            const = _immutable_const(stmt.value, self)
            for t in stmt.targets:
                for name in _bound_names(t):
                    self._bind(name, Binding(stmt, "const" if const and isinstance(t, ast.Name) else "other", trusted))
        elif isinstance(stmt, ast.ClassDef):
            self._bind(stmt.name, Binding(stmt, "other", trusted))
        else:
            # Compound statements at module level: every name they bind counts as non-constant.
            for node in ast.walk(stmt):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self._bind(node.name, Binding(stmt, "other", trusted))
                elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    self._bind(node.id, Binding(stmt, "other", trusted))
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for a in node.names:
                        self._bind(a.asname or a.name.split(".")[0], Binding(stmt, "other", trusted))
                    self._note_style(node)

    def _note_style(self, stmt: ast.Import | ast.ImportFrom) -> None:
        names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
        for n in names:
            if n == "nki" or n.startswith("nki."):
                self.style.add("new")
            elif n.startswith("neuronxcc"):
                self.style.add("old")

    def _check_module_stmt(self, stmt: ast.stmt) -> None:
        """A top-level statement the candidate wrote (not kept from the original file)."""
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return  # docstring
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name.split(".")[0] not in ALLOWED_MODULES or _root_for(a.name) is None:
                    self.issue(stmt, f"`import {a.name}` is not allowed: a candidate may import only the NKI modules, "
                                     "numpy, ml_dtypes, math, functools (reduce) and operator (arithmetic)")
            return
        if isinstance(stmt, ast.ImportFrom):
            if stmt.module == "__future__":
                return
            for a in stmt.names:
                if stmt.level or not stmt.module or _root_for(f"{stmt.module}.{a.name}") is None:
                    self.issue(stmt, f"`from {'.' * stmt.level}{stmt.module or ''} import {a.name}` is not allowed: a "
                                     "candidate may import only the NKI modules, numpy, ml_dtypes, math, functools "
                                     "(reduce) and operator (arithmetic)")
            return
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if not isinstance(t, ast.Name):
                    self.issue(stmt, "module-level assignments may only bind plain names")
                else:
                    self._check_store_name(t, module=True)
            if not _const_expr(stmt.value, self, mutable_ok=True):
                self.issue(stmt, "module-level values must be constants (numbers, strings, tuples, dtypes); "
                                 "compute inside the kernel")
            return
        if isinstance(stmt, ast.FunctionDef):
            self._check_signature(stmt)
            return
        if _is_main_guard(stmt):
            return  # never runs: the evaluator loads the file under another module name
        self.issue(stmt, f"`{_stmt_name(stmt)}` is not allowed at module level in a candidate")

    # -- functions ----------------------------------------------------------------------
    def _check_signature(self, fn: ast.FunctionDef) -> None:
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            api = self._api_of(target)
            if api is None or not api.decorator:
                self.issue(dec, "only @nki.jit (and its variants) may decorate a function in a candidate")
            if isinstance(dec, ast.Call):
                for arg in list(dec.args) + [k.value for k in dec.keywords]:
                    if not _const_expr(arg, self):
                        self.issue(dec, "decorator arguments must be constants")
        args = fn.args
        for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            if not _const_expr(d, self):
                self.issue(d, f"default argument of {fn.name!r} must be an immutable constant (number, string, None, "
                              "tuple, dtype): defaults keep state between calls")
        for a in args.posonlyargs + args.args + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
            if a.arg.startswith("__"):
                self.issue(a, f"parameter name `{a.arg}` is not allowed")
            if a.annotation is not None:
                self._check_annotation(a.annotation)
        if fn.returns is not None:
            self._check_annotation(fn.returns)

    def _check_annotation(self, node: ast.expr) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr.startswith("_"):
                self.issue(sub, f"attribute `.{sub.attr}` is not allowed")
            elif isinstance(sub, ast.Name) and sub.id.startswith("__"):
                self.issue(sub, f"`{sub.id}` is not allowed")
            elif isinstance(sub, (ast.Call, ast.Lambda, ast.NamedExpr, ast.ListComp, ast.GeneratorExp, ast.DictComp,
                                  ast.SetComp, ast.Await, ast.Yield, ast.YieldFrom)):
                self.issue(sub, "annotations may only name types")

    def _check_callee(self, name: str, at: ast.AST) -> None:
        """``name`` is called from checked code: it must be a function of this file, and pass."""
        if name in self.checked:
            return
        self.checked.add(name)
        bindings = self.bindings.get(name, [])
        if not bindings:
            return
        for b in bindings:
            if b.kind != "def":
                self.issue(b.node if not b.trusted else at,
                           f"`{name}` is called from the kernel but is not a plain function defined in this file")
                continue
            self._check_signature(b.node)  # type: ignore[arg-type]
            FunctionChecker(self, b.node).run()  # type: ignore[arg-type]

    # -- names --------------------------------------------------------------------------
    def module_name(self, name: str) -> str:
        """What a module-level name is: "api", "foreign", "def", "const", "other" or "" (unbound)."""
        bindings = self.bindings.get(name, [])
        if not bindings:
            return ""
        kinds = {b.kind for b in bindings}
        if kinds == {"import"}:
            return "api" if all(b.api is not None for b in bindings) else "foreign"
        if kinds == {"def"}:
            return "def"
        if kinds == {"const"}:
            return "const"
        return "other"

    def api_name(self, name: str) -> Api | None:
        bindings = self.bindings.get(name, [])
        if bindings and all(b.kind == "import" and b.api is not None for b in bindings):
            apis = {b.api.name for b in bindings if b.api is not None}
            if len(apis) == 1:
                return bindings[-1].api
        return None

    def _api_of(self, node: ast.expr) -> Api | None:
        """The API node an expression names (``nl``, ``nl.add``, ``nki.language.tile_size.pmax``), or None."""
        chain: list[str] = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        api = self.api_name(node.id)
        for attr in reversed(chain):
            if api is None or not api.children or attr not in api.children:
                return None
            api = api.children[attr]
        return api

    def _check_store_name(self, target: ast.Name, module: bool = False) -> None:
        if target.id.startswith("__"):
            self.issue(target, f"assigning to `{target.id}` is not allowed")
        elif self.api_name(target.id) is not None or self.module_name(target.id) == "foreign":
            self.issue(target, f"`{target.id}` names a module; it cannot be reassigned")


def _stmt_name(stmt: ast.AST) -> str:
    names = {
        ast.While: "while", ast.Try: "try", ast.With: "with", ast.Raise: "raise", ast.Global: "global",
        ast.Nonlocal: "nonlocal", ast.Import: "import", ast.ImportFrom: "from ... import", ast.ClassDef: "class",
        ast.Delete: "del", ast.AsyncFunctionDef: "async def", ast.AsyncFor: "async for", ast.AsyncWith: "async with",
        ast.FunctionDef: "def", ast.Lambda: "lambda", ast.If: "if", ast.For: "for", ast.Expr: "expression",
    }
    for cls, name in names.items():
        if isinstance(stmt, cls):
            return name
    if hasattr(ast, "TryStar") and isinstance(stmt, ast.TryStar):  # pragma: no cover - 3.11+
        return "try"
    if hasattr(ast, "Match") and isinstance(stmt, ast.Match):
        return "match"
    return type(stmt).__name__


def _const_expr(node: ast.expr, v: Validator, mutable_ok: bool = False) -> bool:
    """A constant a module-level value, default or decorator argument may hold."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple) or (mutable_ok and isinstance(node, (ast.List, ast.Set))):
        return all(_const_expr(e, v, mutable_ok) for e in node.elts)
    if mutable_ok and isinstance(node, ast.Dict):
        return all(k is not None and _const_expr(k, v, mutable_ok) for k in node.keys) and all(
            _const_expr(x, v, mutable_ok) for x in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not, ast.Invert)):
        return _const_expr(node.operand, v, mutable_ok)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        return _const_expr(node.left, v, mutable_ok) and _const_expr(node.right, v, mutable_ok)
    if isinstance(node, ast.Attribute):
        api = v._api_of(node)
        return api is not None and api.value and not api.module and not api.children
    if isinstance(node, ast.Name):
        return not node.id.startswith("_") and v.module_name(node.id) == "const"
    return False


def _immutable_const(node: ast.expr, v: Validator) -> bool:
    return _const_expr(node, v, mutable_ok=False)


# ---------------------------------------------------------------------------- function bodies
class FunctionChecker:
    """Walks one function body with the subset's rules."""

    def __init__(self, v: Validator, fn: ast.FunctionDef) -> None:
        self.v = v
        self.fn = fn
        self.locals: set[str] = set()
        a = fn.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
            self.locals.add(arg.arg)
        for node in ast.walk(fn):
            if node is fn:
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.locals.add(node.id)
        for node in ast.walk(fn):  # a lambda's parameters are its own locals
            if isinstance(node, ast.Lambda):
                a = node.args
                self.locals.update(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [y for y in (a.vararg, a.kwarg) if y])
        # Helpers defined inside this function (callable only; their bodies are checked when
        # their `def` is reached, with this function's names visible).
        self.nested: set[str] = {n.name for n in ast.walk(fn) if isinstance(n, ast.FunctionDef) and n is not fn}
        for node in ast.walk(fn):
            if isinstance(node, ast.FunctionDef) and node is not fn:
                a = node.args
                self.locals.update(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [y for y in (a.vararg, a.kwarg) if y])

    def issue(self, node: ast.AST, msg: str, rule: str = "allowlist") -> None:
        if self.fn.name != self.v.kernel:
            msg = f"in `{self.fn.name}` (called from the kernel, so held to the same rules): {msg}"
        self.v.issue(node, msg, rule)

    def run(self) -> None:
        for name in self.locals:
            if name.startswith("__"):
                self.issue(self.fn, f"the name `{name}` is not allowed")
            elif self.v.api_name(name) is not None or self.v.module_name(name) == "foreign":
                self.issue(self.fn, f"`{name}` names a module in this file; a kernel cannot rebind it")
        self.body(self.fn.body)
        if self.v.style == {"old"}:
            # The older compiler's tracer rules (NKI 0.7+ unrolls Python loops and resolves
            # branches while specializing): see tracer_rules.
            for use, message in out_of_scope_uses(self.fn, self._nki_function):
                self.issue(use, message, "compiler")
            for part, message in variable_size_slices(self.fn, self._nki_function):
                self.issue(part, message, "compiler")
            for node, message in mixed_indexing(self.fn, self._nki_function):
                self.issue(node, message, "compiler")

    def _nki_function(self, func: ast.expr) -> str | None:
        """The nki.language / nki.isa function a callee names (``"load"``), else None."""
        api = self.v._api_of(func)
        if api is None or not (api.name.startswith("nl.") or api.name.startswith("nisa.")):
            return None
        return api.name.split(".", 1)[1]

    # -- statements ---------------------------------------------------------------------
    def body(self, stmts: Iterable[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                self.target(t)
            self.expr(s.value)
        elif isinstance(s, ast.AugAssign):
            self.target(s.target)
            self.expr(s.value)
        elif isinstance(s, ast.AnnAssign):
            self.target(s.target)
            self.v._check_annotation(s.annotation)
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.Expr):
            if not isinstance(s.value, ast.Constant):
                self.expr(s.value)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.If):
            self.expr(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.For):
            self.target(s.target)
            self.expr(s.iter)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            pass
        elif isinstance(s, ast.Assert):
            self.expr(s.test)
            if s.msg is not None:
                self.expr(s.msg)
        elif isinstance(s, ast.Raise):
            exc = s.exc
            if s.cause is not None or exc is None:
                self.issue(s, "only `raise ValueError(...)` (or AssertionError, TypeError, ...) is allowed")
            elif isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and exc.func.id in RAISABLE \
                    and exc.func.id not in self.locals and not self.v.bindings.get(exc.func.id):
                for a in exc.args:
                    self.expr(a)
                if exc.keywords:
                    self.issue(s, "exception arguments must be positional")
            else:
                self.issue(s, "only `raise ValueError(...)` (or AssertionError, TypeError, ...) is allowed")
        elif isinstance(s, ast.With) and all(
                it.optional_vars is None and isinstance(it.context_expr, ast.Call)
                and _dotted(it.context_expr.func).endswith(".no_reorder") for it in s.items):
            for it in s.items:  # `with ncc.no_reorder():` only
                self.expr(it.context_expr)
            self.body(s.body)
        elif isinstance(s, ast.While):
            self.issue(s, "`while` loops are not part of the NKI subset; loop over nl.affine_range / nl.sequential_range")
        elif isinstance(s, (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())):
            self.issue(s, "`try` is not allowed in a kernel: it could swallow the interpreter's constraint errors")
        elif isinstance(s, (ast.Global, ast.Nonlocal)):
            self.issue(s, f"`{_stmt_name(s)}` is not allowed in a kernel: kernels keep no state outside a call")
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            self.issue(s, "imports inside the kernel are not allowed; use the file's NKI imports")
        elif isinstance(s, ast.FunctionDef) and not s.decorator_list:
            self.v._check_signature(s)
            sub = FunctionChecker(self.v, s)
            sub.locals |= self.locals
            sub.nested |= self.nested
            sub.run()
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.issue(s, f"`{_stmt_name(s)}` inside a kernel is not allowed (a plain `def` helper is); define helpers "
                          "at module level")
        else:
            self.issue(s, f"`{_stmt_name(s)}` is not part of the NKI subset a kernel may use")

    def target(self, t: ast.expr) -> None:
        if isinstance(t, ast.Name):
            self.v._check_store_name(t)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.target(e)
        elif isinstance(t, ast.Starred):
            self.target(t.value)
        elif isinstance(t, ast.Subscript):
            base = t.value
            while isinstance(base, ast.Subscript):
                self.expr(base.slice)
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in self.locals):
                self.issue(t, "only tiles held in local variables can be assigned into (`tile[...] = ...`); "
                              "module-level objects cannot be modified")
            self.expr(t.value)
            self.expr(t.slice)
        elif isinstance(t, ast.Attribute):
            self.issue(t, f"assigning to an attribute (`.{t.attr} = ...`) is not allowed in a kernel")
        else:
            self.issue(t, "this assignment target is not allowed in a kernel")

    # -- expressions --------------------------------------------------------------------
    def expr(self, e: ast.expr | None, call: bool = False) -> None:
        if e is None:
            return
        if isinstance(e, ast.Constant):
            return
        if isinstance(e, ast.Name):
            self.name(e, call)
        elif isinstance(e, ast.Attribute):
            self.attribute(e, call)
        elif isinstance(e, ast.Call):
            self.call_(e)
        elif isinstance(e, ast.Subscript):
            self.expr(e.value)
            self.expr(e.slice)
        elif isinstance(e, ast.Slice):
            self.expr(e.lower)
            self.expr(e.upper)
            self.expr(e.step)
        elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            for x in e.elts:
                self.expr(x)
        elif isinstance(e, ast.Dict):
            for k, x in zip(e.keys, e.values):
                self.expr(k)
                self.expr(x)
        elif isinstance(e, ast.BinOp):
            self.expr(e.left)
            self.expr(e.right)
        elif isinstance(e, ast.UnaryOp):
            self.expr(e.operand)
        elif isinstance(e, ast.BoolOp):
            for x in e.values:
                self.expr(x)
        elif isinstance(e, ast.Compare):
            self.expr(e.left)
            for x in e.comparators:
                self.expr(x)
        elif isinstance(e, ast.IfExp):
            self.expr(e.test)
            self.expr(e.body)
            self.expr(e.orelse)
        elif isinstance(e, ast.Starred):
            self.expr(e.value)
        elif isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            for gen in e.generators:
                if gen.is_async:
                    self.issue(e, "async comprehensions are not allowed")
                self.target(gen.target)
                self.expr(gen.iter)
                for cond in gen.ifs:
                    self.expr(cond)
            self.expr(e.elt)
        elif isinstance(e, ast.JoinedStr):
            for x in e.values:
                self.expr(x)
        elif isinstance(e, ast.FormattedValue):
            self.expr(e.value)
            self.expr(e.format_spec)
        elif isinstance(e, ast.NamedExpr):  # `(n := H * W)`: a local assignment
            self.target(e.target)
            self.expr(e.value)
        elif isinstance(e, ast.Lambda):  # checked like a nested helper: its body by the same rules
            for d in e.args.defaults + [k for k in e.args.kw_defaults if k is not None]:
                self.expr(d)
            self.expr(e.body)
        else:
            self.issue(e, f"`{type(e).__name__}` expressions are not part of the NKI subset a kernel may use")

    def name(self, e: ast.Name, call: bool) -> None:
        n = e.id
        if n.startswith("__"):
            self.issue(e, f"`{n}` is not allowed in a kernel")
            return
        if n in self.nested and n not in self.locals:
            if not call:
                self.issue(e, f"the helper `{n}` can only be called, not used as a value")
            return
        if n in self.locals:
            # Calling a local is calling what it holds, and what a local may hold was checked
            # where it was assigned (an NKI operator such as `act = nl.gelu`, a tile, a
            # number): nothing a direct call could not reach. (Builtins and helpers cannot
            # be taken as values, so no other callable gets here.)
            return
        kind = self.v.module_name(n)
        if kind == "api":
            api = self.v.api_name(n)
            if api is not None and call and api.call:
                return
            if api is not None and not call and api.value and not api.module and not api.children:
                return
            if api is not None and api.decorator:
                self.issue(e, f"`{n}` is a decorator; it cannot be used inside a kernel")
            elif api is not None and (api.module or api.children):
                self.issue(e, f"`{n}` is a module: use its functions (`{n}.name(...)`), never the module as a value")
            else:
                self.issue(e, f"`{n}` cannot be {'called' if call else 'used as a value'} in a kernel")
        elif kind == "foreign":
            self.issue(e, f"`{n}` is a module outside the NKI API; kernels may use only nki.language, nki.isa, "
                          "NumPy dtypes and ops, and math")
        elif kind == "def":
            if call:
                self.v._check_callee(n, e)
            else:
                self.issue(e, f"the function `{n}` can only be called, not used as a value")
        elif kind == "const":
            if call:
                self.issue(e, f"`{n}` is a constant and cannot be called")
        elif kind == "other":
            self.issue(e, f"module-level `{n}` is not a constant (numbers, strings, tuples, dtypes); kernels may "
                          "read only constants from module level and cannot share state between calls")
        elif n in SAFE_BUILTINS:
            if not call:
                self.issue(e, f"the builtin `{n}` can only be called, not used as a value")
        elif n in _DANGEROUS:
            self.issue(e, f"`{n}` is not allowed in a kernel (only the NKI API and plain Python arithmetic)")
        elif n in _BUILTIN_NAMES or n in RAISABLE:
            self.issue(e, f"`{n}` is not defined in the kernel or is not allowed there")
        # (any other name is defined nowhere: a NameError if that line ever runs, as in Python;
        # kernels keep such references in branches the trace never takes)

    def attribute(self, e: ast.Attribute, call: bool) -> None:
        if e.attr.startswith("_"):
            self.issue(e, f"{'dunder' if e.attr.startswith('__') else 'private'} attribute `.{e.attr}` is not allowed "
                          "in a kernel")
            return
        base = e
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id not in self.locals and self.v.module_name(base.id) in ("api", "foreign"):
            if self.v.module_name(base.id) == "foreign":
                self.issue(e, f"`{base.id}` is a module outside the NKI API; kernels may use only nki.language, "
                              "nki.isa, NumPy dtypes and ops, and math")
                return
            api = self.v._api_of(e)
            text = _dotted(e)
            if api is None:
                root = self.v.api_name(base.id)
                if root is not None and root.name == "numpy":
                    self.issue(e, f"`{text}` is not allowed: kernels use NumPy only for dtypes and as `op=` values; "
                                  "compute with NKI instructions, not on the host")
                else:
                    self.issue(e, f"`{text}` is not part of the NKI API this evaluator knows")
                return
            if call and not api.call:
                if api.name.startswith("np."):
                    self.issue(e, f"`{text}(...)` computes on the host with NumPy; kernels compute with NKI "
                                  "instructions (NumPy ops may only be passed as `op=`)")
                elif api.decorator:
                    self.issue(e, f"`{text}` is a decorator; it cannot be called inside a kernel")
                else:
                    self.issue(e, f"`{text}` cannot be called")
                return
            if not call and (api.module or api.decorator or (api.children and not api.value)):
                self.issue(e, f"`{text}` is a module or namespace; it cannot be used as a value in a kernel")
                return
            if not call and not api.value:
                self.issue(e, f"`{text}` can only be called, not used as a value")
                return
            return
        # An attribute of a value (tile, tensor, dtype, index grid).
        if call and e.attr in ("append", "get") and isinstance(e.value, ast.Name) and e.value.id in self.locals:
            return  # a list or dict the kernel holds locally (index lists, **kwargs options)
        if call and e.attr in STRING_METHODS:
            self.expr(e.value)  # text for a name or a message (never str.format: it reads attributes)
            return
        if e.attr not in VALUE_ATTRS:
            self.issue(e, f"attribute `.{e.attr}` is not allowed in a kernel; tiles offer "
                          f"{', '.join(sorted(VALUE_ATTRS - {'p', 'x', 'y'}))} (and .p/.x/.y of nl.mgrid)")
        elif call and e.attr not in VALUE_METHODS:
            self.issue(e, f"`.{e.attr}` cannot be called")
        self.expr(e.value)

    def call_(self, e: ast.Call) -> None:
        scalar = _scalar_cast_of(self.v, e)
        if scalar is not None:
            self.expr(scalar)  # np.float32(epsilon): a typed host scalar, like a Python float
            return
        if isinstance(e.func, ast.Name) and e.func.id == "isinstance" and "isinstance" not in self.locals:
            types_ = e.args[1] if len(e.args) == 2 and not e.keywords else None
            names = (types_.elts if isinstance(types_, ast.Tuple) else [types_]) if types_ is not None else []
            if not names or not all(isinstance(t, ast.Name) and t.id in ISINSTANCE_TYPES
                                    and t.id not in self.locals for t in names):
                self.issue(e, f"`isinstance` may only test against {', '.join(sorted(ISINSTANCE_TYPES))}")
            else:
                self.expr(e.args[0])
            return
        if isinstance(e.func, (ast.Name, ast.Attribute)):
            self.expr(e.func, call=True)
        else:
            self.issue(e, "only NKI functions, helper functions of this file and a few builtins can be called")
            self.expr(e.func)
        callee = _dotted(e.func) if isinstance(e.func, ast.Attribute) else ""
        api = self.v._api_of(e.func) if isinstance(e.func, ast.Attribute) else None
        for i, a in enumerate(e.args):
            if i == 0 and api is not None and api.name == "nl.shared_constant" and isinstance(a, ast.Call) \
                    and isinstance(a.func, ast.Attribute) and a.func.attr in CONSTANT_MAKERS \
                    and isinstance(a.func.value, ast.Name) and a.func.value.id not in self.locals \
                    and (self.v.api_name(a.func.value.id) or Api("")).name == "numpy":
                for x in list(a.args) + [k.value for k in a.keywords]:  # np.identity(128, dtype=np.int8)
                    self.expr(x)
                continue
            if api is not None and api.name.startswith("ncc.") and callee.endswith(".alloc") and isinstance(a, ast.Name) \
                    and a.id not in self.locals and self.v.module_name(a.id) == "def":
                continue  # ncc.psum.alloc(placement_function): the placement is the compiler's business
            self.expr(a)
        for k in e.keywords:
            if k.arg is not None and k.arg.startswith("__"):
                self.issue(k, f"keyword `{k.arg}` is not allowed")
            self.expr(k.value)




def _scalar_cast_of(v: "Validator", e: ast.Call) -> ast.expr | None:
    """The argument of ``np.float32(x)`` (a NumPy dtype called on one non-literal-sequence
    value: a scalar constant, which NKI takes where it takes a Python number), else None.
    An array made this way still cannot become tile data: the interpreter refuses host
    arrays anywhere but in an index, a mask or an iota expression."""
    api = v._api_of(e.func) if isinstance(e.func, ast.Attribute) else None
    if (api is None or not api.name.startswith("np.") or api.name[3:] not in NUMPY_DTYPES or len(e.args) != 1
            or e.keywords or isinstance(e.args[0], (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Starred))):
        return None
    return e.args[0]


def _dotted(e: ast.expr) -> str:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
    return ".".join(reversed(parts))


# ---------------------------------------------------------------------------- entry points
def validate_file(file_text: str, kernel: str, original_text: str | None = None) -> list[Issue]:
    """Issues with ``file_text`` as a candidate for ``kernel`` (empty: it passes).

    Top-level statements equal to one in ``original_text`` are the user's and are not
    checked themselves; the kernel and every function it calls always are."""
    tree = ast.parse(file_text)
    trusted: set[str] = set()
    if original_text is not None:
        try:
            trusted = {ast.dump(s) for s in ast.parse(original_text).body}
        except SyntaxError:
            trusted = set()
    return Validator(tree, kernel, trusted).run()
