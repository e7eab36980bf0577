"""The job registry: one background search per kernel, and everything needed to stop it.

pygls cancels none of a server's own tasks (not on ``$/cancelRequest`` for the command
that started them, not on shutdown), so the registry owns every long-running task the
server starts: optimization searches and tune-on-save evaluations. Stopping a job asks the
engine to end cleanly first (``search.stop()``: in-flight LLM requests cancelled, evaluator
process groups killed, best-so-far kept); a job that does not end within a grace period is
cancelled outright, which also kills its children (``run_limited`` kills the process group
of any cancelled evaluation).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from autocomp.model import Candidate, Metric

log = logging.getLogger(__name__)

RUNNING = "running"
FINISHED = "finished"
CANCELLED = "cancelled"
FAILED = "failed"

_ids = itertools.count(1)


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
    """One optimization of one kernel in one document.

    ``original_code`` and ``start_line``/``end_line`` are the kernel as it was when the
    job started: the anchor for applying the result (the buffer is only edited where that
    exact text still is).
    """

    uri: str
    kernel: str
    target: str
    path: str
    original_code: str
    start_line: int
    end_line: int
    lower_is_better: bool = True
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
    # The one progress snapshot (render.progress) last published: jobStatus, $/progress
    # and the lens all show this, so they never disagree.
    progress: dict[str, Any] = field(default_factory=dict)
    superseded: bool = False  # restarted after an edit: its result must not be applied
    finish_reason: str = ""
    progress_token: str | None = None
    search: Any = None
    task: asyncio.Task[Any] | None = None
    seed_plans: list[str] = field(default_factory=list)
    reuse: dict[str, Any] | None = None  # a ReuseChoice as JSON: "Optimize like <kernel>"

    @property
    def key(self) -> tuple[str, str]:
        return (self.uri, self.kernel)

    @property
    def active(self) -> bool:
        return self.state == RUNNING

    def snapshot(self) -> dict[str, Any]:
        """The one progress model: iteration, evaluated count, best speedup, its text and
        percentage, taken now and kept as ``progress``. Every ``autocomp/jobStatus`` takes
        one; ``$/progress`` and the lens show the last one taken, so the status bar, the
        progress bar and the lens always show the same counts."""
        best = f"{self.best_speedup:.2f}x" if self.best_speedup else "—"
        total = self.iterations or 0
        text = f"iteration {self.iteration}/{total or '?'} · {self.evaluated} candidates · best {best}"
        self.progress = {
            "iteration": self.iteration,
            "iterations": self.iterations,
            "evaluated": self.evaluated,
            "bestSpeedup": self.best_speedup,
            "text": text,
            "percentage": max(0, min(100, int(100 * self.iteration / total))) if total else 0,
        }
        return self.progress

    def status(self) -> dict[str, Any]:
        """The ``JobStatus`` object of the protocol (docs/lsp-extensions.md), with a fresh
        progress snapshot (see :meth:`snapshot`)."""
        snap = self.snapshot()
        return {
            "jobId": self.id,
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

    def candidate(self, candidate_id: str) -> CandidateInfo | None:
        if self.baseline is not None and self.baseline.candidate.id == candidate_id:
            return self.baseline
        return self.candidates.get(candidate_id)

    def ranked(self) -> list[CandidateInfo]:
        """Correct candidates, fastest first (the beam when known, else all)."""
        pool = [self.candidates[i] for i in self.beam if i in self.candidates] or list(self.candidates.values())
        good = [c for c in pool if c.candidate.verdict.correct is not False and c.speedup is not None]
        return sorted(good, key=lambda c: c.speedup or 0.0, reverse=True)


class JobRegistry:
    """Every job and background task of the server; at most one running job per kernel."""

    def __init__(self, history: int = 50, stop_grace: float = 3.0) -> None:
        self.stop_grace = stop_grace
        self.jobs: dict[str, Job] = {}
        self._aux: set[asyncio.Task[Any]] = set()
        self._history = history

    # -- lookup ------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def running(self, uri: str | None = None, kernel: str | None = None) -> list[Job]:
        return [
            j
            for j in self.jobs.values()
            if j.active and (uri is None or j.uri == uri) and (kernel is None or j.kernel == kernel)
        ]

    def latest(self, uri: str, kernel: str) -> Job | None:
        """The newest job on this kernel, running or not."""
        for job in reversed(list(self.jobs.values())):
            if job.uri == uri and job.kernel == kernel:
                return job
        return None

    def for_uri(self, uri: str) -> list[Job]:
        return [j for j in self.jobs.values() if j.uri == uri]

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, job: Job, body: Callable[[Job], Awaitable[None]]) -> Job:
        """Run ``body(job)`` as the job's own task; the registry keeps it referenced."""
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(body(job), name=f"autocomp {job.id}")
        job.task.add_done_callback(lambda _t: self._trim())
        return job

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        """A tracked auxiliary task (tune-on-save evaluation): ended with the server."""
        task = asyncio.get_running_loop().create_task(coro, name=name)  # type: ignore[arg-type]
        self._aux.add(task)
        task.add_done_callback(self._aux.discard)
        return task

    def stop(self, job: Job) -> bool:
        """Ask a running job to end; True when it was running.

        The engine's ``stop()`` ends the run cleanly with the best so far; if the job is
        still running ``stop_grace`` seconds later (an LLM request that ignores
        cancellation, say), its task is cancelled outright, which ends the search and
        kills its evaluator processes. Candidates seen so far stay offered either way.
        """
        if not job.active:
            return False
        job.message = "cancelling"
        search = job.search
        if search is not None:
            try:
                search.stop()
            except Exception:
                log.exception("search.stop() failed for %s; cancelling its task", job.id)
                if job.task is not None:
                    job.task.cancel()
        elif job.task is not None:
            job.task.cancel()
        task = job.task
        if task is not None and not task.done():
            asyncio.get_running_loop().call_later(self.stop_grace, self._force_stop, job)
        return True

    def _force_stop(self, job: Job) -> None:
        if job.task is not None and not job.task.done():
            log.warning("%s did not stop within %.0f s of search.stop(); cancelling its task", job.id, self.stop_grace)
            job.task.cancel()

    async def wait(self, job: Job, grace: float = 5.0) -> None:
        """Wait for a stopped job to end; cancel its task if it does not in ``grace`` s."""
        task = job.task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=grace)

    async def shutdown(self, grace: float = 3.0) -> None:
        """End every job and auxiliary task (and so every child process)."""
        for job in list(self.jobs.values()):
            self.stop(job)
        tasks = [j.task for j in self.jobs.values() if j.task is not None and not j.task.done()]
        tasks += [t for t in self._aux if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=grace)

    def _trim(self) -> None:
        """Forget the oldest finished jobs beyond the history limit."""
        finished = [j for j in self.jobs.values() if not j.active]
        for job in finished[: max(0, len(finished) - self._history)]:
            self.jobs.pop(job.id, None)
