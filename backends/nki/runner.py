"""The interpreter child: runs one NKI kernel file on the interpreter, in the OS sandbox.

Run as ``python -I -m autocomp.backends.nki.runner`` through
:func:`autocomp.sandbox.run_limited` (no network, an empty environment, no ``/proc``, a
read-only view of Python, its work directory writable), with the request on stdin: one JSON
line, then (for candidates) the oracle's inputs as raw arrays after one JSON header
(:func:`autocomp.backends.nki.portable.pack_arrays`), so no inputs file exists where kernel
code could read it. It never decides a verdict.

Modes: ``oracle`` (the user's original file, trusted: loaded here, inputs made with its
``get_inputs``, every seed run while the runs so far predict a total within ``seed_budget``
seconds; at least the first) and ``candidate`` (every seed, then with ``reorder`` the
first seed once more with every ``affine_range`` reversed, recording no trace, unless
``reorder_proof`` is asked and the first run proves that unnecessary (then that run starts
only when the proof fails); with
``reverse_only``, for the original file as its own candidate, only that reversed run). For
a candidate, the kernel's
Python runs in kernel processes (:mod:`autocomp.backends.nki.tracer`) forked before the
inputs are read, with stdin and every descriptor but two pipes closed, and served by
:mod:`autocomp.backends.nki.remote` from this process, which made itself non-dumpable: one
kernel process for the seeds and a fresh one for the reversed run, each compiling the
kernel text read here before any kernel code ran.

Everything goes back on the channel, descriptor 3, which only this process holds: with
``early_inputs`` (oracle mode), first the first seed's input arrays and ``["inputs", seed,
n]``, before the original runs (the parent starts a candidate on them meanwhile); the
instructions of the first seed's run as they are recorded, in binary batches (``["tb",
templates, nbytes]`` and the integers; see :class:`TraceBatch` and
:mod:`autocomp.backends.nki.trace_wire`), the arrays (``["array", key, dtype, shape, nbytes]``
followed by the raw bytes), and last ``["result", {...}]``.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import time
import traceback
from typing import Any

CHANNEL_FD = 3
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators=...) without an encoder per call


def _error(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"status": "error", "error": {**extra, "kind": kind, "message": message}}


def _kernel_frames(tb: Any, kernel_file: str) -> str:
    """Traceback lines from the kernel file only (the interpreter's frames are noise)."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename == kernel_file]
    return "".join(f"  {kernel_file}:{f.lineno}: {f.line}\n" for f in frames[-3:])


def _annotation_inputs(module: Any, fn: Any, seed: int) -> list[np.ndarray] | None:
    """Inputs from ``INPUT_SPECS = {"a": ("float32", (128, 512)), ...}`` when there is no get_inputs."""
    import numpy as np

    specs = getattr(module, "INPUT_SPECS", None)
    if not isinstance(specs, dict):
        return None
    from autocomp.backends.nki.interp.core import DTYPES

    rng = np.random.default_rng(seed)
    params = list(inspect.signature(fn).parameters)
    arrays = []
    for name in params:
        if name not in specs:
            raise ValueError(f"INPUT_SPECS has no entry for kernel parameter {name!r}")
        dtype, shape = specs[name]
        dt = DTYPES.get(dtype) or np.dtype(dtype)
        if dt.kind in "iu":
            arrays.append(rng.integers(0, 16, size=tuple(shape)).astype(dt))
        else:
            arrays.append(rng.standard_normal(tuple(shape)).astype(np.float32).astype(dt))
    return arrays


def _make_inputs(module: Any, fn: Any, seed: int) -> list[np.ndarray]:
    import numpy as np

    get_inputs = getattr(module, "get_inputs", None)
    if get_inputs is None:
        arrays = _annotation_inputs(module, fn, seed)
        if arrays is None:
            raise ValueError("the kernel file defines neither get_inputs() nor INPUT_SPECS; add one (see the NKI target docs)")
        return arrays
    np.random.seed(seed)
    nparams = len(inspect.signature(get_inputs).parameters)
    result = get_inputs(np.random.default_rng(seed)) if nparams >= 1 else get_inputs()
    if isinstance(result, dict):
        params = list(inspect.signature(getattr(fn, "func", fn)).parameters)
        result = [result[p] for p in params if p in result]
    arrays = [np.asarray(x) for x in (result if isinstance(result, (list, tuple)) else [result])]
    if not arrays:
        raise ValueError("get_inputs() returned no arrays")
    return arrays


class InputsFailed(Exception):
    """A kernel file's get_inputs()/INPUT_SPECS failed for one input set (the result to send)."""

    def __init__(self, seed: int, exc: Exception) -> None:
        super().__init__(f"seed {seed}")
        self.error = _error("inputs", f"making inputs for seed {seed} failed: {type(exc).__name__}: {exc}")


class _LazyInputs(dict):
    """The original's input sets by seed, each made on first use (see run)."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, seed: int) -> list[Any]:
        try:
            made = self._make(seed)
        except Exception as exc:
            raise InputsFailed(seed, exc) from exc
        self[seed] = made
        return made


def _poisoned(arr: np.ndarray) -> np.ndarray:
    import numpy as np

    from autocomp.backends.nki.interp.core import is_float

    out = np.array(arr, copy=True)
    if is_float(out.dtype):
        out[...] = np.nan
    elif out.dtype.kind in "iu":
        out[...] = np.iinfo(out.dtype).max
    return out


def _unchanged(after: Any, given: Any) -> bool:
    """Whether ``after`` holds exactly the bytes of ``given`` (same shape and dtype)."""
    import numpy as np

    from autocomp.backends.nki.portable import same_bytes

    if not isinstance(after, np.ndarray) or not isinstance(given, np.ndarray):
        return False
    try:
        return same_bytes(after, given)
    except (TypeError, ValueError):
        return False


class Channel:
    """Descriptor 3: messages and arrays for the parent, written at once (no buffer here
    that anything could rewrite)."""

    def __init__(self, fd: int) -> None:
        os.fstat(fd)
        self.fd = fd

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def message(self, message: list[Any]) -> None:
        self._write((_ENCODE(message) + "\n").encode())

    def blob(self, header: bytes, payload: bytes) -> None:
        """A header line already encoded, then the raw bytes it announces."""
        self._write(header)
        self._write(payload)

    def batched(self) -> "TraceBatch":
        """A sink for the trace that sends its messages in bulk (see :class:`TraceBatch`)."""
        return TraceBatch(self)

    def array(self, key: str, arr: np.ndarray) -> None:
        import numpy as np

        from autocomp.backends.nki.interp.core import dtype_name

        arr = np.asarray(arr, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        raw = arr.astype(np.uint8) if arr.dtype.kind == "b" else arr
        # The array's own bytes, not a copy of them (no kernel code runs once the arrays are
        # sent, so nothing can change them while they are written).
        data = memoryview(raw.reshape(-1).view(np.uint8))
        self.message(["array", key, dtype_name(arr.dtype), list(arr.shape), len(data)])
        self._write(data)


class TraceBatch:
    """The trace sent in binary batches (:mod:`autocomp.backends.nki.trace_wire`) of up to
    ``size`` instructions: one header line and one write of integers per batch instead of
    JSON per instruction (at published shapes that was seconds of the run and more in the
    parent), the parent rebuilding exactly the instructions and amendments sent. An
    amendment of an instruction still in the batch is already in it (the interpreter adds
    the regions to the recorded instruction itself); one of an instruction sent earlier
    travels as its own record. Only the interpreter's own code appends here: a candidate's
    Python runs in other processes, and the original (the oracle) is the user's own trusted
    file. :meth:`flush` before anything else goes on the channel."""

    def __init__(self, channel: Channel, size: int = 4096) -> None:
        from autocomp.backends.nki.trace_wire import Encoder

        self.channel = channel
        self.size = size
        self.encoder = Encoder()
        self.pending: list[Any] = []  # instructions (their final regions are encoded at the flush)
        self.count = 0  # instructions seen: the trace index of the next one
        self.sent = 0  # instructions already on the channel

    def instr(self, ins: Any) -> None:
        self.pending.append(ins)
        self.count += 1
        if len(self.pending) >= self.size:
            self.flush()

    def amend(self, index: int, reads: tuple, writes: tuple) -> None:
        if index >= self.sent:
            return  # still pending: the instruction itself holds the added regions
        self.encoder.amend(index, reads, writes)

    def _encode_pending(self) -> None:
        for ins in self.pending:
            self.encoder.instr(ins)
        self.sent += len(self.pending)
        self.pending = []

    def flush(self) -> None:
        self._encode_pending()
        batch = self.encoder.batch()
        if batch is not None:
            self.channel.blob(*batch)


def budget_seconds(cpu: float, wall: float) -> float:
    """What the original's runs so far count against ``seed_budget``: this process's CPU
    seconds (the original runs here), so that the input sets that run do not depend on what
    else the machine does, a candidate started beside it included. In the sandbox the CPU
    clock advances in ticks (4 ms here): before its first tick, the wall time stands in."""
    return cpu if cpu > 0 else wall


def _load_inputs(raw: bytes, dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    from autocomp.backends.nki.portable import unpack_arrays

    return unpack_arrays(raw, dtypes)


class Forked:
    """A kernel process forked from this one (the subset of Popen that KernelProcess uses)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def fork_kernel_processes(count: int) -> list[tuple[Any, int, int]]:
    """Fork ``count`` kernel processes now, before this process reads the inputs: each
    starts with NumPy and the interpreter's modules imported (no second start-up), closes the
    result channel and stdin at once, and keeps only its two pipes."""
    from autocomp.backends.nki import tracer

    procs = []
    for _ in range(count):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the kernel process
            code = 1
            try:
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.close(devnull)
                low = 3
                for fd in sorted({req_w, rep_r}):
                    os.closerange(low, fd)
                    low = fd + 1
                os.closerange(low, 1 << 16)
                code = tracer.serve(req_w, rep_r)
            finally:
                os._exit(code)
        os.close(req_w)
        os.close(rep_r)
        procs.append((Forked(pid), req_r, rep_w))
    return procs


class _Unwaitable(Forked):
    """A sibling kernel process seen from the reverse worker: it can be killed, not waited
    for (the runner, its parent, reaps it)."""

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.returncode = -9
        return self.returncode


class _ReverseWorker:
    """The reversed-loop run in a forked copy of the runner: it loads the candidate in the
    second kernel process and sends back either its outputs or its error on a pipe."""

    def __init__(self, kprocs: list[Any], inputs: list[Any], poison: set[int], path: str, names: Any, grid: Any) -> None:
        rd, wr = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(rd)
                try:
                    os.close(CHANNEL_FD)  # only the runner writes the result channel
                except OSError:
                    pass
                code = self._work(wr, kprocs, inputs, poison, path, names, grid)
            finally:
                os._exit(code)
        os.close(wr)
        self.pid, self.fd = pid, rd
        self.kernel = kprocs[1]

    @staticmethod
    def _work(wr: int, kprocs: list[Any], inputs: list[Any], poison: set[int], path: str, names: Any, grid: Any) -> int:
        from autocomp.backends.nki.interp.errors import NkiError
        from autocomp.backends.nki.interp.install import execute
        from autocomp.backends.nki.remote import KernelFailure

        out = Channel(wr)
        for k in kprocs:
            k.proc = _Unwaitable(k.proc.pid)
        for f in (kprocs[0].inp, kprocs[0].out):  # the seeds' kernel process is the runner's
            try:
                f.close()
            except OSError:
                pass
        try:
            kprocs[1].load()
            args = [(_poisoned(a) if i in poison else a) for i, a in enumerate(inputs)]
            rev = execute(kprocs[1].kernel, args, kernel_file=path, reverse_affine=True, names=names, grid=grid,
                          traced=False)
        except KernelFailure as exc:
            out.message(["error", {"status": "error", "error": dict(exc.error)}])
            return 0
        except NkiError as exc:
            out.message(["error", _error("nki", exc.render(), **{k: v for k, v in exc.to_json().items()
                                                                 if k not in ("kind", "message")})])
            return 0
        except RecursionError:
            out.message(["error", _error("runtime", "recursion too deep")])
            return 0
        except MemoryError:
            out.message(["error", _error("runtime", "the kernel ran out of memory in the interpreter")])
            return 0
        except Exception as exc:
            where = _kernel_frames(exc.__traceback__, path)
            out.message(["error", _error("runtime", f"{type(exc).__name__}: {exc}\n{where}".strip())])
            return 0
        finally:
            kprocs[1].close()
        for i, o in enumerate(rev.outputs):
            out.array(f"rev_out{i}", o)
        out.message(["done", len(rev.outputs)])
        return 0

    def collect(self) -> tuple[dict[str, Any] | None, list[Any]]:
        """(error, outputs) of the reversed run, once it ends."""
        import numpy as np

        from autocomp.backends.nki.interp.core import DTYPES

        with os.fdopen(self.fd, "rb") as fh:
            raw = fh.read()
        os.waitpid(self.pid, 0)
        self.pid = 0
        self.kernel.close()
        outputs: list[Any] = []
        pos = 0
        while pos < len(raw):
            end = raw.index(b"\n", pos)
            msg = json.loads(raw[pos:end])
            pos = end + 1
            if msg[0] == "error":
                return msg[1], []
            if msg[0] == "done":
                return None, outputs
            key, dtype, shape, nbytes = msg[1], msg[2], msg[3], msg[4]
            data = raw[pos:pos + nbytes]
            pos += nbytes
            if dtype in ("bool", "bool_"):
                outputs.append(np.frombuffer(data, dtype=np.uint8).reshape(shape).astype(bool))
            else:
                outputs.append(np.frombuffer(data, dtype=DTYPES.get(dtype) or np.dtype(dtype)).reshape(shape).copy())
        return _error("crash", "the reversed-loop run ended without a result"), []

    def kill(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = 0
            try:
                os.close(self.fd)
            except OSError:
                pass


def _read_line(fd: int) -> bytes:
    """The request line from stdin, read unbuffered, so not a byte of the inputs after it is
    in this process's memory before the kernel processes are forked."""
    out = bytearray()
    while True:
        b = os.read(fd, 1)
        if not b or b == b"\n":
            return bytes(out)
        out += b


def run(request: dict[str, Any], channel: Channel | None = None, inputs_raw: bytes = b"",
        spawned: list[tuple[Any, int, int]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, arrays); the trace goes to ``channel`` as it is recorded."""
    from autocomp.backends.nki.interp import core, install
    from autocomp.backends.nki.interp.errors import NkiError
    from autocomp.backends.nki.interp.install import execute
    from autocomp.backends.nki.remote import KernelFailure, KernelProcess, make_undumpable

    install()
    mode = request["mode"]
    path = request["file"]
    sink = channel.batched() if channel is not None else None
    arrays: dict[str, Any] = {}
    seeds = [int(s) for s in request["seeds"]]
    kprocs: list[KernelProcess] = []
    rev_fn = None
    early: set[str] = set()  # input arrays already on the channel
    if mode == "oracle":
        if request.get("source_dir"):
            # After site-packages, so a file there cannot shadow numpy or the interpreter.
            sys.path.append(str(request["source_dir"]))
        spec = importlib.util.spec_from_file_location("autocomp_nki_kernel", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["autocomp_nki_kernel"] = module
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            return _error("compile", f"{path}:{exc.lineno}: {exc.msg}", line=exc.lineno or 0), {}
        except NkiError as exc:
            return _error("nki", exc.render(), **{k: v for k, v in exc.to_json().items() if k not in ("kind", "message")}), {}
        except Exception as exc:
            return _error("import", f"loading {path} failed: {type(exc).__name__}: {exc}\n{_kernel_frames(exc.__traceback__, path)}"), {}
        fn = getattr(module, request["function"], None)
        if fn is None:
            return _error("import", f"{path} has no function {request['function']!r}"), {}
        names = list(inspect.signature(getattr(fn, "func", fn)).parameters)
        grid = getattr(module, "GRID", ())  # SPMD launch grid, e.g. GRID = (4,)
        grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        rng_seeds = dict(zip(seeds, (int(r) for r in request.get("rng_seeds", seeds))))  # secret, behind the labels
        # Each input set is made when its run starts: a large problem runs fewer sets (see
        # seed_budget), and making the others' random arrays took a third of its time.
        inputs = _LazyInputs(lambda seed: _make_inputs(module, getattr(fn, "func", fn), rng_seeds[seed]))
        try:
            first = inputs[seeds[0]]
        except InputsFailed as exc:
            return exc.error, {}
        if channel is not None and request.get("early_inputs"):
            # The first set always runs: sent now, before the kernel starts, so that the parent
            # can start a candidate on it while the original runs (it is not sent again below).
            for i, a in enumerate(first):
                channel.array(f"s{seeds[0]}_in{i}", a)
                early.add(f"s{seeds[0]}_in{i}")
            channel.message(["inputs", seeds[0], len(first)])
    else:
        src = _load_inputs(inputs_raw, request["inputs"]["dtypes"])
        inputs = {}
        for seed in seeds:
            n = sum(1 for k in src if k.startswith(f"s{seed}_in"))
            inputs[seed] = [src[f"s{seed}_in{i}"] for i in range(n)]
        # The kernel's Python runs in processes of its own, which must not reach this one: one
        # for the seeds, and a fresh one for the reversed run, so nothing the kernel keeps
        # between calls (module globals, default arguments) reaches the reorder check.
        make_undumpable()
        if spawned is None:
            spawned = fork_kernel_processes(2 if request.get("reorder") else 1)
        kprocs = [KernelProcess(path, request["function"], str(request.get("source_dir") or ""), spawned=s,
                                source=request["source"]) for s in spawned]
        try:
            kprocs[0].load()
        except KernelFailure as exc:
            for k in kprocs:
                k.close()
            return {"status": "error", "error": dict(exc.error)}, {}
        fn, names, grid = kprocs[0].kernel, kprocs[0].names, kprocs[0].grid
        if len(kprocs) > 1:
            rev_fn = kprocs[1].kernel
    poison = set(int(i) for i in request.get("poison", []))

    result: dict[str, Any] = {"status": "ok", "counts": {}}
    start = time.perf_counter()
    cpu_start = time.process_time()
    stage = "run"
    reverse = None
    # The original file as its own candidate: the oracle's run of it already gave its outputs
    # and trace, so only the reversed-loop run (first seed) is left to do here.
    forward = seeds if mode == "oracle" or not (request.get("reverse_only") and rev_fn is not None) else []
    # With reorder_proof (the parent's static check found no Python state carried across
    # affine_range iterations), the first run also tries to prove the reversed run
    # unnecessary (reorder_proof); that run then starts only if the proof fails, beside the
    # remaining input sets (started beside the first and stopped when proven, it would take
    # a core from the other evaluations for nothing; lowered in priority, it would starve
    # when it is needed, and a process cannot raise its priority again).
    prove = bool(request.get("reorder_proof")) and bool(forward)
    parallel = rev_fn is not None and request.get("parallel_reorder", True) and len(forward) >= 1
    if parallel and not prove:
        # The reversed run goes on in a forked copy of this process, beside the seeds (a second
        # core halves a large candidate's time); its kernel process is the second one forked
        # before the inputs were read, as in the sequential order.
        reverse = _ReverseWorker(kprocs, inputs[seeds[0]], poison, path, names, grid)
    try:
        for n, seed in enumerate(forward):
            args = [(_poisoned(a) if i in poison else a) for i, a in enumerate(inputs[seed])]
            core.stream_to(sink if n == 0 else None)
            try:
                res = execute(fn, args, kernel_file=path, names=names, grid=grid, prove_reorder=prove and n == 0)
            finally:
                core.stream_to(None)
                if sink is not None and n == 0:
                    sink.flush()
            if sink is not None and n == 0:
                # The trace is whole: the parent can start its estimate while the rest (other
                # input sets, the reversed-loop run, the arrays) goes on.
                channel.message(["trace_end"])
            if prove and n == 0:
                conflict = res.reorder_conflict
                result["reorder_proven"] = conflict is None
                if conflict is None:
                    rev_fn = None
                else:
                    result["reorder_unproven"] = conflict
                    if parallel:
                        reverse = _ReverseWorker(kprocs, inputs[seeds[0]], poison, path, names, grid)
            result["counts"][str(seed)] = [len(res.outputs), len(res.args_after)]
            if mode == "oracle":
                for i, a in enumerate(inputs[seed]):
                    if f"s{seed}_in{i}" not in early:
                        arrays[f"s{seed}_in{i}"] = a
            for i, o in enumerate(res.outputs):
                arrays[f"s{seed}_out{i}"] = o
            same = []
            for i, a in enumerate(res.args_after):
                # An argument the kernel left as it came is reported, not sent back: at large
                # shapes the arguments are most of the channel's bytes.
                if _unchanged(a, inputs[seed][i]):
                    same.append(i)
                else:
                    arrays[f"s{seed}_after{i}"] = a
            result.setdefault("same_after", {})[str(seed)] = same
            if n == 0:
                result["instructions"] = len(res.trace)
                result["interp_seconds"] = time.perf_counter() - start
            result["seeds_run"] = seeds[:n + 1]
            # The original runs further input sets only while their predicted total stays
            # within the budget: a large problem is checked on fewer sets, not on none.
            budget = float(request.get("seed_budget") or 0)
            elapsed = budget_seconds(time.process_time() - cpu_start, time.perf_counter() - start)
            if mode == "oracle" and budget > 0 and n + 1 < len(seeds) and elapsed * (n + 2) / (n + 1) > budget:
                break
        if reverse is not None:
            stage = "reorder"
            kprocs[0].close()
            err, rev_outputs = reverse.collect()
            reverse = None
            if err is not None:
                err["error"]["stage"] = "reorder"
                return err, {}
            for i, o in enumerate(rev_outputs):
                arrays[f"rev_out{i}"] = o
            result["rev_count"] = len(rev_outputs)
        elif rev_fn is not None:
            stage = "reorder"
            kprocs[0].close()
            kprocs[1].load()
            args = [(_poisoned(a) if i in poison else a) for i, a in enumerate(inputs[seeds[0]])]
            rev = execute(rev_fn, args, kernel_file=path, reverse_affine=True, names=names, grid=grid,
                          traced=False)
            for i, o in enumerate(rev.outputs):
                arrays[f"rev_out{i}"] = o
            result["rev_count"] = len(rev.outputs)
    except KernelFailure as exc:
        return {"status": "error", "error": {**exc.error, "stage": stage}}, {}
    except InputsFailed as exc:
        return exc.error, {}
    except NkiError as exc:
        err = _error("nki", exc.render(), **{k: v for k, v in exc.to_json().items() if k not in ("kind", "message")})
        err["error"]["stage"] = stage
        return err, {}
    except RecursionError:
        return _error("runtime", "recursion too deep", stage=stage), {}
    except Exception as exc:
        where = _kernel_frames(exc.__traceback__, path)
        return _error("runtime", f"{type(exc).__name__}: {exc}\n{where}".strip(), stage=stage), {}
    finally:
        if reverse is not None:
            reverse.kill()
        for k in kprocs:
            k.close()
    result["seconds"] = time.perf_counter() - start
    return result, arrays


def main() -> int:
    import gc

    from autocomp.backends.nki.interp.install import GC_THRESHOLDS

    # The collector's thresholds for a kernel run (install.relaxed_gc) for this whole short
    # process and the kernel processes it forks: restoring Python's defaults after the run
    # would start a full collection over the trace just before the process exits anyway.
    if gc.get_threshold()[0] > 0:
        gc.set_threshold(*GC_THRESHOLDS)
    head = _read_line(0)
    request = json.loads(head)
    try:
        channel = Channel(CHANNEL_FD)
    except OSError:
        print("autocomp.backends.nki.runner: no result channel on descriptor 3", file=sys.stderr)
        return 2
    spawned = None
    if request["mode"] != "oracle":
        # The kernel's text, read before any kernel code runs: each kernel process compiles it
        # from here, so one cannot change the file (or plant bytecode) under the other.
        with open(request["file"], encoding="utf-8") as fh:
            request["source"] = fh.read()
        import numpy  # noqa: F401 - imported once here, inherited by the forked kernel processes

        from autocomp.backends.nki.remote import make_undumpable

        make_undumpable()
        spawned = fork_kernel_processes(2 if request.get("reorder") else 1)
    inputs_raw = sys.stdin.buffer.read()
    try:
        result, arrays = run(request, channel, inputs_raw, spawned)
    except MemoryError:
        result, arrays = _error("runtime", "the kernel ran out of memory in the interpreter"), {}
    t = os.times()  # this process and the kernel processes it reaped: the CPU the evaluation cost
    result["cpu_seconds"] = round(t.user + t.system + t.children_user + t.children_system, 3)
    for key, arr in arrays.items():
        channel.array(key, arr)
    channel.message(["result", result])
    return 0


if __name__ == "__main__":
    code = main()
    # Everything went out on the channel (unbuffered writes) and the kernel processes were
    # reaped: the interpreter's teardown (a large run's hundred thousand trace entries,
    # tensors and modules, about a second) would only delay the parent.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
