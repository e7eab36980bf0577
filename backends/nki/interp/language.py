"""``nki.language`` (``nl``): allocation, loops, indexing helpers, and the older functional API.

Both API styles share allocation (``nl.ndarray``/``nl.zeros``), dtypes, buffers, loop
ranges and index helpers. The functional calls (``nl.load``, ``nl.store``, ``nl.matmul``,
``nl.exp(x)``, ``nl.sum``, tile arithmetic) come from the older ``neuronxcc.nki`` API; NKI
2.29 put them back into ``nki.language``, so they run under ``import nki`` too, as they do
in the older API (each returns a new tile).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Iterator

import numpy as np

from autocomp.backends.nki.interp import core, isa
from autocomp.backends.nki.interp.index_grid import index_grid
from autocomp.backends.nki.interp.core import STATE, BufferKind, Tensor, fail, free_size, read, record

# ---------------------------------------------------------------------------- constants
sbuf = BufferKind("sbuf")
psum = BufferKind("psum")
hbm = BufferKind("hbm")
shared_hbm = BufferKind("shared_hbm")
private_hbm = BufferKind("private_hbm")


class tile_size:  # noqa: N801 - mirrors nl.tile_size
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_num_banks = 8


def par_dim(n: int) -> int:
    """Marks the partition dimension in a shape (axes before it are block dimensions)."""
    return core.ParDim(int(n))


def ds(start: int, size: int) -> Any:
    """A dynamic slice ``start : start + size``. A ``start`` that is a one-element integer
    SBUF tile (an offset computed on the device) makes a dynamic-offset index,
    ``start + nl.arange(size)``, for nisa.tensor_copy_dynamic_src/dst (see
    core.DynamicIndex)."""
    try:
        lo = int(start)
    except TypeError:
        if isinstance(start, np.ndarray):
            raise
        return start + arange(int(size))  # (a tile: the kernel process sends this as tile arithmetic)
    return slice(lo, lo + int(size))


def arange(*args: int) -> np.ndarray:
    """Integer index vector for affine index expressions (``nl.arange(128)[:, None]``),
    read-only with its bounds known (an index expression, not data: used as it is, it takes
    the interpreter's fast path for views). A unit-step range is an IndexGrid: integer
    offsets of it stay ranges the interpreter need not inspect; other arithmetic makes
    ordinary arrays."""
    if len(args) in (1, 2) and all(type(a) is int for a in args):
        start, stop = (0, args[0]) if len(args) == 1 else args
        if stop - start >= 2:  # (offsets of it stay ranges: see IndexGrid)
            return core.frozen_index_array(index_grid(start, 0, (stop - start,)))
    return core.frozen_index_array(np.arange(*args, dtype=np.int64))


class _Grid(tuple):
    @property
    def p(self) -> np.ndarray:
        return self[0]

    @property
    def x(self) -> np.ndarray:
        return self[1]

    @property
    def y(self) -> np.ndarray:
        return self[2]

    @property
    def z(self) -> np.ndarray:
        return self[3]


class _MGrid:
    def __getitem__(self, key: Any) -> _Grid:
        key = key if isinstance(key, tuple) else (key,)
        bounds = [_unit_range(k) for k in key]
        if all(b is not None for b in bounds):  # (the common case: offsets of these stay ranges)
            shape = tuple(stop - start for start, stop in bounds)
            return _Grid(core.frozen_index_array(index_grid(start, axis, shape)) for axis, (start, _) in enumerate(bounds))
        grids = np.mgrid[key].astype(np.int64) if len(key) > 1 else (np.mgrid[key].astype(np.int64),)
        return _Grid(core.frozen_index_array(np.ascontiguousarray(g)) for g in grids)  # (see arange)


def _unit_range(k: Any) -> tuple[int, int] | None:
    """(start, stop) of an ``nl.mgrid`` axis ``start:stop`` with integer bounds, a step of
    one and at least one element, else None."""
    if type(k) is not slice or k.step not in (None, 1):
        return None
    start = 0 if k.start is None else k.start
    if type(start) is not int or type(k.stop) is not int or k.stop <= start:
        return None
    return start, k.stop


mgrid = _MGrid()


# ---------------------------------------------------------------------------- loops
class _Range:
    """A loop range. ``affine_range`` bodies must not depend on each other: when the harness
    asks, the interpreter runs them in reverse to expose loop-carried dependencies."""

    def __init__(self, kind: str, args: tuple[int, ...]) -> None:
        if not args or len(args) > 3 or not all(isinstance(a, (int, np.integer)) for a in args):
            raise fail("bad-range", f"nl.{kind} needs 1 to 3 integer arguments (start, stop, step), got {args!r}")
        self.kind = kind
        self.values = range(*[int(a) for a in args])

    def __iter__(self) -> Iterator[int]:
        values = reversed(self.values) if self.kind == "affine_range" and STATE.reverse_affine else self.values
        return core.iterate_loop(values, len(self.values), self.kind == "affine_range", STATE.loops, STATE.loop_ids)

    def __len__(self) -> int:
        return len(self.values)


def affine_range(*args: int, **kw: Any) -> _Range:
    return _Range("affine_range", args)


def sequential_range(*args: int, **kw: Any) -> _Range:
    return _Range("sequential_range", args)


def static_range(*args: int, **kw: Any) -> _Range:
    return _Range("static_range", args)


def program_id(axis: int = 0) -> int:
    ids = STATE.program_ids or (0,)
    if axis >= len(ids):
        return 0
    return ids[axis]


def num_programs(axis: int = 0, axes: Any = None) -> int:
    grid = STATE.grid or (1,)
    if axes is not None:  # the older API's spelling
        axis = axes
    return grid[axis] if axis < len(grid) else 1


def program_ndim() -> int:
    return len(STATE.grid)


# ---------------------------------------------------------------------------- allocation
def ndarray(shape: Any, dtype: Any, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    """A new uninitialised tensor (NaN until written)."""
    return core.new_tensor(shape, dtype, buffer if buffer is not None else sbuf, name=name, call="nl.ndarray")


def _filled(shape: Any, value: float, dtype: Any, buffer: Any, name: str, call: str) -> Tensor:
    t = core.new_tensor(shape, dtype, buffer if buffer is not None else sbuf, name=name, call=call)
    t._store(np.full(t.shape, value, dtype=np.float64))
    if t._alloc.buffer == "psum" and value == 0.0:
        # A zeroed PSUM tile starts a matmul accumulation group: the compiler folds it into
        # the first matmul's accumulate flag, no instruction runs.
        return t
    engine = "dma" if t.is_hbm else "vector"
    parts, free = core.partitions_free(t)
    record("memset", engine, parts, free, t.dtype.itemsize, [], [t],
           **({"bytes": int(t._data.size * t.dtype.itemsize), "chunk_bytes": int(t._data.size * t.dtype.itemsize)} if t.is_hbm else {}))
    return t


def zeros(shape: Any, dtype: Any, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    return _filled(shape, 0.0, dtype, buffer, name, "nl.zeros")


def ones(shape: Any, dtype: Any, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    return _filled(shape, 1.0, dtype, buffer, name, "nl.ones")


def full(shape: Any, fill_value: float, dtype: Any, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    return _filled(shape, float(fill_value), dtype, buffer, name, "nl.full")


def zeros_like(t: Tensor, dtype: Any = None, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    return zeros(t.shape, dtype or t.dtype, buffer or t.buffer, name)


def ndarray_like(t: Tensor, dtype: Any = None, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    return ndarray(t.shape, dtype or t.dtype, buffer or t.buffer, name)


empty_like = ndarray_like


# ---------------------------------------------------------------------------- older API: data movement
def _functional(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The functional forms (``nl.load``, ``nl.add``, ``nl.matmul``, …): the older
    neuronxcc.nki API's, which NKI 2.29 put back into ``nki.language`` (each returns a new
    tile). Under ``import nki`` they run as in the older API, where an instruction without
    ``dst=`` makes its own result tile; kernels of NKI 2.24-2.28, whose ``nki.language`` lacked
    them, simply do not call them."""

    @functools.wraps(fn)
    def call(*args: Any, **kw: Any) -> Any:
        if STATE.style != "new":
            return fn(*args, **kw)
        STATE.style = "old"
        try:
            return fn(*args, **kw)
        finally:
            STATE.style = "new"

    return call


@_functional
def load(src: Tensor, mask: Any = None, dtype: Any = None, **kw: Any) -> Tensor:
    """HBM → new SBUF tile (one DMA)."""
    src = core.require_tensor(src, "src", "nl.load")
    if not src.is_hbm:
        raise fail("bad-operand", f"nl.load reads HBM, but src is in {src._alloc.buffer}", "nl.load")
    out = core.new_tensor(src.shape or (1, 1), dtype or src.dtype, sbuf, call="nl.load")  # a scalar loads as (1, 1)
    isa.dma_copy(out, src, mask=None, call="nl.load") if mask is None else _masked_dma(out, src, mask, "nl.load")
    out._fresh = True
    return out


@_functional
def load_transpose2d(src: Tensor, mask: Any = None, dtype: Any = None, **kw: Any) -> Tensor:
    """HBM (P, F) → SBUF (F, P) through a transposing DMA (element-granular, slow)."""
    src = core.require_tensor(src, "src", "nl.load_transpose2d")
    if not src.is_hbm or src.ndim != 2:
        raise fail("bad-operand", "nl.load_transpose2d reads a 2-D HBM view", "nl.load_transpose2d")
    out = core.new_tensor((src.shape[1], src.shape[0]), dtype or src.dtype, sbuf, call="nl.load_transpose2d")
    isa.dma_copy(out, src, call="nl.load_transpose2d", transpose=True)
    return out


@_functional
def store(dst: Tensor, value: Any, mask: Any = None, **kw: Any) -> None:
    """SBUF tile → HBM (one DMA)."""
    dst = core.require_tensor(dst, "dst", "nl.store")
    if not dst.is_hbm:
        raise fail("bad-operand", f"nl.store writes HBM, but dst is in {dst._alloc.buffer}", "nl.store")
    value = _to_sbuf(core.require_tensor(value, "value", "nl.store"), "nl.store")
    if mask is None:
        isa.dma_copy(dst, value, call="nl.store")
    else:
        _masked_dma(dst, value, mask, "nl.store")


def _to_sbuf(t: Tensor, call: str) -> Tensor:
    """The older API's compiler moves a PSUM operand to SBUF where an instruction cannot read
    PSUM (a DMA, a matmul operand): one VectorE copy."""
    if t._alloc.buffer != "psum":
        return t
    out = core.new_tensor(t.shape, t.dtype, sbuf, call=call)
    out._store(read(t, "value", call))
    record("tensor_copy", "vector", t.shape[0], free_size(t.shape), t.dtype.itemsize, [t], [out])
    return out


def _masked_dma(dst: Tensor, src: Tensor, mask: Any, call: str) -> None:
    if STATE.style != "new":
        saved, STATE.style = STATE.style, "old"
        try:
            isa.dma_copy(dst, src, mask=mask, call=call)
        finally:
            STATE.style = saved


# ---------------------------------------------------------------------------- older API: compute
def _fresh_result(values: np.ndarray, dtype: Any, buffer: str = "sbuf", call: str = "") -> Tensor:
    # An expression's temporary: the compiler places it (and reuses its space as soon as the
    # expression is done), so it is not held against SBUF capacity the way named tiles are.
    out = core.new_tensor(values.shape, dtype, buffer, call=call, count=False)
    out._store(values)
    out._fresh = True
    return out


def _as_tile(x: Any, what: str, call: str) -> Tensor:
    t = core.require_tensor(x, what, call)
    if t.is_hbm:
        raise fail("compute-on-hbm", f"{what} is an HBM tensor; load it into SBUF first (nl.load)", call, "no compute directly on HBM")
    return t


@_functional
def _binary(name: str, x: Any, y: Any, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    call = f"nl.{name}"
    op = isa.BINARY[name]
    tx, ty = isinstance(x, Tensor), isinstance(y, Tensor)
    if _index_operand(x) or _index_operand(y):
        # ``offsets[0, i] + i_f``: an index expression shifted by a tile's value (a dynamic
        # offset for nisa.tensor_copy_dynamic_src/dst), never tile data.
        if name != "add" or tx == ty:
            raise fail("bad-operand", "a host array or an index expression takes part in tile arithmetic only as an "
                       "integer index expression added to a one-element integer SBUF tile (a dynamic offset: "
                       "offsets[0, i] + i_f); tile data comes from NKI instructions", call)
        return core.dynamic_index(x if tx else y, y if tx else x, call)
    if not tx and not ty:
        raise fail("bad-operand", f"{call} needs at least one tile operand", call)
    if tx and ty:
        a, b = _as_tile(x, "x", call), _as_tile(y, "y", call)
        if a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
            raise fail("partition-broadcast", f"operands {a.shape} and {b.shape} differ in the partition dimension; "
                       "broadcast along partitions explicitly (tile.broadcast_to) or use a matmul", call,
                       "elementwise operands share the partition dimension")
        av, bv = _nki_broadcast(isa._f32(read(a, "x", call, mask)), isa._f32(read(b, "y", call, mask)))
        try:
            shape = np.broadcast_shapes(av.shape, bv.shape)
        except ValueError:
            raise fail("shape-mismatch", f"operands {a.shape} and {b.shape} do not broadcast", call) from None
        with np.errstate(all="ignore"):
            values = op(av, bv)
        engine = "gpsimd" if name == "power" else "vector"
        kind = "tensor_tensor" if av.shape == bv.shape else "tensor_scalar"
        out = _fresh_result(values, dtype or isa._wider(a, b), call=call)
        isa._consume(a, b)
        record(kind, engine, shape[0], free_size(shape), isa._dtype_bytes(a, b, out), [a, b], [out], op=name)
        return out
    t = _as_tile(x if tx else y, "x" if tx else "y", call)
    s = float(y if tx else x)
    v = isa._f32(read(t, "x", call, mask))
    with np.errstate(all="ignore"):
        values = op(v, s) if tx else op(s, v)
    out = _fresh_result(values, dtype or t.dtype, call=call)
    isa._consume(t)
    record("tensor_scalar", "gpsimd" if name == "power" else "vector", t.shape[0], free_size(t.shape),
           isa._dtype_bytes(t, out), [t], [out], op=name)
    return out


def _index_operand(v: Any) -> bool:
    """An operand of tile arithmetic that is an index expression or a host array (not a
    number): only a dynamic offset's index may be made of one (see _binary)."""
    return isinstance(v, core.DynamicIndex) or (isinstance(v, np.ndarray) and v.ndim > 0)


def _nki_broadcast(*vals: np.ndarray) -> list[np.ndarray]:
    """NKI broadcasting is partition-aligned: axis 0 of every operand is the partition axis,
    so an operand with fewer axes gains size-1 axes on the right (a (128,) row maximum
    broadcasts along the free axis of a (128, 512) tile), unlike NumPy's right alignment."""
    nd = max(v.ndim for v in vals)
    return [v.reshape(v.shape + (1,) * (nd - v.ndim)) if 0 < v.ndim < nd else v for v in vals]


@_functional
def _unary(name: str, x: Any, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    call = f"nl.{name}"
    t = _as_tile(x, "x", call)
    fn, engine = isa.UNARY[name]
    with np.errstate(all="ignore"):
        values = fn(isa._f32(read(t, "x", call, mask))).astype(np.float32)
    out = _fresh_result(values, dtype or t.dtype, call=call)
    isa._consume(t)
    if engine == "scalar":
        record("activation", "scalar", t.shape[0], free_size(t.shape), isa._dtype_bytes(t, out), [t], [out], func=name)
    else:
        record("tensor_scalar", "vector", t.shape[0], free_size(t.shape), isa._dtype_bytes(t, out), [t], [out], op=name)
    return out


@_functional
def _reduce(name: str, x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, mask: Any = None,
            **kw: Any) -> Tensor:
    call = f"nl.{name}"
    t = _as_tile(x, "x", call)
    if name == "var" and mask is None:
        return _variance(t, axis, dtype, keepdims)
    axes = isa._free_axes(axis, t.ndim, call)
    v = isa._f32(read(t, "x", call, mask))
    if name == "mean":
        values = np.mean(v, axis=axes, keepdims=True, dtype=np.float32)
        op = "add"
    elif name == "var":  # population variance (NumPy's default)
        values = np.var(v, axis=axes, keepdims=True, dtype=np.float32)
        op = "add"
    elif name == "all":  # whether every element is non-zero: 1 or 0
        values = np.all(v != 0, axis=axes, keepdims=True).astype(np.float32)
        op = "logical_and"
    else:
        op = isa._REDUCE_ALIASES.get(name, name)
        values = isa.REDUCE[op](v, axis=axes, keepdims=True).astype(np.float32)
    if not keepdims:
        values = values.reshape(tuple(s for i, s in enumerate(values.shape) if i not in axes))
    default = np.dtype(np.uint8) if name == "all" else t.dtype
    out = _fresh_result(values if values.ndim else values.reshape(1), dtype or default, call=call)
    isa._consume(t)
    record("tensor_reduce", "vector", t.shape[0], free_size(t.shape), isa._dtype_bytes(t), [t], [out], op=op)
    return out


def _variance(t: Tensor, axis: Any, dtype: Any, keepdims: bool) -> Tensor:
    """nl.var as the passes it takes, the way NKI's own LayerNorm kernels compute it: the
    mean on VectorE, the deviations on VectorE, and their squares summed in one ScalarE
    ``activation`` with a reduction; then the (P, 1) sum scaled by 1/n. A variance thus costs
    two VectorE passes and a ScalarE pass over the data where a mean costs one VectorE pass.
    Autocomp's recorded LayerNorm search measured the difference: two kernels that differ
    from the original only in computing ``nl.var(x)`` instead of ``mean(x*x) - mean(x)**2``
    (a ScalarE square and one VectorE mean) ran 0.49 and 0.51 ms slower on a trn1 (2.951,
    2.968 against 2.461 ms). Over a subset of the free axes the squares are summed on
    VectorE instead (ScalarE reduces all free elements)."""
    axes = isa._free_axes(axis, t.ndim, "nl.var")
    m = _reduce("mean", t, axis, keepdims=True)
    d = _binary("subtract", t, m)
    if t.ndim != 2 or axes != (1,):
        return _reduce("mean", _binary("multiply", d, d), axis, dtype=dtype or t.dtype, keepdims=keepdims)
    total = core.new_tensor((t.shape[0], 1), isa.F32, "sbuf", call="nl.var", count=False)
    isa.activation(None, "square", d, reduce_op="add", reduce_res=total, dtype=isa.F32, call="nl.var")
    v = _binary("multiply", total, 1.0 / t.shape[1], dtype=dtype or t.dtype)
    return v if keepdims else _reduce("sum", v, 1, dtype=dtype or t.dtype)


@_functional
def matmul(x: Any, y: Any, transpose_x: bool = False, mask: Any = None, **kw: Any) -> Tensor:
    """x @ y (or x.T @ y with transpose_x=True) into PSUM; without transpose_x the compiler
    first transposes x on TensorE, which the trace records as its own instruction."""
    x = _to_sbuf(_as_tile(x, "x", "nl.matmul"), "nl.matmul")
    y = _to_sbuf(_as_tile(y, "y", "nl.matmul"), "nl.matmul")
    if not transpose_x:
        if x.ndim != 2:
            raise fail("shape-mismatch", f"nl.matmul x must be 2-D, got {x.shape}", "nl.matmul")
        xt = isa.nc_transpose(None, x, call="nl.matmul (transpose of x)")
        xs = _fresh_result(read(xt, "x", "nl.matmul"), x.dtype, call="nl.matmul")
        record("tensor_copy", "vector", xs.shape[0], free_size(xs.shape), 4, [xt], [xs])
        x = xs
    return isa.nc_matmul(None, x, y, mask=mask, call="nl.matmul")


@_functional
def transpose(x: Any, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    return isa.nc_transpose(None, x, dtype=dtype, mask=mask, call="nl.transpose")


@_functional
def copy(x: Any, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    return isa.tensor_copy(None, x, dtype=dtype, mask=mask, call="nl.copy")


def device_print(prefix: str, x: Any, **kw: Any) -> None:
    """Prints a tile's shape, dtype and buffer at trace time (no values: kernels cannot
    observe data on the host)."""
    print(f"{prefix} {x!r}")


def broadcast_to(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Materialise a broadcast: along the partition axis on GpSimdE, along free axes on VectorE."""
    call = "broadcast_to"
    t = _as_tile(x, "x", call)
    shape = tuple(int(s) for s in shape)
    v = read(t, "x", call)
    if 0 < v.ndim < len(shape):  # partition-aligned: a (P,) tile is (P, 1)
        v = v.reshape(v.shape + (1,) * (len(shape) - v.ndim))
    try:
        values = np.broadcast_to(v, shape)
    except ValueError:
        raise fail("shape-mismatch", f"cannot broadcast {t.shape} to {shape}", call) from None
    if shape[0] > core.LIMITS["pmax"]:
        raise fail("partition-limit", f"broadcast to {shape}", call, "partition dimension <= 128")
    out = _fresh_result(np.array(values), t.dtype, call=call)
    engine = "gpsimd" if t.shape[0] != shape[0] else "vector"
    isa._consume(t)
    record("tensor_copy", engine, shape[0], free_size(shape), t.dtype.itemsize, [t], [out])
    return out


def _setitem(target: Tensor, key: Any, value: Any) -> None:
    """``tile[...] = value``: names an instruction's result (free) or copies a tile (VectorE)."""
    view = target[key]
    if view.is_hbm:
        raise fail("hbm-assign", "cannot assign into an HBM tensor with []=; use nl.store / nisa.dma_copy", "tensor[...] =")
    if isinstance(value, Tensor):
        src = _as_tile(value, "value", "tensor[...] =")
        if src._fresh == "inplace" and src._alloc is view._alloc:
            # `t[k] += x` ends with Python assigning t[k] its own updated view: no data moves.
            src._fresh = False
            return
        if src._fresh == "inplace":  # an updated tile copied elsewhere: a real copy
            src._fresh = False
        if isinstance(src._fresh, tuple) and src._fresh[0] == "loop_reduce":
            opname = src._fresh[1]
            fn = isa.BINARY[opname]
            new_v = isa._f32(src._values()).reshape(view.shape)
            was = view._written_mask()
            with np.errstate(all="ignore"):
                combined = np.where(was, fn(np.where(was, isa._f32(view._values()), 0), new_v), new_v)
            view._store(combined)
            src._fresh = False
            record("tensor_tensor", "vector", view.shape[0], free_size(view.shape), max(src.dtype.itemsize, view.dtype.itemsize),
                   [src, view], [view], op=opname)
            return
        core.check_bounds(src, None, "value", "tensor[...] =")
        values = src._values()
        if values.shape != view.shape and values.size == math.prod(view.shape):
            values = values.reshape(view.shape)
        # Naming a result moves what it holds: a tile loaded under a mask stays partly
        # unwritten (reads of it are checked where it is used).
        if src._all_written():
            view._store(values)
        else:
            view._store(values, src._written_mask().reshape(view.shape))
        if not (src._fresh and src._alloc.buffer == view._alloc.buffer):
            record("tensor_copy", "vector", view.shape[0], free_size(view.shape), max(src.dtype.itemsize, view.dtype.itemsize), [src], [view])
        elif not STATE.traced:
            pass  # (no regions to add: see core.State.traced)
        elif src._producer >= 0:
            core.amend(src._producer, writes=(view,))
        elif STATE.trace and any(w[0] == src._alloc.id for w in STATE.trace[-1].writes):
            core.amend(-1, writes=(view,))
        src._fresh = False
        return
    if isinstance(value, (int, float, np.integer, np.floating)):
        view._store(np.full(view.shape, float(value)))
        record("memset", "vector", view.shape[0], free_size(view.shape), view.dtype.itemsize, [], [view])
        return
    raise fail("bad-operand", f"cannot assign a {type(value).__name__} into a tile", "tensor[...] =")


def _inplace(name: str, target: Tensor, value: Any) -> Tensor:
    """``psum_tile += nl.matmul(...)`` accumulates in PSUM for free; other ``op=`` are VectorE ops."""
    if (name == "add" and isinstance(value, Tensor) and value._fresh and value._from_te
            and target._alloc.buffer == "psum"):
        # A matmul accumulation group starts from zero: elements of the PSUM tile that no
        # earlier instruction wrote count as 0 (what the compiler's first matmul does).
        add = isa._f32(value._values()).reshape(target.shape)
        if (target._key is None and target._valid is None and target._alloc.full and target.dtype == isa.F32
                and not np.may_share_memory(target._data, add)):
            # The common fp32 accumulator: added in place, the same fp32 sums as through a
            # temporary (every element is written already, so nothing else changes).
            np.add(target._data, add, out=target._data)
        elif target._all_written():
            target._store(isa._f32(target._values()) + add)
        else:
            target._store(np.where(target._written_mask(), isa._f32(target._values()), np.float32(0)) + add)
        if STATE.traced:
            core.amend(value._producer, reads=(target,), writes=(target,))
        value._fresh = False
        target._fresh = "inplace"
        return target
    if _index_operand(value):  # (an index expression is never tile data: see _binary)
        raise fail("bad-operand", "an index expression or host array cannot be added into a tile; tile data comes "
                   "from NKI instructions", f"tensor {name}=")
    result = _binary(name, target, value)
    target._store(read(result, "result", "+=").reshape(target.shape))
    if STATE.traced:
        core.amend(-1, writes=(target,))
    target._fresh = "inplace"
    return target


core.OPS["binary"] = lambda name, a, b: _binary(name, a, b)
core.OPS["inplace"] = _inplace
core.OPS["setitem"] = _setitem
core.OPS["broadcast_to"] = broadcast_to


def _make_ops() -> dict[str, isa.Op]:
    ops: dict[str, isa.Op] = {}
    for name, fn in isa.BINARY.items():
        ops[name] = isa.Op(name, fn, 2, "vector", call=(lambda n: lambda x, y, **kw: _binary(n, x, y, **kw))(name))
    for name, (fn, engine) in isa.UNARY.items():
        if name == "copy":
            ops[name] = isa.Op(name, fn, 1, engine, call=copy)
        else:
            ops[name] = isa.Op(name, fn, 1, engine, call=(lambda n: lambda x, **kw: _unary(n, x, **kw))(name))
    return ops


OPS = _make_ops()
isa.OP_OBJECTS.update(OPS)

def _make_reduction(n: str) -> Any:
    def reduction(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, mask: Any = None, **kw: Any) -> Tensor:
        return _reduce(n, x, axis, dtype, keepdims, mask)

    reduction.__name__ = reduction.__qualname__ = n  # nl.max is also a reduce_op= / op= identifier
    return reduction


REDUCTIONS = {name: _make_reduction(name) for name in ("sum", "max", "min", "mean", "prod", "var", "all")}


@_functional
def softmax(x: Any, axis: Any = -1, dtype: Any = None, **kw: Any) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along free axes, as the instructions a kernel
    would write for it: a max reduction, a subtraction, an exp on ScalarE, a sum, a divide."""
    t = _as_tile(x, "x", "nl.softmax")
    m = _reduce("max", t, axis, keepdims=True)
    e = _unary("exp", _binary("subtract", t, m))
    return _binary("divide", e, _reduce("sum", e, axis, keepdims=True), dtype=dtype or t.dtype)


@_functional
def rms_norm(x: Any, w: Any, axis: Any, n: Any, epsilon: float = 1e-6, dtype: Any = None, compute_dtype: Any = None,
             **kw: Any) -> Tensor:
    """``x / sqrt(sum(x*x, axis) / n + epsilon) * w`` (NKI's nl.rms_norm), as its instructions."""
    t = _as_tile(x, "x", "nl.rms_norm")
    if not isinstance(n, (int, float, np.integer, np.floating)) or n <= 0:
        raise fail("bad-operand", f"nl.rms_norm needs n, the number of values per rms, > 0; got {n!r}", "nl.rms_norm")
    ms = _binary("multiply", _reduce("sum", _binary("multiply", t, t), axis, keepdims=True), 1.0 / float(n))
    r = _unary("rsqrt", _binary("add", ms, float(epsilon)))
    return _binary("multiply", _binary("multiply", t, r), w, dtype=dtype or compute_dtype or t.dtype)


def expand_dims(data: Any, axis: Any) -> Tensor:
    """A view with a size-1 axis inserted at ``axis`` (no data moves)."""
    t = core.require_tensor(data, "data", "nl.expand_dims")
    shape = list(t.shape)
    ax = int(axis)
    if not -len(shape) - 1 <= ax <= len(shape):
        raise fail("bad-operand", f"axis {ax} is out of range for a {len(shape)}-D tile", "nl.expand_dims")
    shape.insert(ax % (len(shape) + 1), 1)
    return t.reshape(tuple(shape))


def shared_identity_matrix(n: int, dtype: Any = np.uint8, **kw: Any) -> Tensor:
    """An n x n identity matrix in SBUF (a trace-time constant the compiler materialises on
    GpSimdE, as an iota and a compare would)."""
    if not isinstance(n, (int, np.integer)) or not 0 < int(n) <= core.LIMITS["pmax"]:
        raise fail("bad-operand", f"shared_identity_matrix needs 0 < n <= {core.LIMITS['pmax']}, got {n!r}",
                   "nl.shared_identity_matrix")
    n = int(n)
    out = core.new_tensor((n, n), dtype, sbuf, call="nl.shared_identity_matrix")
    out._store(np.eye(n, dtype=np.float32))
    record("iota", "gpsimd", n, n, out.dtype.itemsize, [], [out])
    return out


# ---------------------------------------------------------------------------- more of the language
@_functional
def static_cast(x: Any, dtype: Any) -> Any:
    """Host helper: a NumPy array rounded to ``dtype`` (tiles: a converting copy)."""
    if isinstance(x, Tensor):
        return isa.tensor_copy(None, x, dtype=dtype, call="nl.static_cast")
    return np.asarray(x).astype(core.as_dtype(dtype, "nl.static_cast"))


def spmd_dim(size: int, *rest: Any) -> int:
    """A launch-grid dimension spread over Neuron cores: ``nl.spmd_dim(n, nl.nc(2))`` launches
    ``n`` instances on each of 2 cores, ``2 n`` along that axis in all."""
    total = int(size)
    for r in rest:
        total *= int(r)
    return total


def nc(n: int) -> int:
    return int(n)


def shared_constant(value: Any, dtype: Any = None, **kw: Any) -> Tensor:
    """A trace-time constant (e.g. an identity matrix) placed in HBM."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf" or arr.size > (1 << 22):
        raise fail("bad-operand", "nl.shared_constant takes a numeric NumPy array of at most 4M elements", "nl.shared_constant")
    t = core.new_tensor(arr.shape, dtype if dtype is not None else arr.dtype, hbm, call="nl.shared_constant")
    t._store(arr.astype(np.float64) if arr.dtype.kind != "f" else arr)
    return t


class _Limits:
    def __init__(self, dt: np.dtype) -> None:
        if core.is_float(dt):
            info = core._mld.finfo(dt) if dt.kind != "f" and core._mld is not None else np.finfo(dt)
        else:
            info = np.iinfo(dt)
        self.min = float(info.min) if core.is_float(dt) else int(info.min)
        self.max = float(info.max) if core.is_float(dt) else int(info.max)
        self.bits = int(info.bits)
        self.dtype = dt

    def __repr__(self) -> str:
        return f"limits({core.dtype_name(self.dtype)}, min={self.min}, max={self.max})"


def finfo(dtype: Any) -> _Limits:
    """Limits of a float dtype (``nl.finfo(nl.float32).min``)."""
    return _Limits(core.as_dtype(dtype, "nl.finfo"))


iinfo = finfo


@_functional
def where(condition: Any, x: Any, y: Any, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    """Elementwise select (VectorE): ``x`` where ``condition`` is non-zero, else ``y``."""
    call = "nl.where"
    c = _as_tile(condition, "condition", call)
    cv = isa._f32(read(c, "condition", call, mask))
    ops, reads = [], [c]
    for v, what in ((x, "x"), (y, "y")):
        if isinstance(v, Tensor):
            t = _as_tile(v, what, call)
            if t.shape[0] != c.shape[0]:
                raise fail("partition-broadcast", f"{what} {t.shape} and condition {c.shape} differ in the partition dimension", call)
            ops.append(isa._f32(read(t, what, call, mask)))
            reads.append(t)
        else:
            ops.append(np.float32(float(v)))
    try:
        values = np.where(*_nki_broadcast(cv != 0, *[o if isinstance(o, np.ndarray) else np.asarray(o) for o in ops]))
    except ValueError:
        raise fail("shape-mismatch", "condition, x and y do not broadcast", call) from None
    out = _fresh_result(values, dtype or (reads[1].dtype if len(reads) > 1 else c.dtype), call=call)
    isa._consume(*reads)
    record("tensor_tensor", "vector", c.shape[0], free_size(values.shape), isa._dtype_bytes(*reads, out), reads, [out], op="select")
    return out


@_functional
def loop_reduce(x: Any, op: Any, loop_indices: Any = (), dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    """The older API's loop-carried reduction: ``dst[...] = nl.loop_reduce(x, op=np.add,
    loop_indices=(i,))`` makes ``dst = dst op x`` across the iterations of loop ``i`` (the
    first write of an unwritten ``dst`` just stores ``x``). Returns a tile that, assigned
    into ``dst``, combines with what ``dst`` holds (one VectorE instruction)."""
    call = "nl.loop_reduce"
    t = _as_tile(x, "x", call)
    o = isa.binop(op, call)
    out = _fresh_result(isa._f32(read(t, "x", call, mask)), dtype or t.dtype, call=call)
    isa._consume(t)
    out._fresh = ("loop_reduce", o.name)
    return out


@_functional
def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    """Per partition, ``data``'s flattened free elements picked by ``indices`` (uint32), shaped
    like ``indices``: ``nisa.nc_n_gather`` returning a new tile."""
    return isa.nc_n_gather(None, data, indices, mask=mask, dtype=dtype, call="nl.gather_flattened")


# ---------------------------------------------------------------------------- random numbers, atomics, collectives
def rand(shape: Any, dtype: Any = np.float32, buffer: Any = None, name: str = "", **kw: Any) -> Tensor:
    """A new tensor of random values, uniform in [0, 1) (nl.rand), from the run's generator on
    VectorE (core.random_generator: the same values for the same seed, see random_seed; the
    NKI docs leave the generator's algorithm open, so these are NumPy's). An HBM tensor is
    filled by a DMA, as nl.zeros fills one."""
    call = "nl.rand"
    out = core.new_tensor(shape, dtype, buffer if buffer is not None else sbuf, name=name, call=call)
    out._store(core.random_generator().random(out.shape, dtype=np.float32))
    parts, free = core.partitions_free(out)
    if out.is_hbm:
        nbytes = int(out._data.size * out.dtype.itemsize)
        record("rand", "dma", parts, free, out.dtype.itemsize, [], [out], bytes=nbytes, chunk_bytes=nbytes)
    else:
        record("rand", "vector", parts, free, out.dtype.itemsize, [], [out])
    return out


def random_seed(seed: Any, mask: Any = None, **kw: Any) -> None:
    """Restart the random number generator from ``seed`` (nl.random_seed): a [1, 1] integer
    tile in SBUF or PSUM (NKI 2.x; AWS's flash attention computes it as nl.add(seed[0, 0],
    offset)) or, in the older API, a Python integer; 32 bits of it count. The same seed gives
    the same sequence of random numbers to nl.rand, nl.dropout and nisa.dropout after it.
    One VectorE instruction; under the older API's ``mask=`` that excludes everything it
    does nothing."""
    call = "nl.random_seed"
    reads: list[Tensor] = []
    if isinstance(seed, Tensor):
        t = isa._on_chip(seed, "seed", call)
        if math.prod(t.shape) != 1:
            raise fail("shape-mismatch", f"seed must be a [1, 1] tile holding one 32-bit value, got {t.shape}", call)
        value = float(np.asarray(read(t, "seed", call), dtype=np.float64).reshape(-1)[0])
        if not math.isfinite(value) or value != math.trunc(value):
            raise fail("bad-operand", f"the seed must be an integer, got {value}", call)
        reads.append(t)
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        value = int(seed)
    else:
        raise fail("bad-operand", f"seed must be a [1, 1] integer tile or an integer, got {type(seed).__name__}", call)
    if mask is not None:
        if STATE.style == "new":
            raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", call, static=True)
        if not np.asarray(mask, dtype=bool).any():
            return None
    core.seed_random(int(value))
    isa._consume(*reads)
    record("random_seed", "vector", 1, 1, 4, reads, [])
    return None


@_functional
def dropout(x: Any, rate: Any, dtype: Any = None, mask: Any = None, **kw: Any) -> Tensor:
    """``x`` with each element replaced by zero with probability ``rate`` (a number, a
    one-element tile, or a (P, 1) tile of per-partition rates): nisa.dropout returning a new
    tile. Kept elements are not scaled by 1/(1 - rate) (the NKI docs describe only the
    zeroing; AWS's flash attention multiplies by 1/(1 - dropout_p) after nl.dropout)."""
    return isa.dropout(None, x, rate, dtype=dtype, mask=mask, call="nl.dropout", one_element=True)


def atomic_rmw(dst: Any, value: Any = None, op: Any = None, mask: Any = None, predicate: Any = None,
               **kw: Any) -> None:
    """``dst = op(dst, value)`` on HBM data, atomically (nl.atomic_rmw): ``dst`` is an HBM
    view indexed by an index tile (indirect dynamic indexing, ``hbm[idx_tile, i_f]``, the only
    form NKI supports), ``value`` a tile of dst's shape or a number, ``op`` np.add / nl.add
    (the only operator NKI supports). Being atomic, rows that several indices name receive
    every update (duplicates add up, unlike an indirect nisa.dma_copy, where the last write
    wins). The sums are fp32, rounded to dst's dtype. The older API's ``mask=`` and a
    ``predicate=`` (a tile, non-zero meaning update, or a comparison of index expressions;
    one value per partition applies to its row) leave the other elements alone. A DMA."""
    call = "nl.atomic_rmw"
    d = core.require_tensor(dst, "dst", call)
    if not d.is_hbm:
        raise fail("buffer", f"dst is in {d._alloc.buffer}; nl.atomic_rmw updates HBM data", call)
    if d._dyn is None:
        raise fail("dynamic-index", "nl.atomic_rmw supports only indirect dynamic indexing of dst: index the HBM "
                   "tensor with a (P, 1) integer index tile in SBUF, dst=hbm[idx_tile, i_f]; to add into a view at "
                   "static positions use nisa.dma_copy(dst=..., src=..., dst_rmw_op=nl.add)", call,
                   "atomic_rmw dst indexed by an index tile")
    if op is None or isa.binop(op, call).name != "add":
        raise fail("bad-op", f"op={op!r}: nl.atomic_rmw supports only op=np.add (nl.add)", call)
    shape = tuple(d.shape)
    reads: list[Tensor] = []
    if isinstance(value, Tensor):
        v = _to_sbuf(_as_tile(value, "value", call), call)
        if v.shape[0] != shape[0] or free_size(v.shape) != free_size(shape):
            raise fail("shape-mismatch", f"value {v.shape} and dst {shape} must have the same partitions and elements "
                       "per partition", call)
        add = isa._f32(read(v, "value", call)).reshape(shape)
        reads.append(v)
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        add = np.full(shape, np.float32(value), dtype=np.float32)
    else:
        raise fail("bad-operand", f"value must be a tile or a number, got {type(value).__name__}", call)
    active = np.ones(shape, dtype=bool)
    if mask is not None:
        if STATE.style == "new":
            raise fail("mixed-api", "mask= belongs to the older neuronxcc.nki API", call, static=True)
        active &= _row_mask(np.asarray(mask, dtype=bool), shape, "mask", call)
    if predicate is not None:
        if isinstance(predicate, Tensor):
            pt = _as_tile(predicate, "predicate", call)
            cond = np.asarray(read(pt, "predicate", call)) != 0
            reads.append(pt)
        else:
            cond = np.asarray(predicate)
            if cond.dtype != np.bool_:
                raise fail("bad-operand", "predicate must be a tile or a comparison of index expressions", call)
        active &= _row_mask(cond, shape, "predicate", call)
    core.check_bounds(d, active, "dst", call)
    if d._valid is not None:
        active &= np.broadcast_to(d._valid, shape)
    base = d._data
    where = np.arange(base.size, dtype=np.int64).reshape(base.shape)[d._key][active]
    cells, slot = np.unique(where, return_inverse=True)
    sums = np.zeros(cells.size, dtype=np.float32)
    np.add.at(sums, slot, add[active])
    target = Tensor(d._alloc, base, d._written, np.unravel_index(cells, base.shape))
    if cells.size:
        if not target._all_written():
            raise fail("uninitialized-read", "nl.atomic_rmw adds into dst elements that no instruction wrote", call)
        target._store(isa._f32(read(target, "dst", call)) + sums)
    isa._consume(*reads)
    nbytes = int(math.prod(shape)) * d.dtype.itemsize
    record("atomic_rmw", "dma", shape[0] if shape else 1, free_size(shape), d.dtype.itemsize,
           reads[:1] + [d] + list(d._dyn) + reads[1:], [d], bytes=nbytes,
           chunk_bytes=int(min(isa._contiguous_bytes(d), nbytes)))
    return None


def _row_mask(cond: np.ndarray, shape: tuple[int, ...], what: str, call: str) -> np.ndarray:
    """A condition over ``shape``'s elements; one value per partition ((P,) or (P, 1))
    applies to the partition's whole row (partition-aligned, as NKI broadcasts)."""
    if cond.ndim == 1 and shape and cond.shape[0] == shape[0]:
        cond = cond.reshape((shape[0],) + (1,) * (len(shape) - 1))
    try:
        return np.broadcast_to(cond, shape)
    except ValueError:
        raise fail("shape-mismatch", f"{what} of shape {cond.shape} does not fit dst {shape}", call) from None


@_functional
def all_reduce(x: Any, op: Any, program_axes: Any, dtype: Any = None, mask: Any = None, parallel_reduce: bool = True,
               asynchronous: bool = False, **kw: Any) -> Tensor:
    """Reduce ``x`` with ``op`` over the SPMD programs along ``program_axes`` of the launch
    grid (nl.all_reduce), every program getting the result. The interpreter runs a grid's
    programs one after another, so it cannot combine tiles of several: it computes the
    single-program case, where the reduction over one program is that program's tile (a
    grid of size 1 along the axes, or no grid), and refuses more than one participant with
    an error rather than invent a result. Recorded as one collective transfer (a DMA)."""
    call = "nl.all_reduce"
    t = _as_tile(x, "x", call)
    isa.redop(op, call)
    axes = program_axes if isinstance(program_axes, (tuple, list)) else (program_axes,)
    if not axes or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) and a >= 0 for a in axes):
        raise fail("bad-operand", f"program_axes must be an axis of the launch grid or a tuple of them, got "
                   f"{program_axes!r}", call)
    grid = STATE.grid or (1,)
    participants = math.prod(grid[a] if a < len(grid) else 1 for a in axes)
    if participants != 1:
        raise fail("collective", f"nl.all_reduce over {participants} SPMD programs (axes {tuple(int(a) for a in axes)} "
                   f"of the launch grid {tuple(STATE.grid)}) is not supported in the interpreter: it runs the "
                   "programs one after another and cannot combine their tiles. Launch with size 1 along "
                   "program_axes, or have each program store its partial result into a shared_hbm tensor and "
                   "reduce those with NKI instructions", call, "all_reduce over a single program in the interpreter")
    values = read(t, "x", call, mask)
    out = _fresh_result(values if values.dtype.kind in "iu" else isa._f32(values), dtype or t.dtype, call=call)
    isa._consume(t)
    nbytes = int(values.size) * max(t.dtype.itemsize, out.dtype.itemsize)
    record("all_reduce", "dma", t.shape[0], free_size(t.shape), max(t.dtype.itemsize, out.dtype.itemsize), [t], [out],
           bytes=nbytes, chunk_bytes=nbytes)
    return out


import types as _types

FLOAT_LIMITS = {alias: _types.SimpleNamespace(min=_Limits(core.DTYPES[name]).min, max=_Limits(core.DTYPES[name]).max)
                for alias, name in (("fp32", "float32"), ("fp16", "float16"), ("bf16", "bfloat16"))
                if name in core.DTYPES}

# Names exported by both module styles.
SHARED = {
    "static_cast": static_cast, "gather_flattened": gather_flattened, "spmd_dim": spmd_dim, "nc": nc, "shared_constant": shared_constant, "finfo": finfo,
    "iinfo": iinfo, **FLOAT_LIMITS,
    "sbuf": sbuf, "psum": psum, "hbm": hbm, "shared_hbm": shared_hbm, "private_hbm": private_hbm,
    "tile_size": tile_size, "par_dim": par_dim, "ds": ds, "arange": arange, "mgrid": mgrid,
    "affine_range": affine_range, "sequential_range": sequential_range, "static_range": static_range,
    "program_id": program_id, "num_programs": num_programs, "program_ndim": program_ndim,
    "ndarray": ndarray, "zeros": zeros, "ones": ones, "full": full, "zeros_like": zeros_like,
    "ndarray_like": ndarray_like, "empty_like": empty_like, "device_print": device_print,
    "softmax": softmax, "rms_norm": rms_norm, "expand_dims": expand_dims,
    "shared_identity_matrix": shared_identity_matrix, "rand": rand, "random_seed": random_seed, "dropout": dropout,
    "atomic_rmw": atomic_rmw, "all_reduce": all_reduce,
}

OLDER_ONLY = {
    "load": load, "store": store, "load_transpose2d": load_transpose2d, "matmul": matmul,
    "transpose": transpose, "broadcast_to": broadcast_to, "where": where, "loop_reduce": loop_reduce, **REDUCTIONS,
}
