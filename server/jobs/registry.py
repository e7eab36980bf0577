"""The job registry: one background run per kernel, and everything needed to stop it.

pygls cancels none of a server's own tasks (not on ``$/cancelRequest`` for the command
that started them, not on shutdown), so the registry owns every long-running task the
server starts: searches, tunings and tune-on-save evaluations. Stopping a job asks the
engine to end cleanly first (``search.stop()``: in-flight LLM requests cancelled, evaluator
process groups killed, best-so-far kept); a job that does not end within a grace period is
cancelled outright, which also kills its children (``run_limited`` kills the process group
of any cancelled evaluation).

The registry also carries the hooks through which the features above hear about jobs
(:class:`JobHooks`): the jobs layer never imports a feature.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from autocomp.server.jobs.state import Job

log = logging.getLogger(__name__)


@dataclass
class JobHooks:
    """What features subscribe to: ``changed(job)`` after a job's state was published
    (diagnostics), ``finished(job, event)`` when a run ends with a result (the apply
    feature decides what it does to the buffer). Hooks are called in order; ``finished``
    hooks are awaited."""

    changed: list[Callable[[Job], None]] = field(default_factory=list)
    finished: list[Callable[[Job, Any], Awaitable[None]]] = field(default_factory=list)


class JobRegistry:
    """Every job and background task of the server; at most one running job per kernel."""

    def __init__(self, history: int = 50, stop_grace: float = 3.0) -> None:
        self.stop_grace = stop_grace
        self.jobs: dict[str, Job] = {}
        self.hooks = JobHooks()
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

    def current(self, uri: str, kernel: str) -> Job | None:
        """The running job on this kernel that has not been superseded by a restart."""
        return next((j for j in self.running(uri, kernel) if not j.superseded), None)

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
        task = asyncio.get_running_loop().create_task(body(job), name=f"autocomp {job.id}")  # type: ignore[arg-type]
        job.attach(task=task)
        task.add_done_callback(lambda _t: self._trim())
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
        job.stopping()
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
