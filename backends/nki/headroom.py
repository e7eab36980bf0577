"""The headroom line of the NKI plan prompt: the engine-bound floor of a measured version.

Engines run in parallel, so a kernel cannot finish before its busiest engine has done its
work: the largest per-engine busy figure of the estimate (read from the evaluation's
per-engine report, see :meth:`autocomp.backends.nki.cost.Estimate.report`) is the floor for
this instruction mix. The gap between the estimate and that floor is waiting: latency and
dependencies that overlap could hide. Below the floor only less work (fewer or wider
instructions, work moved to an idle engine) gets.
"""

from __future__ import annotations

import re

from autocomp.model import Evaluation

_ENGINE_LINE = re.compile(r"^\s+(\w+)\s+(\d+) instr\s+([\d,]+) busy", re.M)


def headroom(evaluation: Evaluation) -> str:
    metric = evaluation.metrics.get("cycles")
    engines = [(name, float(busy.replace(",", ""))) for name, _, busy in _ENGINE_LINE.findall(evaluation.feedback)]
    if metric is None or not metric.value or not engines:
        return ""
    name, floor = max(engines, key=lambda e: e[1])
    if floor <= 0:
        return ""
    return (
        f"engine-bound floor {floor:,.0f} cycles ({name} busy time for this instruction mix; engines overlap, "
        f"so the kernel cannot finish sooner without less {name} work); this version takes "
        f"{metric.value / floor:.2f}x that floor, the rest being latency and dependencies that overlap could hide."
    )
