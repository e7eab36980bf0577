"""The NKI target: detects ``@nki.jit`` kernels, evaluates candidates.

Tiers, chosen per machine (``settings["tier"]`` = ``auto`` | ``interpreter`` | ``neuron``):

- ``nki interpreter`` (default here): Autocomp's NumPy interpreter with NeuronCore
  constraint checks; speed is ``cycles (nki estimate)`` from the analytic cost model.
  Never confirmed: the editor must not auto-apply on an estimate.
- ``neuron simulate [+ trainium]``: when a working Neuron SDK imports, correctness via
  ``nki.simulate``; on a Trainium host timing via ``nki.benchmark`` as
  ``ms (trainium, P50/P99)``, which is confirmed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from typing import Any, Sequence

from autocomp.backends.base import Backend, BackendError, TierInfo, ToolCheck, sources_digest
from autocomp.backends.nki.detect import find_kernels
from autocomp.backends.nki.harness import DEFAULT_SEEDS, SEED_BUDGET, Harness
from autocomp.model import Evaluation, KernelSpan, Problem


def _sdk_importable(style: str) -> str | None:
    """Version of a working SDK for this API family, checked without importing our interpreter."""
    from autocomp.backends.nki.interp.install import real_sdk

    try:
        return real_sdk(style)
    except Exception:
        return None


class NkiBackend(Backend):
    name = "nki"
    file_suffixes = (".py",)
    primary_metric = "cycles"
    lower_is_better = True
    evaluator_version = "nki-interp-4"

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        seeds = self.settings.get("seeds", DEFAULT_SEEDS)
        self.harness = Harness(
            seeds=tuple(int(s) for s in seeds),
            timeout=float(self.settings.get("timeout", 60.0)),
            memory_bytes=int(float(self.settings.get("memory_mb", 3072)) * 1024 * 1024),
            concurrency=int(self.settings.get("concurrency", 0)) or _slots(),
            reorder=bool(self.settings.get("check_reorder", True)),
            reorder_proof=bool(self.settings.get("reorder_proof", True)),
            public_seeds=bool(self.settings.get("public_seeds", False)),
            seed_budget=float(self.settings.get("seed_budget", SEED_BUDGET)),
        )
        self._neuron = None
        self._real: str | None = None  # version of a working Neuron SDK ("" when none), probed once
        mode = str(self.settings.get("tier", "auto"))
        if mode not in ("auto", "interpreter", "neuron"):
            raise BackendError(f"autocomp.target.nki.tier must be auto, interpreter or neuron, not {mode!r}")
        self.mode = mode
        if self._use_neuron():
            from autocomp.backends.nki.neuron import has_device

            if has_device():
                self.primary_metric = "ms"  # the Trainium tier measures milliseconds

    def _use_neuron(self) -> bool:
        if self.mode == "interpreter":
            return False
        if self._real is None:
            self._real = _sdk_importable("new") or _sdk_importable("old") or ""
        real = self._real
        if self.mode == "neuron" and not real:
            raise BackendError("tier=neuron needs the AWS Neuron SDK (nki / neuronxcc) installed; "
                               "see https://awsdocs-neuron.readthedocs-hosted.com — or use tier=interpreter")
        return bool(real)

    # -- detection -------------------------------------------------------------------
    def detect(self, path: str, text: str) -> list[KernelSpan]:
        try:
            return find_kernels(text, self.name)
        except Exception:
            return []

    def detection_hint(self) -> str:
        return ("An NKI kernel is a Python function decorated with @nki.jit (import nki / neuronxcc.nki as nki) "
                "or @nki_jit; its file should define get_inputs() returning example input arrays.")

    # -- evaluation ------------------------------------------------------------------
    async def evaluate(self, problem: Problem, codes: Sequence[str]) -> list[Evaluation]:
        if self._use_neuron():
            tools = self._neuron_tools()
            return list(await asyncio.gather(*(tools.evaluate(problem, c) for c in codes)))
        # The original runs once, however many candidates wait for it; a candidate may start
        # on its first input set while it runs (Harness.early_start).
        return list(await asyncio.gather(*(self.harness.evaluate(problem, c) for c in codes)))

    def _neuron_tools(self):
        if self._neuron is None:
            from autocomp.backends.nki.neuron import NeuronTools

            self._neuron = NeuronTools()
        return self._neuron

    def headroom(self, problem: Problem, evaluation: Evaluation) -> str:
        """The engine-bound floor of the estimate (see :mod:`.headroom`)."""
        from autocomp.backends.nki.headroom import headroom

        return headroom(evaluation)

    def tier(self) -> TierInfo:
        if self._use_neuron():
            from autocomp.backends.nki.neuron import has_device

            if has_device():
                return TierInfo("neuron simulate + trainium", confirms=True,
                                note="correctness from nki.simulate, timing from nki.benchmark on this Trainium host")
            return TierInfo("neuron simulate", confirms=False,
                            note="AWS nki.simulate checks correctness; no Trainium device here, so no timing")
        return TierInfo("nki interpreter", confirms=False,
                        note="Autocomp's NumPy interpreter of NKI with constraint checks; speed is an analytic "
                             "estimate (cycles, nki estimate), never a measurement")

    def doctor(self) -> list[ToolCheck]:
        checks: list[ToolCheck] = []
        for mod, pip in (("numpy", "numpy"), ("ml_dtypes", "ml_dtypes")):
            spec = importlib.util.find_spec(mod)
            if spec is None:
                checks.append(ToolCheck(mod, False, f"pip install {pip}"))
            else:
                version = getattr(__import__(mod), "__version__", "installed")
                checks.append(ToolCheck(mod, True, f"{version} (needed by the NKI interpreter)"))
        new, old = _sdk_importable("new"), _sdk_importable("old")
        checks.append(ToolCheck("AWS Neuron SDK (nki)", bool(new), new or
                                "not installed (PyPI's `nki` is a placeholder); the interpreter tier is used", required=False))
        checks.append(ToolCheck("AWS Neuron SDK (neuronxcc)", bool(old), old or
                                "not installed; the interpreter tier is used", required=False))
        from autocomp.backends.nki.neuron import has_device

        dev = has_device()
        checks.append(ToolCheck("Trainium device", dev, "/dev/neuron* present" if dev else
                                "none: speed is the cycles (nki estimate) model, not a measurement", required=False))
        t = self.tier()
        checks.append(ToolCheck("active tier", True, f"{t.name}: {t.note}", required=False))
        return checks

    def cache_identity(self) -> str:
        """Settings, the cost model's parameters, the tier, and a digest of the interpreter's
        and cost model's sources: a changed model never serves estimates cached by the old
        one (a scheduling change leaves the parameters as they were)."""
        from autocomp.backends.nki.cost import PARAMS

        digest = sources_digest(os.path.dirname(os.path.abspath(__file__)), ("", "interp", "params"))
        return f"{super().cache_identity()}:{sorted(PARAMS.items())!r}:{self.tier().name}:{digest}"


def _slots() -> int:
    from autocomp.sandbox import cpu_slots

    return cpu_slots()
