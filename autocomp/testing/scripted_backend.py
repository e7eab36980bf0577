"""ScriptedBackend — a backend TEST DOUBLE for the engine's and server's own tests.

Its "kernels" are blocks in ``.kern`` files::

    kernel scale {
      result = 42
      cost = 1000
    }

A candidate is correct when its ``result`` line matches the original's; its metric
(``cost units (scripted double)``) is the ``cost`` value. Lines ``syntax error``, ``crash``
and ``hang`` produce compile-error, runtime-error and timeout. Settings: ``latency``
(seconds per evaluation), ``gate`` (a file every candidate evaluation waits for, so a test
controls when a job may go on) and ``log`` (a file that gets one line per real evaluation, so
tests can prove nothing was evaluated twice). It detects nothing outside ``.kern`` files,
so it never appears for real code.

It is not registered in production: tests opt in, in-process with
``autocomp.backends.register(TARGET)`` or, for a server or CLI subprocess, with
``AUTOCOMP_PLUGINS=autocomp.testing.scripted_backend`` (``tests/conftest.py`` does both).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Sequence

from autocomp.backends.base import Backend, EditorLanguage, TargetInfo, TierInfo, ToolCheck
from autocomp.model import Evaluation, KernelSpan, Metric, Problem, Verdict, sha256
from autocomp.prompts import PromptPieces

_KERNEL = re.compile(r"^kernel\s+(\w+)\s*\{\s*$")
_VALUE = re.compile(r"^\s*(result|cost)\s*=\s*(-?\d+(?:\.\d+)?)\s*$", re.MULTILINE)

PIECES = PromptPieces(
    target="scripted",
    description="A made-up machine for tests: lower `cost` is faster; `result` must not change.",
    menu=tuple(f"scripted option {i}: lower the cost by a trick numbered {i}" for i in range(1, 13)),
    rules="Keep `result` unchanged.",
    examples="(none)",
    language="kern",
    noun="kernel",
)


# The double's declaration (a test double: only used where a test names it).
TARGET = TargetInfo(
    name="scripted",
    backend="autocomp.testing.scripted_backend:ScriptedBackend",
    title="a made-up machine (the scripted test double)",
    label="scripted double",
    summary="`kernel NAME {` blocks in `.kern` files (a test double)",
    file_suffixes=(".kern",),
    languages=(EditorLanguage("kern", nvim=("kern",), emacs=("kern-mode",)),),
    fences={"kern": ("kern",)},
    settings={
        "gate": {"type": "string", "description": "A file: candidate evaluations wait until it exists (test double)."},
        "latency": {"type": "number", "description": "Seconds each evaluation takes (test double)."},
        "log": {"type": "string", "description": "A file that gets one line per real evaluation (test double)."},
        "confirms": {"type": "boolean", "description": "Whether the double's tier confirms speedups (test double)."},
    },
    detect_by_default=False,
    order=1000,
)


def parse_values(code: str) -> dict[str, float]:
    return {name: float(value) for name, value in _VALUE.findall(code)}


class ScriptedBackend(Backend):
    name = "scripted"
    file_suffixes = (".kern",)
    primary_metric = "cost"
    lower_is_better = True
    evaluator_version = "double-1"

    def detect(self, path: str, text: str) -> list[KernelSpan]:
        spans = []
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            match = _KERNEL.match(lines[i])
            if match:
                end = i + 1
                while end < len(lines) and lines[end].strip() != "}":
                    end += 1
                spans.append(KernelSpan(match.group(1), self.name, i, min(end + 1, len(lines))))
                i = end
            i += 1
        return spans

    def detection_hint(self) -> str:
        return "A scripted kernel is a `kernel NAME {` … `}` block in a .kern file."

    def prompt_pieces(self) -> PromptPieces:
        return PIECES

    def tier(self) -> TierInfo:
        confirms = self.settings.get("confirms", os.environ.get("AUTOCOMP_SCRIPTED_CONFIRMS", "1") != "0")
        return TierInfo("scripted double", confirms=bool(confirms), note="test double")

    def doctor(self) -> list[ToolCheck]:
        return [ToolCheck("scripted double", True, "built in (tests only)", required=False)]

    async def evaluate(self, problem: Problem, codes: Sequence[str]) -> list[Evaluation]:
        return list(await asyncio.gather(*(self._one(problem, code) for code in codes)))

    async def _gate(self, problem: Problem, code: str) -> None:
        """With the ``gate`` setting (a file path), a candidate's evaluation (any code but the
        original's) waits until that file exists: a test holds a job in mid-search, acts on
        it (cancel, edit, ...) with no race, then opens the gate. Cancelling the wait works."""
        gate = self.settings.get("gate") or os.environ.get("AUTOCOMP_SCRIPTED_GATE")
        if not gate or code.strip() == problem.code.strip():
            return
        while not os.path.exists(gate):
            await asyncio.sleep(0.05)

    async def _one(self, problem: Problem, code: str) -> Evaluation:
        latency = float(self.settings.get("latency", 0.0))
        log = self.settings.get("log") or os.environ.get("AUTOCOMP_SCRIPTED_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(sha256(code)[:16] + "\n")
        await self._gate(problem, code)
        if "hang" in code:
            await asyncio.sleep(min(latency * 10 or 0.2, 2.0))
            return Evaluation(Verdict.TIMEOUT, feedback="scripted double: the kernel hung past its limit", tier="scripted double")
        if latency:
            await asyncio.sleep(latency)
        if "syntax error" in code:
            return Evaluation(Verdict.COMPILE_ERROR, feedback="line 2: syntax error near 'syntax'", tier="scripted double")
        if "crash" in code:
            return Evaluation(Verdict.RUNTIME_ERROR, feedback="scripted double: the kernel crashed", tier="scripted double")
        mine, oracle = parse_values(code), parse_values(problem.code)
        if "cost" not in mine:
            return Evaluation(Verdict.COMPILE_ERROR, feedback="no `cost = N` line", tier="scripted double")
        metrics = {"cost": Metric(mine["cost"], "cost units", "scripted double")}
        confirms = self.tier().confirms
        if mine.get("result") != oracle.get("result"):
            return Evaluation(
                Verdict.INCORRECT,
                metrics,
                feedback=f"result {mine.get('result')} != expected {oracle.get('result')}",
                tier="scripted double",
                confirmed=confirms,
            )
        return Evaluation(Verdict.CORRECT, metrics, feedback="", tier="scripted double", confirmed=confirms)
