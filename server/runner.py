"""Drive one optimization job: build the search, stream its events to the client, and
hand the finished run to the apply step.

Runs as the job's own asyncio task (see :mod:`autocomp.server.jobs`); the event loop stays
free because the engine awaits LLM calls and evaluator subprocesses. Publishing is
throttled so a burst of evaluated candidates costs the client one update, not dozens.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from typing import Any, Callable

from lsprotocol import types as lsp

from autocomp import events as ev
from autocomp.backends.base import Backend, BackendError
from autocomp.model import Problem
from autocomp.server import render
from autocomp.server.features import apply, diagnostics
from autocomp.server.jobs import CANCELLED, FAILED, Job
from autocomp.server.server import AutocompServer
from autocomp.server.worker import SearchWorker

log = logging.getLogger(__name__)

PUBLISH_INTERVAL = 0.25  # seconds between streamed updates during a burst of events


class Publisher:
    """Sends a job's state to the client: jobStatus, progress, diagnostics, lenses."""

    def __init__(self, ls: AutocompServer, job: Job) -> None:
        self.ls = ls
        self.job = job
        self._last = 0.0
        self._pending: asyncio.TimerHandle | None = None

    def publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < PUBLISH_INTERVAL:
            if self._pending is None:
                delay = PUBLISH_INTERVAL - (now - self._last)
                self._pending = asyncio.get_running_loop().call_later(delay, self._flush)
            return
        self._flush()

    def _flush(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._last = time.monotonic()
        ls, job = self.ls, self.job
        if ls.closing:
            return
        ls.notify_status(job.status())
        if job.progress_token is not None and job.active:
            ls.work_done_progress.report(
                job.progress_token,
                lsp.WorkDoneProgressReport(
                    message=render.progress_message(job), percentage=render.progress_percentage(job), cancellable=True
                ),
            )
        diagnostics.publish(ls, job.uri)
        ls.refresh_lenses()

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


async def begin_progress(ls: AutocompServer, job: Job) -> None:
    """Work-done progress where the client supports it; its cancel stops the job."""
    if not ls.supports_progress:
        return
    token = f"autocomp/{job.id}"
    try:
        await asyncio.wait_for(ls.work_done_progress.create_async(token), timeout=5.0)
    except Exception as exc:
        log.info("client refused work-done progress: %s", exc)
        return
    job.progress_token = token
    ls.work_done_progress.begin(
        token,
        lsp.WorkDoneProgressBegin(
            title=f"Autocomp: optimizing {job.kernel}", cancellable=True, message="starting", percentage=0
        ),
    )
    future = ls.work_done_progress.tokens.get(token)
    if future is not None:
        future.add_done_callback(lambda f: ls.jobs.stop(job) if f.cancelled() else None)


def end_progress(ls: AutocompServer, job: Job) -> None:
    token = job.progress_token
    if token is None or ls.closing:
        return
    job.progress_token = None  # ended once, whichever path gets here first
    ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=render.status_line(job)))
    ls.work_done_progress.tokens.pop(token, None)


def _search_factory(ls: AutocompServer, job: Job, problem: Problem, backend: Backend) -> Callable[[], Any]:
    """A function that sets up the job's run through the engine's front door
    (:func:`autocomp.run.start`); it runs on the job's worker thread, so the LLM SDK
    imports and client setup never stall the server's loop."""
    from autocomp.run import RunSpec, resolve_llms

    settings = ls.settings
    # Explicit models, else AUTOCOMP_LLM, else the recorded session next to the kernel, as
    # the CLI does; a RunSetupError with the fix otherwise.
    specs = resolve_llms(settings.llm, job.path)
    store = ls.store()
    spec = RunSpec(
        llm=specs,
        overrides=settings.search_overrides(),
        executor=settings.executor,
        seed_plans=list(job.seed_plans),
        reuse=None,
    )
    reuse = dict(job.reuse) if job.reuse else None

    def build() -> Any:
        from autocomp.run import start
        from autocomp.schedules import ReuseChoice

        spec.reuse = ReuseChoice.from_json(reuse) if reuse else None
        return start(problem, backend, spec, store, kernel_path=job.path)

    return build


async def run_job(ls: AutocompServer, job: Job, problem: Problem, backend: Backend) -> None:
    """The body of a job's task. Raises nothing but its own cancellation: a crashed job
    reports its error and the server lives on."""
    from autocomp.errors import UserError

    publisher = Publisher(ls, job)
    job.iterations = ls.settings.search.iterations
    try:
        ls.notify_status(job.status())
        worker = job.search = SearchWorker(_search_factory(ls, job, problem, backend), f"autocomp {job.id}")
        await begin_progress(ls, job)
        async for event in worker.events():
            render.apply_event(job, event)
            if isinstance(event, ev.BaselineEvaluated) and job.baseline is not None and job.baseline.metric is not None:
                ls.measurements[job.key] = job.baseline.metric  # the kernel's lens shows it from now on
            if isinstance(event, ev.RunFinished):
                publisher.publish(force=True)
                end_progress(ls, job)  # the progress bar closes before the edit and its message
                await apply.finish(ls, job, event)
            elif isinstance(event, ev.RunFailed):
                ls.show(f"Autocomp: optimizing {job.kernel} failed: {event.error}", lsp.MessageType.Error)
            elif isinstance(event, ev.Notice) and event.level == "warning":
                ls.report_once(f"Autocomp: {event.message}", lsp.MessageType.Warning)
            publisher.publish(force=not isinstance(event, (ev.CandidateEvaluated, ev.PlansProposed)))
        if job.active:  # the stream ended without a final event
            job.state = CANCELLED if job.search is not None and job.message == "cancelling" else FAILED
            job.message = job.message if job.state == CANCELLED else "the search ended without a result"
    except (UserError, BackendError) as exc:
        job.state, job.message = FAILED, str(exc)
        ls.report_once(f"Autocomp: {exc}", lsp.MessageType.Error)
    except asyncio.CancelledError:
        job.state, job.message = CANCELLED, "cancelled"
        if isinstance(job.search, SearchWorker):
            job.search.cancel()  # the worker's evaluations are killed with it
        raise
    except Exception as exc:  # a crashed job reports its error and leaves the server healthy
        log.error("job %s crashed:\n%s", job.id, traceback.format_exc())
        job.state, job.message = FAILED, f"{type(exc).__name__}: {exc}"
        ls.show(f"Autocomp: optimizing {job.kernel} failed: {job.message}", lsp.MessageType.Error)
    finally:
        publisher.close()
        end_progress(ls, job)
        try:
            publisher.publish(force=True)
        except Exception:  # the connection may be gone at shutdown
            log.debug("final publish failed", exc_info=True)
