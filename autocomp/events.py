"""Typed events the engine emits (DESIGN principle 1: the engine knows nothing of editors).

The CLI renders them as a progress display or JSON lines; the language server renders them
as progress, lenses, diagnostics and edits; the store keeps them so a run can be shown later.
Every event serializes to a JSON object with a ``type`` field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from autocomp.model import Candidate, Metric, Usage


@dataclass
class Event:
    type: ClassVar[str] = "event"
    run_id: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for key, value in self.__dict__.items():
            out[key] = _jsonable(value)
        return out


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass
class RunStarted(Event):
    type: ClassVar[str] = "run_started"
    path: str
    kernel: str
    target: str
    config: dict[str, Any]
    models: list[str]
    tier: str
    confirms: bool
    replay: bool  # every model is a recorded session: outputs must say so
    primary_metric: str
    resumed: bool = False
    # Schedule reuse: {"source": run, "plans": [...], "reason": why that run} or None.
    reuse: dict[str, Any] | None = None


@dataclass
class BaselineEvaluated(Event):
    type: ClassVar[str] = "baseline_evaluated"
    candidate: Candidate


@dataclass
class PlansProposed(Event):
    type: ClassVar[str] = "plans_proposed"
    iteration: int
    parent: str
    plans: list[str]
    models: list[str]


@dataclass
class CandidateEvaluated(Event):
    type: ClassVar[str] = "candidate_evaluated"
    iteration: int
    candidate: Candidate
    speedup: float | None  # versus the starting code, on the primary metric
    improves_parent: bool
    evaluated_total: int


@dataclass
class BeamEntry:
    id: str
    plan: str
    metric: Metric | None
    speedup: float | None
    iteration: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "plan": self.plan,
            "metric": self.metric.to_json() if self.metric else None,
            "speedup": self.speedup,
            "iteration": self.iteration,
        }


@dataclass
class BeamUpdated(Event):
    type: ClassVar[str] = "beam_updated"
    iteration: int
    beam: list[BeamEntry]


@dataclass
class IterationFinished(Event):
    type: ClassVar[str] = "iteration_finished"
    iteration: int
    iterations: int
    evaluated_total: int
    best_id: str
    best_speedup: float | None
    improved: bool


@dataclass
class Notice(Event):
    """Something the user should read that is not a failure of the run (a retry, a replay
    with no reply for a prompt, a budget nearly spent)."""

    type: ClassVar[str] = "notice"
    level: str  # "info" | "warning"
    message: str


@dataclass
class RunFinished(Event):
    type: ClassVar[str] = "run_finished"
    reason: str  # completed | early-stop | budget-calls | budget-tokens | budget-time | cancelled
    best: Candidate
    baseline: Candidate
    speedup: float | None
    primary_metric: str
    confirmed: bool  # the best's numbers come from a tier that may drive an automatic edit
    usage: dict[str, Usage] = field(default_factory=dict)
    evaluated_total: int = 0
    replay: bool = False
    # Schedule reuse: {"source", "plans", "reused", "kept"} or None (see autocomp.schedules).
    reuse: dict[str, Any] | None = None


@dataclass
class RunFailed(Event):
    type: ClassVar[str] = "run_failed"
    error: str
    best: Candidate | None = None
