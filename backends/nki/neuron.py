"""Thin adapter to the real AWS Neuron tools, used when they import on this machine.

With the SDK but no device, correctness comes from ``nki.simulate`` (which models no
timing, so there is no speed metric). With a Trainium device (``/dev/neuron*``), timing
comes from ``nki.benchmark``: ``ms (trainium, P50/P99)``, the only NKI tier whose numbers
are confirmed. Everything runs in child processes; the parent compares outputs itself.
Every child runs in the OS sandbox (:func:`autocomp.sandbox.run_limited`): an empty
environment, no network, a read-only view of Python (where the SDK is installed) and of the
oracle's inputs, its own work directory; on a Trainium host the ``/dev/neuron*`` devices and
a ``/proc`` of the child's own PID namespace (the Neuron runtime reads it). Candidates pass
the same NKI-subset allowlist as on the interpreter tier first.
The interface is tested with a named test double of the SDK (tests/nki).
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autocomp.backends.base import BackendError
from autocomp.scratch import ScratchRoot
from autocomp.backends.nki.harness import compare, _seq
from autocomp.backends.nki.portable import load_arrays, save_arrays
from autocomp.backends.nki.static import check_candidate
from autocomp.model import Evaluation, Metric, Problem, Verdict
from autocomp.sandbox import Isolation, python_view, run_limited

TRAINIUM_SOURCE = "trainium, P50/P99"


@dataclass
class NeuronStatus:
    new_api: str | None  # version of a working `nki` package
    old_api: str | None  # version of a working `neuronxcc.nki`
    device: bool

    @property
    def available(self) -> bool:
        return bool(self.new_api or self.old_api)


def has_device() -> bool:
    return bool(glob.glob("/dev/neuron[0-9]*"))


class NeuronTools:
    """Runs the SDK's simulate/benchmark in children. ``extra_path`` exists for the test double."""

    def __init__(self, python: str = sys.executable, timeout: float = 600.0, extra_path: list[str] | None = None,
                 device: bool | None = None, warmup: int = 5, iters: int = 20) -> None:
        self.python = python
        self.timeout = timeout
        self.extra_path = list(extra_path or [])
        self._device = device
        self.warmup = warmup
        self.iters = iters
        self._status: NeuronStatus | None = None
        self._oracles: dict[str, tuple[str, dict[str, str], dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]] = {}
        self._scratch = ScratchRoot(self, "autocomp-neuron-")  # the children's work folders

    @property
    def _root(self) -> str:
        return self._scratch.path

    def _isolation(self, readable: tuple[str, ...] = ()) -> Isolation:
        device = has_device() if self._device is None else self._device
        devices = tuple(sorted(glob.glob("/dev/neuron[0-9]*"))) if device else ()
        return Isolation(readable=python_view() + tuple(self.extra_path) + readable, proc=bool(devices), devices=devices)

    async def _child(self, action: str, extra: dict[str, Any], file_text: str = "") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        workdir = tempfile.mkdtemp(prefix=action + "-", dir=self._root)
        nonce = secrets.token_hex(16)
        req = {"action": action, "nonce": nonce, "result": os.path.join(workdir, f"r-{nonce}.json"),
               "arrays": os.path.join(workdir, f"a-{nonce}.npz"), "extra_path": self.extra_path,
               "warmup": self.warmup, "iters": self.iters, **extra}
        if file_text:
            req["file"] = os.path.join(workdir, "kernel.py")
            Path(req["file"]).write_text(file_text, encoding="utf-8")
        inputs = extra.get("inputs", {}).get("path")
        readable = (os.path.dirname(inputs),) if inputs else ()
        proc = await run_limited([self.python, "-m", "autocomp.backends.nki.neuron_child"], cwd=workdir,
                                 timeout=self.timeout, memory_bytes=None, stdin_data=json.dumps(req).encode(),
                                 isolation=self._isolation(readable))
        try:
            data = json.loads(Path(req["result"]).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {"status": "error", "message": f"Neuron child failed (exit {proc.returncode}, timed out {proc.timed_out}): {proc.tail(1500)}"}
        if data.get("nonce") not in (None, nonce):
            data = {"status": "error", "message": "nonce mismatch"}
        arrays = load_arrays(req["arrays"], data["dtypes"]) if data.get("status") == "ok" and data.get("dtypes") else {}
        shutil.rmtree(workdir, ignore_errors=True)
        return data, arrays

    async def status(self) -> NeuronStatus:
        if self._status is None:
            data, _ = await self._child("probe", {})
            sdk = data.get("sdk", {}) if data.get("status") == "ok" else {}
            device = has_device() if self._device is None else self._device
            self._status = NeuronStatus(sdk.get("new"), sdk.get("old"), device)
        return self._status

    async def _oracle(self, problem: Problem, seeds: tuple[int, ...]):
        key = problem.oracle_key()
        if key in self._oracles:
            return self._oracles[key]
        data, arrays = await self._child("inputs", {"function": problem.name, "seeds": list(seeds)}, problem.file_text)
        if data.get("status") != "ok":
            raise BackendError(f"{problem.path}: making inputs with the Neuron SDK failed: {data.get('message')}")
        folder = os.path.join(self._root, f"inputs-{key[:16]}")  # bound read-only into the children
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, "inputs.npz")
        dtypes = save_arrays(path, arrays)
        inputs = {s: _seq(arrays, f"s{s}_in") for s in seeds}
        data, outs = await self._child("simulate", {"function": problem.name, "seeds": list(seeds),
                                                    "inputs": {"path": path, "dtypes": dtypes}}, problem.file_text)
        if data.get("status") != "ok":
            raise BackendError(f"{problem.path}: the original kernel fails in nki.simulate: {data.get('message')}")
        result = (path, dtypes, inputs, {s: _seq(outs, f"s{s}_out") for s in seeds})
        self._oracles[key] = result
        return result

    async def evaluate(self, problem: Problem, code: str, seeds: tuple[int, ...] = (0, 1)) -> Evaluation:
        start = time.monotonic()
        issues = check_candidate(problem.file_with(code), problem.span.start_line, code, problem.name, problem.code,
                                 original_file=problem.file_text)
        if issues:
            verdict = Verdict.COMPILE_ERROR if any(i.kind == "syntax" for i in issues) else Verdict.REJECTED
            return Evaluation(verdict, feedback="\n".join(f"{problem.path}:{i.line}: {i.message}" for i in issues))
        status = await self.status()
        path, dtypes, _inputs, expected = await self._oracle(problem, seeds)
        text = problem.file_with(code)
        data, outs = await self._child("simulate", {"function": problem.name, "seeds": list(seeds),
                                                    "inputs": {"path": path, "dtypes": dtypes}}, text)
        tier = "neuron simulate" + (" + trainium" if status.device else "")
        if data.get("status") != "ok":
            return Evaluation(Verdict.RUNTIME_ERROR, feedback=f"nki.simulate: {data.get('message')}", tier=tier,
                              seconds=time.monotonic() - start)
        for s in seeds:
            got = _seq(outs, f"s{s}_out")
            if len(got) != len(expected[s]):
                return Evaluation(Verdict.INCORRECT, feedback="output count differs from the original", tier=tier)
            for i, (e, g) in enumerate(zip(expected[s], got)):
                msg = compare(e, g, f"seed {s}, output {i}")
                if msg:
                    return Evaluation(Verdict.INCORRECT, feedback=f"wrong result (nki.simulate): {msg}", tier=tier,
                                      seconds=time.monotonic() - start)
        if not status.device:
            return Evaluation(Verdict.CORRECT, feedback="correct under nki.simulate; no Trainium device here, so no timing",
                              tier=tier, confirmed=False, seconds=time.monotonic() - start)
        data, _ = await self._child("benchmark", {"function": problem.name, "seeds": [seeds[0]],
                                                  "inputs": {"path": path, "dtypes": dtypes}}, text)
        if data.get("status") != "ok" or "latency" not in data:
            return Evaluation(Verdict.RUNTIME_ERROR, feedback=f"nki.benchmark: {data.get('message')}", tier=tier)
        lat = data["latency"]
        metrics = {"ms": Metric(float(lat["p50_ms"]), "ms", TRAINIUM_SOURCE),
                   "ms_p99": Metric(float(lat["p99_ms"]), "ms", TRAINIUM_SOURCE)}
        return Evaluation(Verdict.CORRECT, metrics=metrics, tier=tier, confirmed=True,
                          feedback=f"Trainium latency: P50 {lat['p50_ms']:.4f} ms, P99 {lat['p99_ms']:.4f} ms (nki.benchmark)",
                          seconds=time.monotonic() - start)

    def close(self) -> None:
        self._scratch.close()
