"""Interpreter state: allocations, tensor views, indexing, constraint checks, the trace.

Design: every NKI tensor is a *view* (:class:`Tensor`) onto an :class:`Allocation` that owns
two NumPy arrays, the data and a boolean "written" mask of the same shape. Instructions
read and write whole views at once (vectorised NumPy, never a Python loop per element).
New on-chip and output buffers start as NaN and unwritten, so a read of memory nobody
wrote is caught exactly, and an output that the kernel did not fully store is caught
before any comparison.

The hardware limits enforced here are those of a trn1 NeuronCore-v2 (see ``LIMITS``).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import weakref
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.index_grid import IndexGrid
from autocomp.backends.nki.trace import Instr

try:  # bfloat16 and fp8 come from ml_dtypes; the interpreter needs it for those dtypes only
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - install.sh installs it
    _mld = None

_INTERP_DIR = os.path.dirname(os.path.abspath(__file__))

# NeuronCore-v2 (trn1) limits; numbers from the public NKI docs (see cost_params.toml).
LIMITS: dict[str, int] = {
    "pmax": 128,  # partitions
    "sbuf_bytes_per_partition": 192 * 1024,
    "psum_bytes_per_partition": 16 * 1024,
    "psum_tile_bytes_per_partition": 2 * 1024,
    "stationary_fmax": 128,
    "moving_fmax": 512,
}

HBM_BUFFERS = ("hbm", "shared_hbm", "private_hbm")
ON_CHIP = ("sbuf", "psum")


class BufferKind(str):
    """``nl.sbuf``, ``nl.psum``, ``nl.hbm``…: a named memory. ``tiles`` (from
    ``ncc.sbuf.mod_alloc(num_free_tiles=...)``) is how many physical tiles the blocks of a
    block tensor rotate through: its footprint, whatever the number of blocks."""

    tiles: tuple[int, ...] = ()
    base_addr: int | None = None

    def __repr__(self) -> str:
        return f"nl.{str(self)}"


def buffer_with_tiles(name: str, tiles: Any, base_addr: Any = None, traced: bool = True) -> BufferKind:
    """``traced=False``: the address as given (the kernel process already resolved it; it is
    still checked against the partition where the tensor is allocated)."""
    b = BufferKind(name)
    if base_addr is not None:
        if not isinstance(base_addr, (int, np.integer)) or base_addr < 0:
            raise fail("bad-buffer", f"base_addr={base_addr!r} must be a non-negative byte offset", "mod_alloc")
        b.base_addr = _traced_once(int(base_addr)) if traced else int(base_addr)
    if tiles:
        t = tuple(int(x) for x in (tiles if isinstance(tiles, (tuple, list)) else (tiles,)))
        if not all(0 < x <= 1 << 16 for x in t) or len(t) > 8:
            raise fail("bad-buffer", f"num_free_tiles={tiles!r} must be small positive integers", "mod_alloc")
        b.tiles = t
    return b


def _traced_once(base_addr: int) -> int:
    """The address a fixed placement gets, as NKI's tracer sees it.

    NKI traces a kernel's Python once: a loop body (``nl.affine_range``,
    ``sequential_range``) is traced a single time with a symbolic index, so Python
    arithmetic in it (``addr += size`` after each ``mod_alloc(base_addr=addr)``, as in AWS's
    allocated attention kernels) runs once, and every iteration uses the addresses of that
    one pass. The interpreter runs the body per iteration, so an allocation made again from
    the same call path (the same kernel lines up the stack) keeps its first address."""
    frame = sys._getframe(2)
    key = []
    while frame is not None:
        fname = frame.f_code.co_filename
        if not _abs(fname).startswith(_INTERP_DIR):
            key.append((fname, frame.f_lineno))
        frame = frame.f_back
    if STATE.proof is not None:
        STATE.proof.give_up("tiles placed at fixed addresses (mod_alloc) may share bytes under different names")
    return STATE.placed.setdefault(tuple(key), base_addr)


# ---------------------------------------------------------------------------- state
class State:
    """Everything one kernel run accumulates. Reset by :func:`begin_run`."""

    def __init__(self) -> None:
        self.style: str | None = None  # "new" (import nki) or "old" (neuronxcc.nki)
        self.kernel_file: str = ""
        self.trace: list[Instr] = []
        self.used: dict[str, int] = {"sbuf": 0, "psum": 0}
        # Counted on-chip allocations still referenced (each removes itself when it dies).
        self.live: "dict[int, weakref.ref[Allocation]]" = {}
        self.gen = next(_GENERATIONS)
        self.reverse_affine: bool = False
        # Whether instructions are recorded with their regions: the reversed-loop run only
        # needs the kernel's outputs (its trace is never costed or checked), so it skips the
        # regions, liveness spans and amendments and records a placeholder per instruction.
        self.traced: bool = True
        self.active: bool = False
        self.ids = itertools.count(1)
        self.hbm_ids = itertools.count(-1, -1)
        self.program_ids: tuple[int, ...] = ()
        self.grid: tuple[int, ...] = ()
        self.shared_memo: dict[tuple, "Allocation"] = {}
        self.placed: dict[tuple, int] = {}  # call path -> base_addr (see _traced_once)
        # Capacity by the compiler's liveness: each counted on-chip allocation's first and
        # last instruction; checked at the end of a run when Python's references overflowed.
        self.alloc_info: dict[int, tuple] = {}
        self.spans: dict[int, list[int]] = {}
        self.overflow = False
        self.shared_counter = itertools.count()
        self.last_act_func: str | None = None
        # The kernel line of the request being served when the kernel's Python runs in
        # another process (autocomp.backends.nki.remote); None when it runs in this one.
        self.remote_line: int | None = None
        # (file, line) of the kernel code whose call into nl.*/nisa.* is running here, set
        # by that call's wrapper (install._styled): call_site's answer without a frame walk.
        self.site: tuple[str, int] | None = None
        # Loop context of recorded instructions (the cost model's view of the compiler's
        # loop vectorization): a stack of [id, trip count, iteration, is affine_range] for the
        # loops being iterated here, and while serving the kernel process, the innermost
        # affine loop it reported for the request (False: none).
        self.loops: list[list[Any]] = []
        self.loop_ids = itertools.count()
        self.remote_loop: Any = None
        # The affine_range loops around the request being served, as the kernel process
        # reported them: ((loop id, iteration), ...), outermost first (see affine_path).
        self.remote_affine: tuple = ()
        self.path_key: tuple | None = None  # affine_path's cache: (innermost loop id, iteration)
        self.path: tuple = ()
        # With prove_reorder, the accesses inside affine_range loops (reorder_proof.AccessLog).
        self.proof: Any = None
        # Index arrays this interpreter made read-only for the run (the remote decoder's
        # entries, used again and again): id -> (the array, min, max). An entry holds its
        # array, so an id names it only while it is the very same object.
        self.index_bounds: dict[int, tuple[np.ndarray, int, int]] = {}
        # Set while nisa.tensor_copy_dynamic_src/dst move a view at a dynamic offset (an
        # on-chip view indexed by a tile's value): the only instructions that may (see read).
        self.dynamic_ok: bool = False
        # The VectorE random number generator (nl.rand, nl.dropout, nisa.dropout): created on
        # first use from DEFAULT_RANDOM_SEED, replaced by nl.random_seed (see random_generator).
        self.rng: "np.random.Generator | None" = None


def frozen_index_array(arr: np.ndarray) -> np.ndarray:
    """``arr`` (an integer or boolean array this interpreter owns and no kernel code can
    reach) made read-only, its bounds computed once for this run's index checks."""
    arr.flags.writeable = False
    if arr.size and arr.dtype.kind in "iu":
        lo, hi = int(arr.min()), int(arr.max())
        STATE.index_bounds[id(arr)] = (arr, lo, hi, _range_axis(arr, lo, hi))
    return arr


def range_form(x: np.ndarray) -> tuple[int, int] | None:
    """(first value, axis) when the integer array ``x`` runs first, first+1, … along one
    axis and repeats along the others (``nl.arange(n)[:, None] + k``, or a dense
    ``nl.mgrid`` grid plus an offset), else None. One pass over ``x``, and none over a
    one-axis array beyond its own length, and none at all over an :class:`IndexGrid` that
    knows its form."""
    if type(x) is IndexGrid and x.form is not None:
        return x.form
    if x.ndim == 0 or x.size < 2:
        return None
    flat0 = x.reshape(-1)[0]
    for axis, extent in enumerate(x.shape):
        if extent < 2:
            continue
        line = x[tuple(slice(None) if i == axis else slice(0, 1) for i in range(x.ndim))]
        if line.reshape(-1)[1] == flat0:
            continue  # not the axis it runs along
        first = int(flat0)
        if not np.array_equal(line.reshape(-1), np.arange(first, first + extent)):
            return None
        if line.size == x.size or np.array_equal(x, np.broadcast_to(line, x.shape)):
            return first, axis
        return None
    return None


def _range_axis(arr: np.ndarray, lo: int, hi: int) -> int | None:
    """The axis along which ``arr`` runs lo, lo+1, …, hi while repeating along every other
    axis (see :func:`range_form`), -1 for a single element, None otherwise. An index made
    of such arrays, one per axis in order, selects what a slice per axis would:
    :func:`_array_key` then gives the view a basic-slicing equivalent."""
    if arr.size == 1:
        return -1
    form = range_form(arr)
    if form is None or form[0] != lo or lo + arr.shape[form[1]] - 1 != hi:
        return None
    return form[1]


def frozen_range_array(lo: int, axis: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The read-only index array that runs lo, lo+1, … along ``axis`` and repeats along the
    others (how the kernel process sends nl.arange/nl.mgrid expressions: see
    tracer.range_form), its bounds and range axis known without looking at it."""
    n = shape[axis]
    line = (np.arange(n, dtype=np.int64) + lo).astype(dtype, copy=False)
    arr = np.broadcast_to(line.reshape([n if i == axis else 1 for i in range(len(shape))]), shape)
    STATE.index_bounds[id(arr)] = (arr, lo, lo + n - 1, axis if n > 1 else -1)
    return arr


_GENERATIONS = itertools.count()
STATE = State()


def begin_run(kernel_file: str = "", reverse_affine: bool = False, traced: bool = True,
              prove_reorder: bool = False) -> None:
    """Start a fresh kernel run (``traced=False``: outputs only, see State.traced;
    ``prove_reorder``: log the accesses inside affine_range loops, see reorder_proof)."""
    STATE.__init__()  # the API style is fixed again by the run's first NKI call
    STATE.kernel_file = os.path.abspath(kernel_file) if kernel_file else ""
    STATE.reverse_affine = reverse_affine
    STATE.traced = traced
    if prove_reorder and traced:
        from autocomp.backends.nki.reorder_proof import AccessLog

        STATE.proof = AccessLog()
    STATE.active = True


def end_run() -> list[Instr]:
    STATE.active = False
    return STATE.trace


# ---------------------------------------------------------------------------- sites
_ABS: dict[str, str] = {}


def _abs(fname: str) -> str:
    path = _ABS.get(fname)
    if path is None:
        path = _ABS[fname] = os.path.abspath(fname)
    return path


# code object -> (absolute path of its file, whether it is the interpreter's own code): the
# frame walk of call_site runs for every instruction and allocation.
_CODE_INFO: dict[Any, tuple[str, bool]] = {}


_ALL_TRUE: dict[tuple[int, ...], np.ndarray] = {}


def all_true(shape: tuple[int, ...]) -> np.ndarray:
    """A read-only mask of ``shape`` that is True everywhere: the written mask of a tensor
    written whole. One shared view per shape (it allocates nothing and cannot be written),
    made once instead of once per instruction result (tens of thousands at published shapes)."""
    mask = _ALL_TRUE.get(shape)
    if mask is None:
        mask = np.broadcast_to(np.True_, shape)
        if len(_ALL_TRUE) < 4096:
            _ALL_TRUE[shape] = mask
    return mask


def call_site() -> tuple[str, int]:
    """File and line of the kernel source that made the current NKI call."""
    if STATE.remote_line is not None and STATE.kernel_file:
        return STATE.kernel_file, STATE.remote_line
    if STATE.site is not None:
        return STATE.site
    frame = sys._getframe(1)
    fallback: tuple[str, int] | None = None
    kernel_file = STATE.kernel_file
    while frame is not None:
        code = frame.f_code
        info = _CODE_INFO.get(code)
        if info is None:
            path = _abs(code.co_filename)
            info = _CODE_INFO[code] = (path, path.startswith(_INTERP_DIR))
        if kernel_file and info[0] == kernel_file:
            return code.co_filename, frame.f_lineno
        if fallback is None and not info[1]:
            fallback = (code.co_filename, frame.f_lineno)
            if not kernel_file:
                return fallback
        frame = frame.f_back
    return fallback or ("<kernel>", 0)


def kernel_site(frame: Any) -> tuple[str, int] | None:
    """What :func:`call_site` answers while ``frame`` is the innermost frame of the kernel
    file (its file and current line), or None when ``frame`` runs other code."""
    code = frame.f_code
    info = _CODE_INFO.get(code)
    if info is None:
        path = _abs(code.co_filename)
        info = _CODE_INFO[code] = (path, path.startswith(_INTERP_DIR))
    if STATE.kernel_file and info[0] == STATE.kernel_file:
        return code.co_filename, frame.f_lineno
    return None


def fail(kind: str, message: str, call: str = "", limit: str = "", static: bool = False) -> NkiError:
    """Build an :class:`NkiError` located at the kernel line making the call (raise it)."""
    file, line = call_site()
    return NkiError(kind, message, call=call, limit=limit, file=file, line=line, static=static)


# ---------------------------------------------------------------------------- dtypes
def _dtype_table() -> dict[str, np.dtype]:
    table = {
        "float32": np.dtype(np.float32),
        "float16": np.dtype(np.float16),
        "int32": np.dtype(np.int32),
        "uint32": np.dtype(np.uint32),
        "int16": np.dtype(np.int16),
        "uint16": np.dtype(np.uint16),
        "int8": np.dtype(np.int8),
        "uint8": np.dtype(np.uint8),
        "bool_": np.dtype(np.bool_),
        "tfloat32": np.dtype(np.float32),  # stored as fp32; TensorE rounds operands
    }
    if _mld is not None:
        table["bfloat16"] = np.dtype(_mld.bfloat16)
        table["float8_e4m3"] = np.dtype(_mld.float8_e4m3fn)
        table["float8_e5m2"] = np.dtype(_mld.float8_e5m2)
    # MX (microscaling, NeuronCore-v4) packed types: four FP8 (or FP4) values in one element,
    # stored as the unsigned integer of that width; the element format rides in the metadata.
    for name, base, elem in (("float8_e5m2_x4", np.uint32, "float8_e5m2"), ("float8_e4m3fn_x4", np.uint32, "float8_e4m3fn"),
                             ("float4_e2m1fn_x4", np.uint16, "float4_e2m1fn")):
        table[name] = np.dtype(base, metadata={"mx": elem})
    return table


DTYPES = _dtype_table()


def as_dtype(dtype: Any, call: str = "") -> np.dtype:
    """Accept nl.float32, np.float32, 'bfloat16', ml_dtypes types."""
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return DTYPES[dtype]
    try:
        return np.dtype(dtype)
    except TypeError:
        raise fail("bad-dtype", f"unsupported dtype {dtype!r}; use nl.float32, nl.bfloat16, nl.float16, nl.int32, …", call) from None


def mx_format(dt: np.dtype) -> str | None:
    """The element format of an MX ``*_x4`` dtype (None for ordinary dtypes)."""
    meta = dt.metadata
    return meta.get("mx") if meta else None


def dtype_name(dt: np.dtype) -> str:
    mx = mx_format(dt)
    if mx is not None:
        return mx + "_x4"
    for name, d in DTYPES.items():
        if d == dt and name != "tfloat32":
            return name
    return str(dt)


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dtype_name(dt) in ("bfloat16", "float8_e4m3", "float8_e5m2")


# ---------------------------------------------------------------------------- memory
def _release(gen: int, buffer: str, nbytes: int) -> None:
    if gen == STATE.gen:  # allocations of an earlier run must not credit this one
        STATE.used[buffer] = STATE.used.get(buffer, 0) - nbytes


class Allocation:
    """One tensor's storage: data plus written-mask, in a named buffer."""

    __slots__ = ("id", "buffer", "_data", "_written", "_phys", "pdim", "name", "line", "bytes_pp", "is_input", "counted",
                 "full", "dirty", "whole", "addr", "_gen",
                 "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, buffer: str, name: str = "", *,
                 data: np.ndarray | None = None, count: bool = True, call: str = "nl.ndarray", pdim: int = 0) -> None:
        if type(shape) is not tuple or not all(type(s) is int for s in shape):
            shape = tuple(int(s) for s in shape)
        self.pdim = pdim
        if any(s <= 0 for s in shape):
            raise fail("bad-shape", f"shape {shape} has a non-positive dimension", call)
        self.buffer = str(buffer)
        on_chip = self.buffer in ON_CHIP
        self.id = next(STATE.ids) if on_chip else next(STATE.hbm_ids)
        self.name = name
        _, self.line = call_site()
        self.is_input = False
        self.counted = False
        dtype = np.dtype(dtype)
        itemsize = dtype.itemsize
        # Block dimensions (those before an nl.par_dim) are separate tiles in the same
        # partitions: every dimension but the partition one costs bytes per partition.
        self.bytes_pp = (math.prod(shape) // shape[pdim] if shape else 1) * itemsize if on_chip else 0
        tile_pp = (math.prod(shape[pdim + 1:]) if shape else 1) * itemsize if on_chip else 0
        if on_chip and pdim and self.buffer == "sbuf":
            # The compiler allocates each block of an SBUF block tensor as its live range
            # requires (spilling what does not fit): each block must fit, and the tensor
            # holds one block of space for capacity purposes.
            self.bytes_pp = min(self.bytes_pp, tile_pp)
        tiles = getattr(buffer, "tiles", ())
        if on_chip and pdim and tiles:
            # Modular allocation: block i lives in physical tile (i mod num_free_tiles).
            nblocks = [min(int(n), int(t)) for n, t in zip(shape[:pdim], tiles)] + list(shape[len(tiles):pdim])
            self.bytes_pp = min(self.bytes_pp, math.prod(nblocks) * tile_pp)
        if self.buffer == "psum" and pdim:
            # The compiler gives each block of a PSUM block tensor a bank as the block
            # becomes live and frees it after its last use: such a tensor holds one bank.
            self.bytes_pp = min(self.bytes_pp, max(tile_pp, LIMITS["psum_tile_bytes_per_partition"]))
        if on_chip:
            if len(shape) < 1:
                raise fail("bad-shape", "on-chip tensors need a partition dimension", call)
            if shape[pdim] > LIMITS["pmax"]:
                raise fail(
                    "partition-limit",
                    f"{self.buffer} tensor of shape {shape} has partition dimension {shape[pdim]}",
                    call,
                    f"partition dimension (axis {pdim}) <= {LIMITS['pmax']}",
                )
            if self.buffer == "psum" and tile_pp > LIMITS["psum_tile_bytes_per_partition"]:
                raise fail(
                    "psum-tile-limit",
                    f"PSUM tile of shape {shape} ({dtype_name(np.dtype(dtype))}) needs {tile_pp} bytes per partition",
                    call,
                    "PSUM tile <= 2 KiB per partition (512 fp32 elements)",
                )
            base = getattr(buffer, "base_addr", None)
            cap = LIMITS["sbuf_bytes_per_partition" if self.buffer == "sbuf" else "psum_bytes_per_partition"]
            if base is not None:
                # Placed by the kernel at a fixed address (ncc.sbuf.mod_alloc(base_addr=...)):
                # it must fit in the partition; the kernel manages overlap itself.
                count = False
                if base + self.bytes_pp > cap:
                    raise fail("capacity", f"{shape} {dtype_name(np.dtype(dtype))} at base_addr {base} needs bytes "
                               f"{base}..{base + self.bytes_pp} of each partition", call,
                               f"{self.buffer.upper()} {cap // 1024} KiB per partition")
            if count:
                if self.bytes_pp > cap:
                    raise fail(
                        "capacity",
                        f"allocating {shape} {dtype_name(np.dtype(dtype))} ({self.bytes_pp} B/partition) with "
                        f"{STATE.used[self.buffer]} B/partition of {self.buffer.upper()} already live; "
                        f"largest live: {_largest_live(self.buffer)}",
                        call,
                        f"{self.buffer.upper()} {cap // 1024} KiB per partition over live allocations",
                    )
                if STATE.used[self.buffer] + self.bytes_pp > cap:
                    # Python still references more than fits, but the compiler frees a tile
                    # after its last use: decided at the end of the run from the trace.
                    STATE.overflow = True
                STATE.alloc_info[self.id] = (self.buffer, self.bytes_pp, self.line, name, shape, dtype)
                STATE.used[self.buffer] += self.bytes_pp
                self.counted = True
                # Released by __del__ (when Python drops the last reference), not by a
                # weakref.finalize: the same moment, at a fraction of the cost per tile.
                self._gen = STATE.gen
                STATE.live[self.id] = weakref.ref(self)
        # full: every element has been written (reads skip the written-mask checks);
        # dirty: unwritten elements hold garbage (memory is not cleared up front; a read of a
        # partly written view shows them as NaN, integers 0, as if it had been).
        self.full = data is not None
        self.dirty = False
        self.whole: tuple | None = None  # region() of the whole allocation, once computed
        self.addr = 0  # the data's address, once region() first needs it (0: not yet)
        if data is not None:
            self._data = data
            # Written whole from the start (and stores into a full allocation leave the mask
            # alone): one read-only True seen in every position, not a mask to allocate and
            # fill (an instruction's result at published shapes, tens of thousands of times).
            self._written = all_true(shape)
            self._phys = data
        else:
            # Stored partition-major (the partition axis first in memory), viewed in the
            # kernel's axis order: block dimensions come before the partition axis.
            pshape = (shape[pdim],) + shape[:pdim] + shape[pdim + 1:] if shape else shape
            self._phys = np.empty(pshape, dtype=dtype)
            self.dirty = True
            self._data = np.moveaxis(self._phys, 0, pdim) if pdim else self._phys
            written = np.zeros(pshape, dtype=bool)
            self._written = np.moveaxis(written, 0, pdim) if pdim else written

    def __del__(self) -> None:
        try:
            if self.counted:
                _release(self._gen, self.buffer, self.bytes_pp)
                if self._gen == STATE.gen:
                    STATE.live.pop(self.id, None)
        except Exception:  # __init__ failed before counting it, or the interpreter is shutting down
            pass


def _largest_live(buffer: str) -> str:
    items = [a for a in (r() for r in list(STATE.live.values())) if a is not None and a.buffer == buffer]
    items.sort(key=lambda a: -a.bytes_pp)
    return ", ".join(f"{a.name or 'tensor'}{tuple(a._data.shape)} from line {a.line} ({a.bytes_pp} B)" for a in items[:3]) or "none"


# Operator hooks filled in by language.py (tile arithmetic of the older functional API).
OPS: dict[str, Callable[..., Any]] = {}


def _is_index_array(k: Any) -> bool:
    return isinstance(k, np.ndarray) or (isinstance(k, (list, tuple)) and k and not isinstance(k, str))


class Tensor:
    """A view of an allocation: what kernels index, pass to instructions and return."""

    # Internal state is underscore-named: kernels may not touch private attributes (static.py).
    __slots__ = ("_alloc", "_data", "_written", "_key", "_basic", "_fresh", "_from_te", "_producer", "_valid", "_kshape",
                 "_dyn", "__weakref__")

    def __init__(self, alloc: Allocation, data: np.ndarray, written: np.ndarray, key: tuple | None = None,
                 valid: np.ndarray | None = None) -> None:
        self._alloc = alloc
        # For an index-expression view that reaches past the tensor: which elements are in
        # bounds. Such a view may only be used under a mask= that excludes the others (NKI
        # checks bounds after applying the mask, as the tail tiles of tutorials rely on).
        self._valid = valid
        self._kshape: tuple[int, ...] | None = None  # shape of an index-array view, computed once
        self._data = data
        self._written = written
        self._key = key
        # (slices, their shape) selecting exactly the elements the index arrays of ``key``
        # select, in the same order (None when there are none): the data moves by basic
        # slicing, while shape, bounds and the cost model's regions still follow ``key``.
        self._basic: tuple | None = None
        self._fresh = False
        self._from_te = False
        self._producer = -1
        # The tiles whose values index this view (None: none): the (P, 1) index tile of an
        # indirect DMA view of HBM (``hbm[idx_tile, i_f]``), or the one-element offset tiles
        # of an on-chip view at a dynamic offset (``sbuf[i_p, off_tile + i_f]``), which only
        # nisa.tensor_copy_dynamic_src/dst may move (see read and _store).
        self._dyn: tuple["Tensor", ...] | None = None

    # -- metadata -------------------------------------------------------------------
    @property
    def buffer(self) -> BufferKind:
        return BufferKind(self._alloc.buffer)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype  # the allocation's, or what an ap(dtype=...) view reinterprets it as

    @property
    def shape(self) -> tuple[int, ...]:
        if self._key is None:
            return self._data.shape  # already a tuple (a hot path: every instruction asks)
        if self._kshape is None:
            shape = _advanced_shape(self._key) if self._data.size else ()
            self._kshape = tuple(self._data[self._key].shape) if shape is None else shape
        return self._kshape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def on_chip(self) -> bool:
        return self._alloc.buffer in ON_CHIP

    @property
    def is_hbm(self) -> bool:
        return self._alloc.buffer in HBM_BUFFERS

    def __repr__(self) -> str:
        return f"<nki tensor {self.shape} {dtype_name(self.dtype)} in {self._alloc.buffer}>"

    def __len__(self) -> int:
        return self.shape[0]

    def __bool__(self) -> bool:
        raise fail("data-dependent-control", "a tensor has no truth value at trace time; NKI control flow cannot depend on tensor data")

    def __iter__(self):
        raise fail("bad-iteration", "iterate over nl.affine_range(n) and index the tensor, not over the tensor itself")

    # -- indexing -------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "Tensor":
        if isinstance(key, (np.ndarray, np.bool_, bool)) and np.asarray(key).dtype == bool:
            # ``view[predicate]`` (older API): the instruction touches only the elements where
            # the predicate of index expressions holds, like its mask=. Elements it excludes
            # count as out of bounds here: fine where nothing is excluded or the instruction's
            # own mask= excludes them too.
            try:
                pred = np.broadcast_to(np.asarray(key), self.shape)
            except ValueError:
                raise fail("index", f"a predicate of shape {np.shape(key)} does not fit a view of shape {self.shape}",
                           "tensor[...]") from None
            if pred.all():
                return self
            valid = pred if self._valid is None else (np.broadcast_to(self._valid, self.shape) & pred)
            view = Tensor(self._alloc, self._data, self._written, self._key, valid)
            view._dyn = self._dyn
            return view
        if self._key is not None:
            raise fail("nested-index", "this view was made with index arrays (nl.arange/nl.mgrid); index the original tensor once with the combined indices", "tensor[...]")
        fast = _plain_key(key, self._data.shape)
        if fast is not None:  # integers and in-bounds slices only: what normalize_key would return
            key = fast
        else:
            arrays = _array_key(key, self._data.shape)
            if arrays is not None:  # integers and in-bounds index arrays: likewise
                view = Tensor(self._alloc, self._data, self._written, arrays[0], None)
                view._basic = arrays[1]
                return view
            indirect = None
            keys = key if isinstance(key, tuple) else (key,)
            if any(isinstance(k, (Tensor, DynamicIndex)) for k in keys):
                if self.on_chip:
                    return self._dynamic_view(keys)
                indirect = tuple(k for k in keys if isinstance(k, Tensor))
                key = self._indirect_key(key)
            oob: list[str] = []
            key = normalize_key(key, self.shape, "tensor[...]", deferred=oob)
            if any(isinstance(k, np.ndarray) for k in key):
                valid = None
                if oob:
                    valid, key = _clip_key(key, self.shape)
                view = Tensor(self._alloc, self._data, self._written, key, valid)
                view._dyn = indirect or None
                return view
        if self.on_chip:
            key = _keep_free_dims(key, self.ndim - self._alloc._data.ndim + self._alloc.pdim)
        if all(isinstance(k, (int, np.integer)) for k in key):
            key = key + (Ellipsis,)  # a 0-d view (one element), not a NumPy scalar copy
        return Tensor(self._alloc, self._data[key], self._written[key], None)

    def _indirect_key(self, key: Any) -> tuple:
        """Indirect DMA: an on-chip integer tile of (P, 1) row indices indexes an HBM tensor
        (``hbm[b, idx_tile, i_f]``), gathering or scattering rows by computed positions."""
        if not self.is_hbm:
            raise fail("dynamic-index", "indexing with a tile's values is an indirect DMA: only HBM tensors can be "
                       "indexed by a tile", "tensor[...]")
        out = []
        for k in (key if isinstance(key, tuple) else (key,)):
            if isinstance(k, DynamicIndex):
                raise fail("dynamic-index", "a dynamic offset (an offset tile plus an index expression) indexes an "
                           "on-chip tile for nisa.tensor_copy_dynamic_src/dst; an HBM tensor is indexed by a (P, 1) "
                           "index tile (indirect DMA: hbm[idx_tile, i_f])", "tensor[...]")
            if isinstance(k, Tensor):
                if not k.on_chip or k.dtype.kind not in "iu":
                    raise fail("dynamic-index", f"an index tile must be an on-chip integer tile, got {k!r}", "tensor[...]")
                vals = read(k, "index tile", "tensor[...]")
                out.append(np.asarray(vals, dtype=np.int64).reshape(vals.shape[0], -1)[:, :1])
            else:
                out.append(k)
        return tuple(out)

    def _dynamic_view(self, keys: tuple) -> "Tensor":
        """An on-chip view at a dynamic offset: ``t[i_p, off]`` or ``t[i_p, off + i_f]`` with
        ``off`` a one-element integer SBUF tile (its value read now, as the instruction that
        moves the view reads it) along a free axis (NKI ISA reference,
        nisa.tensor_copy_dynamic_src/dst: "a dynamic offset within each partition", "a
        scalar value resided in SBUF"). Only those two instructions may move such a view."""
        call = "tensor[...]"
        if self._key is not None:
            raise fail("nested-index", "this view was made with index arrays (nl.arange/nl.mgrid); index the original "
                       "tensor once with the combined indices", call)
        pax = max(self.ndim - self._alloc._data.ndim + self._alloc.pdim, 0)  # this view's partition axis
        explicit = sum(1 for k in keys if k is not Ellipsis and k is not None)
        tiles: list[Tensor] = []
        out: list[Any] = []
        axis = 0
        for k in keys:
            if k is Ellipsis:
                axis += max(len(self.shape) - explicit, 0)
                out.append(k)
                continue
            if k is None:
                out.append(k)
                continue
            if isinstance(k, (Tensor, DynamicIndex)):
                if axis == pax:
                    raise fail("dynamic-index", "a dynamic offset indexes a free axis (an offset within each "
                               "partition); the partition axis takes static indices", call,
                               "dynamic offsets along free axes only")
                if isinstance(k, Tensor):
                    tiles.append(k)
                    value = dynamic_offset(k, call)
                    where = np.array([value], dtype=np.int64)
                else:
                    tiles.append(k.tile)
                    value, where = k.value, k.indices()
                size = self.shape[axis] if axis < len(self.shape) else 0
                if where.size and (where.min() < 0 or where.max() >= size):
                    raise fail("out-of-bounds", f"the dynamic offset {value} puts the view at {int(where.min())}.."
                               f"{int(where.max())} on axis {axis}, outside the {size} elements there", call,
                               "views at dynamic offsets within the tile")
                out.append(where)
            else:
                out.append(k)
            axis += 1
        key = normalize_key(tuple(out), self.shape, call)
        view = Tensor(self._alloc, self._data, self._written, key)
        view._dyn = tuple(tiles)
        return view

    def _select(self, array: np.ndarray) -> np.ndarray:
        """This view's elements of ``array`` (the allocation's data or its written-mask)."""
        if self._key is None:
            return array
        if self._basic is None:
            return array[self._key]
        chosen = array[self._basic[0]]
        return chosen if self._basic[1] == self.shape else chosen.reshape(self.shape)

    def _values(self) -> np.ndarray:
        return self._select(self._data)

    def _written_mask(self) -> np.ndarray:
        if self._alloc.full:
            return all_true(self.shape)
        return self._select(self._written)

    def _all_written(self) -> bool:
        return self._alloc.full or bool(self._written_mask().all())

    def _store(self, values: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Write ``values`` (any float dtype) into this view, rounding to its dtype."""
        if self._dyn is not None and not STATE.dynamic_ok and self.on_chip:
            raise fail("dynamic-index", _DYNAMIC_ONLY)
        shape = self.shape
        values = np.asarray(values)
        if values.shape != shape:
            try:
                values = np.broadcast_to(values, shape)
            except ValueError:
                raise fail("shape-mismatch", f"cannot write a {values.shape} result into a {shape} tile") from None
        cast = _cast(values, self.dtype)
        check_bounds(self, mask, "the destination", "store")
        if self._valid is not None and mask is None:
            mask = self._valid
        elif self._valid is not None:
            mask = np.broadcast_to(np.asarray(mask, dtype=bool), shape) & np.broadcast_to(self._valid, shape)
        if mask is not None:
            mask = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
            full = self._alloc.full  # (every element written already: the mask stays as it is)
            if self._key is None:
                self._data[mask] = cast[mask]
                if not full:
                    self._written[mask] = True
            else:
                idx = _expand_key(self._key, shape)
                sel = tuple(i[mask] for i in idx)
                self._data[sel] = cast[mask]
                if not full:
                    self._written[sel] = True
            return
        if self._key is None:
            self._data[...] = cast
            if not self._alloc.full:
                self._written[...] = True
                if self._data.size == self._alloc._data.size:
                    self._alloc.full = True
        elif self._basic is None:
            self._data[self._key] = cast
            if not self._alloc.full:
                self._written[self._key] = True
        else:
            key, sliced = self._basic
            self._data[key] = cast if sliced == shape else cast.reshape(sliced)
            if not self._alloc.full:
                self._written[key] = True

    # -- old-API conveniences -----------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        OPS["setitem"](self, key, value)

    def ap(self, pattern: Any = None, offset: int = 0, dtype: Any = None, **kw: Any) -> "Tensor":
        """An access pattern over the tensor's memory in row-major element order:
        ``pattern=[[step, count], ...]`` (outermost first; the first is the partition axis of
        an on-chip view) from element ``offset``; ``dtype=`` reinterprets the bytes first (an
        MX ``*_x4`` view of packed integers). A view: writes through it reach the tensor."""
        call = "tensor.ap"
        if self._key is not None:
            raise fail("nested-index", "ap() of a view made with index arrays", call)
        if not isinstance(pattern, (list, tuple)) or not pattern or not all(
                isinstance(d, (list, tuple)) and len(d) == 2 and all(isinstance(v, (int, np.integer)) for v in d) for d in pattern):
            raise fail("index", f"pattern={pattern!r} must be a list of [step, count] pairs", call)
        data, written = self._data, self._written
        flat = data.reshape(-1)
        wflat = written.reshape(-1)
        if data.size and not np.shares_memory(flat, data):
            raise fail("index", "ap() of a non-contiguous view", call)
        if dtype is not None:
            dt = as_dtype(dtype, call)
            if flat.nbytes % dt.itemsize:
                raise fail("shape-mismatch", f"{flat.nbytes} bytes do not hold whole {dtype_name(dt)} elements", call)
            ratio = dt.itemsize / data.itemsize
            flat = flat.view(dt)
            if ratio >= 1:
                wflat = wflat.reshape(-1, int(ratio)).all(axis=1) if ratio > 1 else wflat
            else:
                wflat = np.repeat(wflat, int(round(1 / ratio)))
        idx = np.asarray(int(offset), dtype=np.int64)
        counts = []
        for i, (step, count) in enumerate(pattern):
            shape = [1] * len(pattern)
            shape[i] = int(count)
            idx = idx + int(step) * np.arange(int(count), dtype=np.int64).reshape(shape)
            counts.append(int(count))
        if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
            raise fail("out-of-bounds", f"access pattern {pattern} from offset {offset} reaches element {int(idx.max())} "
                       f"of {flat.size}", call, "access patterns within the tensor")
        if self.on_chip and counts[0] > LIMITS["pmax"]:
            raise fail("partition-limit", f"access pattern of {counts[0]} partitions", call, f"partition dimension <= {LIMITS['pmax']}")
        # (A view that reinterprets the dtype is for reading: its written-mask is a copy.)
        return Tensor(self._alloc, flat, wflat, (np.broadcast_to(idx, tuple(counts)),))

    def broadcast_to(self, shape: Iterable[int]) -> "Tensor":
        return OPS["broadcast_to"](self, tuple(shape))

    def reshape(self, shape: Iterable[int]) -> "Tensor":
        shape = tuple(int(s) for s in shape)
        # HBM tensors reshape freely; an on-chip tile only within its partitions (its free
        # bytes regrouped, the partition dimension kept), as the same bytes.
        on_chip_ok = (self.on_chip and self._alloc.pdim == 0 and shape and self.shape and shape[0] == self.shape[0]
                      and self._data.flags.c_contiguous)
        if not (self.is_hbm or on_chip_ok) or self._key is not None:
            raise fail("reshape", "only whole HBM tensors, or on-chip tiles keeping their partition dimension, can be "
                       "reshaped (a view of the same bytes); reshape other on-chip data by copying", "tensor.reshape")
        try:
            data = self._data.reshape(shape)
            written = self._written.reshape(shape)
        except ValueError:
            raise fail("reshape", f"cannot reshape {self.shape} into {shape}", "tensor.reshape") from None
        if not np.shares_memory(data, self._data):
            raise fail("reshape", "reshape of a non-contiguous HBM view would copy data", "tensor.reshape")
        return Tensor(self._alloc, data, written, None)

    def view(self, dtype: Any) -> "Tensor":
        """The same bytes as another dtype: the last axis scales by the itemsize ratio (a
        (P, 1) fp32 tile viewed as fp8 is (P, 4)). For reading: what it says is written is
        fixed when the view is made."""
        dt = as_dtype(dtype, "tensor.view")
        if self._key is not None or not self._data.ndim or not self._data.flags.c_contiguous:
            raise fail("unsupported", "tensor.view(dtype) of a strided or index-array view", "tensor.view")
        try:
            data = self._data.view(dt)
        except ValueError as exc:
            raise fail("shape-mismatch", f"cannot view {self.shape} {dtype_name(self.dtype)} as {dtype_name(dt)}: {exc}",
                       "tensor.view") from None
        ratio = self._data.itemsize / dt.itemsize
        w = self._written
        if ratio > 1:
            w = np.repeat(w, int(ratio), axis=-1)
        elif ratio < 1:
            w = w.reshape(w.shape[:-1] + (-1, int(round(1 / ratio)))).all(axis=-1)
        return Tensor(self._alloc, data, w, None)

    # -- NKI 2.31+ NkiTensor views (no data moves; none changes an on-chip partition axis
    # other than by slicing it) ----------------------------------------------------------
    def _plain_view(self, call: str) -> None:
        if self._key is not None or (self.on_chip and self._alloc.pdim):
            raise fail("unsupported", f"{call} of a view made with index arrays or of a block (par_dim) tensor; "
                       "index it instead", call)

    def _axis(self, dim: Any, call: str, ndim: int | None = None, partition: bool = False) -> int:
        n = self._data.ndim if ndim is None else ndim
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise fail("bad-operand", f"{call}: a dimension must be an integer, got {dim!r}", call)
        d = int(dim) + n if int(dim) < 0 else int(dim)
        if not 0 <= d < n:
            raise fail("bad-operand", f"{call}: dimension {dim} of a {self._data.ndim}-D tensor", call)
        if d == 0 and self.on_chip and not partition:
            raise fail("partition-view", f"{call} cannot change the partition dimension (dim 0) of an on-chip tile", call)
        return d

    def _as_view(self, data: np.ndarray, written: np.ndarray, call: str) -> "Tensor":
        if data.size and not np.shares_memory(data, self._data):
            raise fail("unsupported", f"{call} would copy data (the dimensions are not contiguous in memory)", call)
        return Tensor(self._alloc, data, written, None)

    def slice(self, dim: Any, start: Any, end: Any, step: Any = 1) -> "Tensor":
        """Elements ``start:end:step`` of dimension ``dim`` (the partition axis only with step 1)."""
        call = "tensor.slice"
        self._plain_view(call)
        d = self._axis(dim, call, partition=True)
        size = self._data.shape[d]
        start, end, step = (int(v) for v in (start, end, step))
        if step <= 0 or not 0 <= start <= end <= size:
            raise fail("out-of-bounds", f"{call}({dim}, {start}, {end}, {step}) of a dimension of size {size}", call)
        if d == 0 and self.on_chip and step != 1:
            raise fail("partition-view", f"{call}: partitions are sliced with step 1", call)
        key = (slice(None),) * d + (slice(start, end, step),)
        return self._as_view(self._data[key], self._written[key], call)

    def select(self, dim: Any, index: Any) -> "Tensor":
        """Element ``index`` of dimension ``dim``, which the view drops."""
        call = "tensor.select"
        self._plain_view(call)
        d = self._axis(dim, call)
        i = int(index)
        if not 0 <= i < self._data.shape[d]:
            raise fail("out-of-bounds", f"{call}({dim}, {index}) of a dimension of size {self._data.shape[d]}", call)
        key = (slice(None),) * d + (i,)
        return self._as_view(self._data[key], self._written[key], call)

    def permute(self, *dims: Any) -> "Tensor":
        """The dimensions in the order ``dims`` (an on-chip tile keeps dim 0 first)."""
        call = "tensor.permute"
        self._plain_view(call)
        order = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        n = self._data.ndim
        order = tuple(self._axis(d, call, partition=True) for d in order)
        if sorted(order) != list(range(n)):
            raise fail("bad-operand", f"{call}{tuple(dims)} is not a permutation of {n} dimensions", call)
        if self.on_chip and order[0] != 0:
            raise fail("partition-view", f"{call} cannot move the partition dimension (dim 0) of an on-chip tile", call)
        return self._as_view(np.transpose(self._data, order), np.transpose(self._written, order), call)

    def expand_dim(self, dim: Any) -> "Tensor":
        """A size-1 dimension inserted at ``dim``."""
        call = "tensor.expand_dim"
        self._plain_view(call)
        d = self._axis(dim, call, ndim=self._data.ndim + 1)
        return self._as_view(np.expand_dims(self._data, d), np.expand_dims(self._written, d), call)

    def squeeze_dim(self, dim: Any) -> "Tensor":
        """Dimension ``dim`` (of size 1) removed."""
        call = "tensor.squeeze_dim"
        self._plain_view(call)
        d = self._axis(dim, call)
        if self._data.shape[d] != 1:
            raise fail("shape-mismatch", f"{call}({dim}): that dimension has size {self._data.shape[d]}, not 1", call)
        return self._as_view(np.squeeze(self._data, d), np.squeeze(self._written, d), call)

    def broadcast(self, dim: Any, size: Any) -> "Tensor":
        """Dimension ``dim`` (of size 1) repeated ``size`` times, by a zero stride (for reading)."""
        call = "tensor.broadcast"
        self._plain_view(call)
        d = self._axis(dim, call)
        if self._data.shape[d] != 1 or int(size) < 1:
            raise fail("shape-mismatch", f"{call}({dim}, {size}): only a dimension of size 1 broadcasts", call)
        shape = self._data.shape[:d] + (int(size),) + self._data.shape[d + 1:]
        return self._as_view(np.broadcast_to(self._data, shape), np.broadcast_to(self._written, shape), call)

    def flatten_dims(self, start: Any, end: Any) -> "Tensor":
        """Dimensions ``start`` to ``end`` (both included) merged into one."""
        call = "tensor.flatten_dims"
        self._plain_view(call)
        a, b = self._axis(start, call), self._axis(end, call)
        if a > b:
            raise fail("bad-operand", f"{call}({start}, {end}): start after end", call)
        shape = self._data.shape[:a] + (-1,) + self._data.shape[b + 1:]
        return self._as_view(self._data.reshape(shape), self._written.reshape(shape), call)

    def reshape_dim(self, dim: Any, shape: Any) -> "Tensor":
        """Dimension ``dim`` split into ``shape`` (whose product is its size)."""
        call = "tensor.reshape_dim"
        self._plain_view(call)
        d = self._axis(dim, call)
        parts = tuple(int(v) for v in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if math.prod(parts) != self._data.shape[d] or any(v < 1 for v in parts):
            raise fail("shape-mismatch", f"{call}({dim}, {parts}): a dimension of size {self._data.shape[d]}", call)
        new = self._data.shape[:d] + parts + self._data.shape[d + 1:]
        return self._as_view(self._data.reshape(new), self._written.reshape(new), call)

    def __add__(self, o): return OPS["binary"]("add", self, o)
    def __radd__(self, o): return OPS["binary"]("add", o, self)
    def __sub__(self, o): return OPS["binary"]("subtract", self, o)
    def __rsub__(self, o): return OPS["binary"]("subtract", o, self)
    def __mul__(self, o): return OPS["binary"]("multiply", self, o)
    def __rmul__(self, o): return OPS["binary"]("multiply", o, self)
    def __truediv__(self, o): return OPS["binary"]("divide", self, o)
    def __rtruediv__(self, o): return OPS["binary"]("divide", o, self)
    def __neg__(self): return OPS["binary"]("multiply", self, -1.0)
    def __pow__(self, o): return OPS["binary"]("power", self, o)
    def __iadd__(self, o): return OPS["inplace"]("add", self, o)
    def __isub__(self, o): return OPS["inplace"]("subtract", self, o)
    def __imul__(self, o): return OPS["inplace"]("multiply", self, o)
    def __itruediv__(self, o): return OPS["inplace"]("divide", self, o)


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round to the destination dtype (RNE via NumPy/ml_dtypes); ints saturate-free cast."""
    if values.dtype == dtype:
        return values
    if dtype.kind in "iu" and values.dtype.kind == "f":
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            return np.clip(np.nan_to_num(values), info.min, info.max).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dtype)


def _keep_free_dims(key: tuple, pdim: int) -> tuple:
    """A tile keeps a free axis: ``t[:, 3]`` of a (P, F) tile is (P, 1), not (P,), as in NKI
    (integers otherwise drop their axis, and integers before the partition axis select a
    block)."""
    pdim = max(pdim, 0)
    free_ints = []
    kept_free = 0
    axis = 0
    for i, k in enumerate(key):
        if k is None:
            continue
        if axis > pdim:
            if isinstance(k, (int, np.integer)):
                free_ints.append(i)
            else:
                kept_free += 1
        axis += 1
    if kept_free or not free_ints:
        return key
    last = free_ints[-1]
    return tuple(slice(int(k), int(k) + 1) if i == last else k for i, k in enumerate(key))


def _clip_key(key: tuple, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple]:
    """In-bounds elements of an index-array view (broadcast to the view's shape), and the key
    with out-of-range indices clamped so that NumPy can index."""
    dims = [i for i, k in enumerate(key) if k is not None and not isinstance(k, slice)]
    axis_of = {}
    d = 0
    for i, k in enumerate(key):
        if k is None:
            continue
        axis_of[i] = d
        d += 1
    arrays = [np.asarray(key[i]) for i in dims if isinstance(key[i], np.ndarray)]
    bshape = np.broadcast_shapes(*[a.shape for a in arrays]) if arrays else ()
    valid = np.ones(bshape, dtype=bool)
    new = list(key)
    for i in dims:
        k = key[i]
        if isinstance(k, np.ndarray):
            size = shape[axis_of[i]]
            valid &= np.broadcast_to((k >= 0) & (k < size), bshape)
            new[i] = np.clip(k, 0, size - 1)
    return valid, tuple(new)


def _plain_key(key: Any, shape: tuple[int, ...]) -> tuple | None:
    """The normalized key when ``key`` is ``...`` or a tuple of exactly one in-bounds Python
    integer or step-less slice per axis (the common case, checked here without the general
    path's cost), else None (then :func:`normalize_key` decides, errors included)."""
    if key is Ellipsis:
        return tuple(slice(None) for _ in shape)
    if type(key) is not tuple or len(key) != len(shape):
        return None
    out = []
    for k, size in zip(key, shape):
        tk = type(k)
        if tk is slice:
            lo, hi = k.start, k.stop
            if k.step is not None or (lo is not None and type(lo) is not int) or (hi is not None and type(hi) is not int):
                return None
            lo = 0 if lo is None else lo
            hi = size if hi is None else hi
            if not 0 <= lo < hi <= size:
                return None
            out.append(slice(lo, hi, None))
        elif tk is int:
            if not 0 <= k < size:
                return None
            out.append(k)
        else:
            return None
    return tuple(out)


def _array_key(key: Any, shape: tuple[int, ...]) -> tuple | None:
    """The normalized key when ``key`` is a tuple of one in-bounds Python integer or integer
    index array per axis, with at least one array (a view made with nl.arange expressions,
    the form of every tile access in AWS's tutorials), else None (then
    :func:`normalize_key` decides, errors included). Arrays the interpreter made read-only
    (:func:`frozen_index_array`) have their bounds already; others are measured here, as
    normalize_key would, and checked for a range (:func:`_range_axis`) on the way."""
    if type(key) is not tuple or len(key) != len(shape):
        return None
    bounds = STATE.index_bounds
    arrays: list[tuple[np.ndarray, int]] = []  # (array, the axis it runs along or -1)
    basic: list[Any] | None = []  # the basic-slicing equivalent (see _range_axis), while possible
    for k, size in zip(key, shape):
        tk = type(k)
        if tk is int:
            if not 0 <= k < size:
                return None
            if basic is not None:
                basic.append(k)
        elif tk is np.ndarray or tk is IndexGrid:
            known = bounds.get(id(k))
            if known is not None and known[0] is k:
                lo, hi = known[1], known[2]
                if basic is not None:
                    if known[3] is None:
                        basic = None
                    else:
                        basic.append(slice(lo, hi + 1))
                        arrays.append((k, known[3]))
            elif k.size and k.dtype.kind in "iu":
                # (an array the kernel made in this process, a trusted original run in-process:
                # a range is measured from its shape, anything else element by element)
                form = k.form if tk is IndexGrid else None
                if form is None and basic is not None:
                    form = range_form(k)
                if form is not None:
                    lo, hi = form[0], form[0] + k.shape[form[1]] - 1
                    if basic is not None and 0 <= lo and hi < size:
                        basic.append(slice(lo, hi + 1))
                        arrays.append((k, form[1]))
                elif k.size == 1:
                    lo = hi = int(k.reshape(-1)[0])
                    if basic is not None and 0 <= lo < size:
                        basic.append(slice(lo, hi + 1))
                        arrays.append((k, -1))
                else:
                    lo, hi = int(k.min()), int(k.max())
                    basic = None
            else:
                return None
            if lo < 0 or hi >= size:
                return None
            if basic is None:
                arrays.append((k, -1))
        else:
            return None
    if not arrays:
        return None
    if basic is None:
        return key, None
    # NumPy gives the arrays' broadcast shape, each array's range on its own axis; the
    # slices give their lengths in key order. Same elements in the same row-major order
    # when the arrays' axes (counted in the broadcast shape) increase along the key and the
    # broadcast shape holds as many elements as the slices select (a dense grid's other
    # axes must be covered by the other arrays).
    if math.prod(np.broadcast_shapes(*(a.shape for a, _ in arrays))) != math.prod(
            k.stop - k.start for k in basic if type(k) is slice):
        return key, None
    ndim = max(a.ndim for a, _ in arrays)
    last = -1
    for a, axis in arrays:
        if axis == -1:
            continue
        axis += ndim - a.ndim
        if axis <= last:
            return key, None
        last = axis
    return key, (tuple(basic), tuple(k.stop - k.start for k in basic if type(k) is slice))


def normalize_key(key: Any, shape: tuple[int, ...], call: str, deferred: list[str] | None = None) -> tuple:
    """Check bounds of an index (ints, slices, index arrays) and return a tuple key.

    NumPy silently clips slices that run past the end; NKI must not, so every slice and
    index array is checked here.
    """
    if not isinstance(key, tuple):
        key = (key,)
    out: list[Any] = []
    n_explicit = sum(1 for k in key if k is not Ellipsis and k is not None)
    if n_explicit > len(shape):
        raise fail("index", f"{n_explicit} indices for a tensor of shape {shape}", call)
    dim = 0
    for k in key:
        if k is Ellipsis:
            skip = len(shape) - n_explicit
            out.extend([slice(None)] * skip)
            dim += skip
            continue
        if k is None:
            out.append(None)
            continue
        size = shape[dim]
        if isinstance(k, Tensor):
            raise fail("dynamic-index", "indexing with a tensor's values (dynamic indexing) is not supported; use loop variables and nl.arange", call)
        if isinstance(k, slice):
            start, stop, step = k.start, k.stop, k.step
            for v in (start, stop, step):
                if v is not None and not isinstance(v, (int, np.integer)):
                    raise fail("index", f"slice bounds must be integers, got {v!r}", call)
            if step is not None and step <= 0:
                raise fail("index", f"slice step must be positive, got {step}", call)
            lo = 0 if start is None else int(start)
            hi = size if stop is None else int(stop)
            lo = lo + size if lo < 0 else lo  # Python-style negative bounds, but never clipped
            hi = hi + size if hi < 0 else hi
            if deferred is not None and 0 <= lo < hi and hi > size:
                # Past the end: usable under a mask (tail tiles); becomes an index array below.
                deferred.append(f"slice {lo}:{hi} on axis {dim} of a tensor of shape {shape}")
                out.append(_PastEnd(lo, hi, step or 1))
                dim += 1
                continue
            if lo < 0 or hi > size or lo >= hi:
                raise fail(
                    "out-of-bounds",
                    f"slice {lo}:{hi} on axis {dim} of a tensor of shape {shape}",
                    call,
                    f"0 <= start < stop <= {size}",
                )
            out.append(slice(lo, hi, step))
        elif isinstance(k, (int, np.integer)):
            i = int(k)
            if not (0 <= i < size):
                raise fail("out-of-bounds", f"index {i} on axis {dim} of a tensor of shape {shape}", call, f"0 <= index < {size}")
            out.append(i)
        elif _is_index_array(k):
            arr = np.asarray(k)
            if arr.dtype.kind not in "iu":
                raise fail("index", f"index array on axis {dim} must hold integers, got {arr.dtype}", call)
            known = STATE.index_bounds.get(id(arr))
            if known is not None and known[0] is arr:
                lo, hi = known[1], known[2]
            elif arr.size:
                lo, hi = int(arr.min()), int(arr.max())
            else:
                lo, hi = 0, -1
            if lo < 0 or hi >= size:
                if deferred is not None:
                    deferred.append(f"index expression on axis {dim} spans {lo}..{hi} but the "
                                    f"tensor of shape {shape} has {size} there")
                    out.append(arr)
                    dim += 1
                    continue
                raise fail(
                    "out-of-bounds",
                    f"index expression on axis {dim} spans {lo}..{hi} but the tensor of shape {shape} has {size} there",
                    call,
                    f"0 <= index < {size}",
                )
            out.append(arr)
        else:
            raise fail("index", f"unsupported index {k!r}", call)
        dim += 1
    if any(isinstance(k, _PastEnd) for k in out):
        if any(isinstance(k, np.ndarray) for k in out):
            raise fail("out-of-bounds", deferred[-1] if deferred else "slice past the end", call,
                       "slices within the tensor (or index expressions under a mask)")
        # Every slice becomes an orthogonal index array over the view's axes, in order.
        n = sum(1 for k in out if isinstance(k, (slice, _PastEnd)))
        j = 0
        conv: list[Any] = []
        d = 0
        for k in out:
            if k is None:
                conv.append(k)
                continue
            size = shape[d]
            d += 1
            if isinstance(k, (slice, _PastEnd)):
                lo, hi, st = (k.lo, k.hi, k.step) if isinstance(k, _PastEnd) else k.indices(size)
                arr = np.arange(lo, hi, st, dtype=np.int64).reshape((1,) * j + (-1,) + (1,) * (n - j - 1))
                conv.append(arr)
                j += 1
            else:
                conv.append(k)
        return tuple(conv)
    return tuple(out)


def _advanced_shape(key: tuple) -> tuple[int, ...] | None:
    """The shape NumPy gives ``data[key]`` when every entry of ``key`` is an integer or an
    index array (then all are advanced indices and the result has their broadcast shape),
    worked out without gathering the elements; None for any other key (slices, None), whose
    shape the caller takes from NumPy itself. Views made with nl.arange expressions ask for
    their shape on every instruction, so this is a hot path."""
    out: list[int] = []
    for k in key:
        if type(k) is int:
            continue
        tk = type(k)
        if tk is not np.ndarray and tk is not IndexGrid:
            return None
        shape = k.shape
        if len(shape) > len(out):
            out[:0] = [1] * (len(shape) - len(out))
        off = len(out) - len(shape)
        for i, n in enumerate(shape):
            m = out[off + i]
            if m == 1:
                out[off + i] = n
            elif n != 1 and n != m:
                return None  # NumPy raises for this key: let it say why
    return tuple(out)


class _PastEnd:
    __slots__ = ("lo", "hi", "step")

    def __init__(self, lo: int, hi: int, step: int) -> None:
        self.lo, self.hi, self.step = lo, hi, step


def _expand_key(key: tuple, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Full broadcast index arrays for an array-style key (used for masked writes)."""
    if any(isinstance(k, slice) or k is None for k in key):
        raise fail("mask", "masks need an index made only of nl.arange/nl.mgrid expressions and integers (no slices)")
    arrays = [np.asarray(k) for k in key]
    return tuple(np.broadcast_to(a, shape) for a in np.broadcast_arrays(*arrays))


# ---------------------------------------------------------------------------- tensors
class ParDim(int):
    """``nl.par_dim(n)``: marks the partition axis of an on-chip shape; the axes before it
    are block dimensions (separate tiles in the same partitions, indexed first)."""

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


def new_tensor(shape: Iterable[int], dtype: Any, buffer: Any, name: str = "", call: str = "nl.ndarray",
               count: bool = True, data: np.ndarray | None = None) -> Tensor:
    """A new tensor; with ``data`` (an array of exactly this shape and dtype that nothing
    else references: an instruction's freshly computed result) it holds that array, written
    whole, instead of a copy of it."""
    raw = tuple(shape if isinstance(shape, (tuple, list)) else (shape,))
    if all(type(s) is int for s in raw):  # plain integers (every instruction's result tile): no par_dim
        shape, pdim = raw, 0
    else:
        marked = [i for i, s in enumerate(raw) if isinstance(s, ParDim)]
        pdim = marked[0] if marked else 0
        shape = tuple(int(s) for s in raw)
    buf = str(buffer) if buffer is not None else "sbuf"
    if buf not in ON_CHIP:
        pdim = 0
    if buf not in ON_CHIP + HBM_BUFFERS:
        raise fail("bad-buffer", f"unknown buffer {buffer!r}; use nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm", call)
    dt = dtype if type(dtype) is np.dtype else as_dtype(dtype, call)
    if buf == "shared_hbm" and STATE.grid:
        # SPMD launches: every program instance sees the same shared output tensor.
        key = (next(STATE.shared_counter), shape, dt.str)
        alloc = STATE.shared_memo.get(key)
        if alloc is None:
            alloc = Allocation(shape, dt, buf, name, count=count, call=call)
            STATE.shared_memo[key] = alloc
    else:
        if data is not None and (pdim or data.shape != shape or data.dtype != dt or not data.flags.c_contiguous):
            raise ValueError("new_tensor(data=...) takes a C-contiguous array of the tensor's shape and dtype")
        alloc = Allocation(shape, dt, buffer if isinstance(buffer, BufferKind) else buf, name, count=count, call=call,
                           pdim=pdim, data=data)
    return Tensor(alloc, alloc._data, alloc._written)


def _host_copy(array: Any) -> np.ndarray:
    """``np.array(array, copy=True)`` (a kernel argument's own copy, an output's copy for the
    host). A C-contiguous array whose bytes are all zero (the zeros AWS's published shapes
    are evaluated on: 192 MB of GEMM inputs, and its 64 MB result) is copied as zeroed
    memory (``np.zeros``): the same bytes, shape, dtype and layout, whose pages the system
    supplies zeroed when first touched instead of this process writing every one of them
    (1-2 s a run here, where each fresh page of memory is slow to map). Any other array,
    one whose first byte is not zero included (decided at once), is copied."""
    if isinstance(array, np.ndarray) and array.size and array.flags.c_contiguous and array.dtype.kind in "biufV" \
            and not array.dtype.hasobject and array.dtype.names is None:
        raw = array.reshape(-1).view(np.uint8)
        if not raw.item(0) and not raw.any():
            return np.zeros(raw.size, dtype=np.uint8).view(array.dtype).reshape(array.shape)
    return np.array(array, copy=True)


def input_tensor(array: np.ndarray, name: str) -> Tensor:
    """Wrap a host array as a kernel argument living in HBM (its own copy)."""
    arr = _host_copy(array)
    alloc = Allocation(arr.shape, arr.dtype, "hbm", name, data=arr, count=False, call="kernel argument")
    alloc.is_input = True
    return Tensor(alloc, alloc._data, alloc._written)


def require_tensor(x: Any, what: str, call: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise fail("bad-operand", f"{what} must be an NKI tensor/tile, got {type(x).__name__}", call)
    return x


# ---------------------------------------------------------------------------- dynamic offsets
_DYNAMIC_ONLY = ("this view is at a dynamic offset (indexed by a tile's value); on-chip, only "
                 "nisa.tensor_copy_dynamic_src reads such a view and nisa.tensor_copy_dynamic_dst writes one: "
                 "copy it to or from a tile of its own with them")


def dynamic_offset(t: Tensor, call: str) -> int:
    """The value of ``t`` as a dynamic offset: one element of an integer SBUF tile (NKI ISA
    reference, nisa.tensor_copy_dynamic_src/dst: "The dynamic offset must be a scalar value
    resided in SBUF")."""
    if not isinstance(t, Tensor) or t._alloc.buffer != "sbuf":
        where = t._alloc.buffer if isinstance(t, Tensor) else type(t).__name__
        raise fail("dynamic-index", f"a dynamic offset is the value of a one-element integer tile in SBUF, got one in "
                   f"{where}", call, "dynamic offsets come from SBUF")
    if t.dtype.kind not in "iu" or math.prod(t.shape) != 1:
        raise fail("dynamic-index", f"a dynamic offset is the value of a one-element integer tile, got {t.shape} "
                   f"{dtype_name(t.dtype)} (index a single element: offsets[0, i])", call)
    return int(np.asarray(read(t, "dynamic offset", call)).reshape(-1)[0])


class DynamicIndex:
    """``off + i_f``: an index expression (nl.arange / nl.mgrid arithmetic) shifted by the
    value of a one-element integer SBUF tile ``off`` (the older API's dynamic-offset form,
    ``src[i_p, offsets[0, i] + i_f]``, and ``nl.ds(off, size)``). It can only index an
    on-chip tile (a view at a dynamic offset, see Tensor._dynamic_view): it never becomes
    tile data, so a host array can take part in it."""

    __slots__ = ("tile", "value", "offset")

    def __init__(self, tile: Tensor, offset: np.ndarray, call: str) -> None:
        self.tile = tile
        self.value = dynamic_offset(tile, call)
        self.offset = np.asarray(offset, dtype=np.int64)

    def indices(self) -> np.ndarray:
        return self.value + self.offset

    def __add__(self, other: Any) -> "DynamicIndex":
        arr = np.asarray(other)
        if arr.dtype.kind not in "iu":
            raise fail("dynamic-index", "a dynamic offset adds only integers and integer index expressions", "tensor[...]")
        out = DynamicIndex.__new__(DynamicIndex)
        out.tile, out.value, out.offset = self.tile, self.value, self.offset + arr.astype(np.int64)
        return out

    __radd__ = __add__

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise fail("dynamic-index", "a dynamic offset (an offset tile plus an index expression) can only index an "
                   "on-chip tile (src[i_p, off + i_f]), not stand for data or a mask")

    def __repr__(self) -> str:
        return f"<dynamic offset {self.value} + index expression {tuple(self.offset.shape)}>"


def dynamic_index(tile: Tensor, expr: np.ndarray, call: str) -> DynamicIndex:
    """``tile + expr`` with ``expr`` an integer index expression: a dynamic-offset index."""
    arr = np.asarray(expr)
    if arr.dtype.kind not in "iu":
        raise fail("bad-operand", "a host array takes part in tile arithmetic only as an integer index expression "
                   "added to a one-element integer SBUF tile (a dynamic offset: offsets[0, i] + i_f); tile data comes "
                   "from NKI instructions", call)
    return DynamicIndex(tile, arr, call)


class dynamic_access:  # noqa: N801 - used as a context manager
    """Lets the enclosed reads and writes move views at a dynamic offset (the dynamic copies)."""

    def __enter__(self) -> None:
        self.saved = STATE.dynamic_ok
        STATE.dynamic_ok = True

    def __exit__(self, *exc: Any) -> None:
        STATE.dynamic_ok = self.saved


# ---------------------------------------------------------------------------- random numbers
# The seed of the random number generator until a kernel calls nl.random_seed: fixed, so a
# kernel's random values are the same in every run (the oracle's, the candidate's, the
# kernel process's and this process's) and can be compared. The NKI docs leave the
# hardware generator's algorithm unspecified; these are NumPy's PCG64 numbers.
DEFAULT_RANDOM_SEED = 0


def random_generator() -> np.random.Generator:
    """The run's random number generator: one stream, as VectorE holds one generator state;
    a seed restarts it (nl.random_seed: "Using the same seed will generate the same sequence
    of random numbers"). Drawing inside an affine_range loop makes the values depend on the
    order of the iterations, so the reorder proof gives up there and the reversed-loop run
    decides (a kernel that seeds each iteration, as AWS's flash attention does, passes it)."""
    if STATE.proof is not None and affine_path():
        STATE.proof.give_up("random numbers are drawn inside an affine_range loop (the generator's state is "
                            "carried from one iteration to the next)")
    if STATE.rng is None:
        STATE.rng = np.random.default_rng(DEFAULT_RANDOM_SEED)
    return STATE.rng


def seed_random(seed: int) -> None:
    """nl.random_seed: restart the generator from a 32-bit seed."""
    if STATE.proof is not None and affine_path():
        STATE.proof.give_up("nl.random_seed inside an affine_range loop (the generator's state is carried from one "
                            "iteration to the next)")
    STATE.rng = np.random.default_rng(int(seed) & 0xFFFFFFFF)


def check_bounds(t: Tensor, mask: Any, what: str, call: str) -> None:
    """A view reaching past its tensor is usable only where ``mask`` excludes the outside."""
    if t._valid is None:
        return
    bad = ~np.broadcast_to(t._valid, t.shape)
    if mask is not None:
        bad = bad & np.broadcast_to(np.asarray(mask, dtype=bool), t.shape)
    if bad.any():
        raise fail("out-of-bounds", f"{what} indexes {int(bad.sum())} elements outside its tensor of shape "
                   f"{t._alloc._data.shape}" + ("" if mask is not None else "; mask them out with mask=(...)"),
                   call, "index expressions within the tensor (or masked out)")


def read(t: Tensor, what: str, call: str, mask: np.ndarray | None = None) -> np.ndarray:
    """The values of a view. Reading memory that nobody wrote is an error when none of the
    elements read were written; a partly written tile (a masked tail tile) may be read as a
    whole, its unwritten elements are NaN (integers 0), and only written data reaches HBM."""
    if t._dyn is not None and not STATE.dynamic_ok and t.on_chip:
        raise fail("dynamic-index", f"{what}: {_DYNAMIC_ONLY}", call)
    check_bounds(t, mask, what, call)
    if STATE.proof is not None:
        STATE.proof.pending.append(t)  # (the next instruction read it, whatever it records)
    if t._alloc.full:
        return t._values()
    w = written = t._written_mask()
    if mask is not None:
        w = np.where(np.broadcast_to(np.asarray(mask, dtype=bool), w.shape), w, True)
    if not w.any() or (mask is None and t._valid is None and t.on_chip is False and not w.all()):
        missing = int(w.size - np.count_nonzero(w))
        raise fail(
            "unwritten-read",
            f"{what} reads {missing} of {w.size} elements of a {t._alloc.buffer} tensor{_named(t)} that were never written",
            call,
            "no reads of uninitialised memory",
        )
    values = t._values()
    if t._alloc.dirty and not written.all():
        values = np.where(written, values, np.nan if is_float(values.dtype) else 0).astype(values.dtype, copy=False)
    return values


def _named(t: Tensor) -> str:
    return f" '{t._alloc.name}' (allocated line {t._alloc.line})" if t._alloc.name else f" (allocated line {t._alloc.line})"


# Where each instruction goes as it is recorded, besides STATE.trace: the harness child sets
# a writer to its result channel, so the parent holds the trace as it happened and computes
# the cost itself (nothing done to STATE.trace later changes what the parent saw).
_SINK: list[Any] = []

# What an untraced run records per instruction: one shared placeholder with no regions
# (indices into the trace still count instructions; amend() leaves it alone).
_UNTRACED = Instr("untraced", "vector", 0, 0, 0, 0)


class _Messages:
    """A trace sink made of a callable taking JSON messages: ``["i", row]`` per instruction,
    ``["a", index, reads, writes]`` per amendment (the one-message-per-instruction form)."""

    def __init__(self, send: Callable[[list[Any]], None]) -> None:
        self.send = send

    def instr(self, ins: Instr) -> None:
        self.send(["i", ins.to_list()])

    def amend(self, index: int, reads: tuple, writes: tuple) -> None:
        self.send(["a", index, [list(r) for r in reads], [list(w) for w in writes]])


def stream_to(sink: Any) -> None:
    """Send every instruction recorded from now on (and every amendment) to ``sink``: an
    object with ``instr(ins)`` and ``amend(index, reads, writes)`` (the runner's
    TraceBatch), or a callable taking JSON messages; None stops."""
    if sink is not None and not hasattr(sink, "instr"):
        sink = _Messages(sink)
    _SINK[:] = [sink] if sink is not None else []


def record(opname: str, engine: str, partitions: int, free: int, dtype_bytes: int,
           reads: Iterable[Tensor], writes: Iterable[Tensor], **info: Any) -> int:
    """Append one instruction to the trace; returns its index."""
    if not STATE.traced:
        STATE.trace.append(_UNTRACED)
        return len(STATE.trace) - 1
    _, line = call_site()
    loop = current_loop()
    if loop is not None:
        info["loop"] = loop
    reads, writes = list(reads), list(writes)
    # The ids of the operands that live in PSUM (the cost model's SBUF/PSUM interfaces and
    # the ISA's one-input-in-PSUM tensor_tensor rate depend on it), in order, once each.
    psum: list[int] = []
    for t in reads + writes:
        a = t._alloc
        if a.buffer == "psum" and a.id not in psum:
            psum.append(a.id)
    if psum:
        info["psum"] = psum
    ins = Instr(opname, engine, line, int(partitions), int(free), int(dtype_bytes),
                tuple([region(t) for t in reads]), tuple([region(t) for t in writes]), info)
    _note_use(len(STATE.trace), ins.reads + ins.writes)
    if STATE.proof is not None:
        STATE.proof.instr(len(STATE.trace), opname, reads, writes, ins.reads, ins.writes, affine_path())
    STATE.trace.append(ins)
    if _SINK:
        _SINK[0].instr(ins)
    return len(STATE.trace) - 1


def current_loop() -> list[int] | None:
    """[loop id, trip count, iteration, enclosing loop id or -1, 1 if affine_range] of the
    innermost loop (None outside loops): the instruction is one iteration's instance of that
    loop's body."""
    if STATE.remote_loop is not None:
        return STATE.remote_loop or None
    if STATE.loops:
        f = STATE.loops[-1]
        return [f[0], f[1], f[2], f[4], int(f[3])]
    return None


def accumulation_group(index: int) -> None:
    """Instruction ``index`` is a matmul whose ``accumulate`` NKI decides (it starts the
    PSUM tile's group when the tile holds nothing yet and adds to it after): whichever
    instruction of the group comes first, the tile ends with the same sum, so the reorder
    proof counts its write as an accumulation."""
    if STATE.proof is not None:
        STATE.proof.accumulates(index)


def affine_path() -> tuple:
    """((loop id, iteration), ...) of the affine_range loops around the instruction being
    recorded, outermost first (the reorder proof's view of where it runs)."""
    if STATE.remote_loop is not None:
        return STATE.remote_affine if STATE.remote_loop else ()
    stack = STATE.loops
    if not stack:
        return ()
    f = stack[-1]
    key = (f[0], f[2])
    if STATE.path_key != key:
        STATE.path_key = key
        STATE.path = tuple((g[0], g[2]) for g in stack if g[3])
    return STATE.path


def iterate_loop(values: Iterable[int], trip: int, affine: bool, stack: list[list[Any]], ids: Any) -> Iterator[int]:
    """Iterate a loop range, keeping ``stack`` (innermost last) up to date."""
    frame = [next(ids), int(trip), 0, bool(affine), stack[-1][0] if stack else -1]
    stack.append(frame)
    try:
        for i, v in enumerate(values):
            frame[2] = i
            yield v
    finally:
        for k in range(len(stack) - 1, -1, -1):
            if stack[k] is frame:
                del stack[k]
                break


def _note_use(index: int, regions: Iterable[tuple]) -> None:
    info, spans = STATE.alloc_info, STATE.spans
    for r in regions:
        a = r[0]
        if a in info:
            span = spans.get(a)
            if span is None:
                spans[a] = [index, index]
            else:
                span[0] = min(span[0], index)
                span[1] = max(span[1], index)


def check_live_capacity() -> None:
    """SBUF/PSUM capacity over the compiler's live ranges (first to last use of each tile):
    raises at the instruction where the live tiles of a buffer overflow it."""
    if not STATE.overflow:
        return
    for buffer in ON_CHIP:
        cap = LIMITS["sbuf_bytes_per_partition" if buffer == "sbuf" else "psum_bytes_per_partition"]
        events: list[tuple[int, int, int]] = []
        for a, (buf, nbytes, *_rest) in STATE.alloc_info.items():
            span = STATE.spans.get(a)
            if buf == buffer and span is not None:
                events.append((span[0], 1, a))
                events.append((span[1] + 1, 0, a))
        events.sort()
        live: dict[int, int] = {}
        total = 0
        for when, kind, a in events:
            nbytes = STATE.alloc_info[a][1]
            if kind == 0:
                total -= live.pop(a, 0)
                continue
            live[a] = nbytes
            total += nbytes
            if total > cap:
                biggest = sorted(live, key=lambda x: -live[x])[:3]
                names = ", ".join(f"{STATE.alloc_info[x][3] or 'tensor'}{STATE.alloc_info[x][4]} from line "
                                  f"{STATE.alloc_info[x][2]} ({live[x]} B)" for x in biggest)
                ins = STATE.trace[when] if when < len(STATE.trace) else None
                info = STATE.alloc_info[a]
                raise NkiError("capacity", f"{total} B/partition of {buffer.upper()} are live at once (each tile from "
                               f"its first to its last use) when {info[4]} {dtype_name(info[5])} from line {info[2]} "
                               f"is first used; largest live: {names}", call=ins.op if ins else "",
                               limit=f"{buffer.upper()} {cap // 1024} KiB per partition over live allocations",
                               file=STATE.kernel_file or "<kernel>", line=ins.line if ins else info[2])


def amend(index: int, reads: Iterable[Tensor] = (), writes: Iterable[Tensor] = ()) -> None:
    """Add the regions of these views to an instruction already recorded (a result named by
    ``tile[...] =``, a PSUM accumulation folded into its matmul)."""
    if not STATE.traced:
        return
    if index < 0:
        index += len(STATE.trace)
    ins = STATE.trace[index]
    read_views, write_views = tuple(reads), tuple(writes)
    reads, writes = tuple([region(t) for t in read_views]), tuple([region(t) for t in write_views])
    _note_use(index, reads + writes)
    if STATE.proof is not None:
        STATE.proof.amend(index, read_views, write_views, reads, writes)
    ins.reads += reads
    ins.writes += writes
    if _SINK:
        _SINK[0].amend(index, reads, writes)


def region(t: Tensor) -> tuple[int, int, int, int, int]:
    """(allocation id, first partition, end partition, first free byte, end free byte) that
    a view spans, for the cost model's hazards. On-chip memory is partition-major, so a
    slice along a free axis touches the same byte range of every partition it covers.
    HBM tensors use one flat byte range. A view made with index arrays counts as the basic
    slicing that covers it (:func:`basic_key`): exact for AWS's ``nl.arange``/``nl.mgrid``
    views, never too small for others; one it cannot cover counts as the whole allocation.
    (Counting every such view as the whole allocation made each load into one block of a
    ``(K, par_dim(128), F)`` tile wait for the previous one to land: the NKI matmul
    tutorial's hoisted kernel was estimated 1.8x slower than its plain tiled one.)"""
    if t._key is None:
        return _span(t._alloc, t._data)
    key = basic_key(t)
    if key is None:
        base = t._alloc._phys
        return (t._alloc.id, 0, max(1, base.shape[0] if base.ndim else 1), 0, int(base.nbytes))
    return _span(t._alloc, t._data[key])


def _span(alloc: "Allocation", data: np.ndarray) -> tuple[int, int, int, int, int]:
    """:func:`region` of the plain (basic-sliced) view ``data`` of ``alloc``."""
    base = alloc._phys
    if (data.size == base.size and base.size and base.flags.c_contiguous
            and (base.ndim >= 2 if alloc.buffer in ON_CHIP else base.ndim >= 1)):
        # The whole allocation (a fresh tile, an instruction's result): the common case.
        whole = alloc.whole
        if whole is None:
            whole = alloc.whole = (alloc.id, 0, max(1, base.shape[0]) if alloc.buffer in ON_CHIP else 1, 0,
                                   int(base.nbytes if alloc.buffer not in ON_CHIP else base.strides[0]))
        return whole
    if base.ndim == 1 and data.size == base.size and base.size and data.flags.c_contiguous:
        # A whole one-axis on-chip tile (the older API's reductions make them): the general
        # answer below, computed once per allocation.
        whole = alloc.whole
        if whole is None:
            whole = alloc.whole = (alloc.id, 0, 1, 0, int(base.nbytes))
        return whole
    if data.size == 0 or base.ndim == 0:
        return (alloc.id, 0, max(1, base.shape[0] if base.ndim else 1), 0, int(base.nbytes))
    addr = alloc.addr
    if not addr:
        addr = alloc.addr = base.__array_interface__["data"][0]
    offset = data.__array_interface__["data"][0] - addr
    item = data.itemsize
    if alloc.buffer not in ON_CHIP or base.ndim == 1:
        hi = offset + item
        for n, st in zip(data.shape, data.strides):
            if n > 0:
                hi += (n - 1) * st
        return (alloc.id, 0, 1, offset, hi)
    pstride = base.strides[0]
    p0, f0 = divmod(offset, pstride)
    dims = list(zip(data.shape, data.strides))
    at = next((i for i, (n, st) in enumerate(dims) if st == pstride and n > 1), None)
    if at is not None:
        pn = dims[at][0]
        dims = dims[:at] + dims[at + 1:]
    else:
        pn = 1
    fhi = f0 + item + sum((n - 1) * st for n, st in dims if n > 0)
    if fhi > pstride:
        f0, fhi = 0, pstride
    return (alloc.id, int(p0), int(p0 + pn), int(f0), int(fhi))


def basic_key(t: "Tensor") -> tuple | None:
    """Basic slicing that covers what a view made with index arrays selects (AWS's
    tutorials index every tile with nl.arange expressions): the exact equivalent the
    interpreter found when it made the view, else each integer array becomes the slice from
    its least to its greatest value, a superset of what it selects, so regions made from it
    are never too small. None when the view was not made with index arrays or holds
    anything else."""
    key = t._key
    if key is None or type(key) is not tuple or len(key) != t._data.ndim:
        return None
    basic = t._basic
    if basic is not None:
        return basic[0]
    out: list[Any] = []
    for k in key:
        if isinstance(k, (int, np.integer)):
            out.append(int(k))
        elif isinstance(k, slice):
            out.append(k)
        elif isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.size:
            out.append(slice(int(k.min()), int(k.max()) + 1))
        else:
            return None
    return tuple(out)


def partitions_free(t: "Tensor") -> tuple[int, int]:
    """(partitions, elements per partition) an instruction over the whole tile ``t`` spans.
    A tile declared with its partition axis after block dimensions (``(N, C,
    nl.par_dim(128), F)``) has ``shape[pdim]`` partitions and the block dimensions in its
    free size, not ``shape[0]`` partitions."""
    shape = tuple(t.shape)
    pdim = t._alloc.pdim
    if pdim and t.on_chip and shape == tuple(t._alloc._data.shape) and 0 < pdim < len(shape):
        parts = max(int(shape[pdim]), 1)
        return parts, math.prod(shape) // parts
    return (shape[0] if shape else 1), free_size(shape)


def free_size(shape: tuple[int, ...]) -> int:
    return math.prod(shape[1:]) if len(shape) > 1 else 1
