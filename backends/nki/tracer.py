"""The candidate's own process: it runs the kernel's Python and nothing else.

Forked by the interpreter child (:mod:`autocomp.backends.nki.runner`) inside the same OS
sandbox before that child reads its request's inputs, with the result channel and stdin
closed (or started as ``python -I -m autocomp.backends.nki.tracer REQ_FD REP_FD``). Here ``nki``,
``nki.language`` and ``nki.isa`` (and ``neuronxcc.nki…``) are stand-ins: every NKI call,
every tile operation, every loop range is a request to the interpreter process, which holds
all tensor data, executes the instruction, records it, and answers with a handle and the
tile's shape/dtype/buffer. This process never sees a tensor's values, never holds the
trace, and has no descriptor of the result channel; the interpreter process is not
dumpable, so it cannot be traced or read from here. Whatever kernel code does in this
process, the only way to move data or to cost anything is to ask the interpreter for an
NKI instruction, and every instruction asked for is counted.

Protocol: newline-delimited JSON. The interpreter sends commands (``load``, ``run``,
``exit``); while one runs, this side sends requests (``call``, ``getitem``, ``setitem``,
``method``, ``binary``, ``inplace``, ``bool``, ``iter``) and gets ``{"ok": value}`` or
``{"error": …}``, and ends a command with ``ready``/``return``/``fail``. Values are encoded
by :func:`encode` (tensors travel as handles). A request's ``loop`` (the innermost loop
iteration it belongs to, ``null`` outside loops) is sent only when it differs from the
previous request's in the same command, with ``affine`` (loop id and iteration of every
``affine_range`` loop around it, outermost first, flattened); a request without them belongs
to that same loop iteration (the interpreter keeps the last one it checked, and none at a
command's start).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import sys
import traceback
import types
from typing import Any

import numpy as np

from autocomp.backends.nki.interp import compiler, core, isa
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.index_grid import IndexGrid
from autocomp.backends.nki.interp.install import GC_THRESHOLDS

# Language helpers that are pure index arithmetic run here; everything else is a request.
LOCAL_LANGUAGE = {"arange", "ds", "par_dim", "mgrid", "tile_size", "spmd_dim", "nc", "finfo", "iinfo"}
# Calls whose value the kernel code needs at once; every other call gives a tensor (or None),
# which travels as a handle without waiting.
VALUE_CALLS = {"affine_range", "sequential_range", "static_range", "program_id", "num_programs", "program_ndim",
               "device_print"}


# json.dumps(msg, separators=...) builds an encoder per call; one, made once, writes the same
# text (a request per NKI call: hundreds of thousands at published shapes).
_JSON_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
try:  # orjson writes the same JSON about ten times faster (the kernel side's largest cost)
    import orjson as _orjson
except ImportError:  # pragma: no cover - an install without the nki extra's orjson
    _orjson = None
# Set by _encode when a message holds a non-finite float: orjson would write it as null,
# json as NaN/Infinity (which the interpreter reads back as the float), so such a batch goes
# through json. Cleared when that batch is written.
_NONFINITE = [False]


def _ENCODE(msg: Any) -> bytes:
    """One request (or batch) as a line of JSON, without the newline."""
    if _orjson is not None and not _NONFINITE[0]:
        try:
            return _orjson.dumps(msg)
        except TypeError:  # an int beyond 64 bits, say: json writes it exactly
            pass
    _NONFINITE[0] = False
    return _JSON_ENCODE(msg).encode()

# Index arrays (nl.arange/nl.mgrid expressions) recur: the same few are sent in every loop
# iteration. Each distinct one travels once per run as ``{"nd": …, "ix": n}`` and afterwards
# as ``{"ix": n}``; the interpreter keeps at most these many (entries, elements in all,
# elements of one array), larger or later ones travel whole every time. The interpreter
# refuses definitions beyond these limits, redefinitions and references to undefined entries.
INDEX_CACHE_ENTRIES = 1 << 16
INDEX_CACHE_ELEMENTS = 1 << 22
INDEX_CACHE_ARRAY = 1 << 14
# Integer arrays too large for the entries above are tried as ranges (range_form): the
# index expressions of AWS's tutorials are dense nl.mgrid grids plus offsets, 64k elements
# each for a (128, 512) tile, which as lists cost the interpreter 0.3 s per request to parse.
RANGE_FORM_MIN = INDEX_CACHE_ARRAY


_RANGE_SEEN: dict[int, tuple[np.ndarray, list[int] | None]] = {}


def range_form(x: np.ndarray) -> list[int] | None:
    """[first value, axis] when ``x`` runs first, first+1, … along one axis and repeats
    along the others (``k * 128 + i.p`` of an ``nl.mgrid`` grid), else None
    (core.range_form). The interpreter rebuilds such an array from these two numbers and
    its shape (core.frozen_range_array) instead of reading every element. The read-only
    grids nl.mgrid/nl.arange return, used as they are in every iteration, are looked at
    once, and an IndexGrid (an offset of them) not at all."""
    if type(x) is IndexGrid and x.form is not None:
        return list(x.form)
    if not x.flags.writeable:
        seen = _RANGE_SEEN.get(id(x))
        if seen is not None and seen[0] is x:
            return seen[1]
    form = core.range_form(x)
    out = None if form is None else [form[0], form[1]]
    if not x.flags.writeable:
        if len(_RANGE_SEEN) >= INDEX_CACHE_ENTRIES:
            _RANGE_SEEN.clear()
        _RANGE_SEEN[id(x)] = (x, out)
    return out


# Requests posted without waiting travel as lines of up to this many (a JSON list): one
# encoding and one decoding per line instead of per request. A request that waits for its
# answer ends its line; a message that ends a command comes on a line of its own.
BATCH = 256


class Conn:
    """The pipes to the interpreter. Requests that produce a tensor are posted without
    waiting: this side names the result with a fresh handle, and only a request that needs
    a value back (a loop range, a tile's shape, a program id) waits, and with it learns of
    any error in what was posted before."""

    def __init__(self, req_fd: int, rep_fd: int) -> None:
        self.out = os.fdopen(req_fd, "wb", buffering=1 << 16)
        self.inp = os.fdopen(rep_fd, "rb", buffering=1 << 16)
        self.kernel_file = ""
        self.free: list[int] = []
        self.next_handle = 1
        self.loops: list[list[Any]] = []  # the loops this side iterates (core.iterate_loop)
        self.loop_ids = itertools.count()
        self.reverse = False  # this run goes through affine_range loops backwards (the run command says)
        self.batch: list[dict[str, Any]] = []  # requests not written yet
        self.reset_index_cache()
        self.reset_loop()

    def reset_loop(self) -> None:
        """No loop sent yet (the interpreter starts every command with none)."""
        self.sent_frame: list[Any] | None = None  # the loop frame the last request named
        self.sent_iteration = -1  # and its iteration then

    def reset_index_cache(self) -> None:
        """Forget the index arrays sent (the interpreter forgets them at every run)."""
        self.ix: dict[tuple, int] = {}  # (dtype, shape, bytes) -> entry the interpreter holds
        self.ix_elements = 0
        self.ix_pending: dict[tuple, int] = {}  # defined by the message being encoded
        self.ix_pending_elements = 0

    def index_array(self, x: np.ndarray, name: str) -> dict[str, Any]:
        key = (name, x.shape, x.tobytes())
        n = self.ix.get(key)
        if n is None:
            n = self.ix_pending.get(key)
        if n is not None:
            return {"ix": n}
        out = {"nd": x.ravel().tolist(), "shape": list(x.shape), "dtype": name}
        n = len(self.ix) + len(self.ix_pending)
        if n < INDEX_CACHE_ENTRIES and self.ix_elements + self.ix_pending_elements + x.size <= INDEX_CACHE_ELEMENTS:
            self.ix_pending[key] = out["ix"] = n
            self.ix_pending_elements += x.size
        return out

    def drop_pending(self) -> None:
        """The message being encoded will not be sent: its definitions do not exist."""
        self.ix_pending = {}
        self.ix_pending_elements = 0

    def send(self, msg: dict[str, Any], flush: bool = False) -> None:
        """Queue a request (written in batches); with ``flush``, a message that ends a command,
        written alone after everything queued."""
        if self.free:
            msg["free"], self.free = self.free, []
        if self.ix_pending:  # sent (from here on): the interpreter holds these entries then
            self.ix.update(self.ix_pending)
            self.ix_elements += self.ix_pending_elements
            self.drop_pending()
        if flush:
            self.write_batch()
            self.out.write(_ENCODE(msg) + b"\n")
            self.out.flush()
            return
        self.batch.append(msg)
        if len(self.batch) >= BATCH:
            self.write_batch()

    def write_batch(self) -> None:
        """The queued requests as one line: a JSON list of them (one alone as itself)."""
        if self.batch:
            batch, self.batch = self.batch, []
            self.out.write(_ENCODE(batch if len(batch) > 1 else batch[0]) + b"\n")

    def recv(self) -> dict[str, Any]:
        self.write_batch()
        self.out.flush()
        line = self.inp.readline()
        if not line:
            os._exit(3)  # the interpreter is gone
        return json.loads(line)

    def line(self) -> int:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == self.kernel_file:
                return frame.f_lineno
            frame = frame.f_back
        return 0

    def _loop(self, msg: dict[str, Any]) -> None:
        """Name the request's loop iteration when it is not the previous request's (the
        message is sent right after: nothing between here and send() can fail)."""
        f = self.loops[-1] if self.loops else None
        if f is not self.sent_frame or (f is not None and f[2] != self.sent_iteration):
            # (a frame's id, trip, affine flag and parent never change; its iteration does)
            msg["loop"] = [f[0], f[1], f[2], f[4], int(f[3])] if f is not None else None
            # every affine_range loop around it, outermost first (the reorder proof's view)
            msg["affine"] = [v for g in self.loops if g[3] for v in (g[0], g[2])]
            self.sent_frame = f
            self.sent_iteration = f[2] if f is not None else -1

    def post(self, msg: dict[str, Any], result: bool = True, into: "LazyView | None" = None) -> "TensorRef | None":
        """Send without waiting; the result (when there is one) is a new handle (``into``:
        the handle of that lazy view, which then stands for it)."""
        # (self.line() inline: this runs once per NKI call)
        frame = sys._getframe(1)
        kernel_file = self.kernel_file
        while frame is not None:
            if frame.f_code.co_filename == kernel_file:
                msg["line"] = frame.f_lineno
                break
            frame = frame.f_back
        else:
            msg["line"] = 0
        ref = None
        if result:
            h = self.next_handle
            if into is None:
                ref = TensorRef(h)
            else:
                into._h, ref = h, into
            msg["h"] = h
            self.next_handle = h + 1
        self._loop(msg)
        self.send(msg)
        return ref

    def request(self, msg: dict[str, Any]) -> Any:
        msg["line"] = self.line()
        self._loop(msg)
        msg["sync"] = 1
        self.send(msg)
        reply = self.recv()
        if "error" in reply:
            err = reply["error"]
            nki = err.get("nki")
            if isinstance(nki, dict):
                raise NkiError(nki.get("kind", "error"), nki.get("message", ""), call=nki.get("call", ""),
                               limit=nki.get("limit", ""), file=nki.get("file", ""), line=int(nki.get("line", 0)),
                               static=bool(nki.get("static")))
            raise RuntimeError(err.get("message", "the interpreter refused the request"))
        return decode(reply.get("ok"))


CONN: Conn | None = None


# ---------------------------------------------------------------------------- stand-ins
class TensorRef:
    """A tile or tensor held by the interpreter: a handle; its shape, dtype and buffer are
    asked for when first needed."""

    __slots__ = ("_h", "_meta", "__weakref__")

    def __init__(self, handle: int, meta: tuple | None = None) -> None:
        self._h = handle
        self._meta = meta

    def __del__(self) -> None:
        if CONN is not None:
            CONN.free.append(self._h)

    def _info(self) -> tuple:
        if self._meta is None:
            m = CONN.request({"op": "meta", "t": self._h})
            self._meta = _meta(m)
        return self._meta

    shape = property(lambda self: self._info()[0])
    dtype = property(lambda self: self._info()[1])
    buffer = property(lambda self: self._info()[2])
    ndim = property(lambda self: len(self._info()[0]))
    itemsize = property(lambda self: self._info()[1].itemsize)

    def __repr__(self) -> str:
        shape, dtype, buffer = self._info()
        return f"<nki tensor {shape} {core.dtype_name(dtype)} in {buffer}>"

    def __len__(self) -> int:
        return self._info()[0][0]

    def __bool__(self) -> bool:
        return bool(CONN.request({"op": "bool", "t": self._h}))

    def __iter__(self):
        return iter(CONN.request({"op": "iter", "t": self._h}))

    def __getitem__(self, key: Any) -> Any:
        if _plain_key(key):
            # (a view of plain slices and integers: named inline where it is used, one request
            # fewer; see LazyView)
            return LazyView(self, encode(key))
        return CONN.post({"op": "getitem", "t": self._h, "key": encode(key)})

    def __setitem__(self, key: Any, value: Any) -> None:
        CONN.post({"op": "setitem", "t": self._h, "key": encode(key), "value": encode(value)}, result=False)

    def _method(self, name: str, *args: Any, **kw: Any) -> Any:
        return CONN.post({"op": "method", "t": self._h, "name": name, "args": encode(list(args)), "kw": encode(kw)})

    def reshape(self, *args: Any, **kw: Any) -> Any:
        return self._method("reshape", *args, **kw)

    def view(self, *args: Any, **kw: Any) -> Any:
        return self._method("view", *args, **kw)

    def broadcast_to(self, *args: Any, **kw: Any) -> Any:
        return self._method("broadcast_to", *args, **kw)

    def ap(self, *args: Any, **kw: Any) -> Any:
        return self._method("ap", *args, **kw)

    # NKI 2.31+ NkiTensor views
    def slice(self, *args: Any, **kw: Any) -> Any:
        return self._method("slice", *args, **kw)

    def select(self, *args: Any, **kw: Any) -> Any:
        return self._method("select", *args, **kw)

    def permute(self, *args: Any, **kw: Any) -> Any:
        return self._method("permute", *args, **kw)

    def expand_dim(self, *args: Any, **kw: Any) -> Any:
        return self._method("expand_dim", *args, **kw)

    def squeeze_dim(self, *args: Any, **kw: Any) -> Any:
        return self._method("squeeze_dim", *args, **kw)

    def broadcast(self, *args: Any, **kw: Any) -> Any:
        return self._method("broadcast", *args, **kw)

    def flatten_dims(self, *args: Any, **kw: Any) -> Any:
        return self._method("flatten_dims", *args, **kw)

    def reshape_dim(self, *args: Any, **kw: Any) -> Any:
        return self._method("reshape_dim", *args, **kw)

    def _bin(self, name: str, a: Any, b: Any) -> Any:
        return CONN.post({"op": "binary", "name": name, "a": encode(a), "b": encode(b)})

    def _inp(self, name: str, value: Any) -> "TensorRef":
        CONN.post({"op": "inplace", "name": name, "t": self._h, "value": encode(value)}, result=False)
        return self

    def __add__(self, o): return self._bin("add", self, o)
    def __radd__(self, o): return self._bin("add", o, self)
    def __sub__(self, o): return self._bin("subtract", self, o)
    def __rsub__(self, o): return self._bin("subtract", o, self)
    def __mul__(self, o): return self._bin("multiply", self, o)
    def __rmul__(self, o): return self._bin("multiply", o, self)
    def __truediv__(self, o): return self._bin("divide", self, o)
    def __rtruediv__(self, o): return self._bin("divide", o, self)
    def __neg__(self): return self._bin("multiply", self, -1.0)
    def __pow__(self, o): return self._bin("power", self, o)
    def __iadd__(self, o): return self._inp("add", o)
    def __isub__(self, o): return self._inp("subtract", o)
    def __imul__(self, o): return self._inp("multiply", o)
    def __itruediv__(self, o): return self._inp("divide", o)


def _plain_key(key: Any) -> bool:
    """Whether an index is only Python ints, slices of ints (or None) and Ellipsis: what a
    LazyView may carry (index arrays define numbered entries once, so their views are asked
    for at once)."""
    for k in (key if type(key) is tuple else (key,)):
        tk = type(k)
        if tk is int or k is Ellipsis:
            continue
        if tk is slice and all(v is None or type(v) is int for v in (k.start, k.stop, k.step)):
            continue
        return False
    return True


class LazyView(TensorRef):
    """``t[plain key]``: no request of its own. Passed to an NKI call or operator it travels
    inline as ``{"v": [handle, key]}`` and the interpreter makes the view there, as the
    request would have (a view records nothing and holds no state of its own; the
    interpreter checks the key then). Anything else done with it (its shape, indexing it,
    assigning into it, ``+=``) first asks for it as an ordinary ``getitem`` and it holds that
    handle from then on. About a third of a GEMM's requests were such views."""

    __slots__ = ("_parent", "_key")

    def __init__(self, parent: TensorRef, key: Any) -> None:
        self._h = None
        self._meta = None
        self._parent = parent
        self._key = key

    def __del__(self) -> None:
        if CONN is not None and self._h is not None:
            CONN.free.append(self._h)

    def _real(self) -> "LazyView":
        if self._h is None:
            CONN.post({"op": "getitem", "t": self._parent._h, "key": self._key}, into=self)
            self._parent = None  # (the handle keeps what it views alive there)
        return self

    def _wire(self) -> dict[str, Any]:
        if self._h is not None:
            return {"t": self._h}
        return {"v": [self._parent._h, self._key]}

    def _info(self) -> tuple:
        return TensorRef._info(self._real())

    def __bool__(self) -> bool:
        return TensorRef.__bool__(self._real())

    def __iter__(self):
        return TensorRef.__iter__(self._real())

    def __getitem__(self, key: Any) -> Any:
        return TensorRef.__getitem__(self._real(), key)

    def __setitem__(self, key: Any, value: Any) -> None:
        TensorRef.__setitem__(self._real(), key, value)

    def _method(self, name: str, *args: Any, **kw: Any) -> Any:
        return TensorRef._method(self._real(), name, *args, **kw)

    def _inp(self, name: str, value: Any) -> "TensorRef":
        return TensorRef._inp(self._real(), name, value)


def _meta(m: Any) -> tuple:
    shape, dtype, buffer = m
    return tuple(int(s) for s in shape), core.DTYPES.get(dtype) or np.dtype(dtype), core.BufferKind(buffer)


class RangeValues:
    """A loop range's values in the order the interpreter chose (reversed affine_range in the
    reorder check): iterable and sized, like the interpreter's own range, nothing more."""

    __slots__ = ("_v", "_affine")

    def __init__(self, spec: list[Any]) -> None:
        start, stop, step, backwards = spec[:4]
        r = range(int(start), int(stop), int(step))
        self._v = r[::-1] if backwards else r
        self._affine = bool(spec[4]) if len(spec) > 4 else False

    def __iter__(self):
        return core.iterate_loop(self._v, len(self._v), self._affine, CONN.loops, CONN.loop_ids)

    def __len__(self) -> int:
        return len(self._v)

    def __repr__(self) -> str:
        return f"<nki range of {len(self._v)} iterations>"


LOCAL_RANGES = {"affine_range", "sequential_range", "static_range"}


def _plain_range(args: tuple) -> bool:
    """Arguments the interpreter's loop ranges take without error: one to three plain
    integers, a nonzero step."""
    return 1 <= len(args) <= 3 and all(type(a) is int for a in args) and (len(args) < 3 or args[2] != 0)


class Remote:
    """An NKI function of the interpreter (``nisa.dma_copy``, ``nl.ndarray``, …)."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self.__name__ = name

    def __call__(self, *args: Any, **kw: Any) -> Any:
        msg = {"op": "call", "mod": self.module, "name": self.name, "args": encode(list(args)), "kw": encode(kw)}
        if self.name in VALUE_CALLS:
            if self.name in LOCAL_RANGES and not kw and _plain_range(args):
                # The values are range(*args), backwards for an affine_range of the reversed
                # run: known here, so the kernel runs on without waiting for the interpreter
                # to catch up (which then takes the posted call exactly as a waited one).
                CONN.post(msg, result=False)
                r = range(*args)
                affine = self.name == "affine_range"
                return RangeValues([r.start, r.stop, r.step, affine and CONN.reverse, affine])
            return CONN.request(msg)
        return CONN.post(msg)

    def __repr__(self) -> str:
        return f"{'nl' if self.module.endswith('language') else 'nisa'}.{self.name}"


class RemoteOp(Remote):
    """An operator (``nl.add``, ``nl.exp``): passed as ``op=`` it travels by name."""


class Kernel:
    def __init__(self, func: Any) -> None:
        self.func = func
        self.__wrapped__ = func
        self.__name__ = getattr(func, "__name__", "kernel")

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.func(*args, **kw)

    def __getitem__(self, grid: Any) -> Any:
        return self.func


def jit(func: Any = None, **options: Any) -> Any:
    if func is None:
        return lambda f: Kernel(f)
    return Kernel(func)


def _module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    mod = types.ModuleType(name, "Stand-in for the NKI API: every call is a request to Autocomp's interpreter.")
    mod.__dict__.update(attrs)
    return mod


def build_modules(style: str) -> dict[str, types.ModuleType]:
    from autocomp.backends.nki.interp.install import _isa_attrs, _language_attrs, annotation_modules

    lang: dict[str, Any] = {}
    for name, value in _language_attrs(style).items():
        if name in LOCAL_LANGUAGE or not callable(value) or isinstance(value, (type, np.dtype, str)):
            lang[name] = value
        elif isinstance(value, isa.Op):
            lang[name] = RemoteOp(f"{style}.language", name)
        else:
            lang[name] = Remote(f"{style}.language", name)
    isa_attrs: dict[str, Any] = {}
    for name, value in _isa_attrs(style).items():
        if name == "get_nc_version" or not callable(value) or isinstance(value, (type, str)):
            isa_attrs[name] = value
        else:
            isa_attrs[name] = Remote(f"{style}.isa", name)
    prefix = "nki" if style == "new" else "neuronxcc.nki"
    lmod = _module(prefix + ".language", lang)
    imod = _module(prefix + ".isa", isa_attrs)
    cmod = _module(prefix + ".compiler", dict(compiler.ATTRS))
    common = {"compiler": cmod, "tensor": TensorRef, "jit": jit, "baremetal": jit, "benchmark": jit, "profile": jit, "trace": jit, "language": lmod, "isa": imod}
    if style == "new":
        root = _module("nki", common)
        root.__path__ = []
        return {"nki": root, "nki.language": lmod, "nki.isa": imod, "nki.compiler": cmod}
    nki_mod = _module("neuronxcc.nki", common)
    nki_mod.__path__ = []
    typing_mod = _module("neuronxcc.nki.typing", {"tensor": TensorRef})
    nki_mod.typing = typing_mod
    root = _module("neuronxcc", {"nki": nki_mod})
    root.__path__ = []
    ops = _module("torch_neuronx.xla_impl.ops", {"nki_jit": jit})
    xla = _module("torch_neuronx.xla_impl", {"ops": ops})
    xla.__path__ = []
    tn = _module("torch_neuronx", {"nki_jit": jit, "xla_impl": xla})
    tn.__path__ = []
    return {"neuronxcc": root, "neuronxcc.nki": nki_mod, "neuronxcc.nki.language": lmod, "neuronxcc.nki.isa": imod,
            "neuronxcc.nki.typing": typing_mod, "neuronxcc.nki.compiler": cmod, "torch_neuronx": tn, "torch_neuronx.xla_impl": xla,
            "torch_neuronx.xla_impl.ops": ops, **annotation_modules(lmod, cmod, TensorRef)}


# ---------------------------------------------------------------------------- values
_UFUNC_NAMES = frozenset(set(isa.BINARY) | set(isa.UNARY) | {"sum", "max", "min", "prod", "amax", "amin", "mean",
                                                            "true_divide", "power", "exp", "tanh", "sqrt", "log"})


_DTYPE_NAMES: dict[np.dtype, str] = {}  # str(dtype) is slow (an index array per request in some kernels)


def encode(x: Any) -> Any:
    """A value of kernel code as JSON (tensors as handles)."""
    try:
        return _encode(x)
    except BaseException:
        if CONN is not None:  # the message will not be sent, nor the index arrays it defined
            CONN.drop_pending()
        raise


def _encode(x: Any) -> Any:
    tx = type(x)
    if tx is int or tx is bool or x is None:  # exact types first: the common case
        return x
    if tx is float:
        if x - x != 0.0:  # inf or nan (see _NONFINITE)
            _NONFINITE[0] = True
        return x
    if tx is TensorRef:
        return {"t": x._h}
    if tx is LazyView:
        return x._wire()
    if tx is tuple:  # (a tile index: ints and index arrays)
        return {"T": [e if type(e) is int else _encode(e) for e in x]}
    if tx is np.ndarray or tx is IndexGrid:
        dt = x.dtype
        if dt.metadata is None:  # (dtypes with metadata compare equal to plain ones)
            name = _DTYPE_NAMES.get(dt)
            if name is None:
                name = _DTYPE_NAMES[dt] = str(dt)
            if dt.kind in "iu" and x.size > RANGE_FORM_MIN:
                form = range_form(x)
                if form is not None:
                    return {"rg": form, "shape": list(x.shape), "dtype": name}
            if CONN is not None and dt.kind in "biu" and x.size <= INDEX_CACHE_ARRAY:
                n = CONN.ix.get((name, x.shape, x.tobytes()))  # (index_array's common case)
                if n is not None:
                    return {"ix": n}
                return CONN.index_array(x, name)
            return {"nd": x.ravel().tolist(), "shape": list(x.shape), "dtype": name}
    if tx is list:
        return {"L": [e if type(e) is int else _encode(e) for e in x]}
    if tx is dict:
        return {"D": [[str(k), _encode(v)] for k, v in x.items()]}
    if tx is np.ufunc:  # (np.add, np.multiply as an op=: as the isinstance below)
        return {"uf": x.__name__}
    if tx is str:
        return x
    if isinstance(x, core.ParDim):
        return {"pd": int(x)}
    if isinstance(x, float) and not isinstance(x, np.generic):
        return _encode(float(x))  # (a float subclass: as the float it is)
    if x is None or isinstance(x, (bool, int)) and not isinstance(x, np.generic):
        return x
    if isinstance(x, core.BufferKind):
        return {"buf": str(x), "tiles": list(x.tiles), "base": x.base_addr}
    if isinstance(x, str):
        return x
    if isinstance(x, LazyView):
        return x._wire()
    if isinstance(x, TensorRef):
        return {"t": x._h}
    if isinstance(x, RemoteOp):
        return {"op": x.name}
    if isinstance(x, Remote):
        return {"fn": [x.module, x.name]}
    if isinstance(x, np.generic):
        if isinstance(x, np.bool_):
            return bool(x)
        if isinstance(x, np.integer):
            return int(x)
        if isinstance(x, np.floating) and x.dtype.itemsize <= 8 and x.dtype.kind == "f":
            return _encode(float(x))
    if isinstance(x, np.ndarray):
        return {"nd": x.ravel().tolist(), "shape": list(x.shape), "dtype": str(x.dtype)}
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return {"dt": core.dtype_name(np.dtype(x))}
    if isinstance(x, np.ufunc) or (callable(x) and getattr(x, "__name__", None) in _UFUNC_NAMES
                                   and getattr(x, "__module__", "") and "numpy" in str(getattr(x, "__module__", ""))):
        return {"uf": x.__name__}
    if isinstance(x, slice):
        return {"S": [_encode(x.start), _encode(x.stop), _encode(x.step)]}
    if x is Ellipsis:
        return {"E": 1}
    if isinstance(x, tuple):
        return {"T": [_encode(e) for e in x]}
    if isinstance(x, list):
        return {"L": [_encode(e) for e in x]}
    if isinstance(x, dict):
        return {"D": [[str(k), _encode(v)] for k, v in x.items()]}
    raise TypeError(f"a {type(x).__name__} cannot be passed to an NKI call")


def decode(x: Any) -> Any:
    if not isinstance(x, dict):
        return x
    if "t" in x:
        return TensorRef(x["t"], _meta((x["shape"], x["dtype"], x["buf"])))
    if "T" in x:
        return tuple(decode(e) for e in x["T"])
    if "L" in x:
        return [decode(e) for e in x["L"]]
    if "R" in x:
        return RangeValues(x["R"])
    if "nd" in x:
        return np.array(x["nd"], dtype=x["dtype"]).reshape(x["shape"])
    if "dt" in x:
        return core.DTYPES.get(x["dt"]) or np.dtype(x["dt"])
    if "buf" in x:
        return core.BufferKind(x["buf"])
    if "S" in x:
        return slice(*(decode(e) for e in x["S"]))
    if "E" in x:
        return Ellipsis
    if "D" in x:
        return {k: decode(v) for k, v in x["D"]}
    raise ValueError(f"unknown value {x!r} from the interpreter")


# ---------------------------------------------------------------------------- main loop
def _frames(tb: Any, kernel_file: str) -> str:
    frames = [f for f in traceback.extract_tb(tb) if f.filename == kernel_file]
    return "".join(f"  {kernel_file}:{f.lineno}: {f.line}\n" for f in frames[-3:])


def _fail(exc: BaseException, path: str, stage: str) -> dict[str, Any]:
    if isinstance(exc, NkiError):
        return {"op": "fail", "error": {"kind": "nki", "message": exc.render(), "nki": exc.to_json()}}
    if isinstance(exc, SyntaxError) and stage == "load":
        return {"op": "fail", "error": {"kind": "compile", "message": f"{path}:{exc.lineno}: {exc.msg}",
                                        "line": exc.lineno or 0}}
    if isinstance(exc, RecursionError):
        return {"op": "fail", "error": {"kind": "runtime", "message": "recursion too deep"}}
    if stage == "load":
        return {"op": "fail", "error": {"kind": "import", "message":
                                        f"loading {path} failed: {type(exc).__name__}: {exc}\n{_frames(exc.__traceback__, path)}"}}
    return {"op": "fail", "error": {"kind": "runtime", "message":
                                    f"{type(exc).__name__}: {exc}\n{_frames(exc.__traceback__, path)}".strip()}}


def main() -> int:
    return serve(int(sys.argv[1]), int(sys.argv[2]))


def serve(req_fd: int, rep_fd: int) -> int:
    """Install the stand-in modules and answer the interpreter's commands until ``exit``."""
    global CONN
    CONN = conn = Conn(req_fd, rep_fd)
    # Every request makes a few dicts and lists: the collector runs as rarely here as in the
    # interpreter while a kernel runs (install.GC_THRESHOLDS; a collector turned off stays off).
    if gc.get_threshold()[0] > 0:
        gc.set_threshold(*GC_THRESHOLDS)
    for name in [m for m in sys.modules if m in ("nki", "neuronxcc", "torch_neuronx")
                 or m.startswith(("nki.", "neuronxcc.", "torch_neuronx."))]:
        del sys.modules[name]
    for style in ("new", "old"):
        sys.modules.update(build_modules(style))
    fn = None
    while True:
        cmd = conn.recv()
        kind = cmd.get("cmd")
        conn.reset_loop()  # (the interpreter forgets the loop at every command)
        if kind == "load":
            path = conn.kernel_file = cmd["file"]
            if cmd.get("source_dir"):
                sys.path.append(cmd["source_dir"])
            try:
                # Compiled from the text the interpreter sent, never from the file or a .pyc.
                module = types.ModuleType("autocomp_nki_kernel")
                module.__file__ = path
                sys.modules["autocomp_nki_kernel"] = module
                exec(compile(str(cmd["source"]), path, "exec", dont_inherit=True), module.__dict__)
                fn = getattr(module, cmd["function"], None)
                if fn is None:
                    conn.send({"op": "fail", "error": {"kind": "import", "message": f"{path} has no function {cmd['function']!r}"}},
                              flush=True)
                    continue
                fn = getattr(fn, "func", fn)
                import inspect

                names = list(inspect.signature(fn).parameters)
                grid = getattr(module, "GRID", ())
                grid = [int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,))]
                conn.send({"op": "ready", "names": names, "grid": grid}, flush=True)
            except BaseException as exc:  # noqa: BLE001 - everything is reported
                conn.send(_fail(exc, path, "load"), flush=True)
        elif kind == "run":
            conn.loops.clear()
            conn.reverse = cmd.get("reverse") is True
            conn.reset_index_cache()  # as the interpreter does at every run
            conn.loop_ids = itertools.count()  # numbered per run, as the interpreter does
            try:
                args = [decode(a) for a in cmd["args"]]
                kwargs = {k: decode(v) for k, v in cmd.get("kwargs", {}).items()}
                result = fn(*args, **kwargs)
                msg = {"op": "return", "value": encode(result)}
            except BaseException as exc:  # noqa: BLE001
                msg = _fail(exc, conn.kernel_file, "run")
            conn.send(msg, flush=True)
            args = kwargs = result = None  # noqa: F841 - drop the handles (freed with the next message)
        else:
            return 0


if __name__ == "__main__":
    sys.exit(main())
