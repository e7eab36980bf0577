"""The interpreter's side of a candidate run: the kernel's Python runs in another process.

:class:`KernelProcess` starts :mod:`autocomp.backends.nki.tracer` with two pipes and no
other descriptor (not the result channel), then serves its requests: each NKI call, tile
index, tile assignment or operator the kernel code makes is executed here, on the
interpreter's own tensors, and recorded in the trace here. The kernel process gets back
handles with shapes/dtypes/buffers, never tensor values. This process makes itself
non-dumpable first, so the kernel process (same user, no capabilities) can neither trace it
nor read its memory.

What a request may carry is checked here: tensors by handle (valid for the current run
only, so nothing survives from one call to the next), NKI operators and NumPy ufuncs by
name, dtypes and buffers by name, numbers, strings, slices and tuples; integer/boolean index
arrays only inside an index (``t[...]``), as ``mask=``, as an affine ``nisa.iota``
expression, or added to a tile as a dynamic offset's index (``offsets[0, i] + i_f``, which
can only index a tile): host-computed data never becomes tile data.

A request without ``loop`` belongs to the loop iteration of the previous request of the same
command (:mod:`autocomp.backends.nki.tracer` names it only when it changes): the last
``loop`` checked here, or none at a command's start; ``"loop": null`` or one that fails the
check means none.
"""

from __future__ import annotations

import collections
import json
import linecache
import math
import os
import subprocess
import sys
from typing import Any

import numpy as np

from autocomp.backends.nki.interp import core, isa, language
from autocomp.backends.nki.interp.core import STATE, Tensor
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.tracer import INDEX_CACHE_ARRAY, INDEX_CACHE_ELEMENTS, INDEX_CACHE_ENTRIES

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - an install without the nki extra's orjson
    _orjson = None


def _loads(line: bytes) -> Any:
    """A request line from the kernel process. orjson reads strict JSON faster; what it
    refuses (NaN/Infinity, which the kernel side writes for non-finite floats; lone
    surrogates; anything malformed) is read by json, whose answer (or ValueError) stands.
    orjson reads an integer beyond 64 bits as the nearest float, where json keeps the int:
    wherever a request needs an integer (handles, loops, slices, shapes) a float is refused or
    converted exactly as one the kernel side wrote, and as a number it is the float json's
    int becomes. Either reading is a message the kernel process could have sent, checked the
    same way after (tests/security: the fallback-reader attack)."""
    if _orjson is not None:
        try:
            return _orjson.loads(line)
        except ValueError:
            pass
    return json.loads(line)

_UFUNCS = frozenset(set(isa.BINARY) | set(isa.UNARY) | {"sum", "max", "min", "prod", "amax", "amin", "mean",
                                                        "true_divide", "power", "exp", "tanh", "sqrt", "log"})
_BINARY = frozenset({"add", "subtract", "multiply", "divide", "power"})
_METHODS = frozenset({"reshape", "view", "broadcast_to", "ap", "slice", "select", "permute", "expand_dim", "squeeze_dim",
                      "broadcast", "flatten_dims", "reshape_dim"})
_BUFFERS = {"sbuf": language.sbuf, "psum": language.psum, "hbm": language.hbm, "shared_hbm": language.shared_hbm,
            "private_hbm": language.private_hbm}
MAX_INDEX_ELEMENTS = 1 << 22
# Calls taking a host integer/boolean array: (positional index or indices, keyword name).
_ARRAY_ARGS = {"iota": ((0, 1), "expr"), "affine_select": ((0, 1), "pred"), "shared_constant": (0, "value"),
               "tensor_copy_predicated": (2, "predicate"), "atomic_rmw": ((), "predicate")}


_HOST_ARRAY_ONLY = ("a host array can only index a tile (t[...]), be a mask= or an iota expression; tile data comes "
                    "from NKI instructions")


def _host_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0


def _offset_tile(x: Any) -> bool:
    """A tile that can be a dynamic offset (one integer element in SBUF, see
    core.dynamic_offset): an index expression may be added to it."""
    return (isinstance(x, Tensor) and x._alloc.buffer == "sbuf" and x.dtype.kind in "iu"
            and math.prod(x.shape) == 1)


class KernelFailure(Exception):
    """The kernel failed (an NKI rule, a Python error in its code, or a broken protocol)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        super().__init__(error.get("message", "kernel failed"))


def make_undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): no ptrace or process_vm_readv from the kernel process."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - Linux always has prctl
        pass


def _api_tables() -> dict[str, dict[str, Any]]:
    from autocomp.backends.nki.interp.install import _isa_attrs, _language_attrs

    return {f"{s}.language": _language_attrs(s) for s in ("new", "old")} | {
        f"{s}.isa": _isa_attrs(s) for s in ("new", "old")}


def _affine_path(flat: Any, loop: Any) -> tuple | None:
    """A request's ``affine`` (loop id, iteration, ... of the affine_range loops around it,
    outermost first) as the reorder proof's loop path, checked: pairs of bounded integers,
    ending with the innermost loop when that is an affine_range one. None when malformed."""
    if (not isinstance(flat, list) or len(flat) % 2 or len(flat) > 128
            or not all(type(v) is int and 0 <= v < 1 << 40 for v in flat)):
        return None
    path = tuple(zip(flat[0::2], flat[1::2]))
    if loop[4] and (not path or path[-1] != (loop[0], loop[2])):
        return None
    if len({lid for lid, _ in path}) != len(path):
        return None
    return path


def _affine(values: np.ndarray) -> bool:
    """Whether ``values`` is c0 + sum_k c_k * index_k (what nl.arange/nl.mgrid arithmetic gives)."""
    if values.size <= 1:
        return True
    base = values.reshape(-1)[0]
    grids = np.indices(values.shape, dtype=np.int64) if values.ndim else []
    expected = np.full(values.shape, base, dtype=np.int64)
    for k in range(values.ndim):
        if values.shape[k] > 1:
            idx = [0] * values.ndim
            idx[k] = 1
            expected = expected + (int(values[tuple(idx)]) - int(base)) * grids[k]
    return bool(np.array_equal(values.astype(np.int64), expected))


class KernelProcess:
    """One kernel process for one candidate file; call :meth:`load`, then use :meth:`kernel`
    as the kernel function for :func:`autocomp.backends.nki.interp.install.execute`."""

    def __init__(self, path: str, function: str, source_dir: str = "", python: str = sys.executable,
                 spawned: tuple[Any, int, int] | None = None, source: str | None = None) -> None:
        self.path = path
        self.source = source
        self.function = function
        self.source_dir = source_dir
        self.api = _api_tables()
        self.handles: dict[int, Any] = {}  # handle -> what it names (a tensor, or None)
        # Index arrays the kernel process defined this run ({"nd": …, "ix": n}), referred to
        # as {"ix": n}: read-only, with their bounds known (core.frozen_index_array), so
        # every use shares one array and its index check costs nothing.
        self.index_arrays: dict[int, np.ndarray] = {}
        self.range_arrays: dict[tuple, np.ndarray] = {}  # range forms seen this run (see _range_array)
        self.index_elements = 0
        self.queue: collections.deque[dict[str, Any]] = collections.deque()  # the rest of a batch
        self.batched = False  # whether the message in hand came inside a batch
        self.next_handle = 0
        self.failure: dict[str, Any] | None = None
        self.names: list[str] = []
        self.grid: tuple[int, ...] = ()
        if spawned is None:
            req_r, req_w = os.pipe()
            rep_r, rep_w = os.pipe()
            proc = subprocess.Popen([python, "-I", "-m", "autocomp.backends.nki.tracer", str(req_w), str(rep_r)],
                                    pass_fds=(req_w, rep_r), close_fds=True, stdin=subprocess.DEVNULL)
            os.close(req_w)
            os.close(rep_r)
            spawned = (proc, req_r, rep_w)
        self.proc, req_r, rep_w = spawned
        self.inp = os.fdopen(req_r, "rb", buffering=1 << 16)
        self.out = os.fdopen(rep_w, "wb", buffering=1 << 16)

    # -- plumbing ---------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        try:
            self.out.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
            self.out.flush()
        except (BrokenPipeError, OSError):
            raise KernelFailure({"kind": "crash", "message": f"the kernel process ended (exit {self.proc.poll()})"}) from None

    def _recv(self) -> dict[str, Any]:
        self.batched = bool(self.queue)
        if self.batched:
            return self.queue.popleft()
        line = self.inp.readline()
        if not line:
            self.proc.kill()
            code = self.proc.wait()
            raise KernelFailure({"kind": "crash", "message": f"the kernel process ended (exit {code})"})
        try:
            msg = _loads(line)
        except ValueError:
            msg = None
        if type(msg) is list and len(msg) > 1 and all(type(m) is dict for m in msg):
            # A batch of requests (tracer.BATCH), served in order as if each had come alone.
            self.queue.extend(msg)
            self.batched = True
            return self.queue.popleft()
        if not isinstance(msg, dict):
            raise KernelFailure({"kind": "crash", "message": "bad message from the kernel process"})
        return msg

    def close(self) -> None:
        """End the kernel process (killed: it has nothing to finish, and may not cooperate)."""
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.inp, self.out):
            try:
                f.close()
            except OSError:
                pass

    # -- commands ---------------------------------------------------------------------
    def load(self) -> None:
        if self.source is None:
            with open(self.path, encoding="utf-8") as fh:
                self.source = fh.read()
        self._send({"cmd": "load", "file": self.path, "source": self.source, "function": self.function,
                    "source_dir": self.source_dir})
        msg = self._serve()
        if msg.get("op") != "ready":
            raise KernelFailure(self._failure_of(msg))
        self.names = [str(n) for n in msg.get("names", [])]
        self.grid = tuple(int(g) for g in msg.get("grid", []))

    def kernel(self, *args: Any, **kwargs: Any) -> Any:
        """Run the kernel once in the kernel process on the interpreter's tensors ``args``."""
        self.handles.clear()  # nothing from an earlier call stays reachable
        self.index_arrays.clear()
        self.index_elements = 0
        self.range_arrays.clear()
        self.queue.clear()
        self.failure = None
        self._send({"cmd": "run", "args": [self._encode(a) for a in args],
                    "kwargs": {k: self._encode(v) for k, v in kwargs.items()}, "reverse": bool(STATE.reverse_affine)})
        msg = self._serve()  # (under install.execute's relaxed_gc: a request makes a few containers)
        if self.failure is not None:  # the first error wins, whatever the kernel code did next
            raise KernelFailure(self.failure)
        if msg.get("op") != "return":
            raise KernelFailure(self._failure_of(msg))
        try:
            return self._decode(msg.get("value"))
        except KernelFailure:
            raise
        except (KeyError, ValueError, TypeError) as exc:
            raise KernelFailure({"kind": "runtime", "message": f"the kernel returned something that is not an NKI tensor: {exc}"}) from None

    def _failure_of(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.failure is not None:
            return self.failure
        err = msg.get("error") if msg.get("op") == "fail" else None
        if not isinstance(err, dict):
            return {"kind": "crash", "message": "bad message from the kernel process"}
        out = {"kind": str(err.get("kind", "runtime")), "message": str(err.get("message", ""))}
        nki = err.get("nki")
        if isinstance(nki, dict):
            out.update({k: v for k, v in nki.items() if k in ("call", "limit", "file", "line", "static")})
        if "line" in err and "line" not in out:
            out["line"] = err["line"]
        return out

    # -- serving ----------------------------------------------------------------------
    def _serve(self) -> dict[str, Any]:
        """Serve requests until the kernel process ends a command. Requests that produce a
        tensor name it with a handle chosen by the kernel side and get no answer; those
        marked ``sync`` get one (with the first error so far, if any)."""
        checked: Any = False  # the loop iteration the requests name (none at a command's start)
        while True:
            msg = self._recv()
            for h in msg.get("free", []) or []:
                if isinstance(h, int):
                    self.handles.pop(h, None)
            op = msg.get("op")
            if op in ("ready", "return", "fail"):
                if self.batched:  # a command ends on a line of its own, never inside a batch
                    self.queue.clear()
                    raise KernelFailure({"kind": "crash", "message": "bad message from the kernel process"})
                return msg
            sync = bool(msg.get("sync"))
            line = msg.get("line")
            STATE.remote_line = int(line) if isinstance(line, int) and line > 0 else None
            if "loop" in msg:  # a new loop iteration (else the previous request's, checked then)
                loop = msg["loop"]
                checked = ([int(v) for v in loop] if isinstance(loop, list) and len(loop) == 5
                           and all(isinstance(v, int) and -1 <= v < 1 << 40 for v in loop)
                           and 0 <= loop[2] < loop[1] and loop[0] >= 0 and loop[4] in (0, 1) else False)
                affine = _affine_path(msg.get("affine"), checked) if checked else ()
                if affine is None:
                    # (the loop stands for the cost model; the proof cannot follow the
                    # iterations, so the reversed-loop run decides)
                    affine = ()
                    if STATE.proof is not None:
                        STATE.proof.give_up("the kernel process named its affine_range loops inconsistently")
                STATE.remote_affine = affine
            STATE.remote_loop = list(checked) if checked else False  # (each instruction its own list)
            reply: dict[str, Any] | None = None
            try:
                if self.failure is not None:
                    raise KernelFailure(self.failure)
                result = self._handle(op, msg)
                h = msg.get("h")
                if isinstance(h, int) and h > 0 and not sync:
                    if h in self.handles:
                        raise ValueError("handle reused")
                    self.handles[h] = result
                elif sync:
                    reply = {"ok": self._encode(result)}
            except NkiError as exc:
                err = {"kind": "nki", "message": exc.render(), **{k: v for k, v in exc.to_json().items()
                                                                 if k not in ("kind", "message")}}
                self.failure = self.failure or err
                reply = {"error": {"message": exc.render(), "nki": exc.to_json()}}
            except KernelFailure as exc:
                # (a request naming a tensor of an earlier call fails the run even when nobody
                # waits for its answer, as an NKI error does: else it silently did nothing)
                self.failure = self.failure or dict(exc.error)
                reply = {"error": {"message": exc.error.get("message", ""), "nki": _nki_json(exc.error)}}
            except RecursionError:
                self.failure = self.failure or {"kind": "runtime", "message": "recursion too deep"}
                reply = {"error": {"message": "recursion too deep"}}
            except Exception as exc:  # an interpreter call failed on what the kernel passed
                message = f"{type(exc).__name__}: {exc}\n{self._where()}".strip()
                self.failure = self.failure or {"kind": "runtime", "message": message}
                reply = {"error": {"message": message}}
            finally:
                STATE.remote_line = None
                STATE.remote_loop = None
            if sync:
                self._send(reply if reply is not None else {"ok": None})

    def _where(self) -> str:
        line = STATE.remote_line or 0
        if not line:
            return ""
        return f"  {self.path}:{line}: {linecache.getline(self.path, line).strip()}\n"

    def _tensor(self, h: Any) -> Any:
        if not isinstance(h, int) or h not in self.handles:
            raise KernelFailure({"kind": "runtime", "message": "a tensor from an earlier kernel call was used; kernels "
                                 "keep no state between calls"})
        return self.handles[h]

    def _handle(self, op: Any, msg: dict[str, Any]) -> Any:
        if op == "call":
            table = self.api.get(str(msg.get("mod")))
            name = str(msg.get("name"))
            if table is None or name not in table or name.startswith("_"):
                raise ValueError(f"no NKI function {msg.get('mod')}.{name}")
            fn = table[name]
            # Integer/boolean host arrays are accepted where NKI takes trace-time index data:
            # an iota or affine_select expression, a predicate, a mask, a shared_constant's values.
            pos, key = _ARRAY_ARGS.get(name, (-1, ""))
            args = [self._decode(a, arrays=(i in pos if isinstance(pos, tuple) else i == pos))
                    for i, a in enumerate(self._list(msg.get("args")))]
            kw = {k: self._decode(v, arrays=(k == "mask" or k == key)) for k, v in self._dict(msg.get("kw")).items()}
            if name == "iota":
                exprs = [kw.get("expr")] + [a for a in args[:2] if isinstance(a, np.ndarray)]
                if any(isinstance(expr, np.ndarray) and not _affine(expr) for expr in exprs):
                    raise core.fail("bad-operand", "iota needs an affine index expression (nl.arange / nl.mgrid "
                                    "arithmetic)", "nisa.iota")
            return fn(*args, **kw)
        if op == "getitem":
            return self._tensor(msg.get("t"))[self._decode(msg.get("key"), arrays=True)]
        if op == "setitem":
            self._tensor(msg.get("t"))[self._decode(msg.get("key"), arrays=True)] = self._decode(msg.get("value"))
            return None
        if op == "method":
            name = msg.get("name")
            if name not in _METHODS:
                raise ValueError(f"tensors have no method {name!r} here")
            return getattr(self._tensor(msg.get("t")), name)(*[self._decode(a) for a in self._list(msg.get("args"))],
                                                             **{k: self._decode(v) for k, v in self._dict(msg.get("kw")).items()})
        if op == "binary":
            if msg.get("name") not in _BINARY:
                raise ValueError("unknown operator")
            # An index expression may be added to a tile: a dynamic offset (``offsets[0, i] +
            # i_f``, nl.ds(tile, n)), which can only index a tile; the interpreter refuses a
            # host array anywhere else in tile arithmetic (language._binary).
            index = msg["name"] == "add"
            a, b = self._decode(msg.get("a"), arrays=index), self._decode(msg.get("b"), arrays=index)
            if index and (_host_array(a) or _host_array(b)) and not (_offset_tile(a) or _offset_tile(b)):
                raise core.fail("bad-operand", _HOST_ARRAY_ONLY)
            return core.OPS["binary"](msg["name"], a, b)
        if op == "inplace":
            if msg.get("name") not in _BINARY:
                raise ValueError("unknown operator")
            core.OPS["inplace"](msg["name"], self._tensor(msg.get("t")), self._decode(msg.get("value")))
            return None
        if op == "meta":
            t = self._tensor(msg.get("t"))
            if not isinstance(t, Tensor):
                raise AttributeError(f"'{type(t).__name__}' object has no attribute 'shape'")
            return [list(t.shape), core.dtype_name(t.dtype), str(t.buffer)]
        if op == "bool":
            return bool(self._tensor(msg.get("t")))
        if op == "iter":
            return list(iter(self._tensor(msg.get("t"))))
        raise ValueError(f"unknown request {op!r}")

    @staticmethod
    def _list(x: Any) -> list[Any]:
        if isinstance(x, dict) and isinstance(x.get("L"), list):
            return x["L"]
        raise ValueError("bad argument list")

    @staticmethod
    def _dict(x: Any) -> dict[str, Any]:
        if isinstance(x, dict) and isinstance(x.get("D"), list):
            return {str(k): v for k, v in x["D"]}
        raise ValueError("bad keyword arguments")

    # -- values -----------------------------------------------------------------------
    def _encode(self, x: Any) -> Any:
        if x is None or isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
            return x
        if isinstance(x, Tensor):
            self.next_handle -= 1  # this side's handles are negative; the kernel side's positive
            self.handles[self.next_handle] = x
            return {"t": self.next_handle, "shape": list(x.shape), "dtype": core.dtype_name(x.dtype), "buf": str(x.buffer)}
        if isinstance(x, core.BufferKind):
            return {"buf": str(x)}
        if isinstance(x, str):
            return x
        if isinstance(x, np.generic):
            return x.item() if x.dtype.kind in "biuf" else str(x)
        if isinstance(x, language._Range):
            r = x.values
            backwards = x.kind == "affine_range" and STATE.reverse_affine
            return {"R": [r.start, r.stop, r.step, backwards, x.kind == "affine_range"]}
        if isinstance(x, np.ndarray):
            return {"nd": x.ravel().tolist(), "shape": list(x.shape), "dtype": str(x.dtype)}
        if isinstance(x, np.dtype):
            return {"dt": core.dtype_name(x)}
        if isinstance(x, tuple):
            return {"T": [self._encode(e) for e in x]}
        if isinstance(x, list):
            return {"L": [self._encode(e) for e in x]}
        raise TypeError(f"the interpreter cannot hand a {type(x).__name__} to kernel code")

    def _range_array(self, x: dict[str, Any]) -> np.ndarray:
        """The read-only array a range form names, checked for form and size first; the same
        form gives the same array for the whole run (one bounds entry, not one per use)."""
        form, shape, name = x.get("rg"), x.get("shape"), x.get("dtype")
        if (type(form) is not list or len(form) != 2 or not all(type(v) is int for v in form)
                or type(shape) is not list or not shape or not all(type(s) is int and s > 0 for s in shape)
                or type(name) is not str):
            raise ValueError("bad range form")
        first, axis = form
        if not 0 <= axis < len(shape):
            raise ValueError("bad range form")
        dt = np.dtype(name)
        if dt.kind not in "iu" or math.prod(shape) > MAX_INDEX_ELEMENTS:
            raise core.fail("bad-operand", "index arrays hold integers or booleans")
        info = np.iinfo(dt)
        if not (info.min <= first and first + shape[axis] - 1 <= info.max):
            raise ValueError("bad range form")
        key = (first, axis, tuple(shape), dt.str)
        arr = self.range_arrays.get(key)
        if arr is None:
            if len(self.range_arrays) >= INDEX_CACHE_ENTRIES:
                self.range_arrays.clear()
            arr = self.range_arrays[key] = core.frozen_range_array(first, axis, tuple(shape), dt)
        return arr

    def _decode(self, x: Any, arrays: bool = False) -> Any:
        if type(x) is not dict:
            if x is None or isinstance(x, (bool, int, float, str)):
                return x
            raise ValueError(f"bad value {type(x).__name__}")
        if "t" in x:
            return self._tensor(x["t"])
        if "v" in x:  # a view named where it is used (tracer.LazyView): as a getitem request
            v = x["v"]
            if type(v) is not list or len(v) != 2:
                raise ValueError("bad view")
            return self._tensor(v[0])[self._decode(v[1], arrays=True)]
        if "pd" in x:
            if not isinstance(x["pd"], int) or isinstance(x["pd"], bool):
                raise ValueError("bad par_dim")
            return core.ParDim(x["pd"])
        if "T" in x:
            return tuple([self._decode(e, arrays) for e in x["T"]])
        if "L" in x:
            return [self._decode(e, arrays) for e in x["L"]]
        if "S" in x:
            parts = [self._decode(e, arrays) for e in x["S"]]
            if len(parts) != 3 or not all(p is None or isinstance(p, (int, Tensor, np.ndarray)) for p in parts):
                raise ValueError("bad slice")
            return slice(*parts)
        if "E" in x:
            return Ellipsis
        if "op" in x:
            op = isa.OP_OBJECTS.get(str(x["op"]))
            if op is None:
                raise ValueError(f"unknown operator {x['op']!r}")
            return op
        if "uf" in x:
            if x["uf"] not in _UFUNCS or not hasattr(np, x["uf"]):
                raise ValueError(f"unknown NumPy operator {x['uf']!r}")
            return getattr(np, x["uf"])
        if "fn" in x:
            mod, name = x["fn"]
            table = self.api.get(str(mod), {})
            if name not in table or str(name).startswith("_"):
                raise ValueError(f"no NKI function {mod}.{name}")
            return table[name]
        if "dt" in x:
            name = str(x["dt"])
            if name in core.DTYPES:
                return core.DTYPES[name]
            dt = np.dtype(name)
            if dt.kind not in "biuf":
                raise ValueError(f"unsupported dtype {name}")
            return dt
        if "buf" in x:
            buf = _BUFFERS[str(x["buf"])]
            tiles, base = x.get("tiles") or [], x.get("base")
            if tiles or base is not None:
                if not isinstance(tiles, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tiles):
                    raise ValueError("bad buffer tiles")
                if base is not None and (not isinstance(base, int) or isinstance(base, bool)):
                    raise ValueError("bad buffer base address")
                return core.buffer_with_tiles(str(buf), tiles, base, traced=False)
            return buf
        if "rg" in x:  # an index array given as a range along one axis (tracer.range_form)
            if not arrays:
                raise core.fail("bad-operand", _HOST_ARRAY_ONLY)
            return self._range_array(x)
        if "nd" in x or "ix" in x:
            if not arrays:
                raise core.fail("bad-operand", _HOST_ARRAY_ONLY)
            if "nd" not in x:  # an index array this run's kernel process defined before
                arr = self.index_arrays.get(x["ix"]) if type(x["ix"]) is int else None
                if arr is None:
                    raise ValueError("reference to an undefined index array")
                return arr  # read-only: every use shares it, as if it had come whole
            dt = np.dtype(str(x["dtype"]))
            shape = [int(s) for s in x["shape"]]
            # (math.prod: exact, where np.prod of hostile sizes could wrap around)
            if dt.kind not in "biu" or math.prod(shape) > MAX_INDEX_ELEMENTS:
                raise core.fail("bad-operand", "index arrays hold integers or booleans")
            arr = np.array(x["nd"], dtype=dt).reshape(shape)
            if "ix" in x:  # defines an entry: a new one, within the limits the kernel side keeps
                n = x["ix"]
                if (type(n) is not int or not 0 <= n < INDEX_CACHE_ENTRIES or n in self.index_arrays
                        or arr.size > INDEX_CACHE_ARRAY or self.index_elements + arr.size > INDEX_CACHE_ELEMENTS):
                    raise ValueError("bad index array definition")
                self.index_arrays[n] = arr = core.frozen_index_array(arr)
                self.index_elements += arr.size
            return arr
        if "D" in x:
            return {str(k): self._decode(v, arrays) for k, v in x["D"]}
        raise ValueError("bad value")


def _nki_json(error: dict[str, Any]) -> dict[str, Any] | None:
    if error.get("kind") != "nki":
        return None
    return {"kind": "error", "message": error.get("message", ""), **{k: error[k] for k in ("call", "limit", "file", "line", "static")
                                                                     if k in error}}
