"""ScriptedBackend — a backend TEST DOUBLE for the engine's and server's own tests.

Its "kernels" are blocks in ``.kern`` files::

    kernel scale {
      result = 42
      cost = 1000
    }

A candidate is correct when its ``result`` line matches the original's; its metric
(``cost units (scripted double)``) is the ``cost`` value. Lines ``syntax error``, ``crash``
and ``hang`` produce compile-error, runtime-error and timeout. Settings: ``latency``
(seconds per evaluation) and ``log`` (a file that gets one line per real evaluation, so
tests can prove nothing was evaluated twice). It detects nothing outside ``.kern`` files,
so it never appears for real code.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Sequence

from autocomp.backends.base import Backend, TierInfo, ToolCheck
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

    async def _one(self, problem: Problem, code: str) -> Evaluation:
        latency = float(self.settings.get("latency", 0.0))
        log = self.settings.get("log") or os.environ.get("AUTOCOMP_SCRIPTED_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(sha256(code)[:16] + "\n")
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
