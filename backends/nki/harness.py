"""Parent side of NKI evaluation: run the oracle and candidates in child processes and
decide verdicts from the data they return.

The original kernel is the oracle. Its child makes inputs with the file's ``get_inputs``
for several seeds and records outputs. Each candidate's child gets those same inputs,
with output arguments poisoned, and returns its outputs, its arguments afterwards, the
outputs of a run with every ``affine_range`` reversed, and its instruction trace. Here, in
the parent, outputs are compared in float64 with a per-dtype tolerance, inputs are checked
unchanged, and the cost model turns the trace into the estimate. Nothing the child prints
matters; its result file name carries a nonce it cannot see in argv or its environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autocomp.backends.base import BackendError
from autocomp.backends.nki.cost import Estimate, estimate
from autocomp.backends.nki.interp.core import dtype_name
from autocomp.backends.nki.portable import load_arrays, save_arrays
from autocomp.backends.nki.static import check_candidate
from autocomp.backends.nki.trace import trace_from_json
from autocomp.model import Evaluation, Metric, Problem, Verdict
from autocomp.sandbox import run_limited

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


@dataclass
class ChildRun:
    ok: bool
    data: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    timed_out: bool = False
    log: str = ""
    seconds: float = 0.0


@dataclass
class Oracle:
    workdir: str
    inputs_path: str
    input_dtypes: dict[str, str]
    seeds: tuple[int, ...]
    outputs: dict[int, list[np.ndarray]]
    inputs: dict[int, list[np.ndarray]]
    out_args: list[int]
    after: dict[int, list[np.ndarray]]
    estimate: Estimate


def _child_env(workdir: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir, "LANG": "C.UTF-8",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    return env


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
                 python: str = sys.executable, concurrency: int = 2, reorder: bool = True) -> None:
        self.seeds = tuple(seeds)
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        self.python = python
        self.reorder = reorder
        self.concurrency = max(1, concurrency)
        self._sems: dict[int, asyncio.Semaphore] = {}
        self._oracles: dict[str, Oracle] = {}
        self._root = tempfile.mkdtemp(prefix="autocomp-nki-")

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def __del__(self) -> None:  # best effort; the backend may live until interpreter exit
        try:
            self.close()
        except Exception:
            pass

    # -- children ------------------------------------------------------------------
    async def _run_child(self, file_text: str, function: str, mode: str, extra: dict[str, Any],
                         source_dir: str = "") -> ChildRun:
        workdir = tempfile.mkdtemp(prefix=f"{mode}-", dir=self._root)
        os.chmod(workdir, 0o700)
        nonce = secrets.token_hex(16)
        kernel = os.path.join(workdir, "kernel.py")
        Path(kernel).write_text(file_text, encoding="utf-8")
        result_path = os.path.join(workdir, f"result-{nonce}.json")
        arrays_path = os.path.join(workdir, f"arrays-{nonce}.npz")
        request = {"file": kernel, "function": function, "mode": mode, "seeds": list(self.seeds), "nonce": nonce,
                   "result": result_path, "arrays": arrays_path, "reorder": self.reorder, "source_dir": source_dir,
                   **extra}
        loop_id = id(asyncio.get_running_loop())
        sem = self._sems.setdefault(loop_id, asyncio.Semaphore(self.concurrency))
        async with sem:
            proc = await run_limited([self.python, "-I", "-m", "autocomp.backends.nki.runner"], cwd=workdir,
                                     timeout=self.timeout, memory_bytes=self.memory_bytes, env=_child_env(workdir),
                                     stdin_data=json.dumps(request).encode())
        log = proc.tail(3000).replace(kernel, "<kernel>")
        if proc.timed_out:
            return ChildRun(False, {}, timed_out=True, log=log, seconds=proc.seconds)
        try:
            data = json.loads(Path(result_path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ChildRun(False, {"status": "error", "error": {"kind": "crash", "message":
                            f"the kernel process ended (exit {proc.returncode}) without a result\n{log}"}}, log=log,
                            seconds=proc.seconds)
        if data.get("nonce") != nonce:
            return ChildRun(False, {"status": "error", "error": {"kind": "crash", "message": "result file nonce mismatch"}},
                            log=log, seconds=proc.seconds)
        arrays: dict[str, np.ndarray] = {}
        if data.get("status") == "ok":
            try:
                arrays = load_arrays(arrays_path, data.get("dtypes", {}))
            except (OSError, ValueError) as exc:
                return ChildRun(False, {"status": "error", "error": {"kind": "crash", "message": f"bad result arrays: {exc}"}},
                                log=log, seconds=proc.seconds)
        _scrub_paths(data, kernel)
        shutil.rmtree(workdir, ignore_errors=True)
        return ChildRun(data.get("status") == "ok", data, arrays, log=log, seconds=proc.seconds)

    # -- oracle --------------------------------------------------------------------
    async def oracle(self, problem: Problem) -> Oracle:
        key = problem.content_hash()
        if key in self._oracles:
            return self._oracles[key]
        run = await self._run_child(problem.file_text, problem.name, "oracle", {}, _source_dir(problem))
        if not run.ok:
            if run.timed_out:
                raise BackendError(f"{problem.path}: the original kernel did not finish within {self.timeout:.0f}s in the NKI interpreter")
            err = run.data.get("error", {})
            raise BackendError(f"{problem.path}: the original kernel {problem.name!r} fails in the NKI interpreter: "
                               f"{err.get('message', run.log)}".replace("<kernel>", problem.path))
        inputs = {s: _seq(run.arrays, f"s{s}_in") for s in self.seeds}
        outputs = {s: _seq(run.arrays, f"s{s}_out") for s in self.seeds}
        after = {s: _seq(run.arrays, f"s{s}_after") for s in self.seeds}
        out_args = sorted({i for s in self.seeds for i, (a, b) in enumerate(zip(inputs[s], after[s])) if not _same(a, b)})
        if not any(outputs[s] for s in self.seeds) and not out_args:
            raise BackendError(f"{problem.path}: the kernel {problem.name!r} returns nothing and writes no argument; "
                               "return the output HBM tensor")
        in_arrays = {f"s{s}_in{i}": a for s in self.seeds for i, a in enumerate(inputs[s])}
        inputs_path = os.path.join(self._root, f"inputs-{key[:16]}.npz")
        dtypes = save_arrays(inputs_path, in_arrays)
        est = estimate(trace_from_json(run.data.get("trace", [])))
        oracle = Oracle(self._root, inputs_path, dtypes, self.seeds, outputs, inputs, out_args, after, est)
        self._oracles[key] = oracle
        return oracle

    # -- candidates ----------------------------------------------------------------
    async def evaluate(self, problem: Problem, code: str) -> Evaluation:
        start = time.monotonic()
        ev = await self._evaluate(problem, code)
        ev.seconds = time.monotonic() - start
        ev.tier = ev.tier or TIER
        return ev

    async def _evaluate(self, problem: Problem, code: str) -> Evaluation:
        if not code.strip():
            return Evaluation(Verdict.NO_CODE, feedback="empty kernel code")
        issues = check_candidate(problem.file_with(code), problem.span.start_line, code, problem.name, problem.code)
        if issues:
            verdict = Verdict.COMPILE_ERROR if any(i.kind == "syntax" for i in issues) else Verdict.REJECTED
            text = "\n".join(f"{problem.path}:{i.line}: {i.message}" for i in issues[:10])
            return Evaluation(verdict, feedback=text)
        oracle = await self.oracle(problem)
        run = await self._run_child(problem.file_with(code), problem.name, "candidate",
                                    {"inputs": {"path": oracle.inputs_path, "dtypes": oracle.input_dtypes},
                                     "poison": oracle.out_args}, _source_dir(problem))
        if run.timed_out:
            return Evaluation(Verdict.TIMEOUT, feedback=f"the kernel did not finish within {self.timeout:.0f}s in the interpreter")
        if not run.ok:
            return _error_evaluation(run.data.get("error", {}), problem.path)
        for seed in self.seeds:
            outs = _seq(run.arrays, f"s{seed}_out")
            after = _seq(run.arrays, f"s{seed}_after")
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
        if self.reorder:
            rev = _seq(run.arrays, "rev_out")
            first = _seq(run.arrays, f"s{self.seeds[0]}_out")
            for i, (a, b) in enumerate(zip(first, rev)):
                msg = compare(a, b, f"output {i}")
                if msg:
                    return Evaluation(Verdict.RUNTIME_ERROR, feedback=(
                        "loop-carried dependency: running the nl.affine_range iterations in reverse order changes the "
                        f"result ({msg}). affine_range iterations must be independent (accumulation into one PSUM tile "
                        "is fine); use nl.sequential_range for loops that depend on earlier iterations."))
        est = estimate(trace_from_json(run.data.get("trace", [])))
        base = oracle.estimate.cycles
        speed = f" ({base / est.cycles:.2f}x the original's {base:,.0f})" if est.cycles > 0 and base > 0 else ""
        metrics = {
            "cycles": Metric(float(est.cycles), "cycles", SOURCE),
            "instructions": Metric(float(est.instructions), "instructions", "nki interpreter"),
        }
        feedback = est.report() + f"\nCompared with the original kernel: {est.cycles:,.0f} cycles{speed}."
        return Evaluation(Verdict.CORRECT, metrics=metrics, feedback=feedback, tier=TIER, confirmed=False)


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
    """The kernel file's folder, so the file's own sibling imports resolve in the child."""
    folder = os.path.dirname(os.path.abspath(problem.path))
    return folder if os.path.isdir(folder) else ""


def _seq(arrays: dict[str, np.ndarray], prefix: str) -> list[np.ndarray]:
    out = []
    i = 0
    while f"{prefix}{i}" in arrays:
        out.append(arrays[f"{prefix}{i}"])
        i += 1
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.tobytes() == b.tobytes()


def _scrub_paths(data: dict[str, Any], kernel: str) -> None:
    err = data.get("error")
    if isinstance(err, dict):
        for k in ("message", "file"):
            if isinstance(err.get(k), str):
                err[k] = err[k].replace(kernel, "<kernel>")
