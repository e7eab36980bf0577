"""A job's state and its one writer.

A :class:`Job` is one background run (an optimization search, or a tuning of a kernel's
constants) on one kernel of one document. Everything the server knows about it lives here,
and only the methods below change it: the runner folds engine events in
(:meth:`Job.fold`), the registry marks it stopping, the apply feature records what it put in
the buffer (:meth:`Job.record_apply`, :meth:`Job.un_apply`). Every other module only reads
a job (features render it; ``tests/server/test_layers.py`` checks that no module outside
this one assigns a job's fields).

``original_code`` and ``start_line``/``end_line`` are the kernel as it was when the job
started: the anchor for applying the result (the buffer is only edited where that exact
text still is, see :mod:`autocomp.anchor`).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from autocomp import events as ev
from autocomp.model import Candidate, Metric

RUNNING = "running"
FINISHED = "finished"
CANCELLED = "cancelled"
FAILED = "failed"

OPTIMIZE = "optimize"
TUNE = "tune"

_ids = itertools.count(1)


def primary(candidate: Candidate, name: str) -> Metric | None:
    """The candidate's primary metric (the first metric when the name is unknown)."""
    metrics = candidate.metrics
    if name and name in metrics:
        return metrics[name]
    return next(iter(metrics.values()), None)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


@dataclass
class CandidateInfo:
    """What the server remembers about one evaluated candidate of a job."""

    candidate: Candidate
    speedup: float | None
    metric: Metric | None

    def to_json(self) -> dict[str, Any]:
        c = self.candidate
        return {
            "id": c.id,
            "parent": c.parent,
            "iteration": c.iteration,
            "plan": c.plan_summary(),
            "verdict": c.verdict.value,
            "metric": self.metric.to_json() if self.metric else None,
            "speedup": self.speedup,
        }


@dataclass
class Job:
    """One run on one kernel in one document (see the module docstring)."""

    uri: str
    kernel: str
    target: str
    path: str
    original_code: str
    start_line: int
    end_line: int
    lower_is_better: bool = True
    kind: str = OPTIMIZE
    id: str = field(default_factory=lambda: f"job-{next(_ids)}")
    state: str = RUNNING
    iteration: int = 0
    iterations: int = 0
    evaluated: int = 0
    best_speedup: float | None = None
    best_candidate_id: str | None = None
    primary_metric: str = ""
    message: str = "starting"
    replay: bool = False
    confirmed: bool = False
    tier: str = ""
    baseline: CandidateInfo | None = None
    candidates: dict[str, CandidateInfo] = field(default_factory=dict)
    beam: list[str] = field(default_factory=list)
    best_per_iteration: list[float] = field(default_factory=list)
    applied: bool = False
    # After an apply: the candidate now in the buffer, and the text it replaced (what
    # Revert writes back, and what an undo brings back: then the job offers it again).
    applied_candidate_id: str | None = None
    pre_apply_code: str = ""
    # The one progress snapshot last published: jobStatus, $/progress and the lens all
    # show this, so they never disagree.
    progress: dict[str, Any] = field(default_factory=dict)
    superseded: bool = False  # restarted after an edit: its result must not be applied
    finish_reason: str = ""
    progress_token: str | None = None
    search: Any = None
    task: asyncio.Task[Any] | None = None
    seed_plans: list[str] = field(default_factory=list)
    reuse: dict[str, Any] | None = None  # a ReuseChoice as JSON: "Optimize like <kernel>"
    options: dict[str, Any] = field(default_factory=dict)  # a tuning's budget/strategy/seed, kept for a restart

    # -- reading -----------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, str]:
        return (self.uri, self.kernel)

    @property
    def active(self) -> bool:
        return self.state == RUNNING

    @property
    def verb(self) -> str:
        """What the job does, for messages: "optimizing" or "tuning"."""
        return "tuning the constants of" if self.kind == TUNE else "optimizing"

    def candidate(self, candidate_id: str) -> CandidateInfo | None:
        if self.baseline is not None and self.baseline.candidate.id == candidate_id:
            return self.baseline
        return self.candidates.get(candidate_id)

    def ranked(self) -> list[CandidateInfo]:
        """Correct candidates, fastest first (the beam when known, else all)."""
        pool = [self.candidates[i] for i in self.beam if i in self.candidates] or list(self.candidates.values())
        good = [c for c in pool if c.candidate.verdict.correct is not False and c.speedup is not None]
        return sorted(good, key=lambda c: c.speedup or 0.0, reverse=True)

    def snapshot(self) -> dict[str, Any]:
        """The one progress model: iteration, evaluated count, best speedup, its text and
        percentage, taken now and kept as ``progress``. Every ``autocomp/jobStatus`` takes
        one; ``$/progress`` and the lens show the last one taken, so the status bar, the
        progress bar and the lens always show the same counts."""
        best = f"{self.best_speedup:.2f}x" if self.best_speedup else "—"
        total = self.iterations or 0
        if self.kind == TUNE:  # one "iteration" per configuration tried
            text = f"tuning: {self.evaluated}/{total or '?'} configurations · best {best}"
            percentage = max(0, min(100, int(100 * self.evaluated / total))) if total else 0
        else:
            text = f"iteration {self.iteration}/{total or '?'} · {self.evaluated} candidates · best {best}"
            percentage = max(0, min(100, int(100 * self.iteration / total))) if total else 0
        self.progress = {
            "iteration": self.iteration,
            "iterations": self.iterations,
            "evaluated": self.evaluated,
            "bestSpeedup": self.best_speedup,
            "text": text,
            "percentage": percentage,
        }
        return self.progress

    def status(self) -> dict[str, Any]:
        """The ``JobStatus`` object of the protocol (docs/lsp-extensions.md), with a fresh
        progress snapshot (see :meth:`snapshot`)."""
        snap = self.snapshot()
        return {
            "jobId": self.id,
            "kind": self.kind,
            "uri": self.uri,
            "kernel": self.kernel,
            "target": self.target,
            "state": self.state,
            "iteration": snap["iteration"],
            "iterations": snap["iterations"],
            "evaluated": snap["evaluated"],
            "bestSpeedup": snap["bestSpeedup"],
            "bestCandidateId": self.best_candidate_id,
            "primaryMetric": self.primary_metric,
            "message": self.message,
            "replay": self.replay,
            "confirmed": self.confirmed,
            "progress": snap["text"],
            "applied": self.applied,
        }

    # -- the runner --------------------------------------------------------------------
    def attach(self, *, task: asyncio.Task[Any] | None = None, search: Any = None) -> None:
        if task is not None:
            self.task = task
        if search is not None:
            self.search = search

    def begin(self, iterations: int, primary_metric: str = "") -> None:
        self.iterations = iterations
        if primary_metric:
            self.primary_metric = primary_metric

    def anchor_on(self, code: str, start: int, end: int) -> None:
        """The kernel exactly as the problem was built from the job's text (the request's
        detection of a big document may be a shifted guess)."""
        if not self.applied:
            self.original_code, self.start_line, self.end_line = code, start, end

    def set_progress_token(self, token: str | None) -> None:
        self.progress_token = token

    def take_progress_token(self) -> str | None:
        """The progress token, cleared: a progress ends once, whichever path gets there first."""
        token, self.progress_token = self.progress_token, None
        return token

    def say(self, message: str) -> None:
        self.message = message

    def fail(self, message: str) -> None:
        self.state, self.message = FAILED, message

    def cancelled(self) -> None:
        self.state, self.message = CANCELLED, "cancelled"

    def stream_ended(self) -> None:
        """The event stream ended without a final event."""
        if not self.active:
            return
        if self.search is not None and self.message == "cancelling":
            self.state = CANCELLED
        else:
            self.fail("the search ended without a result")

    def fold(self, event: Any) -> None:
        """Fold one engine event into the job's state."""
        if isinstance(event, ev.RunStarted):
            self.iterations = int(event.config.get("iterations", self.iterations) or self.iterations)
            self.primary_metric = event.primary_metric
            self.replay = bool(event.replay)
            self.confirmed = bool(event.confirms)
            self.tier = event.tier
            self.message = "measuring the starting kernel"
        elif isinstance(event, ev.BaselineEvaluated):
            c = event.candidate
            self.baseline = CandidateInfo(c, 1.0 if c.verdict.correct else None, primary(c, self.primary_metric))
            metric = self.baseline.metric
            self.message = f"starting kernel: {metric.display()}" if metric else f"starting kernel: {c.verdict.value}"
        elif isinstance(event, ev.PlansProposed):
            self.iteration = max(self.iteration, event.iteration)
            self.message = f"iteration {event.iteration}: {len(event.plans)} plans proposed"
        elif isinstance(event, ev.CandidateEvaluated):
            c = event.candidate
            self.candidates[c.id] = CandidateInfo(c, event.speedup, primary(c, self.primary_metric))
            self.evaluated = max(self.evaluated, event.evaluated_total)
            self.iteration = max(self.iteration, event.iteration)
            if c.verdict.correct and event.speedup is not None and event.speedup > (self.best_speedup or 0.0):
                self.best_speedup = event.speedup
                self.best_candidate_id = c.id
            self.message = f"evaluated {c.plan_summary()[:60]}: {c.verdict.value}"
        elif isinstance(event, ev.BeamUpdated):
            self.beam = [entry.id for entry in event.beam]
        elif isinstance(event, ev.IterationFinished):
            self.iteration = event.iteration
            self.iterations = event.iterations
            self.evaluated = max(self.evaluated, event.evaluated_total)
            if event.best_speedup is not None and event.best_speedup >= (self.best_speedup or 0.0):
                self.best_speedup = event.best_speedup
                self.best_candidate_id = event.best_id
            self.best_per_iteration.append(float(event.best_speedup or 1.0))
        elif isinstance(event, ev.Notice):
            self.message = event.message
        elif isinstance(event, ev.RunFinished):
            self.state = CANCELLED if event.reason == "cancelled" else FINISHED
            self.finish_reason = event.reason
            self.confirmed = bool(event.confirmed)
            self.replay = bool(event.replay) or self.replay
            self.evaluated = max(self.evaluated, event.evaluated_total)
            best = event.best
            if best is not None and best.id != event.baseline.id:
                info = self.candidates.get(best.id)
                if info is None:
                    info = CandidateInfo(best, event.speedup, primary(best, self.primary_metric))
                    self.candidates[best.id] = info
                self.best_candidate_id = best.id
                self.best_speedup = event.speedup
            if self.baseline is None:
                b = event.baseline
                self.baseline = CandidateInfo(b, 1.0, primary(b, self.primary_metric))
            self.message = f"{event.reason}: best {_fmt(self.best_speedup)}"
        elif isinstance(event, ev.RunFailed):
            self.fail(event.error)

    # -- the registry ------------------------------------------------------------------
    def stopping(self) -> None:
        self.message = "cancelling"

    def supersede(self) -> None:
        """Restarted after an edit: its result must not be applied."""
        self.superseded = True

    # -- the apply feature -------------------------------------------------------------
    def record_apply(self, start: int, written: str, replaced: str, candidate_id: str) -> None:
        """A candidate now stands at line ``start`` (``written``, where ``replaced`` was):
        the job re-anchors on it, so a later apply of another candidate replaces this one,
        and Revert/undo can be recognised. Revert still goes to the kernel before the
        first apply."""
        if not self.applied:
            self.pre_apply_code = replaced
        self.original_code = written
        self.start_line = start
        self.end_line = start + len(written.splitlines(keepends=True))
        self.applied_candidate_id = candidate_id
        self.applied = True

    def un_apply(self, at: int, restored: str | None = None) -> None:
        """The text an apply replaced stands at line ``at`` again (an undo, or a Revert
        that wrote ``restored``): the job offers its candidate again."""
        code = restored if restored is not None else self.pre_apply_code
        self.applied = False
        self.original_code = code
        self.start_line = at
        self.end_line = at + len(code.splitlines(keepends=True))
        self.pre_apply_code = ""
        self.applied_candidate_id = None
