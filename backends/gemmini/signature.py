"""Reading a kernel's signature: which array parameters it takes, their element types and
constant dimensions, and which of them it writes.

The harness is generated from this, so the rules are deliberately simple and stated in
errors: every parameter must be an array with constant dimensions (numbers or
``#define``d names), of a supported element type. ``const`` arrays are inputs; a non-const
array is an output when the kernel visibly writes it (indexed assignment, the destination of
an mvout, the C/output argument of the library routines, memcpy/memset destination). The
reference run then double-checks the classification against what the original kernel
really wrote (see :mod:`.backend`).
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field

from autocomp.backends.base import BackendError

from autocomp.backends.cscan import FunctionDef, mask, split_top_level

# element type -> (bytes, kind) where kind is "int", "uint" or "float"
ELEMENT_TYPES: dict[str, tuple[int, str]] = {
    "elem_t": (1, "int"),
    "acc_t": (4, "int"),
    "full_t": (8, "int"),
    "scale_t": (4, "float"),
    "acc_scale_t": (4, "float"),
    "int8_t": (1, "int"),
    "uint8_t": (1, "uint"),
    "int16_t": (2, "int"),
    "uint16_t": (2, "uint"),
    "int32_t": (4, "int"),
    "uint32_t": (4, "uint"),
    "int64_t": (8, "int"),
    "uint64_t": (8, "uint"),
    "char": (1, "int"),
    "signed char": (1, "int"),
    "unsigned char": (1, "uint"),
    "short": (2, "int"),
    "int": (4, "int"),
    "unsigned": (4, "uint"),
    "unsigned int": (4, "uint"),
    "float": (4, "float"),
    "double": (8, "float"),
}

# Constants gemmini.h defines that kernels use in array dimensions.
HEADER_CONSTANTS: dict[str, int] = {"DIM": 16, "ADDR_LEN": 32, "BANK_NUM": 4, "BANK_ROWS": 4096, "ACC_ROWS": 1024}

_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "register", "static"}

# Calls whose argument at this 0-based position is written by the callee.
_WRITE_ARG_OF: dict[str, int] = {
    "gemmini_mvout": 0,
    "gemmini_extended_mvout": 0,
    "mvout": 0,
    "tiled_matmul_auto": 6,
    "tiled_matmul": 6,
    "tiled_matmul_outer": 6,
    "gemmini_loop_ws": 9,
    "tiled_conv_auto": -1,  # the output is the last pointer argument the header names; see below
    "tiled_conv": -1,
    "memcpy": 0,
    "memset": 0,
    "memmove": 0,
}


@dataclass(frozen=True)
class ArrayParam:
    """One array parameter of the kernel."""

    name: str
    ctype: str  # element type as written, e.g. "elem_t"
    dims: tuple[str, ...]  # dimension expressions as written, e.g. ("DIM_I", "DIM_K")
    const: bool
    output: bool
    elem_size: int
    kind: str  # "int", "uint" or "float"
    shape: tuple[int, ...] | None = None  # evaluated dims when the #defines allow it

    @property
    def role(self) -> str:
        return "output" if self.output else "input"

    def c_declarator(self, symbol: str) -> str:
        return f"{self.ctype} {symbol}" + "".join(f"[{d}]" for d in self.dims)

    def with_output(self, output: bool) -> "ArrayParam":
        return ArrayParam(self.name, self.ctype, self.dims, self.const, output, self.elem_size, self.kind, self.shape)

    def index_of(self, flat: int) -> str:
        """``[i][j]`` for a flat element index when the shape is known, else ``[flat]``."""
        if not self.shape:
            return f"[{flat}] (flat)"
        idx = []
        for d in reversed(self.shape):
            idx.append(flat % d)
            flat //= d
        return "".join(f"[{i}]" for i in reversed(idx))


@dataclass
class Signature:
    name: str
    return_type: str
    params: list[ArrayParam] = field(default_factory=list)

    @property
    def inputs(self) -> list[ArrayParam]:
        return [p for p in self.params if not p.output]

    @property
    def outputs(self) -> list[ArrayParam]:
        return [p for p in self.params if p.output]

    def reclassified(self, as_output: set[str]) -> "Signature":
        return Signature(
            self.name, self.return_type, [p.with_output(True) if p.name in as_output else p for p in self.params]
        )


def _defines(text: str) -> dict[str, str]:
    """Object-like ``#define NAME value`` lines (last definition wins)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"^\s*#\s*define\s+([A-Za-z_]\w*)(?!\()\s+(.+?)\s*$", text, re.M):
        value = re.sub(r"//.*$|/\*.*?\*/", "", m.group(2)).strip()
        if value:
            out[m.group(1)] = value
    return out


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}


def eval_dim(expr: str, defines: dict[str, str], depth: int = 0) -> int | None:
    """Value of a C constant expression built from numbers, #defines and + - * / % << >>."""
    if depth > 20:
        return None
    expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr.strip())
    try:
        tree = ast.parse(expr.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in defines:
                return eval_dim(defines[node.id], defines, depth + 1)
            return HEADER_CONSTANTS.get(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
                return None
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = ev(node.operand)
            return None if v is None else -v
        return None

    return ev(tree)


def parse_param(raw: str, kernel: str) -> tuple[str, str, tuple[str, ...], bool]:
    """(name, element type, dims, const) of one parameter; BackendError when unsupported."""
    text = " ".join(raw.split())
    m = re.match(r"^(?P<head>[^\[]*?)\s*(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(\[[^\]]*\]\s*)+)$", text)
    if not m:
        if "*" in text:
            raise BackendError(
                f"kernel {kernel}: parameter `{text}` is a pointer; write it as an array with constant "
                f"dimensions (e.g. `const elem_t A[DIM_I][DIM_K]`) so the harness knows its size"
            )
        raise BackendError(
            f"kernel {kernel}: parameter `{text}` is not an array; the generated harness only passes arrays "
            f"with constant dimensions. For other signatures use a test program with `// SUBSTITUTE HERE` / "
            f"`// SUBSTITUTE END` markers around the kernel"
        )
    words = m.group("head").split()
    const = "const" in words
    base = " ".join(w for w in words if w not in _QUALIFIERS)
    if base not in ELEMENT_TYPES:
        raise BackendError(
            f"kernel {kernel}: parameter `{m.group('name')}` has element type `{base}`; supported: "
            + ", ".join(sorted(ELEMENT_TYPES))
        )
    dims = tuple(d.strip() for d in re.findall(r"\[([^\]]*)\]", m.group("dims")))
    if any(not d for d in dims):
        raise BackendError(
            f"kernel {kernel}: parameter `{m.group('name')}` has an empty dimension `[]`; give every "
            f"dimension a constant (a number or a #define) so the harness can allocate it"
        )
    return m.group("name"), base, dims, const


def _call_args(body: str, callee: str) -> list[list[str]]:
    """Argument lists of every call to ``callee`` in ``body``."""
    result = []
    for m in re.finditer(rf"\b{re.escape(callee)}\s*\(", body):
        start = m.end()
        depth = 1
        k = start
        while k < len(body) and depth:
            if body[k] == "(":
                depth += 1
            elif body[k] == ")":
                depth -= 1
            k += 1
        result.append(split_top_level(body[start : k - 1]))
    return result


def _written(name: str, body: str, array_names: list[str]) -> bool:
    """Whether the kernel body visibly writes array ``name``."""
    n = re.escape(name)
    if re.search(rf"\b{n}\s*(\[[^;]*?\]\s*)+(=(?!=)|\+=|-=|\*=|/=|%=|&=|\|=|\^=|<<=|>>=|\+\+|--)", body):
        return True
    if re.search(rf"(\+\+|--)\s*{n}\s*\[", body):
        return True
    word = re.compile(rf"\b{n}\b")
    for callee, pos in _WRITE_ARG_OF.items():
        for args in _call_args(body, callee):
            if pos >= 0:
                if pos < len(args) and word.search(args[pos]):
                    return True
            else:
                # Convolution routines take (…, input, weights, bias, output, …): the output is the
                # last of the kernel's arrays passed to the call.
                passed = [a for a in args if any(re.search(rf"\b{re.escape(x)}\b", a) for x in array_names)]
                if passed and word.search(passed[-1]):
                    return True
    return False


def parse_signature(text: str, fn: FunctionDef) -> Signature:
    """The signature of kernel ``fn`` in file ``text``; BackendError with the fix when the
    harness cannot be generated from it."""
    clean = mask(text)
    params_text = " ".join(fn.params(clean).split())
    head = clean[fn.start : fn.params_start - 1]
    return_type = " ".join(head.split()[:-1]) or "void"
    raw_params = [] if params_text in ("", "void") else split_top_level(params_text)
    if not raw_params:
        raise BackendError(
            f"kernel {fn.name} takes no parameters, so a harness cannot feed it inputs; pass the arrays as "
            f"parameters (e.g. `void {fn.name}(const elem_t A[M][K], elem_t C[M][N])`) or mark the kernel "
            f"inside a test program with `// SUBSTITUTE HERE` / `// SUBSTITUTE END`"
        )
    defines = _defines(text)
    parsed = [parse_param(p, fn.name) for p in raw_params]
    names = [p[0] for p in parsed]
    body = fn.body(clean)
    params: list[ArrayParam] = []
    for name, ctype, dims, const in parsed:
        size, kind = ELEMENT_TYPES[ctype]
        shape_vals = [eval_dim(d, defines) for d in dims]
        shape = tuple(v for v in shape_vals if v is not None) if all(v is not None for v in shape_vals) else None
        if shape is not None and any(v <= 0 for v in shape):
            raise BackendError(f"kernel {fn.name}: parameter `{name}` has a non-positive dimension {dims}")
        output = (not const) and _written(name, body, names)
        params.append(ArrayParam(name, ctype, dims, const, output, size, kind, shape))
    sig = Signature(fn.name, return_type, params)
    if not sig.outputs:
        # Nothing visibly written: every non-const array might be, so compare them all.
        sig = sig.reclassified({p.name for p in params if not p.const})
    if not sig.outputs:
        raise BackendError(
            f"kernel {fn.name}: every array parameter is const, so it has no output to check; drop `const` "
            f"from the arrays it writes"
        )
    return sig
