"""Parent side of NKI evaluation: run the oracle and candidates in sandboxed children and
decide verdicts from the data they return.

The original kernel is the oracle. Its child makes inputs with the file's ``get_inputs``
for several seeds and records outputs. Each candidate first passes the allowlist of the NKI
language subset (:mod:`autocomp.backends.nki.validate`). Its child then gets the oracle's
inputs on stdin, with output arguments poisoned, and returns its outputs and its arguments
afterwards, plus the outputs of one more run of the first seed with every ``affine_range``
reversed, unless the first run's trace proved the iterations independent
(:mod:`autocomp.backends.nki.reorder_proof`). In a candidate's child the kernel's Python runs in separate processes
(:mod:`autocomp.backends.nki.tracer`) that the interpreter serves
(:mod:`autocomp.backends.nki.remote`): they hold handles, never tensor values, the trace or
the result channel; the reversed run gets a fresh one, so state a kernel keeps between calls
(module globals, default arguments) cannot reach the reorder check. Every child runs
through :func:`autocomp.sandbox.run_limited`: no network, an empty environment, no
``/proc``, a read-only view of Python (plus, only when the file imports a sibling module,
its folder) and its own work directory.

The interpreter streams the instructions to the parent on the child's channel (descriptor 3)
as they are recorded, in batches (:class:`autocomp.backends.nki.runner.TraceBatch`), and says
when the trace is whole (``["trace_end"]``, after which nothing may change it); here, in the
parent, the cost model turns that stream into the estimate, on a thread that starts at the
trace's end while the child still runs (its other input sets, the reversed-loop run and its
arrays), outputs are compared in float64 with a per-dtype tolerance, and inputs are checked
unchanged. Nothing the child prints matters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autocomp.backends.base import BackendError
from autocomp.backends.nki.cost import Estimate, estimate
from autocomp.backends.nki.interp.core import dtype_name
from autocomp.backends.nki.portable import pack_arrays, same_bytes
from autocomp.backends.nki.reorder_proof import proof_may_stand
from autocomp.backends.nki.static import check_candidate
from autocomp.scratch import ScratchRoot
from autocomp.backends.nki.trace import Instr, region_from_json
from autocomp.backends.nki.trace_wire import LINE_START as WIRE_LINE_START, TAG as WIRE_TAG, Decoder
from autocomp.model import Evaluation, Metric, Problem, Verdict
from autocomp.sandbox import Isolation, python_view, run_limited

# (rtol, atol) by output dtype name; comparisons run in float64 against the oracle.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-5),
    "float16": (2e-3, 1e-3),
    "bfloat16": (2e-2, 2e-2),
    "float8_e4m3": (1.3e-1, 6e-2),
    "float8_e5m2": (2.6e-1, 1.2e-1),
}
DEFAULT_SEEDS = (0, 1, 2)
TIER = "nki interpreter"
SOURCE = "nki estimate"


@dataclass(repr=False)  # a repr would print every array (asyncio formats a finished task's result)
class ChildRun:
    ok: bool
    data: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    trace: list[Instr] = field(default_factory=list)
    timed_out: bool = False
    log: str = ""
    seconds: float = 0.0
    # The estimate of ``trace``, started on a thread when the child said its trace was whole
    # (``["trace_end"]``), while the child still ran; None: not started.
    estimate: "concurrent.futures.Future[Estimate] | None" = None

    async def cost(self) -> Estimate:
        """The estimate of the run's trace (the one started early, or computed now)."""
        if self.estimate is not None:
            return await asyncio.wrap_future(self.estimate)
        # On a thread: the loop goes on serving other children meanwhile.
        return await asyncio.to_thread(estimate, self.trace)


@dataclass(repr=False)
class Oracle:
    inputs_packed: bytes  # the candidates' inputs, sent on their stdin (portable.pack_arrays)
    input_dtypes: dict[str, str]
    seeds: tuple[int, ...]
    outputs: dict[int, list[np.ndarray]]
    inputs: dict[int, list[np.ndarray]]
    out_args: list[int]
    after: dict[int, list[np.ndarray]]
    estimate: Estimate
    seconds: float = 0.0  # how long the original took (all seeds): the problem's size in time
    data_bytes: int = 0  # inputs and outputs of one seed
    # The original's first run proved its affine_range iterations independent
    # (reorder_proof): the original as its own candidate needs no reversed-loop run.
    reorder_proven: bool = False

    def __repr__(self) -> str:
        return f"Oracle(seeds={self.seeds}, seconds={self.seconds:.2f}, data_bytes={self.data_bytes})"


# Candidate limits grow with the problem: a candidate may take this many times the original's
# time, and this much memory per byte of one seed's inputs and outputs (the interpreter keeps
# a written-mask, float32 working copies and the oracle's values besides the data).
TIME_FACTOR = 4.0
MEMORY_PER_DATA_BYTE = 12
MEMORY_BASE = 512 << 20
# Input sets beyond the first run only while the original's runs predict a total within this
# many seconds (autocomp.target.nki.seed_budget): a large problem is checked on fewer random
# input sets (at least one, plus the reorder check) instead of taking minutes per candidate.
SEED_BUDGET = 10.0


# The child's environment besides run_limited's PATH/HOME/TMPDIR/LANG: nothing from the host.
CHILD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
MAX_TRACE = 2_000_000  # instructions the parent accepts from one run
CHANNEL_LIMIT = 256 << 20


def parse_channel(raw: bytes | bytearray, trace: list[Instr] | None = None,
                  lines: int = 0, wire: Decoder | None = None,
                  trace_ended: bool = False) -> tuple[dict[str, Any] | None, list[Instr], dict[str, np.ndarray], str]:
    """(result, trace, arrays, problem) from a child's channel; ``problem`` is "" when well
    formed. ``trace``, ``lines``, ``wire`` (the binary batches' templates) and
    ``trace_ended``: what :class:`ChannelParser` already read of it."""
    trace = [] if trace is None else trace
    wire = Decoder() if wire is None else wire
    arrays: dict[str, np.ndarray] = {}
    result: dict[str, Any] | None = None
    pos, n = 0, lines
    ended = trace_ended  # after ["trace_end"] the trace is whole: no instruction or amendment follows
    while pos < len(raw):
        end = raw.find(b"\n", pos)
        if end < 0:
            return None, [], {}, "truncated channel"
        line, pos = raw[pos:end], end + 1
        n += 1
        if not line:
            continue
        if result is not None:
            return None, [], {}, "data after the result on the channel"
        try:
            msg = json.loads(line)
            tag = msg[0]
            if ended and tag in ("t", "i", "a", WIRE_TAG, "trace_end"):
                return None, [], {}, f"trace message after the trace's end on line {n}"
            if tag == "trace_end":
                ended = True
            elif tag in ("t", "i", "a"):
                if not _trace_line(msg, trace):
                    return None, [], {}, f"more than {MAX_TRACE} instructions"
            elif tag == WIRE_TAG:
                nbytes = int(msg[2])
                payload = memoryview(raw)[pos:pos + nbytes]
                if nbytes < 0 or len(payload) != nbytes:
                    return None, [], {}, "truncated trace batch on the channel"
                pos += nbytes
                wire.define(msg[1])
                if not wire.apply(payload, trace, MAX_TRACE):
                    return None, [], {}, f"more than {MAX_TRACE} instructions"
            elif tag == "array":
                key, dtype, shape, nbytes = _array_header(msg)
                data = memoryview(raw)[pos:pos + nbytes]  # no copy here: _array makes the one copy kept
                if len(data) != nbytes or key in arrays:
                    return None, [], {}, f"bad array {key!r} on the channel"
                pos += nbytes
                arrays[key] = _array(data, dtype, shape)
            elif tag == "result" and isinstance(msg[1], dict):
                result = msg[1]
            else:
                return None, [], {}, f"unknown message on line {n}"
        except _MALFORMED as exc:
            return None, [], {}, f"malformed channel message {n}: {exc}"
    if result is None:
        return None, trace, arrays, "no result"
    return result, trace, arrays, ""


def _trace_line(msg: Any, trace: list[Instr]) -> bool:
    """Apply a trace message (``["t", [...]]``, a batch applied in order as if sent one by
    one, or ``["i", ...]`` / ``["a", ...]``); False when the trace would exceed MAX_TRACE."""
    if msg[0] != "t":
        return _trace_message(msg, trace)
    if not isinstance(msg[1], list):
        raise ValueError("bad trace batch")
    from_list = Instr.from_list
    for sub in msg[1]:
        if type(sub) is list and len(sub) == 2 and sub[0] == "i" and len(trace) < MAX_TRACE:
            trace.append(from_list(sub[1]))  # the common case of _trace_message, inline
            continue
        if not isinstance(sub, list) or not sub or sub[0] not in ("i", "a"):
            raise ValueError("bad message in a trace batch")
        if not _trace_message(sub, trace):
            return False
    return True


_TRACE_LINE_STARTS = (b'["t",', b'["i",', b'["a",')
_TRACE_END_LINE = b'["trace_end"]'
# What decoding a malformed channel raises (json's own errors are ValueErrors; a number
# like 1e400 where a size belongs overflows int()).
_MALFORMED = (ValueError, TypeError, IndexError, KeyError, OverflowError)
_EARLY_LINE_STARTS = (b'["array",', b'["inputs",')


def _reorder_verdict(first: list[np.ndarray], rev_out: list[np.ndarray]) -> Evaluation | None:
    """The reversed-loop run against the first seed's outputs: None when they agree."""
    if len(rev_out) != len(first):
        return Evaluation(Verdict.RUNTIME_ERROR, feedback=(
            "with its nl.affine_range iterations reversed the kernel returns "
            f"{len(rev_out)} outputs instead of {len(first)}"))
    for i, (a, b) in enumerate(zip(first, rev_out)):
        msg = compare(a, b, f"output {i}")
        if msg:
            return Evaluation(Verdict.RUNTIME_ERROR, feedback=(
                "loop-carried dependency: running the nl.affine_range iterations in reverse order changes the "
                f"result ({msg}). affine_range iterations must be independent (accumulation into one PSUM tile "
                "is fine); use nl.sequential_range for loops that depend on earlier iterations."))
    return None


class ChannelParser:
    """:func:`parse_channel`, fed as the bytes arrive (``run_limited``'s ``channel_sink``,
    called on the channel reader's thread): the trace, which the child streams while it
    runs, is parsed meanwhile on a core the child leaves free; from the first line that is
    not a trace message on, everything is parsed at the end by ``parse_channel`` itself, so
    the result is the one the whole channel would give.

    The one exception is the oracle's first input set, which its child sends before it runs
    the original (``early_inputs``): the arrays and the ``["inputs", seed, n]`` line after
    them are taken here as they come, ``on_inputs(seed, arrays)`` is called with them (from
    the reader's thread), and they join the arrays of the result."""

    def __init__(self, on_inputs: Callable[[int, list[np.ndarray]], None] | None = None,
                 on_trace: Callable[[list[Instr]], None] | None = None) -> None:
        """``on_inputs``: given for an oracle's channel, which starts with its first input set;
        ``on_trace``: called with the whole trace when the child says it is (``["trace_end"]``)."""
        self.buf = bytearray()
        self.pos = 0  # start of the first line not parsed yet
        self.lines = 0
        self.trace: list[Instr] = []
        self.tracing = True
        self.problem = ""
        self.size = 0  # bytes received
        self.on_inputs = on_inputs
        self.early: dict[str, np.ndarray] = {}  # the oracle's first input set, once sent
        self.inputs_done = False
        self.wire = Decoder()  # the binary trace batches' templates
        self.header: tuple[int, Any] | None = None  # (position, parsed header) of a batch still arriving
        self.on_trace = on_trace
        self.trace_ended = False

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.buf += chunk
        while self.tracing:
            end = self.buf.find(b"\n", self.pos)
            if end < 0:
                break
            line = self.buf[self.pos:end]
            if self.on_inputs is not None and not self.inputs_done and not self.trace and line.startswith(_EARLY_LINE_STARTS):
                if not self._early_line(line, end):
                    break
                continue
            if line.startswith(WIRE_LINE_START):
                if not self._wire_batch(line, end):
                    break
                continue
            if line == _TRACE_END_LINE:
                # (the rest is parse_channel's, which refuses trace messages from here on)
                self.trace_ended, self.tracing = True, False
                self.lines += 1
                self.pos = end + 1
                if self.on_trace is not None:
                    self.on_trace(list(self.trace))
                break
            if not line.startswith(_TRACE_LINE_STARTS):
                self.tracing = False  # parse_channel takes it from here
                break
            self.lines += 1
            try:
                ok = _trace_line(json.loads(line), self.trace)
            except _MALFORMED as exc:
                self.problem, ok = f"malformed channel message {self.lines}: {exc}", False
            else:
                if not ok:
                    self.problem = f"more than {MAX_TRACE} instructions"
            if not ok:
                self.tracing = False
                break
            self.pos = end + 1
        if self.pos > 1 << 20:  # what was parsed is not kept
            del self.buf[:self.pos]
            self.pos = 0
            self.header = None

    def _wire_batch(self, line: bytearray, end: int) -> bool:
        """Take one binary trace batch (header line and payload); False when its payload has
        not all arrived yet, or when it is malformed (then ``problem`` says why)."""
        try:
            if self.header is not None and self.header[0] == self.pos:
                msg = self.header[1]  # read when the first piece of its payload came
            else:
                msg = json.loads(line)
            nbytes = int(msg[2])
            if nbytes < 0:
                raise ValueError("negative size")
            if len(self.buf) - end - 1 < nbytes:
                # (a payload arrives in many pieces: its header is read once, not per piece)
                self.header = (self.pos, msg)
                return False
            self.header = None
            self.wire.define(msg[1])
            ok = self.wire.apply(memoryview(self.buf)[end + 1:end + 1 + nbytes], self.trace, MAX_TRACE)
        except _MALFORMED as exc:
            self.problem, self.tracing = f"malformed trace batch on the channel: {exc}", False
            return False
        if not ok:
            self.problem, self.tracing = f"more than {MAX_TRACE} instructions", False
            return False
        self.lines += 1
        self.pos = end + 1 + nbytes
        return True

    def _early_line(self, line: bytearray, end: int) -> bool:
        """Take one line of the early input set (an array with its bytes, or the closing
        ``inputs`` line); False when the array's bytes have not all arrived yet, or when the
        line is malformed (then ``problem`` says why and streaming stops)."""
        try:
            msg = json.loads(line)
            if msg[0] == "array":
                key, dtype, shape, nbytes = _array_header(msg)
                if len(self.buf) - end - 1 < nbytes:
                    return False
                if key in self.early or nbytes < 0:
                    raise ValueError(f"bad array {key!r}")
                with memoryview(self.buf) as whole, whole[end + 1:end + 1 + nbytes] as data:
                    self.early[key] = _array(data, dtype, shape)  # (its one copy; the views end here)
                self.pos = end + 1 + nbytes
            else:
                seed, count = int(msg[1]), int(msg[2])
                arrays = [self.early[f"s{seed}_in{i}"] for i in range(count)]  # KeyError: one is missing
                if len(self.early) != count:
                    raise ValueError("arrays besides the input set")
                self.inputs_done = True
                self.pos = end + 1
                self.on_inputs(seed, arrays)
        except _MALFORMED as exc:
            self.problem, self.tracing = f"malformed early inputs on the channel: {exc}", False
            return False
        self.lines += 1
        return True

    def finish(self) -> tuple[dict[str, Any] | None, list[Instr], dict[str, np.ndarray], str]:
        self.tracing = False
        if self.problem:
            return None, [], {}, self.problem
        if self.early and not self.inputs_done:
            return None, [], {}, "early inputs without their closing line"
        del self.buf[:self.pos]
        self.pos = 0
        data, trace, arrays, problem = parse_channel(self.buf, self.trace, self.lines, self.wire, self.trace_ended)
        if data is None or not self.early:
            return data, trace, arrays, problem
        if any(k in arrays for k in self.early):
            return None, [], {}, "an early input array sent again"
        return data, trace, {**self.early, **arrays}, problem


def _trace_message(msg: list[Any], trace: list[Instr]) -> bool:
    """Apply one ``["i", instr]`` or ``["a", index, reads, writes]`` to ``trace``; False when
    the trace would exceed MAX_TRACE (malformed messages raise ValueError and friends)."""
    if msg[0] == "i":
        if len(trace) >= MAX_TRACE:
            return False
        trace.append(Instr.from_list(msg[1]))
        return True
    index = msg[1]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(trace):
        raise ValueError(f"amendment of instruction {index!r}, which was not sent")
    ins = trace[index]
    ins.reads += tuple(region_from_json(r) for r in msg[2])
    ins.writes += tuple(region_from_json(w) for w in msg[3])
    return True


def _array_header(msg: list[Any]) -> tuple[str, str, list[int], int]:
    """(key, dtype, shape, byte count) of an ``["array", …]`` line (its bytes follow it)."""
    return str(msg[1]), str(msg[2]), [int(x) for x in msg[3]], int(msg[4])


def _array(data: bytes, dtype: str, shape: list[int]) -> np.ndarray:
    from autocomp.backends.nki.interp.core import DTYPES

    if dtype in ("bool", "bool_"):
        raw = np.frombuffer(data, dtype=np.uint8)
        return raw.reshape(shape).astype(bool) if raw.size == int(np.prod(shape)) else _bad(dtype, shape)
    dt = DTYPES.get(dtype) or np.dtype(dtype)
    if dt.kind not in "biuf" and dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype}")
    if len(data) != int(np.prod(shape)) * dt.itemsize:
        _bad(dtype, shape)
    return np.frombuffer(data, dtype=dt).reshape(shape).copy()


def _bad(dtype: str, shape: list[int]) -> np.ndarray:
    raise ValueError(f"array of {dtype} {shape} has the wrong size")


def compare(expected: np.ndarray, got: np.ndarray, what: str) -> str | None:
    """None when ``got`` matches ``expected`` within the dtype's tolerance, else why not."""
    if tuple(expected.shape) != tuple(got.shape):
        return f"{what}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    edt, gdt = dtype_name(expected.dtype), dtype_name(got.dtype)
    if edt != gdt:
        return f"{what}: dtype {gdt}, expected {edt}"
    if expected.dtype.kind in "iub":
        bad = np.count_nonzero(expected != got)
        return None if bad == 0 else f"{what}: {bad} of {expected.size} integer elements differ"
    if same_bytes(expected, got) and not np.isinf(expected).any():
        # Bit for bit the expected values (a candidate computing as the original does): every
        # element passes the test below (no infinity there, which that test never accepts), so
        # its float64 passes over hundreds of MB at published shapes are skipped.
        return None
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    rtol, atol = TOLERANCES.get(edt, (1e-4, 1e-5))
    both_nan = np.isnan(e) & np.isnan(g)
    err = np.abs(g - e)
    ok = (err <= atol + rtol * np.abs(e)) | both_nan
    ok &= ~(np.isnan(g) & ~np.isnan(e))
    if ok.all():
        return None
    bad = int(ok.size - np.count_nonzero(ok))
    idx = np.unravel_index(int(np.argmin(ok)), ok.shape)
    return (f"{what}: {bad} of {ok.size} elements outside tolerance (rtol {rtol}, atol {atol}); first at index "
            f"{tuple(int(i) for i in idx)}: got {g[idx]:.6g}, expected {e[idx]:.6g}; max abs error "
            f"{float(np.nanmax(np.where(np.isnan(err), np.inf, err))):.3g}")


class Harness:
    """Runs oracle and candidates; one instance per backend."""

    def __init__(self, seeds: tuple[int, ...] = DEFAULT_SEEDS, timeout: float = 60.0, memory_bytes: int = 3 * 1024**3,
                 python: str = sys.executable, concurrency: int = 2, reorder: bool = True,
                 public_seeds: bool = False, seed_budget: float = SEED_BUDGET, early_start: bool = True,
                 reorder_proof: bool = True) -> None:
        self.seeds = tuple(seeds)
        self.seed_budget = float(seed_budget)
        # The RNG seeds behind the seed labels: drawn from `secrets` once per harness, so no
        # kernel can regenerate the inputs from the file's get_inputs and a known seed (and
        # answer from a table); `public_seeds` uses the labels themselves (debugging only).
        secret = secrets.token_hex(16)
        self.rng_seeds = {s: (int(s) if public_seeds else int(hashlib.sha256(f"{secret}:{s}".encode()).hexdigest()[:8], 16))
                          for s in self.seeds}
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        self.python = python
        self.reorder = reorder
        # A proof from the first run's trace may stand in for the reversed-loop run
        # (reorder_proof); off, every candidate gets the reversed run.
        self.reorder_proof = reorder_proof
        self.concurrency = max(1, concurrency)
        self._sems: dict[int, asyncio.Semaphore] = {}
        self._oracles: dict[str, Oracle] = {}
        self._jobs: dict[str, _OracleJob] = {}
        self.early_start = early_start
        self._scratch = ScratchRoot(self, "autocomp-nki-")  # the children's work folders
        # Estimates started while their child still runs (ChildRun.estimate): off the loop,
        # which keeps reading the children's channels.
        self._estimator = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="nki-estimate")

    def _may_prove(self, text: str) -> bool:
        """Whether the child may try to prove the reversed-loop run unnecessary for ``text``."""
        return self.reorder and self.reorder_proof and proof_may_stand(text)

    @property
    def _root(self) -> str:
        return self._scratch.path

    def close(self) -> None:
        self._scratch.close()
        self._estimator.shutdown(wait=False, cancel_futures=True)

    # -- children ------------------------------------------------------------------
    def limits(self, oracle: "Oracle | None" = None) -> tuple[float, int]:
        """(seconds, bytes) a run may use: the settings, raised for a candidate in proportion
        to what the original needed."""
        if oracle is None:  # the original: the setting per input set it runs on
            return self.timeout * max(1, len(self.seeds)), self.memory_bytes
        return (max(self.timeout, TIME_FACTOR * oracle.seconds),
                max(self.memory_bytes, MEMORY_BASE + MEMORY_PER_DATA_BYTE * oracle.data_bytes))

    def _limit_note(self, seconds: float) -> str:
        return (f"{seconds:.0f} s (the larger of the setting autocomp.target.nki.timeout = {self.timeout:.0f} s and "
                f"{TIME_FACTOR:g}x the original's time); raise it with autocomp.target.nki.timeout (seconds)")

    async def _run_child(self, file_text: str, function: str, mode: str, extra: dict[str, Any],
                         source_dir: str = "", inputs_packed: bytes = b"", oracle: "Oracle | None" = None,
                         limits: tuple[float, int] | None = None,
                         on_inputs: Callable[[int, list[np.ndarray]], None] | None = None) -> ChildRun:
        workdir = tempfile.mkdtemp(prefix=f"{mode}-", dir=self._root)
        os.chmod(workdir, 0o700)
        kernel = os.path.join(workdir, "kernel.py")
        Path(kernel).write_text(file_text, encoding="utf-8")
        request = {"file": kernel, "function": function, "mode": mode, "seeds": list(self.seeds),
                   "source_dir": source_dir, **extra}
        # The inputs travel on stdin after the request line: no file a kernel could read.
        stdin = b"".join((json.dumps(request).encode(), b"\n", inputs_packed))
        readable = python_view() + ((source_dir,) if source_dir else ())
        loop_id = id(asyncio.get_running_loop())
        sem = self._sems.setdefault(loop_id, asyncio.Semaphore(self.concurrency))
        try:
            async with sem:
                seconds, memory = limits or self.limits(oracle)
                # The results channel may carry what the child may hold: it grows with the
                # problem through the memory limit (inputs, outputs and arguments of every seed).
                channel_limit = max(CHANNEL_LIMIT, memory)
                started: list[concurrent.futures.Future[Estimate]] = []
                parser = ChannelParser(on_inputs, lambda trace: started.append(self._estimator.submit(estimate, trace)))
                proc = await run_limited([self.python, "-I", "-m", "autocomp.backends.nki.runner"], cwd=workdir,
                                         timeout=seconds, memory_bytes=memory, env=CHILD_ENV,
                                         stdin_data=stdin, isolation=Isolation(readable=readable),
                                         channel=True, channel_limit=channel_limit, channel_sink=parser.feed)
            log = proc.tail(3000).replace(kernel, "<kernel>")
            if proc.timed_out:
                return ChildRun(False, {}, timed_out=True, log=log, seconds=proc.seconds)
            data, trace, arrays, problem = parser.finish()
            if data is None and parser.size >= channel_limit:
                problem = (f"its results reached the channel limit of {channel_limit >> 20} MiB (the memory limit); "
                           "raise it with autocomp.target.nki.memory_mb")
            if data is None:
                return ChildRun(False, {"status": "error", "error": {"kind": "crash", "message":
                                f"the kernel process ended (exit {proc.returncode}) without a result ({problem}); if it ran "
                                f"out of memory: the limit was {memory >> 20} MiB (the larger of autocomp.target.nki.memory_mb "
                                f"and {MEMORY_PER_DATA_BYTE} bytes per byte of the original's data), raise it with "
                                f"autocomp.target.nki.memory_mb\n{log}"}},
                                log=log, seconds=proc.seconds)
            _scrub_paths(data, kernel)
            return ChildRun(data.get("status") == "ok", data, arrays, trace=trace, log=log, seconds=proc.seconds,
                            estimate=started[0] if started else None)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # -- oracle --------------------------------------------------------------------
    async def oracle(self, problem: Problem) -> Oracle:
        key = problem.oracle_key()
        if key in self._oracles:
            return self._oracles[key]
        return await asyncio.shield(self._oracle_job(problem).task)

    def _oracle_job(self, problem: Problem) -> "_OracleJob":
        """The run of the original for ``problem`` on this event loop: one, however many
        evaluations wait for it (a failed one is run again by the next caller)."""
        loop = asyncio.get_running_loop()
        key = problem.oracle_key()
        job = self._jobs.get(key)
        if job is not None and job.loop is loop and not (job.task.done() and (job.task.cancelled() or job.task.exception())):
            return job
        inputs: asyncio.Future = loop.create_future()

        def ready(seed: int, arrays: list[np.ndarray]) -> None:  # on the channel reader's thread
            def resolve() -> None:
                if not inputs.done():
                    inputs.set_result((seed, arrays))
            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop has closed: nobody is waiting
                pass

        job = self._jobs[key] = _OracleJob(loop, loop.create_task(self._run_oracle(problem, ready)), inputs)
        return job

    async def _run_oracle(self, problem: Problem, ready: Callable[[int, list[np.ndarray]], None]) -> Oracle:
        key = problem.oracle_key()
        run = await self._run_child(problem.file_text, problem.name, "oracle",
                                    {"rng_seeds": [self.rng_seeds[s] for s in self.seeds], "seed_budget": self.seed_budget,
                                     "early_inputs": self.early_start,
                                     "reorder_proof": self._may_prove(problem.file_text)},
                                    _source_dir(problem), on_inputs=ready)
        if not run.ok:
            if run.timed_out:
                raise BackendError(f"{problem.path}: the original kernel did not finish within {self.limits()[0]:.0f}s in the "
                                   f"NKI interpreter (the setting autocomp.target.nki.timeout = {self.timeout:.0f} s per input "
                                   f"set, {len(self.seeds)} input sets); raise it with autocomp.target.nki.timeout (seconds)")
            err = run.data.get("error", {})
            raise BackendError(f"{problem.path}: the original kernel {problem.name!r} fails in the NKI interpreter: "
                               f"{err.get('message', run.log)}".replace("<kernel>", problem.path))
        ran = [int(s) for s in run.data.get("seeds_run", self.seeds)]
        seeds = tuple(s for s in self.seeds if s in ran) or self.seeds[:1]
        inputs = {s: _seq(run.arrays, f"s{s}_in") for s in seeds}
        outputs = {s: _seq(run.arrays, f"s{s}_out") for s in seeds}
        after = {s: _afters(run, s, inputs[s]) for s in seeds}
        out_args = sorted({i for s in seeds for i, (a, b) in enumerate(zip(inputs[s], after[s])) if not _same(a, b)})
        if not any(outputs[s] for s in seeds) and not out_args:
            raise BackendError(f"{problem.path}: the kernel {problem.name!r} returns nothing and writes no argument; "
                               "return the output HBM tensor")
        in_arrays = {f"s{s}_in{i}": a for s in seeds for i, a in enumerate(inputs[s])}
        packed, dtypes = pack_arrays(in_arrays)
        first = self.seeds[0]
        data_bytes = sum(int(a.nbytes) for a in inputs[first] + outputs[first])
        # (off the loop: a candidate started early streams its trace now, and a pipe left
        # unread for the estimate's second would stall it)
        cost = await run.cost()
        oracle = Oracle(packed, dtypes, seeds, outputs, inputs, out_args, after, cost,
                        seconds=run.seconds, data_bytes=data_bytes, reorder_proven=run.data.get("reorder_proven") is True)
        self._oracles[key] = oracle
        return oracle

    # -- candidates ----------------------------------------------------------------
    async def evaluate(self, problem: Problem, code: str, *, validate: bool = True) -> Evaluation:
        """``validate=False`` skips the allowlist (tests only: it shows what the sandbox and the
        parent-side checks hold on their own)."""
        start = time.monotonic()
        ev = await self._evaluate(problem, code, validate)
        ev.seconds = time.monotonic() - start
        ev.tier = ev.tier or TIER
        return ev

    async def _evaluate(self, problem: Problem, code: str, validate: bool = True) -> Evaluation:
        if not code.strip():
            return Evaluation(Verdict.NO_CODE, feedback="empty kernel code")
        if validate:
            issues = check_candidate(problem.file_with(code), problem.span.start_line, code, problem.name, problem.code,
                                     original_file=problem.file_text)
            if issues:
                verdict = Verdict.COMPILE_ERROR if any(i.kind == "syntax" for i in issues) else Verdict.REJECTED
                text = "\n".join(f"{problem.path}:{i.line}: {i.message}" for i in issues[:10])
                return Evaluation(verdict, feedback=text)
        text = problem.file_with(code)
        if text == problem.file_text:
            ev = await self._evaluate_original(problem, text)
            if ev is not None:
                return ev
        oracle = self._oracles.get(problem.oracle_key())
        early = None
        if oracle is None:
            oracle, early = await self._beside_oracle(problem, text)
        run = await self._finish_early(problem, text, oracle, *early) if early is not None else None
        if run is None:
            extra = {"inputs": {"dtypes": oracle.input_dtypes}, "poison": oracle.out_args, "reorder": self.reorder,
                     "seeds": list(oracle.seeds), "reorder_proof": self._may_prove(text)}
            run = await self._run_child(text, problem.name, "candidate", extra, _source_dir(problem), oracle.inputs_packed,
                                        oracle=oracle)
        if run.timed_out:
            return Evaluation(Verdict.TIMEOUT, feedback="the kernel did not finish within "
                              f"{self._limit_note(self.limits(oracle)[0])} in the interpreter")
        if not run.ok:
            return _error_evaluation(run.data.get("error", {}), problem.path)
        for seed in oracle.seeds:
            outs = _seq(run.arrays, f"s{seed}_out")
            after = _afters(run, seed, oracle.inputs[seed])
            expected = oracle.outputs[seed]
            if len(outs) != len(expected):
                return Evaluation(Verdict.INCORRECT, feedback=f"the kernel returns {len(outs)} outputs; the original returns {len(expected)}")
            for i, (e, g) in enumerate(zip(expected, outs)):
                msg = compare(e, g, f"seed {seed}, output {i}")
                if msg:
                    return Evaluation(Verdict.INCORRECT, feedback=f"wrong result: {msg}")
            if len(after) != len(oracle.inputs[seed]):
                return Evaluation(Verdict.INCORRECT, feedback="argument count changed")
            for i, (orig_in, a) in enumerate(zip(oracle.inputs[seed], after)):
                if i in oracle.out_args:
                    msg = compare(oracle.after[seed][i], a, f"seed {seed}, output argument {i}")
                    if msg:
                        return Evaluation(Verdict.INCORRECT, feedback=f"wrong result: {msg}")
                elif not _same(orig_in, a):
                    return Evaluation(Verdict.INCORRECT, feedback=f"the kernel modified its input argument {i}; inputs must stay unchanged")
        if self.reorder and run.data.get("reorder_proven") is not True:
            problem_ev = _reorder_verdict(_seq(run.arrays, f"s{self.seeds[0]}_out"), _seq(run.arrays, "rev_out"))
            if problem_ev is not None:
                return problem_ev
        est = await run.cost()
        return self._rated(est, oracle)

    def _rated(self, est: Estimate, oracle: Oracle) -> Evaluation:
        """A correct candidate's evaluation: its estimate beside the original's."""
        base = oracle.estimate.cycles
        speed = f" ({base / est.cycles:.2f}x the original's {base:,.0f})" if est.cycles > 0 and base > 0 else ""
        metrics = {
            "cycles": Metric(float(est.cycles), "cycles", SOURCE),
            "instructions": Metric(float(est.instructions), "instructions", "nki interpreter"),
        }
        feedback = est.report() + f"\nCompared with the original kernel: {est.cycles:,.0f} cycles{speed}."
        if len(oracle.seeds) < len(self.seeds):
            feedback += (f"\nChecked on {len(oracle.seeds)} of {len(self.seeds)} random input sets (plus the affine_range reorder check): "
                         f"the original takes {oracle.seconds:.0f} s in the interpreter, and further sets run only while the "
                         f"original's runs stay within autocomp.target.nki.seed_budget = {self.seed_budget:g} CPU seconds; raise it to "
                         "check every set.")
        return Evaluation(Verdict.CORRECT, metrics=metrics, feedback=feedback, tier=TIER, confirmed=False)

    async def _evaluate_original(self, problem: Problem, text: str) -> Evaluation | None:
        """The original file itself as the candidate (``autocomp eval FILE``, the search's
        baseline, ``--against``'s baseline): the oracle ran exactly this code on the same
        inputs, so its outputs and trace stand for a candidate run's, and only the
        reversed-loop run is left (started beside the original, like any first candidate).
        None, for the ordinary candidate path, when the original writes an output argument
        (a candidate gets it poisoned, which the oracle's run did not)."""
        oracle = self._oracles.get(problem.oracle_key())
        early = None
        if oracle is None and self.reorder:
            oracle, early = await self._beside_oracle(problem, text, reverse_only=True)
        elif oracle is None:
            oracle = await self.oracle(problem)
        if oracle.out_args or oracle.reorder_proven:
            if early is not None:
                early[1].cancel()
                await asyncio.gather(early[1], return_exceptions=True)
        if oracle.out_args:
            return None
        if self.reorder and not oracle.reorder_proven:
            run = None
            if early is not None:
                seed, task = early
                try:
                    run = await task
                except Exception:  # noqa: BLE001 - run again below, the ordinary way
                    run = None
                if run is not None and (not run.ok or seed != oracle.seeds[0]):
                    run = None  # (a failure under the early run's smaller limits is not the verdict)
            if run is None:
                extra = {"inputs": {"dtypes": oracle.input_dtypes}, "poison": [], "reorder": True,
                         "seeds": [oracle.seeds[0]], "reverse_only": True}
                run = await self._run_child(text, problem.name, "candidate", extra, _source_dir(problem),
                                            oracle.inputs_packed, oracle=oracle)
            if run.timed_out:
                return Evaluation(Verdict.TIMEOUT, feedback="the kernel did not finish within "
                                  f"{self._limit_note(self.limits(oracle)[0])} in the interpreter (reversed-loop run)")
            if not run.ok:
                return _error_evaluation(run.data.get("error", {}), problem.path)
            problem_ev = _reorder_verdict(oracle.outputs[oracle.seeds[0]], _seq(run.arrays, "rev_out"))
            if problem_ev is not None:
                return problem_ev
        return self._rated(oracle.estimate, oracle)

    # -- a candidate started beside the original --------------------------------------
    async def _beside_oracle(self, problem: Problem, text: str,
                             reverse_only: bool = False) -> tuple[Oracle, tuple[int, asyncio.Task] | None]:
        """The oracle, and the candidate's run on the first input set if it could start while
        the original was still running (``early_start``): as soon as the oracle's child has
        sent that set, before its own run. On two cores the original and a first candidate
        (the search's baseline, ``autocomp eval``) then take the time of the longer one."""
        job = self._oracle_job(problem)
        early = None
        if self.early_start:
            await asyncio.wait({job.task, job.inputs}, return_when=asyncio.FIRST_COMPLETED)
            if job.inputs.done() and not job.task.done():
                seed, arrays = job.inputs.result()
                early = (seed, asyncio.ensure_future(self._early_run(problem, text, seed, arrays, reverse_only)))
        try:
            oracle = await asyncio.shield(job.task)
        except BaseException:
            if early is not None:
                early[1].cancel()
                await asyncio.gather(early[1], return_exceptions=True)
            raise
        return oracle, early

    async def _early_run(self, problem: Problem, text: str, seed: int, arrays: list[np.ndarray],
                         reverse_only: bool = False) -> ChildRun:
        """The candidate on ``seed``'s inputs (and the reversed run; with ``reverse_only``,
        for the original itself, that run alone), before the oracle is known: no argument
        poisoned, and the smallest limits a candidate can get (the settings; a candidate's
        grow with the original's time and data)."""
        in_arrays = {f"s{seed}_in{i}": a for i, a in enumerate(arrays)}
        packed, dtypes = pack_arrays(in_arrays)
        memory = max(self.memory_bytes, MEMORY_BASE + MEMORY_PER_DATA_BYTE * sum(int(a.nbytes) for a in arrays))
        extra = {"inputs": {"dtypes": dtypes}, "poison": [], "reorder": self.reorder, "seeds": [seed],
                 **({"reverse_only": True} if reverse_only else
                    {"reorder_proof": self._may_prove(text)})}
        return await self._run_child(text, problem.name, "candidate", extra, _source_dir(problem), packed,
                                     limits=(self.timeout, memory))

    async def _finish_early(self, problem: Problem, text: str, oracle: Oracle, seed: int,
                            task: "asyncio.Task[ChildRun]") -> ChildRun | None:
        """The early run as the candidate's run, completed with the oracle's other input
        sets; None when it cannot stand for the run the oracle asks for (it failed or timed
        out under its smaller limits, or the original writes an argument, which candidates
        get poisoned): then the candidate runs again, as if nothing had started early."""
        try:
            run = await task
        except Exception:  # noqa: BLE001 - the ordinary run decides
            return None
        if not run.ok or oracle.out_args or oracle.seeds[0] != seed:
            return None
        rest = [s for s in oracle.seeds if s != seed]
        if not rest:
            return run
        more = await self._run_child(text, problem.name, "candidate",
                                     {"inputs": {"dtypes": oracle.input_dtypes}, "poison": [], "reorder": False,
                                      "seeds": rest}, _source_dir(problem), oracle.inputs_packed, oracle=oracle)
        if not more.ok:
            return more
        data = dict(run.data)
        for key in ("counts", "same_after"):
            data[key] = {**run.data.get(key, {}), **more.data.get(key, {})}
        data["cpu_seconds"] = float(run.data.get("cpu_seconds", 0.0)) + float(more.data.get("cpu_seconds", 0.0))
        return ChildRun(True, data, {**run.arrays, **more.arrays}, trace=run.trace, log=more.log,
                        seconds=run.seconds + more.seconds, estimate=run.estimate)


@dataclass(repr=False)
class _OracleJob:
    """The original's run in progress: its task, and the first input set once its child has
    sent it."""
    loop: asyncio.AbstractEventLoop
    task: "asyncio.Task[Oracle]"
    inputs: asyncio.Future


def _error_evaluation(err: dict[str, Any], path: str) -> Evaluation:
    kind = err.get("kind", "")
    msg = str(err.get("message", "unknown error")).replace("<kernel>", path)
    stage = err.get("stage")
    if stage == "reorder":
        msg = ("when the nl.affine_range iterations ran in reverse order (as the compiler may run them), the kernel failed: "
               + msg + "\naffine_range iterations must not depend on each other; use nl.sequential_range if they must.")
    if kind == "compile":
        return Evaluation(Verdict.COMPILE_ERROR, feedback=msg)
    if kind == "nki" and err.get("static"):
        return Evaluation(Verdict.REJECTED, feedback=msg)
    return Evaluation(Verdict.RUNTIME_ERROR, feedback=msg)


def _source_dir(problem: Problem) -> str:
    """The kernel file's folder when the file imports a module that lives there (so the
    child can import it, read-only); otherwise nothing of the user's folders is visible."""
    folder = os.path.dirname(os.path.abspath(problem.path))
    if not os.path.isdir(folder):
        return ""
    return folder if _imports_sibling(problem.file_text, folder) else ""


def _imports_sibling(text: str, folder: str) -> bool:
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return any(os.path.exists(os.path.join(folder, n + ".py")) or os.path.isdir(os.path.join(folder, n)) for n in names)


def _seq(arrays: dict[str, np.ndarray], prefix: str) -> list[np.ndarray]:
    out = []
    i = 0
    while f"{prefix}{i}" in arrays:
        out.append(arrays[f"{prefix}{i}"])
        i += 1
    return out


def _afters(run: ChildRun, seed: int, given: list[np.ndarray]) -> list[np.ndarray]:
    """The arguments after a seed's run: sent ones from the channel, and those the
    interpreter process reported unchanged (``same_after``) as the inputs it was given."""
    counts = run.data.get("counts", {}).get(str(seed))
    same = run.data.get("same_after", {}).get(str(seed))
    if not isinstance(counts, list) or len(counts) != 2 or not isinstance(same, list):
        return _seq(run.arrays, f"s{seed}_after")
    out = []
    for i in range(int(counts[1])):
        key = f"s{seed}_after{i}"
        if key in run.arrays:
            out.append(run.arrays[key])
        elif i in same and i < len(given):
            out.append(given[i])
        else:
            break
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.tobytes() == b.tobytes()


def _scrub_paths(data: dict[str, Any], kernel: str) -> None:
    """Error messages name the kernel as <kernel> (the harness puts the user's path back)."""
    err = data.get("error")
    if isinstance(err, dict):
        for k in ("message", "file"):
            if isinstance(err.get(k), str):
                err[k] = err[k].replace(kernel, "<kernel>")
