"""Publishing a job's state to the client: ``autocomp/jobStatus``, work-done progress,
and the ``changed`` hooks (diagnostics) and a lens refresh.

Publishing is throttled so a burst of evaluated candidates costs the client one update,
not dozens. Every update carries one progress snapshot (``Job.status``), so the status
bar, the progress bar and the lens show the same counts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from autocomp.server import render
from autocomp.server.jobs.state import Job

if TYPE_CHECKING:
    from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

PUBLISH_INTERVAL = 0.25  # seconds between streamed updates during a burst of events


def changed(ls: "AutocompServer", job: Job) -> None:
    """Tell the client a job's state changed (no progress report): status, the features'
    ``changed`` hooks (diagnostics), lenses."""
    if ls.closing:
        return
    ls.notify_status(job.status())
    for hook in ls.jobs.hooks.changed:
        try:
            hook(job)
        except Exception:
            log.exception("a job hook failed")
    ls.refresh_lenses()


class Publisher:
    """Sends a job's state to the client: jobStatus, progress, diagnostics, lenses."""

    def __init__(self, ls: "AutocompServer", job: Job) -> None:
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
        status = job.status()  # the snapshot the progress report below shows too
        if job.progress_token is not None and job.active:
            ls.work_done_progress.report(
                job.progress_token,
                lsp.WorkDoneProgressReport(
                    message=render.progress_message(job), percentage=render.progress_percentage(job), cancellable=True
                ),
            )
        ls.notify_status(status)
        for hook in ls.jobs.hooks.changed:
            try:
                hook(job)
            except Exception:
                log.exception("a job hook failed")
        ls.refresh_lenses()

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


async def begin_progress(ls: "AutocompServer", job: Job) -> None:
    """Work-done progress where the client supports it; its cancel stops the job."""
    if not ls.supports_progress:
        return
    token = f"autocomp/{job.id}"
    try:
        await asyncio.wait_for(ls.work_done_progress.create_async(token), timeout=5.0)
    except Exception as exc:
        log.info("client refused work-done progress: %s", exc)
        return
    job.set_progress_token(token)
    ls.work_done_progress.begin(
        token,
        lsp.WorkDoneProgressBegin(title=f"Autocomp: {job.verb} {job.kernel}", cancellable=True, message="starting", percentage=0),
    )
    future = ls.work_done_progress.tokens.get(token)
    if future is not None:
        future.add_done_callback(lambda f: ls.jobs.stop(job) if f.cancelled() else None)


def end_progress(ls: "AutocompServer", job: Job) -> None:
    if job.progress_token is None or ls.closing:
        return
    token = job.take_progress_token()  # ended once, whichever path gets here first
    ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=render.status_line(job)))
    ls.work_done_progress.tokens.pop(token, None)
