"""The instructions (``nki.isa``): one function per hardware instruction.

Each function serves both API styles: the current ``nki`` API passes the destination as
``dst`` (first argument) and returns nothing; the older ``neuronxcc.nki`` API returns a new
tile. ``_output`` enforces the difference so that mixing styles is an error with a clear
message. Every instruction checks its operands' buffers and shapes against the NeuronCore
limits, computes in float32 with NumPy over the whole tile, rounds on the store, and
appends one :class:`Instr` to the trace.
"""

from __future__ import annotations

from typing import Any, Callable

import math

import numpy as np

from autocomp.backends.nki.interp import core
from autocomp.backends.nki.interp.core import LIMITS, STATE, Tensor, fail, free_size, read, record

F32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------- ops
class Op:
    """A math operator usable as ``op=`` (nl.add, nl.exp, np.add, …).

    In the older API the same object is also callable as the functional ``nl.add(x, y)``;
    ``language.py`` gives it that behaviour through ``call``.
    """

    def __init__(self, name: str, fn: Callable[..., np.ndarray], arity: int, engine: str = "vector",
                 call: Callable[..., Any] | None = None) -> None:
        self.name = name
        self.fn = fn
        self.arity = arity
        self.engine = engine
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._call is None:
            raise fail("bad-call", f"nl.{self.name} is an operator identifier here; pass it as op=nl.{self.name}")
        return self._call(*args, **kwargs)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))).astype(np.float32)


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf, otypes=[np.float32])(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1.0 / np.sqrt(x)).astype(np.float32)


def _gelu_tanh_dx(x: np.ndarray) -> np.ndarray:
    """Derivative of the tanh-form gelu above (the one nl.gelu computes here)."""
    c, k = 0.7978845608028654, 0.044715
    t = np.tanh(c * (x + k * x**3))
    return (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * k * x * x)).astype(np.float32)


def _gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    return (x * _sigmoid(1.702 * x)).astype(np.float32)


def _gelu_sigmoid_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(1.702 * x)
    return (s + 1.702 * x * s * (1.0 - s)).astype(np.float32)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return (s * (1.0 + x * (1.0 - s))).astype(np.float32)


def _erf_dx(x: np.ndarray) -> np.ndarray:
    return (1.1283791670955126 * np.exp(-x * x)).astype(np.float32)


def _mish(x: np.ndarray) -> np.ndarray:
    return (x * np.tanh(np.logaddexp(0, x))).astype(np.float32)


# Bitvec operators treat elements as integer bit patterns (NKI ISA reference). The
# interpreter carries tile values as fp32 through its elementwise paths, which holds every
# integer below 2**24 exactly: within that range these are exact, beyond it they refuse.
_BITVEC_EXACT = float(1 << 24)


def _as_bits(*xs: Any) -> list[np.ndarray]:
    out = []
    for x in xs:
        a = np.asarray(x, dtype=np.float64)
        if a.size and (not np.all(np.isfinite(a)) or np.max(np.abs(a)) >= _BITVEC_EXACT or np.any(a != np.trunc(a))):
            raise fail("bitvec-range", "a bitwise operator got a value that is not an integer below 2**24; the "
                       "interpreter computes bitvec operators exactly only there (use integer tiles of small values)")
        out.append(a.astype(np.int64))
    return out


def _bitvec(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def op(a: np.ndarray, b: Any) -> np.ndarray:
        x, y = _as_bits(a, b)
        return fn(x, y).astype(np.float32)
    return op


def _invert(x: np.ndarray) -> np.ndarray:
    (a,) = _as_bits(x)
    return np.invert(a).astype(np.float32)


UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    # name: (function, engine). Transcendentals run on ScalarE's activation tables.
    "exp": (np.exp, "scalar"),
    "log": (np.log, "scalar"),
    "sqrt": (np.sqrt, "scalar"),
    "rsqrt": (_rsqrt, "scalar"),
    "tanh": (np.tanh, "scalar"),
    "sigmoid": (_sigmoid, "scalar"),
    "relu": (lambda x: np.maximum(x, 0), "scalar"),
    "gelu": (_gelu_tanh, "scalar"),
    "gelu_apprx_tanh": (_gelu_tanh, "scalar"),
    "silu": (lambda x: x * _sigmoid(x), "scalar"),
    "softplus": (lambda x: np.logaddexp(0, x).astype(np.float32), "scalar"),
    "erf": (_erf, "scalar"),
    "sin": (np.sin, "scalar"),
    "cos": (np.cos, "scalar"),
    "square": (np.square, "scalar"),
    "copy": (lambda x: x, "scalar"),
    "identity": (lambda x: x, "scalar"),
    "abs": (np.abs, "vector"),
    "negative": (np.negative, "vector"),
    "reciprocal": (lambda x: np.divide(1.0, x, dtype=np.float32), "vector"),
    "sign": (np.sign, "vector"),
    "floor": (np.floor, "vector"),
    "ceil": (np.ceil, "vector"),
    "trunc": (np.trunc, "vector"),
    "tan": (np.tan, "scalar"),
    "arctan": (np.arctan, "scalar"),
    "gelu_dx": (_gelu_tanh_dx, "scalar"),
    "gelu_apprx_sigmoid": (_gelu_sigmoid, "scalar"),
    "gelu_apprx_sigmoid_dx": (_gelu_sigmoid_dx, "scalar"),
    "silu_dx": (_silu_dx, "scalar"),
    "erf_dx": (_erf_dx, "scalar"),
    "mish": (_mish, "scalar"),
    "logical_not": (lambda x: (x == 0).astype(np.float32), "vector"),
    "invert": (_invert, "vector"),
}

BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "mod": np.mod,
    "fmod": np.fmod,  # (nl.fmod: the remainder with the dividend's sign, as C's fmod; nl.mod takes the divisor's)
    "equal": lambda a, b: (a == b).astype(np.float32),
    "not_equal": lambda a, b: (a != b).astype(np.float32),
    "greater": lambda a, b: (a > b).astype(np.float32),
    "greater_equal": lambda a, b: (a >= b).astype(np.float32),
    "less": lambda a, b: (a < b).astype(np.float32),
    "less_equal": lambda a, b: (a <= b).astype(np.float32),
    "logical_and": lambda a, b: np.logical_and(a, b).astype(np.float32),
    "logical_or": lambda a, b: np.logical_or(a, b).astype(np.float32),
    "logical_xor": lambda a, b: np.logical_xor(a, b).astype(np.float32),
    "bitwise_and": _bitvec(np.bitwise_and),
    "bitwise_or": _bitvec(np.bitwise_or),
    "bitwise_xor": _bitvec(np.bitwise_xor),
    "left_shift": _bitvec(np.left_shift),
    "right_shift": _bitvec(np.right_shift),
}

# The bitvec operators (integer bit patterns; the rest are arithmetic on fp32 values).
BITVEC = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert"})

_REDUCE_IDENTITY = {"add": 0.0, "maximum": -np.inf, "minimum": np.inf, "multiply": 1.0}

REDUCE: dict[str, Callable[..., np.ndarray]] = {
    "add": np.sum,
    "maximum": np.max,
    "minimum": np.min,
    "multiply": np.prod,
}
_REDUCE_ALIASES = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "amax": "maximum", "amin": "minimum"}

OP_OBJECTS: dict[str, Op] = {}


def _numpy_name(op: Any) -> str | None:
    name = getattr(op, "__name__", None)
    if isinstance(op, np.ufunc) or name in ("sum", "max", "min", "prod", "amax", "amin", "exp", "tanh", "log", "sqrt", "copy"):
        return name
    return None


def _abs_op(a: np.ndarray, b: Any) -> np.ndarray:
    return np.abs(a)


def binop(op: Any, call: str) -> Op:
    if isinstance(op, Op) and op.name in BINARY:
        return op
    name = op.name if isinstance(op, Op) else (op if isinstance(op, str) else _numpy_name(op))
    if name in ("abs", "absolute"):
        # The VectorE ALU's abs (AWS's rmsnorm_quant kernel uses it as tensor_scalar's op0):
        # |data|, the scalar operand unused.
        return Op("abs", _abs_op, 2)
    name = op if isinstance(op, str) else _numpy_name(op)
    name = _REDUCE_ALIASES.get(name, name)
    if name == "true_divide":
        name = "divide"
    if name in BINARY:
        return OP_OBJECTS.get(name) or Op(name, BINARY[name], 2)
    raise fail("bad-op", f"{op!r} is not a binary operator NKI supports (nl.add, nl.subtract, nl.multiply, nl.divide, nl.maximum, nl.minimum, …)", call)


def unop(op: Any, call: str) -> Op:
    if isinstance(op, Op) and op.name in UNARY:
        return op
    name = op if isinstance(op, str) else _numpy_name(op)
    if name in UNARY:
        return OP_OBJECTS.get(name) or Op(name, UNARY[name][0], 1, UNARY[name][1])
    raise fail("bad-op", f"{op!r} is not an activation function NKI supports (nl.exp, nl.tanh, nl.rsqrt, nl.copy, …)", call)


def redop(op: Any, call: str) -> str:
    name = op.name if isinstance(op, Op) else (op if isinstance(op, str) else _numpy_name(op))
    name = _REDUCE_ALIASES.get(name, name)
    if name in REDUCE:
        return name
    raise fail("bad-op", f"{op!r} is not a reduction operator (use nl.add, nl.maximum, nl.minimum, nl.multiply)", call)


# ---------------------------------------------------------------------------- engines
class _EngineIds:
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    unknown = None
    activation = "scalar"
    pool = "gpsimd"


engine = _EngineIds()


def _engine(value: Any, default: str, allowed: tuple[str, ...], call: str) -> str:
    if value is None:
        return default
    value = str(value)
    if value not in allowed:
        raise fail("bad-engine", f"engine={value} is not available for this instruction (allowed: {', '.join(allowed)})", call)
    return value


# ---------------------------------------------------------------------------- helpers
def _style() -> str:
    return STATE.style or "new"


def _output(dst: Any, shape: tuple[int, ...], dtype: Any, call: str, buffer: str = "sbuf",
            allowed: tuple[str, ...] = ("sbuf", "psum")) -> Tensor:
    """The destination view: ``dst`` in the nki API, a new tile in the older API."""
    if _style() == "new":
        if dst is None:
            raise fail("missing-dst", f"{call} needs dst=<tile> in the `nki` API (it returns nothing); "
                       "the form returning a tile belongs to the older neuronxcc.nki API", call, static=True)
        dst = core.require_tensor(dst, "dst", call)
        if dst._alloc.buffer not in allowed:
            raise fail("buffer", f"dst is in {dst._alloc.buffer}; {call} writes only to {' or '.join(allowed)}", call,
                       "no compute on HBM" if dst.is_hbm else "")
        if tuple(dst.shape) != tuple(shape) and free_size(dst.shape) != free_size(shape) or (dst.shape and shape and dst.shape[0] != shape[0]):
            raise fail("shape-mismatch", f"dst has shape {dst.shape} but the result has shape {shape}", call)
        return dst
    if dst is not None:
        raise fail("mixed-api", f"{call}(dst=...) is the `nki` API form; in neuronxcc.nki the instruction returns its result tile",
                   call, static=True)
    dt = core.as_dtype(dtype, call) if dtype is not None else F32
    t = core.new_tensor(shape, dt, buffer, call=call, count=buffer != "psum")
    t._fresh = True
    return t


def _on_chip(t: Any, what: str, call: str, allow_psum: bool = True) -> Tensor:
    t = core.require_tensor(t, what, call)
    if t.is_hbm:
        raise fail("compute-on-hbm", f"{what} is an HBM tensor; compute engines read only SBUF/PSUM — load it first "
                   "(nisa.dma_copy / nl.load)", call, "no compute directly on HBM")
    if not allow_psum and t._alloc.buffer == "psum":
        raise fail("buffer", f"{what} is in PSUM; {call} reads only SBUF", call)
    return t


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32, copy=False) if x.dtype != F32 else x


def _consume(*ts: Any) -> None:
    for t in ts:
        if isinstance(t, Tensor):
            t._fresh = False


def _write(out: Tensor, values: np.ndarray, mask: Any = None) -> None:
    if mask is not None and STATE.style == "new":
        raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", static=True)
    out._store(values, None if mask is None else np.asarray(mask, dtype=bool))


def _operand(x: Any, p: int, what: str, call: str) -> tuple[np.ndarray | float, Tensor | None]:
    """A scalar operand: a Python number, or a (P, 1) tile broadcast along the free dims."""
    if isinstance(x, Tensor):
        _on_chip(x, what, call)
        if x.shape[0] != p or free_size(x.shape) != 1:
            raise fail("shape-mismatch", f"{what} has shape {x.shape}; a per-partition operand must be ({p}, 1)", call)
        return _f32(read(x, what, call)).reshape(p, 1), x
    if isinstance(x, (int, float, np.integer, np.floating)):
        return float(x), None
    raise fail("bad-operand", f"{what} must be a number or a ({p}, 1) tile, got {type(x).__name__}", call)


def _bcast_free(v: np.ndarray | float, shape: tuple[int, ...]) -> np.ndarray | float:
    """A per-partition (P, 1) operand shaped to broadcast along the free axes of ``shape``."""
    if isinstance(v, np.ndarray) and len(shape) != 2:
        return v.reshape((shape[0],) + (1,) * (len(shape) - 1))
    return v


def _dtype_bytes(*ts: Any) -> int:
    return max([t.dtype.itemsize for t in ts if isinstance(t, Tensor)] or [4])


# ---------------------------------------------------------------------------- DMA
def _contiguous_bytes(t: Tensor) -> int:
    """Length of the contiguous runs a DMA moves on the HBM side of a transfer."""
    itemsize = t.dtype.itemsize
    if t._key is not None:
        return itemsize * (t.shape[-1] if t.shape else 1)
    run = itemsize
    for size, stride in zip(reversed(t._data.shape), reversed(t._data.strides)):
        if size == 1:
            continue
        if stride != run:
            break
        run *= size
    return max(run, itemsize)


import types as _types

# ``nisa.oob_mode``: what a DMA does with elements whose index falls outside the tensor.
oob_mode = _types.SimpleNamespace(error="error", skip="skip")
dge_mode = _types.SimpleNamespace(none="none", swdge="swdge", hwdge="hwdge", unknown="unknown")
matmul_perf_mode = _types.SimpleNamespace(none=None, double_row="double_row")


def dma_copy(dst: Any = None, src: Any = None, *, mask: Any = None, dge_mode: Any = None, name: str = "",
             call: str = "nisa.dma_copy", transpose: bool = False, oob_mode: Any = None, dst_rmw_op: Any = None,
             unique_indices: bool = True, dtype: Any = None) -> None:
    """Copy between HBM and SBUF (or SBUF to SBUF). DMA engines cannot reach PSUM.
    ``oob_mode=nisa.oob_mode.skip`` leaves elements indexed out of bounds (on either side)
    untouched instead of failing. ``dst_rmw_op=nl.add`` (the only one NKI 2.x supports)
    accumulates: ``dst = dst + src`` in fp32, rounded to dst's dtype. ``dge_mode`` (which
    engine generates the descriptors) changes neither the result nor this model's cost."""
    if dst_rmw_op is not None and binop(dst_rmw_op, call).name != "add":
        raise fail("bad-op", f"dst_rmw_op={dst_rmw_op!r}: DMA read-modify-write supports only nl.add", call)
    dst = core.require_tensor(dst, "dst", call)
    src = core.require_tensor(src, "src", call)
    if oob_mode == "skip" and (src._valid is not None or dst._valid is not None):
        ok = np.ones(dst.shape, dtype=bool)
        for t in (src, dst):
            if t._valid is not None:
                v = np.broadcast_to(t._valid, t.shape)
                ok &= v.reshape(dst.shape) if v.size == ok.size else np.broadcast_to(v, dst.shape)
        mask = ok if mask is None else (np.broadcast_to(np.asarray(mask, dtype=bool), dst.shape) & ok)
        if STATE.style == "new":  # the skip mask is internal, not the older API's mask=
            saved, STATE.style = STATE.style, "old"
            try:
                return dma_copy(dst, src, mask=mask, call=call, transpose=transpose, dst_rmw_op=dst_rmw_op)
            finally:
                STATE.style = saved
    for t, what in ((dst, "dst"), (src, "src")):
        if t._alloc.buffer == "psum":
            raise fail("dma-psum", f"{what} is in PSUM; DMA engines move data between HBM and SBUF only — copy PSUM to SBUF "
                       "first (nisa.tensor_copy / nl.copy)", call, "DMA endpoints: HBM and SBUF")
    values = read(src, "src", call, mask=mask)
    whole = src._valid is None and src._all_written()
    # Which source elements hold data: needed only when some do not (a hot path otherwise).
    defined = None if whole else src._written_mask()
    if defined is not None and src._valid is not None:
        defined = defined & np.broadcast_to(src._valid, defined.shape)
    if transpose:
        if values.ndim != 2:
            raise fail("shape-mismatch", f"a 2-D transposing load needs a 2-D source, got {values.shape}", call)
        values = values.T
        defined = None if defined is None else defined.T
    if tuple(values.shape) != tuple(dst.shape):
        if values.size == math.prod(dst.shape) and (values.ndim == 0 or dst.ndim == 0):
            values = values.reshape(dst.shape)
            defined = None if defined is None else defined.reshape(dst.shape)
        elif values.size == math.prod(dst.shape) and values.shape and dst.shape and values.shape[0] == dst.shape[0]:
            values = values.reshape(dst.shape)
        else:
            raise fail("shape-mismatch", f"dst has shape {dst.shape} but src has shape {values.shape}", call)
    if dst.on_chip and dst.shape and dst.shape[0] > LIMITS["pmax"]:
        raise fail("partition-limit", f"DMA into an on-chip view of {dst.shape[0]} partitions", call, "partition dimension <= 128")
    hbm_side = src if src.is_hbm else dst
    chip_side = dst if dst.on_chip else src
    nbytes = int(values.size) * max(src.dtype.itemsize, dst.dtype.itemsize)
    chunk = src.dtype.itemsize if transpose else _contiguous_bytes(hbm_side)
    if mask is not None and STATE.style == "new":
        raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", static=True)
    # Only what the source holds becomes written: the unwritten rows of a masked tail tile
    # stay unwritten in HBM, so the output check still sees them.
    if defined is not None and not defined.all():
        defined = defined.reshape(dst.shape)
        mask = defined if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), dst.shape) & defined
    reads = [src]
    if dst_rmw_op is not None:
        if not dst._all_written():
            raise fail("uninitialized-read", "dst_rmw_op adds into dst, which holds elements no instruction wrote", call)
        values = _f32(read(dst, "dst", call)) + _f32(np.asarray(values)).reshape(dst.shape)
        reads.append(dst)
    dst._store(values, None if mask is None else np.asarray(mask, dtype=bool))
    _consume(src)
    record("dma_copy" if not transpose else "dma_transpose", "dma", chip_side.shape[0] if chip_side.shape else 1,
           free_size(chip_side.shape), max(src.dtype.itemsize, dst.dtype.itemsize), reads, [dst],
           bytes=nbytes, chunk_bytes=int(min(chunk, nbytes)))


# ---------------------------------------------------------------------------- TensorE
def _psum_to_sbuf(t: Tensor, call: str) -> Tensor:
    """A matmul operand in PSUM: the older API's compiler first copies it to SBUF (one
    VectorE copy); the ``nki`` API, which has no such pass, refuses it."""
    if t._alloc.buffer != "psum":
        return t
    if _style() == "new":
        raise fail("buffer", f"a matmul operand is in PSUM; {call} reads only SBUF (copy it with nisa.tensor_copy)", call,
                   "matmul operands in SBUF")
    out = core.new_tensor(t.shape, t.dtype, "sbuf", call=call, count=False)
    out._store(read(t, "operand", call))
    record("tensor_copy", "vector", t.shape[0], free_size(t.shape), t.dtype.itemsize, [t], [out])
    return out


def _matmul_operands(stationary: Any, moving: Any, call: str, rows: int = 1) -> tuple[Tensor, Tensor, int, int, int]:
    s = _psum_to_sbuf(_on_chip(stationary, "stationary", call), call)
    m = _psum_to_sbuf(_on_chip(moving, "moving", call), call)
    if s.shape[0] != m.shape[0]:
        raise fail("shape-mismatch", f"stationary {s.shape} and moving {m.shape} must share the partition (contraction) dimension", call)
    k = s.shape[0]
    mfree, nfree = free_size(s.shape) // rows, free_size(m.shape) // rows
    if k > LIMITS["pmax"]:
        raise fail("matmul-limit", f"contraction (partition) size {k}", call, "matmul contraction <= 128 partitions")
    if mfree > LIMITS["stationary_fmax"]:
        raise fail("matmul-limit", f"stationary tile {s.shape} has free size {mfree}", call, "stationary <= 128x128 (free size <= 128)")
    if nfree > LIMITS["moving_fmax"]:
        raise fail("matmul-limit", f"moving tile {m.shape} has free size {nfree}", call, "moving <= 128x512 (free size <= 512)")
    return s, m, k, mfree, nfree


def _all_plus_zero(x: np.ndarray) -> bool:
    """Whether every element of the fp32 array ``x`` is +0.0 (all 32 bits clear): a NaN,
    an infinity or a -0.0 is not. Rejects at the first element when that one is not."""
    bits = x.view(np.uint32)
    return not bits.item(0) and not np.count_nonzero(bits)


def _product(sv: np.ndarray, mv: np.ndarray) -> np.ndarray:
    """``sv.T @ mv`` in fp32, bit for bit. When both operands are all +0.0 every product is
    +0.0 and so is every sum of them, in any order and with or without fused multiply-adds,
    so the result is zeros without the multiplication (about 0.2 ms a 128x128x512 tile, the
    larger part of a GEMM's run; AWS's tutorial shapes load zeros at published sizes). The
    test costs a few microseconds and stops at the first element of a tile that is not
    +0.0; anything else (a -0.0 included) goes through the product itself."""
    if _all_plus_zero(sv) and _all_plus_zero(mv):
        return np.zeros((sv.shape[1], mv.shape[1]), dtype=F32)
    return sv.T @ mv


def nc_matmul(dst: Any = None, stationary: Any = None, moving: Any = None, *, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, accumulate: bool | None = None,
              tile_position: Any = (), tile_size: Any = (), perf_mode: Any = None, mask: Any = None,
              name: str = "", call: str = "nisa.nc_matmul") -> Tensor | None:
    """dst = stationary.T @ moving on TensorE: operands in SBUF, fp32 result in PSUM.

    ``perf_mode`` double row (NeuronCore-v3+, FP8): both operands are (K, 2, F) and the
    contraction runs over K and the row pair, 2K deep in one pass at the rate of one."""
    rows = 1
    if perf_mode is not None and "double_row" in str(getattr(perf_mode, "value", perf_mode)):
        rows = 2
        for name, t in (("stationary", stationary), ("moving", moving)):
            shp = getattr(t, "shape", ())
            if len(shp) != 3 or shp[1] != 2:
                raise fail("shape-mismatch", f"double-row {name} must be (K, 2, F), got {shp}", call,
                           "double_row perf_mode operands (K, 2, F)")
    s, m, k, mfree, nfree = _matmul_operands(stationary, moving, call, rows)
    if rows == 2:
        k2 = 2 * k
        sv = _f32(read(s, "stationary", call)).reshape(k2, mfree)
        mv = _f32(read(m, "moving", call)).reshape(k2, nfree)
    else:
        sv = _f32(read(s, "stationary", call)).reshape(k, mfree)
        mv = _f32(read(m, "moving", call)).reshape(k, nfree)
    result = _product(sv, mv)
    if dst is None and mask is None and not accumulate and _style() == "old":
        # The older API's fresh PSUM result holds the product itself (a new array nothing
        # else references), not a copy of it: what _output and _write below would make.
        result = np.ascontiguousarray(result)
        out = core.new_tensor((mfree, nfree), F32, "psum", call=call, count=False, data=result)
        out._fresh = True
        accumulate = False
    else:
        out = _output(dst, (mfree, nfree), F32, call, buffer="psum", allowed=("psum",))
    if out._alloc.buffer != "psum":
        raise fail("buffer", "nc_matmul writes its result to PSUM", call, "matmul result in PSUM")
    if free_size(out.shape) * out.dtype.itemsize > LIMITS["psum_tile_bytes_per_partition"]:
        raise fail("psum-tile-limit", f"result {out.shape}", call, "PSUM tile <= 2 KiB per partition")
    acc = accumulate
    if acc is None:
        acc = _style() == "new" and bool(out._written_mask().all())
    if acc:
        prev = _f32(read(out, "dst (accumulate)", call))
        result = prev + result.reshape(prev.shape)
    if out._data is not result:
        _write(out, result.reshape(out.shape), mask)
    _consume(s, m)
    idx = record("nc_matmul", "tensor", k, nfree, max(s.dtype.itemsize, m.dtype.itemsize), [s, m] + ([out] if acc else []), [out],
                 stationary_free=mfree)
    if accumulate is None and _style() == "new":
        core.accumulation_group(idx)
    if _style() == "old":
        out._from_te = True
        out._producer = idx
        return out
    return None


def nc_transpose(dst: Any = None, data: Any = None, *, engine: Any = None, mask: Any = None, dtype: Any = None,
                 name: str = "", call: str = "nisa.nc_transpose") -> Tensor | None:
    """Swap the partition and free axes of a 2-D tile (TensorE, or VectorE for <= 32x32)."""
    t = _on_chip(data, "data", call)
    if t.ndim != 2:
        raise fail("shape-mismatch", f"nc_transpose needs a 2-D tile, got {t.shape}", call)
    p, f = t.shape
    eng = _engine(engine, "tensor", ("tensor", "vector"), call)
    if eng == "tensor":
        if t._alloc.buffer != "sbuf":
            raise fail("buffer", "TensorE transpose reads SBUF", call)
        if p > 128 or f > 128:
            raise fail("matmul-limit", f"TensorE transpose of {t.shape}", call, "transpose tile <= 128x128")
    elif p > 128 or f > 128:
        raise fail("transpose-limit", f"VectorE transpose of {t.shape}", call, "VectorE transpose <= 128x128 (in 32x32 blocks)")
    values = _f32(read(t, "data", call)).T
    out = _output(dst, (f, p), dtype or (F32 if eng == "tensor" else t.dtype), call,
                  buffer="psum" if eng == "tensor" else "sbuf",
                  allowed=("psum",) if eng == "tensor" else ("sbuf", "psum"))
    _write(out, values, mask)
    _consume(t)
    # VectorE transposes 32x32 blocks, one pass per block row of 32 partitions.
    idx = record("nc_transpose", eng, p, f * -(-p // 32) if eng == "vector" else p, t.dtype.itemsize, [t], [out],
                 **({"stationary_free": f} if eng == "tensor" else {}))
    if out._fresh:
        out._from_te = eng == "tensor"
        out._producer = idx
        return out
    return None


# ---------------------------------------------------------------------------- Vector/Scalar/GpSimd
def _elementwise_shape(a: Tensor, b: Tensor, call: str) -> tuple[int, ...]:
    if a.shape[0] == b.shape[0] and free_size(b.shape) == 1 and free_size(a.shape) > 1:
        return a.shape  # a (P, 1) column broadcast along the free axis (AWS's reference kernels do this)
    if a.shape[0] != b.shape[0] or free_size(a.shape) != free_size(b.shape):
        raise fail("shape-mismatch", f"data1 {a.shape} and data2 {b.shape} must have the same partitions and elements per partition", call)
    return a.shape


def _as_operand(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if values.size == shape[0] and values.size != math.prod(shape):
        return values.reshape((shape[0],) + (1,) * (len(shape) - 1))
    return values.reshape(shape)


def tensor_tensor(dst: Any = None, data1: Any = None, data2: Any = None, op: Any = None, *, engine: Any = None,
                  dtype: Any = None, mask: Any = None, name: str = "", call: str = "nisa.tensor_tensor") -> Tensor | None:
    a = _on_chip(data1, "data1", call)
    b = _on_chip(data2, "data2", call)
    if a._alloc.buffer == "psum" and b._alloc.buffer == "psum":
        raise fail("buffer", "data1 and data2 are both in PSUM; at most one tensor_tensor input may be in PSUM", call)
    o = binop(op, call)
    shape = _elementwise_shape(a, b, call)
    eng = _engine(engine, "gpsimd" if o.name == "power" else "vector", ("vector", "gpsimd"), call)
    with np.errstate(all="ignore"):
        values = o.fn(_f32(read(a, "data1", call, mask)), _as_operand(_f32(read(b, "data2", call, mask)), shape))
    out = _output(dst, shape, dtype or _wider(a, b), call)
    _write(out, values, mask)
    _consume(a, b)
    record("tensor_tensor", eng, shape[0], free_size(shape), _dtype_bytes(a, b, out), [a, b], [out], op=o.name)
    return out if out._fresh else None


def _wider(a: Tensor, b: Tensor) -> np.dtype:
    return a.dtype if a.dtype.itemsize >= b.dtype.itemsize else b.dtype


def tensor_scalar(dst: Any = None, data: Any = None, op0: Any = None, operand0: Any = None, reverse0: bool = False,
                  op1: Any = None, operand1: Any = None, reverse1: bool = False, *, engine: Any = None, dtype: Any = None,
                  mask: Any = None, name: str = "", call: str = "nisa.tensor_scalar") -> Tensor | None:
    t = _on_chip(data, "data", call)
    p = t.shape[0]
    eng = _engine(engine, "vector", ("vector", "scalar", "gpsimd"), call)
    x = _f32(read(t, "data", call, mask))
    with np.errstate(all="ignore"):
        v0, t0 = _operand(operand0, p, "operand0", call)
        o0 = binop(op0, call)
        x = o0.fn(_bcast_free(v0, x.shape), x) if reverse0 else o0.fn(x, _bcast_free(v0, x.shape))
        t1 = None
        if op1 is not None:
            v1, t1 = _operand(operand1, p, "operand1", call)
            o1 = binop(op1, call)
            x = o1.fn(_bcast_free(v1, x.shape), x) if reverse1 else o1.fn(x, _bcast_free(v1, x.shape))
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, x, mask)
    _consume(t, t0, t1)
    record("tensor_scalar", eng, p, free_size(t.shape), _dtype_bytes(t, out), [t] + [z for z in (t0, t1) if z is not None], [out])
    return out if out._fresh else None


def scalar_tensor_tensor(dst: Any = None, data: Any = None, op0: Any = None, operand0: Any = None, op1: Any = None,
                         operand1: Any = None, *, reverse0: bool = False, reverse1: bool = False, engine: Any = None,
                         dtype: Any = None, mask: Any = None, name: str = "", call: str = "nisa.scalar_tensor_tensor") -> Tensor | None:
    """(data op0 operand0) op1 operand1 in one VectorE pass; operand1 is a full tile."""
    t = _on_chip(data, "data", call)
    b = _on_chip(operand1, "operand1", call)
    shape = _elementwise_shape(t, b, call)
    v0, t0 = _operand(operand0, t.shape[0], "operand0", call)
    with np.errstate(all="ignore"):
        x = _f32(read(t, "data", call, mask))
        o0, o1 = binop(op0, call), binop(op1, call)
        x = o0.fn(_bcast_free(v0, x.shape), x) if reverse0 else o0.fn(x, _bcast_free(v0, x.shape))
        y = _f32(read(b, "operand1", call, mask)).reshape(x.shape)
        x = o1.fn(y, x) if reverse1 else o1.fn(x, y)
    out = _output(dst, shape, dtype or t.dtype, call)
    _write(out, x, mask)
    _consume(t, b, t0)
    record("scalar_tensor_tensor", "vector", shape[0], free_size(shape), _dtype_bytes(t, b, out), [t, b] + ([t0] if t0 is not None else []), [out])
    return out if out._fresh else None


def _free_axes(axis: Any, ndim: int, call: str) -> tuple[int, ...]:
    if axis is None:
        raise fail("reduce-axis", "give axis= (free axes only, e.g. axis=1)", call)
    axes = tuple(a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if 0 in axes:
        raise fail("reduce-axis", "reduction along the partition axis (axis 0) is not supported on VectorE; use "
                   "nisa.tensor_partition_reduce or a matmul with a ones vector", call, "reduce over free axes only")
    return axes


def tensor_reduce(dst: Any = None, op: Any = None, data: Any = None, axis: Any = None, *, negate: bool = False,
                  keepdims: bool = False, dtype: Any = None, mask: Any = None, name: str = "",
                  call: str = "nisa.tensor_reduce") -> Tensor | None:
    t = _on_chip(data, "data", call)
    name_ = redop(op, call)
    axes = _free_axes(axis, t.ndim, call)
    x = _f32(read(t, "data", call, mask))
    values = REDUCE[name_](x, axis=axes, keepdims=True).astype(np.float32)
    if negate:
        values = -values
    shape = values.shape if keepdims or _style() == "new" else tuple(s for i, s in enumerate(values.shape) if i not in axes)
    if _style() == "new" and dst is not None and isinstance(dst, Tensor):
        shape = dst.shape if free_size(dst.shape) == free_size(values.shape) else shape
    out = _output(dst, shape if len(shape) else (t.shape[0], 1), dtype or t.dtype, call)
    _write(out, values.reshape(out.shape), None)
    _consume(t)
    record("tensor_reduce", "vector", t.shape[0], free_size(t.shape), _dtype_bytes(t), [t], [out], op=name_)
    return out if out._fresh else None


def tensor_partition_reduce(dst: Any = None, op: Any = None, data: Any = None, *, dtype: Any = None, mask: Any = None,
                            name: str = "", call: str = "nisa.tensor_partition_reduce") -> Tensor | None:
    t = _on_chip(data, "data", call)
    name_ = redop(op, call)
    values = REDUCE[name_](_f32(read(t, "data", call)), axis=0, keepdims=True).astype(np.float32)
    out = _output(dst, values.shape, dtype or t.dtype, call)
    _write(out, values, mask)
    _consume(t)
    record("tensor_partition_reduce", "gpsimd", t.shape[0], free_size(t.shape), _dtype_bytes(t), [t], [out], op=name_)
    return out if out._fresh else None


def activation(dst: Any = None, op: Any = None, data: Any = None, bias: Any = None, scale: Any = 1.0, *,
               reduce_op: Any = None, reduce_res: Any = None, reduce_cmd: Any = None, dtype: Any = None, mask: Any = None,
               name: str = "", call: str = "nisa.activation") -> Tensor | None:
    """op(data * scale + bias) on ScalarE; optionally also reduce the result along the free axes.
    ``bias`` is a per-partition vector tile or None: the compiler refuses a scalar bias
    (``err_activation_bias_invalid_type``), where ``scale`` may be either."""
    if bias is not None and not isinstance(bias, Tensor):
        raise fail("bad-operand", f"bias must be a vector tile (float32, float16 or bfloat16, one value per partition) or "
                   f"None, got {type(bias).__name__}; the Neuron compiler refuses a scalar bias: pass a (P, 1) tile "
                   "(nl.full((P, 1), value, dtype=nl.float32)) or add the constant with nl.add", call)
    if isinstance(bias, Tensor) and core.dtype_name(bias.dtype) not in ("float32", "float16", "bfloat16"):
        raise fail("bad-operand", f"bias must be float32, float16 or bfloat16, got {core.dtype_name(bias.dtype)}", call)
    t = _on_chip(data, "data", call)
    f = unop(op, call)
    p = t.shape[0]
    x = _f32(read(t, "data", call, mask))
    sc, st = _operand(scale, p, "scale", call)
    reads = [t] + ([st] if st is not None else [])
    with np.errstate(all="ignore"):
        x = x * _bcast_free(sc, x.shape)
        if bias is not None:
            bv, bt = _operand(bias, p, "bias", call)
            x = x + _bcast_free(bv, x.shape)
            if bt is not None:
                reads.append(bt)
        y = f.fn(x).astype(np.float32)
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, y, mask)
    writes = [out]
    if reduce_res is not None:
        r = _on_chip(reduce_res, "reduce_res", call)
        rname = redop(reduce_op if reduce_op is not None else "add", call)
        if r.shape[0] != p or free_size(r.shape) != 1:
            raise fail("shape-mismatch", f"reduce_res must be ({p}, 1), got {r.shape}", call)
        r._store(REDUCE[rname](y.reshape(p, -1), axis=1, keepdims=True).reshape(r.shape))
        writes.append(r)
    _consume(*reads)
    record("activation", "scalar", p, free_size(t.shape), _dtype_bytes(t, out), reads, writes, func=f.name)
    return out if out._fresh else None


def activation_reduce(dst: Any = None, op: Any = None, data: Any = None, *, reduce_op: Any = None, reduce_res: Any = None,
                      bias: Any = None, scale: Any = 1.0, dtype: Any = None, mask: Any = None, name: str = "",
                      call: str = "nisa.activation_reduce") -> Tensor | None:
    if reduce_res is None:
        raise fail("missing-operand", "activation_reduce needs reduce_res=<(P,1) tile>", call)
    return activation(dst, op, data, bias, scale, reduce_op=reduce_op, reduce_res=reduce_res, dtype=dtype, mask=mask, call=call)


def tensor_copy(dst: Any = None, src: Any = None, *, engine: Any = None, dtype: Any = None, mask: Any = None,
                name: str = "", call: str = "nisa.tensor_copy") -> Tensor | None:
    t = _on_chip(src, "src", call)
    eng = _engine(engine, "vector", ("vector", "scalar", "gpsimd"), call)
    if eng == "gpsimd" and (t._alloc.buffer == "psum" or (isinstance(dst, Tensor) and dst._alloc.buffer == "psum")):
        raise fail("buffer", "GpSimdE cannot access PSUM", call)
    values = read(t, "src", call, mask)
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, _f32(values) if values.dtype != out.dtype else values, mask)
    _consume(t)
    record("tensor_copy", eng, t.shape[0], free_size(t.shape), _dtype_bytes(t, out), [t], [out])
    return out if out._fresh else None


def reciprocal(dst: Any = None, data: Any = None, *, dtype: Any = None, mask: Any = None, name: str = "",
               call: str = "nisa.reciprocal") -> Tensor | None:
    t = _on_chip(data, "data", call)
    with np.errstate(all="ignore"):
        values = np.divide(1.0, _f32(read(t, "data", call, mask)), dtype=np.float32)
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, values, mask)
    _consume(t)
    record("reciprocal", "vector", t.shape[0], free_size(t.shape), _dtype_bytes(t, out), [t], [out])
    return out if out._fresh else None


def memset(dst: Any = None, value: Any = 0.0, dtype: Any = None, *, shape: Any = None, engine: Any = None,
           mask: Any = None, name: str = "", call: str = "nisa.memset") -> Tensor | None:
    if shape is not None:  # older API: allocate a new tile of this shape
        out = _output(None, tuple(shape), dtype or F32, call)
    else:
        out = _output(dst, core.require_tensor(dst, "dst", call).shape, None, call)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise fail("bad-operand", "memset value must be a number", call)
    eng = _engine(engine, "vector", ("vector", "gpsimd"), call)
    _write(out, np.full(out.shape, float(value), dtype=np.float32), mask)
    record("memset", eng, *core.partitions_free(out), out.dtype.itemsize, [], [out])
    return out if out._fresh else None


def _is_pattern(x: Any) -> bool:
    """An access pattern ``[[step, num], ...]`` (NKI 2.x iota), not an index expression."""
    return (isinstance(x, (list, tuple)) and 0 < len(x) <= 4
            and all(isinstance(e, (list, tuple)) and len(e) == 2 and all(_is_int(v) for v in e) for e in x))


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _iota_pattern(dst: Any, pattern: Any, offset: Any, channel_multiplier: Any, call: str) -> tuple[tuple[int, ...], np.ndarray]:
    """NKI 2.x iota: ``offset + partition * channel_multiplier + sum(step_k * i_k)`` over the
    pattern's ``[[step, num], ...]`` (outermost first), in 32-bit integers, laid out in
    ``dst``'s free elements."""
    if not isinstance(dst, Tensor):
        raise fail("bad-operand", "iota with a pattern= writes into a dst tile (nisa.iota(dst=..., pattern=..., "
                   "offset=...))", call)
    if not _is_pattern(pattern):
        raise fail("bad-operand", f"pattern must be up to four [step, num] pairs, got {pattern!r}", call)
    if not _is_int(offset) or not _is_int(channel_multiplier):
        raise fail("bad-operand", "iota's offset and channel_multiplier are integers", call)
    counts = [int(n) for _, n in pattern]
    if math.prod(counts) != free_size(dst.shape):
        raise fail("shape-mismatch", f"pattern {pattern} makes {math.prod(counts)} elements per partition; dst "
                   f"{dst.shape} holds {free_size(dst.shape)}", call, "pattern size == dst elements per partition")
    values = np.full(counts, int(offset), dtype=np.int64)
    for axis, (step, n) in enumerate(pattern):
        shape = [1] * len(counts)
        shape[axis] = int(n)
        values = values + int(step) * np.arange(int(n), dtype=np.int64).reshape(shape)
    rows = np.arange(dst.shape[0], dtype=np.int64).reshape(-1, 1) * int(channel_multiplier)
    values = rows + values.reshape(1, -1)
    return dst.shape, values.astype(np.int32).reshape(dst.shape)  # (32-bit integer arithmetic wraps)


def iota(dst: Any = None, expr: Any = None, dtype: Any = None, *, pattern: Any = None, offset: Any = None,
         channel_multiplier: Any = 0, mask: Any = None, name: str = "", call: str = "nisa.iota") -> Tensor | None:
    """Fill a tile with integer indices (GpSimdE): from an index expression built from
    nl.arange / nl.mgrid, or (NKI 2.x) from an access ``pattern`` with an ``offset`` and a
    per-partition ``channel_multiplier``."""
    if pattern is None and _is_pattern(expr):  # nisa.iota(dst, [[1, n]], offset)
        pattern, expr = expr, None
        if offset is None and _is_int(dtype):
            offset, dtype = dtype, None
    if pattern is not None:
        shape, values = _iota_pattern(dst, pattern, 0 if offset is None else offset, channel_multiplier, call)
        out = _output(dst, shape, dtype or np.int32, call)
        _write(out, values.astype(np.float64), mask)
        record("iota", "gpsimd", shape[0], free_size(shape), out.dtype.itemsize, [], [out])
        return out if out._fresh else None
    values = np.asarray(expr)
    if values.dtype.kind not in "iu":
        raise fail("bad-operand", "iota needs an integer index expression (nl.arange / nl.mgrid arithmetic)", call)
    if values.ndim == 1:
        values = values[:, None]
    shape = dst.shape if isinstance(dst, Tensor) else values.shape
    values = np.broadcast_to(values, shape)
    out = _output(dst, shape, dtype or np.int32, call)
    _write(out, values.astype(np.float64), mask)
    record("iota", "gpsimd", shape[0], free_size(shape), out.dtype.itemsize, [], [out])
    return out if out._fresh else None


BN_STATS_FMAX = 512


def bn_stats(dst: Any = None, data: Any = None, *, dtype: Any = None, mask: Any = None, name: str = "",
             call: str = "nisa.bn_stats") -> Tensor | None:
    """Per-partition statistics of a (P, F <= 512) tile for nisa.bn_aggr (VectorE).

    The six values per partition are this interpreter's own encoding (count, mean, sum of
    squared deviations, then zeros); only bn_aggr should read them, as on hardware.
    """
    t = _on_chip(data, "data", call)
    f = free_size(t.shape)
    if f > BN_STATS_FMAX:
        raise fail("bn-stats-limit", f"data {t.shape} has {f} elements per partition", call,
                   f"bn_stats free size <= {BN_STATS_FMAX} (nl.tile_size.bn_stats_fmax)")
    # A mask predicates the instruction's input (the data elements it reads), as for every
    # instruction: the statistics cover the active elements; a partition with none active is
    # not written.
    active = None
    if mask is not None:
        try:
            active = np.broadcast_to(np.asarray(mask, dtype=bool), t.shape).reshape(t.shape[0], f)
        except ValueError:
            raise fail("shape-mismatch", f"mask {np.shape(mask)} does not fit data {t.shape}", call) from None
    x = _f32(read(t, "data", call, mask)).reshape(t.shape[0], f).astype(np.float64)
    count = np.full(t.shape[0], float(f)) if active is None else active.sum(axis=1).astype(np.float64)
    with np.errstate(all="ignore"):
        xs = x if active is None else np.where(active, x, 0.0)
        mean = xs.sum(axis=1) / np.maximum(count, 1)
        dev = (x - mean[:, None]) ** 2
        m2 = (dev if active is None else np.where(active, dev, 0.0)).sum(axis=1)
    stats = np.zeros((t.shape[0], 6), dtype=np.float64)
    stats[:, 0], stats[:, 1], stats[:, 2] = count, mean, m2
    out = _output(dst, (t.shape[0], 6), dtype or F32, call)
    rows = None if active is None else np.broadcast_to(active.any(axis=1)[:, None], (t.shape[0], 6))
    _write(out, stats.astype(np.float32), rows)
    _consume(t)
    record("bn_stats", "vector", t.shape[0], f, _dtype_bytes(t), [t], [out])
    return out if out._fresh else None


def bn_aggr(dst: Any = None, data: Any = None, *, dtype: Any = None, mask: Any = None, name: str = "",
            call: str = "nisa.bn_aggr") -> Tensor | None:
    """Combine bn_stats results (P, 6 * k) into (P, 2) = mean and (population) variance."""
    t = _on_chip(data, "data", call)
    f = free_size(t.shape)
    if f % 6:
        raise fail("shape-mismatch", f"bn_aggr expects bn_stats results (a multiple of 6 per partition), got {t.shape}", call)
    st = _f32(read(t, "data", call)).reshape(t.shape[0], f // 6, 6).astype(np.float64)
    n, mean, m2 = st[..., 0], st[..., 1], st[..., 2]
    total = n.sum(axis=1)
    if np.any(total <= 0):
        raise fail("bad-operand", "bn_aggr data holds no statistics (count 0); pass bn_stats results", call)
    gmean = (n * mean).sum(axis=1) / total
    var = (m2.sum(axis=1) + (n * (mean - gmean[:, None]) ** 2).sum(axis=1)) / total
    out = _output(dst, (t.shape[0], 2), dtype or F32, call)
    _write(out, np.stack([gmean, var], axis=1).astype(np.float32), mask)
    _consume(t)
    record("bn_aggr", "vector", t.shape[0], f, _dtype_bytes(t), [t], [out])
    return out if out._fresh else None


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "bn_stats": bn_stats,
    "bn_aggr": bn_aggr,
    "dma_copy": dma_copy,
    "nc_matmul": nc_matmul,
    "nc_transpose": nc_transpose,
    "tensor_tensor": tensor_tensor,
    "tensor_scalar": tensor_scalar,
    "scalar_tensor_tensor": scalar_tensor_tensor,
    "tensor_reduce": tensor_reduce,
    "tensor_partition_reduce": tensor_partition_reduce,
    "activation": activation,
    "activation_reduce": activation_reduce,
    "tensor_copy": tensor_copy,
    "reciprocal": reciprocal,
    "memset": memset,
    "iota": iota,
}


# ---------------------------------------------------------------------------- older API forms
# neuronxcc.nki's instructions take no dst and return a new tile; these adapters give them
# their older signatures and route to the shared implementations above.
def _old_nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
                   mask=None, perf_mode=None, **kw):
    return nc_matmul(None, stationary, moving, is_transpose=is_transpose, mask=mask, perf_mode=perf_mode)


def _old_nc_transpose(data, *, engine=None, mask=None, dtype=None, **kw):
    return nc_transpose(None, data, engine=engine, mask=mask, dtype=dtype)


def _old_tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=None, **kw):
    return tensor_tensor(None, data1, data2, op, dtype=dtype, mask=mask, engine=engine)


def _old_tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                       mask=None, engine=None, **kw):
    return tensor_scalar(None, data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=dtype, mask=mask, engine=engine)


def _old_scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                              mask=None, **kw):
    return scalar_tensor_tensor(None, data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1,
                                dtype=dtype, mask=mask)


def _old_activation(op, data, bias=None, scale=1.0, *, reduce_op=None, reduce_res=None, dtype=None, mask=None, **kw):
    return activation(None, op, data, bias, scale, reduce_op=reduce_op, reduce_res=reduce_res, dtype=dtype, mask=mask)


def _old_activation_reduce(op, data, *, reduce_op=None, reduce_res=None, bias=None, scale=1.0, dtype=None, mask=None, **kw):
    return activation_reduce(None, op, data, reduce_op=reduce_op, reduce_res=reduce_res, bias=bias, scale=scale,
                             dtype=dtype, mask=mask)


def _old_tensor_reduce(op, data, axis, *, dtype=None, negate=False, keepdims=False, mask=None, **kw):
    return tensor_reduce(None, op, data, axis, negate=negate, keepdims=keepdims, dtype=dtype, mask=mask)


def _old_tensor_partition_reduce(op, data, *, dtype=None, mask=None, **kw):
    return tensor_partition_reduce(None, op, data, dtype=dtype, mask=mask)


def _old_tensor_copy(src, *, dtype=None, engine=None, mask=None, **kw):
    return tensor_copy(None, src, dtype=dtype, engine=engine, mask=mask)


def _old_reciprocal(data, *, dtype=None, mask=None, **kw):
    return reciprocal(None, data, dtype=dtype, mask=mask)


def _old_memset(shape, value, dtype=None, *, mask=None, engine=None, **kw):
    return memset(None, value, dtype, shape=shape, mask=mask, engine=engine)


def _old_iota(expr, dtype=None, *, mask=None, **kw):
    return iota(None, expr, dtype, mask=mask)


def _old_dma_copy(*, dst, src, mask=None, dge_mode=None, oob_mode=None, **kw):
    return dma_copy(dst, src, mask=mask, oob_mode=oob_mode)


def _old_bn_stats(data, *, dtype=None, mask=None, **kw):
    return bn_stats(None, data, dtype=dtype, mask=mask)


def _old_bn_aggr(data, *, dtype=None, mask=None, **kw):
    return bn_aggr(None, data, dtype=dtype, mask=mask)


OLD_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "bn_stats": _old_bn_stats,
    "bn_aggr": _old_bn_aggr,
    "dma_copy": _old_dma_copy,
    "nc_matmul": _old_nc_matmul,
    "nc_transpose": _old_nc_transpose,
    "tensor_tensor": _old_tensor_tensor,
    "tensor_scalar": _old_tensor_scalar,
    "scalar_tensor_tensor": _old_scalar_tensor_tensor,
    "tensor_reduce": _old_tensor_reduce,
    "tensor_partition_reduce": _old_tensor_partition_reduce,
    "activation": _old_activation,
    "activation_reduce": _old_activation_reduce,
    "tensor_copy": _old_tensor_copy,
    "reciprocal": _old_reciprocal,
    "memset": _old_memset,
    "iota": _old_iota,
}


# ---------------------------------------------------------------------------- more instructions
def tensor_tensor_scan(dst: Any = None, data0: Any = None, data1: Any = None, initial: Any = 0.0, op0: Any = None,
                       op1: Any = None, reverse0: bool = False, reverse1: bool = False, *, dtype: Any = None,
                       mask: Any = None, name: str = "", call: str = "nisa.tensor_tensor_scan") -> Tensor | None:
    """A recurrence along the free axis, per partition (VectorE):
    ``out[:, i] = (data0[:, i] op0 out[:, i-1]) op1 data1[:, i]`` with ``out[:, -1] = initial``."""
    a = _on_chip(data0, "data0", call)
    b = _on_chip(data1, "data1", call)
    shape = _elementwise_shape(a, b, call)
    p = shape[0]
    o0, o1 = binop(op0, call), binop(op1, call)
    init, ti = _operand(initial, p, "initial", call)
    x0 = _f32(read(a, "data0", call, mask)).reshape(p, -1)
    x1 = _f32(read(b, "data1", call, mask)).reshape(p, -1)
    prev = np.broadcast_to(np.asarray(init, dtype=np.float32).reshape(-1), (p,)).astype(np.float32)
    out_v = np.empty_like(x0)
    with np.errstate(all="ignore"):
        for i in range(x0.shape[1]):  # a true recurrence: one vector step per free element
            t = o0.fn(prev, x0[:, i]) if reverse0 else o0.fn(x0[:, i], prev)
            prev = (o1.fn(x1[:, i], t) if reverse1 else o1.fn(t, x1[:, i])).astype(np.float32)
            out_v[:, i] = prev
    out = _output(dst, shape, dtype or _wider(a, b), call)
    _write(out, out_v.reshape(shape), mask)
    _consume(a, b, ti)
    record("tensor_tensor_scan", "vector", p, free_size(shape), _dtype_bytes(a, b, out),
           [a, b] + ([ti] if ti is not None else []), [out], op=o0.name)
    return out if out._fresh else None


def tensor_scalar_reduce(dst: Any = None, data: Any = None, op0: Any = None, operand0: Any = None, reduce_op: Any = None,
                         reduce_res: Any = None, reverse0: bool = False, reduce_cmd: Any = "idle", reduce_init: Any = None,
                         reduce_res_negate: bool = False, *, dtype: Any = None, mask: Any = None,
                         name: str = "", call: str = "nisa.tensor_scalar_reduce") -> Tensor | None:
    """``data op0 operand0`` (VectorE), also reduced along the free axes into ``reduce_res``.
    NKI 2.31+: ``reduce_cmd=reduce`` folds in what ``reduce_res`` holds, ``reduce_init`` (a
    number or a (P, 1) tile) is folded in as a starting value, ``reduce_res_negate`` negates
    the result."""
    t = _on_chip(data, "data", call)
    p = t.shape[0]
    x = _f32(read(t, "data", call, mask))
    v0, t0 = _operand(operand0, p, "operand0", call)
    o0 = binop(op0, call)
    with np.errstate(all="ignore"):
        x = o0.fn(_bcast_free(v0, x.shape), x) if reverse0 else o0.fn(x, _bcast_free(v0, x.shape))
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, x, mask)
    writes = [out]
    if reduce_res is not None:
        r = _on_chip(reduce_res, "reduce_res", call)
        if r.shape[0] != p or free_size(r.shape) != 1:
            raise fail("shape-mismatch", f"reduce_res must be ({p}, 1), got {r.shape}", call)
        rname = redop(reduce_op if reduce_op is not None else "add", call)
        vals = np.asarray(x, dtype=np.float32).reshape(p, -1)
        rows = None
        if mask is not None:  # only the elements the mask keeps are reduced, only their rows written
            m = np.broadcast_to(np.asarray(mask, dtype=bool), t.shape).reshape(p, -1)
            vals = np.where(m, vals, _REDUCE_IDENTITY[rname])
            rows = m.any(axis=1, keepdims=True).reshape(r.shape)
        red = REDUCE[rname](vals, axis=1, keepdims=True)
        extra = []
        if str(getattr(reduce_cmd, "value", reduce_cmd)) == "reduce" and r._all_written():
            extra.append(_f32(read(r, "reduce_res", call)).reshape(p, 1))
        if reduce_init is not None:
            init, _ = _column(reduce_init, p, "reduce_init", call)
            extra.append(np.broadcast_to(np.asarray(init, dtype=np.float32), (p, 1)))
        if extra:
            red = REDUCE[rname](np.concatenate([red] + extra, axis=1), axis=1, keepdims=True)
        if reduce_res_negate:
            red = -red
        r._store(red.reshape(r.shape), rows)
        writes.append(r)
    _consume(t, t0)
    record("tensor_scalar", "vector", p, free_size(t.shape), _dtype_bytes(t, out), [t] + ([t0] if t0 is not None else []),
           writes, op=o0.name)
    return out if out._fresh else None


def affine_select(dst: Any = None, pred: Any = None, on_true_tile: Any = None, on_false_value: Any = 0.0, *,
                  dtype: Any = None, mask: Any = None, name: str = "", call: str = "nisa.affine_select") -> Tensor | None:
    """``where(pred, on_true_tile, on_false_value)`` with ``pred`` an affine comparison of
    nl.arange / nl.mgrid indices (GpSimdE): causal masks and friends."""
    t = _on_chip(on_true_tile, "on_true_tile", call)
    cond = np.asarray(pred)
    if cond.dtype != np.bool_:
        raise fail("bad-operand", "affine_select's pred must be a comparison of nl.arange / nl.mgrid index expressions", call)
    try:
        cond = np.broadcast_to(cond, t.shape)
    except ValueError:
        raise fail("shape-mismatch", f"pred of shape {cond.shape} does not match on_true_tile {t.shape}", call) from None
    if not isinstance(on_false_value, (int, float, np.integer, np.floating)):
        raise fail("bad-operand", "on_false_value must be a number", call)
    x = _f32(read(t, "on_true_tile", call, mask))
    values = np.where(cond, x, np.float32(on_false_value))
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, values, mask)
    _consume(t)
    record("affine_select", "gpsimd", t.shape[0], free_size(t.shape), _dtype_bytes(t, out), [t], [out])
    return out if out._fresh else None


def dma_transpose(dst: Any = None, src: Any = None, *, axes: Any = None, dtype: Any = None, mask: Any = None,
                  dge_mode: Any = None, oob_mode: Any = None, name: str = "",
                  call: str = "nisa.dma_transpose") -> Tensor | None:
    """Transpose a 2-D tile while moving it with a DMA (element-granular)."""
    s = core.require_tensor(src, "src", call)
    if s.ndim != 2:
        raise fail("shape-mismatch", f"dma_transpose moves a 2-D tile, got {s.shape}", call)
    if _style() == "new":
        dma_copy(dst, s, call=call, transpose=True)
        return None
    out = core.new_tensor((s.shape[1], s.shape[0]), dtype or s.dtype, "sbuf", call=call)
    dma_copy(out, s, call=call, transpose=True)
    out._fresh = True
    return out


def tensor_copy_predicated(dst: Any = None, src: Any = None, predicate: Any = None, reverse_pred: bool = False, *,
                           mask: Any = None, dtype: Any = None, name: str = "",
                           call: str = "nisa.tensor_copy_predicated") -> None:
    """``dst[pred] = src[pred]`` on VectorE; where the predicate is false ``dst`` keeps what
    it held (NKI ISA reference). In both APIs it writes ``dst`` and returns nothing.

    ``predicate`` is a tile (integer or boolean elements, non-zero meaning true; the reference
    names uint8/16/32) or, as kernels write causal masks, a comparison of nl.arange / nl.mgrid
    index expressions. ``src`` is a tile or a number; src and predicate may not both be in
    PSUM. A tile ``src`` of another dtype than ``dst`` is rounded through fp32 as
    tensor_copy does (the reference asks for one dtype; the value written is the same)."""
    out = core.require_tensor(dst, "dst", call)
    if not out.on_chip:
        raise fail("buffer", "dst is in HBM; tensor_copy_predicated writes only SBUF or PSUM", call,
                   "no compute on HBM")
    shape, p = tuple(out.shape), out.shape[0]
    pred_tile = None
    if isinstance(predicate, Tensor):
        pred_tile = _on_chip(predicate, "predicate", call)
        if pred_tile.dtype.kind not in "biu":
            raise fail("bad-operand", f"predicate must hold integers (uint8/uint16/uint32), got "
                       f"{core.dtype_name(pred_tile.dtype)}", call)
        if pred_tile.shape[0] != p or free_size(pred_tile.shape) != free_size(shape):
            raise fail("shape-mismatch", f"predicate {pred_tile.shape} and dst {shape} must have the same partitions "
                       "and elements per partition", call)
        cond = read(pred_tile, "predicate", call).reshape(shape) != 0
    else:
        cond = np.asarray(predicate)
        if cond.dtype != np.bool_:
            raise fail("bad-operand", "predicate must be a tile or a comparison of nl.arange / nl.mgrid index "
                       "expressions", call)
        try:
            cond = np.broadcast_to(cond, shape)
        except ValueError:
            raise fail("shape-mismatch", f"predicate of shape {cond.shape} does not match dst {shape}", call) from None
    if reverse_pred:
        cond = ~cond
    reads = [] if pred_tile is None else [pred_tile]
    if isinstance(src, Tensor):
        t = _on_chip(src, "src", call)
        if t.shape[0] != p or free_size(t.shape) != free_size(shape):
            raise fail("shape-mismatch", f"src {t.shape} and dst {shape} must have the same partitions and elements "
                       "per partition", call)
        if pred_tile is not None and t._alloc.buffer == "psum" and pred_tile._alloc.buffer == "psum":
            raise fail("buffer", "src and predicate are both in PSUM; at most one of them may be", call)
        values = read(t, "src", call, mask).reshape(shape)
        if values.dtype != out.dtype:
            values = _f32(values)
        reads.insert(0, t)
        _consume(t)
    elif isinstance(src, (int, float, np.integer, np.floating)) and not isinstance(src, (bool, np.bool_)):
        values = np.full(shape, float(src), dtype=np.float32)
    else:
        raise fail("bad-operand", f"src must be a tile or a number, got {type(src).__name__}", call)
    if mask is not None:
        if STATE.style == "new":
            raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", call, static=True)
        cond = cond & np.broadcast_to(np.asarray(mask, dtype=bool), shape)
    out._store(values, cond)
    record("tensor_copy_predicated", "vector", p, free_size(shape), _dtype_bytes(*reads, out), reads, [out])
    return None


def _old_tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **kw):
    return tensor_copy_predicated(dst, src, predicate, reverse_pred, mask=mask, dtype=dtype)


# ---------------------------------------------------------------------------- top-k primitives
_INDEX_DTYPES = ("uint16", "uint32")


def _per_partition(t: Tensor, what: str, call: str, lo: int = 8, hi: int = 16384) -> np.ndarray:
    """A tile's values as (partitions, elements) fp32, with the element-count limits of the
    VectorE search instructions."""
    v = _f32(read(t, what, call)).reshape(t.shape[0], -1)
    if not lo <= v.shape[1] <= hi:
        raise fail("shape-mismatch", f"{what} has {v.shape[1]} elements per partition; {call} reads {lo} to {hi}", call)
    return v


def _eight(vals: Any, p: int, call: str) -> tuple[Tensor, np.ndarray]:
    t = _on_chip(vals, "vals", call)
    v = _f32(read(t, "vals", call)).reshape(t.shape[0], -1)
    if v.shape != (p, 8):
        raise fail("shape-mismatch", f"vals {t.shape} must hold exactly 8 values in each of the data's {p} partitions", call)
    return t, v


def _index_out(dst: Any, p: int, dtype: Any, call: str) -> Tensor:
    out = _output(dst, (p, 8), dtype or core.DTYPES.get("uint32", np.dtype(np.uint32)), call)
    if core.dtype_name(out.dtype) not in _INDEX_DTYPES:
        raise fail("bad-operand", f"the index tile must be uint16 or uint32, got {core.dtype_name(out.dtype)}", call)
    return out


def _find(data: np.ndarray, vals: np.ndarray, order: range, sentinel: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of the 8 vals (taken in ``order``), the first position of ``data`` holding it
    that no earlier val took; (positions, taken mask). Missing values get ``sentinel``."""
    p = data.shape[0]
    taken = np.zeros(data.shape, dtype=bool)
    idx = np.full((p, 8), sentinel, dtype=np.int64)
    rows = np.arange(p)
    for i in order:
        hit = (data == vals[:, i:i + 1]) & ~taken
        found = hit.any(axis=1)
        pos = hit.argmax(axis=1)
        idx[found, i] = pos[found]
        taken[rows[found], pos[found]] = True
    return idx, taken


def max8(dst: Any = None, src: Any = None, *, mask: Any = None, dtype: Any = None, name: str = "",
         call: str = "nisa.max8") -> Tensor | None:
    """The 8 largest values of each partition, in descending order (VectorE, N cycles)."""
    t = _on_chip(src, "src", call)
    v = _per_partition(t, "src", call)
    top = -np.sort(-v, axis=1)[:, :8]
    out = _output(dst, (t.shape[0], 8), dtype or t.dtype, call)
    _write(out, top, mask)
    _consume(t)
    record("max8", "vector", t.shape[0], free_size(t.shape), _dtype_bytes(t, out), [t], [out])
    return out if out._fresh else None


def nc_find_index8(dst: Any = None, data: Any = None, vals: Any = None, *, mask: Any = None, dtype: Any = None,
                   name: str = "", call: str = "nisa.nc_find_index8") -> Tensor | None:
    """Per partition, the position of the first occurrence of each of 8 values in ``data``
    (repeated values take successive occurrences, in ascending order; a value not present
    gives the all-ones sentinel). VectorE, N cycles."""
    d = _on_chip(data, "data", call)
    dv = _per_partition(d, "data", call)
    if mask is not None:
        dv = np.where(np.broadcast_to(np.asarray(mask, dtype=bool), d.shape).reshape(dv.shape), dv, np.nan)
    vt, vv = _eight(vals, d.shape[0], call)
    out = _index_out(dst, d.shape[0], dtype, call)
    sentinel = (1 << (8 * out.dtype.itemsize)) - 1
    idx, _ = _find(dv, vv, range(8), sentinel)
    out._store(idx.astype(np.float64))
    _consume(d, vt)
    record("nc_find_index8", "vector", d.shape[0], free_size(d.shape), _dtype_bytes(d, out), [d, vt], [out])
    return out if out._fresh else None


def nc_match_replace8(dst: Any = None, data: Any = None, vals: Any = None, imm: Any = 0.0, dst_idx: Any = None, *,
                      mask: Any = None, dtype: Any = None, name: str = "", call: str = "nisa.nc_match_replace8") -> Tensor | None:
    """``data`` with the first occurrence of each of 8 values replaced by ``imm`` (values are
    matched from the 8th to the 1st, so repeated values take occurrences in descending slot
    order); ``dst_idx`` (optional) gets their positions. VectorE, N cycles."""
    d = _on_chip(data, "data", call)
    dv = _per_partition(d, "data", call)
    vt, vv = _eight(vals, d.shape[0], call)
    if not isinstance(imm, (int, float, np.integer, np.floating)):
        raise fail("bad-operand", "imm must be a number", call)
    idx_out = None
    if dst_idx is not None:
        idx_out = core.require_tensor(dst_idx, "dst_idx", call)
        if idx_out.shape[0] != d.shape[0] or free_size(idx_out.shape) != 8:
            raise fail("shape-mismatch", f"dst_idx {idx_out.shape} must hold 8 indices per partition", call)
        if core.dtype_name(idx_out.dtype) not in _INDEX_DTYPES:
            raise fail("bad-operand", f"dst_idx must be uint16 or uint32, got {core.dtype_name(idx_out.dtype)}", call)
    sentinel = (1 << 32) - 1 if idx_out is None else (1 << (8 * idx_out.dtype.itemsize)) - 1
    idx, taken = _find(dv, vv, range(7, -1, -1), sentinel)
    replaced = np.where(taken, np.float32(imm), dv).reshape(d.shape)
    out = _output(dst, d.shape, dtype or d.dtype, call)
    _write(out, replaced, mask)
    writes = [out]
    if idx_out is not None:
        idx_out._store(idx.reshape(idx_out.shape).astype(np.float64))
        writes.append(idx_out)
    _consume(d, vt)
    record("nc_match_replace8", "vector", d.shape[0], free_size(d.shape), _dtype_bytes(d, out), [d, vt], writes)
    return out if out._fresh else None


def _old_max8(*, src, mask=None, dtype=None, **kw):
    return max8(None, src, mask=mask, dtype=dtype)


def _old_nc_find_index8(*, data, vals, mask=None, dtype=None, **kw):
    return nc_find_index8(None, data, vals, mask=mask, dtype=dtype)


def _old_nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, **kw):
    return nc_match_replace8(None, data, vals, imm, dst_idx, mask=mask, dtype=dtype)


# ---------------------------------------------------------------------------- selects with a reduction
_FP32_MIN = float(np.finfo(np.float32).min)


def _reduce_into(reduce_res: Any, vals: np.ndarray, op: Any, reduce_cmd: Any, call: str) -> Tensor:
    """Reduce ``vals`` (P, F) along F into the (P, 1) tile ``reduce_res``. With
    ``reduce_cmd=reduce`` the result also folds in what ``reduce_res`` holds (VectorE's
    accumulator continuing from an earlier instruction); any other command starts afresh."""
    r = _on_chip(reduce_res, "reduce_res", call)
    p = vals.shape[0]
    if r.shape[0] != p or free_size(r.shape) != 1:
        raise fail("shape-mismatch", f"reduce_res must be ({p}, 1), got {r.shape}", call)
    name = redop(op if op is not None else "maximum", call)
    out = REDUCE[name](vals, axis=1, keepdims=True)
    if str(getattr(reduce_cmd, "value", reduce_cmd)) == "reduce" and r._all_written():
        out = REDUCE[name](np.concatenate([_f32(read(r, "reduce_res", call)).reshape(p, 1), out], axis=1),
                           axis=1, keepdims=True)
    r._store(out.reshape(r.shape))
    return r


def _column(x: Any, p: int, what: str, call: str) -> tuple[np.ndarray | float, Tensor | None]:
    """A number, or a (P, 1) tile as a column."""
    if isinstance(x, Tensor):
        t = _on_chip(x, what, call)
        if t.shape[0] != p or free_size(t.shape) != 1:
            raise fail("shape-mismatch", f"{what} must be a number or a ({p}, 1) tile, got {t.shape}", call)
        return _f32(read(t, what, call)).reshape(p, 1), t
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_)):
        return float(x), None
    raise fail("bad-operand", f"{what} must be a number or a ({p}, 1) tile", call)


def range_select(dst: Any = None, on_true_tile: Any = None, comp_op0: Any = None, comp_op1: Any = None,
                 bound0: Any = None, bound1: Any = None, reduce_cmd: Any = "idle", reduce_res: Any = None,
                 reduce_op: Any = None, range_start: Any = 0, on_false_value: Any = Ellipsis, *, mask: Any = None,
                 dtype: Any = None, name: str = "", call: str = "nisa.range_select") -> Tensor | None:
    """Keep the elements whose free index + ``range_start`` satisfies both
    ``comp_op0(index, bound0)`` and ``comp_op1(index, bound1)`` (per-partition bounds),
    ``on_false_value`` (default fp32 min) elsewhere; optionally reduce the result (max) into
    ``reduce_res``. VectorE (NeuronCore-v3+): the flash-attention mask and row maximum."""
    t = _on_chip(on_true_tile, "on_true_tile", call)
    p = t.shape[0]
    x = _f32(read(t, "on_true_tile", call, mask)).reshape(p, -1)
    b0, t0 = _column(bound0, p, "bound0", call)
    b1, t1 = _column(bound1, p, "bound1", call)
    if not isinstance(range_start, (int, float, np.integer, np.floating)):
        raise fail("bad-operand", "range_start must be a number", call)
    idx = np.arange(x.shape[1], dtype=np.float32)[None, :] + np.float32(range_start)
    with np.errstate(all="ignore"):
        keep = (binop(comp_op0, call).fn(idx, b0) != 0) & (binop(comp_op1, call).fn(idx, b1) != 0)
    fill = _FP32_MIN if on_false_value is Ellipsis or on_false_value is None else on_false_value
    if not isinstance(fill, (int, float, np.integer, np.floating)):
        raise fail("bad-operand", "on_false_value must be a number", call)
    values = np.where(keep, x, np.float32(fill))
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, values.reshape(out.shape), mask)
    writes = [out]
    if reduce_res is not None:
        writes.append(_reduce_into(reduce_res, values, reduce_op, reduce_cmd, call))
    reads = [t] + [b for b in (t0, t1) if b is not None]
    _consume(*reads)
    record("range_select", "vector", p, free_size(t.shape), _dtype_bytes(t, out), reads, writes)
    return out if out._fresh else None


def select_reduce(dst: Any = None, predicate: Any = None, on_true: Any = None, on_false: Any = 0.0,
                  reduce_res: Any = None, reduce_cmd: Any = "idle", reduce_op: Any = None, reverse_pred: bool = False, *,
                  mask: Any = None, dtype: Any = None, name: str = "", call: str = "nisa.select_reduce") -> Tensor | None:
    """``where(predicate, on_true, on_false)`` (``on_false`` a number or a (P, 1) column;
    the predicate an integer tile, non-zero meaning true), optionally reduced (max) into
    ``reduce_res``. VectorE."""
    t = _on_chip(on_true, "on_true", call)
    p = t.shape[0]
    pt = _on_chip(predicate, "predicate", call)
    if pt.dtype.kind not in "biu":
        raise fail("bad-operand", f"predicate must hold integers, got {core.dtype_name(pt.dtype)}", call)
    if pt.shape[0] != p or free_size(pt.shape) != free_size(t.shape):
        raise fail("shape-mismatch", f"predicate {pt.shape} and on_true {t.shape} must have the same shape", call)
    if t._alloc.buffer == "psum" and pt._alloc.buffer == "psum":
        raise fail("buffer", "on_true and predicate are both in PSUM; at most one of them may be", call)
    cond = read(pt, "predicate", call).reshape(p, -1) != 0
    if reverse_pred:
        cond = ~cond
    x = _f32(read(t, "on_true", call, mask)).reshape(p, -1)
    f, tf = _column(on_false, p, "on_false", call)
    values = np.where(cond, x, f)
    if dst is not None and _style() == "old":  # the older API's form also writes a dst= it is given
        out = _on_chip(dst, "dst", call)
        if out.shape[0] != p or free_size(out.shape) != free_size(t.shape):
            raise fail("shape-mismatch", f"dst {out.shape} and on_true {t.shape} must have the same shape", call)
    else:
        out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, values.reshape(out.shape), mask)
    writes = [out]
    if reduce_res is not None:
        writes.append(_reduce_into(reduce_res, values, reduce_op, reduce_cmd, call))
    reads = [t, pt] + ([tf] if tf is not None else [])
    _consume(*reads)
    record("select_reduce", "vector", p, free_size(t.shape), _dtype_bytes(t, out), reads, writes)
    return out if out._fresh else None


def exponential(dst: Any = None, src: Any = None, max_value: Any = 0.0, reduce_res: Any = None,
                reduce_cmd: Any = "idle", reduce_init: Any = 0.0, *, name: str = "",
                call: str = "nisa.exponential") -> Tensor | None:
    """``exp(src - max_value)`` on VectorE (NeuronCore-v4, NKI 2.31+; ``max_value`` a number
    or a (P, 1) tile), with the row sums into ``reduce_res`` when given (``reduce_cmd=reduce``
    continuing an earlier sum, ``reduce_init`` a starting value)."""
    t = _on_chip(src, "src", call)
    p = t.shape[0]
    x = _f32(read(t, "src", call)).reshape(p, -1)
    m, tm = _column(max_value, p, "max_value", call)
    with np.errstate(all="ignore"):
        values = np.exp(x - m).astype(np.float32)
    out = _output(dst, t.shape, t.dtype, call)
    out._store(values.reshape(out.shape))
    writes = [out]
    if reduce_res is not None:
        sums = values.sum(axis=1, keepdims=True, dtype=np.float32)
        init, _ = _column(reduce_init, p, "reduce_init", call)
        r = _reduce_into(reduce_res, sums + init, "add", reduce_cmd, call)
        writes.append(r)
    reads = [t] + ([tm] if tm is not None else [])
    _consume(*reads)
    record("exponential", "vector", p, free_size(t.shape), _dtype_bytes(t, out), reads, writes)
    return None


def nc_stream_shuffle(dst: Any = None, src: Any = None, shuffle_mask: Any = None, *, dtype: Any = None,
                      mask: Any = None, name: str = "", call: str = "nisa.nc_stream_shuffle") -> None:
    """Cross-partition moves within each quadrant of 32 partitions (VectorE): output partition
    ``i`` of every quadrant takes input partition ``shuffle_mask[i]`` of that quadrant, and
    ``255`` leaves it as it is. Both tiles span 32, 64, 96 or 128 partitions, the same number
    of elements per partition and one dtype; ``dst`` may be ``src`` (read first). Writes
    ``dst`` and returns nothing, in both APIs."""
    s_t = _on_chip(src, "src", call)
    d_t = _on_chip(dst, "dst", call)
    p = s_t.shape[0]
    if p not in (32, 64, 96, 128) or d_t.shape[0] != p:
        raise fail("shape-mismatch", f"src {s_t.shape} and dst {d_t.shape} must span the same 32, 64, 96 or 128 "
                   "partitions", call)
    if free_size(s_t.shape) != free_size(d_t.shape):
        raise fail("shape-mismatch", f"src {s_t.shape} and dst {d_t.shape} must hold as many elements per partition", call)
    if s_t.dtype != d_t.dtype:
        raise fail("bad-operand", f"dst ({core.dtype_name(d_t.dtype)}) must have src's dtype ({core.dtype_name(s_t.dtype)})",
                   call)
    lanes = list(shuffle_mask) if isinstance(shuffle_mask, (list, tuple)) else None
    if lanes is None or len(lanes) != 32 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                    and (0 <= int(v) < 32 or int(v) == 255) for v in lanes):
        raise fail("bad-operand", "shuffle_mask must be a list of 32 partition numbers within the quadrant "
                   "(0-31, or 255 to leave an output partition as it is)", call)
    values = read(s_t, "src", call).reshape(p, -1)
    order = np.array([int(v) for v in lanes])
    keep = order != 255
    rows = np.concatenate([q * 32 + np.where(keep, order, 0) for q in range(p // 32)])
    moved = values[rows]  # (a copy: dst may be src)
    sel = np.concatenate([keep] * (p // 32))[:, None]
    if mask is not None:
        if STATE.style == "new":
            raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", call, static=True)
        sel = sel & np.broadcast_to(np.asarray(mask, dtype=bool), d_t.shape).reshape(p, -1)
    d_t._store(moved.reshape(d_t.shape), np.broadcast_to(sel, (p, values.shape[1])).reshape(d_t.shape))
    _consume(s_t)
    record("nc_stream_shuffle", "vector", p, free_size(s_t.shape), _dtype_bytes(s_t), [s_t], [d_t])
    return None


def _old_nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kw):
    return nc_stream_shuffle(dst, src, shuffle_mask, dtype=dtype, mask=mask)


def _old_range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd="idle", reduce_res=None,
                      reduce_op=None, range_start=0, on_false_value=Ellipsis, mask=None, dtype=None, **kw):
    return range_select(None, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res, reduce_op,
                        range_start, on_false_value, mask=mask, dtype=dtype)


def _old_select_reduce(*, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd="idle", reduce_op=None,
                       reverse_pred=False, mask=None, dtype=None, **kw):
    return select_reduce(dst, predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op, reverse_pred,
                         mask=mask, dtype=dtype)


# ``nisa.reduce_cmd``: how an instruction's accumulator registers start.
reduce_cmd = _types.SimpleNamespace(idle="idle", reset="reset", reset_reduce="reset_reduce", reduce="reduce")

def nc_n_gather(dst: Any = None, data: Any = None, indices: Any = None, *, mask: Any = None, dtype: Any = None,
                name: str = "", call: str = "nisa.nc_n_gather") -> Tensor | None:
    """Per partition, ``data``'s free elements (flattened) picked by ``indices`` (GpSimdE):
    ``out[p, j] = data[p].ravel()[indices[p].ravel()[j]]``, shaped like ``indices``. An index
    past the end reads garbage on hardware; here it is an error, so no result depends on it."""
    d = _on_chip(data, "data", call, allow_psum=False)
    ix = _on_chip(indices, "indices", call, allow_psum=False)
    if ix.dtype.kind not in "iu":
        raise fail("bad-operand", f"indices must be integers (uint32), got {core.dtype_name(ix.dtype)}", call)
    if d.shape[0] != ix.shape[0]:
        raise fail("shape-mismatch", f"data has {d.shape[0]} partitions and indices {ix.shape[0]}", call,
                   "same partition count")
    values = read(d, "data", call).reshape(d.shape[0], -1)
    where = np.asarray(read(ix, "indices", call)).astype(np.int64).reshape(ix.shape[0], -1)
    if where.size and (where.min() < 0 or where.max() >= values.shape[1]):
        bad = int(where.max() if where.max() >= values.shape[1] else where.min())
        raise fail("index-out-of-bounds", f"index {bad} outside data's {values.shape[1]} elements per partition "
                   "(hardware returns garbage there)", call)
    out = _output(dst, ix.shape, dtype or d.dtype, call)
    _write(out, np.take_along_axis(values, where, axis=1).reshape(ix.shape), mask)
    _consume(d, ix)
    record("nc_n_gather", "gpsimd", ix.shape[0], free_size(ix.shape), _dtype_bytes(d, out), [d, ix], [out])
    return out if out._fresh else None


def _old_nc_n_gather(data, indices, *, mask=None, dtype=None, **kw):
    return nc_n_gather(None, data, indices, mask=mask, dtype=dtype)


FUNCTIONS.update(nc_n_gather=nc_n_gather)
OLD_FUNCTIONS.update(nc_n_gather=_old_nc_n_gather)
FUNCTIONS.update(tensor_tensor_scan=tensor_tensor_scan, tensor_scalar_reduce=tensor_scalar_reduce,
                 affine_select=affine_select, dma_transpose=dma_transpose, tensor_copy_predicated=tensor_copy_predicated,
                 max8=max8, nc_find_index8=nc_find_index8, nc_match_replace8=nc_match_replace8,
                 range_select=range_select, select_reduce=select_reduce, exponential=exponential,
                 nc_stream_shuffle=nc_stream_shuffle)


def _old_tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None, **kw):
    return tensor_tensor_scan(None, data0, data1, initial, op0, op1, reverse0, reverse1, dtype=dtype, mask=mask)


def _old_tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None, **kw):
    return tensor_scalar_reduce(None, data, op0, operand0, reduce_op, reduce_res, reverse0, dtype=dtype, mask=mask)


def _old_affine_select(pred, on_true_tile, on_false_value, *, dtype=None, mask=None, **kw):
    return affine_select(None, pred, on_true_tile, on_false_value, dtype=dtype, mask=mask)


def _old_dma_transpose(src, *, axes=None, dtype=None, mask=None, **kw):
    return dma_transpose(None, src, axes=axes, dtype=dtype, mask=mask)


OLD_FUNCTIONS.update(nc_stream_shuffle=_old_nc_stream_shuffle, range_select=_old_range_select, select_reduce=_old_select_reduce, max8=_old_max8, nc_find_index8=_old_nc_find_index8, nc_match_replace8=_old_nc_match_replace8,
                     tensor_copy_predicated=_old_tensor_copy_predicated, tensor_tensor_scan=_old_tensor_tensor_scan, tensor_scalar_reduce=_old_tensor_scalar_reduce,
                     affine_select=_old_affine_select, dma_transpose=_old_dma_transpose)


# ---------------------------------------------------------------------------- MX (microscaling)
# NeuronCore-v4 Matmul-MX / Quantize-MX (nki.isa.nc_matmul_mx, quantize_mx): data tiles hold
# ``*_x4`` elements (4 FP8 or FP4 values each); every scaling group of 8 partitions x 1 x4
# element (32 values) shares one uint8 power-of-two exponent (bias 127). Scales of the 8-row
# block b sit on partition (b // 4) * 32 + b % 4: four per 32-partition quadrant.
_MX_LIMITS = {"float8_e5m2": (57344.0, 15), "float8_e4m3fn": (448.0, 8), "float4_e2m1fn": (6.0, 2)}


def _mx_elem(fmt: str) -> np.dtype:
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, fmt))


def _mx_unpack(raw: np.ndarray, fmt: str) -> np.ndarray:
    """(P, F) packed x4 integers -> (P, F, 4) float32 values."""
    raw = np.ascontiguousarray(raw)
    p, f = raw.shape
    if fmt == "float4_e2m1fn":
        b = raw.astype(np.uint16).view(np.uint8).reshape(p, f, 2)
        nib = np.stack([b & 0xF, b >> 4], axis=-1).reshape(p, f, 4).astype(np.uint8)
        return nib.view(_mx_elem(fmt)).astype(np.float32)
    return raw.astype(np.uint32).view(np.uint8).reshape(p, f, 4).view(_mx_elem(fmt)).astype(np.float32)


def _mx_pack(values: np.ndarray, fmt: str) -> np.ndarray:
    """(P, F, 4) values already in the element format -> (P, F) packed integers."""
    q = np.ascontiguousarray(values.astype(_mx_elem(fmt))).view(np.uint8)
    p, f = q.shape[:2]
    if fmt == "float4_e2m1fn":
        q = q.reshape(p, f, 2, 2)
        return ((q[..., 0] & 0xF) | ((q[..., 1] & 0xF) << 4)).astype(np.uint8).reshape(p, f * 2).view(np.uint16)
    return q.reshape(p, f * 4).view(np.uint32)


def _mx_scale_rows(p: int) -> np.ndarray:
    blocks = np.arange(-(-p // 8))
    return (blocks // 4) * 32 + blocks % 4


def _mx_operand(t: Any, scale: Any, what: str, call: str) -> tuple[Tensor, Tensor, np.ndarray]:
    t = _on_chip(t, what, call, allow_psum=False)
    fmt = core.mx_format(t.dtype)
    if fmt is None or t.ndim != 2:
        raise fail("bad-dtype", f"{what} must be a 2-D MX tile (nl.float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4), "
                   f"got {t.shape} {core.dtype_name(t.dtype)}", call)
    s = _on_chip(scale, what + "_scale", call, allow_psum=False)
    p, f = t.shape
    if p % 8 or p > LIMITS["pmax"]:
        raise fail("shape-mismatch", f"{what} has {p} partitions; MX tiles need a multiple of 8, at most 128", call)
    rows = _mx_scale_rows(p)
    if s.ndim != 2 or s.shape[0] <= rows.max() or s.shape[1] < f:
        raise fail("shape-mismatch", f"{what}_scale {s.shape} must hold scale rows {rows.tolist()} and {f} columns", call)
    sv = read(s[rows[:, None], np.arange(f)[None, :]], what + "_scale", call).astype(np.float32)
    values = _mx_unpack(read(t, what, call), fmt) * np.repeat(np.exp2(sv - 127.0), 8, axis=0)[:p, :, None]
    return t, s, values


def nc_matmul_mx(dst: Any = None, stationary: Any = None, moving: Any = None, stationary_scale: Any = None,
                 moving_scale: Any = None, *, accumulate: bool | None = None, name: str = "",
                 call: str = "nisa.nc_matmul_mx", **kw: Any) -> None:
    """dst = stationary.T @ moving over K partitions x 4 packed values, each group scaled."""
    s, ss, sv = _mx_operand(stationary, stationary_scale, "stationary", call)
    m, ms, mv = _mx_operand(moving, moving_scale, "moving", call)
    if s.shape[0] != m.shape[0]:
        raise fail("shape-mismatch", f"stationary {s.shape} and moving {m.shape} must share the partition dimension", call)
    if s.shape[1] > LIMITS["stationary_fmax"] or m.shape[1] > LIMITS["moving_fmax"]:
        raise fail("matmul-limit", f"stationary {s.shape}, moving {m.shape}", call, "stationary <= 128x128, moving <= 128x512 x4 elements")
    result = np.einsum("kiq,kjq->ij", sv, mv, optimize=True)
    out = _output(dst, (s.shape[1], m.shape[1]), F32, call, buffer="psum", allowed=("psum",))
    acc = accumulate if accumulate is not None else bool(out._all_written())
    if acc:
        result = _f32(read(out, "dst (accumulate)", call)) + result.reshape(out.shape)
    _write(out, result.reshape(out.shape))
    _consume(s, m, ss, ms)
    idx = record("nc_matmul", "tensor", s.shape[0], m.shape[1], 1, [s, m, ss, ms] + ([out] if acc else []), [out],
                 stationary_free=s.shape[1])
    if accumulate is None:
        core.accumulation_group(idx)
    return None


def quantize_mx(dst: Any = None, src: Any = None, dst_scale: Any = None, *, name: str = "",
                call: str = "nisa.quantize_mx", **kw: Any) -> None:
    """Quantize a (P, 4F) bf16/fp16 tile to a (P, F) MX tile: per group of 8 partitions x 4
    values the scale is the largest float32 exponent less the format's largest exponent;
    values are divided by it, saturated and rounded to nearest even (VectorE)."""
    x = _on_chip(src, "src", call, allow_psum=False)
    out = core.require_tensor(dst, "dst", call)
    fmt = core.mx_format(out.dtype)
    if fmt is None or fmt == "float4_e2m1fn":
        raise fail("bad-dtype", f"dst must be nl.float8_e5m2_x4 or nl.float8_e4m3fn_x4, got {core.dtype_name(out.dtype)}", call)
    p, f4 = x.shape[0], free_size(x.shape)
    if p % 8 or f4 % 4 or out.shape[0] != p or free_size(out.shape) != f4 // 4:
        raise fail("shape-mismatch", f"src {x.shape} and dst {out.shape}: dst must be (P, F/4), P a multiple of 8", call)
    vmax, emax = _MX_LIMITS[fmt]
    vals = _f32(read(x, "src", call)).reshape(p, f4)
    exp = (vals.view(np.uint32) >> 23) & 0xFF
    block = exp.reshape(p // 8, 8, f4 // 4, 4).max(axis=(1, 3)).astype(np.int64) - emax
    scale = (block % 256).astype(np.uint8)
    factor = np.exp2(scale.astype(np.float64) - 127.0)
    q = np.clip(vals / np.repeat(np.repeat(factor, 8, axis=0), 4, axis=1), -vmax, vmax)
    _write(out, _mx_pack(q.reshape(p, f4 // 4, 4), fmt).reshape(out.shape))
    sc = core.require_tensor(dst_scale, "dst_scale", call)
    rows = _mx_scale_rows(p)
    if sc.ndim != 2 or sc.shape[0] <= rows.max() or sc.shape[1] < f4 // 4:
        raise fail("shape-mismatch", f"dst_scale {sc.shape} must hold scale rows {rows.tolist()} and {f4 // 4} columns", call)
    view = sc[rows[:, None], np.arange(f4 // 4)[None, :]]
    view._store(scale.astype(np.float32))
    _consume(x)
    record("quantize_mx", "vector", p, f4, x.dtype.itemsize, [x], [out, sc])
    return None


FUNCTIONS.update(nc_matmul_mx=nc_matmul_mx, quantize_mx=quantize_mx)


# ---------------------------------------------------------------------------- dynamic offsets, random numbers, gathers
def _dynamic_tiles(t: Tensor) -> list[Tensor]:
    """The offset tiles of a view at a dynamic offset (what the instruction reads besides it)."""
    return list(t._dyn) if t._dyn is not None and t.on_chip else []


def _copy_engine(engine: Any, tiles: list[Tensor], call: str) -> str:
    eng = _engine(engine, "vector", ("vector", "scalar", "gpsimd"), call)
    if eng == "gpsimd" and any(t is not None and t._alloc.buffer == "psum" for t in tiles):
        raise fail("buffer", "GpSimdE cannot access PSUM", call)
    return eng


def tensor_copy_dynamic_src(dst: Any = None, src: Any = None, *, engine: Any = None, dtype: Any = None,
                            mask: Any = None, name: str = "", call: str = "nisa.tensor_copy_dynamic_src") -> Tensor | None:
    """Copy ``src``, a view at a dynamic offset within each partition (indexed by the value
    of a one-element integer SBUF tile: ``src[i_p, off + i_f]``, ``src[:, off]``), into ``dst``
    (NKI ISA reference). Both tiles in SBUF or PSUM, the same partitions and elements per
    partition; VectorE unless ``engine`` says ScalarE or GpSimdE. The older API returns a new
    tile. An ``src`` at a static offset is copied as it is. The reference's cost is
    ``max(MIN_II_DYNAMIC ~600, N)`` cycles; the cost model charges the tensor_copy rate."""
    t = _on_chip(src, "src", call)
    offsets = _dynamic_tiles(t)
    eng = _copy_engine(engine, [t, dst if isinstance(dst, Tensor) else None], call)
    with core.dynamic_access():
        values = read(t, "src", call, mask)
    out = _output(dst, t.shape, dtype or t.dtype, call)
    _write(out, (_f32(values) if values.dtype != out.dtype else values).reshape(out.shape), mask)
    _consume(t)
    record("tensor_copy_dynamic_src", eng, t.shape[0], free_size(t.shape), _dtype_bytes(t, out), [t] + offsets, [out])
    return out if out._fresh else None


def tensor_copy_dynamic_dst(dst: Any = None, src: Any = None, *, engine: Any = None, dtype: Any = None,
                            mask: Any = None, name: str = "", call: str = "nisa.tensor_copy_dynamic_dst") -> None:
    """Copy ``src`` into ``dst``, a view at a dynamic offset within each partition (see
    tensor_copy_dynamic_src), to scatter tiles by computed positions. Both in SBUF or PSUM,
    the same partitions and elements per partition; writes ``dst`` and returns nothing, in
    both APIs (the older API's form takes ``dst=`` too)."""
    d = core.require_tensor(dst, "dst", call)
    if not d.on_chip:
        raise fail("buffer", f"dst is in {d._alloc.buffer}; {call} writes only SBUF or PSUM", call, "no compute on HBM")
    s = _on_chip(src, "src", call)
    if s.shape[0] != d.shape[0] or free_size(s.shape) != free_size(d.shape):
        raise fail("shape-mismatch", f"src {s.shape} and dst {d.shape} must have the same partitions and elements per "
                   "partition", call)
    eng = _copy_engine(engine, [s, d], call)
    values = read(s, "src", call, mask)
    if mask is not None and STATE.style == "new":
        raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", call, static=True)
    with core.dynamic_access():
        d._store((_f32(values) if values.dtype != d.dtype else values).reshape(d.shape),
                 None if mask is None else np.asarray(mask, dtype=bool))
    _consume(s)
    record("tensor_copy_dynamic_dst", eng, d.shape[0], free_size(d.shape), _dtype_bytes(s, d), [s] + _dynamic_tiles(d),
           [d])
    return None


def _drop_probability(prob: Any, data: Tensor, call: str,
                      one_element: bool = False) -> tuple[np.ndarray | float, Tensor | None]:
    """``prob`` as a number or a (P, 1) column (``one_element``: also a one-element tile for
    every partition, as nl.dropout's rate may be). A probability tile holds floats, float32
    for integer data (NKI ISA reference, nisa.dropout)."""
    p = data.shape[0]
    if isinstance(prob, Tensor):
        t = _on_chip(prob, "prob", call)
        if not core.is_float(t.dtype):
            raise fail("bad-operand", f"prob holds drop probabilities: a float tile, got {core.dtype_name(t.dtype)}", call)
        if data.dtype.kind in "iu" and t.dtype != F32:
            raise fail("bad-operand", f"prob must be float32 when data is an integer tile, got {core.dtype_name(t.dtype)}",
                       call)
        n = math.prod(t.shape)
        if one_element and n == 1:
            return float(_f32(read(t, "prob", call)).reshape(-1)[0]), t
        if t.shape[0] != p or free_size(t.shape) != 1:
            raise fail("shape-mismatch", f"prob must be a number or a ({p}, 1) tile (one drop probability per "
                       f"partition), got {t.shape}", call)
        return _f32(read(t, "prob", call)).reshape(p, 1).astype(np.float64), t
    if isinstance(prob, (int, float, np.integer, np.floating)) and not isinstance(prob, (bool, np.bool_)):
        return float(prob), None
    raise fail("bad-operand", f"prob must be a number or a ({p}, 1) tile, got {type(prob).__name__}", call)


def dropout(dst: Any = None, data: Any = None, prob: Any = None, *, dtype: Any = None, mask: Any = None, name: str = "",
            call: str = "nisa.dropout", one_element: bool = False) -> Tensor | None:
    """Replace elements of ``data`` with zeros, each with probability ``prob`` (a number or a
    (P, 1) tile of per-partition probabilities: 1.0 drops all, 0.0 keeps all), on VectorE
    (NKI ISA reference). Kept elements keep their values: the instruction does not scale them
    by 1/(1 - prob) (AWS's flash attention multiplies by it itself). The output dtype is
    data's (the ``nki`` API requires ``dst`` of data's dtype; the older API's ``dtype=`` may
    change a float tile's). The random numbers come from the run's generator (see
    core.random_generator): deterministic for a seed (nl.random_seed), one uniform draw per
    element, an element dropped where its draw is below its probability."""
    t = _on_chip(data, "data", call)
    p = t.shape[0]
    prob_v, prob_t = _drop_probability(prob, t, call, one_element)
    x = read(t, "data", call, mask)
    out = _output(dst, t.shape, dtype or t.dtype, call)
    if out.dtype != t.dtype and (_style() == "new" or t.dtype.kind in "iu"):
        raise fail("bad-operand", f"the output dtype ({core.dtype_name(out.dtype)}) must be data's "
                   f"({core.dtype_name(t.dtype)})", call)
    draws = core.random_generator().random(t.shape)
    keep = draws >= _bcast_free(prob_v, t.shape)
    values = np.where(keep, x if t.dtype.kind in "iu" else _f32(x), 0)
    _write(out, values.reshape(out.shape), mask)
    reads = [t] + ([prob_t] if prob_t is not None else [])
    _consume(*reads)
    record("dropout", "vector", p, free_size(t.shape), _dtype_bytes(t, out), reads, [out])
    return out if out._fresh else None


_SEGMENT_DTYPES = ("float32", "int32")


def sequence_bounds(dst: Any = None, segment_ids: Any = None, *, dtype: Any = None, name: str = "",
                    call: str = "nisa.sequence_bounds") -> Tensor | None:
    """For each element of a (1, n) tile of segment IDs, the [start, end) of the run of equal
    IDs it belongs to (GpSimdE; NKI ISA reference and its NumPy equivalent): out[0, 0, i] is
    the start index, out[0, 1, i] the end index (exclusive); padding (ID 0) gets start n and
    end -1. IDs are non-negative integers in float32 or int32; the result (1, 2, n) is
    float32 or int32 (the older API's ``dtype=``, default the IDs' dtype)."""
    s = _on_chip(segment_ids, "segment_ids", call, allow_psum=False)
    if s.shape[0] != 1:
        raise fail("shape-mismatch", f"segment_ids must have one partition, got {s.shape}", call,
                   "sequence_bounds partition dimension == 1")
    if core.dtype_name(s.dtype) not in _SEGMENT_DTYPES:
        raise fail("bad-dtype", f"segment_ids must be float32 or int32, got {core.dtype_name(s.dtype)}", call)
    ids = np.asarray(read(s, "segment_ids", call), dtype=np.float64).reshape(-1)
    if ids.size and (not np.all(np.isfinite(ids)) or ids.min() < 0 or np.any(ids != np.trunc(ids))):
        raise fail("bad-operand", "segment IDs must be non-negative integers (0 marks padding)", call)
    n = ids.size
    pos = np.arange(n)
    first = np.ones(n, dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    run = np.cumsum(first) - 1
    run_start = pos[first]
    run_end = np.append(run_start[1:], n)
    starts = np.where(ids == 0, n, run_start[run]).astype(np.float64)
    ends = np.where(ids == 0, -1, run_end[run]).astype(np.float64)
    out = _output(dst, (1, 2, n), dtype or s.dtype, call)
    if core.dtype_name(out.dtype) not in _SEGMENT_DTYPES:
        raise fail("bad-dtype", f"the sequence bounds are float32 or int32, got {core.dtype_name(out.dtype)}", call)
    _write(out, np.stack([starts, ends]).reshape(out.shape))
    _consume(s)
    record("sequence_bounds", "gpsimd", 1, n, _dtype_bytes(s, out), [s], [out])
    return out if out._fresh else None


_GATHER_PARTITIONS = 16  # SBUF partitions each of GpSimdE's eight cores connects to
_GATHER_ELEMS = (1, 2, 4, 8, 16, 32)
_GATHER_MAX_INDICES = 4096


def local_gather(dst: Any = None, src_buffer: Any = None, index: Any = None, num_elem_per_idx: Any = 1,
                 num_valid_indices: Any = None, *, mask: Any = None, name: str = "",
                 call: str = "nisa.local_gather") -> Tensor | None:
    """Gather on GpSimdE (NKI ISA reference and its NumPy equivalent): each core serves 16
    partitions and reads its 16-partition slice of ``index`` (uint16) flattened partition
    first; its first ``num_valid_indices`` indices (default all) each pick
    ``num_elem_per_idx`` contiguous elements of every one of its partitions' (flattened)
    free elements of ``src_buffer``: ``out[p, k, e] = src[p].ravel()[indices_1d[k] + e]``,
    (P, num_valid_indices, num_elem_per_idx), of src's dtype (no casting). An index past the
    end is undefined on hardware; here it is an error, so no result depends on it."""
    src = _on_chip(src_buffer, "src_buffer", call, allow_psum=False)
    ix = _on_chip(index, "index", call, allow_psum=False)
    if core.dtype_name(ix.dtype) != "uint16":
        raise fail("bad-dtype", f"index must be uint16, got {core.dtype_name(ix.dtype)}", call)
    p = src.shape[0]
    if ix.shape[0] != p or p % _GATHER_PARTITIONS:
        raise fail("shape-mismatch", f"src_buffer {src.shape} and index {ix.shape} must have the same number of "
                   "partitions, a multiple of 16", call, "src_buffer.shape[0] == index.shape[0], a multiple of 16")
    if not _is_int(num_elem_per_idx) or int(num_elem_per_idx) not in _GATHER_ELEMS:
        raise fail("bad-operand", f"num_elem_per_idx must be one of {list(_GATHER_ELEMS)}, got {num_elem_per_idx!r}", call)
    per_core = _GATHER_PARTITIONS * free_size(ix.shape)
    nvi = per_core if num_valid_indices is None else num_valid_indices
    if not _is_int(nvi) or not 0 < int(nvi) <= per_core:
        raise fail("bad-operand", f"num_valid_indices must be an integer from 1 to {per_core} (the indices in each "
                   f"16-partition slice of index), got {num_valid_indices!r}", call)
    nvi, nepi = int(nvi), int(num_elem_per_idx)
    if nvi > _GATHER_MAX_INDICES:
        raise fail("bad-operand", f"{nvi} indices per GpSimd core", call, f"at most {_GATHER_MAX_INDICES} indices per core")
    data = read(src, "src_buffer", call).reshape(p, -1)
    where = np.asarray(read(ix, "index", call)).astype(np.int64).reshape(p, -1)
    cores = where.reshape(p // _GATHER_PARTITIONS, _GATHER_PARTITIONS, -1).transpose(0, 2, 1).reshape(
        p // _GATHER_PARTITIONS, -1)[:, :nvi]
    pos = cores[:, :, None] + np.arange(nepi, dtype=np.int64)  # (cores, nvi, nepi)
    if pos.size and pos.max() >= data.shape[1]:
        raise fail("index-out-of-bounds", f"index {int(cores.max())} reads {nepi} element(s) past element "
                   f"{data.shape[1] - 1} of src_buffer's partitions (out-of-bounds gathers are undefined on hardware)",
                   call)
    rows = data.reshape(p // _GATHER_PARTITIONS, _GATHER_PARTITIONS, -1)
    values = np.stack([rows[c][:, pos[c]] for c in range(rows.shape[0])]).reshape(p, nvi, nepi)
    out = _output(dst, (p, nvi, nepi), src.dtype, call)
    if out.dtype != src.dtype:
        raise fail("bad-operand", f"dst ({core.dtype_name(out.dtype)}) must have src_buffer's dtype "
                   f"({core.dtype_name(src.dtype)}): local_gather does not cast", call)
    _write(out, values.reshape(out.shape), mask)
    _consume(src, ix)
    record("local_gather", "gpsimd", p, nvi * nepi, src.dtype.itemsize, [src, ix], [out])
    return out if out._fresh else None


def _old_tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=None, **kw):
    return tensor_copy_dynamic_src(None, src, engine=engine, dtype=dtype, mask=mask)


def _old_tensor_copy_dynamic_dst(*, dst, src, mask=None, dtype=None, engine=None, **kw):
    return tensor_copy_dynamic_dst(dst, src, engine=engine, dtype=dtype, mask=mask)


def _old_dropout(data, prob, *, mask=None, dtype=None, **kw):
    return dropout(None, data, prob, dtype=dtype, mask=mask)


def _old_sequence_bounds(*, segment_ids, dtype=None, **kw):
    return sequence_bounds(None, segment_ids, dtype=dtype)


def _old_local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None, **kw):
    return local_gather(None, src_buffer, index, num_elem_per_idx, num_valid_indices, mask=mask)


FUNCTIONS.update(tensor_copy_dynamic_src=tensor_copy_dynamic_src, tensor_copy_dynamic_dst=tensor_copy_dynamic_dst,
                 dropout=dropout, sequence_bounds=sequence_bounds, local_gather=local_gather)
OLD_FUNCTIONS.update(tensor_copy_dynamic_src=_old_tensor_copy_dynamic_src,
                     tensor_copy_dynamic_dst=_old_tensor_copy_dynamic_dst, dropout=_old_dropout,
                     sequence_bounds=_old_sequence_bounds, local_gather=_old_local_gather)
