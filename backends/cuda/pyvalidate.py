"""KernelBench-style candidates validated on their parsed AST against an allowlist.

What a candidate file may contain (everything else is refused, naming the line and the
rule):

* imports of ``torch``, ``torch.nn``, ``torch.nn.functional``, ``load_inline`` from
  ``torch.utils.cpp_extension``, ``math``, ``typing`` and ``__future__``;
* module-level constants (numbers, strings, tuples/lists of them) and ``NAME =
  load_inline(...)`` with literal arguments (the CUDA and C++ sources, ``functions``, flags
  and include paths are read statically and checked by :mod:`static_checks`);
* ``class ModelNew(nn.Module)`` (and helper ``nn.Module`` classes / plain helper functions)
  whose code uses only: the compiled extension's functions; tensor allocation and shape
  operations (``torch.empty``, ``zeros``, ``empty_like``, ``.view``, ``.reshape``,
  ``.contiguous``, ``.size``, ``.shape``, ``.dtype``, ``.permute``, ``.transpose`` …); the
  PyTorch compute ops that the reference ``Model`` itself uses (KernelBench allows partial
  fusion in levels 2–3); arithmetic; control flow; a few builtins (``len``, ``range``,
  ``min``, ``max``, ``int`` …).

Never allowed: a compute op the reference does not use, another precision (``.half()``,
``torch.float16``, autocast, TF32) unless the reference uses it, an algorithm switch
(``torch.backends.*``), ``getattr``/``setattr``/``eval``/``exec``/``__import__``/``open``,
dunder attributes, any other module (``sys``, ``os``, ``importlib``, ``ctypes``,
``operator``, ``numpy`` …), a module or library function used as a value (aliases), state
stored while computing, try/except, and a ``forward`` from which no function of a
``load_inline`` extension is reachable.

Statements of the candidate file that are identical (same AST) to top-level statements of
the reference file — its imports, constants, ``Model``, ``get_inputs`` — are the user's
code and are not re-checked; their names (other than constants) are not usable by the
candidate. This is a second line of defence: the candidate also runs in its own sandboxed
process, away from the timer (docs/cuda.md).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# -- what may be imported ------------------------------------------------------------------
MODULES = {"torch", "torch.nn", "torch.nn.functional", "math", "typing", "torch.utils.cpp_extension"}
FROM_IMPORTS = {
    "torch": {"nn": "torch.nn", "Tensor": "torch.Tensor"},
    "torch.nn": {"functional": "torch.nn.functional", "Module": "torch.nn.Module", "Parameter": "torch.nn.Parameter"},
    "torch.utils.cpp_extension": {"load_inline": "torch.utils.cpp_extension.load_inline"},
    "__future__": {"annotations": "__future__.annotations"},
}
FROM_ANY = {"typing", "math"}  # any name from these

# -- what candidate code may call or name ----------------------------------------------------
TORCH_ALLOC = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "arange", "tensor", "device", "Size", "is_tensor", "numel", "no_grad", "inference_mode", "broadcast_shapes",
}
TORCH_INIT_ONLY = {"randn", "rand", "randint", "randn_like", "rand_like", "manual_seed_unused"}
TORCH_VALUES = {
    "float32", "float", "float64", "double", "int32", "int", "int64", "long", "int16", "short", "int8", "uint8",
    "bool", "Tensor", "Size", "dtype", "contiguous_format",
}
LOW_PRECISION_DTYPES = {"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32", "qint8", "quint8"}
NN_VALUES = {"Module", "Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Identity"}
# tensor methods that allocate, describe or re-view memory
TENSOR_METHODS = {
    "view", "view_as", "reshape", "reshape_as", "contiguous", "size", "dim", "ndimension", "numel", "nelement",
    "stride", "storage_offset", "is_contiguous", "permute", "transpose", "t", "unsqueeze", "squeeze", "expand",
    "expand_as", "flatten", "unflatten", "narrow", "select", "chunk", "split", "unbind", "movedim", "swapaxes",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "empty_like", "clone", "detach", "to", "cuda",
    "float", "type_as", "data_ptr", "element_size", "get_device", "item", "tolist", "is_floating_point",
    "zero_", "fill_", "copy_", "requires_grad_",
    # containers
    "append", "extend", "items", "keys", "values", "pop", "insert", "index", "count", "join",
}
INPLACE_ALLOWED_ON_LOCALS = {"zero_", "fill_", "copy_", "requires_grad_", "append", "extend", "pop", "insert"}
LOW_PRECISION_METHODS = {"half", "bfloat16"}
OTHER_PRECISION_METHODS = {"double"}
SAFE_BUILTINS = {
    "len", "range", "int", "float", "bool", "min", "max", "abs", "tuple", "list", "dict", "isinstance", "enumerate",
    "zip", "round", "divmod", "any", "all", "sorted", "reversed", "str", "slice", "super", "print", "set",
    "ValueError", "RuntimeError", "TypeError", "AssertionError", "NotImplementedError", "IndexError", "KeyError",
}
ESCAPES = {
    "getattr": "dynamic-access", "setattr": "dynamic-access", "delattr": "dynamic-access", "hasattr": "dynamic-access",
    "eval": "dynamic-code", "exec": "dynamic-code", "compile": "dynamic-code", "__import__": "dynamic-code",
    "globals": "dynamic-access", "locals": "dynamic-access", "vars": "dynamic-access", "dir": "dynamic-access",
    "open": "file-access", "input": "process-control", "breakpoint": "process-control", "exit": "process-control",
    "quit": "process-control", "type": "dynamic-access", "object": "dynamic-access", "id": "dynamic-access",
    "memoryview": "dynamic-access", "bytearray": "dynamic-access", "classmethod": "dynamic-access",
    "staticmethod": "dynamic-access", "property": "dynamic-access", "callable": "dynamic-access",
}
KNOWN_BAD_MODULES = {
    "sys": "timing-tamper", "os": "process-control", "importlib": "dynamic-code", "ctypes": "file-access",
    "operator": "torch-op", "numpy": "torch-op", "threading": "threads", "multiprocessing": "threads",
    "concurrent": "threads", "asyncio": "threads", "subprocess": "process-control", "time": "timing-tamper",
    "timeit": "timing-tamper", "inspect": "timing-tamper", "gc": "timing-tamper", "builtins": "timing-tamper",
    "triton": "not-cuda", "cutlass": "not-cuda", "tilelang": "not-cuda", "thunderkittens": "not-cuda", "tk": "not-cuda",
    "numba": "not-cuda", "functools": "result-caching", "pickle": "dynamic-code", "marshal": "dynamic-code",
    "cupy": "torch-op", "scipy": "torch-op", "jax": "torch-op", "socket": "file-access", "shutil": "file-access",
    "pathlib": "file-access", "io": "file-access", "tempfile": "file-access", "random": "input-tamper",
}
# an LLM-readable hint for common PyTorch compute names (any other unlisted op is refused too)
TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "einsum", "tensordot", "dot", "mv", "outer", "linear",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "normalize",
    "sum", "mean", "var", "std", "prod", "cumsum", "logsumexp", "norm", "max", "min", "amax", "amin", "argmax",
    "exp", "log", "sqrt", "rsqrt", "pow", "tanh", "sigmoid", "relu", "gelu", "silu", "softplus", "erf", "abs", "clamp",
    "add", "sub", "mul", "div", "where", "maximum", "minimum", "scaled_dot_product_attention", "sort", "topk",
}
BACKEND_SWITCHES = ("backends", "set_float32_matmul_precision", "allow_tf32", "set_flush_denormal",
                    "use_deterministic_algorithms", "autocast", "amp", "set_default_dtype")

# names nn.Module itself defines (a method of one of these names would replace PyTorch's own
# machinery, e.g. _call_impl runs instead of forward); forward and __init__ are the exceptions
MODULE_INTERNALS = {
    "_call_impl", "_wrapped_call_impl", "_slow_forward", "_apply", "apply", "_load_from_state_dict",
    "_save_to_state_dict", "load_state_dict", "state_dict", "_register_state_dict_hook", "_named_members", "to",
    "cuda", "cpu", "half", "float", "double", "bfloat16", "type", "train", "eval", "zero_grad", "requires_grad_",
    "register_buffer", "register_parameter", "register_module", "add_module", "get_submodule", "get_parameter",
    "get_buffer", "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_backward_hook", "register_full_backward_pre_hook", "extra_repr", "_get_name", "share_memory",
    "compile", "set_extra_state", "get_extra_state", "_replicate_for_data_parallel", "ipu", "xpu", "mtia", "to_empty",
    "_get_backward_hooks", "_get_backward_pre_hooks", "_maybe_warn_non_full_backward_hook", "call_super_init",
    "dump_patches", "training", "_version", "_parameters", "_buffers", "_modules", "_forward_hooks",
    "_forward_pre_hooks", "_backward_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks",
}
REFERENCE_NAMES = {"Model": "reference-fallback", "get_inputs": "input-tamper", "get_init_inputs": "input-tamper"}
_LOW_TEXT = re.compile(r"\b(float16|bfloat16|half|autocast|allow_tf32|tf32|float8\w*)\b")


@dataclass(frozen=True)
class PyFinding:
    rule: str
    reason: str
    line: int | None  # 1-based line in the candidate file


@dataclass
class Extension:
    name: str
    functions: set[str] | None  # None: unknown (bound by PYBIND11_MODULE in the sources)
    sources: list[tuple[str, int]] = field(default_factory=list)  # (text, 0-based file line of the string)
    include_paths: list[str] = field(default_factory=list)
    cflags: list[str] = field(default_factory=list)
    node: ast.AST | None = None


@dataclass
class Report:
    findings: list[PyFinding]
    extensions: dict[str, Extension]
    kernel_names: list[str]


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _code_words(text: str) -> str:
    """Identifiers, attributes and non-docstring strings of a Python file (no comments,
    no docstrings), for the precision comparison."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append(node.value)
    return "\n".join(words)


def reference_uses_low_precision(reference_file: str) -> bool:
    return bool(_LOW_TEXT.search(_code_words(reference_file)))


# -- the reference: which ops it computes with ---------------------------------------------
def _imports_of(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    names[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def reference_ops(reference_file: str) -> set[str]:
    """Compute op names the reference uses: ``matmul`` for ``torch.matmul``/``@``/``x.matmul``,
    ``nn.LayerNorm`` for a layer, ``relu`` for ``F.relu``/``torch.relu``/``x.relu()``."""
    try:
        tree = ast.parse(reference_file)
    except SyntaxError:
        return set()
    imports = _imports_of(tree)
    ops: set[str] = set()
    scopes = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
              and n.name not in ("get_inputs", "get_init_inputs", "ModelNew")]
    init_nodes: set[int] = set()
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                init_nodes |= {id(n) for n in ast.walk(node)}
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                ops.add("matmul")
            if not isinstance(node, ast.Call):
                continue
            parts = _dotted(node.func)
            in_init = id(node) in init_nodes
            if parts and parts[0] in imports:
                path = ".".join([imports[parts[0]], *parts[1:]]).split(".")
                if len(path) >= 3 and path[:2] == ["torch", "nn"] and path[2] not in ("functional", "init"):
                    ops.add("nn." + path[-1])
                    ops.add(layer_op(path[-1]))
                elif not in_init:
                    ops.add(path[-1])
            elif isinstance(node.func, ast.Attribute) and not _is_dunder(node.func.attr) and not in_init \
                    and not (parts and parts[0] == "self" and len(parts) == 2):
                ops.add(node.func.attr)
    return ops - TENSOR_METHODS - {"__init__", "super"}


_LAYER_OPS = {"Linear": "linear", "Bilinear": "bilinear", "LayerNorm": "layer_norm", "GroupNorm": "group_norm",
              "RMSNorm": "rms_norm", "Softmax": "softmax", "LogSoftmax": "log_softmax", "GELU": "gelu", "ReLU": "relu",
              "SiLU": "silu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Dropout": "dropout", "Embedding": "embedding",
              "MultiheadAttention": "multi_head_attention_forward", "Hardtanh": "hardtanh", "LeakyReLU": "leaky_relu",
              "ELU": "elu", "SELU": "selu", "Mish": "mish", "Softplus": "softplus", "Hardswish": "hardswish"}


def layer_op(name: str) -> str:
    """The functional op of an ``nn`` layer class: Conv2d -> conv2d, BatchNorm2d ->
    batch_norm, MaxPool2d -> max_pool2d, LayerNorm -> layer_norm."""
    if name in _LAYER_OPS:
        return _LAYER_OPS[name]
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    if re.fullmatch(r"(batch|instance)_norm\dd", snake):
        return snake[:-2]
    return snake.replace("conv_transpose", "conv_transpose").replace("_1d", "1d").replace("_2d", "2d").replace("_3d", "3d")


def layer_allowed(name: str, ref_ops: set[str]) -> bool:
    return "nn." + name in ref_ops or layer_op(name) in ref_ops


# -- the validator ------------------------------------------------------------------------------
class _Validator:
    def __init__(self, reference_file: str, ref_tree: ast.Module | None) -> None:
        self.findings: list[PyFinding] = []
        self.modules: dict[str, str] = {}  # local name -> dotted module (torch, torch.nn, math ...)
        self.imported: dict[str, str] = {}  # local name -> dotted object (load_inline, nn.Module ...)
        self.constants: set[str] = set()
        self.extensions: dict[str, Extension] = {}
        self.helpers: dict[str, ast.AST] = {}  # top-level functions and classes of the candidate
        self.trusted_names: set[str] = set()
        self.ref_ops = reference_ops(reference_file)
        self.low_ok = reference_uses_low_precision(reference_file)
        self.double_ok = bool(re.search(r"\b(float64|double)\b", _code_words(reference_file)))
        self.ref_include_paths = _reference_include_paths(ref_tree) if ref_tree is not None else set()
        self.string_values: dict[str, tuple[str, int]] = {}
        self.class_infos: dict[str, _ClassInfo] = {}

    def add(self, rule: str, reason: str, node: ast.AST | None) -> None:
        self.findings.append(PyFinding(rule, reason, getattr(node, "lineno", None)))

    # -- module level ----------------------------------------------------------------------
    def module(self, tree: ast.Module, trusted: list[bool]) -> None:
        # first pass: names bound at module level (constants, imports, extensions, helpers)
        for stmt, ok in zip(tree.body, trusted):
            if ok:
                self._bind_trusted(stmt)
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.imports(stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.helpers[stmt.name] = stmt
        for stmt, ok in zip(tree.body, trusted):
            if ok or isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            self.top_statement(stmt)

    def _bind_trusted(self, stmt: ast.stmt) -> None:
        """Trusted (reference) statements: their imports of allowed modules and their
        constants stay usable; nothing else they bind is."""
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt, quiet=True)
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            if self._const_value(stmt.value) is not None:
                for t in stmt.targets:
                    self.constants.add(t.id)
                    self._remember_string(t.id, stmt.value)
        for node in ast.walk(stmt):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.trusted_names.add(node.name)

    def imports(self, stmt: ast.Import | ast.ImportFrom, quiet: bool = False) -> None:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name in MODULES:
                    if a.asname:
                        self.modules[a.asname] = a.name
                    else:
                        self.modules[a.name.split(".")[0]] = a.name.split(".")[0]
                elif not quiet:
                    self._bad_import(a.name, stmt)
            return
        module = stmt.module or ""
        if stmt.level:
            if not quiet:
                self.add("import", "uses a relative import; a candidate imports only torch, math and typing", stmt)
            return
        for a in stmt.names:
            local = a.asname or a.name
            if module in FROM_ANY and a.name != "*":
                self.imported[local] = f"{module}.{a.name}"
            elif a.name in FROM_IMPORTS.get(module, {}):
                target = FROM_IMPORTS[module][a.name]
                if target in MODULES:
                    self.modules[local] = target
                else:
                    self.imported[local] = target
            elif not quiet:
                self._bad_import(f"{module}.{a.name}" if module else a.name, stmt)

    def _bad_import(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        rule = KNOWN_BAD_MODULES.get(root, "import")
        self.add(rule, f"imports `{name}`; a candidate may import only torch, torch.nn, torch.nn.functional, "
                 "load_inline from torch.utils.cpp_extension, math and typing", node)

    def top_statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return  # docstring
        if isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if value is None:
                return
            names = [t for t in targets if isinstance(t, ast.Name)]
            if len(names) != len(targets):
                for t in targets:
                    if not isinstance(t, ast.Name):
                        self._tamper_store(t)
                return
            for t in names:
                if _is_dunder(t.id):
                    self.add("dunder", f"assigns the dunder name `{t.id}`", t)
                if t.id == "ModelNew" or t.id in self.helpers:
                    self.add("rebinding", f"rebinds `{t.id}`, a class or function the candidate defines; ModelNew must "
                             "be the class that is checked", t)
                if t.id in REFERENCE_NAMES:
                    self.add(REFERENCE_NAMES[t.id], f"rebinds `{t.id}`, which belongs to the reference problem", t)
            if isinstance(value, ast.Call) and self._is_load_inline(value.func):
                self.load_inline([t.id for t in names], value)
                return
            if self._const_value(value) is not None:
                for t in names:
                    self.constants.add(t.id)
                    self._remember_string(t.id, value)
                return
            self.expr(value, _Scope(kind="module"))
            for t in names:
                self.constants.add(t.id)
            return
        if isinstance(stmt, ast.ClassDef):
            self.class_def(stmt)
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name in REFERENCE_NAMES:
                self.add(REFERENCE_NAMES[stmt.name], f"redefines {stmt.name}(); inputs and the reference come from the "
                         "problem, not the candidate", stmt)
                return
            self.function(stmt, _Scope(kind="helper"))
            return
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.add("try-except", "uses try/except, which can hide a fallback to PyTorch or the reference; "
                     "let failures surface", stmt)
            return
        if isinstance(stmt, (ast.AugAssign,)):
            self._tamper_store(stmt.target)
            return
        if isinstance(stmt, ast.Expr):
            before = len(self.findings)
            self.expr(stmt.value, _Scope(kind="module"))
            if len(self.findings) > before:
                return
        self.add("not-allowed", f"a top-level `{type(stmt).__name__}` statement is not allowed in a candidate; "
                 "only imports, constants, load_inline(...) and class/function definitions", stmt)

    def _tamper_store(self, target: ast.AST) -> None:
        parts = _dotted(target.value if isinstance(target, ast.Subscript) else target) or []
        text = ".".join(parts)
        if parts and (set(parts) & set(BACKEND_SWITCHES) or any("tf32" in p for p in parts)):
            numeric = any(w in text for w in ("tf32", "precision", "autocast", "amp", "dtype", "fp16", "bf16", "reduced"))
            self.add("precision" if numeric else "algorithm",
                     f"changes library settings (`{text}`); keep the reference's numerics and algorithms", target)
        else:
            self.add("timing-tamper", f"assigns to `{text or type(target).__name__}`; patching library, harness or "
                     "module state is tampering", target)

    def _remember_string(self, name: str, value: ast.AST) -> None:
        v = self._const_value(value)
        if isinstance(v, str):
            self.string_values[name] = (v, value.lineno - 1)

    def _const_value(self, node: ast.AST):
        """The value of a constant expression (numbers, strings, tuples/lists, + and * of
        them, names of constants), or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, bytes)) or \
                isinstance(node, ast.Constant) and node.value is None:
            return node.value if node.value is not None else ()
        if isinstance(node, ast.Name) and node.id in self.string_values:
            return self.string_values[node.id][0]
        if isinstance(node, ast.Name) and node.id in self.constants:
            return 0
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self._const_value(e) for e in node.elts]
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self._const_value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult, ast.Sub, ast.FloorDiv, ast.Div,
                                                                 ast.Pow, ast.Mod, ast.LShift)):
            left, right = self._const_value(node.left), self._const_value(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
                return left + right
            return 0
        if isinstance(node, ast.JoinedStr):
            return None
        return None

    # -- load_inline --------------------------------------------------------------------------
    def _is_load_inline(self, func: ast.AST) -> bool:
        parts = _dotted(func)
        if not parts:
            return False
        if len(parts) == 1:
            return self.imported.get(parts[0]) == "torch.utils.cpp_extension.load_inline"
        root = self.modules.get(parts[0])
        return root is not None and ".".join([root, *parts[1:]]) == "torch.utils.cpp_extension.load_inline"

    def load_inline(self, names: list[str], call: ast.Call) -> None:
        positional = ["name", "cpp_sources", "cuda_sources", "functions"]
        args: dict[str, ast.AST] = {}
        for i, a in enumerate(call.args):
            if i >= len(positional):
                self.add("load-inline", "load_inline takes name, cpp_sources, cuda_sources and functions here", a)
                return
            args[positional[i]] = a
        allowed = {"name", "cpp_sources", "cuda_sources", "functions", "verbose", "extra_cflags", "extra_cuda_cflags",
                   "extra_include_paths", "with_cuda", "with_pytorch_error_handling", "extra_ldflags"}
        for kw in call.keywords:
            if kw.arg is None or kw.arg not in allowed:
                self.add("load-inline", f"load_inline argument `{kw.arg or '**'}` is not allowed (no extra_ldflags, "
                         "build_directory or keyword unpacking): the build must use only the CUDA toolkit", kw.value)
                continue
            args[kw.arg] = kw.value
        ext = Extension(name=names[0] if names else "", functions=None, node=call)
        for key in ("cpp_sources", "cuda_sources"):
            if key not in args:
                continue
            for text, line in self._strings(args[key], key):
                ext.sources.append((text, line))
        if "functions" in args:
            fns = self._const_value(args["functions"])
            if isinstance(fns, str):
                fns = [fns]
            if not isinstance(fns, list) or not all(isinstance(f, str) for f in fns):
                self.add("load-inline", "`functions=` must be a literal list of names", args["functions"])
            elif fns:
                ext.functions = set(fns)
        if ext.functions is None:
            bound = set()
            for text, _ in ext.sources:
                bound |= set(re.findall(r"\bm\s*\.\s*def\s*\(\s*\"(\w+)\"", text))
            ext.functions = bound
        for key in ("extra_include_paths",):
            if key in args:
                for text, _ in self._strings(args[key], key):
                    ext.include_paths.append(text)
                    if text not in self.ref_include_paths:
                        self.add("include-path", f"adds the include path `{text}`, which the reference file does not use; "
                                 "the compile sees only the CUDA toolkit and the work directory", args[key])
        if "extra_ldflags" in args:  # KernelBench's examples pass [""]; anything else links other code
            for text, _ in self._strings(args["extra_ldflags"], "extra_ldflags"):
                if text.strip():
                    self.add("load-inline", f"`extra_ldflags` flag `{text}`: linking other libraries is not allowed; "
                             "the computation must be in the candidate's own kernels", args["extra_ldflags"])
        for key in ("extra_cflags", "extra_cuda_cflags"):
            if key in args:
                for text, _ in self._strings(args[key], key):
                    if not text.strip():
                        continue
                    ext.cflags.append(text)
                    problem = flag_problem(text, self.low_ok)
                    if problem:
                        self.add(problem[0], f"`{key}` flag `{text}`: {problem[1]}", args[key])
        for n in names:
            self.extensions[n] = ext

    def _strings(self, node: ast.AST, what: str) -> list[tuple[str, int]]:
        """Literal strings (or names of string constants, lists and + of them)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [(node.value, node.lineno - 1)]
        if isinstance(node, ast.Name) and node.id in self.string_values:
            return [self.string_values[node.id]]
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[tuple[str, int]] = []
            for e in node.elts:
                out += self._strings(e, what)
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            v = self._const_value(node)
            if isinstance(v, str):
                return [(v, node.lineno - 1)]
        self.add("load-inline", f"`{what}` must be string literals or names of module-level string constants, "
                 "so the sources can be checked before they are built", node)
        return []

    # -- classes and functions ------------------------------------------------------------------
    def class_def(self, node: ast.ClassDef) -> None:
        for deco in node.decorator_list:
            self.add("decorator", "class decorators are not allowed in a candidate", deco)
        for base in node.bases:
            parts = _dotted(base) or []
            path = self._path(parts)
            if parts and parts[-1] == "Model" or parts[:1] and parts[0] in self.trusted_names:
                self.add("reference-fallback", f"class {node.name} inherits from the reference `{'.'.join(parts)}`; "
                         "ModelNew must compute with its own kernels", base)
            elif path != "torch.nn.Module":
                self.add("not-allowed", f"class {node.name} may only derive from nn.Module", base)
        for kw in node.keywords:
            self.add("not-allowed", "class keywords (metaclass=…) are not allowed", kw)
        methods = {item.name: item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        scope_info = _ClassInfo(node.name, methods)
        # __init__ first: it says which attributes hold layers and extensions
        order = sorted(node.body, key=lambda s: 0 if getattr(s, "name", "") == "__init__" else 1)
        for item in order:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _is_dunder(item.name) and item.name != "__init__":
                    self.add("dunder", f"defines `{item.name}`; only __init__, forward and helper methods are allowed",
                             item)
                    continue
                if item.name in MODULE_INTERNALS:
                    self.add("reference-fallback", f"overrides nn.Module's `{item.name}`, which would run instead of "
                             "forward; only __init__, forward and helper methods of new names are allowed", item)
                    continue
                kind = "init" if item.name == "__init__" else "method"
                self.function(item, _Scope(kind=kind, cls=scope_info))
            elif isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant):
                continue
            elif isinstance(item, ast.Pass):
                continue
            elif isinstance(item, ast.Assign) and self._const_value(item.value) is not None:
                continue
            else:
                self.add("not-allowed", f"`{type(item).__name__}` in the body of class {node.name} is not allowed", item)
        self.class_infos[node.name] = scope_info
        if node.name == "ModelNew":
            self.model_new = (node, scope_info)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope) -> None:
        if isinstance(node, ast.AsyncFunctionDef):
            self.add("threads", "async functions are not allowed; work must run in the CUDA kernels", node)
        for deco in node.decorator_list:
            parts = _dotted(deco.func if isinstance(deco, ast.Call) else deco) or []
            rule = "result-caching" if parts and parts[-1] in ("lru_cache", "cache", "cached_property") else "decorator"
            self.add(rule, f"decorator `{'.'.join(parts) or '?'}` is not allowed (it can cache results or wrap the "
                     "computation)", deco)
        a = node.args
        for default in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            if self._const_value(default) is None:
                self.add("state", "a default argument that is not a constant keeps state across calls", default)
        args = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
        if a.vararg:
            args.append(a.vararg.arg)
        if a.kwarg:
            args.append(a.kwarg.arg)
        for x in args:
            if _is_dunder(x):
                self.add("dunder", f"argument `{x}`", node)
        scope.args = set(args) - {"self"}
        scope.locals = set(args)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                scope.locals.add(sub.id)
            elif isinstance(sub, ast.arg) and sub is not node:
                scope.locals.add(sub.arg)
        for ann in [x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.annotation] + \
                ([node.returns] if node.returns else []):
            self.annotation(ann)
        scope.function = node.name
        for stmt in node.body:
            self.stmt(stmt, scope)

    def annotation(self, node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and _is_dunder(sub.attr):
                self.add("dunder", f"dunder attribute `{sub.attr}` in an annotation", sub)
            if isinstance(sub, ast.Call):
                self.add("not-allowed", "calls inside annotations are not allowed", sub)

    # -- statements --------------------------------------------------------------------------------
    def stmt(self, node: ast.stmt, scope: _Scope) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(node, ast.AnnAssign):
                self.annotation(node.annotation)
            if node.value is not None:
                for t in targets:
                    self.store(t, scope, node.value)
                keeps_extension = scope.kind == "init" and isinstance(node.value, ast.Name) \
                    and node.value.id in self.extensions and all(
                        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                        for t in targets)
                if not keeps_extension:  # `self.ext = ext` in __init__ is KernelBench's idiom
                    self.expr(node.value, scope)
            return
        if isinstance(node, ast.AugAssign):
            self.store(node.target, scope, None, augmented=True)
            self.expr(node.value, scope)
            return
        if isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value, scope)
            return
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant):
                return
            self.expr(node.value, scope)
            return
        if isinstance(node, (ast.If, ast.While)):
            self.expr(node.test, scope)
            constant = isinstance(node.test, ast.Constant)
            for branch, dead in ((node.body, constant and not node.test.value), (node.orelse, constant and node.test.value)):
                scope.dead += bool(dead)
                for s in branch:
                    self.stmt(s, scope)
                scope.dead -= bool(dead)
            return
        if isinstance(node, ast.For):
            self.store(node.target, scope, None)
            self.expr(node.iter, scope)
            for s in node.body + node.orelse:
                self.stmt(s, scope)
            return
        if isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            return
        if isinstance(node, ast.Assert):
            self.expr(node.test, scope)
            if node.msg is not None:
                self.expr(node.msg, scope)
            return
        if isinstance(node, ast.Raise):
            if node.exc is not None:
                self.expr(node.exc, scope)
            return
        if isinstance(node, ast.With):
            for item in node.items:
                path = self._path(_dotted(item.context_expr.func) or []) if isinstance(item.context_expr, ast.Call) else ""
                if path in ("torch.no_grad", "torch.inference_mode") and not item.optional_vars:
                    continue
                parts = _dotted(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else None
                text = ".".join(parts or []) or "this context manager"
                if parts and ("stream" in text.lower()):
                    rule = "side-stream"
                elif parts and ("autocast" in text or "amp" in parts):
                    rule = "precision"
                else:
                    rule = "not-allowed"
                self.add(rule, f"`with {text}` is not allowed; only `with torch.no_grad()`", item.context_expr)
            for s in node.body:
                self.stmt(s, scope)
            return
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.add("try-except", "uses try/except, which can hide a fallback to PyTorch or the reference; "
                     "let failures surface", node)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            module = getattr(node, "module", None)
            self._bad_import(module or names[0], node)
            return
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            self.add("state", f"`{type(node).__name__.lower()}` writes module or outer state while computing", node)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            self.add("not-allowed", "nested function or class definitions are not allowed; define helpers at top level",
                     node)
            return
        self.add("not-allowed", f"`{type(node).__name__}` statements are not allowed in a candidate", node)

    def store(self, target: ast.AST, scope: _Scope, value: ast.AST | None, augmented: bool = False) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.store(e, scope, None, augmented)
            return
        if isinstance(target, ast.Starred):
            self.store(target.value, scope, None, augmented)
            return
        if isinstance(target, ast.Name):
            if _is_dunder(target.id):
                self.add("dunder", f"assigns the dunder name `{target.id}`", target)
            if augmented and target.id in scope.args:
                self.add("input-tamper", f"`{target.id} op= …` changes the input `{target.id}` in place; inputs must be "
                         "left unchanged", target)
            return
        if isinstance(target, ast.Attribute):
            if _is_dunder(target.attr):
                self.add("dunder", f"assigns the dunder attribute `{target.attr}`", target)
                return
            root = _dotted(target)
            if root and root[0] == "self" and len(root) == 2 and scope.kind == "init":
                if value is not None and scope.cls is not None:
                    self._remember_attr(root[1], value, scope)
                return
            if root and root[0] == "self":
                self.add("state", f"stores `{'.'.join(root)}` while computing; state kept across calls can memoise "
                         "results", target)
                return
            if root and root[0] in scope.args:
                self.add("input-tamper", f"writes into the input `{root[0]}`; inputs must be left unchanged", target)
                return
            if root and root[0] in scope.locals:
                self.expr(target.value, scope)
                return
            self._tamper_store(target)
            return
        if isinstance(target, ast.Subscript):
            root = _dotted(target.value) or []
            if isinstance(target.value, ast.Subscript):
                inner = target.value
                while isinstance(inner, ast.Subscript):
                    inner = inner.value
                root = _dotted(inner) or []
            if root and root[0] in scope.args:
                self.add("input-tamper", f"writes into the input `{root[0]}`; inputs must be left unchanged", target)
            elif root and root[0] == "self" and scope.kind != "init":
                self.add("state", f"writes into `{'.'.join(root)}` while computing; state kept across calls can memoise "
                         "results", target)
            elif not root or root[0] not in scope.locals:
                self._tamper_store(target)
            self.expr(target.slice, scope)
            return
        self.add("not-allowed", f"cannot assign to `{type(target).__name__}`", target)

    def _remember_attr(self, attr: str, value: ast.AST, scope: _Scope) -> None:
        info = scope.cls
        if isinstance(value, ast.Name) and value.id in self.extensions:
            info.extension_attrs[attr] = value.id
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and isinstance(self.helpers.get(value.func.id), ast.ClassDef):
            info.submodule_attrs[attr] = value.func.id  # self.block = Block(...): a helper nn.Module
        elif isinstance(value, ast.Call):
            path = self._path(_dotted(value.func) or [])
            if path.startswith("torch.nn.") and path.count(".") == 2 and path.split(".")[2] not in NN_VALUES:
                info.layer_attrs[attr] = path.split(".")[2]

    # -- expressions ------------------------------------------------------------------------------
    def _path(self, parts: list[str]) -> str:
        """Dotted path of a name chain rooted at an allowed module or imported object."""
        if not parts:
            return ""
        if parts[0] in self.modules:
            return ".".join([self.modules[parts[0]], *parts[1:]])
        if parts[0] in self.imported:
            return ".".join([self.imported[parts[0]], *parts[1:]])
        return ""

    def expr(self, node: ast.AST, scope: _Scope) -> None:
        if node is None or isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Name):
            self.name(node, scope)
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node, scope, called=False)
            return
        if isinstance(node, ast.Call):
            self.call(node, scope)
            return
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult) and "matmul" not in self.ref_ops:
                self.add("torch-op", "uses the @ operator (a PyTorch matmul) although the reference does not; compute it "
                         "in your CUDA kernel", node)
            elif isinstance(node.op, ast.MatMult):
                scope.torch_ops.append(node)
            self.expr(node.left, scope)
            self.expr(node.right, scope)
            return
        if isinstance(node, ast.Lambda):
            self.add("not-allowed", "lambdas are not allowed (they hide calls from the validator)", node)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for gen in node.generators:
                self.expr(gen.iter, scope)
                for cond in gen.ifs:
                    self.expr(cond, scope)
            elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for e in elts:
                self.expr(e, scope)
            return
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
            self.add("not-allowed", f"`{type(node).__name__.lower()}` is not allowed", node)
            return
        if isinstance(node, ast.NamedExpr):
            self.expr(node.value, scope)
            return
        if isinstance(node, ast.Subscript):
            self.expr(node.value, scope)
            self.expr(node.slice, scope)
            return
        if isinstance(node, (ast.BoolOp, ast.Compare, ast.UnaryOp, ast.IfExp, ast.Tuple, ast.List, ast.Set, ast.Dict,
                             ast.Slice, ast.Starred, ast.JoinedStr, ast.FormattedValue, ast.keyword)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)):
                    continue
                self.expr(child, scope)
            return
        self.add("not-allowed", f"`{type(node).__name__}` expressions are not allowed", node)

    def name(self, node: ast.Name, scope: _Scope, called: bool = False) -> None:
        n = node.id
        if _is_dunder(n):
            self.add("dunder", f"uses the dunder name `{n}`", node)
        elif n in ESCAPES:
            self.add(ESCAPES[n], f"uses `{n}`, which can reach the interpreter, other modules or files", node)
        elif n in REFERENCE_NAMES and n not in scope.locals:
            self.add(REFERENCE_NAMES[n], f"uses the reference's `{n}`; ModelNew must compute with its own kernels", node)
        elif n in scope.locals or n == "self":
            if called and n not in ("self",):
                self.add("dynamic-call", f"calls the variable `{n}`; call the extension's functions directly", node)
        elif n in self.constants:
            if called:
                self.add("dynamic-call", f"calls the module-level value `{n}`", node)
        elif n in SAFE_BUILTINS:
            pass
        elif n in self.helpers:
            if not called and not isinstance(self.helpers[n], ast.ClassDef):
                self.add("module-value", f"uses the function `{n}` as a value; call it directly", node)
            scope.calls.add(n)
        elif n in self.modules or n in self.imported or n in self.extensions:
            what = self.modules.get(n) or self.imported.get(n) or "a compiled extension"
            if self.imported.get(n, "").startswith(("typing.", "math.")) and called:
                return
            if self.imported.get(n, "").startswith("typing."):
                return
            self.add("module-value", f"uses `{n}` ({what}) as a value; modules, extensions and library functions "
                     "may only be called directly, never aliased or passed around", node)
        elif n in self.trusted_names:
            self.add("reference-fallback", f"uses `{n}` from the reference file; the candidate must compute with its "
                     "own kernels", node)
        else:
            rule = KNOWN_BAD_MODULES.get(n, "unknown-name")
            self.add(rule, f"uses `{n}`, which is neither defined by the candidate nor allowed", node)

    def attribute(self, node: ast.Attribute, scope: _Scope, called: bool) -> None:
        if _is_dunder(node.attr):
            self.add("dunder", f"uses the dunder attribute `{node.attr}`; attribute escapes are not allowed", node)
            return
        parts = _dotted(node)
        if parts and (parts[0] in self.modules or parts[0] in self.imported) and parts[0] not in scope.locals:
            path = self._path(parts)
            self.module_path(path, node, scope, called)
            return
        if parts and parts[0] in self.extensions and parts[0] not in scope.locals:
            self.extension_use(parts[0], parts[1:], node, scope, called)
            return
        if parts and parts[0] == "self" and len(parts) >= 2 and scope.cls is not None:
            attr = parts[1]
            if attr in scope.cls.extension_attrs:
                self.extension_use(scope.cls.extension_attrs[attr], parts[2:], node, scope, called)
                return
        if not called and node.attr in LOW_PRECISION_DTYPES and not self.low_ok:
            self.add("precision", f"uses `{node.attr}` where the reference does not; keep the reference's data types",
                     node)
        self.expr(node.value, scope)

    def extension_use(self, ext_name: str, rest: list[str], node: ast.AST, scope: _Scope, called: bool) -> None:
        ext = self.extensions[ext_name]
        if not called or len(rest) != 1:
            self.add("module-value", f"uses the extension `{ext_name}` other than by calling one of its functions", node)
            return
        if ext.functions is not None and rest[0] not in ext.functions:
            self.add("unknown-extension-function", f"calls `{ext_name}.{rest[0]}`, which is not among the functions "
                     f"load_inline binds ({', '.join(sorted(ext.functions)) or 'none'})", node)
            return
        if not scope.dead:  # a call under `if False:` is not on the path
            scope.kernel_calls.append(node)

    def module_path(self, path: str, node: ast.AST, scope: _Scope, called: bool) -> None:
        parts = path.split(".")
        last = parts[-1]
        text = path
        if any(p in BACKEND_SWITCHES for p in parts) or "tf32" in path:
            rule = "precision" if ("tf32" in path or "autocast" in path or "amp" in parts or "precision" in path
                                   or "default_dtype" in path) else "algorithm"
            self.add(rule, f"uses `{text}`, which changes precision or algorithm selection; keep the reference's",
                     node)
            return
        if parts[:2] == ["torch", "ops"] or parts[:2] == ["torch", "_C"] or parts[:2] == ["torch", "_ops"]:
            self.add("torch-op", f"uses `{text}`, a PyTorch/ATen operator, instead of a CUDA kernel", node)
            return
        if parts[:2] == ["torch", "cuda"]:
            rule = "side-stream" if "stream" in path.lower() else "timing-tamper" if ("Event" in path or "synchron" in path) \
                else "not-allowed"
            self.add(rule, f"uses `{text}`; the harness owns the device, streams and timing", node)
            return
        if parts[0] == "math":
            return
        if parts[0] == "typing" or parts[0] == "__future__":
            return
        if path == "torch.utils.cpp_extension.load_inline":
            self.add("load-inline", "load_inline may only be called as `NAME = load_inline(...)` at module level", node)
            return
        if last in LOW_PRECISION_DTYPES:
            if not self.low_ok:
                self.add("precision", f"uses `{text}` where the reference does not; keep the reference's data types", node)
            return
        if last in ("float64", "double") and len(parts) == 2 and not self.double_ok:
            self.add("precision", f"uses `{text}` where the reference does not; keep the reference's data types", node)
            return
        if not called:
            if len(parts) == 2 and parts[0] == "torch" and last in TORCH_VALUES:
                return
            if parts[:2] == ["torch", "nn"] and len(parts) == 3 and last in NN_VALUES:
                return
            self.add("module-value", f"refers to `{text}` without calling it; library functions and modules may not be "
                     "aliased or used as values", node)
            return
        # calls
        if len(parts) == 2 and parts[0] == "torch":
            if last in TORCH_ALLOC:
                return
            if last in TORCH_INIT_ONLY and scope.kind == "init":
                return
            if last in ("manual_seed", "seed", "set_rng_state"):
                self.add("input-tamper", f"calls `{text}`, which changes how inputs are generated", node)
                return
        if parts[:2] == ["torch", "nn"] and len(parts) == 3 and last in NN_VALUES:
            return
        if parts[:3] == ["torch", "nn", "init"] and scope.kind == "init":
            return
        if parts[:2] == ["torch", "nn"] and len(parts) == 3 and parts[2] != "functional":
            if layer_allowed(last, self.ref_ops) and scope.kind == "init":
                return
            if layer_allowed(last, self.ref_ops):
                self.add("torch-op", f"builds the PyTorch layer `{text}` while computing; build it in __init__", node)
                return
            self.add("torch-op", f"uses the PyTorch layer `{text}`, which the reference Model does not use", node)
            return
        op_family = (len(parts) == 2 and parts[0] == "torch") or parts[:3] == ["torch", "nn", "functional"] or \
            parts[:2] in (["torch", "special"], ["torch", "linalg"], ["torch", "fft"])
        if op_family and last in self.ref_ops and scope.kind != "init":
            scope.torch_ops.append(node)
            return
        if op_family:
            self.add("torch-op", f"calls `{text}`, a PyTorch compute op the reference Model does not use; compute it in "
                     "your CUDA kernel", node)
            return
        self.add("not-allowed", f"calls `{text}`, which is not on the allowlist for candidates", node)

    def call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        for arg in node.args:
            self.expr(arg, scope)
        for kw in node.keywords:
            self.expr(kw.value, scope)
        if isinstance(func, ast.Name):
            self.name(func, scope, called=True)
            if func.id in self.helpers:
                scope.calls.add(func.id)
            return
        if not isinstance(func, ast.Attribute):
            if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "super":
                self.expr(func, scope)
                return
            self.add("dynamic-call", "calls the result of an expression; call the extension's functions directly", node)
            self.expr(func, scope)
            return
        attr = func.attr
        # super().__init__(...) and super(ModelNew, self).__init__()
        if isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            if attr == "__init__" and scope.kind == "init":
                for a in func.value.args:
                    if not (isinstance(a, ast.Name) and (a.id == "self" or (scope.cls and a.id == scope.cls.name))):
                        self.add("reference-fallback", "super() must name this class and self", a)
                return
            self.add("reference-fallback", f"calls super().{attr}(), the parent's computation", node)
            return
        if _is_dunder(attr):
            self.add("dunder", f"calls the dunder method `{attr}`; attribute escapes are not allowed", node)
            return
        parts = _dotted(func)
        if parts and (parts[0] in self.modules or parts[0] in self.imported or parts[0] in self.extensions) \
                and parts[0] not in scope.locals:
            self.attribute(func, scope, called=True)
            return
        if parts and parts[0] == "self" and scope.cls is not None:
            if len(parts) >= 2 and parts[1] in scope.cls.extension_attrs:
                self.attribute(func, scope, called=True)
                return
            if len(parts) == 2:
                if parts[1] in scope.cls.methods:
                    scope.calls.add("self." + parts[1])
                    return
                if parts[1] in scope.cls.submodule_attrs:
                    scope.calls.add("class:" + scope.cls.submodule_attrs[parts[1]])
                    return
                if parts[1] in scope.cls.layer_attrs:
                    layer = scope.cls.layer_attrs[parts[1]]
                    if layer_allowed(layer, self.ref_ops):
                        scope.torch_ops.append(node)
                        return
                    self.add("torch-op", f"calls the PyTorch layer `self.{parts[1]}` ({layer}), which the reference "
                             "Model does not use", node)
                    return
                if parts[1] in ("register_buffer", "register_parameter") and scope.kind == "init":
                    return
        # a method call on a value
        self.expr(func.value, scope)
        root = parts[0] if parts else None
        if attr in LOW_PRECISION_METHODS and not self.low_ok:
            self.add("precision", f"calls `.{attr}()`, another precision than the reference's", node)
            return
        if attr in OTHER_PRECISION_METHODS and not self.double_ok:
            self.add("precision", f"calls `.{attr}()`, another precision than the reference's", node)
            return
        if attr.endswith("_") and root is not None and (root in scope.args or (root == "self" and scope.kind != "init")):
            who = "the input" if root in scope.args else "module state"
            self.add("input-tamper" if root in scope.args else "state",
                     f"modifies {who} `{root}` in place (`.{attr}()`)", node)
            return
        if attr in TENSOR_METHODS:
            if attr.endswith("_") and attr not in INPLACE_ALLOWED_ON_LOCALS:
                self.add("not-allowed", f"in-place `.{attr}()` is not allowed", node)
            return
        if attr in self.ref_ops and scope.kind != "init":
            scope.torch_ops.append(node)
            return
        if attr in TORCH_COMPUTE or attr in self.ref_ops:
            self.add("torch-op", f"calls the tensor method `.{attr}()`, a PyTorch op the reference Model does not use, "
                     "instead of a CUDA kernel", node)
            return
        self.add("not-allowed", f"calls the method `.{attr}()`, which is not on the allowlist (shape and allocation "
                 "ops, the extension's functions, and compute ops the reference uses)", node)


@dataclass
class _ClassInfo:
    name: str
    methods: dict[str, ast.AST]
    layer_attrs: dict[str, str] = field(default_factory=dict)
    extension_attrs: dict[str, str] = field(default_factory=dict)
    submodule_attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class _Scope:
    kind: str  # module | init | method | helper
    cls: _ClassInfo | None = None
    args: set[str] = field(default_factory=set)
    locals: set[str] = field(default_factory=set)
    function: str = ""
    calls: set[str] = field(default_factory=set)
    kernel_calls: list[ast.AST] = field(default_factory=list)
    torch_ops: list[ast.AST] = field(default_factory=list)
    dead: int = 0


# -- compile flags ---------------------------------------------------------------------------------
_FLAG_OK = re.compile(
    r"-O[0-3]|-lineinfo|-std=c\+\+(14|17|20)|-Xptxas|-v|--ptxas-options=-v|-maxrregcount=\d+|--maxrregcount=\d+"
    r"|-D\w+(=[\w.]+)?|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|-DNDEBUG|-g|-G"
    r"|-arch=(sm|compute)_\d+a?|-gencode=arch=compute_\d+a?,code=(sm|compute)_\d+a?|--restrict|-w|-Wall"
    r"|-Xptxas=-v|-Xptxas=-O[0-3]|--resource-usage|-Xcompiler|-fPIC|-U__CUDA_NO_HALF_OPERATORS__"
    r"|-U__CUDA_NO_HALF_CONVERSIONS__|-U__CUDA_NO_HALF2_OPERATORS__|-U__CUDA_NO_BFLOAT16_CONVERSIONS__"
)
_FLAG_PRECISION = re.compile(r"fast.?math|-ftz|-prec-div|-prec-sqrt|-fmad|--ftz|--prec|-ffast|-ffp-contract|-funsafe")


def flag_problem(flag: str, low_ok: bool = False) -> tuple[str, str] | None:
    """(rule, reason) when a load_inline compile flag is not allowed."""
    f = flag.strip()
    if _FLAG_PRECISION.search(f):
        return "precision", "changes floating-point semantics (fast math, flush-to-zero, approximate division)"
    if "HALF" in f or "BFLOAT16" in f:
        if not low_ok:
            return "precision", "enables reduced-precision operators the reference does not use"
        return None
    if _FLAG_OK.fullmatch(f):
        return None
    return "compile-flag", ("not an allowed flag (-O*, -lineinfo, -std=, -Xptxas -v, -maxrregcount, -D…, "
                            "--expt-relaxed-constexpr); link flags, include paths and host paths are refused")


def _reference_include_paths(tree: ast.Module) -> set[str]:
    paths: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extra_include_paths":
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    paths.add(sub.value)
    return paths


# -- entry point ------------------------------------------------------------------------------------
_TRUSTED_KINDS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.ClassDef, ast.Expr)


def _trusted_dumps(reference_file: str) -> tuple[set[str], ast.Module | None]:
    try:
        tree = ast.parse(reference_file)
    except SyntaxError:
        return set(), None
    dumps = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "ModelNew":
            continue
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            continue  # load_inline(...) and other calls: the candidate's to check
        if isinstance(stmt, _TRUSTED_KINDS):
            dumps.add(ast.dump(stmt))
    return dumps, tree


def validate(candidate_file: str, reference_file: str) -> Report:
    """Validate a whole candidate file (the module the GPU runner imports) against the
    reference file (the user's problem, without any starting ModelNew)."""
    try:
        tree = ast.parse(candidate_file)
    except SyntaxError as exc:
        return Report([PyFinding("syntax", f"the candidate is not valid Python: {exc.msg}", exc.lineno)], {}, [])
    dumps, ref_tree = _trusted_dumps(reference_file)
    v = _Validator(reference_file, ref_tree)
    v.model_new = None
    trusted = [ast.dump(stmt) in dumps and not (isinstance(stmt, ast.ClassDef) and stmt.name == "ModelNew")
               for stmt in tree.body]
    v.module(tree, trusted)
    if v.model_new is None:
        v.add("no-modelnew", "defines no top-level `class ModelNew`; the candidate must define ModelNew with the same "
              "constructor and forward signature as Model", None)
    kernel_names: list[str] = []
    for ext in {id(e): e for e in v.extensions.values()}.values():
        for text, _line in ext.sources:
            kernel_names += re.findall(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*\(",
                                       text)
    if not any("__global__" in text for ext in v.extensions.values() for text, _ in ext.sources):
        v.add("no-cuda-kernel", "builds no CUDA kernel: no load_inline source defines a `__global__` function; falling "
              "back to PyTorch is not an optimization", None)
    if v.model_new is not None:
        _check_forward_path(v)
    return Report(v.findings, v.extensions, sorted(set(kernel_names)))


def _check_forward_path(v: _Validator) -> None:
    """At least one function of a load_inline extension must be reachable from forward."""
    node, info = v.model_new
    scopes: dict[str, _Scope] = {}

    def scan(fn: ast.AST, key: str, cls: _ClassInfo | None) -> _Scope:
        if key in scopes:
            return scopes[key]
        sub = _Validator.__new__(_Validator)
        sub.__dict__.update(v.__dict__)
        sub.findings = []  # already reported; this pass only records calls
        scope = _Scope(kind="method" if cls else "helper", cls=cls)
        scopes[key] = scope
        sub.function(fn, scope)
        return scope

    forward = info.methods.get("forward")
    if forward is None:
        v.add("no-forward", "ModelNew defines no forward()", node)
        return
    seen: set[str] = set()
    todo = [("self.forward", forward, info)]
    reached = False
    while todo:
        key, fn, cls = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        scope = scan(fn, key, cls)
        if scope.kernel_calls:
            reached = True
        for callee in scope.calls:
            if callee.startswith("self.") and cls is not None and callee[5:] in cls.methods:
                todo.append((callee, cls.methods[callee[5:]], cls))
            elif callee in v.helpers and isinstance(v.helpers[callee], (ast.FunctionDef,)):
                todo.append((callee, v.helpers[callee], None))
            elif callee.startswith("class:") and callee[6:] in v.class_infos:
                sub = v.class_infos[callee[6:]]
                if "forward" in sub.methods:
                    todo.append((callee[6:] + ".forward", sub.methods["forward"], sub))
    if not reached:
        v.add("no-custom-kernel", "ModelNew.forward never calls a function of a load_inline extension; at least one "
              "custom CUDA kernel must be on the path of forward", forward)
